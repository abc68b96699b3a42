//! A repository in an S3-compatible bucket: creating one (its key file, its record log, its
//! config), and opening one over this node's replica of its manifest.
//!
//! The bucket is the repository: `keys/<id>` (key files, the only values not sealed), `config`
//! (sealed JSON), `packs/…` and `log/<seq>` (sealed). The node keeps in its cache directory,
//! `<cache>/<repository id>/`, what is its own: the manifest's replica (`manifest.db`, rebuilt
//! from the log when missing), the directory cache, the workspace locks, the pack cache
//! (`pack-cache/`, `object/pack_cache.rs`) and the audit signing key. Deleting that directory
//! loses nothing the bucket acknowledged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::now_ns;
use crate::manifest::log::{open_replica, Log, Owner, COPY_EVERY};
use crate::model::audit::AuditRecord;
use crate::object::keyfile::{self, KeyFile, MAX_KEY_FILE};
use crate::object::pack_cache::{Warmed, DEFAULT_CACHE_SIZE};
use crate::object::{probe, Backend, PackCache, S3Backend, SealedBackend, Stretch};
use crate::repo::{
    AuditSettings, BucketAccess, BucketKeys, BucketStore, Config, Layout, NodeCacheSlot, Repo, CONFIG_LIMIT,
    MANIFEST_FILE, NODES_FORMAT,
};

/// The config's key in the bucket.
const CONFIG_KEY: &str = "config";
/// Where key files are.
const KEYS: &str = "keys/";
/// The pack cache's directory in the node's directory of the repository.
const PACK_CACHE: &str = "pack-cache";
/// The file in a node's directory holding this host's id among those sharing the bucket.
const HOST_FILE: &str = "host";

/// A key file of a bucket, as `trove key list` shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    /// The key file's id: its name under `keys/`.
    pub id: String,
    /// The host that made it.
    pub host: String,
    /// When it was made, RFC 3339 UTC.
    pub created: String,
    /// Whether it is the one this handle was opened with.
    pub current: bool,
}

/// What this node keeps of a bucket it opened, so that the next open asks the store nothing
/// before the log: the key file that opened it (still wrapped: the passphrase is needed as
/// before) and the config, which never changes. Rebuilt from the bucket when missing, damaged,
/// or no longer opening with the passphrase given.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Remembered {
    /// The store's identity (endpoint and `s3://bucket/prefix`), checked on reading.
    store: String,
    key_name: String,
    key_file: KeyFile,
    config: Config,
}

/// Where this node remembers the bucket of `identity`: `<base>/buckets/<hash>.json`.
fn remembered_path(base: &Path, identity: &str) -> PathBuf {
    base.join("buckets").join(format!("{}.json", &blake3::hash(identity.as_bytes()).to_hex()[..32]))
}

fn recall(path: &Path, identity: &str) -> Option<Remembered> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice::<Remembered>(&bytes) {
        // The key file held to the bounds a bucket's is held to (its stretching, above all).
        Ok(m) if m.store == identity => {
            let again = serde_json::to_vec(&m.key_file).ok()?;
            match KeyFile::parse(&m.key_name, &again) {
                Ok(_) => Some(m),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "the key file this host remembered is refused: read again from the bucket");
                    None
                }
            }
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "what this node remembered of a bucket does not parse: read again from the bucket");
            None
        }
    }
}

/// Keeps `m` at `path`, atomically; a failure only costs the next open its requests.
fn remember(path: &Path, m: &Remembered) {
    let done = (|| -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer_pretty(&mut tmp, m)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    })();
    if let Err(e) = done {
        tracing::warn!(path = %path.display(), error = %e, "could not remember the bucket's key file and config: the next open reads them again");
    }
}

/// Where an open found its key: remembered with the config by this host, or listed in the bucket
/// (its key file then to be remembered with the config read).
enum Found {
    Remembered(Config),
    Listed(KeyFile),
}

/// The key, key file name and config this host remembered, if the passphrase opens that key
/// file and it is still in the bucket (`trove key remove` revokes a passphrase on every host,
/// for one request).
fn recalled_key(
    store: &S3Backend,
    remembered: Option<Remembered>,
    passphrase: &[u8],
) -> Result<Option<(crate::object::SealKey, String, Config)>> {
    let Some(m) = remembered else { return Ok(None) };
    match m.key_file.unwrap(&m.key_name, passphrase) {
        Ok(key) if store.size(&m.key_name).is_ok() => Ok(Some((key, m.key_name, m.config))),
        Ok(_) => {
            tracing::info!(key = %m.key_name, "the key file this host remembered is gone from the bucket");
            Ok(None)
        }
        // Another passphrase, maybe of another key file: the bucket's are tried.
        Err(e) if e.kind() == ErrorKind::Unauthorized => Ok(None),
        Err(e) => Err(e),
    }
}

/// The key of the first key file in the bucket the passphrase opens, with its name and file.
fn listed_key(store: &S3Backend, name: &str, passphrase: &[u8]) -> Result<(crate::object::SealKey, String, KeyFile)> {
    let keys = store.list(KEYS)?;
    if keys.is_empty() {
        return Err(Error::not_found(format!(
            "{name} is not a trove repository (it has no key files): run `trove init` there, or point --repo / TROVE_REPO at one"
        )));
    }
    for k in &keys {
        // One damaged key file must not lock out the passphrases of the others.
        let file = match store.get_whole(k, MAX_KEY_FILE).and_then(|bytes| KeyFile::parse(k, &bytes)) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                tracing::warn!(key = %k, error = %e, "a key file of the bucket is skipped");
                continue;
            }
            Err(e) => return Err(e),
        };
        match file.unwrap(k, passphrase) {
            Ok(key) => return Ok((key, k.clone(), file)),
            Err(e) if e.kind() == ErrorKind::Unauthorized => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::new(
        ErrorKind::Unauthorized,
        format!(
            "no key file of {name} ({} of them) opens with the passphrase given: check TROVE_PASSWORD / TROVE_PASSWORD_FILE",
            keys.len()
        ),
    ))
}

/// The repository's config, read from the bucket.
fn read_config(sealed: &dyn Backend, name: &str) -> Result<Config> {
    let bytes = match sealed.get_whole(CONFIG_KEY, CONFIG_LIMIT) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(Error::not_found(format!(
            "{name} has key files but no config: its `trove init` was interrupted; remove its values and run it again"
        )))
        }
        other => other?,
    };
    serde_json::from_slice(&bytes).map_err(|e| Error::corrupt(format!("the config of {name} does not parse ({e})")))
}

/// This machine's name, for key files.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

impl Repo {
    /// Creates a repository under `prefix` of `bucket`, which must hold nothing there yet: a key
    /// file wrapping a new key under the passphrase, the log's first segment (the init's audit
    /// record), then the config, last, so an interrupted init is not a repository.
    pub fn init_bucket(
        bucket: &str,
        prefix: &str,
        actor: &str,
        audit: AuditSettings,
        layout: Layout,
        access: &BucketAccess,
    ) -> Result<Repo> {
        let store = S3Backend::open(bucket, prefix, &access.settings)?;
        let name = store.describe();
        let format = match layout {
            Layout::Log => crate::repo::FORMAT,
            Layout::Nodes => NODES_FORMAT,
            Layout::Sqlite => {
                return Err(Error::invalid_argument(format!(
                    "{name} is a bucket, whose manifest is a record log, never one SQLite file: use --layout log (one log all hosts write) or nodes (a log per node)"
                )))
            }
        };
        let passphrase = access.password(&format!("creating a repository in {name}"))?.to_vec();
        if !store.list("")?.is_empty() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{name} already holds values: choose a new prefix or an empty bucket for the repository"),
            ));
        }
        let capabilities = probe(&store)?;
        if !capabilities.conditional_create {
            return Err(Error::invalid_argument(format!(
                "{name} replaces a value written twice instead of refusing the second create (If-None-Match: *): two writers could replace each other's records there, so trove does not keep a repository in it"
            )));
        }
        let key = keyfile::new_seal_key()?;
        let file = keyfile::wrap(&key, &passphrase, access.stretch.unwrap_or(Stretch::DEFAULT), &host())?;
        let json = serde_json::to_vec_pretty(&file).map_err(|e| Error::internal(e.to_string()))?;
        let key_name = format!("{KEYS}{}", crate::base::random::random_hex()?);
        store.put(&key_name, &json)?;
        let identity = store.identity();
        let sealed: Arc<BucketStore> = Arc::new(SealedBackend::new(PackCache::new(store), key.clone()));
        let config = Config {
            capabilities: Some(capabilities),
            audit,
            format,
            ..Config::new(format!("{name} {}", now_ns()).as_bytes())
        };
        let repo = Repo::over_bucket(sealed.clone(), (key, key_name.clone()), &name, config.clone(), access)?;
        repo.audit(AuditRecord::ok(now_ns(), actor, "init"))?;
        let json = serde_json::to_vec_pretty(&config).map_err(|e| Error::internal(e.to_string()))?;
        sealed.put(CONFIG_KEY, &json)?;
        let base = access.cache_base()?;
        remember(&remembered_path(&base, &identity), &Remembered { store: identity, key_name, key_file: file, config });
        Ok(repo)
    }

    /// Opens the repository under `prefix` of `bucket` with the passphrase of one of its key
    /// files, bringing this node's replica of its manifest up to date.
    pub fn open_bucket(bucket: &str, prefix: &str, access: &BucketAccess) -> Result<Repo> {
        let store = S3Backend::open(bucket, prefix, &access.settings)?;
        let name = store.describe();
        let identity = store.identity();
        let memo = remembered_path(&access.cache_base()?, &identity);
        let passphrase = access.password(&format!("opening {name}"))?;
        let (key, key_name, found) = match recalled_key(&store, recall(&memo, &identity), passphrase)? {
            Some((key, key_name, config)) => (key, key_name, Found::Remembered(config)),
            None => {
                let (key, key_name, file) = listed_key(&store, &name, passphrase)?;
                (key, key_name, Found::Listed(file))
            }
        };
        let sealed = Arc::new(SealedBackend::new(PackCache::new(store), key.clone()));
        let config = match found {
            Found::Remembered(config) => config,
            Found::Listed(key_file) => {
                let config = read_config(sealed.as_ref(), &name)?;
                let m = Remembered { store: identity, key_name: key_name.clone(), key_file, config: config.clone() };
                remember(&memo, &m);
                config
            }
        };
        config.check(&name)?;
        if config.format != crate::repo::FORMAT && config.format != NODES_FORMAT {
            return Err(Error::invalid_argument(format!(
                "repository {name} has format {}, which this trove does not read in a bucket (only {} and {NODES_FORMAT}): upgrade trove",
                config.format,
                crate::repo::FORMAT
            )));
        }
        let repo = Repo::over_bucket(sealed, (key, key_name), &name, config, access)?;
        if let Some(why) = repo.manifest.read_only() {
            repo.defer_recovery(why)?;
            return Ok(repo);
        }
        repo.settle_on_open()?;
        Ok(repo)
    }

    /// A handle on a bucket's repository: its sealed store, and this node's replica of its
    /// manifest in the cache directory, caught up with the log.
    fn over_bucket(
        sealed: Arc<BucketStore>,
        key: (crate::object::SealKey, String),
        name: &str,
        config: Config,
        access: &BucketAccess,
    ) -> Result<Repo> {
        let base = access.cache_base()?;
        let dir = base.join(&config.id);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        // In a bucket of a log per node, this node's replica follows its own log; the host id
        // sessions and checkpoint keys are recorded with is the node's name.
        let (owner, replica, host) = if config.format == NODES_FORMAT {
            let node = access.node_name()?;
            let writer = crate::ops::fleet::writer_id(&dir, &node)?;
            let owner = Owner::Node { node: node.to_string(), writer };
            (owner, crate::ops::fleet::replica_path(&dir, &node), std::sync::OnceLock::from(node.to_string()))
        } else {
            (Owner::Shared, dir.join(MANIFEST_FILE), Default::default())
        };
        let keys = BucketKeys {
            store: sealed.clone(),
            key: key.0,
            opened_with: key.1,
            stretch: access.stretch.unwrap_or(Stretch::DEFAULT),
            copy_every: access.copy_every.unwrap_or(COPY_EVERY),
            host,
            owner: owner.clone(),
            writers: Default::default(),
        };
        sealed.inner().attach(&dir.join(PACK_CACHE), access.cache_size.unwrap_or(DEFAULT_CACHE_SIZE))?;
        let store: Arc<dyn Backend> = sealed;
        let log = Log::new(store.clone(), name)
            .copy_every(keys.copy_every)
            .of_node(owner.clone())
            .sharing(keys.writers.clone());
        let manifest = open_replica(&replica, log)?;
        let node_cache = NodeCacheSlot::under(&base, &config.id);
        let mut repo = Repo::assemble(Some(dir), node_cache, config, store, manifest);
        repo.bucket_keys = Some(Arc::new(keys));
        repo.replica = Some(replica);
        // The signing key is this node's (never in the bucket): made with its directory.
        if let Some(path) = repo.audit_key_path() {
            if !path.exists() {
                let made = crate::fs::keyfile::create_key(&path, &repo.log_origin())?;
                let _ = repo.audit_key.set(made);
            }
        }
        Ok(repo)
    }
}

impl Repo {
    /// Fetches the packs `keys` name (in the order a read will want them) into this node's
    /// cache, whole and several at once, as many as its bound holds: what a restore does
    /// before it reads, so that it reads each pack with one request instead of one a blob.
    /// Nothing for a repository in a directory, whose packs are local already.
    pub(crate) fn warm_packs<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Result<Warmed> {
        let Some(bucket) = self.bucket_keys.as_deref() else { return Ok(Warmed::default()) };
        let conn = self.manifest.conn();
        let mut packs = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            if seen.insert(key) {
                if let Some(size) = crate::manifest::objects::pack_size(conn, key)? {
                    packs.push((key.to_owned(), crate::object::seal::sealed_len(size)));
                }
            }
        }
        let warmed = bucket.store.inner().warm(&packs);
        tracing::debug!(?warmed, "packs fetched into the read cache");
        Ok(warmed)
    }

    /// This host's id among the hosts sharing a bucket (None for a directory): 24 random hex
    /// digits, made on first use and kept in the node's directory. A session records the host
    /// that serves it, whose reaper alone ends it (ending one snapshots that host's directory).
    /// A node directory deleted makes a new host: the sessions the old id served are then
    /// ended by `trove session end` or a `DELETE` on the host holding their directories.
    pub(crate) fn host_id(&self) -> Result<Option<String>> {
        let (Some(keys), Some(root)) = (&self.bucket_keys, self.root()) else { return Ok(None) };
        if let Some(id) = keys.host.get() {
            return Ok(Some(id.clone()));
        }
        let id = self.read_or_make_host_id(root)?;
        Ok(Some(keys.host.get_or_init(|| id).clone()))
    }

    /// The id in `root`'s host file, made there first if it has none.
    fn read_or_make_host_id(&self, root: &Path) -> Result<String> {
        let valid = |id: &str| id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit());
        let make = || -> Result<String> {
            let mut bytes = [0u8; 12];
            crate::base::random::fill_random(&mut bytes)?;
            Ok(hex::encode(bytes))
        };
        crate::fs::idfile::read_or_make(
            &root.join(HOST_FILE),
            valid,
            make,
            "a host id is 24 hex digits; delete the file, and this host takes a new one",
        )
    }

    /// For a repository in a bucket, a guard under which reads of packs go to the bucket,
    /// passing this node's pack cache by: what `check --read-data` verifies is the bucket.
    pub(crate) fn reading_the_bucket(&self) -> Option<crate::object::pack_cache::Bypass<'_>> {
        self.bucket_keys.as_deref().map(|b| b.store.inner().bypass())
    }

    fn bucket_keys(&self) -> Result<&BucketKeys> {
        self.bucket_keys.as_deref().ok_or_else(|| {
            Error::invalid_argument(
                "this repository is a directory: it has no key files (only a repository in a bucket is sealed under a passphrase)",
            )
        })
    }

    /// The key files of this repository in a bucket, oldest first.
    pub fn keys(&self) -> Result<Vec<KeyInfo>> {
        let keys = self.bucket_keys()?;
        let raw = keys.store.inner();
        let mut out = Vec::new();
        for k in raw.list(KEYS)? {
            let file = match raw.get_whole(&k, MAX_KEY_FILE).and_then(|bytes| KeyFile::parse(&k, &bytes)) {
                Ok(file) => file,
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    tracing::warn!(key = %k, error = %e, "a key file of the bucket is not listed");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let id = k.trim_start_matches(KEYS).to_string();
            out.push(KeyInfo { id, host: file.host, created: file.created, current: k == keys.opened_with });
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Adds a key file wrapping this repository's key under `passphrase` (recorded in the audit
    /// log by `actor`).
    pub fn add_key(&self, passphrase: &[u8], actor: &str) -> Result<KeyInfo> {
        let keys = self.bucket_keys()?;
        let file = keyfile::wrap(&keys.key, passphrase, keys.stretch, &host())?;
        let json = serde_json::to_vec_pretty(&file).map_err(|e| Error::internal(e.to_string()))?;
        let id = crate::base::random::random_hex()?;
        keys.store.inner().put(&format!("{KEYS}{id}"), &json)?;
        let mut rec = AuditRecord::ok(now_ns(), actor, "key-add");
        rec.details = serde_json::json!({ "key": id, "host": file.host });
        self.audit(rec)?;
        Ok(KeyInfo { id, host: file.host, created: file.created, current: false })
    }

    /// Removes key file `id`: never the one this handle was opened with, nor the last.
    pub fn remove_key(&self, id: &str, actor: &str) -> Result<()> {
        let keys = self.bucket_keys()?;
        let all = self.keys()?;
        let Some(found) = all.iter().find(|k| k.id == id) else {
            return Err(Error::not_found(format!("no key file {id}: list them with `trove key list`")));
        };
        if found.current {
            return Err(Error::invalid_argument(format!(
                "key file {id} is the one this command was opened with: open with another passphrase to remove it"
            )));
        }
        // Hosts removing each other's key files at once could still leave none: the check is
        // what one host can do, the last word is the store's listing.
        if all.len() < 2 {
            return Err(Error::invalid_argument(format!(
                "key file {id} is the repository's last: add another (`trove key add`) before removing it"
            )));
        }
        keys.store.inner().delete(&format!("{KEYS}{id}"))?;
        let mut rec = AuditRecord::ok(now_ns(), actor, "key-remove");
        rec.details = serde_json::json!({ "key": id, "host": found.host });
        self.audit(rec)?;
        Ok(())
    }
}
