//! A dry run of garbage collection: the collection itself, run on a copy of the manifest over
//! a store that writes and deletes nothing, so that what it reports (what it would condemn,
//! delete, rewrite, and the bytes it would reclaim) is counted by the very code a real run
//! counts with, not by an estimate beside it that could drift from it.
//!
//! Its cost is a real run's reads and encoding (a rewrite's blobs are read and encoded again to
//! learn their size) plus a copy of the manifest in the temporary directory; the repository and
//! its manifest are not written. It holds the collection lock, as a run does, so no collection
//! changes the repository under it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::manifest::Manifest;
use crate::object::backend::Staged;
use crate::object::Backend;
use crate::repo::Repo;

use super::{GcOptions, GcReport};

impl Repo {
    /// What a collection with `opts` would report now (see the module docs); the caller holds
    /// the collection lock.
    pub(super) fn gc_dry_run(&self, opts: &GcOptions) -> Result<GcReport> {
        let dir = tempfile::Builder::new()
            .prefix("trove-gc-dry-")
            .tempdir()
            .map_err(|e| Error::io("create a directory for", &std::env::temp_dir(), e))?;
        let copy = dir.path().join("manifest.db");
        self.manifest.copy_to(&copy)?;
        let store = Arc::new(DryStore { inner: self.backend.clone(), state: Mutex::default() });
        let shadow = self.scratch(Manifest::open_copy(&copy)?, store);
        // By this host's clock: the store's is read by writing to it, which a dry run does not.
        let mut report = shadow.collect(&GcOptions { dry_run: false, ..opts.clone() }, 0)?;
        report.dry_run = true;
        Ok(report)
    }
}

/// A store that reads through to the repository's and writes and deletes only in its own
/// bookkeeping: what a run wrote is listed with its size (never its bytes), what it deleted is
/// gone from listings, so a later stage of the run sees what it would have seen.
struct DryStore {
    inner: Arc<dyn Backend>,
    state: Mutex<DryState>,
}

#[derive(Default)]
struct DryState {
    /// Keys written, with their sizes.
    made: BTreeMap<String, u64>,
    /// Keys of the repository's store deleted.
    gone: BTreeSet<String>,
}

impl DryStore {
    fn state(&self) -> std::sync::MutexGuard<'_, DryState> {
        // The bookkeeping stays consistent whatever panicked while it was held: each change is
        // one insert or remove.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn made(&self, key: &str, size: u64) {
        let mut st = self.state();
        st.gone.remove(key);
        st.made.insert(key.to_string(), size);
    }
}

impl Backend for DryStore {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.made(key, bytes.len() as u64);
        Ok(())
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let st = self.state();
        if st.made.contains_key(key) {
            return Err(Error::internal(format!("a dry run read back {key}, which it did not keep")));
        }
        if st.gone.contains(key) {
            return Err(Error::not_found(format!("{key} was deleted in this dry run")));
        }
        drop(st);
        self.inner.get_range(key, offset, len)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let listed = self.inner.list(prefix)?;
        let st = self.state();
        let mut keys: BTreeSet<String> = listed.into_iter().filter(|k| !st.gone.contains(k)).collect();
        keys.extend(st.made.keys().filter(|k| k.starts_with(prefix)).cloned());
        Ok(keys.into_iter().collect())
    }

    fn size(&self, key: &str) -> Result<u64> {
        let st = self.state();
        if let Some(size) = st.made.get(key) {
            return Ok(*size);
        }
        if st.gone.contains(key) {
            return Err(Error::not_found(format!("{key} was deleted in this dry run")));
        }
        drop(st);
        self.inner.size(key)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let mut st = self.state();
        st.made.remove(key);
        st.gone.insert(key.to_string());
        Ok(())
    }

    fn stage(&self, _dir: &str) -> Result<Box<dyn Staged + '_>> {
        Ok(Box::new(Counted { store: self, len: 0 }))
    }
}

/// A value being "written" to a [`DryStore`]: only its length is kept.
struct Counted<'a> {
    store: &'a DryStore,
    len: u64,
}

impl Staged for Counted<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn commit(self: Box<Self>, key: &str) -> Result<()> {
        self.store.made(key, self.len);
        Ok(())
    }
}
