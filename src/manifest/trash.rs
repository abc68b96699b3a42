//! Manifest rows of the trash: one row per deleted file or directory, and a directory's members.

use rusqlite::{params, Connection, OptionalExtension};

use super::{db, object, sha};
use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::model::trash::{RestoredFilter, TrashEntry, TrashFilter, TrashItem};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};

const COLUMNS: &str = "id, workspace, session, path, kind, size, sha256, mode, object, deleted_by, deleted_ns, \
                       reason, audit_seq, restored_ns, mtime_ns, files";

/// A kind column; other text is a conversion failure, which `db` reports as `corrupt`.
fn kind(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<EntryKind> {
    let text: String = r.get(i)?;
    EntryKind::parse(&text).ok_or_else(|| {
        let e = Error::corrupt(format!("'{}' is not a kind of trash entry", text.escape_debug()));
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
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
        mtime_ns: r.get::<_, Option<i64>>(14)?.unwrap_or(0),
        files: r.get::<_, Option<i64>>(15)?.unwrap_or(0) as u64,
        entries: Vec::new(),
    })
}

/// Records item `t` and a directory's members.
pub fn insert(conn: &Connection, t: &TrashItem) -> Result<()> {
    conn.execute(
        &format!(
            "INSERT INTO trash ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
        ),
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
            t.mtime_ns,
            (t.kind == EntryKind::Dir).then_some(t.files as i64),
        ],
    )
    .map_err(db("recording a trash item"))?;
    let mut st = conn
        .prepare_cached(
            "INSERT INTO trash_entries (trash_id, rel, kind, size, sha256, mode, object, target, mtime_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
            e.target,
            e.mtime_ns
        ])
        .map_err(db("recording a trash item"))?;
    }
    Ok(())
}

fn entries(conn: &Connection, id: &TrashId) -> Result<Vec<TrashEntry>> {
    let mut st = conn
        .prepare_cached(
            "SELECT rel, kind, size, sha256, mode, object, target, mtime_ns FROM trash_entries
             WHERE trash_id = ?1 ORDER BY rel",
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
                mtime_ns: r.get::<_, Option<i64>>(7)?.unwrap_or(0),
            })
        })
        .map_err(db("reading a trash item"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading a trash item"))
}

/// Item `id`'s row, without a directory's members, if it is in the trash.
pub fn row_of(conn: &Connection, id: &TrashId) -> Result<Option<TrashItem>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM trash WHERE id = ?1"))
        .and_then(|mut st| st.query_row([id], row).optional())
        .map_err(db("reading a trash item"))
}

/// Item `id` with a directory's members, if it is in the trash.
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

/// Records that item `id` was restored at `at_ns`; the row stays.
pub fn mark_restored(conn: &Connection, id: &TrashId, at_ns: i64) -> Result<()> {
    conn.execute("UPDATE trash SET restored_ns = ?2 WHERE id = ?1", params![id, at_ns])
        .map_err(db("marking a trash item restored"))?;
    Ok(())
}

/// A page of items `filter` selects, newest first (by deletion time, then row), each with its
/// row: the cursor's tiebreak. Only the filters given become conditions, so SQLite can choose
/// the index that fits (`trash_by_path` for a workspace and prefix, `trash_by_time` otherwise).
pub fn page(conn: &Connection, filter: &TrashFilter) -> Result<Vec<(TrashItem, i64)>> {
    page_by(conn, filter, index_for(conn, filter)?)
}

/// [`page`] through `index` (as [`index_for`] chose it for the same filter): pages of one
/// listing walk the same index.
pub fn page_by(conn: &Connection, filter: &TrashFilter, index: &'static str) -> Result<Vec<(TrashItem, i64)>> {
    use rusqlite::types::Value as V;
    let mut conds: Vec<&str> = Vec::new();
    let mut args: Vec<V> = Vec::new();
    if let Some(w) = &filter.workspace {
        conds.push("workspace = ?");
        args.push(V::Text(w.clone()));
    }
    if let Some(s) = &filter.session {
        conds.push("session = ?");
        args.push(V::Text(s.to_string()));
    }
    if !filter.prefix.is_empty() {
        // A prefix P selects P itself and what lies below it. As one index range: from P up to,
        // not including, "P0" ('0' follows '/' in byte order), less the siblings sorting in
        // between ("P-x", "P.txt"), which are below "P/".
        let p = filter.prefix.clone();
        let with = |last: u8| {
            let mut b = p.clone();
            b.push(last);
            V::Blob(b)
        };
        conds.push("(path >= ? AND path < ? AND (path = ? OR path >= ?))");
        args.extend([V::Blob(p.clone()), with(b'0'), V::Blob(p.clone()), with(b'/')]);
    }
    if let Some(t) = filter.since_ns {
        conds.push("deleted_ns >= ?");
        args.push(V::Integer(t));
    }
    if let Some(t) = filter.until_ns {
        conds.push("deleted_ns < ?");
        args.push(V::Integer(t));
    }
    if let Some(k) = filter.kind {
        conds.push("kind = ?");
        args.push(V::Text(k.as_str().to_string()));
    }
    match filter.restored {
        RestoredFilter::No => conds.push("restored_ns IS NULL"),
        RestoredFilter::Yes => conds.push("restored_ns IS NOT NULL"),
        RestoredFilter::All => {}
    }
    if let Some(c) = filter.after {
        conds.push("(deleted_ns < ? OR (deleted_ns = ? AND rowid < ?))");
        args.extend([V::Integer(c.deleted_ns), V::Integer(c.deleted_ns), V::Integer(c.row)]);
    }
    let limit = if filter.limit == 0 { -1 } else { i64::try_from(filter.limit).unwrap_or(i64::MAX) };
    args.push(V::Integer(limit));
    let clause = if conds.is_empty() { String::new() } else { format!("WHERE {}", conds.join(" AND ")) };
    let sql =
        format!("SELECT {COLUMNS}, rowid FROM trash {index} {clause} ORDER BY deleted_ns DESC, rowid DESC LIMIT ?");
    let mut st = conn.prepare_cached(&sql).map_err(db("listing the trash"))?;
    let rows = st
        .query_map(rusqlite::params_from_iter(args), |r| Ok((row(r)?, r.get::<_, i64>(16)?)))
        .map_err(db("listing the trash"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("listing the trash"))
}

/// Items a prefix may select for the listing to read them through the path index and sort
/// them; past this, walking the time index until a page is full is cheaper.
const FEW: i64 = 5_000;

/// The index a listing by `filter` should walk: with a path prefix, the path index when the
/// prefix selects few items (counted, up to `FEW`, on that index), else the time index of the
/// workspace or of everything. Without a prefix SQLite's own choice is right (an equality on
/// workspace or session, then time order). SQLite cannot tell a prefix of 1% from one of 100%
/// without statistics, which is why this counts.
pub fn index_for(conn: &Connection, filter: &TrashFilter) -> Result<&'static str> {
    if filter.prefix.is_empty() {
        return Ok("");
    }
    let mut hi = filter.prefix.clone();
    hi.push(b'0');
    let mut lo = filter.prefix.clone();
    lo.push(b'/');
    let (sql, index_few, index_many) = match &filter.workspace {
        Some(_) => (
            "SELECT count(*) FROM (SELECT 1 FROM trash INDEXED BY trash_by_path
             WHERE workspace = ?4 AND path >= ?1 AND path < ?3 AND (path = ?1 OR path >= ?2) LIMIT ?5)",
            "INDEXED BY trash_by_path",
            "INDEXED BY trash_by_workspace_time",
        ),
        None => (
            "SELECT count(*) FROM (SELECT 1 FROM trash INDEXED BY trash_by_path_only
             WHERE path >= ?1 AND path < ?3 AND (path = ?1 OR path >= ?2) AND ?4 IS NULL LIMIT ?5)",
            "INDEXED BY trash_by_path_only",
            "INDEXED BY trash_by_time",
        ),
    };
    let n: i64 = conn
        .prepare_cached(sql)
        .and_then(|mut st| st.query_row(params![filter.prefix, lo, hi, filter.workspace, FEW + 1], |r| r.get(0)))
        .map_err(db("listing the trash"))?;
    Ok(if n <= FEW { index_few } else { index_many })
}

/// Deletes item `id` and its members; whether it was there. Its objects stay: a snapshot, an
/// audit pre-image or another item may share them, and garbage collection decides.
pub fn delete(conn: &Connection, id: &TrashId) -> Result<bool> {
    conn.execute("DELETE FROM trash_entries WHERE trash_id = ?1", [id]).map_err(db("purging a trash item"))?;
    let n = conn.execute("DELETE FROM trash WHERE id = ?1", [id]).map_err(db("purging a trash item"))?;
    Ok(n == 1)
}
