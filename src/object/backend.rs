//! The storage backend: a tiny trait that moves bytes under string keys, nothing more.
//!
//! Hashing, compression and verification live above it (`store.rs`), once. A `put` is durable
//! when it returns and atomic (a reader sees all of the bytes or none); keys are written once.

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
}
