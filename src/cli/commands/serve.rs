//! `trove serve`: serve the HTTP API: sessions, their files, snapshots.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use trove::server::{self, ServeOptions};
use trove::tokens;
use trove::{Error, ErrorKind};

use crate::cli::output::{actor, Failure, Out};

/// The options of `trove serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on (loopback by default)
    #[arg(long, default_value = "127.0.0.1:4100")]
    pub listen: std::net::SocketAddr,
    /// Directory holding the sessions' workspaces [default: `workspaces` beside the repository]
    #[arg(long, value_name = "DIR")]
    pub workspaces: Option<PathBuf>,
    /// A non-persistent session ends after this long without activity
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub idle_timeout: std::time::Duration,
    /// Audit reads too (listings, file reads, downloads, exports, the reading tools)
    #[arg(long)]
    pub audit_reads: bool,
    /// Failed logins are audited one by one up to 10 in an interval this long, the rest in one
    /// summary record at its end
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub refusal_interval: std::time::Duration,
    /// Write an audit checkpoint this often while records keep coming
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub checkpoint_interval: std::time::Duration,
    /// How often workspaces' retention policies are applied and garbage is collected (0s: never)
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub maintenance_interval: std::time::Duration,
    /// The absolute directory the sandbox file API (`/v1/file/*`) maps onto a session's
    /// workspace, unless the session sets its own `sandbox_root`
    #[arg(long, default_value = "/workspace", value_name = "DIR")]
    pub sandbox_root: String,
    /// The largest upload `/v1/file/upload` takes
    #[arg(long, default_value = "4GiB", value_parser = parse_bytes)]
    pub upload_limit: u64,
    /// A browser origin allowed to call the API (`https://app.example.com`), answered with
    /// CORS headers and preflights; repeat for more, `*` for any
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// The grace period of the scheduled garbage collection
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub gc_grace: std::time::Duration,
    /// The zstd level the scheduled garbage collection recompresses the packs snapshots wrote at
    /// (as `trove gc --recompress`; 9 makes a repository about as small as a `.tar.zst` of its
    /// trees; 0: it does not recompress)
    #[arg(long, value_name = "LEVEL", default_value_t = trove::DEFAULT_RECOMPRESS,
          value_parser = clap::value_parser!(i32).range(0..=i64::from(trove::MAX_RECOMPRESS)))]
    pub maintenance_recompress: i32,
    /// How often activity is recorded, expired sessions are ended and expired trash purged
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub reap_interval: std::time::Duration,
    /// The longest a request may take: work still running then stops before it changes
    /// anything, and the answer is 503 `timeout`
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: std::time::Duration,
    /// Bytes requests may hold in memory at once (whole reads, edits); more waits
    #[arg(long, default_value = "128MiB", value_parser = parse_bytes)]
    pub memory_budget: u64,
    /// Connections open at once: at the limit the longest-idle one is closed to make room,
    /// and if none is idle the new one is answered 503 at once
    /// (fewer if the open-file limit leaves less room: the server keeps 256 descriptors for its
    /// files)
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Connections kept beyond --max-connections for operator requests and `/healthz` only
    #[arg(long, default_value_t = 16)]
    pub reserved_connections: usize,
    /// Requests one session's token may have in flight at once (a download or event stream
    /// counts until it ends); more are answered 503 `busy` at once
    #[arg(long, default_value_t = 32)]
    pub session_requests: usize,
    /// Directories one session's file watchers may watch in all (an inotify watch each; the
    /// server holds at most half the system's fs.inotify.max_user_watches)
    #[arg(long, default_value_t = 8192)]
    pub session_watches: usize,
    /// The longest a client may take to send a request's headers once it started
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: std::time::Duration,
    /// The longest a connection may stay open with no request in flight and no bytes moving
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub keepalive_timeout: std::time::Duration,
    /// How much to log on stderr: error, warn, info, debug, trace, or a filter such as
    /// `trove=debug` [env: TROVE_LOG]
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// `text` (default) or `json` (one object a line)
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// `--memory-budget`: a byte count with an optional unit (`KiB`, `MiB`, `GiB`).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)]
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n.trim(), *m)))
        .unwrap_or((t, 1));
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a size: e.g. 128MiB, 1GiB or a number of bytes"))
}

/// `--idle-timeout` and the other duration flags: `300ms`, `5s`, `5m`, ...
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("'{s}' is not a duration ({e}): e.g. 500ms, 5s, 5m"))
}

/// `trove serve`: binds, prints the address (and a new token on a first start), serves until
/// SIGINT or SIGTERM, and lets in-flight requests finish.
pub fn run(out: &mut Out, repo_path: &Path, opts: Args) -> Result<(), Failure> {
    // First of all: this may start the process again, with the allocator's settings.
    let not_restarted = crate::cli::allocator::restart_with_server_settings();
    crate::cli::logging::start(opts.log_level.as_deref(), opts.log_format == "json")?;
    if let Some(e) = not_restarted {
        tracing::warn!(error = %e, "could not restart with the allocator's settings for a server; freed memory may be kept longer");
    }
    // Every connection is a descriptor: take what the hard limit allows, as servers do (the
    // common soft limit of 1,024 is below the default connection limit plus the server's files).
    trove::raise_open_file_limit();
    let repo = crate::cli::open::open_repo(repo_path)?;
    // The manifest's tokens are read by the server itself, live; only an environment token is
    // handed over. A first start with neither creates one.
    let mut fixed = Vec::new();
    let mut created = None;
    match std::env::var("TROVE_API_TOKEN") {
        Ok(t) if !t.is_empty() => fixed.push((tokens::hash_token(&t), trove::TokenId::parse("env")?)),
        _ if tokens::stored_tokens(&repo)?.is_empty() => {
            let (token, _) = tokens::create_token(&repo, "first start", &actor())?;
            created = Some(token);
        }
        _ => {}
    }
    drop(repo);
    let workspaces = match opts.workspaces {
        Some(w) => w,
        None => repo_path.parent().unwrap_or(Path::new(".")).join("workspaces"),
    };
    let mut options = ServeOptions::new(repo_path.to_path_buf(), workspaces.clone(), fixed);
    options.cache_dir = crate::cli::open::cache_dir().map(std::path::Path::to_path_buf);
    options.cache_size = crate::cli::open::cache_size();
    options.batch_files = crate::cli::open::batch_files();
    options.node = crate::cli::open::node();
    options.idle_timeout = opts.idle_timeout;
    options.reap_interval = opts.reap_interval;
    options.request_timeout = opts.request_timeout;
    options.memory_budget = opts.memory_budget;
    options.max_connections = opts.max_connections;
    options.reserved_connections = opts.reserved_connections;
    options.session_requests = opts.session_requests;
    options.session_watches = opts.session_watches;
    options.header_timeout = opts.header_timeout;
    options.keepalive_timeout = opts.keepalive_timeout;
    options.audit_reads = opts.audit_reads;
    options.refusal_interval = opts.refusal_interval;
    options.checkpoint_interval = opts.checkpoint_interval;
    options.maintenance_interval = opts.maintenance_interval;
    options.gc_grace = opts.gc_grace;
    options.maintenance_recompress = (opts.maintenance_recompress > 0).then_some(opts.maintenance_recompress);
    trove::path::check_sandbox_root(&opts.sandbox_root)?;
    options.sandbox_root = opts.sandbox_root;
    options.upload_limit = opts.upload_limit;
    options.cors_origins = opts.cors_origins;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::with_source(ErrorKind::Io, "cannot start the async runtime", e))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot listen on {}: {e}", opts.listen), e))?;
        let addr = listener.local_addr().map_err(|e| Error::with_source(ErrorKind::Io, "local address", e))?;
        if let Some(token) = &created {
            writeln!(out, "created API token (shown once; keep it, or set TROVE_API_TOKEN): {token}")?;
        }
        writeln!(
            out,
            "trove: serving {} on http://{addr} (workspaces in {})",
            repo_path.display(),
            workspaces.display()
        )?;
        out.flush()?;
        server::serve(listener, options, server::shutdown_signal()).await?;
        Ok::<_, Failure>(())
    })
}
