//! Bundles: small objects gathered into one blob so they compress together (siblings in a
//! directory share most of their vocabulary), and the cache of decoded bundles readers share.
//!
//! Objects under `MEMBER_MAX` bytes are bundled up to about `TARGET` raw bytes. Reading one
//! member decodes its bundle (about 1 MiB, under a millisecond; only up to the member when it
//! ends in the first half), so readers that visit many files in storage order keep the last
//! few decoded bundles in a [`BundleCache`].
//!
//! The sizes are the writer's choice, not the format's: a reader takes a bundle of any size up
//! to the blob limit, so repositories written with other sizes (256 KiB bundles of members
//! under 16 KiB, before issue 18) read the same.

use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::object::{blob, Backend, ObjectId};

/// Objects smaller than this go into bundles: up to a quarter of a bundle, so source files,
/// manifests and minified scripts compress together with their siblings (npm: bundles of
/// members under 256 KiB in 1 MiB take 6% fewer bytes than under 16 KiB in 256 KiB, close to
/// a solid `tar | zstd`).
pub const MEMBER_MAX: usize = 256 << 10;
/// A bundle is sealed once its members pass this many raw bytes: the most a single small-file
/// read decodes.
pub const TARGET: usize = 1 << 20;

/// Collects members until a bundle is full. Its buffers are kept across bundles (a worker keeps
/// one builder): a bundle is about a megabyte, and allocating and freeing such buffers per
/// bundle is what makes glibc's per-thread arenas hold on to memory.
#[derive(Default)]
pub struct BundleBuilder {
    /// The members gathered: id and length, in order.
    members: Vec<(ObjectId, u64)>,
    /// Their bytes, back to back.
    data: Vec<u8>,
    /// The last sealed bundle: its raw bytes, its encoding and its members' rows.
    raw: Vec<u8>,
    encoded: Vec<u8>,
    rows: Vec<(ObjectId, u64, u64)>,
}

/// A sealed bundle, borrowed from its builder until the next seal.
pub struct SealedBundle<'a> {
    /// The bundle as one stored object (blob format, compressed).
    pub encoded: &'a [u8],
    /// Each member's id, raw length and offset in the bundle's raw bytes.
    pub members: &'a [(ObjectId, u64, u64)],
}

impl BundleBuilder {
    /// Adds a member; returns the sealed bundle when this one filled it.
    pub fn add(&mut self, id: ObjectId, raw: &[u8], level: i32) -> Result<Option<SealedBundle<'_>>> {
        self.members.push((id, raw.len() as u64));
        self.data.extend_from_slice(raw);
        if self.data.len() >= TARGET {
            return self.seal(level);
        }
        Ok(None)
    }

    /// Seals whatever is gathered (nothing if empty).
    pub fn seal(&mut self, level: i32) -> Result<Option<SealedBundle<'_>>> {
        if self.members.is_empty() {
            return Ok(None);
        }
        self.raw.clear();
        blob::write_bundle_table(self.members.iter().map(|(_, len)| *len), &mut self.raw);
        let mut offset = self.raw.len() as u64;
        self.raw.extend_from_slice(&self.data);
        self.rows.clear();
        for (id, len) in self.members.drain(..) {
            self.rows.push((id, len, offset));
            offset += len;
        }
        self.data.clear();
        let id = ObjectId::of(&self.raw);
        blob::encode_into(blob::Kind::Bundle, &id, &self.raw, level, &mut self.encoded)?;
        Ok(Some(SealedBundle { encoded: &self.encoded, members: &self.rows }))
    }
}

const CACHED: usize = 8;

/// A decoded bundle, or the start of one, and where it came from: ((pack, offset), raw bytes).
type Cached = ((String, u64), Arc<Vec<u8>>);

/// The last few decoded bundles, keyed by (pack, offset); shared by threads. An entry may hold
/// only the start of its bundle (see [`BundleCache::member`]).
#[derive(Default)]
pub struct BundleCache {
    entries: Mutex<Vec<Cached>>,
}

impl BundleCache {
    /// Member `id` of `raw_len` bytes at `inner` of the bundle at `loc` (pack, offset, stored
    /// length), verified against its id.
    ///
    /// A bundle not cached is decoded up to the member's end when that lies in its first half
    /// (a lone read, as a review's line counts make, pays only for what it needs), otherwise
    /// whole; either is cached, and a later member past a cached start decodes the bundle
    /// whole. Readers in storage order thus decode each bundle about once. The bundle's own id
    /// is not checked: every member is, on every read.
    pub fn member(
        &self,
        backend: &dyn Backend,
        id: &ObjectId,
        loc: (&str, u64, u64),
        inner: u64,
        raw_len: u64,
    ) -> Result<Vec<u8>> {
        let (pack, offset, stored_len) = loc;
        let outside = || Error::corrupt(format!("object {id} lies outside its bundle; run `trove check`"));
        let end = inner.checked_add(raw_len).ok_or_else(outside)?;
        let raw = match self.cached(pack, offset) {
            Some(raw) if raw.len() as u64 >= end => raw,
            // Its start is cached: this reader goes on through the bundle, so all of it.
            started => {
                self.decode(backend, pack, offset, stored_len, started.map_or(end, |_| u64::MAX)).map_err(|e| {
                    Error::corrupt(format!("object {id} is unreadable: {}; run `trove check`", e.message()))
                })?
            }
        };
        let range = usize::try_from(inner).ok().zip(usize::try_from(end).ok());
        let member = range.and_then(|(start, end)| raw.get(start..end)).ok_or_else(outside)?;
        if ObjectId::of(member) != *id {
            return Err(Error::corrupt(format!(
                "object {id} is corrupt: its bytes do not hash to its id; run `trove check`"
            )));
        }
        Ok(member.to_vec())
    }

    /// What is cached of the bundle at `offset` of `pack`.
    fn cached(&self, pack: &str, offset: u64) -> Option<Arc<Vec<u8>>> {
        let entries = self.entries.lock().ok()?;
        let (_, raw) = entries.iter().find(|((p, o), _)| *o == offset && p == pack)?;
        Some(raw.clone())
    }

    /// Decodes the bundle at `offset` of `pack` up to raw byte `end` if that is in its first
    /// half, else whole, and caches it in place of what was cached of it.
    fn decode(
        &self,
        backend: &dyn Backend,
        pack: &str,
        offset: u64,
        stored_len: u64,
        end: u64,
    ) -> Result<Arc<Vec<u8>>> {
        let bytes = backend.get_range(pack, offset, stored_len)?;
        let corrupt = |e: Error| Error::corrupt(format!("bundle at byte {offset} of pack {pack} is corrupt: {e}"));
        let header = blob::parse_header(&bytes).map_err(corrupt)?;
        if header.kind != blob::Kind::Bundle {
            return Err(Error::corrupt(format!("blob at byte {offset} of pack {pack} is not a bundle")));
        }
        let want = if end <= header.raw_len / 2 { end } else { header.raw_len };
        let (_, raw) = blob::decode_prefix(&bytes, want).map_err(corrupt)?;
        let raw = Arc::new(raw);
        if let Ok(mut entries) = self.entries.lock() {
            // Another reader may have cached more of it meanwhile: keep the longer.
            if entries.iter().any(|((p, o), kept)| *o == offset && p == pack && kept.len() >= raw.len()) {
                return Ok(raw);
            }
            entries.retain(|((p, o), _)| !(*o == offset && p == pack));
            if entries.len() >= CACHED {
                entries.remove(0);
            }
            entries.push(((pack.to_string(), offset), raw.clone()));
        }
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_builder_seals_bundles_whose_members_read_back() {
        let mut builder = BundleBuilder::default();
        let mut sealed = Vec::new();
        // Three bundles' worth of members of mixed sizes; each sealed bundle is decoded at once.
        for i in 0..60u32 {
            let member = format!("member {i} ").repeat(((i * 7919) % 9000) as usize + 1).into_bytes();
            let id = ObjectId::of(&member);
            if let Some(b) = builder.add(id, &member, 3).expect("add") {
                sealed.push((b.encoded.to_vec(), b.members.to_vec()));
            }
        }
        if let Some(b) = builder.seal(3).expect("seal") {
            sealed.push((b.encoded.to_vec(), b.members.to_vec()));
        }
        assert!(builder.seal(3).expect("seal nothing").is_none());
        assert!(sealed.len() >= 2, "{} bundles", sealed.len());
        let mut count = 0;
        for (encoded, rows) in sealed {
            let (header, raw) = blob::decode_any(&encoded).expect("decode");
            assert_eq!(header.kind, blob::Kind::Bundle);
            assert_eq!(header.id, ObjectId::of(&raw));
            let table = blob::bundle_members(&raw).expect("table");
            assert_eq!(table.len(), rows.len());
            for ((id, len, offset), (t_offset, t_len)) in rows.iter().zip(table) {
                assert_eq!((*offset, *len), (t_offset, t_len));
                assert_eq!(ObjectId::of(&raw[*offset as usize..(offset + len) as usize]), *id);
                count += 1;
            }
        }
        assert_eq!(count, 60);
    }

    /// Members read through the cache in any order: from a cached start, past it, from a
    /// bundle stored raw, and a damaged member refused.
    #[test]
    fn members_read_from_the_start_of_a_bundle_or_all_of_it() {
        use crate::object::MemoryBackend;
        let backend = MemoryBackend::new();
        let members: Vec<Vec<u8>> = (0..40u32).map(|i| format!("line {i}\n").repeat(900).into_bytes()).collect();
        let noise: Vec<Vec<u8>> =
            (0..3u32).map(|i| (0..5000u32).map(|j| (j.wrapping_mul(2654435761 + i) >> 13) as u8).collect()).collect();
        let mut pack = Vec::new();
        let mut located = Vec::new();
        for (group, level) in [(&members, 3), (&noise, 3)] {
            let refs: Vec<&[u8]> = group.iter().map(|m| &m[..]).collect();
            let (blob, offsets) = blob::encode_bundle(&refs, level).expect("encode");
            let at = pack.len() as u64;
            for (m, inner) in group.iter().zip(offsets) {
                located.push((ObjectId::of(m), m.clone(), at, blob.len() as u64, inner));
            }
            pack.extend_from_slice(&blob);
        }
        backend.put("packs/p", &pack).expect("put");
        let cache = BundleCache::default();
        let read = |k: usize| {
            let (id, _, at, len, inner) = &located[k];
            cache.member(&backend, id, ("packs/p", *at, *len), *inner, located[k].1.len() as u64)
        };
        // A member near the start: only the start of its bundle is decoded.
        assert_eq!(read(1).expect("member"), located[1].1);
        let cached = cache.entries.lock().expect("lock")[0].1.len();
        let whole = 4 + 4 * 40 + members.iter().map(Vec::len).sum::<usize>();
        assert!(cached < whole / 2, "{cached} of {whole} bytes decoded");
        // The next one, past that start: the whole bundle, once for all the others.
        assert_eq!(read(2).expect("member"), located[2].1);
        assert_eq!(cache.entries.lock().expect("lock")[0].1.len(), whole, "decoded whole");
        for k in (0..40).rev().chain(40..43) {
            assert_eq!(read(k).expect("member"), located[k].1, "member {k}");
        }
        let entries = cache.entries.lock().expect("lock");
        assert_eq!(entries.len(), 2, "one entry per bundle");
        drop(entries);
        let (id, m, at, len, inner) = &located[5];
        let wrong = cache.member(&backend, id, ("packs/p", *at, *len), inner + 1, m.len() as u64);
        assert_eq!(wrong.expect_err("shifted").kind(), crate::base::error::ErrorKind::Corrupt);
    }
}
