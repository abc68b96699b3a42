//! The `trove` command line: parses arguments, calls the library, prints, and decides the exit
//! code, in exactly one place (`exit_code`).

mod cli;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use trove::ErrorKind;

/// Content-addressed snapshots of agent workspaces.
#[derive(Parser, Debug)]
#[command(name = "trove", version, about, max_term_width = 100)]
pub struct Cli {
    /// Repository directory [default: $XDG_DATA_HOME/trove/repo or ~/.local/share/trove/repo]
    #[arg(long, global = true, env = "TROVE_REPO", value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Print one JSON document instead of a table
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository
    Init,
    /// Snapshot a directory into the repository
    Snapshot {
        /// The workspace directory [default: the current directory]
        dir: Option<PathBuf>,
        /// Workspace name [default: the directory's name]
        #[arg(long)]
        workspace: Option<String>,
        /// Exclude entries matching this pattern as well (repeatable)
        #[arg(long, value_name = "PATTERN")]
        exclude: Vec<String>,
        /// For this call, drop the workspace's exclusion list (defaults included); only
        /// --exclude patterns apply
        #[arg(long)]
        no_default_excludes: bool,
        /// Why this snapshot is taken (recorded)
        #[arg(long, default_value = "manual")]
        reason: String,
    },
    /// List snapshots, oldest first
    Snapshots {
        /// Only this workspace's
        workspace: Option<String>,
    },
    /// List the entries of a snapshot
    Ls {
        /// Snapshot id, unique id prefix, or `latest`
        snapshot: String,
        /// Directory (or file) inside the snapshot [default: the root]
        path: Option<OsString>,
        /// List everything below, not just one level
        #[arg(short, long)]
        recursive: bool,
        /// Resolve `latest` and prefixes within this workspace
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Print a file of a snapshot
    Cat {
        snapshot: String,
        path: OsString,
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Restore a snapshot, or some of its paths, into a directory
    Restore {
        snapshot: String,
        /// Target directory (created if missing; must be empty unless --overwrite)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Only these paths of the snapshot
        paths: Vec<OsString>,
        /// Restore into a non-empty directory, replacing entries at the snapshot's paths
        #[arg(long)]
        overwrite: bool,
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Write a snapshot as a tar archive
    Export {
        snapshot: String,
        /// Only this path of the snapshot
        path: Option<OsString>,
        /// Output file [default: stdout]; a name ending in .zst or .tzst implies --zstd
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Compress with zstd
        #[arg(long)]
        zstd: bool,
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Show or change a workspace's settings
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Verify every stored object and reference
    Check,
    /// Serve the HTTP API: sessions, their files, snapshots
    Serve(cli::service::Serve),
    /// Manage API tokens of `trove serve`
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage sessions: periods of work on a workspace directory
    #[command(subcommand)]
    Session(SessionCommand),
    /// Run an agent file tool (read_file, write_file, apply_patch, ...) on a session; prints
    /// the tool result `{"ok": ..., "data" | "error": ...}`
    Tool {
        /// The tool's name
        name: String,
        #[arg(long, value_name = "ID")]
        session: String,
        /// The parameters as a JSON object; `-` reads them from stdin
        #[arg(default_value = "{}")]
        params: String,
    },
    /// Read the audit log
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Undo the file change recorded as audit record SEQ; refused if the file changed since
    Revert { seq: i64 },
    /// Snapshot a sample workspace (or DIR) twice into the repository and show the result
    Demo {
        /// A directory to use instead of the generated sample
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkspaceCommand {
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

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
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

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token and print it (only its hash is stored); a running server accepts it at once
    Create {
        #[arg(long, default_value = "cli")]
        label: String,
    },
    /// List tokens: id, created, label, live or revoked (never the token itself)
    List,
    /// Revoke a token by its id: every server on this repository refuses it at once
    Revoke { id: String },
}

#[derive(Subcommand, Debug)]
pub enum SessionCommand {
    /// Start a session on a directory
    Create {
        /// The workspace's live directory (created if missing)
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Workspace name [default: the session id]
        #[arg(long)]
        workspace: Option<String>,
        /// Do not end after 5 minutes idle (the ttl still applies; idle expiry runs in `trove serve`)
        #[arg(long)]
        persistent: bool,
        /// Hard lifetime in seconds [default: 14400]
        #[arg(long)]
        ttl: Option<i64>,
        /// Readable path prefix (repeatable); with neither --read nor --write, the whole workspace
        #[arg(long, value_name = "PATH")]
        read: Vec<String>,
        /// Writable path prefix (repeatable; write implies read)
        #[arg(long, value_name = "PATH")]
        write: Vec<String>,
        /// Free-form JSON object
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
    },
    /// List sessions
    List {
        /// Ended sessions too
        #[arg(long)]
        all: bool,
    },
    /// Show one session
    Show { id: String },
    /// End a session: final snapshot, nothing deleted
    End { id: String },
    /// Snapshot a session and stop serving its live tree
    Pause { id: String },
    /// Serve a paused session's live tree again
    Resume { id: String },
    /// List a session's files (live tree, else its latest snapshot)
    Files {
        id: String,
        /// `live`, `latest` or a snapshot id
        #[arg(long)]
        source: Option<String>,
    },
    /// Print one file of a session
    Cat {
        id: String,
        path: String,
        #[arg(long)]
        source: Option<String>,
    },
}

/// The one place an error becomes an exit code (documented in README.md, "Exit codes").
pub(crate) fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidPath | ErrorKind::TooDeep | ErrorKind::NameTooLong => 2,
        ErrorKind::Corrupt => 3,
        _ => 1,
    }
}

fn main() -> ExitCode {
    let args = match Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let json = args.json;
    match cli::run(args) {
        Ok(code) => ExitCode::from(code),
        Err(cli::Failure::Trove(e)) => {
            let line = if json {
                serde_json::json!({"error": e.message(), "kind": e.kind().as_str()}).to_string()
            } else {
                format!("trove: {e}")
            };
            let _ = writeln!(std::io::stderr(), "{line}");
            ExitCode::from(exit_code(e.kind()))
        }
        // A closed pipe (`trove ls | head`) is the reader's choice, not an error.
        Err(cli::Failure::BrokenPipe) => ExitCode::SUCCESS,
    }
}
