//! `trove snapshots`: List snapshots, oldest first.

use std::io::Write;
use std::path::Path;

use trove::SnapshotInfo;

use crate::cli::format;
use crate::cli::output::{print_json, with_fleet, Failure, Out};

/// The arguments of `trove snapshots`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this workspace's
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { workspace } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let others = repo.fleet()?;
    // Every node's, in a fleet: oldest first across them.
    let mut list = Vec::new();
    for (node, r) in with_fleet(&repo, &others) {
        list.extend(r.snapshots(workspace.as_deref())?.into_iter().map(|s| (node, s)));
    }
    list.sort_by_key(|(_, s)| s.created_ns);
    if json {
        let records: Vec<_> = list
            .iter()
            .map(|(node, s)| trove::SnapshotRecord { node: node.map(str::to_owned), ..s.record() })
            .collect();
        print_json(out, &records)?;
    } else if others.is_empty() {
        snapshot_table(out, &list.into_iter().map(|(_, s)| s).collect::<Vec<_>>())?;
    } else {
        fleet_table(out, &list)?;
    }
    Ok(0)
}

/// The snapshots of a fleet's nodes, each with its node.
fn fleet_table(out: &mut Out, list: &[(Option<&str>, SnapshotInfo)]) -> Result<(), Failure> {
    writeln!(
        out,
        "{:<16}  {:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}",
        "NODE", "ID", "TIME", "WORKSPACE", "REASON", "FILES", "SIZE"
    )?;
    for (node, s) in list {
        writeln!(
            out,
            "{:<16}  {:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}",
            node.unwrap_or("-"),
            trove::short_id(&s.id),
            format::time(s.created_ns),
            s.workspace,
            s.reason,
            s.counts.files,
            format::size(s.counts.bytes)
        )?;
    }
    writeln!(out, "{} snapshots", list.len())?;
    Ok(())
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
