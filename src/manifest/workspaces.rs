//! Manifest rows of workspaces: a name, the directory last snapshotted, and exclusion settings.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::model::workspace::Workspace;

fn parse_list(name: &str, json: &str) -> Result<Vec<String>> {
    serde_json::from_str(json)
        .map_err(|e| Error::corrupt(format!("workspace '{name}' has a malformed exclusion list: {e}")))
}

/// Reads one row (columns as in `COLUMNS`); the JSON lists are parsed by `to_row`.
fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    let ws = Workspace {
        id: r.get(0)?,
        name: r.get(1)?,
        root: r.get(2)?,
        excludes: None,
        extra_excludes: Vec::new(),
        created_ns: r.get(5)?,
        trash_age_s: r.get(6)?,
        trash_quota: r.get::<_, Option<i64>>(7)?.map(|q| q.max(0) as u64),
        snapshot_retention: None,
    };
    Ok((ws, r.get(3)?, r.get(4)?, r.get(8)?))
}

type RawRow = (Workspace, Option<String>, String, Option<String>);

fn to_row(raw: RawRow) -> Result<Workspace> {
    let (mut ws, excludes, extra, retention) = raw;
    ws.excludes = excludes.map(|j| parse_list(&ws.name, &j)).transpose()?;
    ws.extra_excludes = parse_list(&ws.name, &extra)?;
    ws.snapshot_retention = retention
        .map(|j| {
            serde_json::from_str(&j).map_err(|e| {
                Error::corrupt(format!("workspace '{}' has a malformed snapshot retention policy: {e}", ws.name))
            })
        })
        .transpose()?;
    Ok(ws)
}

const COLUMNS: &str =
    "id, name, root, excludes, extra_excludes, created_ns, trash_age_s, trash_quota, snapshot_retention";

/// Workspace `name`, if the manifest has it.
pub fn get(conn: &Connection, name: &str) -> Result<Option<Workspace>> {
    let raw = conn
        .query_row(&format!("SELECT {COLUMNS} FROM workspaces WHERE name = ?1"), [name], row)
        .optional()
        .map_err(db("reading a workspace"))?;
    raw.map(to_row).transpose()
}

/// Every workspace.
pub fn list(conn: &Connection) -> Result<Vec<Workspace>> {
    let mut stmt =
        conn.prepare(&format!("SELECT {COLUMNS} FROM workspaces ORDER BY name")).map_err(db("listing workspaces"))?;
    let rows = stmt.query_map([], row).map_err(db("listing workspaces"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(to_row(r.map_err(db("listing workspaces"))?)?);
    }
    Ok(out)
}

/// The workspace called `name`, created if missing.
pub fn ensure(conn: &Connection, name: &str, now_ns: i64) -> Result<Workspace> {
    conn.execute("INSERT OR IGNORE INTO workspaces (name, created_ns) VALUES (?1, ?2)", params![name, now_ns])
        .map_err(db("creating a workspace"))?;
    get(conn, name)?.ok_or_else(|| Error::internal(format!("workspace '{name}' vanished after insert")))
}

/// Records `root` as the directory workspace `id` was last snapshotted from.
pub fn set_root(conn: &Connection, id: i64, root: &[u8]) -> Result<()> {
    conn.execute("UPDATE workspaces SET root = ?1 WHERE id = ?2", params![root, id])
        .map_err(db("updating a workspace"))?;
    Ok(())
}

/// Sets workspace `id`'s exclusion list (`None`: the default) and its additions.
pub fn set_excludes(conn: &Connection, id: i64, excludes: Option<&[String]>, extra: &[String]) -> Result<()> {
    let excludes = excludes.map(serde_json::to_string).transpose().map_err(|e| Error::internal(e.to_string()))?;
    let extra = serde_json::to_string(extra).map_err(|e| Error::internal(e.to_string()))?;
    conn.execute(
        "UPDATE workspaces SET excludes = ?1, extra_excludes = ?2 WHERE id = ?3",
        params![excludes, extra, id],
    )
    .map_err(db("updating a workspace"))?;
    Ok(())
}

/// Sets workspace `id`'s trash retention: the age past which items expire and the byte quota
/// (`None`: the default age, no quota).
pub fn set_retention(conn: &Connection, id: i64, age_s: Option<i64>, quota: Option<u64>) -> Result<()> {
    let quota = quota.map(|q| i64::try_from(q).unwrap_or(i64::MAX));
    conn.execute("UPDATE workspaces SET trash_age_s = ?1, trash_quota = ?2 WHERE id = ?3", params![age_s, quota, id])
        .map_err(db("updating a workspace"))?;
    Ok(())
}

/// Sets workspace `id`'s snapshot retention policy (`None`: keep every snapshot).
pub fn set_snapshot_retention(
    conn: &Connection,
    id: i64,
    policy: Option<&crate::model::retention::RetentionPolicy>,
) -> Result<()> {
    let json = policy.map(serde_json::to_string).transpose().map_err(|e| Error::internal(e.to_string()))?;
    conn.execute("UPDATE workspaces SET snapshot_retention = ?1 WHERE id = ?2", params![json, id])
        .map_err(db("updating a workspace"))?;
    Ok(())
}
