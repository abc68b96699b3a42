//! `trove grep`: search the files of a snapshot without restoring it.

use std::io::Write;
use std::path::Path;

use trove::{Matcher, Scope, SearchMode, SearchSpec};

use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove grep`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot: `latest`, an id or a unique prefix
    pub snapshot: String,
    /// A regex (or with -F a fixed string, with --glob a glob over paths)
    pub pattern: String,
    /// The workspace `latest` and prefixes are of
    #[arg(long)]
    pub workspace: Option<String>,
    /// PATTERN is a fixed string
    #[arg(short = 'F', long)]
    pub fixed_strings: bool,
    /// PATTERN is a glob over paths: list the matching files
    #[arg(long, conflicts_with = "fixed_strings")]
    pub glob: bool,
    /// Match regardless of case
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Lines of context around each match
    #[arg(short = 'C', long, value_name = "N", default_value_t = 0)]
    pub context: usize,
    /// Only under this directory
    #[arg(long, default_value = "")]
    pub path: String,
    /// Only files matching this glob (repeatable)
    #[arg(long)]
    pub include: Vec<String>,
    /// Never files matching this glob (repeatable)
    #[arg(long)]
    pub exclude: Vec<String>,
    /// At most this many results
    #[arg(long, default_value_t = 1000)]
    pub max_results: usize,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (there, snap) = repo.snapshot_in_fleet(&args.snapshot, args.workspace.as_deref())?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
    let mode = match (args.glob, args.fixed_strings) {
        (true, _) => SearchMode::Glob,
        (_, true) => SearchMode::Literal,
        _ => SearchMode::Regex,
    };
    let spec = SearchSpec {
        pattern: args.pattern,
        mode,
        path: args.path,
        include: args.include,
        exclude: args.exclude,
        case_insensitive: args.ignore_case,
        context: args.context,
    };
    let found = repo.search_snapshot(&snap, &Scope::whole(), &Matcher::new(&spec)?, args.max_results)?;
    let hit = !found.matches.is_empty() || !found.paths.is_empty();
    if json {
        print_json(out, &found)?;
        return Ok(if hit { 0 } else { 1 });
    }
    for p in &found.paths {
        writeln!(out, "{p}")?;
    }
    for m in &found.matches {
        let first = m.line.saturating_sub(m.context_before.len());
        for (i, l) in m.context_before.iter().enumerate() {
            writeln!(out, "{}-{}-{l}", m.path, first + i)?;
        }
        writeln!(out, "{}:{}:{}", m.path, m.line, m.text)?;
        for (i, l) in m.context_after.iter().enumerate() {
            writeln!(out, "{}-{}-{l}", m.path, m.line + 1 + i)?;
        }
    }
    if found.truncated {
        writeln!(out, "(stopped at --max-results {})", args.max_results)?;
    }
    if found.files_skipped > 0 {
        writeln!(out, "({} files larger than 64 MiB not searched)", found.files_skipped)?;
    }
    // grep's convention: 1 when nothing matched.
    Ok(if hit { 0 } else { 1 })
}
