//! Bundles: small objects gathered into one blob so they compress together (siblings in a
//! directory share most of their vocabulary), and the cache of decoded bundles readers share.
//!
//! Objects under `MEMBER_MAX` bytes are bundled up to about `TARGET` raw bytes. Reading one
//! member decodes its bundle (about 256 KiB, well under a millisecond), so readers that visit
//! many files in path order keep the last few decoded bundles in a [`BundleCache`].

use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::object::{blob, Backend, ObjectId};

/// Objects smaller than this go into bundles.
pub const MEMBER_MAX: usize = 16 << 10;
/// Bundles are compressed this many zstd levels above the repository's level: they hold small
/// text-like files, where the higher level pays (npm: -5% bundle bytes), and they are a small
/// share of the bytes, so the extra time is small.
pub const BUNDLE_LEVEL_BOOST: i32 = 2;

/// A bundle is sealed once its members pass this many raw bytes.
pub const TARGET: usize = 256 << 10;

/// Collects members until a bundle is full.
#[derive(Default)]
pub struct BundleBuilder {
    members: Vec<(ObjectId, Vec<u8>)>,
    bytes: usize,
}

/// An encoded bundle and its members: (id, raw length, offset in the bundle's raw bytes).
pub struct SealedBundle {
    /// The bundle as one stored object (blob format, compressed).
    pub encoded: Vec<u8>,
    /// Each member's id, raw length and offset in the bundle's raw bytes.
    pub members: Vec<(ObjectId, u64, u64)>,
}

impl BundleBuilder {
    /// Adds a member; returns the sealed bundle when this one filled it.
    pub fn add(&mut self, id: ObjectId, raw: &[u8], level: i32) -> Result<Option<SealedBundle>> {
        self.members.push((id, raw.to_vec()));
        self.bytes += raw.len();
        if self.bytes >= TARGET {
            return self.seal(level);
        }
        Ok(None)
    }

    /// Seals whatever is gathered (nothing if empty).
    pub fn seal(&mut self, level: i32) -> Result<Option<SealedBundle>> {
        if self.members.is_empty() {
            return Ok(None);
        }
        let members = std::mem::take(&mut self.members);
        self.bytes = 0;
        let refs: Vec<&[u8]> = members.iter().map(|(_, m)| &m[..]).collect();
        let (encoded, offsets) = blob::encode_bundle(&refs, level + BUNDLE_LEVEL_BOOST)?;
        let members = members.iter().zip(offsets).map(|((id, m), off)| (*id, m.len() as u64, off)).collect();
        Ok(Some(SealedBundle { encoded, members }))
    }
}

const CACHED: usize = 8;

/// A decoded bundle and where it came from: ((pack, offset), raw bytes).
type Cached = ((String, u64), Arc<Vec<u8>>);

/// The last few decoded bundles, keyed by (pack, offset); shared by threads.
#[derive(Default)]
pub struct BundleCache {
    entries: Mutex<Vec<Cached>>,
}

impl BundleCache {
    /// The raw bytes of the bundle at `offset` of `pack`, verified against its own id.
    pub fn get(&self, backend: &dyn Backend, pack: &str, offset: u64, stored_len: u64) -> Result<Arc<Vec<u8>>> {
        let key = (pack.to_string(), offset);
        if let Ok(entries) = self.entries.lock() {
            if let Some((_, raw)) = entries.iter().find(|(k, _)| *k == key) {
                return Ok(raw.clone());
            }
        }
        let bytes = backend.get_range(pack, offset, stored_len)?;
        let (header, raw) = blob::decode_any(&bytes)
            .map_err(|e| Error::corrupt(format!("bundle at byte {offset} of pack {pack} is corrupt: {e}")))?;
        if header.kind != blob::Kind::Bundle {
            return Err(Error::corrupt(format!("blob at byte {offset} of pack {pack} is not a bundle")));
        }
        let raw = Arc::new(raw);
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHED {
                entries.remove(0);
            }
            entries.push((key, raw.clone()));
        }
        Ok(raw)
    }

    /// Member `id` of `raw_len` bytes at `inner` of the bundle, verified against its id.
    pub fn member(
        &self,
        backend: &dyn Backend,
        id: &ObjectId,
        loc: (&str, u64, u64),
        inner: u64,
        raw_len: u64,
    ) -> Result<Vec<u8>> {
        let (pack, offset, stored_len) = loc;
        let raw = self
            .get(backend, pack, offset, stored_len)
            .map_err(|e| Error::corrupt(format!("object {id} is unreadable: {}; run `trove check`", e.message())))?;
        let range = usize::try_from(inner).ok().zip(usize::try_from(raw_len).ok());
        let member = range
            .and_then(|(start, len)| raw.get(start..start.checked_add(len)?))
            .ok_or_else(|| Error::corrupt(format!("object {id} lies outside its bundle; run `trove check`")))?;
        if ObjectId::of(member) != *id {
            return Err(Error::corrupt(format!(
                "object {id} is corrupt: its bytes do not hash to its id; run `trove check`"
            )));
        }
        Ok(member.to_vec())
    }
}
