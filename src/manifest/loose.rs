//! Manifest rows of loose objects: objects stored one at a time, inside the transaction that
//! refers to them (the file tools' pre-images and new contents, a small snapshot's files), in
//! the packs' blob format; a tool's new content may be a delta against its pre-image, its base
//! recorded in `object_bases`.

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
    if is_stored(conn, id)? {
        return Ok(());
    }
    put(conn, id, raw.len() as u64, &blob::encode(id, raw, level)?)
}

/// Like [`insert`], for an object already encoded as a blob (`blob::encode`) of `raw_len`
/// bytes: a snapshot encodes before its transaction, which then stores only what it lacks.
/// Whether it was stored.
pub fn insert_encoded(conn: &Connection, id: &ObjectId, raw_len: u64, encoded: &[u8]) -> Result<bool> {
    if is_stored(conn, id)? {
        return Ok(false);
    }
    put(conn, id, raw_len, encoded)?;
    Ok(true)
}

/// Whether `id` is stored, loose or packed, and not condemned: garbage collection's condemned
/// objects are hidden from writers, which store their own copy (clearing the mark).
pub fn is_stored(conn: &Connection, id: &ObjectId) -> Result<bool> {
    Ok(has_live(conn, id)? || super::objects::has_live(conn, id)?)
}

/// Whether file content `id` is stored live: as one object (loose or packed), or as a chunk
/// list (a content over 1 MiB).
pub fn content_stored(conn: &Connection, id: &ObjectId) -> Result<bool> {
    Ok(is_stored(conn, id)? || super::objects::has_live_chunk_list(conn, id)?)
}

fn put(conn: &Connection, id: &ObjectId, raw_len: u64, encoded: &[u8]) -> Result<()> {
    // A condemned row is replaced, bytes and all: if it was a delta, its base may be on its way
    // out too, while the caller's encoding was made against what is live now.
    let written = conn
        .prepare_cached(
            "INSERT INTO loose_objects (id, raw_len, encoded) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET raw_len = excluded.raw_len, encoded = excluded.encoded, condemned = NULL
             WHERE loose_objects.condemned IS NOT NULL",
        )
        .and_then(|mut st| st.execute(params![&id.as_bytes()[..], raw_len as i64, encoded]))
        .map_err(db("storing a loose object"))?;
    if written == 0 {
        return Ok(());
    }
    // The row of `object_bases` follows the blob: a delta names its base, a whole blob none.
    match crate::object::delta::base_of(encoded) {
        Ok((_, base)) => conn
            .prepare_cached("INSERT OR REPLACE INTO object_bases (id, base) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute([&id.as_bytes()[..], &base.as_bytes()[..]])),
        Err(_) => conn
            .prepare_cached("DELETE FROM object_bases WHERE id = ?1")
            .and_then(|mut st| st.execute([&id.as_bytes()[..]])),
    }
    .map_err(db("recording a delta's base"))?;
    Ok(())
}

/// Stores object `id` (`raw_len` bytes) as `delta`, a delta against its base at depth
/// `base_depth`, unless it is stored already. Only while the base is stored, not condemned and
/// still at that depth: a version must never lean on an object a collection may take, nor
/// claim a depth its chain does not have. False when it was not stored for that reason (the
/// caller stores the object whole).
pub fn insert_delta(conn: &Connection, id: &ObjectId, raw_len: u64, delta: &[u8], base_depth: u8) -> Result<bool> {
    if is_stored(conn, id)? {
        return Ok(true);
    }
    let (_, base) = crate::object::delta::base_of(delta)?;
    // A packed base is whole (deltas stay loose), so its depth is 0.
    if !is_stored(conn, &base)? || depth(conn, &base)?.unwrap_or(0) != base_depth {
        return Ok(false);
    }
    // An object other versions lean on (a condemned one stored again) is stored whole: as a
    // delta it could close a cycle, or claim a depth not below theirs.
    let leaned_on = conn
        .prepare_cached("SELECT 1 FROM object_bases WHERE base = ?1")
        .and_then(|mut st| st.exists([&id.as_bytes()[..]]))
        .map_err(db("looking up deltas' bases"))?;
    if leaned_on {
        return Ok(false);
    }
    put(conn, id, raw_len, delta)?;
    Ok(true)
}

/// The delta depth of loose object `id` (0 for a whole blob); None when it is not loose. Reads
/// only the start of its blob, which lies in the row itself, never its overflow pages.
pub fn depth(conn: &Connection, id: &ObjectId) -> Result<Option<u8>> {
    let start: Option<Vec<u8>> = conn
        .prepare_cached("SELECT substr(encoded, 1, 8) FROM loose_objects WHERE id = ?1")
        .and_then(|mut st| st.query_row([&id.as_bytes()[..]], |r| r.get(0)).optional())
        .map_err(db("reading a loose object's header"))?;
    Ok(start.map(|b| blob::depth_in(&b)))
}

/// The base a delta `id` is stored against, from `object_bases`; None for an object stored
/// whole (or not stored).
pub fn base(conn: &Connection, id: &ObjectId) -> Result<Option<ObjectId>> {
    let base: Option<Vec<u8>> = conn
        .prepare_cached("SELECT base FROM object_bases WHERE id = ?1")
        .and_then(|mut st| st.query_row([&id.as_bytes()[..]], |r| r.get(0)).optional())
        .map_err(db("reading a delta's base"))?;
    base.map(|b| ObjectId::from_slice(&b)).transpose()
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

/// Live (not condemned) whole loose objects after id `after`, in id order, up to `max_bytes`
/// of stored blobs (at least one): (id, raw length, blob). A collection gathers them into
/// packs. Deltas stay loose: a delta has one copy, here, so its row in `object_bases` always
/// describes the blob every reader reads.
pub fn live_run(conn: &Connection, after: &[u8], max_bytes: u64) -> Result<Vec<(ObjectId, u64, Vec<u8>)>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, raw_len, encoded FROM loose_objects l
             WHERE id > ?1 AND condemned IS NULL AND NOT EXISTS (SELECT 1 FROM object_bases b WHERE b.id = l.id)
             ORDER BY id",
        )
        .map_err(db("reading loose objects"))?;
    let mut rows = stmt.query([after]).map_err(db("reading loose objects"))?;
    let (mut out, mut bytes) = (Vec::new(), 0u64);
    while let Some(r) = rows.next().map_err(db("reading loose objects"))? {
        let id = ObjectId::from_slice(&r.get::<_, Vec<u8>>(0).map_err(db("reading loose objects"))?)?;
        let raw_len = r.get::<_, u64>(1).map_err(db("reading loose objects"))?;
        let encoded: Vec<u8> = r.get(2).map_err(db("reading loose objects"))?;
        bytes += encoded.len() as u64;
        out.push((id, raw_len, encoded));
        if bytes >= max_bytes {
            break;
        }
    }
    Ok(out)
}

/// Deletes the loose rows of `ids`, now packed (their pack rows committed in the same
/// transaction), unless condemned meanwhile; returns how many went.
pub fn remove_gathered<'a>(conn: &Connection, ids: impl Iterator<Item = &'a ObjectId>) -> Result<u64> {
    let mut stmt = conn
        .prepare_cached("DELETE FROM loose_objects WHERE id = ?1 AND condemned IS NULL")
        .map_err(db("gathering loose objects"))?;
    let mut n = 0;
    for id in ids {
        n += stmt.execute([&id.as_bytes()[..]]).map_err(db("gathering loose objects"))? as u64;
    }
    Ok(n)
}
