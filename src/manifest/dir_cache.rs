//! Manifest rows of the directory cache: one record per directory of a workspace's live tree
//! (`model::dir_cache` encodes it), keyed by a hash of the directory's path.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::Result;
use crate::object::RandomKeyMap;

/// The key of a workspace-relative directory path ("" is the root): 128 bits of BLAKE3, so a
/// collision is out of reach and a key is a third of a typical path's size.
pub type DirKey = [u8; 16];

pub fn dir_key(rel: &[u8]) -> DirKey {
    let mut k = [0u8; 16];
    k.copy_from_slice(&blake3::hash(rel).as_bytes()[..16]);
    k
}

/// A workspace's records by key. Keys are random already, so they hash as they are.
pub type DirCacheMap = RandomKeyMap<DirKey, Vec<u8>>;

/// Every record of workspace `workspace`. A row whose key is malformed is skipped: the
/// directory is then only a cache miss.
pub fn load(conn: &Connection, workspace: i64) -> Result<DirCacheMap> {
    let mut stmt = conn
        .prepare_cached("SELECT dir_key, data FROM dir_cache WHERE workspace = ?1")
        .map_err(db("loading the directory cache"))?;
    let mut rows = stmt.query([workspace]).map_err(db("loading the directory cache"))?;
    let mut out = DirCacheMap::default();
    while let Some(r) = rows.next().map_err(db("loading the directory cache"))? {
        let key =
            r.get_ref(0).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db("loading the directory cache"))?;
        let Ok(key) = DirKey::try_from(key) else { continue };
        let data: Vec<u8> = r.get(1).map_err(db("loading the directory cache"))?;
        out.insert(key, data);
    }
    Ok(out)
}

pub fn upsert(conn: &Connection, workspace: i64, key: &DirKey, data: &[u8]) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("INSERT OR REPLACE INTO dir_cache (workspace, dir_key, data) VALUES (?1, ?2, ?3)")
        .map_err(db("updating the directory cache"))?;
    stmt.execute(params![workspace, &key[..], data]).map_err(db("updating the directory cache"))?;
    Ok(())
}

pub fn delete(conn: &Connection, workspace: i64, key: &DirKey) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("DELETE FROM dir_cache WHERE workspace = ?1 AND dir_key = ?2")
        .map_err(db("updating the directory cache"))?;
    stmt.execute(params![workspace, &key[..]]).map_err(db("updating the directory cache"))?;
    Ok(())
}
