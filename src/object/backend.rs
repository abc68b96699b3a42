//! The storage backend: a tiny trait that moves bytes under string keys, nothing more.
//!
//! Hashing, compression and verification live above it (`store.rs`), once. A `put` is durable
//! when it returns and atomic (a reader sees all of the bytes or none); keys are written once.
//! A value named by the hash of its own bytes (a pack) is written in pieces through `stage` and
//! named when complete, so it never has to sit whole in memory.

use crate::base::error::Result;

/// Where objects' bytes live: the local directory of packs, or memory in tests.
pub trait Backend: Send + Sync {
    /// Stores `bytes` under `key`, durably and atomically. Writing an existing key with the
    /// same bytes is success: keys are content-derived.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Reads `len` bytes at `offset` of `key`; a range past the end of the value is a `corrupt`
    /// error, found before anything is allocated (a damaged index can claim any length).
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
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

/// The contract every backend passes; run by each implementation's tests.
#[cfg(test)]
pub(crate) fn contract(b: &dyn Backend) {
    use crate::base::error::ErrorKind;
    b.put("packs/aa/one.pack", b"hello world").expect("put");
    b.put("packs/bb/two.pack", b"0123456789").expect("put");
    b.put("packs/aa/one.pack", b"hello world").expect("same put again is success");
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
}
