//! What a snapshot taken in batches stored, kept aside until its commit: the objects of its
//! packs as sorted runs in a temporary file, one per batch, indexed at the commit in one ordered
//! pass; its trees in a second temporary file and its chunk lists in memory, recorded by the
//! same transaction.
//!
//! Why the objects are not indexed batch by batch: object ids are uniformly random, so the rows
//! of a batch fall on nearly every page of the index, and each batch's commit wrote the whole
//! index again (a million files in batches of 50,000 rewrote it 21 times: the snapshot took
//! 1.35x the time of one walk). Merged from the runs in id order, each page of the index is
//! written once, as by one walk. Why the trees and chunk lists wait too: a tree or chunk list
//! the manifest holds live vouches for everything below it (a snapshot from a change feed stops
//! its descent there), which it may not do while the objects it names are not indexed.
//!
//! A batch must still find what an earlier batch stored (the same file content twice in the
//! tree is stored once): a Bloom filter of every staged id answers most lookups in memory, and a
//! hit is settled exactly by a binary search in the runs (a sparse index in memory, one block
//! read from the file per run whose ids span the one sought). Memory: 10 to 20 bits an object
//! for the filter (its size a power of two, doubled as the objects outgrow it) and half a byte
//! for the sparse index; the rows (68 bytes each) and the trees stay on disk.
//!
//! The packs themselves are durable before they are staged, and recorded with their objects in
//! the snapshot's transaction: until then they are files the index does not know, which garbage
//! collection leaves alone while the snapshot's lease holds (`gc/packs.rs`, orphans), as it
//! does for a snapshot read in one walk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::spill::{temp_file, Spill};
use crate::base::error::{Error, Result};
use crate::manifest::objects;
use crate::manifest::trees::{self, StoredTree};
use crate::object::pack::PackedObject;
use crate::object::{ObjectId, SealedPack};

/// One staged row: id, pack index (u32 LE), offset, stored length, raw length, inner offset
/// (u64 LE each; `u64::MAX` for none).
const ROW: usize = 32 + 4 + 8 * 4;
/// Rows per block: the sparse index keeps each block's first id.
const BLOCK: usize = 64;
/// Bytes of rows read ahead, over all runs, while merging (at least 16 rows a run).
const MERGE_READ_BYTES: usize = 8 << 20;
/// Bloom filter: bits per object it is sized for, and probes per lookup (about a 1% false
/// positive at that size).
const BITS_PER_OBJECT: u64 = 10;
const PROBES: usize = 4;
/// A staged tree longer than this is damage to the temporary file (a directory of a million
/// entries compresses to about 40 MB).
const MAX_TREE: usize = 256 << 20;

/// A pack staged: known by its key, size and number of objects until recorded.
struct StagedPack {
    key: String,
    size: u64,
    objects: usize,
}

/// One batch's objects: `len` rows from row `start` of the file, in id order.
struct Run {
    start: u64,
    len: u64,
    /// The first id of each block of `BLOCK` rows.
    firsts: Vec<ObjectId>,
    /// The run's last id.
    last: ObjectId,
}

/// What the batches of one snapshot stored, not yet in the manifest.
pub(super) struct Staged {
    /// Where the temporary files are (for errors).
    dir: PathBuf,
    file: File,
    rows: u64,
    runs: Vec<Run>,
    packs: Vec<StagedPack>,
    /// Sized for `capacity` objects.
    bloom: Vec<u64>,
    capacity: u64,
    /// Trees: keyed by id and entries (u64 LE), their compressed encoding the record.
    trees: Spill<40>,
    chunk_lists: Vec<(ObjectId, Vec<(u64, ObjectId)>)>,
}

/// Words of a filter for `objects` objects: a power of two, so a probe is a mask.
fn bloom_words(objects: u64) -> usize {
    let words = objects.max(1 << 12).saturating_mul(BITS_PER_OBJECT).div_ceil(64).next_power_of_two();
    usize::try_from(words).unwrap_or(usize::MAX >> 8)
}

/// The filter's bit positions for `id` in a filter of `words` words: ids are BLAKE3 digests,
/// uniformly distributed, so their own bytes serve as the hashes.
fn probes(words: usize, id: &ObjectId) -> [(usize, u64); PROBES] {
    let bits = words as u64 * 64;
    let b = id.as_bytes();
    std::array::from_fn(|i| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&b[i * 8..i * 8 + 8]);
        let bit = u64::from_le_bytes(word) & (bits - 1);
        ((bit / 64) as usize, 1u64 << (bit % 64))
    })
}

fn set(bloom: &mut [u64], id: &ObjectId) {
    for (word, bit) in probes(bloom.len(), id) {
        if let Some(w) = bloom.get_mut(word) {
            *w |= bit;
        }
    }
}

impl Staged {
    /// Staging for about `expected` objects, in temporary files in `dir` (the node-local cache
    /// directory) or the system's temporary directory.
    pub(super) fn new(dir: Option<&Path>, expected: u64) -> Result<Staged> {
        let (file, dir) = temp_file(dir)?;
        let trees = Spill::new(Some(&dir), "tree", MAX_TREE)?;
        let words = bloom_words(expected);
        Ok(Staged {
            dir,
            file,
            rows: 0,
            runs: Vec::new(),
            packs: Vec::new(),
            bloom: vec![0; words],
            capacity: words as u64 * 64 / BITS_PER_OBJECT,
            trees,
            chunk_lists: Vec::new(),
        })
    }

    fn failed(&self, verb: &'static str) -> impl Fn(std::io::Error) -> Error + '_ {
        move |e| Error::io(verb, &self.dir, e)
    }

    /// Stages the objects of `packs` (sealed and durable) as one run.
    pub(super) fn add_packs(&mut self, packs: Vec<SealedPack>) -> Result<()> {
        let mut rows: Vec<(u32, PackedObject)> = Vec::new();
        for pack in packs {
            let index = u32::try_from(self.packs.len()).map_err(|_| Error::internal("over 4 billion packs staged"))?;
            self.packs.push(StagedPack { key: pack.key, size: pack.size, objects: pack.objects.len() });
            rows.extend(pack.objects.into_iter().map(|o| (index, o)));
        }
        rows.sort_unstable_by_key(|r| r.1.id);
        let Some(last) = rows.last().map(|r| r.1.id) else { return Ok(()) };
        let mut firsts = Vec::with_capacity(rows.len().div_ceil(BLOCK));
        let mut out = BufWriter::new(&self.file);
        for (i, (pack, o)) in rows.iter().enumerate() {
            if i % BLOCK == 0 {
                firsts.push(o.id);
            }
            out.write_all(&encode(*pack, o)).map_err(|e| Error::io("write staged objects in", &self.dir, e))?;
        }
        out.flush().map_err(|e| Error::io("write staged objects in", &self.dir, e))?;
        drop(out);
        let len = rows.len() as u64;
        self.runs.push(Run { start: self.rows, len, firsts, last });
        self.rows += len;
        if self.rows > self.capacity {
            // More objects than the filter was sized for (the count of entries leaves chunks
            // out): built again twice the size, or most lookups would read the runs.
            self.grow_bloom()?;
        } else {
            for (_, o) in &rows {
                set(&mut self.bloom, &o.id);
            }
        }
        Ok(())
    }

    /// The filter rebuilt for twice the objects staged, from the runs.
    fn grow_bloom(&mut self) -> Result<()> {
        let words = bloom_words(self.rows.saturating_mul(2));
        let mut bloom = vec![0u64; words];
        for run in &self.runs {
            let mut from = 0;
            while from < run.len {
                let rows = self.read(run, from, 4096)?;
                from += rows.len() as u64;
                for (_, o) in &rows {
                    set(&mut bloom, &o.id);
                }
            }
        }
        self.capacity = words as u64 * 64 / BITS_PER_OBJECT;
        self.bloom = bloom;
        Ok(())
    }

    /// Stages the trees a batch built (rows ready for the manifest).
    pub(super) fn add_trees(&mut self, built: &[(ObjectId, StoredTree)]) -> Result<()> {
        for (id, tree) in built {
            let (entries, data) = tree.parts();
            let mut key = [0u8; 40];
            key[..32].copy_from_slice(id.as_bytes());
            key[32..].copy_from_slice(&(entries as u64).to_le_bytes());
            self.trees.push(&key, data)?;
        }
        // Flushed, so that `record` reads them through a shared reference.
        self.trees.flush()
    }

    /// Stages the chunk lists of the files a batch read: (content id, its chunks).
    pub(super) fn add_chunk_lists(&mut self, lists: Vec<(ObjectId, Vec<(u64, ObjectId)>)>) {
        self.chunk_lists.extend(lists);
    }

    /// Whether `id` was staged by an earlier batch.
    pub(super) fn contains(&self, id: &ObjectId) -> Result<bool> {
        if !probes(self.bloom.len(), id).iter().all(|(word, bit)| self.bloom.get(*word).is_some_and(|w| w & bit != 0)) {
            return Ok(false);
        }
        for run in &self.runs {
            if *id > run.last {
                continue;
            }
            // The block whose first id is the last at or before `id`.
            let block = run.firsts.partition_point(|first| first <= id);
            if block == 0 {
                continue;
            }
            let from = (block - 1) as u64 * BLOCK as u64;
            let rows = self.read(run, from, BLOCK)?;
            if rows.binary_search_by(|(_, o)| o.id.cmp(id)).is_ok() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Up to `max` rows of `run` from its row `from`.
    fn read(&self, run: &Run, from: u64, max: usize) -> Result<Vec<(u32, PackedObject)>> {
        let n = run.len.saturating_sub(from).min(max as u64) as usize;
        let mut buf = vec![0u8; n * ROW];
        self.file
            .read_exact_at(&mut buf, (run.start + from) * ROW as u64)
            .map_err(self.failed("read staged objects in"))?;
        buf.chunks_exact(ROW).map(|row| decode(row, self.packs.len())).collect()
    }

    /// How many packs are staged.
    pub(super) fn pack_count(&self) -> usize {
        self.packs.len()
    }

    /// Records the staged packs and indexes their objects in id order, in the caller's
    /// transaction. Each pack must still be there (`check_pack`): one a collection deleted
    /// meanwhile fails the snapshot rather than be pointed at.
    pub(super) fn record_objects(
        &self,
        tx: &Connection,
        now_ns: i64,
        check_pack: impl Fn(&str) -> Result<()>,
    ) -> Result<()> {
        let mut ids = Vec::with_capacity(self.packs.len());
        for p in &self.packs {
            check_pack(&p.key)?;
            ids.push(objects::record_pack_parts(tx, &p.key, p.size, p.objects, now_ns, None)?);
        }
        // A k-way merge of the runs: the heap holds each run's next id.
        let ahead = (MERGE_READ_BYTES / ROW / self.runs.len().max(1)).clamp(16, 512);
        let mut cursors: Vec<Cursor> =
            self.runs.iter().map(|run| Cursor { run, next: 0, ahead, buf: Vec::new() }).collect();
        let mut heap = BinaryHeap::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(id) = c.peek(self)? {
                heap.push(Reverse((id, i)));
            }
        }
        let mut merged = 0u64;
        let rows = std::iter::from_fn(|| {
            let Reverse((_, i)) = heap.pop()?;
            let row = (|| {
                let c = cursors.get_mut(i).ok_or_else(|| Error::internal("a merge of staged runs lost a run"))?;
                let (pack, o) = c.take(self)?;
                if let Some(id) = c.peek(self)? {
                    heap.push(Reverse((id, i)));
                }
                let pack_id =
                    ids.get(pack as usize).copied().ok_or_else(|| Error::internal("a staged object names no pack"))?;
                merged += 1;
                Ok((pack_id, o))
            })();
            Some(row)
        });
        objects::index_objects(tx, rows)?;
        if merged != self.rows {
            return Err(Error::internal(format!("{merged} of {} staged objects merged", self.rows)));
        }
        Ok(())
    }

    /// Records everything staged in the caller's transaction: the packs and their objects, the
    /// chunk lists, the trees (those the manifest holds live already left as they are).
    pub(super) fn record(&self, tx: &Connection, now_ns: i64, check_pack: impl Fn(&str) -> Result<()>) -> Result<()> {
        self.record_objects(tx, now_ns, check_pack)?;
        for (id, chunks) in &self.chunk_lists {
            objects::insert_chunk_list(tx, id, chunks)?;
        }
        self.trees.replay(|key, data| {
            let mut id = [0u8; 32];
            id.copy_from_slice(&key[..32]);
            let mut entries = [0u8; 8];
            entries.copy_from_slice(&key[32..]);
            let id = ObjectId(id);
            let entries = usize::try_from(u64::from_le_bytes(entries))
                .map_err(|_| Error::internal(format!("staged tree {id} claims too many entries")))?;
            if !trees::has_live(tx, &id)? {
                trees::insert_stored(tx, &id, &StoredTree::from_parts(entries, data))?;
            }
            Ok(())
        })
    }
}

/// A run read in order, `ahead` rows at a time.
struct Cursor<'a> {
    run: &'a Run,
    /// The run's row after those in `buf`.
    next: u64,
    ahead: usize,
    /// Rows read ahead, last first.
    buf: Vec<(u32, PackedObject)>,
}

impl Cursor<'_> {
    fn fill(&mut self, staged: &Staged) -> Result<()> {
        if self.buf.is_empty() && self.next < self.run.len {
            let mut rows = staged.read(self.run, self.next, self.ahead)?;
            self.next += rows.len() as u64;
            rows.reverse();
            self.buf = rows;
        }
        Ok(())
    }

    fn peek(&mut self, staged: &Staged) -> Result<Option<ObjectId>> {
        self.fill(staged)?;
        Ok(self.buf.last().map(|(_, o)| o.id))
    }

    fn take(&mut self, staged: &Staged) -> Result<(u32, PackedObject)> {
        self.fill(staged)?;
        self.buf.pop().ok_or_else(|| Error::internal("a staged run ended early"))
    }
}

fn encode(pack: u32, o: &PackedObject) -> [u8; ROW] {
    let mut row = [0u8; ROW];
    row[..32].copy_from_slice(o.id.as_bytes());
    row[32..36].copy_from_slice(&pack.to_le_bytes());
    for (i, v) in [o.offset, o.stored_len, o.raw_len, o.inner_offset.unwrap_or(u64::MAX)].into_iter().enumerate() {
        row[36 + i * 8..44 + i * 8].copy_from_slice(&v.to_le_bytes());
    }
    row
}

/// A row read back; one naming a pack past `packs` is damage to the temporary file.
fn decode(row: &[u8], packs: usize) -> Result<(u32, PackedObject)> {
    let bad = || Error::internal("a staged object's row in the temporary file is damaged");
    let mut id = [0u8; 32];
    id.copy_from_slice(row.get(..32).ok_or_else(bad)?);
    let mut u32b = [0u8; 4];
    u32b.copy_from_slice(row.get(32..36).ok_or_else(bad)?);
    let pack = u32::from_le_bytes(u32b);
    if pack as usize >= packs {
        return Err(bad());
    }
    let mut v = [0u64; 4];
    for (i, slot) in v.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(row.get(36 + i * 8..44 + i * 8).ok_or_else(bad)?);
        *slot = u64::from_le_bytes(b);
    }
    let inner_offset = (v[3] != u64::MAX).then_some(v[3]);
    Ok((pack, PackedObject { id: ObjectId(id), offset: v[0], stored_len: v[1], raw_len: v[2], inner_offset }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;

    fn object(n: u32) -> PackedObject {
        PackedObject {
            id: ObjectId::of(&n.to_le_bytes()),
            offset: n as u64,
            stored_len: 10,
            raw_len: 20,
            inner_offset: n.is_multiple_of(2).then_some(7),
        }
    }

    fn pack(key: &str, objects: impl Iterator<Item = u32>) -> SealedPack {
        SealedPack { key: key.into(), size: 100, objects: objects.map(object).collect() }
    }

    #[test]
    fn staged_objects_trees_and_chunk_lists_are_found_and_recorded_in_one_pass() -> Result<()> {
        // Sized for 10 objects (the floor: 4,096): 5,248 staged make the filter grow once.
        let mut staged = Staged::new(None, 10)?;
        staged.add_packs(vec![pack("packs/a", 0..300), pack("packs/b", 300..500)])?;
        staged.add_packs(vec![pack("packs/c", 500..1140)])?; // ten blocks exactly
        staged.add_packs(Vec::new())?;
        staged.add_packs(vec![pack("packs/d", 1140..5248)])?;
        for n in 0..5248 {
            assert!(staged.contains(&object(n).id)?, "object {n}");
        }
        for n in 5248..8000 {
            assert!(!staged.contains(&object(n).id)?, "object {n} was never staged");
        }
        assert_eq!(staged.pack_count(), 4);
        let tree = ObjectId::of(b"a tree");
        staged.add_trees(&[(tree, StoredTree::from_parts(3, b"compressed".to_vec()))])?;
        let content = ObjectId::of(b"a big file");
        staged.add_chunk_lists(vec![(content, vec![(0, object(1).id), (10, object(2).id)])]);

        let m = Manifest::create_in_memory("staged_test")?;
        let checked = std::cell::RefCell::new(Vec::new());
        // Twice, as a transaction tried again would: the second finds everything recorded.
        for _ in 0..2 {
            m.write(|tx| {
                staged.record(tx, 1, |key| {
                    checked.borrow_mut().push(key.to_string());
                    Ok(())
                })
            })?;
        }
        assert_eq!(checked.into_inner()[..4], ["packs/a", "packs/b", "packs/c", "packs/d"]);
        let conn = m.conn();
        let rows: Vec<(Vec<u8>, String, i64, Option<i64>)> = conn
            .prepare("SELECT o.id, p.name, o.offset, o.inner_offset FROM objects o JOIN packs p ON p.id = o.pack ORDER BY o.id")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect())
            .map_err(|e| Error::db("reading", e))?;
        assert_eq!(rows.len(), 5248);
        for (id, name, offset, inner) in rows {
            let n = offset as u32;
            assert_eq!(id, object(n).id.as_bytes().to_vec());
            let want = match n {
                0..300 => "packs/a",
                300..500 => "packs/b",
                500..1140 => "packs/c",
                _ => "packs/d",
            };
            assert_eq!(name, want);
            assert_eq!(inner, n.is_multiple_of(2).then_some(7));
        }
        assert!(trees::exists(conn, &tree)?);
        assert_eq!(objects::chunk_list(conn, &content)?.len(), 2);
        Ok(())
    }

    #[test]
    fn a_row_naming_a_pack_that_is_not_staged_is_damage() {
        let row = encode(3, &object(1));
        assert!(decode(&row, 3).is_err());
        assert!(decode(&row, 4).is_ok());
    }
}
