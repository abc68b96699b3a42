//! Manifest rows of the trash: one row per deleted file or directory, and a directory's members.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::model::trash::{TrashEntry, TrashItem};

const COLUMNS: &str = "id, workspace, session, path, kind, size, sha256, mode, object, deleted_by, deleted_ns, \
                       reason, audit_seq, restored_ns";

fn hex_of(b: Option<Vec<u8>>) -> Option<String> {
    b.map(hex::encode)
}

fn unhex(what: &str, h: &Option<String>) -> Result<Option<Vec<u8>>> {
    h.as_deref()
        .map(|h| hex::decode(h).map_err(|_| Error::internal(format!("trash {what} '{h}' is not hex"))))
        .transpose()
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TrashItem> {
    Ok(TrashItem {
        id: r.get(0)?,
        workspace: r.get(1)?,
        session: r.get(2)?,
        path: r.get(3)?,
        kind: r.get(4)?,
        size: r.get::<_, i64>(5)? as u64,
        sha256: hex_of(r.get(6)?),
        mode: r.get(7)?,
        object: hex_of(r.get(8)?),
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
            t.kind,
            t.size as i64,
            unhex("sha256", &t.sha256)?,
            t.mode,
            unhex("object", &t.object)?,
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
            e.kind,
            e.size as i64,
            unhex("sha256", &e.sha256)?,
            e.mode,
            unhex("object", &e.object)?,
            e.target
        ])
        .map_err(db("recording a trash item"))?;
    }
    Ok(())
}

fn entries(conn: &Connection, id: &str) -> Result<Vec<TrashEntry>> {
    let mut st = conn
        .prepare_cached(
            "SELECT rel, kind, size, sha256, mode, object, target FROM trash_entries WHERE trash_id = ?1 ORDER BY rel",
        )
        .map_err(db("reading a trash item"))?;
    let rows = st
        .query_map([id], |r| {
            Ok(TrashEntry {
                rel: r.get(0)?,
                kind: r.get(1)?,
                size: r.get::<_, i64>(2)? as u64,
                sha256: hex_of(r.get(3)?),
                mode: r.get(4)?,
                object: hex_of(r.get(5)?),
                target: r.get(6)?,
            })
        })
        .map_err(db("reading a trash item"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading a trash item"))
}

pub fn get(conn: &Connection, id: &str) -> Result<Option<TrashItem>> {
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

pub fn mark_restored(conn: &Connection, id: &str, at_ns: i64) -> Result<()> {
    conn.execute("UPDATE trash SET restored_ns = ?2 WHERE id = ?1", params![id, at_ns])
        .map_err(db("marking a trash item restored"))?;
    Ok(())
}
