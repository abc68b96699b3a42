//! `trove rm`: an operator deletes files or directories of a workspace into its trash, through
//! the same journaled path as the agents' tools.

use std::io::Write;
use std::path::Path;

use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove rm`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workspace
    #[arg(long)]
    pub workspace: String,
    /// Workspace-relative paths: files, or directories with everything in them
    #[arg(required = true)]
    pub paths: Vec<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let dir = repo.workspace_dir(&args.workspace)?;
    let items = repo.remove_into_trash(&args.workspace, &dir, &args.paths, &actor())?;
    if json {
        print_json(out, &items)?;
    } else {
        for t in &items {
            let files = t.files.map(|n| format!(", {n} files")).unwrap_or_default();
            writeln!(out, "deleted {} ({}{files}) into the trash as {}", t.path, format::size(t.size), t.id)?;
        }
    }
    Ok(0)
}
