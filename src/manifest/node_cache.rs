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
CREATE TABLE generation (value INTEGER NOT NULL);  -- the manifest's `cache_generation` it was built against
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
    /// file that is not a database (or a damaged one) is replaced: it is a cache. Any other
    /// failure (a full disk, too many open files, a lock held too long) is returned as it is,
    /// the file left for the processes that may have it open.
    pub fn open(dir: &Path) -> Result<NodeCache> {
        make_dir(dir)?;
        // In the repository's own directory, which trove made: a base a user named may hold
        // their own files, which a backup tool honouring the tag would then skip.
        tag(dir);
        let path = dir.join(CACHE_FILE);
        let what = format!("opening the node-local cache {}", path.display());
        match NodeCache::open_file(&path) {
            Ok(cache) => Ok(cache),
            Err(e) if is_damage(&e) => {
                tracing::warn!(path = %path.display(), error = %e, "the node-local cache is damaged: it is made anew");
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    match std::fs::remove_file(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io("remove the damaged cache", Path::new(&p), e)),
                    }
                }
                NodeCache::open_file(&path).map_err(|e| Error::db(&what, e))
            }
            Err(e) => Err(Error::db(&what, e)),
        }
    }

    fn open_file(path: &Path) -> rusqlite::Result<NodeCache> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // Durability is not needed (a lost write costs a re-read), so commits are not synced;
        // WAL lets a server's handles and a command read while one writes.
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        NodeCache::lay_out(conn)
    }

    /// A cache in memory, for a repository in memory: `name` is shared by its handles.
    pub fn in_memory(name: &str) -> Result<NodeCache> {
        let uri = format!("file:{name}-node-cache?mode=memory&cache=shared");
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
        Connection::open_with_flags(&uri, flags)
            .and_then(NodeCache::lay_out)
            .map_err(|e| Error::db(&format!("opening the in-memory cache {name}"), e))
    }

    /// Gives `conn` this build's layout, emptying a cache of another. The version is read again
    /// inside the write transaction, so two first opens do not lay it out twice.
    fn lay_out(conn: Connection) -> rusqlite::Result<NodeCache> {
        let version = |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
        if version(&conn)? != CACHE_VERSION {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let laid_out = version(&conn).and_then(|v| {
                if v == CACHE_VERSION {
                    return Ok(());
                }
                conn.execute_batch(&format!(
                    "DROP TABLE IF EXISTS dir_cache; DROP TABLE IF EXISTS generation; {CACHE_SCHEMA} PRAGMA user_version = {CACHE_VERSION};"
                ))
            });
            match laid_out.and_then(|()| conn.execute_batch("COMMIT")) {
                Ok(()) => {}
                Err(e) => {
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    return Err(e);
                }
            }
        }
        Ok(NodeCache { conn })
    }

    /// The connection, for reads.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Runs `f` in one write transaction; whatever fails (`f`, or the commit: SQLite keeps a
    /// transaction open when its commit is busy), it is rolled back, so the handle never keeps
    /// the write lock.
    pub fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let what = "writing the node-local cache";
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| Error::db(what, e))?;
        let done =
            f(&self.conn).and_then(|v| self.conn.execute_batch("COMMIT").map(|()| v).map_err(|e| Error::db(what, e)));
        if done.is_err() && !self.conn.is_autocommit() {
            if let Err(r) = self.conn.execute_batch("ROLLBACK") {
                tracing::warn!(error = %r, "rolling back a write of the node-local cache failed");
            }
        }
        done
    }

    /// Empties the cache and marks it built against the manifest's cache generation
    /// `generation` (`dir_cache::generation`).
    pub fn reset(&self, generation: i64) -> Result<()> {
        self.write(|c| {
            c.execute_batch("DELETE FROM dir_cache; DELETE FROM generation;")
                .and_then(|()| c.execute("INSERT INTO generation (value) VALUES (?1)", [generation]))
                .map(drop)
                .map_err(|e| Error::db("emptying the node-local cache", e))
        })
    }

    /// The manifest's cache generation this cache was built against; None for a new one.
    pub fn generation(&self) -> Result<Option<i64>> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row("SELECT value FROM generation", [], |r| r.get(0))
            .optional()
            .map_err(|e| Error::db("reading the node-local cache's generation", e))
    }
}

/// Whether `e` says the file is not a database, or a damaged one: a cache to make anew.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt))
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

/// Writes the cache directory tag in `dir` unless one is there; a failure only costs a backup
/// tool's skipping the directory, so it is logged, not returned.
fn tag(dir: &Path) {
    let path = dir.join("CACHEDIR.TAG");
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
    fn a_damaged_or_foreign_cache_is_made_anew_and_its_directory_is_tagged() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("0123");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(CACHE_FILE), b"not a database, but long enough to look like one's header")
            .expect("junk");
        let cache = NodeCache::open(&dir).expect("made anew");
        let n: i64 = cache.conn().query_row("SELECT COUNT(*) FROM dir_cache", [], |r| r.get(0)).expect("count");
        assert_eq!(n, 0);
        assert!(!base.path().join("CACHEDIR.TAG").exists(), "the base is the user's");
        assert!(std::fs::read_to_string(dir.join("CACHEDIR.TAG"))
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
