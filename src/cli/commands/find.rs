//! `trove find`: which snapshots hold a path matching a name or glob, from the path index.

use std::io::Write;
use std::path::Path;

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove find`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A file name (`main.rs`), a path (`src/main.rs`), or a glob over names (`*.rs`) or, with a
    /// `/`, over paths (`src/**/*.rs`)
    pub pattern: String,
    /// Only this workspace's snapshots
    #[arg(long)]
    pub workspace: Option<String>,
    /// Match regardless of case
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// At most this many versions
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let found = repo.find_paths(&args.pattern, args.workspace.as_deref(), args.ignore_case, args.limit)?;
    if json {
        print_json(out, &found)?;
        return Ok(if found.matches.is_empty() { 1 } else { 0 });
    }
    for v in &found.matches {
        let id = v.content.map(|c| trove::short_id(&c.to_hex()).to_string()).unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{}  {}  {id}  {:>9}  {} .. {} ({} snapshots{})",
            v.workspace,
            v.path,
            format::size(v.size),
            trove::short_id(&v.first_snapshot),
            trove::short_id(&v.last_snapshot),
            v.snapshots,
            if v.current { ", current" } else { "" }
        )?;
    }
    if found.truncated {
        writeln!(out, "(more than --limit {}; {} paths matched)", args.limit, found.paths)?;
    }
    // Like grep and find(1) in scripts: nothing found is exit 1.
    Ok(if found.matches.is_empty() { 1 } else { 0 })
}
