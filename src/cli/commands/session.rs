//! `trove session`: manage sessions: periods of work on a workspace directory.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use trove::{
    ChangePolicy, EndReason, Error, FileAccess, Repo, SessionId, SessionSpec, Source, WorkspaceView, FILES_READ_LIMIT,
};

use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start a session on a directory
    Create {
        /// The workspace's live directory (created if missing)
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Workspace name [default: the session id]
        #[arg(long)]
        workspace: Option<String>,
        /// Do not end after 5 minutes idle (the ttl still applies; idle expiry runs in `trove serve`)
        #[arg(long)]
        persistent: bool,
        /// Hard lifetime in seconds [default: 14400]
        #[arg(long)]
        ttl: Option<u64>,
        /// Readable path prefix (repeatable); with neither --read nor --write, the whole workspace
        #[arg(long, value_name = "PATH")]
        read: Vec<String>,
        /// Writable path prefix (repeatable; write implies read)
        #[arg(long, value_name = "PATH")]
        write: Vec<String>,
        /// Free-form JSON object
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
    },
    /// List sessions
    List {
        /// Ended sessions too
        #[arg(long)]
        all: bool,
    },
    /// Show one session
    Show { id: SessionId },
    /// End a session: final snapshot, nothing deleted
    End { id: SessionId },
    /// Snapshot a session and stop serving its live tree
    Pause { id: SessionId },
    /// Serve a paused session's live tree again
    Resume { id: SessionId },
    /// List a session's files (live tree, else its latest snapshot)
    Files {
        id: SessionId,
        /// `live`, `latest` or a snapshot id
        #[arg(long)]
        source: Option<String>,
    },
    /// What a session changed: its start against its end (or its live tree), with the audit
    /// records of each path and the trash ids of what it deleted
    Changes {
        id: SessionId,
        #[command(flatten)]
        shape: super::diff::Shape,
    },
    /// Print one file of a session
    Cat {
        id: SessionId,
        path: String,
        #[arg(long)]
        source: Option<String>,
    },
}

/// A session as a line, or its record; `node`: the fleet's node that holds it.
fn show(out: &mut Out, s: &trove::Session, node: Option<&str>, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(out, &trove::SessionRecord { node: node.map(str::to_owned), ..s.record(false) });
    }
    writeln!(
        out,
        "{}  {:<7} workspace '{}' at {}{}{}",
        s.id,
        s.status.as_str(),
        s.workspace,
        s.live_dir.display(),
        node.map(|n| format!(" on node {n}")).unwrap_or_default(),
        s.final_snapshot.as_ref().map(|f| format!("  final snapshot {}", trove::short_id(f))).unwrap_or_default()
    )?;
    Ok(())
}

/// `trove session ...`
pub fn run(out: &mut Out, repo: &Repo, cmd: Command, json: bool) -> Result<(), Failure> {
    match cmd {
        Command::Create { dir, workspace, persistent, ttl, read, write, metadata } => {
            let metadata = match metadata {
                Some(m) => serde_json::from_str(&m)
                    .map_err(|e| Error::invalid_argument(format!("--metadata is not a JSON object: {e}")))?,
                None => Default::default(),
            };
            // No flag: the whole workspace; any flag: exactly what the flags list.
            let file_access =
                if read.is_empty() && write.is_empty() { FileAccess::default() } else { FileAccess { read, write } };
            let spec = SessionSpec { persistent, ttl, metadata, file_access, workspace, ..SessionSpec::default() };
            let s = repo.create_session(
                &spec,
                |_| {
                    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
                    Ok(dir.clone())
                },
                &actor(),
            )?;
            show(out, &s, repo.node(), json)
        }
        Command::List { all } => {
            let others = repo.fleet()?;
            let mut list = Vec::new();
            for (node, r) in crate::cli::output::with_fleet(repo, &others) {
                list.extend(r.sessions(all)?.into_iter().map(|s| (node, s)));
            }
            list.sort_by_key(|(_, s)| s.created_ns);
            if json {
                let records: Vec<_> = list
                    .iter()
                    .map(|(node, s)| trove::SessionRecord { node: node.map(str::to_owned), ..s.record(false) })
                    .collect();
                return print_json(out, &records);
            }
            list.iter().try_for_each(|(node, s)| {
                if let (Some(node), false) = (node, others.is_empty()) {
                    write!(out, "{node}  ")?;
                }
                show(out, s, None, false)
            })
        }
        Command::Show { id } => {
            let (there, s) = repo.find_in_fleet(|r| r.session(&id), |s| s.created_ns, None)?;
            show(out, &s, there.as_ref().map_or(repo, |v| &v.repo).node(), json)
        }
        Command::End { id } => show(out, &repo.end_session(&id, EndReason::Deleted, &actor())?, repo.node(), json),
        Command::Pause { id } => show(out, &repo.pause_session(&id, &actor())?, repo.node(), json),
        Command::Resume { id } => show(out, &repo.resume_session(&id, &actor())?, repo.node(), json),
        Command::Files { id, source } => {
            let there = repo.find_in_fleet(|r| r.session(&id), |s| s.created_ns, None)?.0;
            files(out, there.as_ref().map_or(repo, |v| &v.repo), &id, source.as_deref(), json)
        }
        Command::Changes { id, shape } => {
            let there = repo.find_in_fleet(|r| r.session(&id), |s| s.created_ns, None)?.0;
            changes(out, there.as_ref().map_or(repo, |v| &v.repo), &id, &shape, json)
        }
        Command::Cat { id, path, source } => {
            let (there, s) = repo.find_in_fleet(|r| r.session(&id), |s| s.created_ns, None)?;
            let repo = there.as_ref().map_or(repo, |v| &v.repo);
            let scope = s.scope()?;
            let ex = repo.effective_excludes(&s.workspace, &trove::SnapshotOptions::default())?;
            let view = WorkspaceView::of_session(&s, &ex, &scope);
            let want = Source::parse(source.as_deref().unwrap_or(""));
            let (read, _) =
                repo.read_file_from(&view, &want, path.as_bytes(), FILES_READ_LIMIT * 64, ChangePolicy::Retry)?;
            out.write_all(&read.bytes)?;
            Ok(())
        }
    }
}

/// `trove session files`: the Files API's listing, as a table or as its JSON.
fn files(out: &mut Out, repo: &Repo, id: &SessionId, source: Option<&str>, json: bool) -> Result<(), Failure> {
    let s = repo.session(id)?;
    let scope = s.scope()?;
    let ex = repo.effective_excludes(&s.workspace, &trove::SnapshotOptions::default())?;
    let view = WorkspaceView::of_session(&s, &ex, &scope);
    let (files, origin) = repo.list_files(&view, &Source::parse(source.unwrap_or("")))?;
    if json {
        return print_json(out, &trove::FileListing::of(&files, &origin));
    }
    for f in &files {
        writeln!(out, "{:>10}  {}", f.size, trove::path::display(&f.path))?;
    }
    let from = origin.snapshot_id().map_or("the live tree", |id| id.as_str());
    writeln!(out, "{} files from {from}", files.len())?;
    Ok(())
}

/// `trove session changes`: the diff, then per path who touched it and how to get it back.
fn changes(out: &mut Out, repo: &Repo, id: &SessionId, shape: &super::diff::Shape, json: bool) -> Result<(), Failure> {
    let s = repo.session(id)?;
    // Within the session's scope, as `GET /v1/sessions/{id}/changes` answers: what the session
    // could change, the same from either surface.
    let report = repo.session_changes(&s, &shape.options(s.scope()?)?)?;
    if json {
        return print_json(out, &report);
    }
    let entries: Vec<trove::DiffEntry> = report.entries.iter().map(|e| e.change.clone()).collect();
    super::diff::print_entries(out, &entries, &report.stats, report.truncated, shape)?;
    if shape.name_status || shape.patch {
        return Ok(());
    }
    for e in &report.entries {
        if e.records.is_empty() && e.trash.is_empty() {
            continue;
        }
        writeln!(out, "{}:", e.change.path)?;
        for r in &e.records {
            writeln!(out, "    seq {}  {}  {}  {}  {}", r.seq, r.time, r.actor, r.operation, r.outcome)?;
        }
        for t in &e.trash {
            writeln!(out, "    in the trash as {} (`trove trash restore {}`)", t.id, t.id)?;
        }
    }
    Ok(())
}
