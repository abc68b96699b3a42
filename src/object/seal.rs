//! Sealed values: every value a repository in a bucket stores is encrypted and authenticated
//! under the repository's key, in segments so that a range of it is read and checked without
//! the rest; [`SealedBackend`] does it beneath any other backend.
//!
//! Format (version 1), written down in ARCHITECTURE.md ("Sealed values"):
//! - a 24-byte header: the magic `trvSEAL` and the version byte 1, then a 16-byte random nonce
//!   prefix drawn for this value alone;
//! - the plaintext cut into segments of `SEGMENT` bytes (the last one shorter, possibly empty; a
//!   value has at least one), each sealed with XChaCha20-Poly1305: its nonce the prefix and the
//!   segment's index (u64 LE), its associated data the header and one byte, 1 for the last
//!   segment and 0 before, so that a value cut short, extended, reordered or spliced from
//!   another fails to open. Each segment grows by its 16-byte tag.
//!
//! The plaintext length follows from the stored one, so `size` costs no read; a ranged read
//! fetches the header (kept in memory afterwards, per value) and the segments the range
//! touches. The key never leaves memory (it is wrapped by a passphrase in the bucket's key
//! files, `keyfile.rs`); a value that fails to open is `corrupt`, naming its key.

use std::collections::HashMap;
use std::sync::Mutex;

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::backend::Staged;
use crate::object::Backend;

/// Plaintext bytes of a full segment.
pub const SEGMENT: u64 = 64 << 10;
/// Bytes a segment grows by: its authentication tag.
const TAG: u64 = 16;
/// The stored length of a full segment.
const SEALED_SEGMENT: u64 = SEGMENT + TAG;
/// The header: magic and version, then the nonce prefix.
const HEADER: u64 = 24;
const MAGIC: &[u8; 8] = b"trvSEAL\x01";
/// Headers kept in memory for ranged reads; past this the map starts over.
const MAX_HEADERS: usize = 4096;

/// A repository's sealing key: 32 secret bytes, never shown or stored in the clear.
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl SealKey {
    /// The key with these bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> SealKey {
        SealKey(bytes)
    }

    /// The key's bytes (to be wrapped in a key file, nowhere else).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The cipher of sealed values, under a key derived for that use alone.
    fn cipher(&self) -> XChaCha20Poly1305 {
        let k = blake3::derive_key("trove 2026-11-29 sealed values", &self.0);
        XChaCha20Poly1305::new(Key::from_slice(&k))
    }

    /// `bytes` hashed under a key derived from this one (BLAKE3's keyed mode), as hex: the name
    /// in a bucket of a value named after its content, so that the bucket does not reveal
    /// which known content a repository holds.
    pub fn keyed_name(&self, bytes: &[u8]) -> String {
        let mut h = self.name_hasher();
        h.update(bytes);
        h.finalize().to_hex().to_string()
    }

    /// The hasher of [`SealKey::keyed_name`], for content that comes in pieces (a pack).
    pub fn name_hasher(&self) -> blake3::Hasher {
        blake3::Hasher::new_keyed(&blake3::derive_key("trove 2026-11-29 sealed repository names", &self.0))
    }
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// The plaintext length of a value stored as `stored` bytes; `None` if no sealed value has
/// that length.
pub fn plain_len(stored: u64) -> Option<u64> {
    let body = stored.checked_sub(HEADER)?;
    let segments = body.div_ceil(SEALED_SEGMENT).max(1);
    let plain = body.checked_sub(segments * TAG)?;
    // Only the length a sealer writes for that plaintext: an empty last segment after full
    // ones (16 bytes appended to a value of whole segments) is no value.
    (sealed_len(plain) == stored).then_some(plain)
}

/// The stored length of a value of `plain` bytes.
pub fn sealed_len(plain: u64) -> u64 {
    let segments = plain.div_ceil(SEGMENT).max(1);
    HEADER + plain + segments * TAG
}

fn nonce(prefix: &[u8], index: u64) -> XNonce {
    let mut n = [0u8; 24];
    n[..16].copy_from_slice(prefix);
    n[16..].copy_from_slice(&index.to_le_bytes());
    XNonce::from(n)
}

fn aad(header: &[u8], last: bool) -> [u8; 25] {
    let mut a = [0u8; 25];
    a[..24].copy_from_slice(header);
    a[24] = u8::from(last);
    a
}

/// Seals `plain` whole: the header, then every segment.
pub fn seal(key: &SealKey, plain: &[u8]) -> Result<Vec<u8>> {
    let mut sealer = Sealer::new(key)?;
    let mut out = Vec::with_capacity(sealed_len(plain.len() as u64) as usize);
    out.extend_from_slice(&sealer.header);
    sealer.push(plain, &mut out)?;
    sealer.finish(&mut out)?;
    Ok(out)
}

/// A value being sealed as its plaintext arrives: full segments are sealed as they fill.
struct Sealer {
    cipher: XChaCha20Poly1305,
    header: [u8; 24],
    index: u64,
    pending: Vec<u8>,
}

impl Sealer {
    fn new(key: &SealKey) -> Result<Sealer> {
        let mut header = [0u8; 24];
        header[..8].copy_from_slice(MAGIC);
        crate::base::random::fill_random(&mut header[8..])?;
        Ok(Sealer { cipher: key.cipher(), header, index: 0, pending: Vec::with_capacity(SEGMENT as usize) })
    }

    fn seal_segment(&mut self, last: bool, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        out.extend_from_slice(&self.pending);
        let tag = self
            .cipher
            .encrypt_in_place_detached(
                &nonce(&self.header[8..], self.index),
                &aad(&self.header, last),
                &mut out[start..],
            )
            .map_err(|_| Error::internal("sealing a segment failed"))?;
        out.extend_from_slice(&tag);
        self.pending.clear();
        self.index += 1;
        Ok(())
    }

    /// Takes `bytes`, appending to `out` every segment they complete. A full segment is sealed
    /// only once more bytes arrive, since until then it may be the last.
    fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) -> Result<()> {
        while !bytes.is_empty() {
            if self.pending.len() as u64 == SEGMENT {
                self.seal_segment(false, out)?;
            }
            let room = SEGMENT as usize - self.pending.len();
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.pending.extend_from_slice(now);
            bytes = rest;
        }
        Ok(())
    }

    /// Seals the last segment.
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.seal_segment(true, out)
    }
}

/// Opens segments `first..` of a value whose header is `header`, from `stored` (those segments'
/// stored bytes); `last_index` is the value's last segment. Names `key` when any fails.
fn open_segments(
    key: &SealKey,
    name: &str,
    header: &[u8],
    first: u64,
    last_index: u64,
    stored: &[u8],
) -> Result<Vec<u8>> {
    if header.len() as u64 != HEADER || &header[..8] != MAGIC {
        return Err(Error::corrupt(format!("{name} is not a sealed value (its header is wrong): run `trove check`")));
    }
    let cipher = key.cipher();
    let mut out = Vec::with_capacity(stored.len());
    for (i, segment) in stored.chunks(SEALED_SEGMENT as usize).enumerate() {
        let index = first + i as u64;
        let damaged = || {
            Error::corrupt(format!(
                "{name}: segment {index} does not open under the repository's key (damaged, cut short or not this repository's): run `trove check`"
            ))
        };
        if (segment.len() as u64) < TAG {
            return Err(damaged());
        }
        let (body, tag) = segment.split_at(segment.len() - TAG as usize);
        let start = out.len();
        out.extend_from_slice(body);
        cipher
            .decrypt_in_place_detached(
                &nonce(&header[8..], index),
                &aad(header, index == last_index),
                &mut out[start..],
                Tag::from_slice(tag),
            )
            .map_err(|_| damaged())?;
    }
    Ok(out)
}

/// Opens a whole sealed value stored under `name`.
pub fn open(key: &SealKey, name: &str, stored: &[u8]) -> Result<Vec<u8>> {
    let plain = plain_len(stored.len() as u64)
        .ok_or_else(|| Error::corrupt(format!("{name} has a length no sealed value has: run `trove check`")))?;
    let last = plain.div_ceil(SEGMENT).max(1) - 1;
    let (header, body) = stored.split_at(HEADER as usize);
    open_segments(key, name, header, 0, last, body)
}

/// Any backend, with every value sealed on the way in and opened on the way out.
pub struct SealedBackend<B> {
    inner: B,
    key: SealKey,
    /// Each value's header and plaintext length, kept after its first ranged read.
    headers: Mutex<HashMap<String, ([u8; 24], u64)>>,
}

impl<B: Backend> SealedBackend<B> {
    /// `inner` with its values sealed under `key`.
    pub fn new(inner: B, key: SealKey) -> SealedBackend<B> {
        SealedBackend { inner, key, headers: Mutex::new(HashMap::new()) }
    }

    /// The backend beneath, whose values are the sealed bytes.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The header and plaintext length of `name`: one length lookup and one read of the
    /// header, the first time; from memory after.
    fn value(&self, name: &str) -> Result<([u8; 24], u64)> {
        if let Some(v) = self.headers.lock().ok().and_then(|m| m.get(name).copied()) {
            return Ok(v);
        }
        let plain = self.size(name)?;
        let bytes = self.inner.get_range(name, 0, HEADER)?;
        let mut h = [0u8; 24];
        h.copy_from_slice(&bytes);
        if let Ok(mut m) = self.headers.lock() {
            if m.len() >= MAX_HEADERS {
                m.clear();
            }
            m.insert(name.to_owned(), (h, plain));
        }
        Ok((h, plain))
    }

    fn forget(&self, name: &str) {
        if let Ok(mut m) = self.headers.lock() {
            m.remove(name);
        }
    }

    /// Bytes `offset..offset + len` of `key`, through what `value` keeps.
    fn read(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (header, plain) = self.value(key)?;
        let past_end = || {
            Error::corrupt(format!(
                "{key} has {plain} bytes: a read of {len} bytes at {offset} runs past its end; run `trove check`"
            ))
        };
        let end = offset.checked_add(len).filter(|end| *end <= plain).ok_or_else(past_end)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let (first, last) = (offset / SEGMENT, (end - 1) / SEGMENT);
        let last_index = plain.div_ceil(SEGMENT).max(1) - 1;
        let from = HEADER + first * SEALED_SEGMENT;
        let to = (HEADER + (last + 1) * SEALED_SEGMENT).min(sealed_len(plain));
        let stored = self.inner.get_range(key, from, to - from)?;
        let opened = open_segments(&self.key, key, &header, first, last_index, &stored)?;
        let skip = (offset - first * SEGMENT) as usize;
        opened.get(skip..skip + len as usize).map(<[u8]>::to_vec).ok_or_else(past_end)
    }
}

impl<B: Backend> Backend for SealedBackend<B> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        // Sealed again with a fresh nonce, a retry of the same value stores other bytes: the
        // key's own bytes are compared opened, so a retried put is still success.
        let sealed = seal(&self.key, bytes)?;
        match self.inner.put(key, &sealed) {
            Err(e) if e.kind() == crate::base::error::ErrorKind::AlreadyExists => {
                match self.get_whole(key, bytes.len() as u64) {
                    Ok(there) if there == bytes => Ok(()),
                    // Longer than ours (refused unread as too long), or other bytes.
                    Ok(_) => Err(e),
                    Err(longer) if longer.kind() == crate::base::error::ErrorKind::Corrupt => Err(e),
                    Err(other) => Err(other),
                }
            }
            other => other,
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        match self.read(key, offset, len) {
            // What is kept in memory may be of a value deleted and written again since (by
            // another process): read once more, afresh, before calling the value damaged.
            // So may a copy cached beneath (damaged on this host's disk): the store is asked.
            Err(e) if e.kind() == crate::base::error::ErrorKind::Corrupt => {
                self.forget(key);
                self.inner.drop_cached(key);
                self.read(key, offset, len)
            }
            other => other,
        }
    }

    fn get_whole(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        let stored = self.inner.get_whole(key, sealed_len(limit.min(1 << 48)))?;
        open(&self.key, key, &stored)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn clock_ns(&self) -> Result<i64> {
        self.inner.clock_ns()
    }

    fn size(&self, key: &str) -> Result<u64> {
        let stored = self.inner.size(key)?;
        plain_len(stored).ok_or_else(|| {
            Error::corrupt(format!("{key} has a length no sealed value has ({stored} bytes): run `trove check`"))
        })
    }

    fn content_hasher(&self) -> blake3::Hasher {
        // Names unique per writer: the same bytes written by two hosts, or again by one after
        // a collection retired them, get two names, so no writer ever puts its pack under a
        // name a collection on another host is deleting. Random bytes hashed first; a name
        // without the key still tells nothing.
        let mut h = self.key.name_hasher();
        let mut salt = [0u8; 16];
        if let Err(e) = crate::base::random::fill_random(&mut salt) {
            // Without the kernel's randomness the nanosecond clock, the process and a count
            // tell writes apart as well as a bucket needs.
            tracing::warn!(error = %e, "no random bytes for a pack's name; naming it by the time and process");
            static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            salt[..8].copy_from_slice(&crate::base::time::now_ns().to_le_bytes());
            salt[8..12].copy_from_slice(&std::process::id().to_le_bytes());
            let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            salt[12..].copy_from_slice(&n.to_le_bytes());
        }
        h.update(&salt);
        h
    }

    fn copy_to(&self, key: &str, limit: u64, out: &mut dyn std::io::Write) -> Result<u64> {
        // A few MiB a request, each opened and verified before a byte of it is written.
        const PIECE: u64 = 64 * SEGMENT;
        let (_, plain) = self.value(key)?;
        if plain > limit {
            return Err(super::backend::too_long(key, plain, limit));
        }
        let mut at = 0;
        while at < plain {
            let n = PIECE.min(plain - at);
            out.write_all(&self.read(key, at, n)?)
                .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot write the copy of {key}: {e}"), e))?;
            at += n;
        }
        Ok(plain)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.forget(key);
        self.inner.delete(key)
    }

    fn stage(&self, dir: &str) -> Result<Box<dyn Staged + '_>> {
        let inner = self.inner.stage(dir)?;
        let sealer = Sealer::new(&self.key)?;
        let mut out = Vec::with_capacity(SEALED_SEGMENT as usize * 2);
        out.extend_from_slice(&sealer.header);
        Ok(Box::new(SealedStaged { backend: self, inner, sealer, out, hash: blake3::Hasher::new(), len: 0 }))
    }
}

/// A value staged through the seal: segments sealed as they fill, passed on in batches, and
/// the plaintext's hash kept to settle a commit under a key that exists.
struct SealedStaged<'a, B> {
    backend: &'a SealedBackend<B>,
    inner: Box<dyn Staged + 'a>,
    sealer: Sealer,
    out: Vec<u8>,
    hash: blake3::Hasher,
    len: u64,
}

impl<B: Backend> Staged for SealedStaged<'_, B> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.hash.update(bytes);
        self.len += bytes.len() as u64;
        self.sealer.push(bytes, &mut self.out)?;
        if self.out.len() as u64 >= SEALED_SEGMENT {
            self.inner.write(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>, key: &str) -> Result<()> {
        self.sealer.finish(&mut self.out)?;
        self.inner.write(&self.out)?;
        let (backend, len, hash) = (self.backend, self.len, self.hash.finalize());
        match self.inner.commit(key) {
            // Our own value sealed under another nonce, or another writer's: the two are
            // compared opened, by hash, a megabyte at a time.
            Err(e) if e.kind() == crate::base::error::ErrorKind::AlreadyExists => {
                if backend.size(key)? != len {
                    return Err(e);
                }
                let mut there = blake3::Hasher::new();
                let mut at = 0;
                while at < len {
                    let n = (1 << 20).min(len - at);
                    there.update(&backend.get_range(key, at, n)?);
                    at += n;
                }
                if there.finalize() == hash {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;
    use crate::object::MemoryBackend;

    fn key(b: u8) -> SealKey {
        SealKey::from_bytes([b; 32])
    }

    #[test]
    fn lengths_round_trip_at_every_segment_edge() {
        for plain in [0, 1, SEGMENT - 1, SEGMENT, SEGMENT + 1, 3 * SEGMENT, 3 * SEGMENT + 7] {
            assert_eq!(plain_len(sealed_len(plain)), Some(plain), "{plain}");
            let bytes: Vec<u8> = (0..plain).map(|i| i as u8).collect();
            let sealed = seal(&key(1), &bytes).expect("seal");
            assert_eq!(sealed.len() as u64, sealed_len(plain));
            assert_eq!(open(&key(1), "v", &sealed).expect("open"), bytes);
        }
        for bad in [0, 23, 24, 24 + 15, HEADER + SEALED_SEGMENT + 3, HEADER + SEALED_SEGMENT + TAG] {
            assert_eq!(plain_len(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_flipped_bit_a_cut_a_splice_or_another_key_fails_to_open() {
        let bytes: Vec<u8> = (0..(2 * SEGMENT + 100)).map(|i| (i * 7) as u8).collect();
        let sealed = seal(&key(1), &bytes).expect("seal");
        assert_eq!(open(&key(2), "v", &sealed).expect_err("other key").kind(), ErrorKind::Corrupt);
        for at in [0, 9, 30, SEGMENT as usize, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[at] ^= 4;
            assert_eq!(open(&key(1), "v", &bad).expect_err("flipped").kind(), ErrorKind::Corrupt, "{at}");
        }
        // Cut after the second segment: its last flag is 0, so it fails although whole.
        let cut = &sealed[..(HEADER + 2 * SEALED_SEGMENT) as usize];
        assert_eq!(open(&key(1), "v", cut).expect_err("cut").kind(), ErrorKind::Corrupt);
        // Two segments swapped.
        let mut swapped = sealed.clone();
        let (a, b) = (HEADER as usize, (HEADER + SEALED_SEGMENT) as usize);
        let first: Vec<u8> = swapped[a..b].to_vec();
        swapped.copy_within(b..b + SEALED_SEGMENT as usize, a);
        swapped[b..b + SEALED_SEGMENT as usize].copy_from_slice(&first);
        assert_eq!(open(&key(1), "v", &swapped).expect_err("swapped").kind(), ErrorKind::Corrupt);
        // The same plaintext sealed twice differs (a fresh nonce prefix each time).
        assert_ne!(seal(&key(1), &bytes).expect("seal"), sealed);
        // Names from content depend on the key: the plain hash of known content finds nothing.
        assert_ne!(key(1).keyed_name(b"known file"), key(2).keyed_name(b"known file"));
        assert_ne!(key(1).keyed_name(b"known file"), blake3::hash(b"known file").to_hex().to_string());
    }

    #[test]
    fn a_sealed_backend_passes_the_contract_and_stores_no_plaintext() {
        crate::object::backend::contract(&SealedBackend::new(MemoryBackend::new(), key(3)));
        let b = SealedBackend::new(MemoryBackend::new(), key(3));
        let secret = b"a file nobody else should read".repeat(5000);
        b.put("packs/x", &secret).expect("put");
        let stored = b.inner().get_range("packs/x", 0, b.inner().size("packs/x").expect("size")).expect("raw");
        assert!(!stored.windows(20).any(|w| w == &secret[..20]), "no plaintext in the store");
        for (off, len) in [(0, 10), (SEGMENT - 5, 10), (SEGMENT * 2 + 1, 1000), (secret.len() as u64 - 1, 1)] {
            assert_eq!(b.get_range("packs/x", off, len).expect("range"), secret[off as usize..(off + len) as usize]);
        }
        b.inner().corrupt_byte("packs/x", (HEADER + SEALED_SEGMENT + 40) as usize).expect("damage");
        let e = b.get_range("packs/x", SEGMENT + 10, 5).expect_err("damaged segment");
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(e.to_string().contains("packs/x"), "{e}");
        // A range in an undamaged segment still reads.
        assert_eq!(b.get_range("packs/x", 10, 5).expect("range"), secret[10..15]);
    }
}
