//! `trove token`: manage the API tokens of `trove serve`.

use std::io::Write;

use clap::Subcommand;
use trove::tokens;
use trove::{Repo, TokenId};

use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a token and print it (only its hash is stored); a running server accepts it at once
    Create {
        #[arg(long, default_value = "cli")]
        label: String,
    },
    /// List tokens: id, created, label, live or revoked (never the token itself)
    List,
    /// Revoke a token by its id: every server on this repository refuses it at once
    Revoke { id: TokenId },
}

pub fn run(out: &mut Out, repo: &Repo, cmd: Command, json: bool) -> Result<(), Failure> {
    match cmd {
        Command::Create { label } => create(out, repo, &label, json),
        Command::List => list(out, repo, json),
        Command::Revoke { id } => revoke(out, repo, &id, json),
    }
}

/// `trove token create`: a new API token, printed once.
fn create(out: &mut Out, repo: &Repo, label: &str, json: bool) -> Result<(), Failure> {
    let (token, id) = tokens::create_token(repo, label, &actor())?;
    if json {
        print_json(out, &Created { token: &token, id: &id, label })?;
    } else {
        writeln!(out, "{token}")?;
    }
    Ok(())
}

/// `trove token list`: ids, labels, when made, and when revoked; never a token itself.
fn list(out: &mut Out, repo: &Repo, json: bool) -> Result<(), Failure> {
    let list = tokens::list_tokens(repo)?;
    if json {
        return print_json(out, &list.iter().map(trove::Token::record).collect::<Vec<_>>());
    }
    for t in &list {
        let state = t.revoked_ns.map(|r| format!("revoked {}", format::time(r))).unwrap_or_else(|| "live".into());
        writeln!(out, "{}  {}  {:<20}  {state}", t.id, format::time(t.created_ns), t.label)?;
    }
    Ok(())
}

/// `trove token revoke ID`: refused at once by every server on this repository.
fn revoke(out: &mut Out, repo: &Repo, id: &TokenId, json: bool) -> Result<(), Failure> {
    tokens::revoke_token(repo, id, &actor())?;
    if json {
        print_json(out, &Revoked { revoked: id })?;
    } else {
        writeln!(out, "revoked {id}")?;
    }
    Ok(())
}

/// What `trove token create --json` prints: the token, this once, with its id and label.
#[derive(serde::Serialize)]
struct Created<'a> {
    token: &'a str,
    id: &'a TokenId,
    label: &'a str,
}

/// What `trove token revoke --json` prints.
#[derive(serde::Serialize)]
struct Revoked<'a> {
    revoked: &'a TokenId,
}
