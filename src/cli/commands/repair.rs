//! `trove repair snapshots`: snapshots that hold lost contents are rewritten with markers.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;
use trove::ReadData;

use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Replace every file whose content is lost (and every directory whose tree is) by a marker
    Snapshots {
        /// Find damaged objects by reading every object, not only missing ones
        #[arg(long)]
        read_data: bool,
    },
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, cmd: Command) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let Command::Snapshots { read_data } = cmd;
    let r = repo.repair_snapshots(if read_data { ReadData::All } else { ReadData::Off }, &actor())?;
    if json {
        print_json(out, &r)?;
    } else if r.snapshots.is_empty() {
        writeln!(out, "no snapshot holds a lost content: nothing to repair")?;
    } else {
        for f in &r.files {
            writeln!(out, "lost file, now a marker: {f}")?;
        }
        for d in &r.dirs {
            writeln!(out, "lost directory, now a marker: {d}")?;
        }
        writeln!(out, "{} snapshots repaired", r.snapshots.len())?;
    }
    Ok(0)
}
