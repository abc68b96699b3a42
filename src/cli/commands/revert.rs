//! `trove revert`: Undo the file change recorded as audit record SEQ; refused if the file changed since.

use std::io::Write;
use std::path::Path;

use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove revert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    pub seq: i64,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { seq } = args;
    let result = crate::cli::open::open_repo(repo_path)?.revert(seq, &actor())?;
    if json {
        print_json(out, &result)?;
    } else {
        writeln!(out, "reverted audit record {seq}: {}", result.path)?;
    }
    Ok(0)
}
