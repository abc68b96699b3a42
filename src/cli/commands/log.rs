//! `trove log`: the versions of one path across a workspace's snapshots, newest first.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use trove::{Scope, VersionOrigin};

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove log`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workspace
    #[arg(long)]
    pub workspace: String,
    /// The workspace-relative path
    pub path: OsString,
    /// Go on across renames (found by content between consecutive snapshots)
    #[arg(long)]
    pub follow: bool,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let path = trove::path::normalize_nonempty(args.path.as_bytes())?;
    let log = repo.path_log(&args.workspace, &path, args.follow, &Scope::whole())?;
    if json {
        print_json(out, &log)?;
        return Ok(0);
    }
    for e in &log.versions {
        let v = &e.version;
        let origin = match e.origin {
            VersionOrigin::Added => "added".to_string(),
            VersionOrigin::Modified => "modified".to_string(),
            VersionOrigin::Renamed => format!("renamed from {}", e.renamed_from.as_deref().unwrap_or("?")),
        };
        writeln!(
            out,
            "{}  {}  {:>9}  {}  {}{}",
            trove::short_id(&v.first_snapshot),
            v.first_at,
            format::size(v.size),
            v.sha256.map(|s| s.to_string()).unwrap_or_else(|| format!("-> {}", v.target.as_deref().unwrap_or(""))),
            v.path,
            if v.snapshots > 1 { format!("  (in {} snapshots)", v.snapshots) } else { String::new() }
        )?;
        let gone = e.gone_in.as_ref().map(|g| format!("; gone in {}", trove::short_id(g))).unwrap_or_default();
        match &e.change {
            Some(c) => {
                writeln!(out, "    {origin} by {} ({}, seq {}) at {}{gone}", c.actor, c.operation, c.seq, c.time)?
            }
            None => writeln!(out, "    {origin}{gone}")?,
        }
    }
    Ok(0)
}
