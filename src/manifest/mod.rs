//! The manifest: the repository's SQLite database (packs index, trees, snapshots, audit), opened
//! with WAL and foreign keys, its schema applied from `schema.sql`; and the node-local cache's
//! database beside it (`node_cache`), which is not the repository's.
//!
//! Versioning: `PRAGMA user_version` holds the schema version. A new repository gets
//! `schema.sql` whole; an older one is migrated step by step (`migration`); a newer one is
//! refused, because an old binary cannot know what the new columns mean.

pub mod audit;
pub mod dir_cache;
pub mod gc;
pub mod grams;
pub mod journal;
pub mod log;
pub mod loose;
pub mod node_cache;
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
pub const SCHEMA_VERSION: i64 = 20;

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

/// How a replica's transactions reach the record log it replicates (`log.rs`, which knows the
/// format; this file only runs the race).
pub trait Replication: Send + Sync {
    /// The store's name (`s3://bucket/prefix`), for messages.
    fn name(&self) -> &str;
    /// Publishes the logged rows `tx` changed as the log's next segment, moving the replica's
    /// position in `tx`. `fence`: the oldest epoch an operation in flight on this handle began
    /// having seen whole; rows are refused (`conflict`) if a collection recorded a sweep past
    /// it (`gc::swept_horizon`), since that sweep may have deleted what the operation relies on.
    fn publish(&self, tx: &Connection, fence: Option<i64>) -> Result<Published>;
    /// Fails (`conflict`) if the state of `conn` holds a sweep past `fence` (see `publish`).
    fn check_fence(&self, conn: &Connection, fence: i64) -> Result<()>;
    /// Applies in `tx` the segments the replica has not seen; how many.
    fn catch_up(&self, tx: &Connection) -> Result<u64>;
    /// Replays the whole log beside the replica on `conn` and compares their rows.
    fn check(&self, conn: &Connection) -> Result<LogCheck>;
    /// Called after a write's transaction committed on `conn`: work that follows a publish
    /// without being part of it (a copy of the replica), whose failure is only logged.
    fn committed(&self, conn: &Connection);
    /// Whether the log holds a segment the replica has not seen, asked outside any transaction
    /// (what it fetched to know is kept for the catch-up that follows).
    fn news(&self, conn: &Connection) -> Result<bool>;
}

/// What replaying a whole log beside a replica found (`trove check`).
#[derive(Debug, Default)]
pub struct LogCheck {
    /// Segments replayed.
    pub segments: u64,
    /// Whether the replayed rows were compared with the replica's (not when the log kept
    /// growing through every try, or a segment was damaged).
    pub compared: bool,
    /// Each way the log and the replica disagree, in words naming the segment or table.
    pub problems: Vec<String>,
}

/// What publishing a transaction's rows came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// It changed no logged row: nothing to publish.
    Nothing,
    /// Its segment is in the store.
    Won,
    /// Another writer created the segment first: the transaction must run again on its state.
    Lost,
}

/// How many times a write is run again after losing the race for its segment.
pub const MAX_RACES: u32 = 64;

pub struct Manifest {
    conn: Connection,
    /// The URI readers open instead of the path: an in-memory manifest's shared-cache name, or
    /// a read-only one's `readonly_shm` form.
    reader_uri: Option<String>,
    /// Why this manifest is open read-only (it could not be opened for writing: a full disk),
    /// or None: it is writable.
    read_only: Option<String>,
    /// The record log this manifest is a replica of (a repository in a bucket), or None: the
    /// manifest is the repository's own.
    log: Option<std::sync::Arc<dyn Replication>>,
    /// When this replica last caught up with its log ([`Manifest::refresh`]).
    caught_up: std::cell::Cell<Option<std::time::Instant>>,
    /// The leases of operations in flight on this handle, by id, with the newest epoch each
    /// saw whole when it began ([`Manifest::fence`]).
    fences: std::cell::RefCell<Vec<(i64, i64)>>,
}

/// Refuses a manifest path that is not a regular file, or an empty one (SQLite would take it for
/// a new database and write one into it), before SQLite opens it. Only `stat`: opening and
/// closing the file here would drop every POSIX lock this process's SQLite connections hold on
/// it (`close` releases all of a process's locks on a file), and another process could then
/// checkpoint and delete the log they are still writing to.
fn check_file(path: &Path) -> Result<()> {
    let restore = "restore manifest.db from a backup of the repository";
    let meta = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(Error::corrupt(format!("{} is not a regular file: {restore}", path.display())));
    }
    if meta.len() == 0 {
        return Err(Error::corrupt(format!("{} is empty (0 bytes), not a trove manifest: {restore}", path.display())));
    }
    Ok(())
}

/// The pages of the database a fresh connection sees, read before anything could write: 0 for a
/// file shorter than a page (which SQLite would take for a new database and write over), an
/// error for one that is not SQLite.
fn page_count(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA page_count", [], |r| r.get(0))
}

/// An open that found no trove manifest at `path`: SQLite's "not a database", or no page.
fn not_a_manifest(path: &Path, source: Option<rusqlite::Error>) -> Error {
    let message = format!(
        "{} is not an SQLite database, so not a trove manifest: restore manifest.db from a backup of the repository",
        path.display()
    );
    match source {
        Some(e) => Error::with_source(ErrorKind::Corrupt, message, e),
        None => Error::corrupt(message),
    }
}

/// Whether opening a manifest for writing failed in a way a read-only open may get past: the
/// disk is full (SQLite cannot size its shared-memory index or grow the log) or another I/O
/// failure of writing.
fn may_open_read_only(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure | rusqlite::ErrorCode::CannotOpen)
    )
}

/// Why the manifest at `path` could not be opened for writing (`failed`), in words: SQLite
/// says "disk I/O error" when it cannot size its `-shm` file, so a full file system is said so.
fn why_unwritable(path: &Path, failed: &Error) -> String {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match rustix::fs::statvfs(dir) {
        Ok(st) if st.f_bavail.saturating_mul(st.f_frsize) < FULL_BELOW => {
            format!("{DISK_FULL}: {} bytes free", st.f_bavail.saturating_mul(st.f_frsize))
        }
        _ => failed.message().to_string(),
    }
}

/// How [`why_unwritable`] begins when the file system is full.
const DISK_FULL: &str = "its disk is full";

/// What to do about a manifest that cannot be written for `reason`.
fn advice(reason: &str) -> &'static str {
    if reason.starts_with(DISK_FULL) {
        "free space on its disk and run again"
    } else {
        "make it writable and run again"
    }
}

/// A file system with less free space than this is called full: SQLite's smallest growth
/// (its shared-memory index) is 32 KiB.
const FULL_BELOW: u64 = 1 << 20;

/// `path` as an SQLite URI (`file:` and the path percent-encoded where URIs need it).
fn file_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

fn configure(conn: &Connection) -> Result<()> {
    configure_raw(conn).map_err(|e| Error::db("configuring the connection", e))
}

/// The memory map of a manifest connection switched off for a while ([`Manifest::unmapped`]).
pub struct Unmapped<'c> {
    conn: &'c Connection,
    mapped: i64,
}

impl Drop for Unmapped<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.conn.execute_batch(&format!("PRAGMA mmap_size = {};", self.mapped)) {
            tracing::warn!(error = %e, "the manifest's memory map was not restored: reads go through SQLite's cache");
        }
    }
}

/// [`configure`], its error as SQLite gave it (so an open can tell a full disk).
fn configure_raw(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 10000;
         PRAGMA cache_size = -8192;
         PRAGMA mmap_size = 268435456;
         PRAGMA wal_autocheckpoint = 10000;",
    )
}

/// The schema version a manifest's connection reads (its first read of the file).
/// Whether a migration section has any SQL besides comments.
fn writes(section: &str) -> bool {
    section.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with("--"))
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Refuses a schema version newer than this build's, or none (0), naming the file at `path`.
fn check_version(version: i64, path: &Path) -> Result<()> {
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
        return Err(Error::corrupt(format!(
            "{} is an SQLite database without a trove schema (version {version}): restore manifest.db from a backup of the repository",
            path.display()
        )));
    }
    Ok(())
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
        m.reader_uri = Some(uri);
        Ok(m)
    }

    /// A manifest over `conn`, with no log and nothing in flight.
    fn over(conn: Connection, reader_uri: Option<String>, read_only: Option<String>) -> Manifest {
        Manifest { conn, reader_uri, read_only, log: None, caught_up: Default::default(), fences: Default::default() }
    }

    fn install(conn: Connection) -> Result<Manifest> {
        // Before any table exists: pages freed by garbage collection can then be given back to
        // the file system a few at a time (`incremental_vacuum`), never by a blocking VACUUM.
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL;")
            .map_err(|e| Error::db("configuring the manifest", e))?;
        configure(&conn)?;
        conn.execute_batch(&format!("BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
            .map_err(|e| Error::db("applying schema.sql", e))?;
        Ok(Manifest::over(conn, None, None))
    }

    /// Opens an existing manifest, migrating an older schema and refusing a newer one.
    ///
    /// When it cannot be opened for writing because its disk is full (SQLite must size its
    /// shared-memory index, `-shm`, before even a read, whenever no other process has the
    /// database open), it is opened read-only instead: what only reads (listings, `check`, a
    /// restore elsewhere) still works, and every write fails, saying why.
    pub fn open(path: &Path) -> Result<Manifest> {
        check_file(path)?;
        // The pages are counted before the connection is configured: switching to WAL writes a
        // database into a file that holds none.
        let opened = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).and_then(|conn| {
            if page_count(&conn)? == 0 {
                return Ok(None);
            }
            configure_raw(&conn)?;
            let version = user_version(&conn)?;
            Ok(Some((conn, version)))
        });
        let (conn, version) = match opened {
            Ok(Some(opened)) => opened,
            Ok(None) => return Err(not_a_manifest(path, None)),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => {
                return Err(not_a_manifest(path, Some(e)))
            }
            Err(e) if may_open_read_only(&e) => return Manifest::open_read_only(path, e),
            Err(e) => return Err(Error::db(&format!("opening {}", path.display()), e)),
        };
        check_version(version, path)?;
        for to in version + 1..=SCHEMA_VERSION {
            let sql = migration(to)?;
            conn.execute_batch(&format!("BEGIN; {sql} PRAGMA user_version = {to}; COMMIT;"))
                .map_err(|e| Error::db(&format!("migrating the manifest to version {to}"), e))?;
        }
        Ok(Manifest::over(conn, None, None))
    }

    /// Opens a throwaway copy of a manifest at `path` (a dry run's): writable, its commits not
    /// synced (a crash loses only the copy).
    pub fn open_copy(path: &Path) -> Result<Manifest> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| Error::db(&format!("opening {}", path.display()), e))?;
        configure(&conn)?;
        conn.execute_batch("PRAGMA synchronous = OFF;").map_err(|e| Error::db("configuring a copy", e))?;
        Ok(Manifest::over(conn, None, None))
    }

    /// Copies this manifest, as one consistent view, into a new file at `path`.
    pub fn copy_to(&self, path: &Path) -> Result<()> {
        let text = path.to_str().ok_or_else(|| {
            Error::invalid_argument(format!("{} is not UTF-8: the manifest cannot be copied there", path.display()))
        })?;
        self.conn.execute("VACUUM INTO ?1", [text]).map_err(|e| Error::db("copying the manifest", e))?;
        Ok(())
    }

    /// Opens the manifest at `path` read-only because opening it for writing failed with
    /// `why`; if that fails too, the error is `why`'s.
    ///
    /// Read-only, with `readonly_shm`, SQLite reads a WAL database whose `-shm` file it cannot
    /// size: it then builds the index of the log in its own memory (safe beside a writer in
    /// another process, which it detects). The `-shm` file must exist, even empty; creating an
    /// empty file needs no free blocks.
    fn open_read_only(path: &Path, why: rusqlite::Error) -> Result<Manifest> {
        let failed = Error::db(&format!("opening {} for writing", path.display()), why);
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        // Created only where missing (`O_EXCL`): an existing one is never opened and closed
        // here, which would drop the locks this process's connections hold on it.
        let made = {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0o644);
            std::fs::File::options().write(true).create_new(true).mode(mode).open(&shm)
        };
        match made {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "no -shm file for a read-only open");
                return Err(failed);
            }
        }
        let uri = file_uri(path, "readonly_shm=1");
        let opened = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|conn| {
            conn.execute_batch(
                "PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000; PRAGMA cache_size = -8192; PRAGMA mmap_size = 268435456;",
            )?;
            if page_count(&conn)? == 0 {
                return Ok(None);
            }
            let version = user_version(&conn)?;
            Ok(Some((conn, version)))
        });
        let (conn, version) = match opened {
            Ok(Some(opened)) => opened,
            Ok(None) => return Err(not_a_manifest(path, None)),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "a read-only open failed too");
                return Err(failed);
            }
        };
        check_version(version, path)?;
        let reason = why_unwritable(path, &failed);
        // A pending migration that only documents (section 17 changes no table) leaves nothing
        // a read needs undone: such a manifest still opens to read.
        let pending_writes = (version + 1..=SCHEMA_VERSION).any(|to| !matches!(migration(to), Ok(sql) if !writes(sql)));
        if pending_writes {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{} must be migrated from schema version {version}, which writes, and it cannot be opened for writing ({reason}): {}",
                    path.display(),
                    advice(&reason)
                ),
            ));
        }
        tracing::warn!(path = %path.display(), why = %reason, "the manifest is open read-only: commands that only read work, and writes fail");
        Ok(Manifest::over(conn, Some(uri), Some(reason)))
    }

    /// Why this manifest is open read-only, or None: it is writable.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// The refusal of a write to a read-only manifest.
    fn refuse_write(&self, reason: &str) -> Error {
        let path = self.conn.path().unwrap_or("the manifest").to_string();
        Error::new(
            ErrorKind::Io,
            format!("{path} is open read-only, as opening it for writing failed ({reason}): {}", advice(reason)),
        )
    }

    /// Identifies the database among those this process opens (its absolute path, or an
    /// in-memory one's name): the key of its leases waiting to be withdrawn.
    pub fn key(&self) -> String {
        match (&self.reader_uri, self.conn.path()) {
            (_, Some(p)) if !p.is_empty() => p.to_string(),
            (Some(uri), _) => uri.clone(),
            _ => String::new(),
        }
    }

    /// A second connection to the same database, for lookups from worker threads while this
    /// one prepares a write. In WAL mode it sees the last committed state.
    pub fn reader(&self) -> Result<Connection> {
        let path = match (&self.reader_uri, self.conn.path()) {
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

    /// Reads and writes this connection through SQLite's page cache, not its memory map, until
    /// the guard is dropped: a snapshot in batches touches index pages all over a manifest of
    /// hundreds of megabytes, and every page a map touched stays in the process's resident
    /// memory. The map comes back afterwards (a failure to restore it is logged: it only costs
    /// speed).
    pub fn unmapped(&self) -> Result<Unmapped<'_>> {
        let mapped: i64 = self
            .conn
            .query_row("PRAGMA mmap_size", [], |r| r.get(0))
            .map_err(|e| Error::db("reading the manifest's memory map size", e))?;
        self.conn.execute_batch("PRAGMA mmap_size = 0;").map_err(|e| Error::db("unmapping the manifest", e))?;
        Ok(Unmapped { conn: &self.conn, mapped })
    }

    /// Makes this connection one of many held by a long-running process (the server's pool):
    /// no memory map of the file, whose touched pages every connection's map would count again
    /// in the process's resident memory (up to `mmap_size` each), and a page cache of
    /// `cache_kib`. Hot pages stay once in the kernel's page cache, which no process owns.
    pub fn one_of_many(&self, cache_kib: u32) -> Result<()> {
        self.conn
            .execute_batch(&format!("PRAGMA mmap_size = 0; PRAGMA cache_size = -{cache_kib};"))
            .map_err(|e| Error::db("configuring a pooled connection", e))
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
    pub fn write_relaxed<T>(&self, f: impl FnMut(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        if let Some(reason) = &self.read_only {
            return Err(self.refuse_write(reason));
        }
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
    ///
    /// On a manifest with a record log, the rows `f` changed in logged tables are written as the
    /// log's next segment before the commit, and the write is acknowledged only once that
    /// segment is in the store. A segment another writer created first means `f` ran on a
    /// state that is not the newest: the transaction is rolled back, the segments it missed
    /// are applied, and `f` runs again (so `f` must do nothing but its rows), up to
    /// [`MAX_RACES`] times.
    pub fn write<T>(&self, mut f: impl FnMut(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        if let Some(reason) = &self.read_only {
            return Err(self.refuse_write(reason));
        }
        let Some(log) = &self.log else {
            // IMMEDIATE takes the write lock up front, so a concurrent writer makes this wait
            // (busy_timeout) instead of failing when a read transaction tries to upgrade.
            let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| Error::db("starting a transaction", e))?;
            let out = f(&tx)?;
            tx.commit().map_err(|e| Error::db("committing", e))?;
            return Ok(out);
        };
        for race in 0..=MAX_RACES {
            let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| Error::db("starting a transaction", e))?;
            if race > 0 {
                log.catch_up(&tx)?;
            }
            // An error rolls the transaction back, the changes it recorded with it.
            let out = f(&tx)?;
            let published = match log.publish(&tx, self.fence_epoch()) {
                Ok(p) => p,
                Err(e) if e.kind() == ErrorKind::Conflict => {
                    // Refused by a fence (or the store): the operation runs again from its
                    // start, which should find this replica as new as the log, not as it was
                    // before this transaction's catch-up, rolled back with it.
                    drop(tx);
                    if let Err(c) = self.catch_up() {
                        tracing::warn!(error = %c, "could not catch up with the record log after a refused write");
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            match published {
                Published::Nothing | Published::Won => {
                    tx.commit().map_err(|e| Error::db("committing", e))?;
                    log.committed(&self.conn);
                    return Ok(out);
                }
                Published::Lost => {
                    tracing::debug!(
                        race,
                        "another writer took the log's next segment: the write runs again on its state"
                    )
                }
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!("other writers took the record log's next segment {} times in a row: try again", MAX_RACES + 1),
        ))
    }

    /// Makes this manifest a replica: its writes go through `log`, which is caught up with now.
    ///
    /// A manifest open read-only (its disk is full) cannot apply segments: it reads as of its
    /// last catch-up, said in the log, and refuses writes as any read-only manifest does.
    pub fn replicate(&mut self, log: std::sync::Arc<dyn Replication>) -> Result<()> {
        if let Some(reason) = &self.read_only {
            tracing::warn!(store = %log.name(), why = %reason, "this host's replica is open read-only: it reads as of its last catch-up with the log");
            self.log = Some(log);
            return Ok(());
        }
        self.log = Some(log);
        self.catch_up()?;
        Ok(())
    }

    /// Applies the segments of the record log this replica has not seen; how many. Nothing
    /// on a manifest without a log.
    pub fn catch_up(&self) -> Result<u64> {
        let Some(log) = &self.log else { return Ok(0) };
        if self.read_only.is_some() {
            return Ok(0);
        }
        // Most catch-ups (a server's, before its requests) find nothing new: asked first,
        // outside a transaction, so that no writer of this replica waits on the store's answer.
        if !log.news(&self.conn)? {
            self.caught_up.set(Some(std::time::Instant::now()));
            return Ok(0);
        }
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| Error::db("starting a transaction", e))?;
        let applied = log.catch_up(&tx)?;
        tx.commit().map_err(|e| Error::db("committing", e))?;
        self.caught_up.set(Some(std::time::Instant::now()));
        Ok(applied)
    }

    /// Catches up with the log unless this replica did within `max_age`: what a long-lived
    /// handle (a server's) does before each request, so other hosts' writes show within that
    /// time at the cost of at most one request per `max_age`.
    pub fn refresh(&self, max_age: std::time::Duration) -> Result<u64> {
        match self.caught_up.get() {
            Some(t) if t.elapsed() < max_age => Ok(0),
            _ => self.catch_up(),
        }
    }

    /// How the store of this replica's log names itself, or None: no log.
    pub fn log_name(&self) -> Option<&str> {
        self.log.as_deref().map(Replication::name)
    }

    /// For a replica, what replaying its whole log beside it found (`trove check`); None for a
    /// manifest that is its repository's own.
    pub fn check_log(&self) -> Result<Option<LogCheck>> {
        match &self.log {
            Some(l) => l.check(&self.conn).map(Some),
            None => Ok(None),
        }
    }

    /// Whether this manifest is a replica of a record log.
    pub fn is_replica(&self) -> bool {
        self.log.is_some()
    }

    /// Fences this handle's writes with lease `id`, taken having seen every condemnation up to
    /// epoch `epoch` (`gc::seen_epoch`): until [`Manifest::unfence`], a write that would
    /// publish rows fails if a collection on any host recorded a sweep of a later epoch.
    /// Another host's collection cannot see this host's leases, so where it could not wait for
    /// one, the operation is stopped instead of committing a reference to something deleted.
    /// Only a replica's writes are fenced: in a directory every lease holds collections back.
    pub fn fence(&self, id: i64, epoch: i64) {
        if self.log.is_some() {
            self.fences.borrow_mut().push((id, epoch));
        }
    }

    /// This handle's fences, (lease id, epoch) each: to put back with [`Manifest::set_fences`]
    /// after [`Manifest::renew_fences`].
    pub fn fences(&self) -> Vec<(i64, i64)> {
        self.fences.borrow().clone()
    }

    /// Puts back fences [`Manifest::fences`] returned, of the leases still held (a lease
    /// withdrawn meanwhile stays lifted).
    pub fn set_fences(&self, saved: Vec<(i64, i64)>) {
        let mut fences = self.fences.borrow_mut();
        let held: Vec<i64> = fences.iter().map(|(id, _)| *id).collect();
        *fences = saved.into_iter().filter(|(id, _)| held.contains(id)).collect();
    }

    /// Moves every fence of this handle up to epoch `seen` (`gc::seen_epoch` of its state now):
    /// what an operation refused by its fence may do only once it has made everything it
    /// relies on live in that state again (a tool's change applied to the tree, securing the
    /// contents its record names).
    pub fn renew_fences(&self, seen: i64) {
        for (_, epoch) in self.fences.borrow_mut().iter_mut() {
            *epoch = (*epoch).max(seen);
        }
    }

    /// [`Manifest::write`] with this handle's fences lifted for its length: for a write that
    /// only lets go of rows (a plan closed unapplied, and its roots), which no sweep can make
    /// unsafe, and which a fence must not leave undone.
    pub fn write_unfenced<T>(&self, f: impl FnMut(&rusqlite::Transaction<'_>) -> Result<T>) -> Result<T> {
        let saved = std::mem::take(&mut *self.fences.borrow_mut());
        let out = self.write(f);
        self.fences.borrow_mut().extend(saved);
        out
    }

    /// Lifts the fence of lease `id` (its operation ended).
    pub fn unfence(&self, id: i64) {
        self.fences.borrow_mut().retain(|(i, _)| *i != id);
    }

    /// Fails as a fenced write would now (see [`Manifest::fence`]), with the replica caught up
    /// unless it did within the last second: what an operation asks before a step it cannot
    /// take back (a tool's change applied to the tree), so that a sweep recorded while it ran
    /// stops it before that step rather than at its record.
    pub fn check_fence(&self) -> Result<()> {
        let (Some(log), Some(fence)) = (&self.log, self.fence_epoch()) else { return Ok(()) };
        self.refresh(std::time::Duration::from_secs(1))?;
        log.check_fence(&self.conn, fence)
    }

    /// The oldest epoch a fence of this handle began at.
    fn fence_epoch(&self) -> Option<i64> {
        self.fences.borrow().iter().map(|(_, e)| *e).min()
    }
}

/// The refusal of a fenced write: a sweep past `fence` was recorded in the log of `store`.
pub(crate) fn fenced(store: &str, swept: i64, fence: i64) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "a garbage collection of {store} recorded a sweep of what was condemned up to epoch {swept} while this operation ran, having seen only epoch {fence} whole (it ran longer than that collection's grace period): this write was refused and nothing of it recorded; run the operation again"
        ),
    )
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
    fn a_connection_one_of_many_reads_the_file_without_mapping_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let made = Manifest::create(&path).expect("create");
        made.conn()
            .execute_batch(
                "CREATE TABLE filler(x BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 512)
                 INSERT INTO filler SELECT randomblob(4096) FROM n;
                 PRAGMA wal_checkpoint(TRUNCATE);",
            )
            .expect("fill");
        drop(made);
        let shown = path.to_str().expect("utf-8 path").to_string();
        // The file itself, not its `-shm` (WAL's shared memory, always mapped).
        let mapped = || std::fs::read_to_string("/proc/self/maps").expect("maps").lines().any(|l| l.ends_with(&shown));
        let read_all = |m: &Manifest| {
            let n: i64 = m.conn().query_row("SELECT SUM(LENGTH(hex(x))) FROM filler", [], |r| r.get(0)).expect("read");
            assert_eq!(n, 512 * 8192);
        };
        assert!(!mapped(), "closed connections leave no map");

        let plain = Manifest::open(&path).expect("open");
        read_all(&plain);
        assert!(mapped(), "a plain connection maps the manifest (what one_of_many turns off)");
        drop(plain);

        let pooled = Manifest::open(&path).expect("open");
        pooled.one_of_many(2048).expect("configure");
        read_all(&pooled);
        assert!(!mapped(), "a pooled connection reads the manifest without mapping it");
        let (mmap, cache): (i64, i64) = (
            pooled.conn().query_row("PRAGMA mmap_size", [], |r| r.get(0)).expect("mmap_size"),
            pooled.conn().query_row("PRAGMA cache_size", [], |r| r.get(0)).expect("cache_size"),
        );
        assert_eq!((mmap, cache), (0, -2048));
    }

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
    fn a_section_of_comments_only_is_no_write_and_keeps_read_only_opens() {
        assert!(!writes(migration(17).expect("section 17")));
        assert!(writes(migration(16).expect("section 16")));
        assert!(!writes("-- a comment\n\n   -- another\n"));
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
