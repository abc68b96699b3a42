//! `trove restore`: Restore a snapshot, or some of its paths, into a directory.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use trove::RestoreOptions;

use crate::cli::bar;
use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove restore`.
#[derive(clap::Args, Debug)]
pub struct Args {
    pub snapshot: String,
    /// Target directory (created if missing; must be empty unless --overwrite)
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// Only these paths of the snapshot
    pub paths: Vec<OsString>,
    /// Restore into a non-empty directory, replacing entries at the snapshot's paths
    #[arg(long)]
    pub overwrite: bool,
    #[arg(long)]
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { snapshot, to, paths, overwrite, workspace } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (there, snap) = repo.snapshot_in_fleet(&snapshot, workspace.as_deref())?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
    let mut norm = Vec::new();
    for p in paths {
        norm.push(trove::path::normalize_nonempty(p.as_bytes())?);
    }
    let bar = bar::Bar::new();
    let opts = RestoreOptions { paths: norm, overwrite, actor: actor(), progress: &bar };
    let report = repo.restore(&snap, &to, &opts)?;
    if json {
        print_json(out, &Restored { snapshot: &snap.id, target: &to, restored: &report })?;
    } else {
        writeln!(
            out,
            "restored {} files, {} directories, {} symlinks ({}) from snapshot {} to {}",
            report.files,
            report.dirs,
            report.symlinks,
            format::size(report.bytes),
            trove::short_id(&snap.id),
            to.display()
        )?;
    }
    Ok(0)
}

/// What `trove restore --json` prints.
#[derive(serde::Serialize)]
struct Restored<'a> {
    snapshot: &'a trove::SnapshotId,
    target: &'a std::path::Path,
    restored: &'a trove::RestoreReport,
}
