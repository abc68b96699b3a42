//! `trove init`: Create a new repository, with the key that signs its audit checkpoints.

use std::io::Write;
use std::path::{Path, PathBuf};

use trove::{AuditSettings, Layout, Repo};

use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove init`.
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// Where the audit log's signing key goes (made there, or used if one is there) [default:
    /// audit.key in the repository]; keep it where whoever can write the manifest cannot
    #[arg(long, value_name = "PATH")]
    pub audit_key: Option<PathBuf>,
    /// Write an audit checkpoint every N records
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub checkpoint_every: u64,
    /// How the repository keeps its manifest: `sqlite`, one database file in the directory;
    /// `log`, a compressed record log, far smaller for long histories, read into a database in
    /// the cache directory (--cache-dir); `nodes`, a bucket's only, a log per node (--node),
    /// for a fleet of hosts writing at once [default: sqlite in a directory, log in a bucket]
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
}

/// `--layout`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum LayoutArg {
    #[default]
    Sqlite,
    Log,
    Nodes,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let key = args.audit_key.map(|k| std::path::absolute(&k).unwrap_or(k));
    let settings = AuditSettings { key, checkpoint_every: args.checkpoint_every.max(1), witness: None };
    let repo = match trove::object::Location::parse(repo_path.as_os_str())? {
        trove::object::Location::Bucket { bucket, prefix } => {
            let layout = match args.layout {
                None | Some(LayoutArg::Log) => Layout::Log,
                Some(LayoutArg::Nodes) => Layout::Nodes,
                Some(LayoutArg::Sqlite) => Layout::Sqlite,
            };
            let cache_base = crate::cli::open::cache_dir().map(Path::to_path_buf);
            let cache_size = crate::cli::open::cache_size();
            let env = trove::BucketAccess::from_env()?;
            let access = trove::BucketAccess { cache_base, cache_size, node: crate::cli::open::node(), ..env };
            Repo::init_bucket(&bucket, &prefix, &actor(), settings, layout, &access)?
        }
        trove::object::Location::Local(_) => {
            let layout = match args.layout {
                None | Some(LayoutArg::Sqlite) => Layout::Sqlite,
                Some(LayoutArg::Log) => Layout::Log,
                Some(LayoutArg::Nodes) => Layout::Nodes,
            };
            Repo::init_layout(repo_path, &actor(), settings, layout, crate::cli::open::cache_dir())?
        }
    };
    let pubkey = repo.audit_verifier()?.to_string();
    if json {
        print_json(out, &Created { repository: repo_path, id: &repo.config().id, audit_public_key: &pubkey })?;
    } else {
        writeln!(out, "created trove repository {} at {}", repo.config().id, repo_path.display())?;
        writeln!(out, "audit public key (keep a copy to verify with): {pubkey}")?;
    }
    Ok(0)
}

/// `trove init --json`: where the repository is, its id and the audit log's public key.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Created<'a> {
    repository: &'a Path,
    id: &'a str,
    audit_public_key: &'a str,
}
