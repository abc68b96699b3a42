//! Manifest rows of the path index: each workspace's snapshots numbered in order, and the
//! version of each path over a run of them (schema.sql, version 7).

use rusqlite::{params, Connection};

use super::{db, object, sha};
use crate::base::error::{Error, Result};
use crate::base::id::SnapshotId;
use crate::model::tree::{Entry, EntryKind};
use crate::object::{ObjectId, Sha256};

/// One version of one path, held from snapshot `from_ord` to `to_ord` of its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRow {
    /// The workspace's row id.
    pub workspace: i64,
    /// Workspace-relative path.
    pub path: Vec<u8>,
    /// File or symlink.
    pub kind: EntryKind,
    /// Permission bits.
    pub mode: u32,
    /// Size in bytes (a symlink's target length).
    pub size: u64,
    /// A file's content id.
    pub content: Option<ObjectId>,
    /// A file's SHA-256.
    pub sha256: Option<Sha256>,
    /// A symlink's target.
    pub target: Option<Vec<u8>>,
    /// The first snapshot holding it, by number.
    pub from_ord: i64,
    /// The last one; `None` while the newest indexed snapshot still holds it.
    pub to_ord: Option<i64>,
}

const COLUMNS: &str = "workspace, path, kind, mode, size, content, sha256, target, from_ord, to_ord";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRow> {
    let text: String = r.get(2)?;
    let kind = EntryKind::parse(&text).ok_or_else(|| {
        let e = Error::corrupt(format!("'{}' is not a kind of indexed path", text.escape_debug()));
        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(VersionRow {
        workspace: r.get(0)?,
        path: r.get(1)?,
        kind,
        mode: r.get(3)?,
        size: r.get::<_, i64>(4)? as u64,
        content: object(r, 5)?,
        sha256: sha(r, 6)?,
        target: r.get(7)?,
        from_ord: r.get(8)?,
        to_ord: r.get(9)?,
    })
}

/// The snapshots of workspace `ws` the index covers, in order.
pub fn indexed(conn: &Connection, ws: i64) -> Result<Vec<SnapshotId>> {
    let mut st = conn
        .prepare_cached("SELECT snapshot FROM path_index_snapshots WHERE workspace = ?1 ORDER BY ord")
        .map_err(db("reading the path index"))?;
    let ids = st.query_map([ws], |r| r.get(0)).map_err(db("reading the path index"))?;
    ids.collect::<rusqlite::Result<Vec<SnapshotId>>>().map_err(db("reading the path index"))
}

/// Forgets everything indexed of workspace `ws`.
pub fn clear(conn: &Connection, ws: i64) -> Result<()> {
    conn.execute("DELETE FROM path_versions WHERE workspace = ?1", [ws]).map_err(db("clearing the path index"))?;
    conn.execute("DELETE FROM path_index_snapshots WHERE workspace = ?1", [ws])
        .map_err(db("clearing the path index"))?;
    Ok(())
}

/// Numbers snapshot `id` of `ws` as `ord`.
pub fn add_snapshot(conn: &Connection, ws: i64, ord: i64, id: &SnapshotId) -> Result<()> {
    conn.prepare_cached("INSERT INTO path_index_snapshots (workspace, ord, snapshot) VALUES (?1, ?2, ?3)")
        .and_then(|mut st| st.execute(params![ws, ord, id]))
        .map_err(db("indexing a snapshot"))?;
    Ok(())
}

/// Ends the open version of `path` at snapshot `to_ord`.
pub fn close(conn: &Connection, ws: i64, path: &[u8], to_ord: i64) -> Result<()> {
    conn.prepare_cached("UPDATE path_versions SET to_ord = ?3 WHERE workspace = ?1 AND path = ?2 AND to_ord IS NULL")
        .and_then(|mut st| st.execute(params![ws, path, to_ord]))
        .map_err(db("indexing a snapshot"))?;
    Ok(())
}

/// Starts a version of `path` (a file or symlink `e`) at snapshot `from_ord`.
pub fn open(conn: &Connection, ws: i64, path: &[u8], e: &Entry, from_ord: i64) -> Result<()> {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    conn.prepare_cached(
        "INSERT INTO path_versions (workspace, path, name, kind, mode, size, content, sha256, target, from_ord)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )
    .and_then(|mut st| {
        st.execute(params![
            ws,
            path,
            name,
            e.kind.as_str(),
            e.mode,
            e.size as i64,
            e.content.filter(|_| e.kind == EntryKind::File).map(|c| c.0),
            e.sha256.map(|s| s.0),
            e.target,
            from_ord
        ])
    })
    .map_err(db("indexing a snapshot"))?;
    Ok(())
}

fn collect(st: &mut rusqlite::CachedStatement<'_>, args: impl rusqlite::Params) -> Result<Vec<VersionRow>> {
    let rows = st.query_map(args, row).map_err(db("reading the path index"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading the path index"))
}

/// The versions of `path` in workspace `ws`, oldest first.
pub fn versions_of(conn: &Connection, ws: i64, path: &[u8]) -> Result<Vec<VersionRow>> {
    let sql = format!("SELECT {COLUMNS} FROM path_versions WHERE workspace = ?1 AND path = ?2 ORDER BY from_ord");
    let mut st = conn.prepare_cached(&sql).map_err(db("reading the path index"))?;
    collect(&mut st, params![ws, path])
}

/// The versions of every path named `name` (its last component), in any workspace.
pub fn named(conn: &Connection, name: &[u8]) -> Result<Vec<VersionRow>> {
    let sql = format!("SELECT {COLUMNS} FROM path_versions WHERE name = ?1");
    let mut st = conn.prepare_cached(&sql).map_err(db("reading the path index"))?;
    collect(&mut st, [name])
}

/// Every distinct name indexed, in order (read from the name index alone).
pub fn names(conn: &Connection, mut each: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    let mut st = conn
        .prepare_cached("SELECT DISTINCT name FROM path_versions ORDER BY name")
        .map_err(db("reading the path index"))?;
    let mut rows = st.query([]).map_err(db("reading the path index"))?;
    while let Some(r) = rows.next().map_err(db("reading the path index"))? {
        let name = r
            .get_ref(0)
            .map_err(db("reading the path index"))?
            .as_blob()
            .map_err(|e| Error::corrupt(format!("a name in the path index is not bytes: {e}")))?;
        each(name)?;
    }
    Ok(())
}

/// Every distinct (workspace, path) indexed (read from the path index alone).
pub fn paths(conn: &Connection, mut each: impl FnMut(i64, &[u8]) -> Result<()>) -> Result<()> {
    let mut st = conn
        .prepare_cached("SELECT DISTINCT workspace, path FROM path_versions ORDER BY workspace, path")
        .map_err(db("reading the path index"))?;
    let mut rows = st.query([]).map_err(db("reading the path index"))?;
    while let Some(r) = rows.next().map_err(db("reading the path index"))? {
        let ws: i64 = r.get(0).map_err(db("reading the path index"))?;
        let path = r
            .get_ref(1)
            .map_err(db("reading the path index"))?
            .as_blob()
            .map_err(|e| Error::corrupt(format!("a path in the path index is not bytes: {e}")))?;
        each(ws, path)?;
    }
    Ok(())
}
