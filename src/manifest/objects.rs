//! Manifest rows of the object store: packs, object locations and chunk lists.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::Result;
use crate::object::pack::PackedObject;
use crate::object::{ObjectId, SealedPack};

/// A location from columns `at..at + 5` (pack name, offset, stored_len, raw_len, inner_offset):
/// a negative number or a value of another type is a conversion error, which `Error::db` turns
/// into `corrupt`.
fn location(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Location> {
    Ok(Location {
        pack: r.get(at)?,
        offset: r.get::<_, u64>(at + 1)?,
        stored_len: r.get::<_, u64>(at + 2)?,
        raw_len: r.get::<_, u64>(at + 3)?,
        inner_offset: r.get::<_, Option<u64>>(at + 4)?,
    })
}

/// Where to find one object's blob.
#[derive(Debug, Clone)]
pub struct Location {
    /// The pack's key.
    pub pack: String,
    /// Where the blob starts in the pack.
    pub offset: u64,
    /// The blob's length, header included.
    pub stored_len: u64,
    /// The object's own decoded length.
    pub raw_len: u64,
    /// Set for a bundle member: its offset in the bundle's raw bytes.
    pub inner_offset: Option<u64>,
}

/// Records pack `pack` (its objects are the caller's to index or move) and returns its row id.
/// A pack is named by its bytes: the same bytes written again (the same new objects in the same
/// order, or a rewrite that changed nothing) find their row, which stops being retired now that
/// rows point into it, so garbage collection does not delete it (`gc::delete_pack` takes retired
/// rows only). `level`: the zstd level a recompression wrote it at; None keeps what the row has.
pub fn record_pack(conn: &Connection, pack: &SealedPack, now_ns: i64, level: Option<i32>) -> Result<i64> {
    record_pack_parts(conn, &pack.key, pack.size, pack.objects.len(), now_ns, level)
}

/// [`record_pack`] for a pack known by its key, size and number of objects (their locations
/// kept elsewhere until they are indexed: a snapshot taken in batches).
pub fn record_pack_parts(
    conn: &Connection,
    key: &str,
    size: u64,
    objects: usize,
    now_ns: i64,
    level: Option<i32>,
) -> Result<i64> {
    conn.execute(
        "INSERT INTO packs (name, size, objects, created_ns, level) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (name) DO UPDATE SET retired = NULL, level = COALESCE(excluded.level, level)",
        params![key, size as i64, objects as i64, now_ns, level],
    )
    .map_err(db("recording a pack"))?;
    conn.query_row("SELECT id FROM packs WHERE name = ?1", [key], |r| r.get(0)).map_err(db("recording a pack"))
}

/// The size the manifest records for pack `key` (as written, before any sealing), or None: no
/// such pack.
pub fn pack_size(conn: &Connection, key: &str) -> Result<Option<u64>> {
    conn.query_row("SELECT size FROM packs WHERE name = ?1", [key], |r| r.get::<_, i64>(0))
        .optional()
        .map(|size| size.map(|s| s.max(0) as u64))
        .map_err(db("reading a pack's size"))
}

/// Records sealed packs and indexes their objects. Objects are inserted in id order: B-tree
/// pages filled in key order stay nearly full, where random-order inserts leave them about
/// two-thirds full.
pub fn insert_packs(conn: &Connection, packs: &[SealedPack], now_ns: i64) -> Result<()> {
    let mut rows = Vec::new();
    for pack in packs {
        let pack_id = record_pack(conn, pack, now_ns, None)?;
        rows.extend(pack.objects.iter().map(|o| (pack_id, o)));
    }
    rows.sort_unstable_by_key(|r| r.1.id);
    index_objects(conn, rows.into_iter().map(|(pack, o)| Ok((pack, o.clone()))))
}

/// Indexes objects of recorded packs: (the pack's row id, where the object lies in it), best
/// in id order (see [`insert_packs`]). A condemned row of the same id is replaced by the new
/// copy; a live one is kept.
pub fn index_objects(conn: &Connection, rows: impl IntoIterator<Item = Result<(i64, PackedObject)>>) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            // A condemned row is replaced by this new copy (and so no longer condemned); a
            // live one is kept.
            "INSERT INTO objects (id, pack, offset, stored_len, raw_len, inner_offset)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (id) DO UPDATE SET pack = excluded.pack, offset = excluded.offset,
                 stored_len = excluded.stored_len, raw_len = excluded.raw_len,
                 inner_offset = excluded.inner_offset, condemned = NULL
             WHERE objects.condemned IS NOT NULL",
        )
        .map_err(db("indexing objects"))?;
    for row in rows {
        let (pack_id, o) = row?;
        stmt.execute(params![
            &o.id.as_bytes()[..],
            pack_id,
            o.offset as i64,
            o.stored_len as i64,
            o.raw_len as i64,
            o.inner_offset.map(|i| i as i64)
        ])
        .map_err(db("indexing objects"))?;
    }
    Ok(())
}

/// Whether object `id` is in a pack (condemned or not: it can still be read).
pub fn contains(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM objects WHERE id = ?1").map_err(db("looking up an object"))?;
    stmt.exists([&id.as_bytes()[..]]).map_err(db("looking up an object"))
}

/// Whether object `id` is in a pack and not condemned: what a writer asks before it relies on
/// a copy instead of storing its own (ARCHITECTURE.md, "Garbage collection").
pub fn has_live(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM objects WHERE id = ?1 AND condemned IS NULL")
        .map_err(db("looking up an object"))?;
    stmt.exists([&id.as_bytes()[..]]).map_err(db("looking up an object"))
}

/// Where object `id` is packed, if it is.
pub fn locate(conn: &Connection, id: &ObjectId) -> Result<Option<Location>> {
    let mut stmt = conn.prepare_cached(LOCATE).map_err(db("locating an object"))?;
    stmt.query_row([&id.as_bytes()[..]], |r| location(r, 0)).optional().map_err(db("locating an object"))
}

/// Locates many objects (a restore's plan: every file of a snapshot) with its statements
/// prepared once: looking each statement up in the connection's cache per object (hashing and
/// comparing its text) cost a quarter of a plan's time.
pub struct Locator<'c> {
    chunks: rusqlite::Statement<'c>,
    locate: rusqlite::Statement<'c>,
}

impl<'c> Locator<'c> {
    /// Prepares the statements on `conn`.
    pub fn new(conn: &'c Connection) -> Result<Locator<'c>> {
        Ok(Locator {
            chunks: conn.prepare(CHUNK_LIST).map_err(db("reading a chunk list"))?,
            locate: conn.prepare(LOCATE).map_err(db("locating an object"))?,
        })
    }

    /// As [`chunk_list`].
    pub fn chunk_list(&mut self, content: &ObjectId) -> Result<Vec<(u64, ObjectId)>> {
        chunks_of(&mut self.chunks, content)
    }

    /// As [`locate`].
    pub fn locate(&mut self, id: &ObjectId) -> Result<Option<Location>> {
        self.locate.query_row([&id.as_bytes()[..]], |r| location(r, 0)).optional().map_err(db("locating an object"))
    }
}

/// Packed objects are whole: deltas stay loose (`manifest::loose`).
const LOCATE: &str =
    "SELECT p.name, o.offset, o.stored_len, o.raw_len, o.inner_offset FROM objects o JOIN packs p ON p.id = o.pack
     WHERE o.id = ?1";

const CHUNK_LIST: &str = "SELECT offset, chunk FROM chunk_lists WHERE content = ?1 ORDER BY seq";

/// Records that content `content` is `chunks` (offset and id of each), in order; a condemned
/// list of the same content is no longer condemned.
pub fn insert_chunk_list(conn: &Connection, content: &ObjectId, chunks: &[(u64, ObjectId)]) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO chunk_lists (content, seq, chunk, offset) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (content, seq) DO UPDATE SET condemned = NULL WHERE chunk_lists.condemned IS NOT NULL",
        )
        .map_err(db("recording a chunk list"))?;
    for (seq, (offset, chunk)) in chunks.iter().enumerate() {
        stmt.execute(params![&content.as_bytes()[..], seq as i64, &chunk.as_bytes()[..], *offset as i64])
            .map_err(db("recording a chunk list"))?;
    }
    Ok(())
}

/// Whether content `content` has a chunk list that is not condemned.
pub fn has_live_chunk_list(conn: &Connection, content: &ObjectId) -> Result<bool> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM chunk_lists WHERE content = ?1 AND condemned IS NULL")
        .map_err(db("reading a chunk list"))?;
    stmt.exists([&content.as_bytes()[..]]).map_err(db("reading a chunk list"))
}

/// The ordered chunks of a chunked file's content; empty for single-object content.
pub fn chunk_list(conn: &Connection, content: &ObjectId) -> Result<Vec<(u64, ObjectId)>> {
    let mut stmt = conn.prepare_cached(CHUNK_LIST).map_err(db("reading a chunk list"))?;
    chunks_of(&mut stmt, content)
}

fn chunks_of(stmt: &mut rusqlite::Statement<'_>, content: &ObjectId) -> Result<Vec<(u64, ObjectId)>> {
    let rows = stmt
        .query_map([&content.as_bytes()[..]], |r| Ok((r.get::<_, u64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .map_err(db("reading a chunk list"))?;
    let mut out = Vec::new();
    for row in rows {
        let (offset, chunk) = row.map_err(db("reading a chunk list"))?;
        out.push((offset, ObjectId::from_slice(&chunk)?));
    }
    Ok(out)
}

/// Calls `each` with every object's id (as stored) and its location, pack by pack in offset
/// order: what `check` reads. A row that does not decode is passed as an error, so one damaged
/// row does not hide the others.
pub fn for_each_location(
    conn: &Connection,
    mut each: impl FnMut(Vec<u8>, Result<Location>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn
        .prepare(
            "SELECT o.id, p.name, o.offset, o.stored_len, o.raw_len, o.inner_offset FROM objects o JOIN packs p ON p.id = o.pack
             ORDER BY p.id, o.offset",
        )
        .map_err(db("listing objects"))?;
    let mut rows = stmt.query([]).map_err(db("listing objects"))?;
    while let Some(r) = rows.next().map_err(db("listing objects"))? {
        let id = match r.get_ref(0).map_err(db("listing objects"))? {
            rusqlite::types::ValueRef::Blob(b) => b.to_vec(),
            other => format!("{other:?}").into_bytes(),
        };
        each(id, location(r, 1).map_err(db("reading an object's location")))?;
    }
    Ok(())
}

/// Calls `each` with every chunk list row in order (content, seq, chunk, offset); a row that
/// does not decode is passed as an error.
pub fn for_each_chunk_row(
    conn: &Connection,
    mut each: impl FnMut(Result<(ObjectId, u64, ObjectId, u64)>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn
        .prepare("SELECT content, seq, chunk, offset FROM chunk_lists ORDER BY content, seq")
        .map_err(db("listing chunk lists"))?;
    let mut rows = stmt.query([]).map_err(db("listing chunk lists"))?;
    while let Some(r) = rows.next().map_err(db("listing chunk lists"))? {
        let row = (|| -> Result<(ObjectId, u64, ObjectId, u64)> {
            let get = db("reading a chunk list row");
            let content = ObjectId::from_slice(&r.get::<_, Vec<u8>>(0).map_err(&get)?)?;
            let chunk = ObjectId::from_slice(&r.get::<_, Vec<u8>>(2).map_err(&get)?)?;
            Ok((content, r.get::<_, u64>(1).map_err(&get)?, chunk, r.get::<_, u64>(3).map_err(&get)?))
        })();
        each(row)?;
    }
    Ok(())
}
