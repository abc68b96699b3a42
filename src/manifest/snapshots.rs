//! Manifest rows of snapshots: the record of one workspace state, and how references resolve.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::{Error, ErrorKind, Result};
use crate::model::snapshot::{Counts, SnapshotInfo};
use crate::object::ObjectId;

pub fn insert(conn: &Connection, workspace_id: i64, s: &SnapshotInfo) -> Result<()> {
    let warnings = serde_json::to_string(&s.warnings).map_err(|e| Error::internal(e.to_string()))?;
    let c = &s.counts;
    conn.execute(
        "INSERT INTO snapshots (id, workspace, session, parent, created_ns, reason, root, source_dir,
                                files, dirs, symlinks, bytes, added, changed, removed, skipped, warnings)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            s.id,
            workspace_id,
            s.session,
            s.parent,
            s.created_ns,
            s.reason,
            &s.root.as_bytes()[..],
            s.source_dir,
            c.files as i64,
            c.dirs as i64,
            c.symlinks as i64,
            c.bytes as i64,
            c.added as i64,
            c.changed as i64,
            c.removed as i64,
            c.skipped as i64,
            warnings
        ],
    )
    .map_err(db("recording the snapshot"))?;
    Ok(())
}

const SELECT: &str = "SELECT s.id, w.name, s.session, s.parent, s.created_ns, s.reason, s.root, s.source_dir,
    s.files, s.dirs, s.symlinks, s.bytes, s.added, s.changed, s.removed, s.skipped, s.warnings
    FROM snapshots s JOIN workspaces w ON w.id = s.workspace";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(SnapshotInfo, Vec<u8>, String)> {
    let n = |i| r.get::<_, i64>(i).map(|v| v as u64);
    let info = SnapshotInfo {
        id: r.get(0)?,
        workspace: r.get(1)?,
        session: r.get(2)?,
        parent: r.get(3)?,
        created_ns: r.get(4)?,
        reason: r.get(5)?,
        root: ObjectId([0; 32]),
        source_dir: r.get(7)?,
        counts: Counts {
            files: n(8)?,
            dirs: n(9)?,
            symlinks: n(10)?,
            bytes: n(11)?,
            added: n(12)?,
            changed: n(13)?,
            removed: n(14)?,
            skipped: n(15)?,
        },
        warnings: Vec::new(),
    };
    Ok((info, r.get(6)?, r.get(16)?))
}

fn finish(raw: (SnapshotInfo, Vec<u8>, String)) -> Result<SnapshotInfo> {
    let (mut info, root, warnings) = raw;
    info.root = ObjectId::from_slice(&root)?;
    info.warnings = serde_json::from_str(&warnings)
        .map_err(|e| Error::corrupt(format!("snapshot {} has malformed warnings: {e}", info.id)))?;
    Ok(info)
}

fn query(conn: &Connection, filter: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<SnapshotInfo>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} {filter}")).map_err(db("reading snapshots"))?;
    let rows = stmt.query_map(args, from_row).map_err(db("reading snapshots"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(finish(r.map_err(db("reading snapshots"))?)?);
    }
    Ok(out)
}

/// Snapshots oldest first, of one workspace or all.
pub fn list(conn: &Connection, workspace: Option<&str>) -> Result<Vec<SnapshotInfo>> {
    match workspace {
        Some(w) => query(conn, "WHERE w.name = ?1 ORDER BY s.created_ns, s.rowid", &[&w]),
        None => query(conn, "ORDER BY s.created_ns, s.rowid", &[]),
    }
}

/// The newest snapshot of a workspace (or of the repository).
pub fn latest(conn: &Connection, workspace: Option<&str>) -> Result<Option<SnapshotInfo>> {
    let found = match workspace {
        Some(w) => query(conn, "WHERE w.name = ?1 ORDER BY s.created_ns DESC, s.rowid DESC LIMIT 1", &[&w])?,
        None => query(conn, "ORDER BY s.created_ns DESC, s.rowid DESC LIMIT 1", &[])?,
    };
    Ok(found.into_iter().next())
}

/// Resolves `latest`, a full id, or a unique id prefix, optionally within one workspace.
pub fn resolve(conn: &Connection, reference: &str, workspace: Option<&str>) -> Result<SnapshotInfo> {
    let within = workspace.map(|w| format!(" of workspace '{w}'")).unwrap_or_default();
    if reference == "latest" {
        return latest(conn, workspace)?.ok_or_else(|| {
            Error::not_found(format!("there is no snapshot{within} yet: run `trove snapshot DIR` first"))
        });
    }
    if reference.is_empty() || !reference.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("'{reference}' is not a snapshot id: give `latest` or a hex id (prefix) from `trove snapshots`"),
        ));
    }
    // A whole id is looked up exactly: SQLite prepares a LIKE with a bound pattern again on
    // every run (a fifth of a server's snapshot reads went to parsing it).
    let found = match (reference.len() == 64, workspace) {
        (true, Some(w)) => {
            Some(query(conn, "WHERE s.id = ?1 AND w.name = ?2", &[&reference.to_ascii_lowercase(), &w])?)
        }
        (true, None) => Some(query(conn, "WHERE s.id = ?1", &[&reference.to_ascii_lowercase()])?),
        (false, _) => None,
    };
    if let Some(found) = found {
        return found.into_iter().next().ok_or_else(|| {
            Error::not_found(format!("snapshot '{reference}'{within} not found: run `trove snapshots` to list them"))
        });
    }
    let pattern = format!("{}%", reference.to_ascii_lowercase());
    let found = match workspace {
        Some(w) => query(conn, "WHERE s.id LIKE ?1 AND w.name = ?2 LIMIT 2", &[&pattern, &w])?,
        None => query(conn, "WHERE s.id LIKE ?1 LIMIT 2", &[&pattern])?,
    };
    match found.len() {
        0 => Err(Error::not_found(format!(
            "snapshot '{reference}'{within} not found: run `trove snapshots` to list them"
        ))),
        1 => Ok(found.into_iter().next().ok_or_else(|| Error::internal("one row vanished"))?),
        _ => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("snapshot prefix '{reference}' is ambiguous: give more characters"),
        )),
    }
}
