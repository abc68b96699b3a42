//! Manifest rows of restores in progress: a target directory and the staging directory inside it
//! that holds files not yet renamed into place.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;

/// A restore that began and has not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    /// The target directory, absolute.
    pub target: Vec<u8>,
    /// The staging directory's name inside the target.
    pub staging: Vec<u8>,
}

pub fn insert(conn: &Connection, p: &Pending, created_ns: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO restores (id, target, staging, created_ns) VALUES (?1, ?2, ?3, ?4)",
        params![p.id, p.target, p.staging, created_ns],
    )
    .map_err(db("recording a restore"))?;
    Ok(())
}

pub fn remove(conn: &Connection, id: &str) -> Result<()> {
    conn.execute("DELETE FROM restores WHERE id = ?1", [id]).map_err(db("closing a restore"))?;
    Ok(())
}

/// Every restore a crash interrupted (or one running now in another process), oldest first.
pub fn pending(conn: &Connection) -> Result<Vec<Pending>> {
    let mut st = conn
        .prepare("SELECT id, target, staging FROM restores ORDER BY created_ns, id")
        .map_err(db("reading restores in progress"))?;
    let rows = st
        .query_map([], |r| Ok(Pending { id: r.get(0)?, target: r.get(1)?, staging: r.get(2)? }))
        .map_err(db("reading restores in progress"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading restores in progress"))
}
