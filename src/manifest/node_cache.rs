//! The node-local cache: a SQLite database outside the repository, one per repository and
//! machine (`<cache dir>/<repository id>/cache.db`), holding only what this machine can
//! rebuild from its own files: the directory cache (`dir_cache.rs`). Deleting it costs the next
//! snapshot of each workspace one full read; no backup or copy of the repository carries it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::base::error::{Error, Result};

/// The database's file name within its repository's cache directory.
pub const CACHE_FILE: &str = "cache.db";

/// What a cache directory holds, for tools that back up a home directory: the tag of the
/// Cache Directory Tagging Specification (<https://bford.info/cachedir/>), which restic, borg
/// and tar's `--exclude-caches` honour.
const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by trove.\n\
# For information about cache directory tags, see https://bford.info/cachedir/\n";

/// The layout this build writes. A cache of another layout (an older or newer trove's) is
/// emptied and laid out again: it holds nothing that cannot be rebuilt.
const CACHE_VERSION: i64 = 1;

const CACHE_SCHEMA: &str = "
CREATE TABLE dir_cache (
    workspace   TEXT NOT NULL,               -- the workspace's name
    dir_key     BLOB NOT NULL,               -- first 16 bytes of BLAKE3(workspace-relative path)
    part        INTEGER NOT NULL,            -- 0, 1, 2...: the record is their data in this order
    data        BLOB NOT NULL,
    PRIMARY KEY (workspace, dir_key, part)
) WITHOUT ROWID;";

/// The directory under which each repository's cache gets a directory named after its id:
/// `$TROVE_CACHE_DIR`, else `$XDG_CACHE_HOME/trove`, else `$HOME/.cache/trove` (relative
/// `XDG_CACHE_HOME` values are ignored, as the XDG specification says). None when none is set.
/// `var` reads the environment (a test passes its own).
pub fn default_base(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("TROVE_CACHE_DIR") {
        return Some(dir);
    }
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Some(xdg.join("trove"));
    }
    set("HOME").map(|home| home.join(".cache/trove"))
}

/// An open node-local cache.
pub struct NodeCache {
    conn: Connection,
}

impl NodeCache {
    /// Opens (making it if need be) the cache in directory `dir` (`<base>/<repository id>`). A
    /// file that is not a database of this layout is replaced: it is a cache.
    pub fn open(dir: &Path) -> Result<NodeCache> {
        make_dir(dir)?;
        if let Some(base) = dir.parent() {
            tag(base);
        }
        let path = dir.join(CACHE_FILE);
        match NodeCache::open_file(&path) {
            Ok(cache) => Ok(cache),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the node-local cache could not be read: it is made anew");
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    match std::fs::remove_file(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io("remove the damaged cache", Path::new(&p), e)),
                    }
                }
                NodeCache::open_file(&path)
            }
        }
    }

    fn open_file(path: &Path) -> Result<NodeCache> {
        let what = format!("opening the node-local cache {}", path.display());
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)
            .map_err(|e| Error::db(&what, e))?;
        // Durability is not needed (a lost write costs a re-read), so commits are not synced;
        // WAL lets a server's handles and a command read while one writes.
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(|e| Error::db(&what, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| Error::db(&what, e))?;
        NodeCache::lay_out(conn, &what)
    }

    /// A cache in memory, for a repository in memory: `name` is shared by its handles.
    pub fn in_memory(name: &str) -> Result<NodeCache> {
        let what = format!("opening the in-memory cache {name}");
        let uri = format!("file:{name}-node-cache?mode=memory&cache=shared");
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&uri, flags).map_err(|e| Error::db(&what, e))?;
        NodeCache::lay_out(conn, &what)
    }

    /// Gives `conn` this build's layout, emptying a cache of another.
    fn lay_out(conn: Connection, what: &str) -> Result<NodeCache> {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| Error::db(what, e))?;
        if version != CACHE_VERSION {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; DROP TABLE IF EXISTS dir_cache; {CACHE_SCHEMA} PRAGMA user_version = {CACHE_VERSION}; COMMIT;"
            ))
            .map_err(|e| Error::db(what, e))?;
        }
        Ok(NodeCache { conn })
    }

    /// The connection, for reads.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Runs `f` in one write transaction.
    pub fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let what = "writing the node-local cache";
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| Error::db(what, e))?;
        match f(&self.conn) {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(|e| Error::db(what, e))?;
                Ok(v)
            }
            Err(e) => {
                if let Err(r) = self.conn.execute_batch("ROLLBACK") {
                    tracing::warn!(error = %r, "rolling back a write of the node-local cache failed");
                }
                Err(e)
            }
        }
    }

    /// Empties the cache; returns how many record parts went.
    pub fn clear(&self) -> Result<u64> {
        self.write(|c| {
            c.execute("DELETE FROM dir_cache", [])
                .map(|n| n as u64)
                .map_err(|e| Error::db("emptying the node-local cache", e))
        })
    }
}

/// Makes `dir` and its parents, private to the user (a cache names the workspace's files).
fn make_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io("create the cache directory", dir, e))
}

/// Writes the cache directory tag in `base` unless one is there; a failure only costs a backup
/// tool's skipping the directory, so it is logged, not returned.
fn tag(base: &Path) {
    let path = base.join("CACHEDIR.TAG");
    if path.exists() {
        return;
    }
    if let Err(e) = std::fs::write(&path, CACHEDIR_TAG) {
        tracing::debug!(path = %path.display(), error = %e, "the cache directory tag could not be written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn the_base_is_trove_cache_dir_then_xdg_cache_home_then_home() {
        let all = [("TROVE_CACHE_DIR", "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(default_base(env(&all)), Some(PathBuf::from("/c")));
        assert_eq!(default_base(env(&all[1..])), Some(PathBuf::from("/x/trove")));
        assert_eq!(default_base(env(&all[2..])), Some(PathBuf::from("/h/.cache/trove")));
        // Empty and relative values are as if unset.
        let odd = [("TROVE_CACHE_DIR", ""), ("XDG_CACHE_HOME", "rel"), ("HOME", "/h")];
        assert_eq!(default_base(env(&odd)), Some(PathBuf::from("/h/.cache/trove")));
        assert_eq!(default_base(env(&[])), None);
    }

    #[test]
    fn a_damaged_or_foreign_cache_is_made_anew_and_the_base_is_tagged() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("0123");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(CACHE_FILE), b"not a database, but long enough to look like one's header")
            .expect("junk");
        let cache = NodeCache::open(&dir).expect("made anew");
        let n: i64 = cache.conn().query_row("SELECT COUNT(*) FROM dir_cache", [], |r| r.get(0)).expect("count");
        assert_eq!(n, 0);
        assert!(std::fs::read_to_string(base.path().join("CACHEDIR.TAG"))
            .expect("tag")
            .starts_with("Signature: 8a477f597d28d172789f06886806bc55"));
        // Another layout's cache (here: a version from the future) is emptied, not refused.
        cache.conn().execute("INSERT INTO dir_cache VALUES ('w', x'00', 0, x'01')", []).expect("row");
        cache.conn().execute_batch("PRAGMA user_version = 99").expect("version");
        drop(cache);
        let cache = NodeCache::open(&dir).expect("reopened");
        let n: i64 = cache.conn().query_row("SELECT COUNT(*) FROM dir_cache", [], |r| r.get(0)).expect("count");
        assert_eq!(n, 0);
    }
}
