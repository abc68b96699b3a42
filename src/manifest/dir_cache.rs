//! Rows of the directory cache, in the node-local cache (`node_cache.rs`): one record per
//! directory of a workspace's live tree (`model::dir_cache` encodes it), keyed by the workspace's
//! name and a hash of the directory's path, and stored in parts.

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

/// Bytes of a record one row holds. A row of a `WITHOUT ROWID` table keeps at most about 1,000
/// bytes in its 4 KiB page and spills the rest into overflow pages of their own, whose unused
/// tails were a quarter of the cache's pages on npm (a big directory's record is 1-20 KB). Rows
/// of this size, key included, stay in the page, and a record's parts sit side by side.
pub const PART: usize = 960;

/// A workspace's records by key. Keys are random already, so they hash as they are.
pub type DirCacheMap = RandomKeyMap<DirKey, Vec<u8>>;

/// Hands `each` every whole record (workspace, key, bytes) of workspace `workspace`, or of
/// all workspaces. A record whose parts do not run 0, 1, 2... or whose key is malformed is
/// skipped: its directory is then only a cache miss.
pub fn for_each(
    conn: &Connection,
    workspace: Option<&str>,
    mut each: impl FnMut(&str, &DirKey, Vec<u8>) -> Result<()>,
) -> Result<()> {
    const WHAT: &str = "reading the directory cache";
    // The primary key's order: a record's parts come one after the other, in order.
    let sql = match workspace {
        Some(_) => "SELECT workspace, dir_key, part, data FROM dir_cache WHERE workspace = ?1 ORDER BY dir_key, part",
        None => "SELECT workspace, dir_key, part, data FROM dir_cache ORDER BY workspace, dir_key, part",
    };
    let mut stmt = conn.prepare_cached(sql).map_err(db(WHAT))?;
    let mut rows = match workspace {
        Some(ws) => stmt.query([ws]),
        None => stmt.query([]),
    }
    .map_err(db(WHAT))?;
    // The record being gathered: its workspace and key, the part expected next (None once one
    // is missing), and its bytes. A missing last part is not seen here: the record's own entry
    // count then runs past its end, which its parser takes as a miss.
    let mut current: Option<(String, DirKey, Option<i64>)> = None;
    let mut data = Vec::new();
    while let Some(r) = rows.next().map_err(db(WHAT))? {
        let ws = r.get_ref(0).and_then(|v| v.as_str().map_err(Into::into)).map_err(db(WHAT))?;
        let key = r.get_ref(1).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db(WHAT))?;
        let Ok(key) = DirKey::try_from(key) else { continue };
        let part: i64 = r.get(2).map_err(db(WHAT))?;
        let bytes = r.get_ref(3).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db(WHAT))?;
        match &mut current {
            Some((cws, ckey, next)) if cws == ws && *ckey == key => {
                *next = next.filter(|n| *n == part).map(|n| n + 1);
            }
            _ => {
                if let Some((cws, ckey, Some(_))) = current.take() {
                    each(&cws, &ckey, std::mem::take(&mut data))?;
                }
                data.clear();
                current = Some((ws.to_string(), key, (part == 0).then_some(1)));
            }
        }
        data.extend_from_slice(bytes);
    }
    if let Some((cws, ckey, Some(_))) = current {
        each(&cws, &ckey, data)?;
    }
    Ok(())
}

/// Whether workspace `workspace` has any record.
pub fn any(conn: &Connection, workspace: &str) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM dir_cache WHERE workspace = ?1 LIMIT 1")
        .and_then(|mut st| st.exists([workspace]))
        .map_err(db("reading the directory cache"))
}

/// Every record of workspace `workspace`.
pub fn load(conn: &Connection, workspace: &str) -> Result<DirCacheMap> {
    let mut out = DirCacheMap::default();
    for_each(conn, Some(workspace), |_, key, data| {
        out.insert(*key, data);
        Ok(())
    })?;
    Ok(out)
}

/// Stores `data` as the record of `key`, replacing the one it had: its parts are written, and
/// those of a longer record before it deleted.
pub fn upsert(conn: &Connection, workspace: &str, key: &DirKey, data: &[u8]) -> Result<()> {
    const WHAT: &str = "updating the directory cache";
    let mut put = conn
        .prepare_cached("INSERT OR REPLACE INTO dir_cache (workspace, dir_key, part, data) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db(WHAT))?;
    // An empty record is still one part, so a key always has part 0.
    let mut parts = 0i64;
    for piece in data.chunks(PART).chain(data.is_empty().then_some(&[][..])) {
        put.execute(params![workspace, &key[..], parts, piece]).map_err(db(WHAT))?;
        parts += 1;
    }
    // The parts of a longer record it replaces.
    let mut tail = conn
        .prepare_cached("DELETE FROM dir_cache WHERE workspace = ?1 AND dir_key = ?2 AND part >= ?3")
        .map_err(db(WHAT))?;
    tail.execute(params![workspace, &key[..], parts]).map_err(db(WHAT))?;
    Ok(())
}

/// The generation the node-local caches must have been built against, from the manifest
/// (`cache_generation`, schema 16): a cache of another is emptied before it is used.
pub fn generation(manifest: &Connection) -> Result<i64> {
    manifest
        .prepare_cached("SELECT COALESCE(MAX(generation), 0) FROM cache_generation")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .map_err(db("reading the cache generation"))
}

/// Makes every node-local cache built before this manifest transaction one to empty: a record
/// may name what `repair snapshots` found lost.
pub fn bump_generation(manifest: &Connection) -> Result<()> {
    manifest
        // Past the next value by a random step: hosts that kept generations of their own before
        // the generation was logged (schema 19) must not happen to hold the one this sets.
        .prepare_cached("UPDATE cache_generation SET generation = generation + 1 + abs(random() % 1000000)")
        .and_then(|mut st| st.execute([]))
        .map(drop)
        .map_err(db("bumping the cache generation"))
}

/// Deletes the record of `key`, every part.
pub fn delete(conn: &Connection, workspace: &str, key: &DirKey) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("DELETE FROM dir_cache WHERE workspace = ?1 AND dir_key = ?2")
        .map_err(db("updating the directory cache"))?;
    stmt.execute(params![workspace, &key[..]]).map_err(db("updating the directory cache"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::node_cache::NodeCache;

    fn records(conn: &Connection, workspace: Option<&str>) -> Vec<(String, DirKey, Vec<u8>)> {
        let mut out = Vec::new();
        for_each(conn, workspace, |ws, key, data| {
            out.push((ws.to_string(), *key, data));
            Ok(())
        })
        .expect("read");
        out
    }

    #[test]
    fn parts_are_gathered_per_workspace_and_key_and_a_gap_is_a_miss() {
        let cache = NodeCache::in_memory("dir_cache_parts_test").expect("create");
        let conn = cache.conn();
        let (w1, w2) = ("w1".to_string(), "w2".to_string());
        // The same key in two workspaces (the root's key is the same in every one).
        let root = dir_key(b"");
        let long: Vec<u8> = (0..3 * PART + 17).map(|i| i as u8).collect();
        upsert(conn, &w1, &root, &long).expect("long");
        upsert(conn, &w2, &root, b"short").expect("short");
        let (a, b) = (dir_key(b"a"), dir_key(b"b"));
        upsert(conn, &w1, &a, b"").expect("empty");
        upsert(conn, &w1, &b, &long).expect("b");
        let mut want = vec![
            (w1.clone(), root, long.clone()),
            (w2.clone(), root, b"short".to_vec()),
            (w1.clone(), a, Vec::new()),
            (w1.clone(), b, long.clone()),
        ];
        want.sort();
        let mut got = records(conn, None);
        got.sort();
        assert_eq!(got, want);
        assert_eq!(records(conn, Some(&w2)), vec![(w2.clone(), root, b"short".to_vec())]);

        // A gap (part 1 of b gone), a first part that is not 0 (a's only part renumbered) and a
        // malformed key beside them: each of these is skipped, the rest still read whole.
        conn.execute("DELETE FROM dir_cache WHERE dir_key = ?1 AND part = 1", [&b[..]]).expect("gap");
        conn.execute("UPDATE dir_cache SET part = 1 WHERE dir_key = ?1", [&a[..]]).expect("renumber");
        conn.execute("INSERT INTO dir_cache (workspace, dir_key, part, data) VALUES ('w1', x'00', 0, x'01')", [])
            .expect("malformed key");
        let mut got = records(conn, Some(&w1));
        got.sort();
        assert_eq!(got, vec![(w1.clone(), root, long.clone())]);

        // Shrinking leaves no part behind; delete takes every part.
        upsert(conn, &w1, &root, b"now short").expect("shrink");
        let parts: i64 = conn
            .query_row("SELECT COUNT(*) FROM dir_cache WHERE workspace = 'w1' AND dir_key = ?1", [&root[..]], |r| {
                r.get(0)
            })
            .expect("count");
        assert_eq!(parts, 1);
        assert_eq!(load(conn, &w1).expect("load").get(&root).map(Vec::as_slice), Some(&b"now short"[..]));
        upsert(conn, &w1, &root, &long).expect("grow");
        delete(conn, &w1, &root).expect("delete");
        assert!(!load(conn, &w1).expect("load").contains_key(&root));
        assert_eq!(records(conn, Some(&w2)).len(), 1, "the other workspace's record stays");
    }
}
