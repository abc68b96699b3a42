//! Manifest rows of the stat cache: what each file looked like when its content was last read.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;
use crate::object::{ObjectId, RandomKeyMap, Sha256};

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

/// The key of a workspace-relative path: 128 bits of BLAKE3, so a collision is out of reach.
pub type PathKey = [u8; 16];

/// The key of the path `parent/name` (the empty parent is the root), hashed without building it.
pub fn child_key(parent: &[u8], name: &[u8]) -> PathKey {
    let mut h = blake3::Hasher::new();
    if !parent.is_empty() {
        h.update(parent);
        h.update(b"/");
    }
    key_of(h.update(name))
}

fn key_of(h: &blake3::Hasher) -> PathKey {
    let mut k = [0u8; 16];
    k.copy_from_slice(&h.finalize().as_bytes()[..16]);
    k
}

/// The stat cache in memory: path keys are random already, so they hash as they are.
pub type CacheMap = RandomKeyMap<PathKey, CachedStat>;

/// Every cached row of a workspace, by path key.
pub fn load(conn: &Connection, workspace: i64) -> Result<CacheMap> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT path_key, size, mtime_ns, ctime_ns, inode, device, mode, content, sha256 FROM stat_cache WHERE workspace = ?1",
        )
        .map_err(db("loading the stat cache"))?;
    let mut rows = stmt.query([workspace]).map_err(db("loading the stat cache"))?;
    let mut out = CacheMap::default();
    while let Some(r) = rows.next().map_err(db("loading the stat cache"))? {
        let content: Vec<u8> = r.get(7).map_err(db("loading the stat cache"))?;
        let sha: Vec<u8> = r.get(8).map_err(db("loading the stat cache"))?;
        // A malformed row is only a cache miss: the file is read again.
        let (Ok(content), Ok(sha256)) = (ObjectId::from_slice(&content), Sha256::from_slice(&sha)) else {
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
        let key: Vec<u8> = r.get(0).map_err(db("loading the stat cache"))?;
        if let Ok(key) = PathKey::try_from(&key[..]) {
            out.insert(key, row);
        }
    }
    Ok(out)
}

pub fn upsert(conn: &Connection, workspace: i64, key: &PathKey, s: &CachedStat) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO stat_cache (workspace, path_key, size, mtime_ns, ctime_ns, inode, device, mode, content, sha256)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .map_err(db("updating the stat cache"))?;
    stmt.execute(params![
        workspace,
        &key[..],
        s.size as i64,
        s.mtime_ns,
        s.ctime_ns,
        s.inode as i64,
        s.device as i64,
        s.mode as i64,
        &s.content.as_bytes()[..],
        &s.sha256.as_bytes()[..]
    ])
    .map_err(db("updating the stat cache"))?;
    Ok(())
}

pub fn delete(conn: &Connection, workspace: i64, key: &PathKey) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("DELETE FROM stat_cache WHERE workspace = ?1 AND path_key = ?2")
        .map_err(db("updating the stat cache"))?;
    stmt.execute(params![workspace, &key[..]]).map_err(db("updating the stat cache"))?;
    Ok(())
}
