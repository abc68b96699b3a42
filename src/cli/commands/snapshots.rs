//! `trove snapshots`: List snapshots, oldest first.

use std::io::Write;
use std::path::Path;

use trove::SnapshotInfo;

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove snapshots`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this workspace's
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { workspace } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let list = repo.snapshots(workspace.as_deref())?;
    if json {
        print_json(out, &list.iter().map(trove::SnapshotInfo::record).collect::<Vec<_>>())?;
    } else {
        snapshot_table(out, &list)?;
    }
    Ok(0)
}

pub(crate) fn snapshot_table(out: &mut Out, list: &[SnapshotInfo]) -> Result<(), Failure> {
    writeln!(
        out,
        "{:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}  {:>8}",
        "ID", "TIME", "WORKSPACE", "REASON", "FILES", "SIZE", "WARNINGS"
    )?;
    for s in list {
        writeln!(
            out,
            "{:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}  {:>8}",
            trove::short_id(&s.id),
            format::time(s.created_ns),
            s.workspace,
            s.reason,
            s.counts.files,
            format::size(s.counts.bytes),
            s.warnings.len()
        )?;
    }
    writeln!(out, "{} snapshots", list.len())?;
    Ok(())
}
