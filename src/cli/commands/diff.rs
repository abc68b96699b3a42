//! `trove diff`: what changed between two snapshots, or a snapshot and the live tree; the
//! printers of a diff (git's `--stat` and `--name-status`, patches) that `trove session
//! changes` shares.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use trove::{ChangeStatus, DiffEntry, DiffOptions, DiffStats, DiffTarget, Scope, DEFAULT_RENAME_THRESHOLD};

use crate::cli::output::{print_json, Failure, Out};

/// How a diff is printed, and what it computes for that.
#[derive(clap::Args, Debug, Clone)]
pub struct Shape {
    /// Only these paths (files or directories; repeatable)
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<OsString>,
    /// git's `--stat`: each path with its lines changed, and the totals
    #[arg(long, conflicts_with_all = ["name_status", "patch"])]
    pub stat: bool,
    /// git's `--name-status`: a status letter and the path(s), tab-separated
    #[arg(long, conflicts_with = "patch")]
    pub name_status: bool,
    /// The unified diff of each text file
    #[arg(short = 'p', long)]
    pub patch: bool,
    /// Lines of context in a patch
    #[arg(short = 'U', long, value_name = "N", default_value_t = 3)]
    pub unified: usize,
    /// Similarity (percent) from which a deleted and an added text file are a rename
    #[arg(short = 'M', long, value_name = "PERCENT", default_value_t = DEFAULT_RENAME_THRESHOLD,
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub find_renames: u8,
    /// No rename detection: a rename is a deletion and an addition
    #[arg(long)]
    pub no_renames: bool,
    /// At most this many entries (the totals count every change)
    #[arg(long)]
    pub limit: Option<usize>,
}

impl Shape {
    /// The options a diff takes to print this way.
    pub fn options(&self, scope: Scope) -> Result<DiffOptions, Failure> {
        let mut paths = Vec::with_capacity(self.paths.len());
        for p in &self.paths {
            paths.push(trove::path::components(p.as_bytes())?.join(&b'/'));
        }
        Ok(DiffOptions {
            paths,
            scope,
            renames: (!self.no_renames).then_some(self.find_renames),
            lines: !self.name_status,
            patch: self.patch,
            context: self.unified,
            limit: self.limit,
        })
    }
}

/// The arguments of `trove diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The old side: a snapshot (`latest`, an id or prefix), a session id, `live` or `empty`
    pub from: String,
    /// The new side, as FROM [default: live]
    pub to: Option<String>,
    /// The workspace snapshot references and `live` are of
    #[arg(long)]
    pub workspace: Option<String>,
    /// The live directory `live` reads [default: the workspace's last snapshotted directory]
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub shape: Shape,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (ws, dir) = (args.workspace.as_deref(), args.dir.as_deref());
    // In a fleet, the node holding the first snapshot (both are read from it).
    let unique = trove::unique_snapshot(&args.from).map(|_| target_id as fn(&DiffTarget) -> String);
    let (there, from) = repo.find_in_fleet(|r| r.diff_target(&args.from, ws, dir), target_time, unique)?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
    let to = repo.diff_target(args.to.as_deref().unwrap_or("live"), ws, dir)?;
    let report = repo.diff(&from, &to, &args.shape.options(Scope::whole())?)?;
    if json {
        print_json(out, &report)?;
    } else {
        print_entries(out, &report.entries, &report.stats, report.truncated, &args.shape)?;
        for w in &report.warnings {
            writeln!(out, "warning: {}: {}", w.path, w.message)?;
        }
    }
    Ok(0)
}

/// When a side of a diff was taken (0 for one that is not a snapshot): the newest wins across
/// a fleet's nodes.
fn target_time(t: &DiffTarget) -> i64 {
    match t {
        DiffTarget::Snapshot(s) => s.created_ns,
        _ => 0,
    }
}

/// What names a side of a diff, for telling two nodes' matches of a prefix apart.
fn target_id(t: &DiffTarget) -> String {
    match t {
        DiffTarget::Snapshot(s) => s.id.to_string(),
        other => format!("{other:?}"),
    }
}

fn lines_of(e: &DiffEntry) -> String {
    match (e.lines_added, e.lines_removed) {
        (Some(a), Some(r)) => format!("+{a} -{r}"),
        _ if e.binary => "binary".into(),
        _ => String::new(),
    }
}

/// Prints `entries` as `shape` asks: the default listing, `--stat`, `--name-status` or patches.
pub fn print_entries(
    out: &mut Out,
    entries: &[DiffEntry],
    stats: &DiffStats,
    truncated: bool,
    shape: &Shape,
) -> Result<(), Failure> {
    if shape.name_status {
        for e in entries {
            match (&e.old_path, e.status) {
                (Some(old), ChangeStatus::Renamed) => {
                    writeln!(out, "R{:03}\t{old}\t{}", e.similarity.unwrap_or(100), e.path)?
                }
                _ => writeln!(out, "{}\t{}", e.status.letter(), e.path)?,
            }
        }
    } else if shape.stat {
        print_stat(out, entries)?;
    } else if shape.patch {
        for e in entries {
            if let Some(p) = &e.patch {
                out.write_all(p.as_bytes())?;
            }
        }
    } else {
        for e in entries {
            let shown = match &e.old_path {
                Some(old) => format!("{old} -> {} ({}%)", e.path, e.similarity.unwrap_or(100)),
                None => e.path.clone(),
            };
            let status = match e.status {
                ChangeStatus::ModeChanged => "mode".to_string(),
                ChangeStatus::TypeChanged => "type".to_string(),
                s => s.letter().to_string(),
            };
            writeln!(out, "{status:<5} {shown}  {}", lines_of(e))?;
        }
    }
    if !shape.name_status && !shape.patch {
        writeln!(
            out,
            "{} changed: {} added, {} modified, {} deleted, {} renamed, {} type, {} mode; +{} -{} lines",
            stats.changed,
            stats.added,
            stats.modified,
            stats.deleted,
            stats.renamed,
            stats.type_changed,
            stats.mode_changed,
            stats.lines_added,
            stats.lines_removed
        )?;
    }
    if truncated {
        writeln!(out, "(more changes than --limit; the totals count them all)")?;
    }
    Ok(())
}

/// git's `--stat`: ` path | 12 +++---` per entry, then the totals line.
fn print_stat(out: &mut Out, entries: &[DiffEntry]) -> Result<(), Failure> {
    const BAR: u64 = 40;
    let name = |e: &DiffEntry| match &e.old_path {
        Some(old) => format!("{old} => {}", e.path),
        None => e.path.clone(),
    };
    let width = entries.iter().map(|e| name(e).chars().count()).max().unwrap_or(0);
    let most = entries.iter().map(|e| e.lines_added.unwrap_or(0) + e.lines_removed.unwrap_or(0)).max().unwrap_or(0);
    let (mut ins, mut del) = (0u64, 0u64);
    for e in entries {
        let n = name(e);
        if e.binary {
            let size = |v: &Option<trove::Version>| v.as_ref().map_or(0, |v| v.size);
            writeln!(out, " {n:<width$} | Bin {} -> {} bytes", size(&e.old), size(&e.new))?;
            continue;
        }
        let (a, r) = (e.lines_added.unwrap_or(0), e.lines_removed.unwrap_or(0));
        ins += a;
        del += r;
        let scale = |x: u64| if most > BAR { (x * BAR).div_ceil(most) } else { x };
        writeln!(
            out,
            " {n:<width$} | {:>5} {}{}",
            a + r,
            "+".repeat(scale(a) as usize),
            "-".repeat(scale(r) as usize)
        )?;
    }
    let plural = |n: usize, one: &str, many: &str| if n == 1 { one.to_string() } else { many.to_string() };
    writeln!(
        out,
        " {} {} changed, {ins} {}(+), {del} {}(-)",
        entries.len(),
        plural(entries.len(), "file", "files"),
        plural(ins as usize, "insertion", "insertions"),
        plural(del as usize, "deletion", "deletions")
    )?;
    Ok(())
}
