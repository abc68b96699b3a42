//! `trove key`: the key files of a repository in a bucket, each wrapping its key under a
//! passphrase, as restic's `key` command manages its `keys/`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use trove::Repo;

use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the key files: id, host, when made, and which one opened this command
    List,
    /// Add a key file for another passphrase, read from --new-password-file or TROVE_NEW_PASSWORD
    Add {
        /// A file whose first line is the new passphrase
        #[arg(long, value_name = "FILE")]
        new_password_file: Option<PathBuf>,
    },
    /// Remove a key file by its id: its passphrase opens the repository no more (never the one
    /// this command was opened with)
    Remove { id: String },
}

pub fn run(out: &mut Out, repo: &Repo, cmd: Command, json: bool) -> Result<(), Failure> {
    match cmd {
        Command::List => {
            let keys = repo.keys()?;
            if json {
                return print_json(out, &keys);
            }
            for k in &keys {
                let current = if k.current { "  (current)" } else { "" };
                writeln!(out, "{}  {}  {}{current}", k.id, k.created, k.host)?;
            }
        }
        Command::Add { new_password_file } => {
            let passphrase = match new_password_file {
                Some(file) => trove::read_password_file(&file)?,
                None => std::env::var("TROVE_NEW_PASSWORD").unwrap_or_default(),
            };
            if passphrase.is_empty() {
                return Err(trove::Error::invalid_argument(
                    "give the new passphrase in --new-password-file or TROVE_NEW_PASSWORD",
                )
                .into());
            }
            let added = repo.add_key(passphrase.as_bytes(), &actor())?;
            if json {
                print_json(out, &added)?;
            } else {
                writeln!(out, "added key file {}", added.id)?;
            }
        }
        Command::Remove { id } => {
            repo.remove_key(&id, &actor())?;
            if json {
                print_json(out, &serde_json::json!({ "removed": id }))?;
            } else {
                writeln!(out, "removed key file {id}")?;
            }
        }
    }
    Ok(())
}
