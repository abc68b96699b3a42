//! `trove forget`: apply workspaces' snapshot retention policies; `trove pin` / `unpin`.

use std::io::Write;
use std::path::Path;

use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this workspace (default: every workspace with a policy)
    #[arg(long)]
    workspace: Option<String>,
    /// Say what would go and what stays; forget nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let r = repo.forget(args.workspace.as_deref(), args.dry_run, &actor())?;
    if json {
        print_json(out, &r)?;
        return Ok(0);
    }
    for w in &r.workspaces {
        if w.policy.is_none() {
            writeln!(
                out,
                "{}: no retention policy; every snapshot kept (`trove workspace retention` sets one)",
                w.workspace
            )?;
            continue;
        }
        let verb = if r.dry_run { "would forget" } else { "forgot" };
        writeln!(
            out,
            "{}: {verb} {} of {} snapshots",
            w.workspace,
            w.forgotten.len(),
            w.forgotten.len() + w.kept.len()
        )?;
        for f in &w.forgotten {
            writeln!(out, "  - {}  {}  {}", trove::short_id(f.id.as_str()), f.created_at, f.reason)?;
        }
        for k in &w.kept {
            writeln!(
                out,
                "  + {}  {}  {}  kept: {}",
                trove::short_id(k.id.as_str()),
                k.created_at,
                k.reason,
                k.kept_by.join(", ")
            )?;
        }
    }
    if r.workspaces.is_empty() {
        writeln!(out, "no workspace has a retention policy: nothing to forget")?;
    }
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct PinArgs {
    /// The snapshot (`latest`, an id or a unique prefix)
    snapshot: String,
    /// The workspace `latest` and prefixes are resolved in
    #[arg(long)]
    workspace: Option<String>,
}

pub fn pin(out: &mut Out, repo_path: &Path, json: bool, args: PinArgs, pin: bool) -> Result<u8, Failure> {
    let repo = crate::cli::open::open_repo(repo_path)?;
    let r = repo.pin(&args.snapshot, args.workspace.as_deref(), pin, &actor())?;
    if json {
        print_json(out, &r)?;
    } else {
        let state = if r.pinned { "pinned" } else { "not pinned" };
        let was = if r.changed { "" } else { " (already)" };
        writeln!(out, "snapshot {} {state}{was}", trove::short_id(r.snapshot.as_str()))?;
    }
    Ok(0)
}
