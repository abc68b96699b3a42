//! `trove check`: verify the repository: metadata by default, objects' bytes with
//! `--read-data` or `--read-data-subset`; or rebuild the object index with `--repair-index`.

use std::io::Write;
use std::path::Path;

use trove::{CheckOptions, ReadData};

use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Decompress and verify every object too
    #[arg(long, conflicts_with = "read_data_subset")]
    read_data: bool,
    /// Decompress and verify the objects of a random share of the packs: 10% or 500M
    #[arg(long, value_name = "SHARE")]
    read_data_subset: Option<ReadData>,
    /// Rebuild the object index from the pack files themselves, then check
    #[arg(long)]
    repair_index: bool,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    if args.repair_index {
        let r = repo.repair_index(&actor())?;
        if !json {
            writeln!(
                out,
                "index rebuilt from {} packs: {} objects ({} rows before){}",
                r.packs,
                r.objects,
                r.rows_before,
                if r.unreadable.is_empty() {
                    String::new()
                } else {
                    format!("; unreadable packs: {}", r.unreadable.join(", "))
                }
            )?;
        }
    }
    let read_data = match (args.read_data, args.read_data_subset) {
        (true, _) => ReadData::All,
        (false, Some(s)) => s,
        (false, None) => ReadData::Off,
    };
    let report = repo.check_with(&CheckOptions { read_data })?;
    if json {
        print_json(out, &report)?;
    } else {
        for p in &report.problems {
            writeln!(out, "problem: {}", p.message)?;
            if !p.snapshots.is_empty() {
                let shown: Vec<&str> = p.snapshots.iter().map(|s| trove::short_id(s.as_str())).collect();
                writeln!(out, "  snapshots: {}", shown.join(" "))?;
            }
            for path in p.paths.iter().take(10) {
                writeln!(out, "  affects {path}")?;
            }
            if p.paths.len() > 10 {
                writeln!(out, "  ... and {} more paths (--json lists up to 100)", p.paths.len() - 10)?;
            }
        }
        if let Some(note) = &report.audit_note {
            writeln!(out, "note: {note}")?;
        }
        let verdict = if report.problems.is_empty() { "no problems found" } else { "DAMAGE FOUND" };
        let read = if read_data == ReadData::Off {
            "metadata only".to_string()
        } else {
            format!(
                "{} objects read from {} packs ({})",
                report.objects_read,
                report.packs_read,
                format::size(report.bytes)
            )
        };
        writeln!(
            out,
            "checked {} packs, {} packed and {} loose objects, {} chunk lists, {} trees, {} snapshots, {} audit records; {read}: {verdict}",
            report.packs, report.objects, report.loose, report.chunked, report.trees, report.snapshots, report.audit_records
        )?;
        if let Some(note) = &report.log_note {
            writeln!(out, "note: {note}")?;
        } else if report.log_segments > 0 {
            writeln!(
                out,
                "{} segments of the record log replayed and compared with this host's replica",
                report.log_segments
            )?;
        }
        if report.orphan_packs > 0 {
            writeln!(
                out,
                "{} pack files are not in the index (left by a crash): `trove gc` reclaims them",
                report.orphan_packs
            )?;
        }
    }
    Ok(if report.problems.is_empty() { 0 } else { 3 })
}
