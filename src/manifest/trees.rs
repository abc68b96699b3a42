//! Manifest rows of trees: one row per distinct directory, its entries in one encoded blob.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::model::tree::{self, Entry};
use crate::object::ObjectId;

/// Inserts a tree, given its canonical encoding, unless a tree with this id exists (a
/// condemned one is no longer condemned); returns whether it was new or condemned.
pub fn insert_encoded(conn: &Connection, id: &ObjectId, encoded: &[u8]) -> Result<bool> {
    insert_stored(conn, id, &stored(id, encoded)?)
}

/// A tree as its row holds it: its entry count and its encoding compressed.
pub struct StoredTree {
    entries: usize,
    data: Vec<u8>,
}

impl StoredTree {
    /// A row kept aside (a snapshot in batches stages its trees until its commit): its number
    /// of entries and its compressed encoding, as [`StoredTree::parts`] gave them.
    pub fn from_parts(entries: usize, data: Vec<u8>) -> StoredTree {
        StoredTree { entries, data }
    }

    /// The number of entries and the compressed encoding.
    pub fn parts(&self) -> (usize, &[u8]) {
        (self.entries, &self.data)
    }
}

/// Prepares tree `id`'s row from its canonical encoding: the compression, done before (and in
/// parallel, outside) the transaction that inserts it.
pub fn stored(id: &ObjectId, encoded: &[u8]) -> Result<StoredTree> {
    let entries = tree::count(encoded).ok_or_else(|| Error::internal(format!("tree {id} is malformed")))?;
    let data = crate::object::blob::compress(encoded, 3).map_err(|e| e.context(format!("tree {id}")))?;
    Ok(StoredTree { entries, data })
}

/// Inserts a prepared tree row, as [`insert_encoded`].
pub fn insert_stored(conn: &Connection, id: &ObjectId, tree: &StoredTree) -> Result<bool> {
    let StoredTree { entries, data } = tree;
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO trees (id, entries, data) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET condemned = NULL WHERE trees.condemned IS NOT NULL",
        )
        .map_err(db("storing a tree"))?;
    let n = stmt.execute(params![&id.as_bytes()[..], *entries as i64, data]).map_err(db("storing a tree"))?;
    Ok(n == 1)
}

/// All entries of a tree, sorted by name, verified against the tree's id.
pub fn entries(conn: &Connection, id: &ObjectId) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached("SELECT data FROM trees WHERE id = ?1").map_err(db("reading a tree"))?;
    let data: Option<Vec<u8>> =
        stmt.query_row([&id.as_bytes()[..]], |r| r.get(0)).optional().map_err(db("reading a tree"))?;
    let data = data.ok_or_else(|| Error::corrupt(format!("tree {id} is referenced but missing from the manifest")))?;
    let damaged = || Error::corrupt(format!("tree {id} is corrupt in the manifest; run `trove check`"));
    let encoded = decompress(&data).ok_or_else(damaged)?;
    if tree::id_of_encoding(&encoded) != *id {
        return Err(damaged());
    }
    tree::decode(&encoded).ok_or_else(damaged)
}

thread_local! {
    // One decompression context per thread: building one per tree costs more than decoding it.
    static DECODER: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
}

/// Decompresses a tree's data; its zstd frame records the decoded size (bulk compression).
fn decompress(data: &[u8]) -> Option<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(data).ok()??;
    // A damaged header must not make us allocate absurd amounts: a tree takes about 120 bytes
    // an entry, so even a directory of a million entries is far below this.
    if size > 256 << 20 {
        return None;
    }
    DECODER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
        slot.as_mut()?.decompress(data, size as usize).ok()
    })
}

/// One entry of a tree by name.
fn find(entries: &[Entry], name: &[u8]) -> Option<Entry> {
    entries.binary_search_by(|e| e.name.as_slice().cmp(name)).ok().map(|i| entries[i].clone())
}

/// Trees held after decoding, at most this many entries in all: point lookups (a server
/// reading files by path) then skip the decompress-verify-decode of every directory on the way.
const CACHE_ENTRIES: usize = 50_000;

/// Recently decoded trees, most recent last. Safe to keep for the life of a `Repo`: a tree id
/// names its content, which never changes.
#[derive(Default)]
pub struct TreeCache {
    trees: std::sync::Mutex<Vec<(ObjectId, std::sync::Arc<Vec<Entry>>)>>,
}

impl TreeCache {
    /// The entry `name` of tree `id`, decoding the tree only when it is not held.
    pub fn entry(&self, conn: &Connection, id: &ObjectId, name: &[u8]) -> Result<Option<Entry>> {
        let held = {
            let mut trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
            let pos = trees.iter().rposition(|(t, _)| t == id);
            pos.map(|i| {
                let hit = trees.remove(i);
                let entries = hit.1.clone();
                trees.push(hit);
                entries
            })
        };
        if let Some(entries) = held {
            return Ok(find(&entries, name));
        }
        let entries = std::sync::Arc::new(entries(conn, id)?);
        let found = find(&entries, name);
        let mut trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
        trees.push((*id, entries));
        let mut total: usize = trees.iter().map(|(_, e)| e.len()).sum();
        while total > CACHE_ENTRIES && trees.len() > 1 {
            total -= trees.remove(0).1.len();
        }
        Ok(found)
    }
}

/// Whether tree `id` is stored and not condemned: what a snapshot asks before it relies on it.
pub fn has_live(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut stmt =
        conn.prepare_cached("SELECT 1 FROM trees WHERE id = ?1 AND condemned IS NULL").map_err(db("reading a tree"))?;
    stmt.exists([&id.as_bytes()[..]]).map_err(db("reading a tree"))
}

/// The ids of condemned trees: usually none. With [`exists`] (which reads the id index alone)
/// it answers [`has_live`] for many trees at half the lookups. A row whose id is not an id
/// (damage `check` reports) is left out: no record can name it.
pub fn condemned_ids(conn: &Connection) -> Result<crate::object::RandomKeySet<ObjectId>> {
    let mut stmt = conn
        .prepare_cached("SELECT id FROM trees WHERE condemned IS NOT NULL")
        .map_err(db("listing condemned trees"))?;
    let rows = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).map_err(db("listing condemned trees"))?;
    let mut out = crate::object::RandomKeySet::default();
    for r in rows {
        let bytes = r.map_err(db("listing condemned trees"))?;
        match ObjectId::from_slice(&bytes) {
            Ok(id) => {
                out.insert(id);
            }
            Err(e) => tracing::warn!(error = %e, "a condemned tree row has a malformed id; `trove check` reports it"),
        }
    }
    Ok(out)
}

/// Whether tree `id` is stored (condemned or not).
pub fn exists(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM trees WHERE id = ?1").map_err(db("reading a tree"))?;
    stmt.exists([&id.as_bytes()[..]]).map_err(db("reading a tree"))
}

/// Every tree id, for `check`.
pub fn all_ids(conn: &Connection) -> Result<Vec<ObjectId>> {
    let mut stmt = conn.prepare("SELECT id FROM trees").map_err(db("listing trees"))?;
    let rows = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).map_err(db("listing trees"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(ObjectId::from_slice(&r.map_err(db("listing trees"))?)?);
    }
    Ok(out)
}
