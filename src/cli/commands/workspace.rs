//! `trove workspace`: show or change a workspace's settings.

use std::io::Write;

use clap::Subcommand;
use trove::{Error, Repo};

use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List workspaces and their exclusion lists
    List,
    /// Change a workspace's exclusion list
    Excludes {
        name: String,
        /// Add a pattern (repeatable)
        #[arg(long, value_name = "PATTERN")]
        add: Vec<String>,
        /// Remove a pattern (repeatable)
        #[arg(long, value_name = "PATTERN")]
        remove: Vec<String>,
        /// Drop the default list; only added patterns apply
        #[arg(long, conflicts_with = "defaults")]
        no_defaults: bool,
        /// Go back to the default list with nothing added
        #[arg(long)]
        defaults: bool,
    },
    /// Show or set which snapshots `forget` keeps, and how long the trash keeps items. Any
    /// --keep-* flag replaces the whole snapshot policy with the rules given
    Retention {
        name: String,
        /// Keep the newest N snapshots
        #[arg(long, value_name = "N")]
        keep_last: Option<u32>,
        /// Keep every snapshot within D of the newest (7d, 12h)
        #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
        keep_within: Option<std::time::Duration>,
        /// Keep the newest snapshot of each of the last N hours that have one
        #[arg(long, value_name = "N")]
        keep_hourly: Option<u32>,
        /// Keep the newest snapshot of each of the last N days that have one
        #[arg(long, value_name = "N")]
        keep_daily: Option<u32>,
        /// Keep the newest snapshot of each of the last N weeks that have one
        #[arg(long, value_name = "N")]
        keep_weekly: Option<u32>,
        /// Keep snapshots sessions took when they ended for D (30d)
        #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
        keep_session_end: Option<std::time::Duration>,
        /// Drop the snapshot policy: `forget` keeps every snapshot
        #[arg(long, conflicts_with_all = ["keep_last", "keep_within", "keep_hourly", "keep_daily", "keep_weekly", "keep_session_end"])]
        keep_all: bool,
        /// Trash items older than D expire (30d, 12h; `default` for 30 days)
        #[arg(long, value_name = "D")]
        trash_age: Option<String>,
        /// The oldest trash items expire past this many bytes (`none` for no quota)
        #[arg(long, value_name = "BYTES")]
        trash_quota: Option<String>,
    },
}

pub fn run(out: &mut Out, repo: &Repo, cmd: Command, json: bool) -> Result<(), Failure> {
    match cmd {
        Command::List => {
            let list = repo.workspaces()?;
            if json {
                print_json(out, &list)?;
            } else {
                for w in list {
                    let ex = trove::Excludes::effective(w.excludes.as_deref(), &w.extra_excludes)?;
                    writeln!(out, "{}: excludes {}", w.name, ex.patterns().join(" "))?;
                }
            }
        }
        Command::Excludes { name, add, remove, no_defaults, defaults } => {
            let list = repo.set_workspace_excludes(&name, &add, &remove, no_defaults, defaults, &actor())?;
            if json {
                print_json(out, &Excludes { workspace: &name, excludes: &list })?;
            } else {
                writeln!(out, "{name}: excludes {}", list.join(" "))?;
            }
        }
        Command::Retention {
            name,
            keep_last,
            keep_within,
            keep_hourly,
            keep_daily,
            keep_weekly,
            keep_session_end,
            keep_all,
            trash_age,
            trash_quota,
        } => {
            let secs = |d: Option<std::time::Duration>| d.map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let policy = trove::RetentionPolicy {
                keep_last,
                keep_within_s: secs(keep_within),
                keep_hourly,
                keep_daily,
                keep_weekly,
                keep_session_end_s: secs(keep_session_end),
            };
            if keep_all || !policy.is_empty() {
                repo.set_snapshot_retention(&name, (!keep_all).then_some(policy), &actor())?;
            }
            let age = trash_age.as_deref().map(parse_age).transpose()?;
            let quota = trash_quota.as_deref().map(parse_quota).transpose()?;
            let r = repo.trash_retention(&name, age, quota, &actor())?;
            let snapshots = repo.workspaces()?.into_iter().find(|w| w.name == name).and_then(|w| w.snapshot_retention);
            if json {
                print_json(out, &RetentionShown { trash: &r, snapshots: snapshots.as_ref() })?;
            } else {
                let quota = r.trash_quota.map_or("no quota".to_string(), |q| format!("quota {q} bytes"));
                let default = if r.default_age { " (default)" } else { "" };
                let policy = match &snapshots {
                    None => "every snapshot kept".to_string(),
                    Some(p) => format!("snapshots kept by {}", serde_json::to_string(p).unwrap_or_default()),
                };
                writeln!(out, "{}: {policy}; trash kept {}{default}, {quota}", r.workspace, r.trash_age)?;
            }
        }
    }
    Ok(())
}

/// `--trash-age`: a duration, or `default`.
fn parse_age(text: &str) -> Result<Option<i64>, Error> {
    if text == "default" {
        return Ok(None);
    }
    let d = humantime::parse_duration(text).map_err(|_| {
        Error::invalid_argument(format!("--trash-age '{text}' is not a duration (30d, 12h) or `default`"))
    })?;
    Ok(Some(i64::try_from(d.as_secs()).unwrap_or(i64::MAX)))
}

/// `--trash-quota`: a number of bytes, or `none`.
fn parse_quota(text: &str) -> Result<Option<u64>, Error> {
    if text == "none" {
        return Ok(None);
    }
    text.parse::<u64>()
        .map(Some)
        .map_err(|_| Error::invalid_argument(format!("--trash-quota '{text}' is not a number of bytes or `none`")))
}

/// `trove workspace retention --json`: the trash's retention and the snapshot policy.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RetentionShown<'a> {
    #[serde(flatten)]
    trash: &'a trove::Retention,
    snapshots: Option<&'a trove::RetentionPolicy>,
}

/// `trove workspace excludes --json`: the workspace's exclusion list now.
#[derive(serde::Serialize)]
struct Excludes<'a> {
    workspace: &'a str,
    excludes: &'a [String],
}
