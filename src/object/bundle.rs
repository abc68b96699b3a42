//! Bundles: small objects gathered into one blob so they compress together (siblings in a
//! directory share most of their vocabulary), and the cache of decoded bundles readers share.
//!
//! Objects of at most `MEMBER_MAX` bytes are bundled up to `TARGET` raw bytes. Reading one
//! member decodes its bundle (up to 4 MiB, a few milliseconds; only up to the member when it
//! ends in the first half), so readers that visit many files in storage order keep the last
//! few decoded bundles in a [`BundleCache`].
//!
//! The sizes are the writer's choice, not the format's: a reader takes a bundle of any size up
//! to the blob limit, so repositories written with other sizes (256 KiB bundles of members
//! under 16 KiB before issue 18, 1 MiB bundles of members under 256 KiB until its ninth stop)
//! read the same.

use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::object::{blob, Backend, ObjectId};

/// Objects of at most this many bytes go into bundles: every chunk of a large file (with the
/// default chunking, which cuts at most 4 MiB; a repository configured for larger chunks stores
/// those alone) and every small file, so all compressible content shares frames with its
/// neighbours. Until issue 18's ninth stop only objects under 256 KiB did, and each
/// chunk of a large file was a frame of its own (about 1 MiB): npm's large files took 7% more
/// than the same bytes in 4 MiB frames with a 4 MiB window. Objects that sample as
/// incompressible are still stored alone and raw (the snapshot's choice, `blob::looks_compressible`).
pub const MEMBER_MAX: usize = 4 << 20;
/// A bundle holds at most this many raw bytes of members (a member of `MEMBER_MAX` bytes fills
/// one alone): the most a single small-file read decodes, about 2.5 ms on this project's
/// benchmark machine, half that on average (a member in the first half decodes only up to its
/// end).
pub const TARGET: usize = 4 << 20;
/// The most members one bundle takes: its member table is reserved in front of the members
/// (`GAP` bytes), so members are copied once, straight into the bytes that are compressed.
const MAX_MEMBERS: usize = 4096;
const GAP: usize = blob::bundle_table_len(MAX_MEMBERS);

/// Collects members until the next one would not fit. Its buffers are kept across bundles (a
/// worker keeps one builder): a bundle is a few megabytes, and allocating and freeing such
/// buffers per bundle is what makes glibc's per-thread arenas hold on to memory.
#[derive(Default)]
pub struct BundleBuilder {
    /// The members gathered: id and length, in order.
    members: Vec<(ObjectId, u64)>,
    /// `GAP` bytes for the member table, then the members back to back: the table is written
    /// at the end of the gap when the bundle is sealed, and the bundle's raw bytes are that
    /// table and the members after it.
    raw: Vec<u8>,
    /// The members' bytes in `raw` (after the gap); bytes past them were read by `read_next`
    /// and not kept yet.
    gathered: usize,
    /// The table of the bundle being sealed.
    table: Vec<u8>,
    /// The last sealed bundle: its encoding and its members' rows.
    encoded: Vec<u8>,
    rows: Vec<(ObjectId, u64, u64)>,
}

/// The bytes [`BundleBuilder::read_next`] just read, after the builder's members: only these
/// can be kept as the next member (no member is made of bytes that were not read).
pub struct Next<'a> {
    builder: &'a mut BundleBuilder,
}

impl Next<'_> {
    /// The bytes read.
    pub fn bytes(&self) -> &[u8] {
        let b = &self.builder;
        b.raw.get(GAP + b.gathered..).unwrap_or_default()
    }

    /// Makes the bytes read member `id` of the bundle.
    pub fn keep(self, id: ObjectId) {
        let len = self.bytes().len();
        self.builder.members.push((id, len as u64));
        self.builder.gathered += len;
    }
}

/// A sealed bundle, borrowed from its builder until the next seal.
pub struct SealedBundle<'a> {
    /// The bundle as one stored object (blob format, compressed).
    pub encoded: &'a [u8],
    /// Each member's id, raw length and offset in the bundle's raw bytes.
    pub members: &'a [(ObjectId, u64, u64)],
}

impl BundleBuilder {
    /// Adds a member (at most `MEMBER_MAX` bytes); returns the bundle it sealed first when the
    /// member would have taken the gathered ones past `TARGET` (or past `MAX_MEMBERS`).
    pub fn add(&mut self, id: ObjectId, raw: &[u8], level: i32) -> Result<Option<SealedBundle<'_>>> {
        let sealed = self.seal_unless_room(raw.len(), level)?;
        self.raw.extend_from_slice(raw);
        self.members.push((id, raw.len() as u64));
        self.gathered += raw.len();
        Ok(self.sealed(sealed))
    }

    /// Makes room for a member of `size` bytes to be read with [`read_next`](Self::read_next):
    /// returns the bundle sealed to make it, if one was.
    pub fn room_for(&mut self, size: usize, level: i32) -> Result<Option<SealedBundle<'_>>> {
        let sealed = self.seal_unless_room(size, level)?;
        Ok(self.sealed(sealed))
    }

    /// Reads `file` to its end onto the end of the gathered members, where the next member
    /// goes: a small file is read once, into the bytes that will be compressed, not into a
    /// buffer of its own and copied. The caller bounds `file` to the size it gave
    /// [`room_for`](Self::room_for) just before, so the bundle stays within `TARGET`. The bytes
    /// read join the bundle by [`Next::keep`], or are dropped by the next read, add or seal.
    pub fn read_next(&mut self, mut file: impl std::io::Read) -> std::io::Result<Next<'_>> {
        self.drop_next();
        self.start();
        file.read_to_end(&mut self.raw)?;
        Ok(Next { builder: self })
    }

    /// Forgets bytes read and not kept.
    fn drop_next(&mut self) {
        if self.raw.len() > GAP + self.gathered {
            self.raw.truncate(GAP + self.gathered);
        }
    }

    /// Seals the gathered members if a member of `size` bytes would take them past `TARGET` or
    /// the table past `MAX_MEMBERS`, and readies the buffer for it; true if it sealed.
    fn seal_unless_room(&mut self, size: usize, level: i32) -> Result<bool> {
        self.drop_next();
        let full = self.members.len() >= MAX_MEMBERS || self.gathered + size > TARGET;
        let sealed = !self.members.is_empty() && full && self.seal_gathered(level)?;
        self.start();
        Ok(sealed)
    }

    /// Readies an empty buffer: the table's gap in front.
    fn start(&mut self) {
        if self.raw.is_empty() {
            // Reserved once for a full bundle: grown by doubling, a 4 MiB buffer would reserve 8.
            self.raw.reserve_exact(GAP + TARGET);
            self.raw.resize(GAP, 0);
        }
    }

    /// Seals whatever is gathered (nothing if empty).
    pub fn seal(&mut self, level: i32) -> Result<Option<SealedBundle<'_>>> {
        let sealed = self.seal_gathered(level)?;
        Ok(self.sealed(sealed))
    }

    /// The bundle sealed last, if `sealed` says one just was.
    fn sealed(&self, sealed: bool) -> Option<SealedBundle<'_>> {
        sealed.then_some(SealedBundle { encoded: &self.encoded, members: &self.rows })
    }

    /// Encodes the gathered members into `encoded` and `rows` and empties the builder; false if
    /// there was nothing to seal.
    fn seal_gathered(&mut self, level: i32) -> Result<bool> {
        self.drop_next();
        if self.members.is_empty() {
            return Ok(false);
        }
        self.table.clear();
        blob::write_bundle_table(self.members.iter().map(|(_, len)| *len), &mut self.table);
        let start = GAP
            .checked_sub(self.table.len())
            .ok_or_else(|| Error::internal("a bundle has more members than its table holds"))?;
        self.raw[start..GAP].copy_from_slice(&self.table);
        let mut offset = self.table.len() as u64;
        self.rows.clear();
        for (id, len) in self.members.drain(..) {
            self.rows.push((id, len, offset));
            offset += len;
        }
        let bytes = &self.raw[start..];
        let id = ObjectId::of(bytes);
        blob::encode_into(blob::Kind::Bundle, &id, bytes, level, &mut self.encoded)?;
        self.raw.truncate(GAP);
        self.gathered = 0;
        Ok(true)
    }
}

/// The most decoded bytes a cache holds: four whole bundles of `TARGET` bytes, or more smaller
/// ones (written before issue 18's ninth stop). Eight whole 4 MiB bundles took a restore of npm
/// from 48 to 88 MiB.
const CACHED_BYTES: usize = 4 * TARGET;

/// A decoded bundle, or the start of one, and where it came from: ((pack, offset), raw bytes).
type Cached = ((String, u64), Arc<Vec<u8>>);

/// The last decoded bundles, up to `CACHED_BYTES`, keyed by (pack, offset); shared by threads. An entry may hold
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
            let mut held: usize = entries.iter().map(|(_, kept)| kept.len()).sum();
            while held + raw.len() > CACHED_BYTES && !entries.is_empty() {
                held -= entries.remove(0).1.len();
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
        // Three bundles' worth of members of mixed sizes, one a whole bundle's worth; each sealed
        // bundle is decoded at once, and none holds more than `TARGET` bytes of members.
        for i in 0..240u32 {
            let repeat = if i == 100 { TARGET / 11 } else { ((i * 7919) % 9000) as usize + 1 };
            let member = format!("member {i:03} ").repeat(repeat).into_bytes();
            let id = ObjectId::of(&member);
            if let Some(b) = builder.add(id, &member, 3).expect("add") {
                sealed.push((b.encoded.to_vec(), b.members.to_vec()));
            }
        }
        if let Some(b) = builder.seal(3).expect("seal") {
            sealed.push((b.encoded.to_vec(), b.members.to_vec()));
        }
        assert!(builder.seal(3).expect("seal nothing").is_none());
        assert!(sealed.len() >= 3, "{} bundles", sealed.len());
        let mut count = 0;
        for (encoded, rows) in sealed {
            let (header, raw) = blob::decode_any(&encoded).expect("decode");
            assert_eq!(header.kind, blob::Kind::Bundle);
            assert_eq!(header.id, ObjectId::of(&raw));
            let table = blob::bundle_members(&raw).expect("table");
            assert_eq!(table.len(), rows.len());
            assert!(raw.len() <= TARGET + 4 + 4 * rows.len(), "a bundle of {} bytes", raw.len());
            for ((id, len, offset), (t_offset, t_len)) in rows.iter().zip(table) {
                assert_eq!((*offset, *len), (t_offset, t_len));
                assert_eq!(ObjectId::of(&raw[*offset as usize..(offset + len) as usize]), *id);
                count += 1;
            }
        }
        assert_eq!(count, 240);
    }

    /// Members read straight into the builder: those kept are its members, those not kept (a
    /// duplicate) vanish, and a member that would not fit seals the bundle before it is read.
    #[test]
    fn members_read_in_place_join_only_when_kept() {
        let mut builder = BundleBuilder::default();
        let mut sealed = Vec::new();
        let mut kept = Vec::new();
        for i in 0..300u32 {
            let member = format!("read {i:03} ").repeat(((i * 7919) % 8000) as usize + 1).into_bytes();
            if let Some(b) = builder.room_for(member.len(), 3).expect("room") {
                sealed.push((b.encoded.to_vec(), b.members.to_vec()));
            }
            let next = builder.read_next(&member[..]).expect("read");
            assert_eq!(next.bytes(), &member[..]);
            if i % 3 != 1 {
                next.keep(ObjectId::of(&member));
                kept.push(member);
            }
        }
        // Read and not kept: gone at the seal.
        builder.read_next(&b"left out"[..]).expect("read");
        if let Some(b) = builder.seal(3).expect("seal") {
            sealed.push((b.encoded.to_vec(), b.members.to_vec()));
        }
        assert!(sealed.len() >= 2, "{} bundles", sealed.len());
        let mut members = Vec::new();
        for (encoded, rows) in sealed {
            let (_, raw) = blob::decode_any(&encoded).expect("decode");
            assert_eq!(blob::bundle_members(&raw).expect("table").len(), rows.len());
            assert!(raw.len() <= TARGET + 4 + 4 * rows.len(), "a bundle of {} bytes", raw.len());
            for (id, len, offset) in rows {
                let member = raw[offset as usize..(offset + len) as usize].to_vec();
                assert_eq!(ObjectId::of(&member), id);
                members.push(member);
            }
        }
        assert_eq!(members, kept);
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
