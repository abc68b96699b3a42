//! `trove snapshot`: Snapshot a directory into the repository.

use std::io::Write;
use std::path::{Path, PathBuf};

use trove::{SnapshotInfo, SnapshotOptions};

use crate::cli::bar;
use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove snapshot`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workspace directory [default: the current directory]
    pub dir: Option<PathBuf>,
    /// Workspace name [default: the directory's name]
    #[arg(long)]
    pub workspace: Option<String>,
    /// Exclude entries matching this pattern as well (repeatable)
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// For this call, drop the workspace's exclusion list (defaults included); only
    /// --exclude patterns apply
    #[arg(long)]
    pub no_default_excludes: bool,
    /// Why this snapshot is taken (recorded)
    #[arg(long, default_value = "manual")]
    pub reason: String,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { dir, workspace, exclude, no_default_excludes, reason } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    let bar = bar::Bar::new();
    let opts = SnapshotOptions {
        workspace,
        reason,
        actor: actor(),
        replace_excludes: no_default_excludes.then(Vec::new),
        extra_excludes: exclude,
        progress: &bar,
        ..SnapshotOptions::default()
    };
    let snap = repo.snapshot(&dir, &opts)?;
    report_snapshot(out, &snap, json)?;
    Ok(0)
}

pub(crate) fn report_snapshot(out: &mut Out, snap: &SnapshotInfo, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(out, &snap.record());
    }
    let c = &snap.counts;
    writeln!(
        out,
        "snapshot {} of workspace '{}': {} files, {} directories, {} symlinks, {} (added {}, changed {}, removed {})",
        trove::short_id(&snap.id),
        snap.workspace,
        c.files,
        c.dirs,
        c.symlinks,
        format::size(c.bytes),
        c.added,
        c.changed,
        c.removed
    )?;
    if c.skipped > 0 {
        writeln!(out, "skipped {} sockets, FIFOs or devices", c.skipped)?;
    }
    for w in &snap.warnings {
        writeln!(out, "warning: {}: {}", w.path, w.message)?;
    }
    Ok(())
}
