//! Manifest rows of sessions and of API token hashes.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::base::id::{SessionId, SnapshotId};
use crate::model::session::{EndReason, Session, Status};

const COLUMNS: &str = "id, workspace, live_dir, persistent, ttl, metadata, file_access, status, created_ns, \
                       last_activity_ns, ended_ns, end_reason, final_snapshot, options";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    let dir: Vec<u8> = r.get(2)?;
    let s = Session {
        id: r.get(0)?,
        workspace: r.get(1)?,
        live_dir: PathBuf::from(std::ffi::OsStr::from_bytes(&dir)),
        persistent: r.get(3)?,
        ttl_s: r.get(4)?,
        metadata: Default::default(),
        file_access: Default::default(),
        status: Status::Ready,
        created_ns: r.get(8)?,
        last_activity_ns: r.get(9)?,
        ended_ns: r.get(10)?,
        end_reason: None,
        final_snapshot: r.get(12)?,
        options: Default::default(),
    };
    Ok((s, r.get(5)?, r.get(6)?, r.get(7)?, r.get(11)?, r.get(13)?))
}

/// A row with its text columns still to decode: metadata, file access, status, end reason,
/// options.
type Raw = (Session, String, String, String, Option<String>, String);

fn to_session(raw: Raw) -> Result<Session> {
    let (mut s, metadata, access, status, end_reason, options) = raw;
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Error::corrupt(format!("session {} has a malformed {what}: {e}", s.id));
    s.metadata = serde_json::from_str(&metadata).map_err(|e| bad("metadata", &e))?;
    s.file_access = serde_json::from_str(&access).map_err(|e| bad("file_access", &e))?;
    s.options = serde_json::from_str(&options).map_err(|e| bad("options", &e))?;
    s.status = Status::parse(&status).ok_or_else(|| bad("status", &status))?;
    s.end_reason = match end_reason {
        Some(r) => Some(EndReason::parse(&r).ok_or_else(|| bad("end_reason", &r))?),
        None => None,
    };
    Ok(s)
}

/// Records session `s`, served by `host` (in a bucket, the host whose directory is its live
/// one: only its reaper ends it; None in a directory, whose one host serves every session).
pub fn insert(conn: &Connection, s: &Session, host: Option<&str>) -> Result<()> {
    let metadata = serde_json::to_string(&s.metadata).map_err(|e| Error::internal(format!("metadata: {e}")))?;
    let access = serde_json::to_string(&s.file_access).map_err(|e| Error::internal(format!("file_access: {e}")))?;
    let options = serde_json::to_string(&s.options).map_err(|e| Error::internal(format!("options: {e}")))?;
    conn.execute(
        &format!(
            "INSERT INTO sessions ({COLUMNS}, host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
        ),
        params![
            s.id,
            s.workspace,
            s.live_dir.as_os_str().as_bytes(),
            s.persistent,
            s.ttl_s,
            metadata,
            access,
            s.status.as_str(),
            s.created_ns,
            s.last_activity_ns,
            s.ended_ns,
            s.end_reason.map(EndReason::as_str),
            s.final_snapshot,
            options,
            host
        ],
    )
    .map_err(db("recording a session"))?;
    Ok(())
}

/// The ids of the sessions `host` serves, not ended.
pub fn hosted_by(conn: &Connection, host: &str) -> Result<std::collections::HashSet<SessionId>> {
    let mut st = conn
        .prepare_cached("SELECT id FROM sessions WHERE host = ?1 AND status != 'ended'")
        .map_err(db("listing a host's sessions"))?;
    let ids = st.query_map([host], |r| r.get(0)).map_err(db("listing a host's sessions"))?;
    ids.map(|r| r.map_err(db("listing a host's sessions"))).collect()
}

pub fn get(conn: &Connection, id: &SessionId) -> Result<Option<Session>> {
    let raw = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))
        .and_then(|mut st| st.query_row([id], row).optional())
        .map_err(db("reading a session"))?;
    raw.map(to_session).transpose()
}

/// Sessions oldest first; ended ones only when asked.
pub fn list(conn: &Connection, include_ended: bool) -> Result<Vec<Session>> {
    let filter = if include_ended { "" } else { "WHERE status != 'ended'" };
    let mut stmt = conn
        .prepare(&format!("SELECT {COLUMNS} FROM sessions {filter} ORDER BY created_ns, id"))
        .map_err(db("listing sessions"))?;
    let rows = stmt.query_map([], row).map_err(db("listing sessions"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(to_session(r.map_err(db("listing sessions"))?)?);
    }
    Ok(out)
}

pub fn set_status(conn: &Connection, id: &SessionId, status: Status) -> Result<()> {
    conn.execute("UPDATE sessions SET status = ?1 WHERE id = ?2", params![status.as_str(), id])
        .map_err(db("updating a session"))?;
    Ok(())
}

pub fn end(
    conn: &Connection,
    id: &SessionId,
    ended_ns: i64,
    reason: EndReason,
    final_snapshot: Option<&SnapshotId>,
) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET status = 'ended', ended_ns = ?1, end_reason = ?2, final_snapshot = ?3 WHERE id = ?4",
        params![ended_ns, reason.as_str(), final_snapshot, id],
    )
    .map_err(db("ending a session"))?;
    Ok(())
}

/// Moves `last_activity_ns` forward (never back).
pub fn touch(conn: &Connection, id: &SessionId, at_ns: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET last_activity_ns = MAX(last_activity_ns, ?1) WHERE id = ?2 AND status != 'ended'",
        params![at_ns, id],
    )
    .map_err(db("recording session activity"))?;
    Ok(())
}

/// The newest snapshot a session took, if any.
pub fn latest_snapshot(conn: &Connection, id: &SessionId) -> Result<Option<SnapshotId>> {
    conn.prepare_cached("SELECT id FROM snapshots WHERE session = ?1 ORDER BY created_ns DESC, rowid DESC LIMIT 1")
        .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
        .map_err(db("finding a session's snapshot"))
}

/// Records a session token (its SHA-256) for session `session`.
pub fn insert_token(conn: &Connection, hash: &[u8; 32], session: &SessionId, now_ns: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO session_tokens (hash, session, created_ns) VALUES (?1, ?2, ?3)",
        params![&hash[..], session, now_ns],
    )
    .map_err(db("recording a session token"))?;
    Ok(())
}

/// The session a token (by its SHA-256) stands for, unless revoked.
pub fn token_session(conn: &Connection, hash: &[u8; 32]) -> Result<Option<SessionId>> {
    conn.prepare_cached("SELECT session FROM session_tokens WHERE hash = ?1 AND revoked_ns IS NULL")
        .and_then(|mut st| st.query_row([&hash[..]], |r| r.get(0)).optional())
        .map_err(db("reading a session token"))
}

/// Revokes every token of session `session`.
pub fn revoke_tokens(conn: &Connection, session: &SessionId, now_ns: i64) -> Result<()> {
    conn.execute(
        "UPDATE session_tokens SET revoked_ns = ?2 WHERE session = ?1 AND revoked_ns IS NULL",
        params![session, now_ns],
    )
    .map_err(db("revoking session tokens"))?;
    Ok(())
}

/// Every live session token: (its SHA-256, the session).
pub fn live_tokens(conn: &Connection) -> Result<Vec<([u8; 32], SessionId)>> {
    let mut stmt = conn
        .prepare_cached("SELECT hash, session FROM session_tokens WHERE revoked_ns IS NULL")
        .map_err(db("reading session tokens"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, SessionId>(1)?)))
        .map_err(db("reading session tokens"))?;
    let mut out = Vec::new();
    for r in rows {
        let (h, id) = r.map_err(db("reading session tokens"))?;
        out.push((h.try_into().map_err(|_| Error::corrupt("a session token hash is not 32 bytes"))?, id));
    }
    Ok(out)
}
