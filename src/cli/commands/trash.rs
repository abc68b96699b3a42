//! `trove trash`: what was deleted, newest first, filtered and paged; one item with a
//! directory's members; restoring items (by id, path or prefix), purging and expiring them,
//! and exporting them as a tar archive.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand};
use trove::{
    EntryKind, Error, OnConflict, PurgeReason, Repo, RestoreRequest, RestoredFilter, Restorer, SessionId, TrashFilter,
    TrashId, TrashSelection, TrashSet,
};

use crate::cli::commands::export::{refuse_terminal, to_file, wants_zstd};
use crate::cli::format::{self, time_arg};
use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List trash items, newest first: id, when, kind, size, path, who and why
    Ls {
        #[command(flatten)]
        filter: Filter,
        /// At most N items; the output ends with the cursor of the next page
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Start after the item a previous page ended with (its `next: ...` line)
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Show one trash item, with a directory's members
    Show { id: TrashId },
    /// Bring items back: by id, the newest deletion of a path, or every path under a prefix
    Restore(RestoreArgs),
    /// Delete items from the trash for good (their contents stay until garbage collection)
    Purge(PurgeArgs),
    /// Purge what each workspace's retention expires (age, then byte quota)
    Expire {
        /// Only this workspace
        #[arg(long)]
        workspace: Option<String>,
        /// List what would go; purge nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Write items as a tar archive: by id, or every item the filters select
    Export {
        /// The items (leave out to take the filters' selection)
        ids: Vec<TrashId>,
        #[command(flatten)]
        filter: Filter,
        /// Output file [default: stdout]; a name ending in .zst or .tzst implies --zstd
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Compress with zstd
        #[arg(long)]
        zstd: bool,
    },
}

/// The filters `ls` and `export` share.
#[derive(ClapArgs, Debug)]
pub struct Filter {
    /// Only this workspace's items
    #[arg(long)]
    workspace: Option<String>,
    /// Only items this session deleted
    #[arg(long)]
    session: Option<SessionId>,
    /// Only items at this path or below it
    #[arg(long)]
    prefix: Option<String>,
    /// Only items deleted at or after T: RFC 3339 (2026-11-24T10:00:00Z) or an age (7d, 2h)
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only items deleted before T: RFC 3339 or an age
    #[arg(long, value_name = "T")]
    until: Option<String>,
    /// Only files, or only directories
    #[arg(long, value_parser = ["file", "dir"])]
    kind: Option<String>,
    /// Only items restored since (they stay listed, and can be restored again)
    #[arg(long, conflicts_with = "all")]
    restored: bool,
    /// Items in the trash and restored ones
    #[arg(long)]
    all: bool,
}

/// The arguments of `trove trash restore`.
#[derive(ClapArgs, Debug)]
pub struct RestoreArgs {
    /// The items, by id (any version of a path)
    #[arg(conflicts_with_all = ["path", "prefix"])]
    ids: Vec<TrashId>,
    /// The newest deletion of this path (with --before, the newest before a time)
    #[arg(long, conflicts_with = "prefix")]
    path: Option<String>,
    /// With --path: the newest deletion before T (RFC 3339 or an age)
    #[arg(long, value_name = "T", requires = "path")]
    before: Option<String>,
    /// Every path at or below this one, each its newest deletion
    #[arg(long)]
    prefix: Option<String>,
    /// The workspace of --path or --prefix
    #[arg(long)]
    workspace: Option<String>,
    /// Another workspace-relative path: the item's new path, or what --prefix becomes
    #[arg(long)]
    to: Option<String>,
    /// When the target is taken: fail, rename (`name (restored).ext`), overwrite (a file, with
    /// --expected-sha256), merge (a directory into a directory)
    #[arg(long, value_enum, default_value = "fail")]
    on_conflict: Conflict,
    /// The sha256 of the file --on-conflict overwrite replaces
    #[arg(long)]
    expected_sha256: Option<String>,
    /// Copy the items (by id, on any node of a fleet) into this directory of this host, each at
    /// its workspace-relative path, instead of into their workspace; they stay in the trash
    #[arg(long, value_name = "DIR", conflicts_with_all = ["path", "prefix", "to", "workspace", "on_conflict", "expected_sha256"])]
    into: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Conflict {
    Fail,
    Rename,
    Overwrite,
    Merge,
}

/// The arguments of `trove trash purge`.
#[derive(ClapArgs, Debug)]
pub struct PurgeArgs {
    /// The items, by id
    #[arg(conflicts_with_all = ["older_than", "prefix", "all"])]
    ids: Vec<TrashId>,
    /// Items deleted longer ago than D (30d, 12h)
    #[arg(long, value_name = "D")]
    older_than: Option<String>,
    /// Items at this path or below it
    #[arg(long)]
    prefix: Option<String>,
    /// Every item of --workspace
    #[arg(long, requires = "workspace")]
    all: bool,
    /// Only this workspace's items
    #[arg(long)]
    workspace: Option<String>,
    /// List what would go; purge nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(out: &mut Out, repo: &Repo, cmd: Command, json: bool) -> Result<u8, Failure> {
    match cmd {
        Command::Ls { filter, limit, cursor } => {
            let filter =
                TrashFilter { limit, after: cursor.as_deref().map(str::parse).transpose()?, ..filter.build()? };
            ls(out, repo, &filter, json).map(|()| 0)
        }
        Command::Show { id } => show(out, repo, &id, json).map(|()| 0),
        Command::Restore(args) => restore(out, repo, args, json),
        Command::Purge(args) => purge(out, repo, args, json).map(|()| 0),
        Command::Expire { workspace, dry_run } => {
            let items = repo.expired_trash(workspace.as_deref())?;
            let report = repo.purge_trash(&items, dry_run, &actor())?;
            print_purge(out, &report, json).map(|()| 0)
        }
        Command::Export { ids, filter, output, zstd } => {
            let set = if ids.is_empty() { TrashSet::Filter(filter.build()?) } else { TrashSet::Ids(ids) };
            export(out, repo, &set, output, zstd, json).map(|()| 0)
        }
    }
}

impl Filter {
    fn build(self) -> Result<TrashFilter, Error> {
        let now = trove::now_ns();
        Ok(TrashFilter {
            workspace: self.workspace,
            session: self.session,
            prefix: trove::path::from_text(self.prefix.as_deref().unwrap_or(""))?,
            since_ns: self.since.as_deref().map(|t| time_arg("--since", t, now)).transpose()?,
            until_ns: self.until.as_deref().map(|t| time_arg("--until", t, now)).transpose()?,
            kind: self.kind.as_deref().and_then(EntryKind::parse),
            restored: if self.all {
                RestoredFilter::All
            } else if self.restored {
                RestoredFilter::Yes
            } else {
                RestoredFilter::No
            },
            limit: 0,
            after: None,
        })
    }
}

/// `trove trash ls`: a table, or the page as JSON.
fn ls(out: &mut Out, repo: &Repo, filter: &TrashFilter, json: bool) -> Result<(), Failure> {
    let others = repo.fleet()?;
    if !others.is_empty() {
        return ls_fleet(out, repo, &others, filter, json);
    }
    let page = repo.trash_page(filter, |_| true)?;
    if json {
        return print_json(out, &page);
    }
    for t in &page.items {
        item_line(out, t)?;
    }
    match &page.next_cursor {
        Some(c) => writeln!(out, "next: --cursor {c}")?,
        None if page.items.is_empty() => writeln!(out, "the trash holds nothing that matches")?,
        None => {}
    }
    Ok(())
}

/// `trove trash ls` in a fleet: every node's items, newest first, up to the limit.
fn ls_fleet(
    out: &mut Out,
    repo: &Repo,
    others: &[trove::NodeView],
    filter: &TrashFilter,
    json: bool,
) -> Result<(), Failure> {
    let page = trove::fleet_trash_page(&crate::cli::output::with_fleet(repo, others), filter)?;
    if json {
        return print_json(out, &page);
    }
    for t in &page.items {
        write!(out, "{}  ", t.node.as_deref().unwrap_or("-"))?;
        item_line(out, t)?;
    }
    if page.items.is_empty() {
        writeln!(out, "the trash holds nothing that matches")?;
    }
    Ok(())
}

/// One line of `trove trash ls`.
fn item_line(out: &mut Out, t: &trove::TrashRecord) -> Result<(), Failure> {
    {
        let size = match t.files {
            Some(n) => format!("{} in {n} files", format::size(t.size)),
            None => format::size(t.size),
        };
        let state = if t.restored { "  (restored)" } else { "" };
        writeln!(
            out,
            "{}  {}  {:<4}  {:>18}  {}  by {} ({}){state}",
            t.id,
            t.deleted_at,
            t.kind.as_str(),
            size,
            t.path,
            t.deleted_by,
            t.reason
        )?;
    }
    Ok(())
}

/// `trove trash show ID`: the item and, for a directory, every member.
fn show(out: &mut Out, repo: &Repo, id: &TrashId, json: bool) -> Result<(), Failure> {
    let (there, item) = repo.find_in_fleet(|r| r.trash_item(id), |t| t.deleted_ns, None)?;
    let members: Vec<_> = item.entries.iter().map(trove::TrashEntry::record).collect();
    // In a fleet, the node whose log holds it.
    let node = there.as_ref().map_or(repo, |v| &v.repo).node().map(str::to_owned);
    let record = trove::TrashRecord { node, ..item.record() };
    if json {
        return print_json(out, &Shown { item: record, members });
    }
    writeln!(out, "{}  {} {} ({})", record.id, record.kind.as_str(), record.path, format::size(record.size))?;
    writeln!(
        out,
        "deleted {} by {} ({}) in workspace {}{}",
        record.deleted_at,
        record.deleted_by,
        record.reason,
        record.workspace,
        record.node.as_ref().map(|n| format!(" on node {n}")).unwrap_or_default()
    )?;
    if let Some(sha) = record.sha256 {
        writeln!(out, "sha256 {sha}")?;
    }
    if let Some(at) = &record.restored_at {
        writeln!(out, "restored {at}")?;
    }
    for m in &members {
        let target = m.target.as_deref().map(|t| format!(" -> {t}")).unwrap_or_default();
        writeln!(out, "  {:<7} {:>10}  {}{target}", m.kind.as_str(), m.size, m.path)?;
    }
    Ok(())
}

/// `trove trash show --json`: the item and a directory's members.
#[derive(serde::Serialize)]
struct Shown {
    #[serde(flatten)]
    item: trove::TrashRecord,
    members: Vec<trove::TrashMember>,
}

/// `trove trash restore`: every item's outcome; exit 1 when any was refused.
fn restore(out: &mut Out, repo: &Repo, args: RestoreArgs, json: bool) -> Result<u8, Failure> {
    let RestoreArgs { ids, path, before, prefix, workspace, to, on_conflict, expected_sha256, into } = args;
    if let Some(dir) = into {
        return copy_out(out, repo, &ids, &dir, json);
    }
    let selection = match (path, prefix) {
        (Some(p), _) => TrashSelection::Path {
            path: trove::path::from_text(&p)?,
            before_ns: before.as_deref().map(|t| time_arg("--before", t, trove::now_ns())).transpose()?,
        },
        (None, Some(p)) => TrashSelection::Prefix(trove::path::from_text(&p)?),
        (None, None) if ids.is_empty() => {
            return Err(Error::invalid_argument("name the items: ids, --path P or --prefix P").into())
        }
        (None, None) => TrashSelection::Ids(ids),
    };
    let on_conflict = match on_conflict {
        Conflict::Fail => OnConflict::Fail,
        Conflict::Rename => OnConflict::Rename,
        Conflict::Overwrite => OnConflict::Overwrite,
        Conflict::Merge => OnConflict::Merge,
    };
    let req = RestoreRequest { workspace, selection, to, on_conflict, expected_sha256 };
    let actor = actor();
    let live_dir = |w: &str| repo.workspace_dir(w);
    let who = Restorer::Operator { actor: &actor, live_dir: &live_dir };
    // In a fleet, each item named by id is restored from whichever node holds it.
    let others = match &req.selection {
        TrashSelection::Ids(ids) => others_for(repo, ids)?,
        _ => Vec::new(),
    };
    let mut done = trove::restore_trash_in_fleet(&crate::cli::output::with_fleet(repo, &others), &req, &who)?;
    for e in done.items.iter_mut().filter_map(|o| o.error.as_mut()) {
        e.message = crate::cli::output::in_flags(&e.message);
    }
    if json {
        print_json(out, &done)?;
    } else {
        for o in &done.items {
            let from = o.path.as_deref().unwrap_or("?");
            match (&o.restored, &o.error) {
                (Some(r), _) => {
                    writeln!(out, "restored {}  {from} -> {}", o.trash_id, r.path)?;
                    if !r.made_parents.is_empty() {
                        writeln!(out, "  made parent directories {}", r.made_parents.join(", "))?;
                    }
                    for c in &r.collisions {
                        writeln!(out, "  left out {c}: something is there")?;
                    }
                }
                (None, Some(e)) => writeln!(out, "refused  {}  {from}: {}", o.trash_id, e.message)?,
                (None, None) => {}
            }
        }
        match (done.restored, done.failed) {
            (0, 0) => writeln!(out, "nothing in the trash matches")?,
            (r, f) => writeln!(out, "{r} restored, {f} refused")?,
        }
    }
    Ok(if done.failed > 0 { 1 } else { 0 })
}

/// The fleet's other nodes, opened only when one of `ids` is not in this node's trash (none
/// outside a fleet): a command on this node's items does not wait on, or fail for, the others.
fn others_for(repo: &Repo, ids: &[TrashId]) -> Result<Vec<trove::NodeView>, Failure> {
    for id in ids {
        match repo.trash_item(id) {
            Ok(_) => {}
            Err(e) if e.kind() == trove::ErrorKind::NotFound => return Ok(repo.fleet()?),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Vec::new())
}

/// The items `ids` name, each found on whichever node of a fleet holds it (every one must be),
/// grouped by node: each node's handle and its items, this node's first.
fn by_node<'r>(
    repo: &'r Repo,
    others: &'r [trove::NodeView],
    ids: &[TrashId],
) -> Result<Vec<(&'r Repo, Vec<trove::TrashItem>)>, Failure> {
    let views = crate::cli::output::with_fleet(repo, others);
    let groups = trove::trash_by_node(&views, ids)?.found()?;
    Ok(groups.into_iter().map(|(i, items)| (views[i].1, items)).collect())
}

/// `trove trash restore ID... --into DIR`: each node's items copied out by its handle.
fn copy_out(out: &mut Out, repo: &Repo, ids: &[TrashId], dir: &std::path::Path, json: bool) -> Result<u8, Failure> {
    if ids.is_empty() {
        return Err(Error::invalid_argument("--into copies items named by id: give their ids").into());
    }
    let actor = actor();
    let mut copied = Vec::new();
    let others = others_for(repo, ids)?;
    let groups = by_node(repo, &others, ids)?;
    // Every node's items checked together first: refused whole, or all copied.
    trove::check_copy_targets(&groups.iter().flat_map(|(_, items)| items).collect::<Vec<_>>(), dir)?;
    for (holder, items) in &groups {
        copied.extend(holder.copy_trash_out(items, dir, &actor)?);
    }
    if json {
        print_json(out, &copied)?;
    } else {
        for c in &copied {
            let node = c.node.as_ref().map(|n| format!(" (node {n})")).unwrap_or_default();
            writeln!(out, "copied {}  {} -> {}{node}", c.trash_id, c.path, c.to)?;
        }
    }
    Ok(0)
}

/// `trove trash purge`.
fn purge(out: &mut Out, repo: &Repo, args: PurgeArgs, json: bool) -> Result<(), Failure> {
    let PurgeArgs { ids, older_than, prefix, all, workspace, dry_run } = args;
    let others = others_for(repo, &ids)?;
    if !others.is_empty() {
        // In a fleet, each item is purged on whichever node holds it.
        let mut report = trove::PurgeReport { dry_run, purged: 0, bytes: 0, items: Vec::new() };
        for (holder, items) in by_node(repo, &others, &ids)? {
            let items: Vec<_> = items.into_iter().map(|t| (t, PurgeReason::Operator)).collect();
            let done = holder.purge_trash(&items, dry_run, &actor())?;
            report.purged += done.purged;
            report.bytes = report.bytes.saturating_add(done.bytes);
            report.items.extend(done.items);
        }
        return print_purge(out, &report, json);
    }
    let set = if !ids.is_empty() {
        TrashSet::Ids(ids)
    } else {
        if older_than.is_none() && prefix.is_none() && !all {
            return Err(Error::invalid_argument(
                "name what to purge: ids, --older-than D, --prefix P, or --all --workspace W",
            )
            .into());
        }
        let until_ns = older_than
            .as_deref()
            .map(|d| {
                humantime::parse_duration(d)
                    .map(|age| trove::now_ns().saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX)))
                    .map_err(|_| Error::invalid_argument(format!("--older-than '{d}' is not a duration (30d, 12h)")))
            })
            .transpose()?;
        let prefix = trove::path::from_text(prefix.as_deref().unwrap_or(""))?;
        if prefix.is_empty() && older_than.is_none() && !all {
            return Err(Error::invalid_argument(
                "--prefix names the workspace's root: purge everything with --all --workspace W",
            )
            .into());
        }
        TrashSet::Filter(TrashFilter {
            workspace,
            prefix,
            until_ns,
            restored: RestoredFilter::All,
            ..Default::default()
        })
    };
    // The items are listed first and exactly those are purged: one deleted meanwhile stays.
    let items: Vec<_> = repo.trash_set(&set)?.into_iter().map(|t| (t, PurgeReason::Operator)).collect();
    let report = repo.purge_trash(&items, dry_run, &actor())?;
    print_purge(out, &report, json)
}

fn print_purge(out: &mut Out, report: &trove::PurgeReport, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(out, report);
    }
    let verb = if report.dry_run { "would purge" } else { "purged" };
    for p in &report.items {
        writeln!(out, "{verb} {}  {}  {} ({})", p.id, p.path, format::size(p.size), p.reason)?;
    }
    writeln!(out, "{verb} {} items, {}", report.purged, format::size(report.bytes))?;
    Ok(())
}

/// `trove trash export`.
fn export(
    out: &mut Out,
    repo: &Repo,
    set: &TrashSet,
    output: Option<PathBuf>,
    zstd: bool,
    json: bool,
) -> Result<(), Failure> {
    // In a fleet, items named by id are read on whichever node holds each.
    let others = match set {
        TrashSet::Ids(ids) => others_for(repo, ids)?,
        _ => Vec::new(),
    };
    let groups = match set {
        TrashSet::Ids(ids) if !others.is_empty() => by_node(repo, &others, ids)?,
        _ => vec![(repo, repo.trash_set(set)?)],
    };
    let parts: Vec<(&Repo, &[trove::TrashItem])> = groups.iter().map(|(r, items)| (*r, &items[..])).collect();
    let count: usize = groups.iter().map(|(_, items)| items.len()).sum();
    let level = wants_zstd(zstd, output.as_deref()).then_some(3);
    let bar = crate::cli::bar::Bar::new();
    match &output {
        Some(file) => {
            let entries = to_file(file, |w| trove::export_trash_of(&parts, w, level, &bar))?;
            if json {
                print_json(out, &Exported { items: count, output: file, entries, zstd: level.is_some() })?;
            } else {
                writeln!(out, "wrote {count} items ({entries} entries) to {}", file.display())?;
            }
        }
        None => {
            refuse_terminal()?;
            trove::export_trash_of(&parts, out, level, &bar)?;
        }
    }
    Ok(())
}

/// What `trove trash export --json -o FILE` prints.
#[derive(serde::Serialize)]
struct Exported<'a> {
    items: usize,
    output: &'a std::path::Path,
    entries: u64,
    zstd: bool,
}
