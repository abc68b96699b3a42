//! Manifest rows of sessions and of API token hashes.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::error::{Error, Result};
use crate::session::{Session, Status};

const COLUMNS: &str = "id, workspace, live_dir, persistent, ttl, metadata, file_access, status, created_ns, \
                       last_activity_ns, ended_ns, end_reason, final_snapshot";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Session, String, String, String)> {
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
        end_reason: r.get(11)?,
        final_snapshot: r.get(12)?,
    };
    Ok((s, r.get(5)?, r.get(6)?, r.get(7)?))
}

fn to_session(raw: (Session, String, String, String)) -> Result<Session> {
    let (mut s, metadata, access, status) = raw;
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Error::corrupt(format!("session {} has a malformed {what}: {e}", s.id));
    s.metadata = serde_json::from_str(&metadata).map_err(|e| bad("metadata", &e))?;
    s.file_access = serde_json::from_str(&access).map_err(|e| bad("file_access", &e))?;
    s.status = Status::parse(&status).ok_or_else(|| bad("status", &status))?;
    Ok(s)
}

pub fn insert(conn: &Connection, s: &Session) -> Result<()> {
    let metadata = serde_json::to_string(&s.metadata).map_err(|e| Error::internal(format!("metadata: {e}")))?;
    let access = serde_json::to_string(&s.file_access).map_err(|e| Error::internal(format!("file_access: {e}")))?;
    conn.execute(
        &format!("INSERT INTO sessions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
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
            s.end_reason,
            s.final_snapshot
        ],
    )
    .map_err(db("recording a session"))?;
    Ok(())
}

pub fn get(conn: &Connection, id: &str) -> Result<Option<Session>> {
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

pub fn set_status(conn: &Connection, id: &str, status: Status) -> Result<()> {
    conn.execute("UPDATE sessions SET status = ?1 WHERE id = ?2", params![status.as_str(), id])
        .map_err(db("updating a session"))?;
    Ok(())
}

pub fn end(conn: &Connection, id: &str, ended_ns: i64, reason: &str, final_snapshot: Option<&str>) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET status = 'ended', ended_ns = ?1, end_reason = ?2, final_snapshot = ?3 WHERE id = ?4",
        params![ended_ns, reason, final_snapshot, id],
    )
    .map_err(db("ending a session"))?;
    Ok(())
}

/// Moves `last_activity_ns` forward (never back).
pub fn touch(conn: &Connection, id: &str, at_ns: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET last_activity_ns = MAX(last_activity_ns, ?1) WHERE id = ?2 AND status != 'ended'",
        params![at_ns, id],
    )
    .map_err(db("recording session activity"))?;
    Ok(())
}

/// The newest snapshot a session took, if any.
pub fn latest_snapshot(conn: &Connection, id: &str) -> Result<Option<String>> {
    conn.prepare_cached("SELECT id FROM snapshots WHERE session = ?1 ORDER BY created_ns DESC, rowid DESC LIMIT 1")
        .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
        .map_err(db("finding a session's snapshot"))
}

/// An API token as `trove token list` shows it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRow {
    pub id: String,
    pub label: String,
    #[serde(skip)]
    pub created_ns: i64,
    #[serde(skip)]
    pub revoked_ns: Option<i64>,
}

/// A token's id: `tok_` and the first 12 hex digits of its SHA-256 (schema version 4).
pub fn token_id(hash: &[u8; 32]) -> String {
    format!("tok_{}", hex::encode(&hash[..6]))
}

pub fn add_token(conn: &Connection, hash: &[u8; 32], label: &str, now_ns: i64) -> Result<String> {
    let id = token_id(hash);
    conn.execute(
        "INSERT INTO api_tokens (hash, label, created_ns, id) VALUES (?1, ?2, ?3, ?4)",
        params![&hash[..], label, now_ns, id],
    )
    .map_err(db("storing an API token"))?;
    Ok(id)
}

/// The hashes and ids of the tokens that are not revoked.
pub fn token_hashes(conn: &Connection) -> Result<Vec<([u8; 32], String)>> {
    let mut stmt = conn
        .prepare_cached("SELECT hash, id FROM api_tokens WHERE revoked_ns IS NULL")
        .map_err(db("reading API tokens"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?)))
        .map_err(db("reading API tokens"))?;
    let mut out = Vec::new();
    for r in rows {
        let (h, id) = r.map_err(db("reading API tokens"))?;
        out.push((h.try_into().map_err(|_| Error::corrupt("an API token hash is not 32 bytes"))?, id));
    }
    Ok(out)
}

/// Every token, oldest first, revoked ones included.
pub fn tokens(conn: &Connection) -> Result<Vec<TokenRow>> {
    let mut stmt = conn
        .prepare("SELECT id, label, created_ns, revoked_ns FROM api_tokens ORDER BY created_ns, id")
        .map_err(db("listing API tokens"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(TokenRow { id: r.get(0)?, label: r.get(1)?, created_ns: r.get(2)?, revoked_ns: r.get(3)? })
        })
        .map_err(db("listing API tokens"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("listing API tokens"))
}

/// Marks token `id` revoked; returns whether a live token had that id.
pub fn revoke_token(conn: &Connection, id: &str, now_ns: i64) -> Result<bool> {
    let n = conn
        .execute("UPDATE api_tokens SET revoked_ns = ?2 WHERE id = ?1 AND revoked_ns IS NULL", params![id, now_ns])
        .map_err(db("revoking an API token"))?;
    Ok(n == 1)
}
