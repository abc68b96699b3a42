//! Manifest rows of loose objects: objects stored one at a time, inside the transaction that
//! refers to them (the file tools' pre-images and new contents, a small snapshot's files), in
//! the packs' blob format.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::Result;
use crate::object::{blob, ObjectId};

/// Files up to this size are one object; bigger ones are chunked like snapshot content.
pub const WHOLE_LIMIT: usize = 1 << 20;

/// Stores one object (a whole small file, or one chunk) unless it is stored already.
pub fn insert(conn: &Connection, id: &ObjectId, raw: &[u8], level: i32) -> Result<()> {
    // An object already stored (loose or packed) needs no second copy, unless garbage
    // collection condemned it: then this copy is stored, and clears the mark.
    if stored(conn, id)? {
        return Ok(());
    }
    put(conn, id, raw.len() as u64, &blob::encode(id, raw, level)?)
}

/// Like [`insert`], for an object already encoded as a blob (`blob::encode`) of `raw_len`
/// bytes: a snapshot encodes before its transaction, which then stores only what it lacks.
/// Whether it was stored.
pub fn insert_encoded(conn: &Connection, id: &ObjectId, raw_len: u64, encoded: &[u8]) -> Result<bool> {
    if stored(conn, id)? {
        return Ok(false);
    }
    put(conn, id, raw_len, encoded)?;
    Ok(true)
}

/// Whether `id` is stored, loose or packed, and not condemned: garbage collection's condemned
/// objects are hidden from writers, which store their own copy (clearing the mark).
fn stored(conn: &Connection, id: &ObjectId) -> Result<bool> {
    Ok(has_live(conn, id)? || super::objects::has_live(conn, id)?)
}

fn put(conn: &Connection, id: &ObjectId, raw_len: u64, encoded: &[u8]) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO loose_objects (id, raw_len, encoded) VALUES (?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET condemned = NULL WHERE loose_objects.condemned IS NOT NULL",
    )
    .and_then(|mut st| st.execute(params![&id.as_bytes()[..], raw_len as i64, encoded]))
    .map_err(db("storing a loose object"))?;
    Ok(())
}

/// Stores `bytes` as a file's content in the caller's transaction and returns its content id;
/// over 1 MiB it is chunked, with a chunk list, as snapshots store big files.
#[cfg(feature = "testing")]
pub fn store(conn: &Connection, bytes: &[u8], level: i32, chunking: &crate::object::Chunking) -> Result<ObjectId> {
    let id = ObjectId::of(bytes);
    if bytes.len() <= WHOLE_LIMIT {
        insert(conn, &id, bytes, level)?;
        return Ok(id);
    }
    if super::objects::has_live_chunk_list(conn, &id)? {
        return Ok(id);
    }
    let mut chunks = Vec::new();
    chunking.for_each_chunk(bytes, |offset, data| {
        let chunk = ObjectId::of(data);
        insert(conn, &chunk, data, level)?;
        chunks.push((offset, chunk));
        Ok(())
    })?;
    super::objects::insert_chunk_list(conn, &id, &chunks)?;
    Ok(id)
}

/// Whether object `id` is stored loose and not condemned.
pub fn has_live(conn: &Connection, id: &ObjectId) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM loose_objects WHERE id = ?1 AND condemned IS NULL")
        .and_then(|mut st| st.exists([&id.as_bytes()[..]]))
        .map_err(db("looking up a loose object"))
}

/// Whether any object is stored loose: a snapshot that packs looks here too only if so.
pub fn any(conn: &Connection) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM loose_objects LIMIT 1")
        .and_then(|mut st| st.exists([]))
        .map_err(db("looking for loose objects"))
}

/// Whether object `id` is stored loose (condemned or not: it can still be read).
pub fn contains(conn: &Connection, id: &ObjectId) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM loose_objects WHERE id = ?1")
        .and_then(|mut st| st.exists([&id.as_bytes()[..]]))
        .map_err(db("looking up a loose object"))
}

/// The encoded blob of loose object `id`, if there is one.
pub fn get(conn: &Connection, id: &ObjectId) -> Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT encoded FROM loose_objects WHERE id = ?1")
        .and_then(|mut st| st.query_row([&id.as_bytes()[..]], |r| r.get(0)).optional())
        .map_err(db("reading a loose object"))
}
