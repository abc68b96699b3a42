//! The repository: one directory holding the config, the manifest and the packs (or, in the log
//! layout, the manifest's record log; `ops/log_dir.rs`).
//!
//! `Repo::init` and `Repo::open` wire the object store backend, the manifest and the config;
//! the operations themselves live in their own modules (`snapshot.rs`, `view.rs`, ...).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::now_ns;
use crate::manifest::node_cache::{self, NodeCache};
use crate::manifest::Manifest;
use crate::model::audit::AuditRecord;
use crate::object::bundle::BundleCache;
use crate::object::{Backend, Chunking, LocalBackend, Location, MemoryBackend, S3Settings, SealedPack, Stretch};

/// The repository's settings file, in its root.
pub const CONFIG_FILE: &str = "config.json";
/// The SQLite manifest, in the repository's root.
pub const MANIFEST_FILE: &str = "manifest.db";
/// The repository format of a directory holding its manifest (`manifest.db`) and of a bucket.
pub const FORMAT: u32 = 1;
/// The repository format of a directory whose manifest is its record log (`log/`), the SQLite
/// manifest being a replica of it in the node's cache directory ([`Layout::Log`]). The newest
/// this build reads: an older trove refuses it ("upgrade trove") instead of taking the missing
/// `manifest.db` for damage.
pub const LOG_FORMAT: u32 = 2;
/// The repository format of a bucket whose every node writes a log of its own
/// (`nodes/<node>/log/`, [`Layout::Nodes`]): the newest this build reads. An older trove,
/// which would write the shared `log/` no node reads, refuses it ("upgrade trove").
pub const NODES_FORMAT: u32 = 3;

/// How a repository in a directory keeps its manifest (`trove init --layout`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Layout {
    /// One SQLite file in the directory, `manifest.db` (format 1): the directory holds all, and
    /// a new host opens it at once.
    #[default]
    Sqlite,
    /// The record log a bucket keeps, `log/<seq>` (format 2), with the SQLite manifest a replica
    /// of it in the node's cache directory: an agent's edits take a few hundred compressed bytes
    /// each where an SQLite row takes a page's share, so long histories stay as small as git's.
    Log,
    /// A bucket's only: every node writes a record log of its own, `nodes/<node>/log/<seq>`
    /// (format 3), so no two nodes ever create the same key and a fleet's nodes never wait on
    /// each other; each node reads the others' logs into replicas of their own to see the
    /// whole fleet. A node changes only its own records.
    Nodes,
}

/// Settings fixed when the repository is created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// The repository format (1 for this build).
    pub format: u32,
    /// A random id telling repositories apart (32 hex digits).
    pub id: String,
    /// The zstd level objects are compressed with.
    pub zstd_level: i32,
    /// How large files are cut into chunks.
    pub chunking: Chunking,
    /// Packs are sealed once they pass this many bytes.
    pub pack_target: u64,
    /// How the audit log is checkpointed.
    #[serde(default)]
    pub audit: AuditSettings,
    /// What the store was found to support when the repository was made in it (a bucket's;
    /// none for a directory, which supports all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<crate::object::Capabilities>,
}

/// How the audit log is checkpointed (ARCHITECTURE.md, "Audit log").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AuditSettings {
    /// The checkpoint signing key's file: `audit.key` in the repository unless set. Keep it where
    /// whoever can write the manifest cannot (docs/src/audit.md).
    pub key: Option<PathBuf>,
    /// A checkpoint is written once this many records have been appended since the last one.
    pub checkpoint_every: u64,
    /// A witness: a command given each checkpoint's note on its standard input, which answers
    /// with the note cosigned (its own signature lines added).
    pub witness: Option<Vec<String>>,
}

impl Default for AuditSettings {
    fn default() -> AuditSettings {
        AuditSettings { key: None, checkpoint_every: 1000, witness: None }
    }
}

impl Config {
    /// Refuses settings this build cannot work with (a newer format) or that would make it
    /// panic or write what it then refuses (a hand-edited config), naming repository `name`.
    pub(crate) fn check(&self, name: &str) -> Result<()> {
        if self.format > NODES_FORMAT {
            return Err(Error::invalid_argument(format!(
                "repository {name} has format {}, newer than this trove's {NODES_FORMAT}: upgrade trove",
                self.format
            )));
        }
        let c = self.chunking;
        // FastCDC asserts on its limits; a hand-edited config must be an error, not a panic. A
        // file up to the threshold is one object: over the blob limit, it would be written and
        // then refused as corrupt by every read.
        let chunking_ok = (64..=1 << 20).contains(&c.min)
            && c.threshold <= crate::object::blob::MAX_RAW
            && (256..=4 << 20).contains(&c.avg)
            && (1024..=16 << 20).contains(&c.max)
            && c.min <= c.avg
            && c.avg <= c.max
            && (1..=22).contains(&self.zstd_level);
        if !chunking_ok {
            return Err(Error::invalid_argument(format!(
                "repository {name} has invalid chunking or compression settings in its config"
            )));
        }
        Ok(())
    }

    /// The name every audit signing key of this repository carries (the origin of its
    /// checkpoints' notes): `trove/<id>`.
    pub(crate) fn key_origin(&self) -> String {
        format!("trove/{}", self.id)
    }

    pub(crate) fn new(seed: &[u8]) -> Config {
        let mut h = blake3::Hasher::new();
        h.update(seed);
        h.update(&now_ns().to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        Config {
            format: FORMAT,
            id: h.finalize().to_hex()[..32].to_string(),
            zstd_level: 3,
            chunking: Chunking::default(),
            pack_target: 16 << 20,
            audit: AuditSettings::default(),
            capabilities: None,
        }
    }
}

/// What opening a bucket takes besides its name: the passphrase of one of its key files, where
/// this node keeps its replica, and how to reach the store.
#[derive(Clone, Default)]
pub struct BucketAccess {
    /// The passphrase; None: none was given (an open then says what to set).
    pub password: Option<String>,
    /// The base of node-local caches (`--cache-dir`); None: the default
    /// (`TROVE_CACHE_DIR`, `$XDG_CACHE_HOME/trove`, `~/.cache/trove`).
    pub cache_base: Option<PathBuf>,
    /// How the store is reached, over the AWS environment variables.
    pub settings: S3Settings,
    /// How hard a new key file's passphrase is stretched (tests use less).
    pub stretch: Option<Stretch>,
    /// The bound in bytes of this node's cache of the bucket's packs (`--cache-size`); None:
    /// 2 GiB; 0: no cache.
    pub cache_size: Option<u64>,
    /// After how many log segments a host writes a copy of its replica for new hosts to start
    /// from (`TROVE_LOG_COPY_EVERY`); None: every 1,000; 0: never.
    pub copy_every: Option<u64>,
    /// This node's name in a bucket of [`Layout::Nodes`] (`--node`); None: `node_env`, else the
    /// host name.
    pub node: Option<crate::base::id::NodeName>,
    /// `TROVE_NODE` as set, parsed only by an open that needs a node's name (a bad one then
    /// refuses that open, not every open of a bucket).
    pub node_env: Option<String>,
}

impl std::fmt::Debug for BucketAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketAccess")
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field("cache_base", &self.cache_base)
            .finish_non_exhaustive()
    }
}

impl BucketAccess {
    /// The passphrase from `TROVE_PASSWORD`, or the first line of the file `TROVE_PASSWORD_FILE`
    /// names (as restic's `RESTIC_PASSWORD_FILE`).
    pub fn from_env() -> Result<BucketAccess> {
        let password = match (std::env::var("TROVE_PASSWORD"), std::env::var_os("TROVE_PASSWORD_FILE")) {
            (Ok(p), _) if !p.is_empty() => Some(p),
            (_, Some(file)) if !file.is_empty() => Some(read_password_file(Path::new(&file))?),
            _ => None,
        };
        let node_env = std::env::var("TROVE_NODE").ok().filter(|n| !n.is_empty());
        Ok(BucketAccess { password, copy_every: copy_every_from_env()?, node_env, ..Default::default() })
    }

    /// This node's name: the one given, else the host name's (its first label if the whole
    /// is not a valid name).
    pub(crate) fn node_name(&self) -> Result<crate::base::id::NodeName> {
        if let Some(n) = &self.node {
            return Ok(n.clone());
        }
        if let Some(n) = &self.node_env {
            return crate::base::id::NodeName::parse(n).map_err(|e| e.context("TROVE_NODE"));
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim().to_ascii_lowercase();
        let host = host.as_str();
        crate::base::id::NodeName::parse(host)
            .or_else(|_| crate::base::id::NodeName::parse(host.split('.').next().unwrap_or_default()))
            .map_err(|_| {
                Error::invalid_argument(format!(
                    "this host's name {host:?} does not make a node name: name this node with --node or TROVE_NODE"
                ))
            })
    }

    pub(crate) fn password(&self, what: &str) -> Result<&[u8]> {
        match &self.password {
            Some(p) if !p.is_empty() => Ok(p.as_bytes()),
            _ => Err(Error::new(
                ErrorKind::Unauthorized,
                format!("{what} needs the repository's passphrase: set TROVE_PASSWORD, or TROVE_PASSWORD_FILE to a file holding it"),
            )),
        }
    }

    /// The base of this node's caches, made absolute.
    pub(crate) fn cache_base(&self) -> Result<PathBuf> {
        cache_base_or(self.cache_base.as_deref(), || "a repository in a bucket keeps".to_owned())
    }
}

/// The base of this node's caches, made absolute: `explicit` (`--cache-dir`), else the default
/// ([`node_cache::default_base`]); with neither, an error saying who (`keeps`: "... keeps")
/// needs one for its manifest and what to set.
pub(crate) fn cache_base_or(explicit: Option<&Path>, keeps: impl FnOnce() -> String) -> Result<PathBuf> {
    let base = match explicit {
        Some(b) => b.to_path_buf(),
        None => node_cache::default_base(|k| std::env::var_os(k)).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{} its manifest in a cache directory: set TROVE_CACHE_DIR, XDG_CACHE_HOME or HOME, or pass --cache-dir",
                keeps()
            ))
        })?,
    };
    Ok(std::path::absolute(&base).unwrap_or(base))
}

/// `TROVE_LOG_COPY_EVERY`: after how many log segments a host writes a copy of its replica
/// (None: unset, the repository's default).
pub(crate) fn copy_every_from_env() -> Result<Option<u64>> {
    match std::env::var("TROVE_LOG_COPY_EVERY") {
        Ok(v) if !v.is_empty() => Ok(Some(v.trim().parse::<u64>().map_err(|_| {
            Error::invalid_argument(format!(
                "TROVE_LOG_COPY_EVERY={v:?} is not a number of log segments: give one such as 1000, or 0 for no copies"
            ))
        })?)),
        _ => Ok(None),
    }
}

/// The directory of the record log's segments in a repository of [`Layout::Log`].
pub(crate) const LOG_DIR: &str = "log";

/// After how many segments a copy of the replica is written in a directory of [`Layout::Log`]:
/// never unless `TROVE_LOG_COPY_EVERY` says. A copy spares a new host the reading of every
/// segment (about 140 us each from a local disk) and costs the repository a compressed copy of
/// every row: in a directory the size matters more.
pub(crate) fn dir_copy_every() -> Result<u64> {
    Ok(copy_every_from_env()?.unwrap_or(0))
}

/// The first line of a password file, at most 4 KiB.
pub fn read_password_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| Error::io("open the password file", path, e))?;
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).map_err(|e| Error::io("read the password file", path, e))?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// What a handle on a bucket keeps to manage its key files: the store beneath the sealing,
/// the repository key, and the key file that opened it.
pub(crate) struct BucketKeys {
    pub(crate) store: std::sync::Arc<BucketStore>,
    pub(crate) key: crate::object::SealKey,
    pub(crate) opened_with: String,
    pub(crate) stretch: Stretch,
    /// After how many segments a copy of the replica is written ([`BucketAccess::copy_every`]).
    pub(crate) copy_every: u64,
    /// This host's id, once read or made (`Repo::host_id`): every handle on the bucket shares
    /// it, so a server's reaper does not read it from disk at each tick. A node's name in a
    /// bucket of [`Layout::Nodes`].
    pub(crate) host: std::sync::OnceLock<String>,
    /// Who writes the log this handle's replica follows: the repository's shared one, or this
    /// node's own.
    pub(crate) owner: crate::manifest::log::Owner,
    /// This process's writing as its node, shared by every handle (one refused, all are).
    pub(crate) writers: std::sync::Arc<crate::manifest::log::Writers>,
}

/// How a repository in a bucket is read and written: sealed, over the node's pack cache, over
/// the bucket.
pub(crate) type BucketStore = crate::object::SealedBackend<crate::object::PackCache<crate::object::S3Backend>>;

/// Entries a batch of a snapshot read whole holds, unless [`Repo::set_batch_files`] says
/// otherwise: about 25 MiB of its working set (some 500 bytes an entry while it is read and
/// built).
pub(crate) const BATCH_FILES: u64 = 50_000;

/// An open repository: its object store, its manifest and the caches of one handle. Every
/// operation (`snapshot`, `restore`, the file tools...) is a method of it.
pub struct Repo {
    root: Option<PathBuf>,
    pub(crate) config: Config,
    pub(crate) backend: std::sync::Arc<dyn Backend>,
    pub(crate) manifest: Manifest,
    /// Recently decoded bundles and trees; a server shares one set among its handles.
    pub(crate) caches: Caches,
    /// When the work of the current caller must stop (a server request's deadline): long
    /// operations check it between stages and stop before their commit point.
    deadline: std::cell::Cell<Option<std::time::Instant>>,
    /// Bytes that reads may hold in memory at once; a server shares one among its handles.
    pub(crate) budget: std::sync::Arc<crate::base::budget::Budget>,
    /// The checkpoint signing key, read once (an in-memory repository's lives only here).
    pub(crate) audit_key: std::cell::OnceCell<crate::tlog::note::SignerKey>,
    /// What the key signed last, for a repository in memory (which has no key file to keep it
    /// beside; `fs/signed.rs`).
    pub(crate) audit_signed: std::cell::RefCell<Option<crate::fs::signed::Signed>>,
    /// Change feeds of live trees a server keeps, shared by its handles (none in a one-shot
    /// command: starting one costs a whole read).
    pub(crate) live_feeds: Option<std::sync::Arc<crate::ops::live_read::LiveFeeds>>,
    /// A cold snapshot of more files than this is taken in batches of about as many
    /// (`ops/snapshot/batched.rs`): what bounds its memory.
    pub(crate) batch_files: u64,
    /// Where this machine's cache of the repository lives, and the cache once opened (on first
    /// use: most commands never need it).
    node_cache: NodeCacheSlot,
    /// A bucket's key files and the key that opened it (None for a directory or memory).
    pub(crate) bucket_keys: Option<std::sync::Arc<BucketKeys>>,
    /// Where the manifest is when it is a replica of a record log (a bucket's, or a directory's
    /// of [`Layout::Log`]): in the node's directory of the repository.
    pub(crate) replica: Option<PathBuf>,
    /// On a handle over another node's replica (`Repo::foreign`), the node acting on its data:
    /// what it does there is recorded in the acting node's own log.
    pub(crate) acting: Option<Shared>,
}

/// Where a handle's node-local cache lives (`manifest/node_cache.rs`).
#[derive(Clone, Debug)]
pub(crate) enum CachePlace {
    /// `<base>/<repository id>`.
    Dir(PathBuf),
    /// A repository in memory's, by its name.
    Memory(String),
    /// No cache directory could be named (the message says why, for the log): every snapshot
    /// reads every file.
    Nowhere(&'static str),
}

/// A handle's node-local cache: where, and the cache once opened (None: it could not be, which
/// was logged once; snapshots then read every file).
pub(crate) struct NodeCacheSlot {
    place: CachePlace,
    opened: std::cell::OnceCell<Option<NodeCache>>,
}

impl NodeCacheSlot {
    pub(crate) fn at(place: CachePlace) -> NodeCacheSlot {
        NodeCacheSlot { place, opened: Default::default() }
    }

    /// The directory it names, if any.
    pub(crate) fn dir(&self) -> Option<PathBuf> {
        match &self.place {
            CachePlace::Dir(d) => Some(d.clone()),
            CachePlace::Memory(_) | CachePlace::Nowhere(_) => None,
        }
    }

    /// The default place of repository `id`'s cache: under [`node_cache::default_base`].
    pub(crate) fn default_for(id: &str) -> NodeCacheSlot {
        match node_cache::default_base(|k| std::env::var_os(k)) {
            Some(base) => NodeCacheSlot::under(&base, id),
            None => NodeCacheSlot::at(CachePlace::Nowhere(
                "no cache directory: set TROVE_CACHE_DIR, XDG_CACHE_HOME or HOME, or pass --cache-dir",
            )),
        }
    }

    /// Repository `id`'s cache under `base` (made absolute: a relative one is taken from the
    /// current directory once, not at each open). The id comes from `config.json`, which a
    /// copied repository brings along: only the 32 hex digits `init` writes name a directory,
    /// never a path that leaves the base.
    pub(crate) fn under(base: &Path, id: &str) -> NodeCacheSlot {
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return NodeCacheSlot::at(CachePlace::Nowhere(
                "the repository's id in config.json is not 32 hex digits, so it names no cache directory",
            ));
        }
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        NodeCacheSlot::at(CachePlace::Dir(base.join(id)))
    }
}

/// What a handle keeps of what it decoded: bundles, so reading files in path order decodes
/// each bundle once, and trees, for lookups by path. Both are keyed by content ids, so every
/// handle on the repository may use them.
#[derive(Clone, Default)]
pub(crate) struct Caches {
    pub(crate) bundles: std::sync::Arc<BundleCache>,
    pub(crate) trees: std::sync::Arc<crate::manifest::trees::TreeCache>,
}

/// What the handles on one repository can share: its store (with the pack files it holds
/// open) and the caches. A server gives all its pooled handles one: with their own, sixteen
/// handles kept up to 16 MiB of decoded bundles and 64 open pack files each, and a pack the
/// collector deleted through one handle stayed open, its space held, in the others (a soak's
/// server held 219 deleted packs open and grew past 300 MiB). Also shared: the memory budget
/// and the live trees' feeds, so every handle draws on one budget and reads one feed per tree.
#[derive(Clone)]
pub struct Shared {
    /// The repository's directory (a bucket's: this node's), from which another handle opens.
    root: Option<PathBuf>,
    config: Config,
    /// The store's name when the handles' manifests are replicas of its log (a bucket's).
    log_name: Option<String>,
    backend: std::sync::Arc<dyn Backend>,
    caches: Caches,
    budget: std::sync::Arc<crate::base::budget::Budget>,
    live_feeds: Option<std::sync::Arc<crate::ops::live_read::LiveFeeds>>,
    cache_place: CachePlace,
    /// A bucket's keys and settings, which every handle on it holds.
    bucket_keys: Option<std::sync::Arc<BucketKeys>>,
    /// Where the replica of the log is (`Repo::replica`).
    replica: Option<PathBuf>,
}

impl Shared {
    /// Another handle on the repository, with its own manifest connection, sharing these
    /// (a server's pool opens one per concurrent request): no key file is opened again and no
    /// config read again.
    pub fn open_handle(&self) -> Result<Repo> {
        let root =
            self.root.as_deref().ok_or_else(|| Error::internal("a repository in memory has no other handles"))?;
        let mut repo = if let (Some(name), Some(replica)) = (&self.log_name, &self.replica) {
            let (every, owner, writers) = match &self.bucket_keys {
                Some(k) => (k.copy_every, k.owner.clone(), k.writers.clone()),
                None => (dir_copy_every()?, crate::manifest::log::Owner::Shared, Default::default()),
            };
            let log = crate::manifest::log::Log::new(self.backend.clone(), name.clone())
                .copy_every(every)
                .of_node(owner)
                .sharing(writers);
            let manifest = crate::manifest::log::open_replica(replica, log)?;
            let node_cache = NodeCacheSlot::at(self.cache_place.clone());
            let mut repo = Repo::assemble(
                Some(root.to_path_buf()),
                node_cache,
                self.config.clone(),
                self.backend.clone(),
                manifest,
            );
            repo.bucket_keys = self.bucket_keys.clone();
            repo.replica = Some(replica.clone());
            repo
        } else {
            Repo::open_dir(root, None)?
        };
        repo.set_shared(self.clone());
        Ok(repo)
    }
}

/// The memory budget of a handle nobody shares one with.
const DEFAULT_BUDGET: u64 = 256 << 20;

/// `path` holds no repository (`why` says how it looked); the advice is `trove init` only where
/// init would take the directory (missing or empty), never where it would refuse.
fn not_a_repo(path: &Path, why: &str) -> Error {
    let empty = fs::read_dir(path).map(|mut d| d.next().is_none()).unwrap_or(true);
    let advice = if empty {
        "run `trove init` there, or point --repo / TROVE_REPO at one"
    } else {
        "point --repo / TROVE_REPO at a repository, or run `trove init` on a new or empty directory"
    };
    Error::new(ErrorKind::NotFound, format!("{} is not a trove repository ({why}): {advice}", path.display()))
}

/// The most bytes read of a `config.json`: a real one is a few hundred.
pub const CONFIG_LIMIT: u64 = 1 << 20;

/// A repository whose config is there but unusable: its settings (id, chunking) cannot be
/// made again, so the fix is a backup's copy; `trove init` refuses a directory that is not
/// empty, so it is not offered.
fn damaged_config(cfg: &Path, what: &str) -> Error {
    Error::corrupt(format!(
        "{} {what}: restore the repository's config.json from a backup (it holds the repository's id and chunking settings)",
        cfg.display()
    ))
}

/// The bytes of the config at `cfg`, refusing at once anything but a regular file of at most
/// [`CONFIG_LIMIT`] bytes. Opened without blocking (a FIFO there would otherwise wait forever
/// for a writer), then checked through the opened descriptor, so what is read is what was
/// checked.
fn read_config(root: &Path, cfg: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match fs::File::options().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(cfg) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if root.join(MANIFEST_FILE).exists() || root.join(LOG_DIR).exists() {
                // A lost config, or an init interrupted before its last step (the config).
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "{} has a manifest (manifest.db or log/) but no config.json: restore config.json from a backup of the repository, or, if `trove init` was interrupted there, remove the directory and run it again",
                        root.display()
                    ),
                ));
            }
            let why = if root.exists() { "it has no config.json" } else { "it does not exist" };
            return Err(not_a_repo(root, why));
        }
        Err(e) => return Err(Error::io("open", cfg, e)),
    };
    let meta = file.metadata().map_err(|e| Error::io("stat", cfg, e))?;
    if !meta.is_file() {
        return Err(damaged_config(cfg, "is not a regular file (a directory, a FIFO, a socket or a device)"));
    }
    if meta.len() > CONFIG_LIMIT {
        return Err(damaged_config(
            cfg,
            &format!("is {} bytes, more than a config ever holds ({CONFIG_LIMIT})", meta.len()),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&file).take(CONFIG_LIMIT + 1).read_to_end(&mut bytes).map_err(|e| Error::io("read", cfg, e))?;
    if bytes.len() as u64 > CONFIG_LIMIT {
        return Err(damaged_config(cfg, "grew past the most a config ever holds while it was read"));
    }
    Ok(bytes)
}

impl Repo {
    /// Creates a repository in `path`, which must not exist or be an empty directory.
    pub fn init(path: &Path, actor: &str) -> Result<Repo> {
        Repo::init_with(path, actor, AuditSettings::default())
    }

    /// [`Repo::init`] with the audit log's settings: where its signing key goes (made there,
    /// or used if one is there already), how often it is checkpointed, a witness.
    pub fn init_with(path: &Path, actor: &str, audit: AuditSettings) -> Result<Repo> {
        Repo::init_layout(path, actor, audit, Layout::Sqlite, None)
    }

    /// [`Repo::init_with`] choosing how a directory keeps its manifest; one of [`Layout::Log`]
    /// keeps its replica under `cache_base` (None: the default cache directory). A bucket's
    /// layout is always the log's.
    pub fn init_layout(
        path: &Path,
        actor: &str,
        audit: AuditSettings,
        layout: Layout,
        cache_base: Option<&Path>,
    ) -> Result<Repo> {
        if let Location::Bucket { bucket, prefix } = Location::parse(path.as_os_str())? {
            let access = BucketAccess { cache_base: cache_base.map(Path::to_path_buf), ..BucketAccess::from_env()? };
            return Repo::init_bucket(&bucket, &prefix, actor, audit, layout, &access);
        }
        if layout == Layout::Nodes {
            return Err(Error::invalid_argument(format!(
                "a log per node is a bucket's layout, for many hosts writing one repository; {} is a directory, one host's: use --layout log or sqlite",
                path.display()
            )));
        }
        if path.join(CONFIG_FILE).exists() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{} is already a trove repository", path.display()),
            ));
        }
        if let Ok(mut entries) = fs::read_dir(path) {
            if entries.next().is_some() {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not empty: choose a new or empty directory for the repository",
                        path.display()
                    ),
                ));
            }
        }
        fs::create_dir_all(path.join("packs")).map_err(|e| Error::io("create repository", path, e))?;
        let config = Config { audit, ..Config::new(path.as_os_str().as_encoded_bytes()) };
        // The manifest first, the config last: a repository is only recognised (by its config)
        // once everything it needs exists, so an interrupted init is simply not a repository.
        let repo = match layout {
            Layout::Sqlite => {
                let manifest = Manifest::create(&path.join(MANIFEST_FILE))?;
                let node_cache = NodeCacheSlot::default_for(&config.id);
                let backend = std::sync::Arc::new(LocalBackend::new(path));
                Repo::assemble(Some(path.to_path_buf()), node_cache, config, backend, manifest)
            }
            Layout::Log | Layout::Nodes => {
                Repo::over_log_dir(path, Config { format: LOG_FORMAT, ..config }, cache_base)?
            }
        };
        // The signing key before anything is recorded: the first checkpoint needs it.
        if let Some(key) = repo.audit_key_path() {
            let made = crate::fs::keyfile::create_key(&key, &repo.config.key_origin())?;
            let _ = repo.audit_key.set(made);
        }
        repo.audit(AuditRecord::ok(now_ns(), actor, "init"))?;
        let json = serde_json::to_vec_pretty(&repo.config).map_err(|e| Error::internal(e.to_string()))?;
        let cfg = path.join(CONFIG_FILE);
        let mut tmp = tempfile::NamedTempFile::new_in(path).map_err(|e| Error::io("write config in", path, e))?;
        std::io::Write::write_all(&mut tmp, &json).map_err(|e| Error::io("write", &cfg, e))?;
        tmp.as_file().sync_all().map_err(|e| Error::io("sync", &cfg, e))?;
        tmp.persist(&cfg).map_err(|e| Error::io("write", &cfg, e.error))?;
        Ok(repo)
    }

    /// Opens the repository at `path`: a directory, or `s3://BUCKET/PREFIX` (opened with the
    /// passphrase from the environment, [`BucketAccess::from_env`]).
    pub fn open(path: &Path) -> Result<Repo> {
        Repo::open_with(path, None, None)
    }

    /// [`Repo::open`] with this node's cache directory (`--cache-dir`; None: the default), which
    /// holds a bucket's manifest replica and its pack cache, bounded by `cache_size` bytes
    /// (`--cache-size`; None: 2 GiB).
    pub fn open_with(path: &Path, cache_dir: Option<&Path>, cache_size: Option<u64>) -> Result<Repo> {
        Repo::open_as(path, cache_dir, cache_size, None)
    }

    /// [`Repo::open_with`] as node `node` of a bucket of a log per node (None: `TROVE_NODE`,
    /// else the host name).
    pub fn open_as(
        path: &Path,
        cache_dir: Option<&Path>,
        cache_size: Option<u64>,
        node: Option<crate::base::id::NodeName>,
    ) -> Result<Repo> {
        match Location::parse(path.as_os_str())? {
            Location::Bucket { bucket, prefix } => {
                let env = BucketAccess::from_env()?;
                let access = BucketAccess { cache_base: cache_dir.map(Path::to_path_buf), cache_size, node, ..env };
                Repo::open_bucket(&bucket, &prefix, &access)
            }
            Location::Local(_) => {
                let mut repo = Repo::open_dir(path, cache_dir)?;
                if let Some(dir) = cache_dir {
                    repo.set_cache_dir(dir);
                }
                Ok(repo)
            }
        }
    }

    /// Opens the repository in directory `path`; one of [`Layout::Log`] keeps its replica of
    /// the log under `cache_base` (None: the default cache directory).
    fn open_dir(path: &Path, cache_base: Option<&Path>) -> Result<Repo> {
        let cfg_path = path.join(CONFIG_FILE);
        let bytes = read_config(path, &cfg_path)?;
        let config: Config =
            serde_json::from_slice(&bytes).map_err(|e| damaged_config(&cfg_path, &format!("does not parse ({e})")))?;
        config.check(&path.display().to_string())?;
        if config.format == LOG_FORMAT {
            return Repo::open_log_dir(path, config, cache_base);
        }
        if config.format == NODES_FORMAT {
            return Err(damaged_config(
                &cfg_path,
                "names format 3, a log per node, which only a bucket has (a copy of a bucket's config?)",
            ));
        }
        let db = path.join(MANIFEST_FILE);
        if !db.exists() {
            return Err(Error::corrupt(format!(
                "{} is missing beside its config.json: restore the repository's manifest.db from a backup",
                db.display()
            )));
        }
        let manifest = Manifest::open(&db)?;
        let node_cache = NodeCacheSlot::default_for(&config.id);
        let backend = std::sync::Arc::new(LocalBackend::new(path));
        let repo = Repo::assemble(Some(path.to_path_buf()), node_cache, config, backend, manifest);
        if let Some(why) = repo.manifest.read_only() {
            repo.defer_recovery(why)?;
            return Ok(repo);
        }
        repo.settle_on_open()?;
        Ok(repo)
    }

    /// What every open that can write does first: the audit tree caught up, and the changes a
    /// crash interrupted finished or cleaned up.
    pub(crate) fn settle_on_open(&self) -> Result<()> {
        // The Merkle tree of audit records appended before it was kept (schema 6).
        let conn = self.manifest.conn();
        if crate::manifest::audit::tree_size(conn)? < crate::manifest::audit::size(conn)? {
            self.manifest.write(|tx| crate::manifest::audit::catch_up_tree(tx))?;
        }
        // A file tool mutation a crash interrupted is finished before anything else runs, and a
        // restore's leftovers are cleaned up.
        self.recover_journal()?;
        self.recover_restores()?;
        // In a fleet, a purge of another node's items a killed process left half done is
        // finished; that node's log may be out of reach now, which must not keep this open.
        if let Err(e) = self.recover_purges() {
            tracing::warn!(error = %e, "interrupted purges of other nodes' trash could not be settled; tried again at the next open");
        }
        // An upload a killed process left half-written is removed, once nothing may still
        // need it; a failure here (a read-only disk) must not keep the repository from opening.
        if let Err(e) = self.recover_uploads() {
            tracing::warn!(error = %e, "interrupted uploads' temporaries could not be settled; tried again at the next open");
        }
        Ok(())
    }

    /// On a handle open read-only (`why`: the disk is full), the recovery an open does is
    /// left for the next handle that can write, said in the log when there is any: reads of
    /// snapshots and the trash do not depend on it.
    pub(crate) fn defer_recovery(&self, why: &str) -> Result<()> {
        let conn = self.manifest.conn();
        let plans = crate::manifest::journal::pending(conn)?.len();
        let restores = crate::manifest::restores::pending(conn)?.len();
        let behind = crate::manifest::audit::tree_size(conn)? < crate::manifest::audit::size(conn)?;
        if plans > 0 || restores > 0 || behind {
            tracing::warn!(
                plans,
                restores,
                audit_tree_behind = behind,
                why,
                "the repository is open read-only: interrupted changes are settled by the next open that can write"
            );
        }
        Ok(())
    }

    /// Why this handle cannot write (its manifest could not be opened for writing: a full
    /// disk), or None: it can.
    pub fn read_only(&self) -> Option<&str> {
        self.manifest.read_only()
    }

    /// A repository that lives in memory only: the manifest in SQLite's memory, the packs in
    /// a [`MemoryBackend`]. For tests and trials.
    pub fn in_memory() -> Result<Repo> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!("trove-mem-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let manifest = Manifest::create_in_memory(&name)?;
        let node_cache = NodeCacheSlot::at(CachePlace::Memory(name.clone()));
        let config = Config::new(name.as_bytes());
        Ok(Repo::assemble(None, node_cache, config, std::sync::Arc::new(MemoryBackend::new()), manifest))
    }

    /// A handle over these parts, with fresh caches, the default budget and batch size.
    pub(crate) fn assemble(
        root: Option<PathBuf>,
        node_cache: NodeCacheSlot,
        config: Config,
        backend: std::sync::Arc<dyn Backend>,
        manifest: Manifest,
    ) -> Repo {
        Repo {
            root,
            node_cache,
            config,
            backend,
            manifest,
            caches: Caches::default(),
            deadline: Default::default(),
            budget: crate::base::budget::Budget::new(DEFAULT_BUDGET),
            audit_key: Default::default(),
            audit_signed: Default::default(),
            live_feeds: None,
            batch_files: BATCH_FILES,
            bucket_keys: None,
            replica: None,
            acting: None,
        }
    }

    /// An in-memory repository over a caller's backend (tests that damage or fail storage).
    pub fn with_backend(backend: Box<dyn Backend>) -> Result<Repo> {
        let mut repo = Repo::in_memory()?;
        repo.backend = std::sync::Arc::from(backend);
        Ok(repo)
    }

    /// A handle with this one's config and memory budget over another manifest and store: a
    /// dry run's copy of the manifest over a store that writes nothing (`gc/dry.rs`).
    pub(crate) fn scratch(&self, manifest: Manifest, backend: std::sync::Arc<dyn Backend>) -> Repo {
        let node_cache = NodeCacheSlot::at(CachePlace::Nowhere("a dry run keeps no cache"));
        let mut repo = Repo::assemble(None, node_cache, self.config.clone(), backend, manifest);
        repo.budget = self.budget.clone();
        repo.set_deadline(self.deadline());
        repo
    }

    /// The repository's directory; `None` for one in memory.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The settings fixed at creation.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The object store.
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// Applies what was written to this handle's log since it last looked (other processes',
    /// other hosts', or in a fleet the node's it reads), unless it looked within `max_age`:
    /// how many segments. Nothing outside a log. A long-lived handle calls it before reading
    /// on (`trove audit log --follow`, a server before each request).
    pub fn refresh(&self, max_age: std::time::Duration) -> Result<u64> {
        self.manifest.refresh(max_age)
    }

    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Sets (or clears) the deadline of the work this handle does next: the server sets each
    /// request's before lending a pooled handle. Work that runs past it stops with `timeout`
    /// at its next check, before it changes anything.
    pub fn set_deadline(&self, deadline: Option<std::time::Instant>) {
        self.deadline.set(deadline);
    }

    /// Makes this handle draw on `budget` (the server gives all its handles one).
    pub fn set_budget(&mut self, budget: std::sync::Arc<crate::base::budget::Budget>) {
        self.budget = budget;
    }

    /// What this handle shares with others on the same repository ([`Repo::set_shared`]).
    pub fn shared(&self) -> Shared {
        Shared {
            root: self.root.clone(),
            config: self.config.clone(),
            log_name: self.manifest.log_name().map(str::to_owned),
            backend: self.backend.clone(),
            caches: self.caches.clone(),
            budget: self.budget.clone(),
            live_feeds: self.live_feeds.clone(),
            cache_place: self.node_cache.place.clone(),
            bucket_keys: self.bucket_keys.clone(),
            replica: self.replica.clone(),
        }
    }

    /// Makes this handle use the store, caches, budget and live feeds of another on the same
    /// repository (a server gives all its handles one set).
    pub fn set_shared(&mut self, shared: Shared) {
        self.backend = shared.backend;
        self.caches = shared.caches;
        self.budget = shared.budget;
        self.live_feeds = shared.live_feeds;
        self.node_cache = NodeCacheSlot::at(shared.cache_place);
    }

    /// Keeps this machine's cache of the repository under `base` (`<base>/<repository id>/`)
    /// instead of the default (`TROVE_CACHE_DIR`, else `$XDG_CACHE_HOME/trove`, else
    /// `~/.cache/trove`): `--cache-dir`.
    pub fn set_cache_dir(&mut self, base: &Path) {
        self.node_cache = NodeCacheSlot::under(base, &self.config.id);
    }

    /// Where this handle's node-local cache is (a fleet's other nodes read with it).
    pub(crate) fn node_cache_place(&self) -> CachePlace {
        self.node_cache.place.clone()
    }

    /// The directory of this machine's cache of the repository; None for one in memory or when
    /// no cache directory could be named.
    pub fn cache_dir(&self) -> Option<&Path> {
        match &self.node_cache.place {
            CachePlace::Dir(d) => Some(d),
            CachePlace::Memory(_) | CachePlace::Nowhere(_) => None,
        }
    }

    /// The node-local cache, opened on first use; None when it cannot be (said once in the
    /// log): a snapshot then reads every file, which costs time, never correctness.
    pub(crate) fn node_cache(&self) -> Option<&NodeCache> {
        self.node_cache
            .opened
            .get_or_init(|| {
                let opened = match &self.node_cache.place {
                    CachePlace::Dir(dir) => NodeCache::open(dir),
                    CachePlace::Memory(name) => NodeCache::in_memory(name),
                    CachePlace::Nowhere(why) => {
                        tracing::warn!("{why}; every snapshot reads every file");
                        return None;
                    }
                };
                opened
                    .map_err(|e| tracing::warn!(error = %e, "the node-local cache cannot be used: every snapshot reads every file until it can"))
                    .ok()
            })
            .as_ref()
    }

    /// Makes this handle read live trees through `feeds` (a server gives all its handles one):
    /// a live diff then reads again only what changed since the last one.
    pub fn set_live_feeds(&mut self, feeds: std::sync::Arc<crate::ops::live_read::LiveFeeds>) {
        self.live_feeds = Some(feeds);
    }

    /// Takes cold snapshots of more than `files` files in batches of about `files` (50,000
    /// unless set; at least 1): each batch's files are read, their trees built and recorded in
    /// the manifest before the next batch is walked, so memory follows the batch, not the tree.
    pub fn set_batch_files(&mut self, files: u64) {
        self.batch_files = files.max(1);
    }

    /// A share of the memory budget for holding `bytes` whole, waiting (until the deadline)
    /// for other reads to give theirs back.
    pub fn hold(&self, bytes: u64) -> Result<crate::base::budget::Permit> {
        self.budget.acquire(bytes, self.deadline())
    }

    /// The deadline of the current caller's work, if any.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.deadline.get()
    }

    /// `timeout` if the deadline has passed; `stage` names what was being done.
    pub fn check_deadline(&self, stage: &str) -> Result<()> {
        match self.deadline.get() {
            Some(d) if std::time::Instant::now() >= d => Err(Error::timeout(stage, false)),
            _ => Ok(()),
        }
    }

    /// Where workspace lock files live: `locks/` in the repository, or a temporary directory
    /// for an in-memory one.
    pub(crate) fn locks_dir(&self) -> std::path::PathBuf {
        match self.root() {
            Some(r) => r.join("locks"),
            None => std::env::temp_dir().join("trove-locks"),
        }
    }

    /// Waits for the lock of the workspace at `live_dir`, giving up at the request's deadline.
    pub(crate) fn lock_live(&self, live_dir: &Path) -> Result<crate::fs::lock::Locked> {
        crate::fs::lock::Locked::acquire(&self.locks_dir(), live_dir, self.deadline())
    }

    /// Records packs just written, and indexes their objects, inside the caller's write
    /// transaction (a snapshot's, a repair's, a rewrite's is separate: it also sets a level),
    /// after checking that each pack's file is still there. A pack is named by its bytes, and a
    /// garbage collection may have deleted a retired or orphan pack with these very bytes after
    /// they were written; it deletes a file only inside its own write transaction, so not
    /// between this check and the caller's commit. Snapshots and repairs record through here, so
    /// none can forget the check (gc's rewrite records its own, holding `gc.lock`).
    pub(crate) fn record_packs(&self, tx: &rusqlite::Connection, packs: &[SealedPack], now_ns: i64) -> Result<()> {
        for p in packs {
            self.pack_still_there(&p.key)?;
        }
        crate::manifest::objects::insert_packs(tx, packs, now_ns)
    }

    /// A pack this process just wrote, before the manifest points at it: one a garbage
    /// collection running at the same time deleted is a conflict, not a pack to point at.
    pub(crate) fn pack_still_there(&self, key: &str) -> Result<()> {
        match self.backend.size(key) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "pack {key} just written was deleted by a garbage collection running at the same time: run the command again"
                ),
            )),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{ObjectId, PackWriter};

    fn one_pack(repo: &Repo, content: &[u8]) -> Result<Vec<SealedPack>> {
        let id = ObjectId::of(content);
        let encoded = crate::object::blob::encode(&id, content, 3)?;
        let ((), packs) = PackWriter::run(repo.backend(), 1 << 20, |w| w.add(id, content.len() as u64, &encoded))?;
        Ok(packs)
    }

    fn pack_rows(repo: &Repo) -> Result<i64> {
        repo.manifest
            .conn()
            .query_row("SELECT count(*) FROM packs", [], |r| r.get(0))
            .map_err(|e| Error::db("counting", e))
    }

    /// A config.json whose chunking threshold would make single objects over the blob limit is
    /// refused when the repository opens, naming it, before anything is written.
    #[test]
    fn a_chunking_threshold_over_the_blob_limit_is_refused() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("create", Path::new("tmp"), e))?;
        let path = tmp.path().join("repo");
        drop(Repo::init(&path, "test")?);
        let cfg = path.join(CONFIG_FILE);
        let text = fs::read_to_string(&cfg).map_err(|e| Error::io("read", &cfg, e))?;
        let mut json: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::internal(e.to_string()))?;
        json["chunking"]["threshold"] = serde_json::json!(crate::object::blob::MAX_RAW + 1);
        fs::write(&cfg, json.to_string()).map_err(|e| Error::io("write", &cfg, e))?;
        let err = Repo::open(&path).err().ok_or_else(|| Error::internal("a threshold over the blob limit opened"))?;
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains(&path.display().to_string()), "{err}");
        json["chunking"]["threshold"] = serde_json::json!(crate::object::blob::MAX_RAW);
        fs::write(&cfg, json.to_string()).map_err(|e| Error::io("write", &cfg, e))?;
        Repo::open(&path)?;
        Ok(())
    }

    #[test]
    fn packs_are_recorded_only_while_their_files_are_there() -> Result<()> {
        let repo = Repo::in_memory()?;
        let kept = one_pack(&repo, b"kept")?;
        repo.manifest.write(|tx| repo.record_packs(tx, &kept, now_ns()))?;
        assert_eq!(pack_rows(&repo)?, 1);

        // A collection deleted the file (same bytes, same name) between the write and the
        // transaction recording it: the transaction fails and records nothing.
        let lost = one_pack(&repo, b"lost")?;
        repo.backend().delete(&lost[0].key)?;
        let err = repo.manifest.write(|tx| repo.record_packs(tx, &lost, now_ns())).err();
        let err = err.ok_or_else(|| Error::internal("a pack without its file was recorded"))?;
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert!(err.message().contains(&lost[0].key), "{err}");
        assert_eq!(pack_rows(&repo)?, 1);
        Ok(())
    }
}
