//! The manifest: the repository's SQLite database (packs index, trees, snapshots, directory cache,
//! audit), opened with WAL and foreign keys, its schema applied from `schema.sql`.
//!
//! Versioning: `PRAGMA user_version` holds the schema version. A new repository gets
//! `schema.sql` whole; an older one is migrated step by step (`migration`); a newer one is
//! refused, because an old binary cannot know what the new columns mean.

pub mod audit;
pub mod dir_cache;
pub mod gc;
pub mod grams;
pub mod journal;
pub mod loose;
pub mod objects;
pub mod paths;
pub mod restores;
pub mod sessions;
pub mod snapshots;
pub mod tokens;
pub mod trash;
pub mod trees;
pub mod uploads;
pub mod workspaces;

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::base::error::{Error, ErrorKind, Result};

pub const SCHEMA: &str = include_str!("../../schema.sql");
pub const SCHEMA_VERSION: i64 = 14;

/// The part of `schema.sql` that migrates version `to - 1` to `to`: the text from its
/// `-- schema-version: <to>` line to the next such line. The file stays the single source: a new
/// repository applies it whole, an older one the sections after its version.
fn migration(to: i64) -> Result<&'static str> {
    let marker = format!("-- schema-version: {to}\n");
    let start =
        SCHEMA.find(&marker).ok_or_else(|| Error::internal(format!("schema.sql has no section for version {to}")))?;
    let rest = &SCHEMA[start..];
    let end = rest[marker.len()..].find("-- schema-version: ").map_or(rest.len(), |i| i + marker.len());
    Ok(&rest[..end])
}

pub struct Manifest {
    conn: Connection,
    /// The shared-cache URI of an in-memory manifest, which readers open again.
    memory_uri: Option<String>,
}

fn configure(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 10000;
         PRAGMA cache_size = -8192;
         PRAGMA mmap_size = 268435456;
         PRAGMA wal_autocheckpoint = 10000;",
    )
    .map_err(|e| Error::db("configuring the connection", e))
}

impl Manifest {
    /// Creates the manifest at `path` (which must not exist) with the current schema.
    pub fn create(path: &Path) -> Result<Manifest> {
        let conn = Connection::open(path).map_err(|e| Error::db("creating the manifest", e))?;
        Manifest::install(conn)
    }

    /// An in-memory manifest, for tests and throwaway repositories. `name` must be unique in
    /// the process: it names a shared-cache database so `reader()` sees the same data.
    pub fn create_in_memory(name: &str) -> Result<Manifest> {
        let uri = format!("file:{name}?mode=memory&cache=shared");
        let conn = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| Error::db("creating an in-memory manifest", e))?;
        let mut m = Manifest::install(conn)?;
        m.memory_uri = Some(uri);
        Ok(m)
    }

    fn install(conn: Connection) -> Result<Manifest> {
        // Before any table exists: pages freed by garbage collection can then be given back to
        // the file system a few at a time (`incremental_vacuum`), never by a blocking VACUUM.
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL;")
            .map_err(|e| Error::db("configuring the manifest", e))?;
        configure(&conn)?;
        conn.execute_batch(&format!("BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
            .map_err(|e| Error::db("applying schema.sql", e))?;
        Ok(Manifest { conn, memory_uri: None })
    }

    /// Opens an existing manifest, migrating an older schema and refusing a newer one.
    pub fn open(path: &Path) -> Result<Manifest> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| Error::db(&format!("opening {}", path.display()), e))?;
        configure(&conn)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| Error::db("reading the schema version", e))?;
        if version > SCHEMA_VERSION {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "repository manifest {} has schema version {version}, newer than this trove's {SCHEMA_VERSION}: upgrade trove",
                    path.display()
                ),
            ));
        }
        if version < 1 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{} is not a trove manifest (schema version {version})", path.display()),
            ));
        }
        for to in version + 1..=SCHEMA_VERSION {
            let sql = migration(to)?;
            conn.execute_batch(&format!("BEGIN; {sql} PRAGMA user_version = {to}; COMMIT;"))
                .map_err(|e| Error::db(&format!("migrating the manifest to version {to}"), e))?;
        }
        Ok(Manifest { conn, memory_uri: None })
    }

    /// A second connection to the same database, for lookups from worker threads while this
    /// one prepares a write. In WAL mode it sees the last committed state.
    pub fn reader(&self) -> Result<Connection> {
        let path = match (&self.memory_uri, self.conn.path()) {
            (Some(uri), _) => uri.as_str(),
            (None, Some(p)) if !p.is_empty() => p,
            _ => return Err(Error::internal("an unnamed in-memory manifest has no readers")),
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::db("opening a reader", e))?;
        conn.execute_batch("PRAGMA busy_timeout = 10000;").map_err(|e| Error::db("configuring a reader", e))?;
        Ok(conn)
    }

    /// A reader holding one read transaction until dropped: thousands of lookups then share
    /// one lock acquisition and one view of the database instead of taking a lock each.
    pub fn pinned_reader(&self) -> Result<Connection> {
        let conn = self.reader()?;
        // Lookups by key touch few pages; a small cache keeps this connection's memory small.
        conn.execute_batch("PRAGMA cache_size = -2048; BEGIN DEFERRED; SELECT COUNT(*) FROM packs;")
            .map_err(|e| Error::db("starting a read transaction", e))?;
        Ok(conn)
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Runs `f` inside one read transaction: a consistent view of the manifest, and one lock
    /// for its many queries instead of one per query. Inside an open transaction, just runs `f`.
    pub fn read<T, E: From<Error>>(&self, f: impl FnOnce() -> std::result::Result<T, E>) -> std::result::Result<T, E> {
        read_on(&self.conn, f)
    }

    /// Like [`Manifest::write`], but the commit does not wait for an fsync: for records that
    /// can be rebuilt after a power loss (the tool journal's outcome records, whose journal row
    /// stays until this commit is durable). A kill -9 loses nothing either way: the WAL is in
    /// the page cache, and the next fsynced commit makes this one durable too.
    pub fn write_relaxed<T>(&self, f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        let set = |level: &str| {
            self.conn
                .prepare_cached(&format!("PRAGMA synchronous = {level}"))
                .and_then(|mut st| st.raw_execute())
                .map_err(|e| Error::db("setting the sync level", e))
        };
        set("NORMAL")?;
        let out = self.write(f);
        set("FULL")?;
        out
    }

    /// Runs `f` in one transaction: all of its rows land, or none.
    pub fn write<T>(&self, f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        // IMMEDIATE takes the write lock up front, so a concurrent writer makes this wait
        // (busy_timeout) instead of failing when a read transaction tries to upgrade.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| Error::db("starting a transaction", e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| Error::db("committing", e))?;
        Ok(out)
    }
}

/// An optional SHA-256 column.
pub(crate) fn sha(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<crate::object::Sha256>> {
    Ok(r.get::<_, Option<[u8; 32]>>(i)?.map(crate::object::Sha256))
}

/// An optional object id column.
pub(crate) fn object(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<crate::object::ObjectId>> {
    Ok(r.get::<_, Option<[u8; 32]>>(i)?.map(crate::object::ObjectId))
}

/// Maps a rusqlite error from `verb` into ours; shared by the table modules.
pub(crate) fn db(verb: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::db(verb, e)
}

/// Runs `f` inside one read transaction of `conn` (or the one already open): a consistent
/// view, and the database's read lock taken once for its queries instead of once each.
pub fn read_on<T, E: From<Error>>(
    conn: &Connection,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    if !conn.is_autocommit() {
        return f();
    }
    let mut begin = conn.prepare_cached("BEGIN DEFERRED").map_err(|e| Error::db("starting a read", e))?;
    begin.execute([]).map_err(|e| Error::db("starting a read", e))?;
    let out = f();
    // Ending a read transaction cannot lose anything; a failure here is only reported.
    let end =
        conn.prepare_cached("COMMIT").and_then(|mut st| st.execute([])).map_err(|e| Error::db("ending a read", e));
    let out = out?;
    end?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_schema_is_refused_and_garbage_is_not_a_manifest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        drop(Manifest::create(&path).expect("create"));
        Connection::open(&path).expect("open").execute_batch("PRAGMA user_version = 99").expect("bump");
        let err = Manifest::open(&path).err().expect("newer schema must fail");
        assert!(err.message().contains("newer"), "{err}");

        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, b"this is not sqlite at all, just some text padding it out").expect("write");
        assert!(Manifest::open(&junk).is_err());
    }

    #[test]
    fn a_version_1_manifest_is_migrated_to_the_current_schema() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let v1 = &SCHEMA[..SCHEMA.find("-- schema-version: 2").expect("section 2")];
        Connection::open(&path)
            .expect("open")
            .execute_batch(&format!("{v1} PRAGMA user_version = 1;"))
            .expect("a version-1 manifest");
        let m = Manifest::open(&path).expect("migrates");
        let version: i64 = m.conn().query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        let n: i64 = m.conn().query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get(0)).expect("sessions table");
        assert_eq!(n, 0);
        drop(m);
        Manifest::open(&path).expect("opens again without migrating twice");
    }

    #[test]
    fn audit_rows_refuse_update_and_delete() {
        let m = Manifest::create_in_memory("audit_triggers_test").expect("create");
        m.conn()
            .execute(
                "INSERT INTO audit (seq, time_ns, actor, operation, outcome, details, encoded) VALUES (1, 0, 'a', 'x', 'ok', '{}', x'00')",
                [],
            )
            .expect("insert");
        assert!(m.conn().execute("UPDATE audit SET actor = 'b'", []).is_err());
        assert!(m.conn().execute("DELETE FROM audit", []).is_err());
        let replace = "INSERT OR REPLACE INTO audit (seq, time_ns, actor, operation, outcome, details, encoded)
                       VALUES (1, 0, 'forged', 'x', 'ok', '{}', x'00')";
        assert!(m.conn().execute(replace, []).is_err(), "a replace is a rewrite");
        let at = |seq: i64| {
            m.conn().execute(
                "INSERT INTO audit (seq, time_ns, actor, operation, outcome, details, encoded) VALUES (?1, 0, 'a', 'x', 'ok', '{}', x'00')",
                [seq],
            )
        };
        assert!(at(3).is_err(), "a gap in seq is refused");
        assert!(at(1).is_err(), "an old seq is refused");
        at(2).expect("the next seq is accepted");
    }
}
