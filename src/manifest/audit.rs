//! Manifest rows of the audit log: appended with the next contiguous sequence number.

use rusqlite::{params, Connection};

use super::db;
use crate::audit::AuditRecord;
use crate::error::Result;

/// Appends `record` in the caller's transaction and returns its sequence number.
pub fn append(conn: &Connection, record: &AuditRecord) -> Result<i64> {
    // Inside the caller's write transaction no other writer can interleave, so MAX + 1 keeps the
    // sequence contiguous, which the Merkle tree over the log relies on.
    let seq: i64 = conn
        .query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM audit", [], |r| r.get(0))
        .map_err(db("appending to the audit log"))?;
    let encoded = record.encode(seq);
    conn.execute(
        "INSERT INTO audit (seq, time_ns, actor, operation, workspace, session, path, dest_path,
                            before_sha256, after_sha256, before_object, after_object, outcome, details, encoded)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            seq,
            record.time_ns,
            record.actor,
            record.operation,
            record.workspace,
            record.session,
            record.path,
            record.dest_path,
            record.before_sha256.as_ref().map(|s| &s[..]),
            record.after_sha256.as_ref().map(|s| &s[..]),
            record.before_object.as_ref().map(|o| &o.as_bytes()[..]),
            record.after_object.as_ref().map(|o| &o.as_bytes()[..]),
            record.outcome,
            record.details.to_string(),
            encoded,
        ],
    )
    .map_err(db("appending to the audit log"))?;
    Ok(seq)
}

/// The fields of a record that listings show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub seq: i64,
    pub actor: String,
    pub operation: String,
    pub workspace: Option<String>,
    pub outcome: String,
}

/// The most recent records, newest first.
pub fn recent(conn: &Connection, limit: i64) -> Result<Vec<AuditRow>> {
    let mut stmt = conn
        .prepare("SELECT seq, actor, operation, workspace, outcome FROM audit ORDER BY seq DESC LIMIT ?1")
        .map_err(db("reading the audit log"))?;
    let rows = stmt
        .query_map([limit], |r| {
            Ok(AuditRow {
                seq: r.get(0)?,
                actor: r.get(1)?,
                operation: r.get(2)?,
                workspace: r.get(3)?,
                outcome: r.get(4)?,
            })
        })
        .map_err(db("reading the audit log"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading the audit log"))
}
