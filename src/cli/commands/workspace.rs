//! `trove workspace`: show or change a workspace's settings.

use std::io::Write;

use clap::Subcommand;
use trove::Repo;

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
    }
    Ok(())
}

/// `trove workspace excludes --json`: the workspace's exclusion list now.
#[derive(serde::Serialize)]
struct Excludes<'a> {
    workspace: &'a str,
    excludes: &'a [String],
}
