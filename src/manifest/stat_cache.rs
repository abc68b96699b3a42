//! Manifest rows of the stat cache: what each file looked like when its content was last read.

use std::collections::HashMap;

use rusqlite::{params, Connection};

use super::db;
use crate::error::Result;
use crate::object::{ObjectId, Sha256};

/// A file's identity as `lstat` shows it, plus the content that identity was read as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedStat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    pub device: u64,
    pub mode: u32,
    pub content: ObjectId,
    pub sha256: Sha256,
}

/// Every cached row of a workspace, keyed by workspace-relative path.
pub fn load(conn: &Connection, workspace: i64) -> Result<HashMap<Vec<u8>, CachedStat>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT path, size, mtime_ns, ctime_ns, inode, device, mode, content, sha256 FROM stat_cache WHERE workspace = ?1",
        )
        .map_err(db("loading the stat cache"))?;
    let mut rows = stmt.query([workspace]).map_err(db("loading the stat cache"))?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next().map_err(db("loading the stat cache"))? {
        let content: Vec<u8> = r.get(7).map_err(db("loading the stat cache"))?;
        let sha: Vec<u8> = r.get(8).map_err(db("loading the stat cache"))?;
        // A malformed row is only a cache miss: the file is read again.
        let (Ok(content), Ok(sha256)) = (ObjectId::from_slice(&content), <[u8; 32]>::try_from(&sha[..])) else {
            continue;
        };
        let get = |i| r.get::<_, i64>(i);
        let row = (|| -> rusqlite::Result<CachedStat> {
            Ok(CachedStat {
                size: get(1)? as u64,
                mtime_ns: get(2)?,
                ctime_ns: get(3)?,
                inode: get(4)? as u64,
                device: get(5)? as u64,
                mode: get(6)? as u32,
                content,
                sha256,
            })
        })()
        .map_err(db("loading the stat cache"))?;
        out.insert(r.get(0).map_err(db("loading the stat cache"))?, row);
    }
    Ok(out)
}

pub fn upsert(conn: &Connection, workspace: i64, path: &[u8], s: &CachedStat) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO stat_cache (workspace, path, size, mtime_ns, ctime_ns, inode, device, mode, content, sha256)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .map_err(db("updating the stat cache"))?;
    stmt.execute(params![
        workspace,
        path,
        s.size as i64,
        s.mtime_ns,
        s.ctime_ns,
        s.inode as i64,
        s.device as i64,
        s.mode as i64,
        &s.content.as_bytes()[..],
        &s.sha256[..]
    ])
    .map_err(db("updating the stat cache"))?;
    Ok(())
}

pub fn delete(conn: &Connection, workspace: i64, path: &[u8]) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("DELETE FROM stat_cache WHERE workspace = ?1 AND path = ?2")
        .map_err(db("updating the stat cache"))?;
    stmt.execute(params![workspace, path]).map_err(db("updating the stat cache"))?;
    Ok(())
}
