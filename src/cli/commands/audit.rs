//! `trove audit`: read the audit log.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;
use serde_json::Value;
use trove::Repo;

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The most recent records, oldest first: seq, time, actor, operation, path, outcome
    Log {
        /// Only this session's records
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// How many records
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, cmd: Command) -> Result<(), Failure> {
    let Command::Log { session, limit } = cmd;
    let repo = Repo::open(repo_path)?;
    let records = repo.audit_log(session.as_deref(), limit)?;
    if json {
        print_json(out, &Value::Array(records.iter().map(|r| r.to_json()).collect()))?;
    } else {
        for full in &records {
            let r = &full.record;
            let p = r.path.as_deref().map(trove::path::display).unwrap_or_default();
            let dest = r.dest_path.as_deref().map(|d| format!(" -> {}", trove::path::display(d))).unwrap_or_default();
            writeln!(
                out,
                "{:>6}  {}  {:<14} {:<16} {:<12} {p}{dest}",
                full.seq,
                format::time(r.time_ns),
                r.actor,
                r.operation,
                r.outcome
            )?;
        }
    }
    Ok(())
}
