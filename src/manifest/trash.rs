//! Manifest rows of the trash: one row per deleted file or directory, and a directory's members.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::model::trash::{TrashEntry, TrashItem};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};

const COLUMNS: &str = "id, workspace, session, path, kind, size, sha256, mode, object, deleted_by, deleted_ns, \
                       reason, audit_seq, restored_ns";

/// A kind column; other text is a conversion failure, which `db` reports as `corrupt`.
fn kind(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<EntryKind> {
    let text: String = r.get(i)?;
    EntryKind::parse(&text).ok_or_else(|| {
        let e = Error::corrupt(format!("'{}' is not a kind of trash entry", text.escape_debug()));
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn sha(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<Sha256>> {
    Ok(r.get::<_, Option<[u8; 32]>>(i)?.map(Sha256))
}

fn object(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<ObjectId>> {
    Ok(r.get::<_, Option<[u8; 32]>>(i)?.map(ObjectId))
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TrashItem> {
    Ok(TrashItem {
        id: r.get(0)?,
        workspace: r.get(1)?,
        session: r.get(2)?,
        path: r.get(3)?,
        kind: kind(r, 4)?,
        size: r.get::<_, i64>(5)? as u64,
        sha256: sha(r, 6)?,
        mode: r.get(7)?,
        object: object(r, 8)?,
        deleted_by: r.get(9)?,
        deleted_ns: r.get(10)?,
        reason: r.get(11)?,
        audit_seq: r.get(12)?,
        restored_ns: r.get(13)?,
        entries: Vec::new(),
    })
}

pub fn insert(conn: &Connection, t: &TrashItem) -> Result<()> {
    conn.execute(
        &format!("INSERT INTO trash ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
        params![
            t.id,
            t.workspace,
            t.session,
            t.path,
            t.kind.as_str(),
            t.size as i64,
            t.sha256.as_ref().map(Sha256::as_bytes),
            t.mode,
            t.object.as_ref().map(ObjectId::as_bytes),
            t.deleted_by,
            t.deleted_ns,
            t.reason,
            t.audit_seq,
            t.restored_ns,
        ],
    )
    .map_err(db("recording a trash item"))?;
    let mut st = conn
        .prepare_cached(
            "INSERT INTO trash_entries (trash_id, rel, kind, size, sha256, mode, object, target)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(db("recording a trash item"))?;
    for e in &t.entries {
        st.execute(params![
            t.id,
            e.rel,
            e.kind.as_str(),
            e.size as i64,
            e.sha256.as_ref().map(Sha256::as_bytes),
            e.mode,
            e.object.as_ref().map(ObjectId::as_bytes),
            e.target
        ])
        .map_err(db("recording a trash item"))?;
    }
    Ok(())
}

fn entries(conn: &Connection, id: &TrashId) -> Result<Vec<TrashEntry>> {
    let mut st = conn
        .prepare_cached(
            "SELECT rel, kind, size, sha256, mode, object, target FROM trash_entries WHERE trash_id = ?1 ORDER BY rel",
        )
        .map_err(db("reading a trash item"))?;
    let rows = st
        .query_map([id], |r| {
            Ok(TrashEntry {
                rel: r.get(0)?,
                kind: kind(r, 1)?,
                size: r.get::<_, i64>(2)? as u64,
                sha256: sha(r, 3)?,
                mode: r.get(4)?,
                object: object(r, 5)?,
                target: r.get(6)?,
            })
        })
        .map_err(db("reading a trash item"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading a trash item"))
}

pub fn get(conn: &Connection, id: &TrashId) -> Result<Option<TrashItem>> {
    let item = conn
        .query_row(&format!("SELECT {COLUMNS} FROM trash WHERE id = ?1"), [id], row)
        .optional()
        .map_err(db("reading a trash item"))?;
    match item {
        Some(mut t) => {
            t.entries = entries(conn, id)?;
            Ok(Some(t))
        }
        None => Ok(None),
    }
}

/// Items of `workspace` (at `path` if given), newest first.
pub fn list(conn: &Connection, workspace: &str, path: Option<&[u8]>) -> Result<Vec<TrashItem>> {
    let mut st = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM trash WHERE workspace = ?1 AND (?2 IS NULL OR path = ?2)
             ORDER BY deleted_ns DESC, rowid DESC"
        ))
        .map_err(db("listing the trash"))?;
    let rows = st.query_map(params![workspace, path], row).map_err(db("listing the trash"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("listing the trash"))
}

pub fn mark_restored(conn: &Connection, id: &TrashId, at_ns: i64) -> Result<()> {
    conn.execute("UPDATE trash SET restored_ns = ?2 WHERE id = ?1", params![id, at_ns])
        .map_err(db("marking a trash item restored"))?;
    Ok(())
}
