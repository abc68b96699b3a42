//! Manifest rows of the audit log: appended with the next contiguous sequence number.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::Result;
use crate::model::audit::{AuditRecord, FullRecord};
use crate::object::Sha256;

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
            record.before_sha256.as_ref().map(|s| &s.as_bytes()[..]),
            record.after_sha256.as_ref().map(|s| &s.as_bytes()[..]),
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

const FULL: &str = "SELECT seq, time_ns, actor, operation, workspace, session, path, dest_path, before_sha256,
                    after_sha256, before_object, after_object, outcome, details FROM audit";

/// The row with its object ids and details still raw, decoded by `finish_row`.
type RawRecord = (FullRecord, Option<Vec<u8>>, Option<Vec<u8>>, String);

fn full_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
    let mut record = AuditRecord::ok(r.get(1)?, &r.get::<_, String>(2)?, &r.get::<_, String>(3)?);
    record.workspace = r.get(4)?;
    record.session = r.get(5)?;
    record.path = r.get(6)?;
    record.dest_path = r.get(7)?;
    record.before_sha256 = r.get::<_, Option<[u8; 32]>>(8)?.map(Sha256);
    record.after_sha256 = r.get::<_, Option<[u8; 32]>>(9)?.map(Sha256);
    record.outcome = r.get(12)?;
    Ok((FullRecord { seq: r.get(0)?, record }, r.get(10)?, r.get(11)?, r.get(13)?))
}

fn finish_row(raw: RawRecord) -> Result<FullRecord> {
    let (mut full, before, after, details) = raw;
    let id = |o: Option<Vec<u8>>| o.map(|o| crate::object::ObjectId::from_slice(&o)).transpose();
    full.record.before_object = id(before)?;
    full.record.after_object = id(after)?;
    full.record.details = serde_json::from_str(&details).map_err(|e| {
        crate::base::error::Error::corrupt(format!("audit record {} has malformed details: {e}", full.seq))
    })?;
    Ok(full)
}

/// Record `seq`, if there is one.
pub fn get(conn: &Connection, seq: i64) -> Result<Option<FullRecord>> {
    let raw = conn
        .query_row(&format!("{FULL} WHERE seq = ?1"), [seq], full_row)
        .optional()
        .map_err(db("reading the audit log"))?;
    raw.map(finish_row).transpose()
}

/// The last `limit` records (of `session`, if given), oldest first.
pub fn tail(conn: &Connection, session: Option<&str>, limit: i64) -> Result<Vec<FullRecord>> {
    let mut st = conn
        .prepare(&format!("{FULL} WHERE ?1 IS NULL OR session = ?1 ORDER BY seq DESC LIMIT ?2"))
        .map_err(db("reading the audit log"))?;
    let rows = st.query_map(params![session, limit], full_row).map_err(db("reading the audit log"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(finish_row(r.map_err(db("reading the audit log"))?)?);
    }
    out.reverse();
    Ok(out)
}
