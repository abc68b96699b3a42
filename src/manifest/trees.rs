//! Manifest rows of trees: one `trees` row and its `tree_entries` per distinct directory.

use rusqlite::{params, Connection};

use super::db;
use crate::error::{Error, Result};
use crate::object::ObjectId;
use crate::tree::{Entry, EntryKind};

/// Inserts a tree unless a tree with this id exists; returns whether it was new.
pub fn insert(conn: &Connection, id: &ObjectId, entries: &[Entry]) -> Result<bool> {
    let mut tree = conn
        .prepare_cached("INSERT OR IGNORE INTO trees (id, entries) VALUES (?1, ?2)")
        .map_err(db("storing a tree"))?;
    if tree.execute(params![&id.as_bytes()[..], entries.len() as i64]).map_err(db("storing a tree"))? == 0 {
        return Ok(false);
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO tree_entries (tree, name, kind, mode, size, mtime_ns, content, sha256, target)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(db("storing a tree"))?;
    for e in entries {
        stmt.execute(params![
            &id.as_bytes()[..],
            e.name,
            e.kind as i64,
            e.mode as i64,
            e.size as i64,
            e.mtime_ns,
            e.content.as_ref().map(|c| &c.as_bytes()[..]),
            e.sha256.as_ref().map(|s| &s[..]),
            e.target,
        ])
        .map_err(db("storing a tree"))?;
    }
    Ok(true)
}

/// Reads one `tree_entries` row (columns as in `COLUMNS`) of tree `tree`.
fn read_entry(tree: &ObjectId, r: &rusqlite::Row<'_>) -> Result<Entry> {
    let get = db("reading a tree");
    let kind: i64 = r.get(1).map_err(&get)?;
    let kind = EntryKind::from_i64(kind)
        .ok_or_else(|| Error::corrupt(format!("tree {tree} has an entry of unknown kind {kind}")))?;
    let content: Option<Vec<u8>> = r.get(5).map_err(&get)?;
    let sha: Option<Vec<u8>> = r.get(6).map_err(&get)?;
    let sha256 = match sha {
        Some(s) => Some(
            <[u8; 32]>::try_from(&s[..]).map_err(|_| Error::corrupt(format!("tree {tree} has a malformed sha256")))?,
        ),
        None => None,
    };
    Ok(Entry {
        name: r.get(0).map_err(&get)?,
        kind,
        mode: r.get::<_, i64>(2).map_err(&get)? as u32,
        size: r.get::<_, i64>(3).map_err(&get)? as u64,
        mtime_ns: r.get(4).map_err(&get)?,
        content: content.as_deref().map(ObjectId::from_slice).transpose()?,
        sha256,
        target: r.get(7).map_err(&get)?,
    })
}

const COLUMNS: &str = "name, kind, mode, size, mtime_ns, content, sha256, target";

/// All entries of a tree, sorted by name.
pub fn entries(conn: &Connection, id: &ObjectId) -> Result<Vec<Entry>> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM tree_entries WHERE tree = ?1 ORDER BY name"))
        .map_err(db("reading a tree"))?;
    let mut rows = stmt.query([&id.as_bytes()[..]]).map_err(db("reading a tree"))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(db("reading a tree"))? {
        out.push(read_entry(id, r)?);
    }
    if out.is_empty() && !exists(conn, id)? {
        return Err(Error::corrupt(format!("tree {id} is referenced but missing from the manifest")));
    }
    Ok(out)
}

/// One entry of a tree by name.
pub fn entry(conn: &Connection, id: &ObjectId, name: &[u8]) -> Result<Option<Entry>> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM tree_entries WHERE tree = ?1 AND name = ?2"))
        .map_err(db("reading a tree"))?;
    let mut rows = stmt.query(params![&id.as_bytes()[..], name]).map_err(db("reading a tree"))?;
    match rows.next().map_err(db("reading a tree"))? {
        Some(r) => Ok(Some(read_entry(id, r)?)),
        None => Ok(None),
    }
}

pub fn exists(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM trees WHERE id = ?1").map_err(db("reading a tree"))?;
    stmt.exists([&id.as_bytes()[..]]).map_err(db("reading a tree"))
}
