//! `trove demo`: Snapshot a sample workspace (or DIR) twice into the repository and show the result.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use trove::{Error, ErrorKind, Repo, SnapshotOptions};

use super::snapshot::report_snapshot;
use super::snapshots::snapshot_table;
use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory to use instead of the generated sample
    pub dir: Option<PathBuf>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { dir } = args;
    demo(out, repo_path, dir, json)?;
    Ok(0)
}

fn demo(out: &mut Out, repo_path: &Path, dir: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    // In JSON mode the narration is left out and one document describes the result.
    let say = |out: &mut Out, line: String| -> Result<(), Failure> {
        if !json {
            writeln!(out, "{line}")?;
        }
        Ok(())
    };
    let repo = match crate::cli::open::open_repo(repo_path) {
        Ok(r) => r,
        Err(e) if e.kind() == ErrorKind::NotFound && !repo_path.join(trove::CONFIG_FILE).exists() => {
            say(out, format!("creating repository {}", repo_path.display()))?;
            let mut repo = Repo::init(repo_path, &actor())?;
            if let Some(dir) = crate::cli::open::cache_dir() {
                repo.set_cache_dir(dir);
            }
            repo
        }
        Err(e) => return Err(e.into()),
    };
    let generated = dir.is_none();
    let dir = match dir {
        Some(d) => d,
        None => {
            let d = repo_path.with_file_name("demo-workspace");
            if !d.exists() {
                let bytes = trove::sample::generate(&d, 500, 7)?;
                say(
                    out,
                    format!("generated a sample workspace of 500 files ({}) in {}", format::size(bytes), d.display()),
                )?;
            }
            d
        }
    };
    let opts = SnapshotOptions { actor: actor(), ..SnapshotOptions::default() };
    let first = repo.snapshot(&dir, &opts)?;
    if !json {
        report_snapshot(out, &first, false)?;
    }
    if generated {
        let edited = dir.join("NOTES.md");
        let line = format!("demo edit at {}\n", format::time(trove::now_ns()));
        let mut f =
            File::options().create(true).append(true).open(&edited).map_err(|e| Error::io("open", &edited, e))?;
        f.write_all(line.as_bytes()).map_err(|e| Error::io("write", &edited, e))?;
        say(out, format!("appended a line to {}", edited.display()))?;
    }
    let second = repo.snapshot(&dir, &opts)?;
    if json {
        let shown = Demo { repository: repo_path, workspace: &dir, snapshots: [first.record(), second.record()] };
        return print_json(out, &shown);
    }
    report_snapshot(out, &second, false)?;
    writeln!(out)?;
    snapshot_table(out, &repo.snapshots(Some(&second.workspace))?)?;
    writeln!(out, "\ntop level of the latest snapshot:")?;
    super::ls::list(out, &repo, &second, b"", false, false)?;
    writeln!(out, "\nnext: trove --repo {} ls latest --recursive | head", repo_path.display())?;
    Ok(())
}

/// `trove demo --json`: the repository, the directory snapshotted, and its two snapshots.
#[derive(serde::Serialize)]
struct Demo<'a> {
    repository: &'a Path,
    workspace: &'a Path,
    snapshots: [trove::SnapshotRecord<'a>; 2],
}
