//! Manifest rows of upload temporaries: which `.trove-up-*.tmp` files in which live trees are
//! trove's own, and which process writes each (schema version 14).

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;

/// One upload temporary as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadTemp {
    /// The workspace directory it is at the root of.
    pub live_dir: Vec<u8>,
    /// Its name there.
    pub name: Vec<u8>,
    /// The process writing it, and that process's start time.
    pub pid: u32,
    pub pid_start: u64,
}

/// Records `t` before its file is made.
pub fn insert(conn: &Connection, t: &UploadTemp, now_ns: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO upload_temps (live_dir, name, pid, pid_start, started_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![t.live_dir, t.name, t.pid, t.pid_start as i64, now_ns]))
    .map_err(db("recording an upload's temporary"))?;
    Ok(())
}

/// Forgets the temporary `name` of `live_dir` (renamed into place, or removed).
pub fn remove(conn: &Connection, live_dir: &[u8], name: &[u8]) -> Result<()> {
    conn.prepare_cached("DELETE FROM upload_temps WHERE live_dir = ?1 AND name = ?2")
        .and_then(|mut s| s.execute(params![live_dir, name]))
        .map_err(db("forgetting an upload's temporary"))?;
    Ok(())
}

/// Every recorded temporary; of `live_dir` only, when given.
pub fn list(conn: &Connection, live_dir: Option<&[u8]>) -> Result<Vec<UploadTemp>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT live_dir, name, pid, pid_start FROM upload_temps WHERE ?1 IS NULL OR live_dir = ?1 ORDER BY live_dir, name",
        )
        .map_err(db("reading upload temporaries"))?;
    let rows = stmt
        .query_map([live_dir], |r| {
            Ok(UploadTemp {
                live_dir: r.get(0)?,
                name: r.get(1)?,
                pid: r.get::<_, i64>(2)? as u32,
                pid_start: r.get::<_, i64>(3)? as u64,
            })
        })
        .map_err(db("reading upload temporaries"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading upload temporaries"))
}
