//! The storage backend: a tiny trait that moves bytes under string keys, nothing more.
//!
//! Hashing, compression and verification live above it (`store.rs`), once. A `put` is durable
//! when it returns and atomic (a reader sees all of the bytes or none); keys are written once
//! and never replaced: a put or commit to a key that holds exactly the same bytes is success
//! (a retry, or a writer killed after its write), one to a key holding other bytes is refused
//! with `already_exists` and changes nothing. That is what S3's conditional create
//! (`If-None-Match: *`) gives a bucket, and what [`probe`] checks a store honours.
//! A value named by the hash of its own bytes (a pack) is written in pieces through `stage` and
//! named when complete, so it never has to sit whole in memory.
//!
//! Implementations: a local directory (`local.rs`), memory (`memory.rs`, the tests' twin) and an
//! S3-compatible bucket (`s3.rs`); [`contract`] is the test all three pass.

use crate::base::error::{Error, ErrorKind, Result};

/// Where objects' bytes live: the local directory of packs, or memory in tests.
pub trait Backend: Send + Sync {
    /// Stores `bytes` under `key`, durably and atomically. Writing an existing key with the
    /// same bytes is success: keys are content-derived.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Reads `len` bytes at `offset` of `key`; a range past the end of the value is a `corrupt`
    /// error, found before anything is allocated (a damaged index can claim any length).
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// The whole value under `key`, refused as `corrupt` before it is read when it is longer
    /// than `limit`; a missing key is `not_found`. One request where the store allows.
    fn get_whole(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        let size = self.size(key)?;
        if size > limit {
            return Err(too_long(key, size, limit));
        }
        self.get_range(key, 0, size)
    }
    /// Writes the whole value under `key` to `out` as it arrives, refused as `corrupt` before a
    /// byte is written when it is longer than `limit`; its length. The default reads it whole
    /// first; a backend that can stream (a bucket) overrides it, so memory stays one piece.
    fn copy_to(&self, key: &str, limit: u64, out: &mut dyn std::io::Write) -> Result<u64> {
        let bytes = self.get_whole(key, limit)?;
        out.write_all(&bytes)
            .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot write the copy of {key}: {e}"), e))?;
        Ok(bytes.len() as u64)
    }
    /// The hasher that names a value here (a pack: `packs/<2 hex>/<hex>.pack` of this hash of
    /// its bytes): plain BLAKE3, after the content; in a sealed bucket keyed (names must not
    /// tell which known content it holds) and salted (no two writes share a name).
    fn content_hasher(&self) -> blake3::Hasher {
        blake3::Hasher::new()
    }
    /// Forgets any local copy of `key` this store keeps (a cache's), so that the next read
    /// asks the store itself: called when what was read did not open. Nothing by default.
    fn drop_cached(&self, key: &str) {
        let _ = key;
    }
    /// Now by the store's clock, in ns since the epoch: what hosts sharing the store agree on
    /// (garbage collection's grace period is measured by it). This host's clock by default.
    fn clock_ns(&self) -> Result<i64> {
        Ok(crate::base::time::now_ns())
    }
    /// Every key starting with `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// The length of the value under `key`; a missing key is `not_found`.
    fn size(&self, key: &str) -> Result<u64>;
    /// Removes `key`; removing a missing key is success.
    fn delete(&self, key: &str) -> Result<()>;
    /// Starts a value whose key is known only once all of it is written, to be stored under a
    /// key below `dir`. Nothing is visible to readers before `Staged::commit`; a staged value
    /// dropped uncommitted leaves no key. The default holds the pieces in memory and `put`s
    /// them; a backend that can write in place (a file) overrides it.
    fn stage(&self, dir: &str) -> Result<Box<dyn Staged + '_>> {
        let _ = dir;
        Ok(Box::new(Buffered { backend: self, bytes: Vec::new() }))
    }
}

/// A value being written in pieces, stored under its key by `commit`.
pub trait Staged: Send {
    /// Appends `bytes` to the value.
    fn write(&mut self, bytes: &[u8]) -> Result<()>;
    /// Stores the whole value under `key` as `Backend::put` would: durable and atomic.
    fn commit(self: Box<Self>, key: &str) -> Result<()>;
}

/// The default staging: pieces gathered in memory, stored with one `put`.
struct Buffered<'a, B: Backend + ?Sized> {
    backend: &'a B,
    bytes: Vec<u8>,
}

impl<B: Backend + ?Sized> Staged for Buffered<'_, B> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn commit(self: Box<Self>, key: &str) -> Result<()> {
        self.backend.put(key, &self.bytes)
    }
}

/// `corrupt` for a value under `key` of `size` bytes, where none is ever longer than `limit`.
pub(crate) fn too_long(key: &str, size: u64, limit: u64) -> Error {
    Error::corrupt(format!(
        "{key} is {size} bytes, more than such a value ever holds ({limit}): the repository is damaged; run `trove check`"
    ))
}

/// `already_exists` for a put or commit to `key` of `store`, which holds other bytes.
pub(crate) fn other_bytes(store: &str, key: &str) -> Error {
    Error::new(
        ErrorKind::AlreadyExists,
        format!(
            "{key} in {store} already holds other bytes, and stored values are never replaced: another writer made it; run `trove check`"
        ),
    )
}

/// What a store was found to support when probed: recorded with a repository so that it never
/// relies on a guarantee its store does not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// A second put of one key with other bytes is refused (S3's `If-None-Match: *`): what
    /// keeps two writers from replacing each other's values.
    pub conditional_create: bool,
    /// A read of a byte range returns that range alone (S3's `Range`).
    pub ranged_reads: bool,
}

/// Finds out what `b` supports by doing it: a value put under `probe/`, put again with other
/// bytes (which must be refused), read in part, then deleted.
pub fn probe(b: &dyn Backend) -> Result<Capabilities> {
    let key = format!("probe/{}", crate::base::random::random_hex()?);
    b.put(&key, b"trove probe: first")?;
    let conditional_create = match b.put(&key, b"trove probe: other") {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => true,
        Err(e) => return Err(e),
        Ok(()) => false,
    };
    let ranged_reads = match b.get_range(&key, 6, 5) {
        Ok(bytes) => bytes == b"probe",
        Err(e) if e.kind() == ErrorKind::Corrupt => false,
        Err(e) => return Err(e),
    };
    b.delete(&key)?;
    Ok(Capabilities { conditional_create, ranged_reads })
}

/// The contract every backend passes, memory, local and S3 alike: run by each implementation's
/// tests (the bucket's in `tests/s3.rs`, against a real S3 server). Panics on the first breach.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::expect_used, clippy::panic)]
pub fn contract(b: &dyn Backend) {
    b.put("packs/aa/one.pack", b"hello world").expect("put");
    b.put("packs/bb/two.pack", b"0123456789").expect("put");
    b.put("packs/aa/one.pack", b"hello world").expect("same put again is success");
    // Another writer's value under the same key is refused and left whole.
    let other = b.put("packs/aa/one.pack", b"HELLO WORLD").expect_err("other bytes under a written key");
    assert_eq!(other.kind(), ErrorKind::AlreadyExists, "{other}");
    let longer = b.put("packs/aa/one.pack", b"hello world, longer").expect_err("longer bytes under a written key");
    assert_eq!(longer.kind(), ErrorKind::AlreadyExists, "{longer}");
    assert_eq!(b.get_range("packs/aa/one.pack", 6, 5).expect("get"), b"world");
    assert_eq!(b.get_range("packs/bb/two.pack", 0, 10).expect("get"), b"0123456789");
    assert_eq!(b.get_range("packs/bb/two.pack", 3, 0).expect("empty get"), b"");
    let short = b.get_range("packs/bb/two.pack", 8, 5).expect_err("past the end");
    assert_eq!(short.kind(), ErrorKind::Corrupt);
    // Absurd lengths and offsets (a damaged index) are refused before anything is allocated.
    for (offset, len) in [(0, 1u64 << 62), (u64::MAX, 2), (3, u64::MAX)] {
        let e = b.get_range("packs/bb/two.pack", offset, len).expect_err("absurd");
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{offset} {len}");
    }
    let missing = b.get_range("packs/cc/none.pack", 0, 1).expect_err("missing");
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert_eq!(b.list("packs/").expect("list"), vec!["packs/aa/one.pack", "packs/bb/two.pack"]);
    assert_eq!(b.list("packs/bb").expect("list"), vec!["packs/bb/two.pack"]);
    assert_eq!(b.size("packs/aa/one.pack").expect("size"), 11);
    assert_eq!(b.get_whole("packs/aa/one.pack", 11).expect("whole"), b"hello world");
    let long = b.get_whole("packs/aa/one.pack", 10).expect_err("over its limit");
    assert_eq!(long.kind(), ErrorKind::Corrupt, "{long}");
    assert_eq!(b.get_whole("packs/cc/none.pack", 10).expect_err("missing").kind(), ErrorKind::NotFound);
    let mut copy = Vec::new();
    assert_eq!(b.copy_to("packs/aa/one.pack", 11, &mut copy).expect("copy"), 11);
    assert_eq!(copy, b"hello world");
    let mut refused = Vec::new();
    let long = b.copy_to("packs/aa/one.pack", 10, &mut refused).expect_err("copy over its limit");
    assert_eq!((long.kind(), refused.len()), (ErrorKind::Corrupt, 0), "{long}");
    assert_eq!(b.copy_to("packs/cc/none.pack", 10, &mut refused).expect_err("missing").kind(), ErrorKind::NotFound);
    assert_eq!(b.size("packs/cc/none.pack").expect_err("missing").kind(), ErrorKind::NotFound);
    b.delete("packs/aa/one.pack").expect("delete");
    b.delete("packs/aa/one.pack").expect("delete again");
    assert_eq!(b.list("").expect("list"), vec!["packs/bb/two.pack"]);
    // A staged value appears whole under its key at commit, and not at all if dropped.
    let mut staged = b.stage("packs").expect("stage");
    staged.write(b"staged ").expect("write");
    staged.write(b"value").expect("write");
    let mut dropped = b.stage("packs").expect("stage");
    dropped.write(b"dropped").expect("write");
    drop(dropped);
    assert_eq!(b.list("").expect("list"), vec!["packs/bb/two.pack"], "nothing visible before commit");
    staged.commit("packs/cc/three.pack").expect("commit");
    assert_eq!(b.get_range("packs/cc/three.pack", 0, 12).expect("get"), b"staged value");
    assert_eq!(b.list("").expect("list"), vec!["packs/bb/two.pack", "packs/cc/three.pack"]);
    // A commit under a written key: the same bytes are success, others are refused.
    let mut again = b.stage("packs").expect("stage");
    again.write(b"staged value").expect("write");
    again.commit("packs/cc/three.pack").expect("the same bytes committed again");
    let mut clash = b.stage("packs").expect("stage");
    clash.write(b"staged VALUE").expect("write");
    let e = clash.commit("packs/cc/three.pack").expect_err("other bytes committed under a written key");
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert_eq!(b.get_range("packs/cc/three.pack", 0, 12).expect("get"), b"staged value");
    // Writers racing for one key: exactly one value wins, whole, and every other is refused.
    let won: Vec<bool> = std::thread::scope(|s| {
        let racers: Vec<_> = (0..4u8)
            .map(|i| {
                s.spawn(move || match b.put("packs/dd/race.pack", &[i; 64]) {
                    Ok(()) => true,
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
                    Err(e) => panic!("racing put: {e}"),
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().expect("racer")).collect()
    });
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "one writer wins: {won:?}");
    let value = b.get_range("packs/dd/race.pack", 0, 64).expect("get");
    assert!(value.iter().all(|v| *v == value[0]), "the winner's value, whole");
    assert_eq!(
        probe(b).expect("probe"),
        Capabilities { conditional_create: true, ranged_reads: true },
        "every backend refuses a second create and reads ranges"
    );
    b.delete("packs/dd/race.pack").expect("delete");
}
