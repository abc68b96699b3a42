//! Manifest rows of the tool journal: mutations of a live tree that are decided but not yet
//! known to be finished.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;
use crate::base::id::PlanId;
use crate::object::ObjectId;

/// Journals plan `id` (its JSON encoding), decided from here on.
pub fn insert(conn: &Connection, id: &PlanId, created_ns: i64, plan: &str) -> Result<()> {
    conn.prepare_cached("INSERT INTO journal (id, created_ns, plan) VALUES (?1, ?2, ?3)")
        .and_then(|mut st| st.execute(params![id, created_ns, plan]))
        .map_err(db("journaling a mutation"))?;
    Ok(())
}

/// Closes plan `id`: it finished, or was rolled back. Its roots go with it.
pub fn remove(conn: &Connection, id: &PlanId) -> Result<()> {
    remove_entry(conn, id)?;
    drop_roots(conn, id.as_str())
}

/// Deletes plan `id`'s journal row alone: a write that publishes nothing in a bucket (the
/// journal is the host's own), for a plan closed without a record; its roots are let go of
/// after ([`drop_roots`]).
pub fn remove_entry(conn: &Connection, id: &PlanId) -> Result<()> {
    conn.prepare_cached("DELETE FROM journal WHERE id = ?1")
        .and_then(|mut st| st.execute([id]))
        .map_err(db("closing a journal entry"))?;
    Ok(())
}

/// Makes `objects` roots of every host's collection while plan `id` (of `host`) is open: a
/// bucket's hosts do not see each other's journals.
pub fn insert_roots(conn: &Connection, id: &PlanId, host: &str, created_ns: i64, objects: &[ObjectId]) -> Result<()> {
    let mut st = conn
        .prepare_cached("INSERT OR IGNORE INTO plan_roots (plan, object, host, created_ns) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db("recording a plan's roots"))?;
    for o in objects {
        st.execute(params![id, o.as_bytes(), host, created_ns]).map_err(db("recording a plan's roots"))?;
    }
    Ok(())
}

/// The plans with roots in the log, oldest first: (plan, host, created_ns).
pub fn rooted_plans(conn: &Connection) -> Result<Vec<(String, Option<String>, i64)>> {
    let mut st = conn
        .prepare("SELECT plan, host, MIN(created_ns) FROM plan_roots GROUP BY plan, host ORDER BY 3, 1")
        .map_err(db("reading the plans' roots"))?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(db("reading the plans' roots"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading the plans' roots"))
}

/// Drops the roots of plan `id`: it was closed, or abandoned by its host.
pub fn drop_roots(conn: &Connection, id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM plan_roots WHERE plan = ?1")
        .and_then(|mut st| st.execute([id]))
        .map_err(db("dropping a plan's roots"))?;
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
