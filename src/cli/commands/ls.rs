//! `trove ls`: List the entries of a snapshot.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use trove::{Error, ErrorKind, Repo, SnapshotInfo};

use crate::cli::format;
use crate::cli::output::{Failure, Out};

/// The arguments of `trove ls`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot id, unique id prefix, or `latest`
    pub snapshot: String,
    /// Directory (or file) inside the snapshot [default: the root]
    pub path: Option<OsString>,
    /// List everything below, not just one level
    #[arg(short, long)]
    pub recursive: bool,
    /// Resolve `latest` and prefixes within this workspace
    #[arg(long)]
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { snapshot, path, recursive, workspace } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (there, snap) = repo.snapshot_in_fleet(&snapshot, workspace.as_deref())?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
    let path = path.map(|p| p.into_vec()).unwrap_or_default();
    list(out, repo, &snap, &path, recursive, json)?;
    Ok(0)
}

pub(crate) fn list(
    out: &mut Out,
    repo: &Repo,
    snap: &SnapshotInfo,
    path: &[u8],
    recursive: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut first = true;
    let mut io_err: Option<io::Error> = None;
    if json {
        out.write_all(b"[")?;
    }
    let mut each = |p: &[u8], e: &trove::Entry| -> trove::Result<()> {
        let r = if json {
            let sep: &[u8] = if first { b"\n  " } else { b",\n  " };
            out.write_all(sep).and_then(|_| {
                serde_json::to_writer(&mut *out, &format::EntryRecord::of(p, e)).map_err(io::Error::other)
            })
        } else {
            let mut line = format!("{} {:>10} {} ", format::mode(e), e.size, format::time(e.mtime_ns)).into_bytes();
            line.extend_from_slice(p);
            if e.kind == trove::EntryKind::Dir {
                line.push(b'/');
            }
            if let Some(t) = &e.target {
                line.extend_from_slice(b" -> ");
                line.extend_from_slice(t);
            }
            line.push(b'\n');
            out.write_all(&line)
        };
        first = false;
        r.map_err(|err| {
            let e = Error::new(ErrorKind::Io, format!("cannot write output: {err}"));
            io_err = Some(err);
            e
        })
    };
    let result = repo.list(snap, path, recursive, &mut each);
    if let Some(e) = io_err {
        return Err(e.into());
    }
    result?;
    if json {
        out.write_all(b"\n]\n")?;
    }
    Ok(())
}
