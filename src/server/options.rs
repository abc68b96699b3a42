//! How `trove serve` runs: the repository, where workspaces live, accepted tokens, and the
//! server's limits and timeouts.

use std::path::PathBuf;
use std::time::Duration;

use crate::model::session::IDLE_TIMEOUT;

/// How `trove serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The repository's directory.
    pub repo: PathBuf,
    /// Where workspaces live: a session's workspace is a directory named after it in here.
    pub workspaces: PathBuf,
    /// This machine's cache of repositories (`--cache-dir`); None: the default
    /// (`Repo::set_cache_dir`).
    pub cache_dir: Option<PathBuf>,
    /// The bound in bytes of the node's cache of a bucket's packs (`--cache-size`); None: the
    /// default (2 GiB).
    pub cache_size: Option<u64>,
    /// Entries a cold snapshot reads per batch (`Repo::set_batch_files`); None: the default.
    pub batch_files: Option<u64>,
    /// This node's name in a bucket of a log per node (`--node`); None: `TROVE_NODE`, else
    /// the host name.
    pub node: Option<crate::base::id::NodeName>,
    /// Tokens accepted besides the manifest's (read live): SHA-256 hash and id, e.g. the hash
    /// of `TROVE_API_TOKEN` with the id `env`.
    pub token_hashes: Vec<([u8; 32], crate::base::id::TokenId)>,
    /// A non-persistent session ends after this long without activity.
    pub idle_timeout: Duration,
    /// How often activity is recorded and expired sessions are ended.
    pub reap_interval: Duration,
    /// The longest a handler may take before the response is produced.
    pub request_timeout: Duration,
    /// The largest request body accepted.
    pub body_limit: usize,
    /// Bytes that requests may hold in memory at once (whole reads, edits): more waits.
    pub memory_budget: u64,
    /// Connections open at once; at the limit an idle one is closed, else the new one gets 503
    /// (`reserved_connections` more are kept for operators and `/healthz`).
    pub max_connections: usize,
    /// Connections beyond `max_connections` that serve only operator requests and `/healthz`,
    /// so sessions filling every connection cannot lock the operator out.
    pub reserved_connections: usize,
    /// Requests one session's token may have in flight at once, response bodies included.
    pub session_requests: usize,
    /// Directories one session's file watchers may watch in all (an inotify watch each; the
    /// server takes at most half the system's `max_user_watches`).
    pub session_watches: usize,
    /// The longest a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// The longest a connection may sit idle between requests.
    pub keepalive_timeout: Duration,
    /// Whether reads (listings, file reads, downloads, exports, the reading tools) are audited.
    pub audit_reads: bool,
    /// Failed logins are audited one by one up to `refusals::AT_ONCE` an interval this long,
    /// and the rest in one summary when it ends.
    pub refusal_interval: Duration,
    /// An audit checkpoint is written this often while records keep coming.
    pub checkpoint_interval: Duration,
    /// How often retention policies are applied and garbage is collected (zero: never).
    pub maintenance_interval: Duration,
    /// The grace period of the scheduled garbage collection.
    pub gc_grace: Duration,
    /// The zstd level the scheduled garbage collection recompresses packs at (`GcOptions::
    /// recompress`; by default `DEFAULT_RECOMPRESS`, so a served repository shrinks to about a
    /// `.tar.zst` of its trees an interval after its snapshots); None: it does not.
    pub maintenance_recompress: Option<i32>,
    /// The absolute directory the sandbox file API maps onto a session's workspace, unless
    /// the session names its own.
    pub sandbox_root: String,
    /// The largest upload accepted, in bytes.
    pub upload_limit: u64,
    /// Browser origins allowed to call the API (CORS), `*` for any; none by default.
    pub cors_origins: Vec<String>,
}

impl ServeOptions {
    /// Options with the defaults (timeouts, limits, budget) for `repo`, `workspaces` and the
    /// tokens given.
    pub fn new(
        repo: PathBuf,
        workspaces: PathBuf,
        token_hashes: Vec<([u8; 32], crate::base::id::TokenId)>,
    ) -> ServeOptions {
        ServeOptions {
            repo,
            workspaces,
            cache_dir: None,
            cache_size: None,
            batch_files: None,
            node: None,
            token_hashes,
            idle_timeout: IDLE_TIMEOUT,
            reap_interval: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            body_limit: 1 << 20,
            memory_budget: 128 << 20,
            max_connections: 1024,
            reserved_connections: 16,
            session_requests: 32,
            session_watches: crate::fs::quota::PER_OWNER,
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
            audit_reads: false,
            refusal_interval: Duration::from_secs(60),
            checkpoint_interval: Duration::from_secs(60),
            maintenance_interval: Duration::from_secs(3600),
            gc_grace: crate::ops::gc::DEFAULT_GRACE,
            maintenance_recompress: Some(crate::ops::gc::DEFAULT_RECOMPRESS),
            sandbox_root: crate::tools::fileapi::DEFAULT_SANDBOX_ROOT.to_string(),
            upload_limit: 4 << 30,
            cors_origins: Vec::new(),
        }
    }
}
