//! `trove export`: Write a snapshot as a tar archive.

use std::ffi::OsString;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use trove::Error;

use crate::cli::bar;
use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    pub snapshot: String,
    /// Only this path of the snapshot
    pub path: Option<OsString>,
    /// Output file [default: stdout]; a name ending in .zst or .tzst implies --zstd
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compress with zstd
    #[arg(long)]
    pub zstd: bool,
    #[arg(long)]
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { snapshot, path, output, zstd, workspace } = args;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (there, snap) = repo.snapshot_in_fleet(&snapshot, workspace.as_deref())?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
    let path = path.map(|p| p.into_vec()).unwrap_or_default();
    let zstd = wants_zstd(zstd, output.as_deref());
    let level = zstd.then_some(3);
    let bar = bar::Bar::new();
    match &output {
        Some(file) => {
            let entries = to_file(file, |w| repo.export(&snap, &path, w, level, &bar))?;
            if json {
                print_json(out, &Exported { snapshot: &snap.id, output: file, entries, zstd })?;
            } else {
                writeln!(
                    out,
                    "wrote {entries} entries of snapshot {} to {}",
                    trove::short_id(&snap.id),
                    file.display()
                )?;
            }
        }
        None => {
            refuse_terminal()?;
            repo.export(&snap, &path, out, level, &bar)?;
        }
    }
    Ok(0)
}

/// Whether an archive for `output` is zstd-compressed: asked, or implied by a name ending in
/// `.zst` or `.tzst`.
pub fn wants_zstd(zstd: bool, output: Option<&Path>) -> bool {
    zstd || output.and_then(|o| o.extension()).is_some_and(|e| e == "zst" || e == "tzst")
}

/// An archive is not written to a terminal.
pub fn refuse_terminal() -> Result<(), Failure> {
    if io::stdout().is_terminal() {
        return Err(Error::invalid_argument(
            "refusing to write a tar archive to a terminal: pass -o FILE or redirect stdout",
        )
        .into());
    }
    Ok(())
}

/// Writes `file` with what `write` produces: beside the destination, synced and renamed, so a
/// failed export leaves no half archive. Returns what `write` returns (an entry count).
pub fn to_file(file: &Path, write: impl FnOnce(&mut dyn Write) -> Result<u64, Error>) -> Result<u64, Failure> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io("create a file in", dir, e))?;
    let entries = {
        let mut w = BufWriter::new(tmp.as_file());
        let n = write(&mut w)?;
        w.flush().map_err(|e| Error::io("write", file, e))?;
        n
    };
    tmp.as_file().sync_all().map_err(|e| Error::io("sync", file, e))?;
    tmp.persist(file).map_err(|e| Error::io("write", file, e.error))?;
    Ok(entries)
}

/// What `trove export --json -o FILE` prints.
#[derive(serde::Serialize)]
struct Exported<'a> {
    snapshot: &'a trove::SnapshotId,
    output: &'a std::path::Path,
    entries: u64,
    zstd: bool,
}
