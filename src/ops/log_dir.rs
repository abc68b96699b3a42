//! A repository in a directory whose manifest is its record log (`trove init --layout log`,
//! format 2): the durable form a bucket keeps, in a directory.
//!
//! The directory holds `config.json`, `packs/…`, `log/<seq>` (the record log's segments, as in a
//! bucket but not sealed: a directory is guarded by its permissions, as a format-1 directory's
//! `manifest.db` is), `replica/<seq>` (copies of a replica, only when `TROVE_LOG_COPY_EVERY` asks
//! for them), the audit signing key and the workspace locks. The SQLite manifest every query runs
//! on is this node's replica of the log, `<cache>/<repository id>/manifest-<hash>.db` (by the
//! directory's canonical path: a copy keeps the id), rebuilt from the log when missing:
//! deleting the cache directory loses nothing the log holds. What this buys is size: a row
//! change is a few compressed bytes in a segment where an SQLite page keeps it uncompressed in a
//! B-tree a quarter free, so an agent's hundreds of edits grow the repository about as much as
//! they grow a git repository.

use std::path::Path;
use std::sync::Arc;

use crate::base::error::{Error, ErrorKind, Result};
use crate::manifest::log::{key, open_replica, position, Log};
use crate::object::{Backend, LocalBackend};
use crate::repo::{cache_base_or, dir_copy_every, Config, NodeCacheSlot, Repo, LOG_DIR};

impl Repo {
    /// Opens the repository of [`crate::Layout::Log`] in directory `path` (its `config` read
    /// already), bringing this node's replica of its manifest up to date and settling what a
    /// crash interrupted.
    pub(crate) fn open_log_dir(path: &Path, config: Config, cache_base: Option<&Path>) -> Result<Repo> {
        if !path.join(LOG_DIR).is_dir() {
            return Err(Error::corrupt(format!(
                "{} is missing beside its config.json (the repository's record log): restore it from a backup",
                path.join(LOG_DIR).display()
            )));
        }
        let repo = Repo::over_log_dir(path, config, cache_base)?;
        if let Some(why) = repo.manifest.read_only() {
            repo.defer_recovery(why)?;
            return Ok(repo);
        }
        repo.settle_on_open()?;
        Ok(repo)
    }

    /// A handle on the directory of [`crate::Layout::Log`] at `path`: its store, and this node's
    /// replica of its manifest under `cache_base` (None: the default cache directory), caught
    /// up with the log.
    pub(crate) fn over_log_dir(path: &Path, config: Config, cache_base: Option<&Path>) -> Result<Repo> {
        let base = cache_base_or(cache_base, || format!("{}, a directory of the log layout, keeps", path.display()))?;
        let node_cache = NodeCacheSlot::under(&base, &config.id);
        let dir = node_cache.dir().ok_or_else(|| {
            Error::corrupt(format!(
                "the id in {}'s config.json is not 32 hex digits, so it names no cache directory for the manifest: restore config.json from a backup",
                path.display()
            ))
        })?;
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        let store: Arc<dyn Backend> = Arc::new(LocalBackend::new(path));
        let replica = dir.join(replica_name(path));
        let log =
            || -> Result<Log> { Ok(Log::new(store.clone(), path.display().to_string()).copy_every(dir_copy_every()?)) };
        // One process at a time opens this host's replica of the directory and, if need be,
        // sets it aside: two doing it at once would set aside the fresh one the other opened.
        let mut lock_path = replica.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = std::path::PathBuf::from(lock_path);
        let lock = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io("open", &lock_path, e))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| Error::io("lock", &lock_path, e.into()))?;
        let mut manifest = open_replica(&replica, log()?)?;
        // A replica that applied a segment the log does not hold is of another log: the
        // directory was restored from an older backup (or its log lost its end). It is read
        // again from the log as it is; `check` reports a log that lost what a replica holds.
        let at = position(manifest.conn())?;
        if at > 0 && manifest.read_only().is_none() {
            if let Err(e) = store.size(&key(at)) {
                if e.kind() != ErrorKind::NotFound {
                    return Err(e);
                }
                // Its WAL folded into the file first, so that a kill while it is moved aside
                // leaves no WAL of the old replica beside the new one.
                manifest
                    .conn()
                    .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                    .map_err(|e| Error::db("folding the replica's WAL in before setting it aside", e))?;
                drop(manifest);
                let aside = set_aside(&replica, at)?;
                tracing::warn!(replica = %aside.display(), position = at, store = %path.display(), "this host's replica applied a segment the log does not hold (the directory was restored from an older backup, or its log lost its end): it is read again from the log, the old replica kept aside");
                manifest = open_replica(&replica, log()?)?;
                let again = position(manifest.conn())?;
                if again > 0 && store.size(&key(again)).is_err() {
                    return Err(Error::corrupt(format!(
                        "this host's replica of {} applied segment {again} again after it was read anew, and the log does not hold it: check the directory's log/ for damage",
                        path.display()
                    )));
                }
            }
        }
        drop(lock);
        let mut repo = Repo::assemble(Some(path.to_path_buf()), node_cache, config, store, manifest);
        repo.replica = Some(replica);
        Ok(repo)
    }
}

/// The replica's file name in the node's directory of the repository: by the directory's
/// canonical path as well as the repository's id (the cache directory's name), since a copied
/// directory keeps the id; two copies sharing a replica would each write segments the other's
/// log lacks.
fn replica_name(path: &Path) -> String {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let hash = blake3::hash(canonical.as_os_str().as_encoded_bytes());
    format!("manifest-{}.db", &hash.to_hex()[..16])
}

/// Moves the replica at `path` (with its WAL and shared-memory files) aside, to
/// `<path>.ahead-<position>-<ns>`, so that what it holds and the log lost stays readable: the path
/// it is now at.
fn set_aside(path: &Path, position: u64) -> Result<std::path::PathBuf> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".ahead-{position}-{}", crate::base::time::now_ns()));
    for suffix in ["", "-wal", "-shm"] {
        let (mut from, mut to) = (path.as_os_str().to_owned(), aside.clone());
        from.push(suffix);
        to.push(suffix);
        match std::fs::rename(&from, &to) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("set aside the replica", Path::new(&from), e))
            }
            _ => {}
        }
    }
    Ok(aside.into())
}
