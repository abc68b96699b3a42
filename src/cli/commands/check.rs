//! `trove check`: Verify every stored object and reference.

use std::io::Write;
use std::path::Path;

use trove::{Error, Repo};

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

pub fn run(out: &mut Out, repo_path: &Path, json: bool) -> Result<u8, Failure> {
    let repo = Repo::open(repo_path)?;
    let report = repo.check()?;
    if json {
        print_json(out, &serde_json::to_value(&report).map_err(|e| Error::internal(e.to_string()))?)?;
    } else {
        for p in &report.problems {
            writeln!(out, "problem: {p}")?;
        }
        let verdict = if report.problems.is_empty() { "no problems found" } else { "CORRUPTION FOUND" };
        writeln!(
            out,
            "checked {} packed and {} loose objects and {} chunked contents ({}): {verdict}",
            report.objects,
            report.loose,
            report.chunked,
            format::size(report.bytes)
        )?;
    }
    Ok(if report.problems.is_empty() { 0 } else { 3 })
}
