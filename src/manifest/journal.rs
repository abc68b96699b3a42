//! Manifest rows of the tool journal: mutations of a live tree that are decided but not yet
//! known to be finished.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;
use crate::base::id::PlanId;

/// Journals plan `id` (its JSON encoding), decided from here on.
pub fn insert(conn: &Connection, id: &PlanId, created_ns: i64, plan: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO journal (id, created_ns, plan) VALUES (?1, ?2, ?3)")
        .and_then(|mut st| st.execute(params![id, created_ns, plan]))
        .map_err(db("journaling a mutation"))?;
    Ok(())
}

/// Closes plan `id`: it finished, or was rolled back.
pub fn remove(conn: &Connection, id: &PlanId) -> Result<()> {
    conn.prepare_cached("DELETE FROM journal WHERE id = ?1")
        .and_then(|mut st| st.execute([id]))
        .map_err(db("closing a journal entry"))?;
    Ok(())
}

/// Every unfinished mutation, oldest first: (id, plan), both as stored, so recovery can report
/// one malformed row by itself instead of failing on all of them.
pub fn pending(conn: &Connection) -> Result<Vec<(String, String)>> {
    let mut st =
        conn.prepare("SELECT id, plan FROM journal ORDER BY created_ns, id").map_err(db("reading the journal"))?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(db("reading the journal"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading the journal"))
}
