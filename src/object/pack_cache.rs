//! The node's read cache of a bucket's packs: whole packs fetched in parallel into a local
//! directory bounded in bytes (`--cache-size`), reads of them served from disk.
//!
//! It sits beneath the sealing (`seal.rs`): what it keeps are the bucket's sealed bytes, opened
//! and verified on every read exactly as bytes read from the bucket are, so the cache holds
//! nothing in the clear and a damaged cached file is never taken for content (one that does not
//! open is dropped, [`Backend::drop_cached`], and the bucket asked). Packs never change once
//! written, so a cached one is never stale; one deleted through this backend is dropped from
//! the cache too. A fetched pack appears under its name whole, by rename, so a killed fetch
//! leaves only a temporary, removed by an attach once it is an hour old; deleting the
//! directory loses nothing (the next reads go to the bucket again).
//!
//! Several processes of one host may share the directory: one may evict a file another is
//! reading (its open descriptor still reads it) or about to open (that read goes to the bucket).
//! Each process keeps the bound over the files it knows (those found when it attached, and
//! those it fetched), so two processes fetching at once may together pass it until the next
//! attach; the order of eviction is by last use within a process and by fetch time across
//! attaches. A read of a cached file that is shorter than the read needs drops the file and
//! asks the bucket, whose answer is the authority. Only values under `packs/` are cached;
//! everything else (the log, key files, the config) passes through.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::base::error::{Error, Result};
use crate::object::backend::{Backend, Staged};

/// The default bound of a repository's pack cache on a node: 2 GiB.
pub const DEFAULT_CACHE_SIZE: u64 = 2 << 30;
/// Packs fetched at once by [`PackCache::warm`]: the fetches wait on the network, not the CPU.
const FETCHERS: usize = 4;
/// What a fetch's temporary is named with, so that an attach knows a killed fetch's leftovers.
const TEMPORARY: &str = ".fetching-";

/// A backend whose packs are read from a bounded local cache once fetched.
pub struct PackCache<B> {
    inner: B,
    /// Where, once the repository's cache directory is known ([`PackCache::attach`]); until
    /// then (and with a bound of 0) every call passes through.
    place: OnceLock<Place>,
    /// Readers that must see the bucket's own bytes (`check --read-data`): while any is
    /// running, reads pass the cache by.
    bypass: AtomicUsize,
}

/// While held, reads of a [`PackCache`] go to the store beneath ([`PackCache::bypass`]).
pub struct Bypass<'a>(&'a AtomicUsize);

impl Drop for Bypass<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Place {
    dir: PathBuf,
    limit: u64,
    state: Mutex<State>,
}

/// The files this process knows are in the directory, and when each was last used.
#[derive(Default)]
struct State {
    files: HashMap<String, Held>,
    held: u64,
    tick: u64,
}

#[derive(Clone, Copy)]
struct Held {
    size: u64,
    used: u64,
}

/// What [`PackCache::warm`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Warmed {
    /// Packs fetched whole.
    pub fetched: u64,
    /// Their stored bytes.
    pub bytes: u64,
    /// Packs already cached.
    pub cached: u64,
    /// Packs left to ranged reads: over the bound, or whose fetch failed (logged).
    pub skipped: u64,
}

/// The cache file of `key`, when it is one the cache keeps: a pack, named by the last segment
/// of its key (pack names are unique), which must be a plain name.
fn cached_name(key: &str) -> Option<&str> {
    let plain = |s: &str| {
        !s.is_empty() && !s.starts_with('.') && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    // A fleet's node keeps its packs under `nodes/<node>/packs/`.
    let node_packs = || {
        let (node, rest) = key.strip_prefix("nodes/")?.split_once('/')?;
        plain(node).then(|| rest.strip_prefix("packs/")).flatten()
    };
    let rest = key.strip_prefix("packs/").or_else(node_packs)?;
    rest.split('/').all(plain).then(|| rest.rsplit('/').next()).flatten()
}

impl<B: Backend> PackCache<B> {
    /// `inner`, its packs not cached until [`PackCache::attach`].
    pub fn new(inner: B) -> PackCache<B> {
        PackCache { inner, place: OnceLock::new(), bypass: AtomicUsize::new(0) }
    }

    /// Reads pass the cache by until the guard is dropped: for a verification of what the
    /// bucket holds, which the cache's copy would otherwise answer for.
    pub fn bypass(&self) -> Bypass<'_> {
        self.bypass.fetch_add(1, Ordering::SeqCst);
        Bypass(&self.bypass)
    }

    /// The backend beneath.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Caches packs in `dir` (made if missing), at most `limit` bytes of them; a `limit` of 0
    /// caches nothing in this process (and reads none of what is there). A killed fetch's
    /// temporaries an hour old are removed; the files there are taken as cached, the least
    /// recently written first out. The first call wins.
    pub fn attach(&self, dir: &Path, limit: u64) -> Result<()> {
        if limit == 0 || self.place.get().is_some() {
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = match entry.metadata() {
                Ok(meta) if meta.is_file() => meta,
                _ => continue,
            };
            if name.starts_with(TEMPORARY) {
                // Another process's fetch may still be writing it: only an old one is a leftover.
                let old = meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age.as_secs() > 3600);
                if old {
                    if let Err(e) = std::fs::remove_file(entry.path()) {
                        tracing::warn!(path = %entry.path().display(), error = %e, "a killed fetch's temporary in the pack cache was not removed");
                    }
                }
                continue;
            }
            if cached_name(&format!("packs/{name}")).is_some() {
                found.push((meta.modified().ok(), name, meta.len()));
            }
        }
        found.sort();
        let mut state = State::default();
        for (_, name, size) in found {
            state.tick += 1;
            state.held += size;
            state.files.insert(name, Held { size, used: state.tick });
        }
        let place = Place { dir: dir.to_path_buf(), limit, state: Mutex::new(state) };
        place.evict();
        let _ = self.place.set(place);
        Ok(())
    }

    /// Fetches the packs among `packs` (key and stored size) not yet cached, whole and
    /// several at once, those that fit the bound in the order given: what a restore is about
    /// to read. A failed fetch is logged and skipped (the reads of that pack then go to the
    /// bucket, which reports what is wrong).
    pub fn warm(&self, packs: &[(String, u64)]) -> Warmed {
        let mut warmed = Warmed::default();
        let Some(place) = self.place.get() else {
            warmed.skipped = packs.len() as u64;
            return warmed;
        };
        // Chosen before any is fetched, so that this warm's packs never evict one another.
        let mut wanted: Vec<(&str, &str, u64)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut budget = place.limit;
        for (key, size) in packs {
            if !seen.insert(key.as_str()) {
                continue;
            }
            match cached_name(key) {
                Some(name) if place.holds(name) => {
                    // Kept, and counted against the bound, so that this warm's fetches evict
                    // other packs first.
                    place.touch(name);
                    budget = budget.saturating_sub(place.size_of(name).unwrap_or(0));
                    warmed.cached += 1;
                }
                Some(name) if *size <= budget => {
                    budget -= size;
                    wanted.push((key, name, *size));
                }
                _ => warmed.skipped += 1,
            }
        }
        let next = AtomicUsize::new(0);
        let results: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..FETCHERS.min(wanted.len()))
                .map(|_| {
                    s.spawn(|| {
                        let (mut fetched, mut bytes, mut skipped) = (0u64, 0u64, 0u64);
                        while let Some((key, name, size)) = wanted.get(next.fetch_add(1, Ordering::Relaxed)) {
                            match place.fetch(&self.inner, key, name, *size) {
                                Ok(got) => {
                                    fetched += 1;
                                    bytes += got;
                                }
                                Err(e) => {
                                    tracing::warn!(key, error = %e, "a pack was not fetched into the read cache; its reads go to the bucket");
                                    skipped += 1;
                                }
                            }
                        }
                        (fetched, bytes, skipped)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        tracing::warn!("a fetcher of the pack cache panicked: its packs are read from the bucket");
                        (0, 0, 1)
                    })
                })
                .collect()
        });
        for (fetched, bytes, skipped) in results {
            warmed.fetched += fetched;
            warmed.bytes += bytes;
            warmed.skipped += skipped;
        }
        warmed
    }

    /// The cached bytes `offset..offset + len` of `key`, or None: not cached (or no longer).
    fn cached_range(&self, key: &str, offset: u64, len: u64) -> Result<Option<Vec<u8>>> {
        let (Some(place), Some(name)) = (self.place.get(), cached_name(key)) else { return Ok(None) };
        if !place.holds(name) || self.bypass.load(Ordering::SeqCst) > 0 {
            return Ok(None);
        }
        let path = place.dir.join(name);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                place.forget(name);
                return Ok(None);
            }
            Err(e) => return Err(Error::io("open the cached pack", &path, e)),
        };
        let size = file.metadata().map_err(|e| Error::io("read the length of", &path, e))?.len();
        let Some(end) = offset.checked_add(len).filter(|end| *end <= size) else {
            // Shorter than the read: damaged, or a range past the pack's end. The bucket tells.
            tracing::warn!(path = %path.display(), size, offset, len, "a cached pack is shorter than a read of it: dropped, read from the bucket");
            place.drop_file(name);
            return Ok(None);
        };
        let mut out = vec![0u8; (end - offset) as usize];
        file.read_exact_at(&mut out, offset).map_err(|e| Error::io("read the cached pack", &path, e))?;
        place.touch(name);
        Ok(Some(out))
    }
}

impl Place {
    fn holds(&self, name: &str) -> bool {
        self.state.lock().is_ok_and(|s| s.files.contains_key(name))
    }

    fn size_of(&self, name: &str) -> Option<u64> {
        self.state.lock().ok()?.files.get(name).map(|h| h.size)
    }

    fn touch(&self, name: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.tick += 1;
            let tick = s.tick;
            if let Some(h) = s.files.get_mut(name) {
                h.used = tick;
            }
        }
    }

    fn forget(&self, name: &str) {
        if let Ok(mut s) = self.state.lock() {
            if let Some(h) = s.files.remove(name) {
                s.held -= h.size;
            }
        }
    }

    /// Forgets `name` and removes its file.
    fn drop_file(&self, name: &str) {
        self.forget(name);
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "a cached pack was not removed"),
        }
    }

    /// Fetches `key`, of `size` stored bytes (a longer value is refused as damaged), whole
    /// into the file `name`, then evicts down to the bound; its size.
    fn fetch<B: Backend>(&self, inner: &B, key: &str, name: &str, size: u64) -> Result<u64> {
        let mut temp = tempfile::Builder::new()
            .prefix(TEMPORARY)
            .tempfile_in(&self.dir)
            .map_err(|e| Error::io("create a temporary in", &self.dir, e))?;
        let written = temp.path().to_path_buf();
        let size = {
            let mut out = BufWriter::with_capacity(1 << 20, temp.as_file_mut());
            let got = inner.copy_to(key, size, &mut out)?;
            out.flush().map_err(|e| Error::io("write", &written, e))?;
            got
        };
        // Synced before it is named: after a power loss a named file is a whole pack.
        temp.as_file().sync_data().map_err(|e| Error::io("sync", temp.path(), e))?;
        let path = self.dir.join(name);
        temp.persist(&path).map_err(|e| Error::io("name the cached pack", &path, e.error))?;
        if let Ok(mut s) = self.state.lock() {
            s.tick += 1;
            let used = s.tick;
            if let Some(old) = s.files.insert(name.to_owned(), Held { size, used }) {
                s.held -= old.size;
            }
            s.held += size;
        }
        self.evict();
        Ok(size)
    }

    /// Removes the least recently used files until what is held fits the bound.
    fn evict(&self) {
        loop {
            let victim = {
                let Ok(s) = self.state.lock() else { return };
                if s.held <= self.limit {
                    return;
                }
                match s.files.iter().min_by_key(|(_, h)| h.used) {
                    Some((name, _)) => name.clone(),
                    None => return,
                }
            };
            self.drop_file(&victim);
        }
    }
}

impl<B: Backend> Backend for PackCache<B> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.inner.put(key, bytes)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        match self.cached_range(key, offset, len)? {
            Some(bytes) => Ok(bytes),
            None => self.inner.get_range(key, offset, len),
        }
    }

    fn get_whole(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        if let Some(size) = self.cached_size(key) {
            if size <= limit {
                if let Some(bytes) = self.cached_range(key, 0, size)? {
                    return Ok(bytes);
                }
            }
        }
        self.inner.get_whole(key, limit)
    }

    fn copy_to(&self, key: &str, limit: u64, out: &mut dyn Write) -> Result<u64> {
        self.inner.copy_to(key, limit, out)
    }

    fn content_hasher(&self) -> blake3::Hasher {
        self.inner.content_hasher()
    }

    fn drop_cached(&self, key: &str) {
        if let (Some(place), Some(name)) = (self.place.get(), cached_name(key)) {
            if place.holds(name) {
                tracing::warn!(key, dir = %place.dir.display(), "a cached pack did not open: dropped from the cache, read from the bucket");
                place.drop_file(name);
            }
        }
        self.inner.drop_cached(key);
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn clock_ns(&self) -> Result<i64> {
        self.inner.clock_ns()
    }

    fn size(&self, key: &str) -> Result<u64> {
        match self.cached_size(key) {
            Some(size) => Ok(size),
            None => self.inner.size(key),
        }
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)?;
        if let (Some(place), Some(name)) = (self.place.get(), cached_name(key)) {
            place.drop_file(name);
        }
        Ok(())
    }

    fn stage(&self, dir: &str) -> Result<Box<dyn Staged + '_>> {
        self.inner.stage(dir)
    }
}

impl<B: Backend> PackCache<B> {
    fn cached_size(&self, key: &str) -> Option<u64> {
        if self.bypass.load(Ordering::SeqCst) > 0 {
            return None;
        }
        self.place.get()?.size_of(cached_name(key)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;
    use crate::object::MemoryBackend;

    fn pack(i: u8, len: usize) -> (String, Vec<u8>) {
        (format!("packs/{i:02x}/{i:02x}{}.pack", "ab".repeat(31)), vec![i; len])
    }

    #[test]
    fn the_cache_passes_the_backend_contract() {
        let tmp = tempfile::tempdir().expect("tmp");
        let cache = PackCache::new(MemoryBackend::new());
        cache.attach(&tmp.path().join("packs"), 1 << 20).expect("attach");
        crate::object::backend::contract(&cache);
    }

    #[test]
    fn warmed_packs_are_read_from_disk_and_the_bound_holds() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("packs");
        let cache = PackCache::new(MemoryBackend::new());
        let packs: Vec<_> = (1..=5u8).map(|i| pack(i, 1000)).collect();
        for (k, v) in &packs {
            cache.put(k, v).expect("put");
        }
        cache.attach(&dir, 3000).expect("attach");
        let keys: Vec<(String, u64)> = packs.iter().map(|(k, v)| (k.clone(), v.len() as u64)).collect();
        // Three fit; the other two are left to ranged reads.
        let warmed = cache.warm(&keys);
        assert_eq!((warmed.fetched, warmed.bytes, warmed.skipped), (3, 3000, 2), "{warmed:?}");
        let on_disk = std::fs::read_dir(&dir).expect("list").count();
        assert_eq!(on_disk, 3);
        // What is cached reads without the bucket: the store's values are gone beneath it.
        let cached: Vec<&(String, Vec<u8>)> = packs.iter().filter(|(k, _)| cache.cached_size(k).is_some()).collect();
        assert_eq!(cached.len(), 3);
        for (k, _) in &packs {
            cache.inner().delete(k).expect("delete beneath");
        }
        for (k, v) in &cached {
            assert_eq!(&cache.get_range(k, 10, 20).expect("cached range"), &v[10..30]);
            assert_eq!(&cache.get_whole(k, 5000).expect("cached whole"), v);
            assert_eq!(cache.size(k).expect("size"), 1000);
        }
        // A verification reads the store's own bytes (here gone), not the cache's.
        {
            let (k, _) = cached[0];
            let _bypass = cache.bypass();
            assert_eq!(cache.get_range(k, 0, 1).expect_err("passed by").kind(), ErrorKind::NotFound);
        }
        assert_eq!(cache.get_range(cached[0].0.as_str(), 0, 1).expect("cached again").len(), 1);
        // A later warm of other packs evicts the least recently used.
        let (k6, v6) = pack(6, 1500);
        cache.inner().put(&k6, &v6).expect("put");
        assert_eq!(cache.warm(&[(k6.clone(), 1500)]).fetched, 1);
        let held: u64 =
            std::fs::read_dir(&dir).expect("list").map(|e| e.expect("entry").metadata().expect("meta").len()).sum();
        assert!(held <= 3000, "{held}");
        assert_eq!(cache.get_range(&k6, 0, 3).expect("new one"), vec![6; 3]);
        // A handle attached later finds what is there, within the bound.
        let again = PackCache::new(MemoryBackend::new());
        again.attach(&dir, 3000).expect("attach again");
        assert_eq!(again.get_range(&k6, 1497, 3).expect("found on attach"), vec![6; 3]);
    }

    #[test]
    fn a_damaged_or_deleted_cached_pack_is_read_from_the_bucket() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("packs");
        let cache = PackCache::new(MemoryBackend::new());
        let (k, v) = pack(7, 4000);
        cache.put(&k, &v).expect("put");
        cache.attach(&dir, 1 << 20).expect("attach");
        assert_eq!(cache.warm(&[(k.clone(), 4000)]).fetched, 1);
        let file = dir.join(cached_name(&k).expect("name"));
        // Cut short (a disk that lost its tail): the read goes to the bucket, the file goes.
        std::fs::write(&file, &v[..100]).expect("cut");
        assert_eq!(cache.get_range(&k, 3000, 10).expect("from the bucket"), v[3000..3010]);
        assert!(!file.exists());
        // Evicted by another process: the bucket again.
        assert_eq!(cache.warm(&[(k.clone(), 4000)]).fetched, 1);
        std::fs::remove_file(&file).expect("rm");
        assert_eq!(cache.get_range(&k, 0, 10).expect("from the bucket"), v[..10]);
        // A pack deleted through the cache leaves it too; only packs are cached.
        assert_eq!(cache.warm(&[(k.clone(), 4000)]).fetched, 1);
        cache.delete(&k).expect("delete");
        assert!(!file.exists());
        assert_eq!(cache.get_range(&k, 0, 1).expect_err("gone").kind(), ErrorKind::NotFound);
        cache.put("log/1", b"segment").expect("put");
        assert_eq!(cache.warm(&[("log/1".to_string(), 7)]).skipped, 1);
        assert_eq!(cached_name("packs/../x"), None);
        assert_eq!(cached_name("packs/aa/.x"), None);
        assert_eq!(cached_name("nodes/n-1/packs/aa/bb.pack"), Some("bb.pack"));
        assert_eq!(cached_name("nodes/../packs/aa/bb.pack"), None);
        assert_eq!(cached_name("nodes/n/log/1"), None);
    }

    #[test]
    fn a_cached_pack_that_does_not_open_is_dropped_and_read_from_the_bucket() {
        use crate::object::{SealKey, SealedBackend};
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("packs");
        let sealed = SealedBackend::new(PackCache::new(MemoryBackend::new()), SealKey::from_bytes([7; 32]));
        let (k, v) = pack(9, 200_000);
        sealed.put(&k, &v).expect("put");
        sealed.inner().attach(&dir, 1 << 20).expect("attach");
        let size = sealed.inner().size(&k).expect("size");
        assert_eq!(sealed.inner().warm(&[(k.clone(), size)]).fetched, 1);
        // A bit flipped on this host's disk: the read still gives the pack, from the bucket.
        let file = dir.join(cached_name(&k).expect("name"));
        let mut bytes = std::fs::read(&file).expect("read");
        bytes[1000] ^= 1;
        std::fs::write(&file, &bytes).expect("flip");
        assert_eq!(sealed.get_range(&k, 900, 200).expect("from the bucket"), v[900..1100]);
        assert!(!file.exists(), "the damaged copy is dropped");
        // Packs already cached count against a warm's bound, and are kept.
        let small = PackCache::new(MemoryBackend::new());
        let ((k1, v1), (k2, v2)) = (pack(10, 1000), pack(11, 1000));
        small.put(&k1, &v1).expect("put");
        small.put(&k2, &v2).expect("put");
        small.attach(&tmp.path().join("small"), 1500).expect("attach");
        assert_eq!(small.warm(&[(k1.clone(), 1000)]).fetched, 1);
        let w = small.warm(&[(k1.clone(), 1000), (k2.clone(), 1000)]);
        assert_eq!((w.cached, w.fetched, w.skipped), (1, 0, 1), "{w:?}");
        assert_eq!(small.cached_size(&k1), Some(1000));
    }

    #[test]
    fn a_bound_of_zero_caches_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let cache = PackCache::new(MemoryBackend::new());
        let (k, v) = pack(8, 10);
        cache.put(&k, &v).expect("put");
        cache.attach(&tmp.path().join("packs"), 0).expect("attach");
        assert_eq!(cache.warm(&[(k, 10)]), Warmed { skipped: 1, ..Warmed::default() });
        assert!(!tmp.path().join("packs").exists());
    }
}
