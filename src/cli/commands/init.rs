//! `trove init`: Create a new repository.

use std::io::Write;
use std::path::Path;

use trove::Repo;

use crate::cli::output::{actor, print_json, Failure, Out};

pub fn run(out: &mut Out, repo_path: &Path, json: bool) -> Result<u8, Failure> {
    let repo = Repo::init(repo_path, &actor())?;
    if json {
        print_json(out, &Created { repository: repo_path, id: &repo.config().id })?;
    } else {
        writeln!(out, "created trove repository {} at {}", repo.config().id, repo_path.display())?;
    }
    Ok(0)
}

/// `trove init --json`: where the repository is and its id.
#[derive(serde::Serialize)]
struct Created<'a> {
    repository: &'a Path,
    id: &'a str,
}
