//! The `trove` command line: parses arguments, calls the library, prints, and decides the exit
//! code, in exactly one place (`exit_code`).

mod cli;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::commands;
use trove::ErrorKind;

/// Content-addressed snapshots of agent workspaces.
#[derive(Parser, Debug)]
#[command(name = "trove", version = env!("TROVE_VERSION"), about, max_term_width = 100)]
pub struct Cli {
    /// Repository directory [default: $XDG_DATA_HOME/trove/repo or ~/.local/share/trove/repo]
    #[arg(long, global = true, env = "TROVE_REPO", value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// This machine's cache of repositories (the directory cache, and the manifest of a bucket or
    /// of a `--layout log` directory; rebuilt when deleted), one directory per repository id [default: $TROVE_CACHE_DIR, else $XDG_CACHE_HOME/trove, else
    /// ~/.cache/trove]
    // TROVE_CACHE_DIR is read by the library itself (an empty one is as if unset).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The most this machine keeps of a bucket's packs in its cache (whole packs a restore
    /// fetched, read from disk after): a size such as 500MiB or 4GiB; 0 keeps none
    /// [default: 2GiB]
    #[arg(long, global = true, env = "TROVE_CACHE_SIZE", value_name = "SIZE", value_parser = commands::serve::parse_bytes)]
    pub cache_size: Option<u64>,
    /// A snapshot that reads a tree of more entries than this whole (its first, or one after
    /// the cache was deleted) reads it in batches of about as many: memory follows the batch
    /// (about 500 bytes an entry) [default: 50000]
    #[arg(long, global = true, env = "TROVE_BATCH_FILES", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_files: Option<u64>,
    /// This node's name in a bucket where every node writes a log of its own (`init --layout
    /// nodes`): lowercase letters, digits, '.', '_' or '-' [default: $TROVE_NODE, else the host
    /// name]
    // TROVE_NODE is read by the library itself, and only by an open that needs a node's name.
    #[arg(long, global = true, value_name = "NAME")]
    pub node: Option<trove::NodeName>,
    /// Print one JSON document instead of a table
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository
    Init(commands::init::Args),
    /// Snapshot a directory into the repository
    Snapshot(commands::snapshot::Args),
    /// List snapshots, oldest first
    Snapshots(commands::snapshots::Args),
    /// List the entries of a snapshot
    Ls(commands::ls::Args),
    /// Print a file of a snapshot
    Cat(commands::cat::Args),
    /// Restore a snapshot, or some of its paths, into a directory
    Restore(commands::restore::Args),
    /// Write a snapshot as a tar archive
    Export(commands::export::Args),
    /// What changed between two snapshots, or a snapshot and the live tree
    Diff(commands::diff::Args),
    /// The versions of a path across a workspace's snapshots, newest first
    Log(commands::log::Args),
    /// Search the files of a snapshot (regex, fixed string, or a glob over paths)
    Grep(commands::grep::Args),
    /// Which snapshots hold a path matching a name or glob
    Find(commands::find::Args),
    /// Show or change a workspace's settings
    #[command(subcommand)]
    Workspace(commands::workspace::Command),
    /// Verify the repository: metadata, references and the audit log (objects' bytes with
    /// --read-data); exit 3 when anything is wrong
    Check(commands::check::Args),
    /// Forget snapshots no rule of their workspace's retention policy keeps
    Forget(commands::forget::Args),
    /// Delete what no snapshot, trash item, recent audit record or plan reaches
    Gc(commands::gc::Args),
    /// Keep a snapshot whatever the retention policy says
    Pin(commands::forget::PinArgs),
    /// Let the retention policy decide about a pinned snapshot again
    Unpin(commands::forget::PinArgs),
    /// Repair what `check` found
    #[command(subcommand)]
    Repair(commands::repair::Command),
    /// Serve the HTTP API: sessions, their files, snapshots
    Serve(commands::serve::Args),
    /// Manage API tokens of `trove serve`
    #[command(subcommand)]
    Token(commands::token::Command),
    /// Manage the key files of a repository in a bucket (each wraps its key under a passphrase)
    #[command(subcommand)]
    Key(commands::key::Command),
    /// Manage sessions: periods of work on a workspace directory
    #[command(subcommand)]
    Session(commands::session::Command),
    /// Run an agent file tool (read_file, write_file, apply_patch, ...) on a session; prints
    /// the tool result `{"ok": ..., "data" | "error": ...}`
    Tool(commands::tool::Args),
    /// Serve a session's tools over the Model Context Protocol on stdin/stdout (`trove serve`
    /// offers the same over streamable HTTP at /v1/sessions/{id}/mcp)
    Mcp(commands::mcp::Args),
    /// What was deleted: list, show, restore, purge, expire and export trash items
    #[command(subcommand)]
    Trash(commands::trash::Command),
    /// Delete files or directories of a workspace into its trash, as an operator
    Rm(commands::rm::Args),
    /// Read the audit log
    #[command(subcommand)]
    Audit(commands::audit::Command),
    /// Undo the file change recorded as audit record SEQ; refused if the file changed since
    Revert(commands::revert::Args),
    /// Snapshot a sample workspace (or DIR) twice into the repository and show the result
    Demo(commands::demo::Args),
    /// Print the completion script of a shell for `trove` (bash, zsh, fish, elvish, powershell)
    Completions(commands::completions::Args),
    /// Write the manual pages of `trove` and each subcommand into DIR
    Man(commands::man::Args),
}

/// The one place an error becomes an exit code (documented in docs/src/cli.md, "Exit codes").
pub(crate) fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidPath | ErrorKind::TooDeep | ErrorKind::NameTooLong => 2,
        ErrorKind::Corrupt => 3,
        _ => 1,
    }
}

/// A failure as `--json` prints it on stderr: the message and the kind.
#[derive(serde::Serialize)]
struct FailureRecord<'a> {
    error: &'a str,
    kind: trove::ErrorKind,
}

fn main() -> ExitCode {
    // Before any thread: growing the table later stops the opening thread for an RCU grace
    // period each time (`trove::base::descriptors`).
    trove::reserve_descriptors(trove::RESERVED_DESCRIPTORS);
    let args = match Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let json = args.json;
    let ran = cli::run(args);
    // What this command's operations held in a fleet's bucket, let go of before it exits.
    trove::let_go_of_leases();
    match ran {
        Ok(code) => ExitCode::from(code),
        Err(cli::Failure::Trove(e)) => {
            let line = if json {
                let message = cli::in_flags(e.message());
                let shown = FailureRecord { error: &message, kind: e.kind() };
                serde_json::to_string(&shown).unwrap_or(message.clone())
            } else {
                format!("trove: {}", cli::in_flags(&e.to_string()))
            };
            let _ = writeln!(std::io::stderr(), "{line}");
            ExitCode::from(exit_code(e.kind()))
        }
        // A closed pipe (`trove ls | head`) is the reader's choice, not an error.
        Err(cli::Failure::BrokenPipe) => ExitCode::SUCCESS,
    }
}
