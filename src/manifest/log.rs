//! The record log: the manifest's durable rows as numbered, append-only segments in a store
//! (a bucket), each created once; every node's SQLite manifest is then a cache replayed from it.
//!
//! A connection that logs gets temporary triggers on the [`DURABLE`] tables, which copy every
//! row inserted, updated or deleted into a temporary table, in order. `Manifest::write` takes
//! those rows at the end of its transaction and, before committing, creates the next segment
//! (`log/<seq>`) with them; a create that finds the key taken lost the race to another writer:
//! the transaction is rolled back, the segments it missed applied, and the write run again. So
//! the log is one total order of transactions, each computed on the state of all before it, and
//! a replica that applies them in order has exactly the writer's rows. The create is the fence:
//! a store that refuses a second create of a key (S3's `If-None-Match: *`) is required.
//!
//! Node-local tables (the tool journal, restores and uploads in progress, leases, tokens of this
//! server) and derived ones (the audit log's tree, the path and search indexes) are not logged;
//! the audit tree is grown again after a replay.
//!
//! Every so many segments the writing host also leaves a copy of its replica's logged tables
//! (`replica/<position>`), so that a new host starts from it instead of from segment 1.

use std::io::Read;

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::varint;
use crate::object::Backend;

use super::{db, LogCheck, Manifest, Published, Replication, SCHEMA_VERSION};

/// The logged tables, each with the columns that identify a row (its key): what every node's
/// manifest holds alike. Order matters nowhere; a table's number in a connection's triggers is
/// its index here, and segments name tables by name.
pub const DURABLE: &[(&str, &[&str])] = &[
    ("packs", &["id"]),
    ("objects", &["id"]),
    ("chunk_lists", &["content", "seq"]),
    ("trees", &["id"]),
    ("workspaces", &["id"]),
    ("snapshots", &["id"]),
    ("audit", &["seq"]),
    ("audit_checkpoints", &["size"]),
    ("sessions", &["id"]),
    ("loose_objects", &["id"]),
    ("object_bases", &["id"]),
    ("trash", &["id"]),
    ("trash_entries", &["trash_id", "rel"]),
    ("pins", &["snapshot"]),
    ("gc_epochs", &["epoch"]),
    ("bundle_dead", &["pack", "offset"]),
    ("gc_sweeps", &["id"]),
    ("gc_runs", &["id"]),
    ("cache_generation", &["id"]),
    ("audit_keys", &["verifier"]),
    ("plan_roots", &["plan", "object"]),
];

/// For a logged table, the statement clearing what this node derived from one of its rows (by
/// the row's key, bound as ?1), run before a replayed delete of that row: derived rows are not
/// logged, so the writer's host cleared its own before its delete, and a replica whose derived
/// rows still name the row would refuse the delete (their foreign key).
const DERIVED: &[(&str, &str)] = &[("snapshots", "DELETE FROM main.search_snapshots WHERE snapshot = ?1")];

/// The most columns a logged table has (the temporary table has this many value columns).
const MAX_COLUMNS: usize = 24;
// A change's mask of columns is a u32.
const _: () = assert!(MAX_COLUMNS < 32);
/// The most segments a catch-up asks for at once (see `Log::catch_up_to`).
const CATCH_UP_WINDOW: usize = 8;
/// The most bytes of a segment read ahead in a window (the first of a window may have up to
/// `MAX_SEGMENT`): a window holds at most one big segment (a big snapshot's).
const CATCH_UP_WINDOW_BYTES: usize = 4 << 20;

/// A segment's stored bytes, None when absent, or why it was not read.
type SegmentRead = Result<Option<Vec<u8>>>;

/// How a window of segments read at once ended.
enum WindowEnd {
    /// Every segment asked for was there.
    Whole,
    /// At the log's end: a segment was absent.
    Absent,
    /// A segment read ahead was too big or not read: it is read again by itself.
    Cut,
}
/// The most bytes a segment may hold, sealed or not, and the most its rows may decode to. A
/// transaction whose rows would pass it is refused before anything is published (every reader
/// would refuse the segment, and no host could catch up past it): a snapshot's commit indexes
/// every object it stored, some 120 bytes a file, so about eight million files in one snapshot.
pub const MAX_SEGMENT: u64 = 1 << 30;
/// A segment's first bytes but the last, which is its format version.
const MAGIC: &[u8; 7] = b"trvLOG\0";
/// The format segments are written in: 2, the body compressed with a dictionary. (Version 1,
/// read still, had no dictionary.)
const VERSION: u8 = 2;
/// The format of a node's own log's segments ([`Owner::Node`]): 2 with the writer's id after
/// the header, so a create refused because the key is taken tells this writer's own earlier
/// segment (a commit that failed after it) from another process writing as the same node.
const VERSION_WRITER: u8 = 3;
/// The format of a collector's segments in another node's log ([`Owner::Collector`]): 3, the
/// id being the collecting process's. The node's writers catch up with it and write on, as
/// after a segment of their own: a collector changes only what collection changes.
const VERSION_COLLECTOR: u8 = 4;
/// Magic and version, sequence number (u64 LE), schema version (u32 LE), dictionary (u32 LE).
const HEADER: usize = 24;
/// The writer's id in a segment of format 3, after the header.
const WRITER_LEN: usize = 16;
/// Dictionary 1, which segments are compressed with (a raw zstd content dictionary): the JSON
/// that recurs in audit details and session options, then a body's entry for every logged
/// table with all its columns as of manifest schema 18 (as [`take_changes`] writes one, so a
/// segment's entries cost a few bytes each), then the entries of a session's activity and of a
/// tool's change (a loose object, its base and the audit record, in the order that change's
/// segment names them), nearest the end where matches are cheapest. A segment of a few hundred
/// bytes would otherwise spell all of it out. Fixed forever once written: a better one would be
/// dictionary 2, with its number in the header.
fn dictionary_1() -> &'static [u8] {
    const TEXT: &str = "{\"clockStepBackNs\":0,\"file_access\":{\"read\":[\"\"],\"write\":[\"\"]},\"persistent\":true,\"ttl\":86400}\
{\"added\":0,\"bytes\":0,\"changed\":0,\"files\":0,\"loose\":0,\"packs\":0,\"reason\":\"manual\",\"removed\":0,\"snapshot\":\"\",\"warnings\":0}\
snapshot session_start session_end session_create manual ready ended idle cli:uid0 \
write_file delete_file move_file create_directory restore_file apply_patch \
{\"change\":\"delete\",\"trash\":\"\"}{\"change\":\"create\",\"plan\":\"op_\",\"step\":0}";
    const TABLES: &[(&str, &[&str])] = &[
        ("packs", &["id", "name", "size", "objects", "created_ns", "retired", "level"]),
        ("objects", &["id", "pack", "offset", "stored_len", "raw_len", "inner_offset", "condemned"]),
        ("chunk_lists", &["content", "seq", "chunk", "offset", "condemned"]),
        (
            "workspaces",
            &[
                "id",
                "name",
                "root",
                "excludes",
                "extra_excludes",
                "created_ns",
                "trash_age_s",
                "trash_quota",
                "snapshot_retention",
            ],
        ),
        (
            "trash",
            &[
                "id",
                "workspace",
                "session",
                "path",
                "kind",
                "size",
                "sha256",
                "mode",
                "object",
                "deleted_by",
                "deleted_ns",
                "reason",
                "audit_seq",
                "restored_ns",
                "mtime_ns",
                "files",
            ],
        ),
        ("trash_entries", &["trash_id", "rel", "kind", "size", "sha256", "mode", "object", "target", "mtime_ns"]),
        ("pins", &["snapshot", "pinned_ns", "pinned_by"]),
        ("gc_epochs", &["epoch", "time_ns"]),
        ("bundle_dead", &["pack", "offset", "dead_raw"]),
        ("audit_checkpoints", &["size", "time_ns", "root", "note"]),
        (
            "sessions",
            &[
                "id",
                "workspace",
                "live_dir",
                "persistent",
                "ttl",
                "metadata",
                "file_access",
                "status",
                "created_ns",
                "last_activity_ns",
                "ended_ns",
                "end_reason",
                "final_snapshot",
                "options",
            ],
        ),
        ("trees", &["id", "entries", "data", "condemned"]),
        (
            "snapshots",
            &[
                "id",
                "workspace",
                "session",
                "parent",
                "created_ns",
                "reason",
                "root",
                "source_dir",
                "files",
                "dirs",
                "symlinks",
                "bytes",
                "added",
                "changed",
                "removed",
                "skipped",
                "warnings",
            ],
        ),
        ("sessions", &["id", "last_activity_ns"]),
        ("loose_objects", &["id", "raw_len", "encoded", "condemned"]),
        ("object_bases", &["id", "base"]),
        (
            "audit",
            &[
                "seq",
                "time_ns",
                "actor",
                "operation",
                "workspace",
                "session",
                "path",
                "dest_path",
                "before_sha256",
                "after_sha256",
                "before_object",
                "after_object",
                "outcome",
                "details",
                "encoded",
            ],
        ),
    ];
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let mut out = TEXT.as_bytes().to_vec();
        for (table, columns) in TABLES {
            put_entry(&mut out, table, columns.len(), columns.iter().copied());
        }
        out.extend_from_slice(b"\x03\x09edit_file\x03\x04hist\x03\x08cli:uid0\x03\x02ok");
        out
    })
}

/// A body's dictionary entry: a table's name and the columns its changes give.
fn put_entry<'a>(out: &mut Vec<u8>, table: &str, count: usize, columns: impl Iterator<Item = &'a str>) {
    varint::put(out, table.len() as u64);
    out.extend_from_slice(table.as_bytes());
    varint::put(out, count as u64);
    for c in columns {
        varint::put(out, c.len() as u64);
        out.extend_from_slice(c.as_bytes());
    }
}

/// The key of segment `seq` of the repository's shared log: zero-padded, so keys sort in log
/// order.
pub fn key(seq: u64) -> String {
    format!("log/{seq:020}")
}

/// Who writes a log, and so what a create refused because its key is taken means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Every host: the repository's one log (a bucket's or a directory's). Another writer took
    /// the segment; this write runs again on its state.
    Shared,
    /// One node, whose processes sharing one cache directory write under `writer` (their id,
    /// kept there): a segment of another writer is another process writing as this node, and
    /// this one's writes are refused from then on.
    Node { node: String, writer: [u8; WRITER_LEN] },
    /// Another node: its log is read, never written here.
    Foreign { node: String },
    /// Another node's log, written here by a collection of the whole fleet (`ops/gc/fleet.rs`),
    /// or by another node's purge or restore of its trash items (`ops/trash/elsewhere.rs`), under
    /// `writer` (the acting process's node's id): its segments (format 4) change only
    /// collection's rows and delete trash items (see [`NOT_COLLECTED`]), so the node's writers
    /// take them for no rival.
    /// `purges`: this handle may also delete trash items and mark them restored (another
    /// node's purge or restore of them; a collection's may not).
    Collector { node: String, writer: [u8; WRITER_LEN], purges: bool },
}

/// The logged tables a collector never changes: a node's records, which only it writes (but
/// for the deletion of a trash item another node purged, [`PURGED`]). A collector's write that
/// would change one is refused before anything is published.
const NOT_COLLECTED: &[&str] = &[
    "workspaces",
    "snapshots",
    "audit",
    "audit_checkpoints",
    "sessions",
    "trash",
    "trash_entries",
    "pins",
    "audit_keys",
];
/// Of [`NOT_COLLECTED`], the tables whose rows a purging handle may delete: a purged trash
/// item's.
const PURGED: &[&str] = &["trash", "trash_entries"];
/// Of [`NOT_COLLECTED`], the table whose rows a purging handle may update: a trash item marked
/// restored by the node that restored it.
const RESTORED: &str = "trash";

/// One change: a row of a logged table as inserted or updated (its new values) or deleted (its
/// old ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Insert = 0,
    Update = 1,
    Delete = 2,
}

impl Op {
    fn from_byte(b: u8) -> Option<Op> {
        match b {
            0 => Some(Op::Insert),
            1 => Some(Op::Update),
            2 => Some(Op::Delete),
            _ => None,
        }
    }
}

/// The columns of `table` in this database, in order.
fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare(&format!("PRAGMA main.table_info({table})")).map_err(db("reading the schema"))?;
    let names = st.query_map([], |r| r.get::<_, String>(1)).map_err(db("reading the schema"))?;
    names.collect::<rusqlite::Result<Vec<_>>>().map_err(db("reading the schema"))
}

/// A logged table as this database has it: its columns in order, and which of them are its key
/// (bit `i` for column `i`). Read once when a connection is attached, not per write.
#[derive(Debug, Clone)]
pub struct Logged {
    columns: Vec<String>,
    key_bits: u32,
}

/// Makes `conn` log: the temporary table of changes and a trigger per logged table and
/// operation. Temporary objects belong to this connection alone, so only a manifest opened
/// with a log records, and no file holds them. Returns the logged tables' columns, in
/// [`DURABLE`]'s order, for the log to encode and replay with.
///
/// Each change carries a mask of the columns it gives: every column for an insert, the key
/// for a delete, the key and the columns whose value changed for an update (so a session's
/// activity logs two values, not its whole row).
pub fn attach(conn: &Connection) -> Result<Vec<Logged>> {
    let values: Vec<String> = (0..MAX_COLUMNS).map(|i| format!("v{i}")).collect();
    let mut sql = format!(
        "CREATE TEMP TABLE IF NOT EXISTS log_changes (n INTEGER PRIMARY KEY, tbl INTEGER NOT NULL, op INTEGER NOT NULL, mask INTEGER NOT NULL, {});",
        values.join(", ")
    );
    let mut logged = Vec::with_capacity(DURABLE.len());
    for (i, (table, key)) in DURABLE.iter().enumerate() {
        let cols = columns(conn, table)?;
        if cols.len() > MAX_COLUMNS {
            return Err(Error::internal(format!("table {table} has more than {MAX_COLUMNS} columns to log")));
        }
        let mut key_bits = 0u32;
        for k in *key {
            let at = cols
                .iter()
                .position(|c| c == k)
                .ok_or_else(|| Error::internal(format!("table {table} has no key column {k}")))?;
            key_bits |= 1 << at;
        }
        let all = (1u32 << cols.len()) - 1;
        let targets = values[..cols.len()].join(", ");
        let row = |of: &str| cols.iter().map(|c| format!("{of}.\"{c}\"")).collect::<Vec<_>>().join(", ");
        let changed = key.iter().map(|k| format!("OLD.\"{k}\" IS NOT NEW.\"{k}\"")).collect::<Vec<_>>().join(" OR ");
        let differ = cols
            .iter()
            .enumerate()
            .map(|(b, c)| format!("((OLD.\"{c}\" IS NOT NEW.\"{c}\") << {b})"))
            .collect::<Vec<_>>()
            .join(" | ");
        sql.push_str(&format!(
            "CREATE TEMP TRIGGER IF NOT EXISTS log_insert_{table} AFTER INSERT ON main.{table} BEGIN \
               INSERT INTO log_changes (tbl, op, mask, {targets}) VALUES ({i}, 0, {all}, {new}); END;
             CREATE TEMP TRIGGER IF NOT EXISTS log_update_{table} AFTER UPDATE ON main.{table} BEGIN \
               INSERT INTO log_changes (tbl, op, mask, {targets}) VALUES ({i}, 1, {key_bits} | {differ}, {new}); END;
             CREATE TEMP TRIGGER IF NOT EXISTS log_delete_{table} AFTER DELETE ON main.{table} BEGIN \
               INSERT INTO log_changes (tbl, op, mask, {targets}) VALUES ({i}, 2, {key_bits}, {old}); END;
             CREATE TEMP TRIGGER IF NOT EXISTS log_rekey_{table} BEFORE UPDATE ON main.{table} WHEN {changed} BEGIN \
               SELECT RAISE(ABORT, 'the key of a logged row never changes'); END;",
            new = row("NEW"),
            old = row("OLD"),
        ));
        logged.push(Logged { columns: cols, key_bits });
    }
    conn.execute_batch(&sql).map_err(db("setting up the record log"))?;
    Ok(logged)
}

/// The position of this manifest in the log: the last segment applied or written (0: none).
pub fn position(conn: &Connection) -> Result<u64> {
    let seq: i64 =
        conn.query_row("SELECT seq FROM log_position", [], |r| r.get(0)).map_err(db("reading the log position"))?;
    Ok(seq as u64)
}

pub fn set_position(conn: &Connection, seq: u64) -> Result<()> {
    conn.execute("UPDATE log_position SET seq = ?1", [seq as i64]).map_err(db("moving the log position"))?;
    Ok(())
}

/// Encodes a value: a tag (0 null, 1 integer, 2 real, 3 text, 4 blob), then the integer's 8
/// bytes LE (zigzag varint), the real's 8 bytes LE, or a length (varint) and the bytes.
fn put_value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => out.push(0),
        ValueRef::Integer(i) => {
            out.push(1);
            varint::put(out, varint::zigzag(i));
        }
        ValueRef::Real(f) => {
            out.push(2);
            out.extend_from_slice(&f.to_le_bytes());
        }
        ValueRef::Text(t) => {
            out.push(3);
            varint::put(out, t.len() as u64);
            out.extend_from_slice(t);
        }
        ValueRef::Blob(b) => {
            out.push(4);
            varint::put(out, b.len() as u64);
            out.extend_from_slice(b);
        }
    }
}

/// Takes the changes this transaction made to logged tables (and forgets them): a segment's
/// body, or None when it changed none. The body's dictionary has an entry per table and set of
/// columns used (an update names only what it changed); an update that changed nothing (a
/// `MAX` that kept the old value) is left out.
pub fn take_changes(conn: &Connection, logged: &[Logged]) -> Result<Option<Vec<u8>>> {
    let mut st =
        conn.prepare_cached("SELECT * FROM temp.log_changes ORDER BY n").map_err(db("reading the changes to log"))?;
    let mut rows = st.query([]).map_err(db("reading the changes to log"))?;
    // (table, mask) -> the entry's number; a transaction uses a handful.
    let mut entries: Vec<(usize, u32)> = Vec::new();
    let mut dictionary = Vec::new();
    let mut changes = Vec::new();
    while let Some(r) = rows.next().map_err(db("reading the changes to log"))? {
        let read = db("reading the changes to log");
        let tbl: i64 = r.get(1).map_err(&read)?;
        let op: i64 = r.get(2).map_err(&read)?;
        let mask: i64 = r.get(3).map_err(&read)?;
        let (table, _) = DURABLE.get(tbl as usize).ok_or_else(|| Error::internal(format!("logged table {tbl}")))?;
        let t = logged.get(tbl as usize).ok_or_else(|| Error::internal(format!("table {table} is not attached")))?;
        let mask = mask as u32 & ((1u32 << t.columns.len()) - 1);
        if op == Op::Update as i64 && mask & !t.key_bits == 0 {
            continue;
        }
        let number = match entries.iter().position(|&e| e == (tbl as usize, mask)) {
            Some(n) => n,
            None => {
                let given = t.columns.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0);
                put_entry(&mut dictionary, table, mask.count_ones() as usize, given.map(|(_, c)| c.as_str()));
                entries.push((tbl as usize, mask));
                entries.len() - 1
            }
        };
        changes.push(op as u8);
        varint::put(&mut changes, number as u64);
        for i in (0..t.columns.len()).filter(|i| mask & (1 << i) != 0) {
            put_value(&mut changes, r.get_ref(4 + i).map_err(&read)?);
        }
    }
    drop(rows);
    conn.execute("DELETE FROM temp.log_changes", []).map_err(db("clearing the changes to log"))?;
    if entries.is_empty() {
        return Ok(None);
    }
    let mut body = Vec::with_capacity(dictionary.len() + changes.len() + 10);
    varint::put(&mut body, entries.len() as u64);
    body.extend_from_slice(&dictionary);
    body.extend_from_slice(&changes);
    Ok(Some(body))
}

/// Forgets changes recorded by a transaction that was rolled back, or by a replay (whose rows
/// came from the log and go back to none).
pub fn forget_changes(conn: &Connection) -> Result<()> {
    conn.execute("DELETE FROM temp.log_changes", []).map_err(db("clearing the changes to log"))?;
    Ok(())
}

/// Segment `seq` as stored: header, then the body compressed with dictionary 1.
#[cfg(test)]
pub fn encode(seq: u64, schema: i64, body: &[u8]) -> Result<Vec<u8>> {
    encode_by(seq, schema, body, None)
}

/// [`encode`], in format 3 naming `writer` when there is one (4 for a collector's).
fn encode_by(seq: u64, schema: i64, body: &[u8], writer: Option<(&[u8; WRITER_LEN], u8)>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(HEADER + WRITER_LEN + body.len() / 3);
    out.extend_from_slice(MAGIC);
    out.push(writer.map_or(VERSION, |(_, v)| v));
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(schema as u32).to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    if let Some((w, _)) = writer {
        out.extend_from_slice(w);
    }
    let packed = zstd::bulk::Compressor::with_dictionary(3, dictionary_1())
        .and_then(|mut c| c.compress(body))
        .map_err(|e| Error::internal(format!("compressing a log segment: {e}")))?;
    out.extend_from_slice(&packed);
    Ok(out)
}

/// The log of a manifest: its store and where segments are named.
#[derive(Clone)]
pub struct Log {
    store: std::sync::Arc<dyn Backend>,
    /// How the store names itself in errors (`s3://bucket/prefix`).
    name: String,
    /// The logged tables as the replica's connection has them ([`attach`]); empty until then.
    logged: Vec<Logged>,
    /// A segment `news` fetched (its number and bytes), for the catch-up that follows.
    fetched: std::sync::Arc<std::sync::Mutex<Option<Fetched>>>,
    /// A copy of the replica is written after publishing every this-many-th segment (0: never).
    copy_every: u64,
    /// Set by a publish whose segment makes a copy due; taken after its commit.
    copy_due: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Where its keys are: "" for the repository's log, `nodes/<node>/` for a node's.
    prefix: String,
    /// Who writes it.
    owner: Owner,
    /// What this process knows of its writing as this log's node, shared by its handles.
    writers: std::sync::Arc<Writers>,
}

/// A process's writing as one node ([`Owner::Node`]), shared by all its handles on the node's
/// log.
#[derive(Default, Debug)]
pub struct Writers {
    /// Set once another process was found writing as this node (why): every write of this
    /// process is refused after.
    usurped: std::sync::OnceLock<String>,
    /// Whether this process has published a segment: another writer's segment found after
    /// that is another process writing as this node (before it, a node's earlier life, whose
    /// cache directory was lost).
    wrote: std::sync::atomic::AtomicBool,
}

/// A segment's number and stored bytes.
type Fetched = (u64, Vec<u8>);

/// Where copies of a replica are: `replica/<20-digit position>`.
const COPIES: &str = "replica/";
/// After how many segments a host writes a copy of its replica, by default.
pub const COPY_EVERY: u64 = 1000;
/// Where the nodes' own logs are in a repository whose every node keeps one: `nodes/<node>/`.
pub const NODES: &str = "nodes/";
/// Where those nodes name themselves, `fleet/<node>`, before their first segment: a reader
/// finds every node with one listing, not a listing of every node's segments.
pub const FLEET: &str = "fleet/";
/// The most compressed bytes a copy may be.
const MAX_COPY: u64 = 1 << 40;

/// The key of the copy of a replica at log position `seq`.
pub fn copy_key(seq: u64) -> String {
    format!("{COPIES}{seq:020}")
}

/// The position a copy's key names, or None: not a copy's key.
fn copy_seq(key: &str) -> Option<u64> {
    let digits = key.strip_prefix(COPIES)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// What a copy being fetched, and the directory of one being written, are named with.
const FETCHING: &str = ".replica-fetching-";
/// The prefix of a new replica being made ([`create_replica`]).
const CREATING: &str = ".replica-creating-";
const WRITING: &str = ".replica-writing-";
/// Copies of a replica kept in the store: the newest, and the one before it for a host that
/// listed the copies just before the newest one replaced it.
const COPIES_KEPT: usize = 2;

/// Removes what a killed fetch or write of a copy left in `dir` (names starting with
/// `prefix`, an hour old: a younger one may be another process's, still at work).
fn sweep_leftovers(dir: &std::path::Path, prefix: &str) {
    sweep_leftovers_older(dir, prefix, 3600)
}

/// [`sweep_leftovers`] of those at least `secs` old.
fn sweep_leftovers_older(dir: &std::path::Path, prefix: &str, secs: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let old = entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|m| m.elapsed().ok());
        if old.is_none_or(|age| age.as_secs() < secs) {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        if let Err(e) = removed {
            tracing::warn!(path = %path.display(), error = %e, "a killed copy of the replica's leftover was not removed");
        }
    }
}

/// A staged value as an `io::Write`, for an encoder to write into.
struct StagedWriter<'a>(Box<dyn crate::object::backend::Staged + 'a>);

impl std::io::Write for StagedWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes).map_err(std::io::Error::other)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    pub fn new(store: std::sync::Arc<dyn Backend>, name: impl Into<String>) -> Log {
        Log {
            store,
            name: name.into(),
            logged: Vec::new(),
            fetched: Default::default(),
            copy_every: COPY_EVERY,
            copy_due: Default::default(),
            prefix: String::new(),
            owner: Owner::Shared,
            writers: Default::default(),
        }
    }

    /// This log with what `writers` knows of this process's writing as its node (every handle
    /// of a process on the node's log shares one).
    pub fn sharing(self, writers: std::sync::Arc<Writers>) -> Log {
        Log { writers, ..self }
    }

    /// Marks this process's writing as its node refused from now on (`why`, logged), and the
    /// error saying so.
    fn usurped_by(&self, why: String) -> Error {
        tracing::error!(store = %self.name, why = %why, "another process writes as this node: this one's writes are refused");
        let _ = self.writers.usurped.set(why.clone());
        self.usurped_error(&why)
    }

    /// This log as the log of node `owner` names (its own or another's), under `nodes/<node>/`.
    pub fn of_node(self, owner: Owner) -> Log {
        let prefix = match &owner {
            Owner::Shared => String::new(),
            Owner::Node { node, .. } | Owner::Foreign { node } | Owner::Collector { node, .. } => {
                format!("{NODES}{node}/")
            }
        };
        Log { prefix, owner, ..self }
    }

    /// The key of segment `seq` of this log.
    fn key(&self, seq: u64) -> String {
        format!("{}{}", self.prefix, key(seq))
    }

    /// Where this log's copies of a replica are.
    fn copies(&self) -> String {
        format!("{}{COPIES}", self.prefix)
    }

    /// The key of this log's copy of a replica at position `seq`.
    fn copy_key(&self, seq: u64) -> String {
        format!("{}{}", self.prefix, copy_key(seq))
    }

    /// The position a key of this log's copies names, or None.
    fn copy_seq(&self, key: &str) -> Option<u64> {
        copy_seq(key.strip_prefix(self.prefix.as_str())?)
    }

    /// The writer a stored segment of format 3 names, None for another format.
    fn writer_of(stored: &[u8]) -> Option<[u8; WRITER_LEN]> {
        (stored.len() >= HEADER + WRITER_LEN && &stored[..7] == MAGIC && stored[7] == VERSION_WRITER)
            .then(|| stored[HEADER..HEADER + WRITER_LEN].try_into().ok())
            .flatten()
    }

    /// Whether a stored segment (or its first bytes) is a collector's (format 4).
    fn by_collector(stored: &[u8]) -> bool {
        stored.len() > 7 && &stored[..7] == MAGIC && stored[7] == VERSION_COLLECTOR
    }

    /// Names `node` under `fleet/` (JSON: `node`, `named` RFC 3339 UTC), unless it is named.
    fn name_node(&self, node: &str) -> Result<()> {
        let entry =
            serde_json::json!({ "node": node, "named": crate::base::time::iso_time(crate::base::time::now_ns()) });
        match self.store.put(&format!("{FLEET}{node}"), entry.to_string().as_bytes()) {
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    /// Refuses a collector's write that would change one of node `node`'s records (a table in
    /// [`NOT_COLLECTED`]; with `purges`, but for deleting trash items or marking them restored):
    /// only the node writes those.
    fn refuse_records(&self, tx: &Connection, node: &str, purges: bool) -> Result<()> {
        let mut st = tx
            .prepare_cached("SELECT DISTINCT tbl, op FROM temp.log_changes")
            .map_err(db("reading the changes to log"))?;
        let tables = st
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db("reading the changes to log"))?;
        for change in tables {
            let (tbl, op) = change.map_err(db("reading the changes to log"))?;
            let name = DURABLE.get(tbl as usize).map_or("?", |(t, _)| *t);
            let purge = purges
                && ((op == Op::Delete as i64 && PURGED.contains(&name))
                    || (op == Op::Update as i64 && name == RESTORED));
            if NOT_COLLECTED.contains(&name) && !purge {
                return Err(Error::invalid_argument(format!(
                    "a collection of node {node}'s log in {} would change its {name}: only node {node} writes its records",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// The error of a write refused because another process writes as this log's node.
    fn usurped_error(&self, why: &str) -> Error {
        let node = match &self.owner {
            Owner::Node { node, .. } | Owner::Foreign { node } | Owner::Collector { node, .. } => node.as_str(),
            Owner::Shared => "",
        };
        Error::new(
            ErrorKind::Conflict,
            format!(
                "another process is writing as node {node} of {} ({why}): two processes with other cache directories must not write as one node, so this one writes nothing more; give each host its own --node (TROVE_NODE), or stop the other and run this again",
                self.name
            ),
        )
    }

    /// This log with a copy of the replica written after every `n`th segment (0: never).
    pub fn copy_every(self, n: u64) -> Log {
        Log { copy_every: n, ..self }
    }

    /// Writes a copy of the replica at `replica` (its logged tables, as a replay to its
    /// position would leave them) to the store as `replica/<position>`: zstd-compressed,
    /// through a temporary beside it, streamed. Returns the position.
    pub fn write_copy(&self, replica: &std::path::Path) -> Result<u64> {
        let dir = replica.parent().unwrap_or(std::path::Path::new("."));
        sweep_leftovers(dir, WRITING);
        let tmp = tempfile::Builder::new()
            .prefix(WRITING)
            .tempdir_in(dir)
            .map_err(|e| Error::io("create a temporary directory in", dir, e))?;
        let path = tmp.path().join("copy.db");
        let seq = {
            let copy = Manifest::create(&path)?;
            let c = copy.conn();
            let source = replica.to_str().ok_or_else(|| Error::invalid_argument("the replica's path is not UTF-8"))?;
            c.execute("ATTACH DATABASE ?1 AS src", [source]).map_err(db("copying the replica"))?;
            // One transaction: every table read at the same state of the replica.
            c.execute_batch("PRAGMA foreign_keys = OFF; BEGIN").map_err(db("copying the replica"))?;
            let seq: i64 =
                c.query_row("SELECT seq FROM src.log_position", [], |r| r.get(0)).map_err(db("copying the replica"))?;
            for (table, key) in DURABLE {
                let cols = columns(c, table)?.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
                // In key order: the audit log's rows must arrive by `seq`, and pages fill best so.
                let order = key.join(", ");
                // Emptied first: a new manifest fills some with a row of its own (the cache
                // generation), which the replica's replaces.
                c.execute_batch(&format!(
                    "DELETE FROM main.{table}; INSERT INTO main.{table} ({cols}) SELECT {cols} FROM src.{table} ORDER BY {order};"
                ))
                .map_err(db("copying the replica"))?;
            }
            set_position(c, seq as u64)?;
            c.execute_batch("COMMIT; DETACH DATABASE src; PRAGMA wal_checkpoint(TRUNCATE);")
                .map_err(db("copying the replica"))?;
            seq as u64
        };
        let mut file = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
        let mut staged = StagedWriter(self.store.stage(self.copies().trim_end_matches('/'))?);
        let mut encoder =
            zstd::stream::write::Encoder::new(&mut staged, 3).map_err(|e| Error::io("compress", &path, e))?;
        std::io::copy(&mut file, &mut encoder).map_err(|e| Error::io("compress", &path, e))?;
        encoder.finish().map_err(|e| Error::io("compress", &path, e))?;
        staged.0.commit(&self.copy_key(seq))?;
        // The older copies serve no host that lists the copies from now on.
        let mut older: Vec<String> =
            self.store.list(&self.copies())?.into_iter().filter(|k| self.copy_seq(k).is_some()).collect();
        older.sort();
        let keep = older.len().saturating_sub(COPIES_KEPT);
        for k in &older[..keep] {
            if let Err(e) = self.store.delete(k) {
                tracing::warn!(key = %k, store = %self.name, error = %e, "an older copy of a replica was not deleted");
            }
        }
        Ok(seq)
    }

    /// Makes `path` (absent) the newest copy of the replica in the store, or does nothing:
    /// there is none, or another process made `path` meanwhile. The copy's position, or None.
    fn fetch_copy(&self, path: &std::path::Path) -> Result<Option<u64>> {
        let newest = self.store.list(&self.copies())?.iter().filter_map(|k| self.copy_seq(k)).max();
        let Some(seq) = newest else { return Ok(None) };
        // A copy past the log's end (a backup that took `replica/` after `log/`, a log that lost
        // its end) would have this host write past a gap.
        if !self.holds(seq)? {
            tracing::warn!(key = %self.copy_key(seq), store = %self.name, "a copy of a replica is past the log's end: not used");
            return Ok(None);
        }
        // A name of its own: two processes starting on a new host at once each fetch into
        // theirs, and the first to finish puts its copy in place.
        let part = temporary_beside(path, FETCHING)?;
        {
            let mut out = zstd::stream::write::Decoder::new(std::io::BufWriter::new(part.as_file()))
                .map_err(|e| Error::io("decompress into", part.path(), e))?;
            self.store.copy_to(&self.copy_key(seq), MAX_COPY, &mut out)?;
            std::io::Write::flush(&mut out).map_err(|e| Error::io("decompress into", part.path(), e))?;
        }
        part.as_file().sync_all().map_err(|e| Error::io("sync", part.path(), e))?;
        // A copy must be a manifest at the position its name says.
        let opened = Manifest::open(part.path())?;
        let at = position(opened.conn())?;
        drop(opened);
        if at != seq {
            return Err(Error::corrupt(format!(
                "{} of {} is at log position {at}, not {seq}",
                self.copy_key(seq),
                self.name
            )));
        }
        Ok(put_in_place(part, path, "put the fetched copy in place at")?.then_some(seq))
    }

    /// Whether the log holds segment `seq` (its length asked, nothing read).
    fn holds(&self, seq: u64) -> Result<bool> {
        match self.store.size(&self.key(seq)) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Segments `from`, `from + 1`, ... (`n` of them, asked for at once), in order, as far as
    /// they are there, and how the window ended. Only the first is read as any segment is
    /// (its error is the catch-up's); the others are read ahead, each at most
    /// `CATCH_UP_WINDOW_BYTES`, so a window holds at most one big segment: one longer, or any
    /// error reading ahead (past the log's end, a dropped connection), only ends the window
    /// there, and the next reads that segment by itself.
    fn fetch_window(&self, from: u64, n: usize) -> Result<(Vec<Vec<u8>>, WindowEnd)> {
        let (first, ahead): (SegmentRead, Vec<SegmentRead>) = if n <= 1 {
            (self.fetch(from), Vec::new())
        } else {
            std::thread::scope(|s| {
                let asked: Vec<_> = (1..n as u64).map(|i| s.spawn(move || self.fetch_ahead(from + i))).collect();
                let first = self.fetch(from);
                let ahead = asked
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| Err(Error::internal("a thread reading a log segment panicked")))
                    })
                    .collect();
                (first, ahead)
            })
        };
        let Some(first) = first? else { return Ok((Vec::new(), WindowEnd::Absent)) };
        let mut got = vec![first];
        for (i, read) in ahead.into_iter().enumerate() {
            match read {
                Ok(Some(stored)) => got.push(stored),
                Ok(None) => return Ok((got, WindowEnd::Absent)),
                Err(e) => {
                    tracing::debug!(segment = %self.key(from + 1 + i as u64), error = %e, "a segment read ahead was not read: read again by itself");
                    return Ok((got, WindowEnd::Cut));
                }
            }
        }
        Ok((got, WindowEnd::Whole))
    }

    /// Segment `seq` read ahead of the catch-up: None when absent; longer than
    /// `CATCH_UP_WINDOW_BYTES`, an error.
    fn fetch_ahead(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        match self.store.get_whole(&self.key(seq), CATCH_UP_WINDOW_BYTES as u64) {
            Ok(stored) => Ok(Some(stored)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Segment `seq`'s stored bytes, or None when there is none (yet).
    fn fetch(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        let mut kept = self.fetched.lock().unwrap_or_else(|p| p.into_inner());
        match kept.take() {
            Some((at, stored)) if at == seq => return Ok(Some(stored)),
            _ => {}
        }
        drop(kept);
        match self.store.get_whole(&self.key(seq), MAX_SEGMENT) {
            Ok(stored) => Ok(Some(stored)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn damaged(&self, seq: u64, what: &str) -> Error {
        Error::corrupt(format!(
            "log segment {} in {} {what}: no host can catch up past it; restore the segment from a backup of the repository",
            self.key(seq),
            self.name
        ))
    }

    /// Applies every segment after this manifest's position, in order, in the caller's
    /// transaction; returns how many. The audit log's tree is grown over the records they
    /// brought, and the changes the replay made are not logged again.
    ///
    /// Segments are asked for in windows read at once: one, one more, then twice as many
    /// each time the last window was all there (up to `CATCH_UP_WINDOW`), so the
    /// usual catch-up (nothing new, or one segment) asks as before, and one far behind (a
    /// host that was away while a busy server wrote tens of segments a second) is not held to
    /// one round trip a segment. A window stops at its first absent segment; any after it
    /// (created meanwhile) are read again by the next catch-up.
    fn catch_up_to(&self, conn: &Connection) -> Result<u64> {
        let start = position(conn)?;
        let mut seq = start;
        let mut window = 1;
        let mut whole_windows = 0u32;
        loop {
            let (segments, end) = self.fetch_window(seq + 1, window)?;
            for stored in segments {
                seq += 1;
                // A segment of another writer after this process wrote: another process writes
                // as this node. Applied all the same (it is in the log); no more writes here.
                if let Owner::Node { writer, .. } = &self.owner {
                    let after_ours = self.writers.wrote.load(std::sync::atomic::Ordering::Relaxed);
                    if after_ours
                        && self.writers.usurped.get().is_none()
                        && !Log::by_collector(&stored)
                        && Log::writer_of(&stored) != Some(*writer)
                    {
                        let _ =
                            self.usurped_by(format!("it created segment {} after this process wrote", self.key(seq)));
                    }
                }
                self.apply(conn, seq, &stored)?;
                set_position(conn, seq)?;
                // The replayed rows came from the log: they are not this host's to publish.
                forget_changes(conn)?;
            }
            window = match end {
                WindowEnd::Absent => break,
                WindowEnd::Cut => 1,
                WindowEnd::Whole => {
                    whole_windows += 1;
                    if whole_windows < 2 {
                        1
                    } else {
                        (window * 2).min(CATCH_UP_WINDOW)
                    }
                }
            };
        }
        if seq > start {
            super::audit::catch_up_tree(conn)?;
        }
        Ok(seq - start)
    }

    /// Applies segment `seq` (its stored bytes) to `conn`.
    fn apply(&self, conn: &Connection, seq: u64, stored: &[u8]) -> Result<()> {
        if stored.len() < HEADER || &stored[..7] != MAGIC {
            return Err(self.damaged(seq, "does not begin as a segment does"));
        }
        let version = stored[7];
        if version > VERSION_COLLECTOR {
            return Err(Error::invalid_argument(format!(
                "log segment {} in {} is in format {version}, newer than this trove's {VERSION_COLLECTOR}: upgrade trove",
                self.key(seq),
                self.name
            )));
        }
        let field = |at: usize, n: usize| -> u64 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&stored[at..at + n]);
            u64::from_le_bytes(b)
        };
        if field(8, 8) != seq {
            return Err(self.damaged(seq, &format!("names itself segment {}", field(8, 8))));
        }
        let made_by = field(16, 4) as i64;
        if made_by > SCHEMA_VERSION {
            return Err(Error::invalid_argument(format!(
                "log segment {} in {} was written by a trove with manifest schema {made_by}, newer than this one's {SCHEMA_VERSION}: upgrade trove",
                self.key(seq),
                self.name
            )));
        }
        let dictionary: &[u8] = match (version, field(20, 4)) {
            (1, 0) | (2, 0) | (3, 0) | (4, 0) => &[],
            (2, 1) | (3, 1) | (4, 1) => dictionary_1(),
            (0, _) => return Err(self.damaged(seq, "is in format 0, which no trove writes")),
            (_, d) => return Err(self.damaged(seq, &format!("names dictionary {d}, which no trove has"))),
        };
        let mut body = Vec::new();
        let header = if version >= VERSION_WRITER { HEADER + WRITER_LEN } else { HEADER };
        if stored.len() < header {
            return Err(self.damaged(seq, "ends inside its header"));
        }
        let decoder = zstd::stream::read::Decoder::with_dictionary(&stored[header..], dictionary)
            .map_err(|e| self.damaged(seq, &format!("cannot be decompressed ({e})")))?;
        decoder
            .take(MAX_SEGMENT + 1)
            .read_to_end(&mut body)
            .map_err(|e| self.damaged(seq, &format!("cannot be decompressed ({e})")))?;
        if body.len() as u64 > MAX_SEGMENT {
            return Err(self.damaged(seq, "decompresses to more than a segment ever holds"));
        }
        replay(conn, &self.logged, &body).map_err(|e| match e {
            Replay::Damaged(what) => self.damaged(seq, &what),
            Replay::Failed(e) => e.context(format!("applying log segment {} of {}", self.key(seq), self.name)),
        })
    }
}

impl Replication for Log {
    fn name(&self) -> &str {
        &self.name
    }

    fn publish(&self, tx: &Connection, fence: Option<i64>) -> Result<Published> {
        if let Owner::Collector { node, purges, .. } = &self.owner {
            self.refuse_records(tx, node, *purges)?;
        }
        let Some(body) = take_changes(tx, &self.logged)? else { return Ok(Published::Nothing) };
        let writer = match &self.owner {
            Owner::Shared => None,
            Owner::Node { writer, .. } => Some((writer, VERSION_WRITER)),
            Owner::Collector { writer, .. } => Some((writer, VERSION_COLLECTOR)),
            Owner::Foreign { node } => {
                return Err(Error::invalid_argument(format!(
                    "what this would change is node {node}'s, in {}: only node {node} writes its records; run it there (or as --node {node} once that node is gone)",
                    self.name
                )))
            }
        };
        if let Some(why) = self.writers.usurped.get() {
            return Err(self.usurped_error(why));
        }
        if let Some(fence) = fence {
            self.check_fence(tx, fence)?;
        }
        let seq = position(tx)? + 1;
        if body.len() as u64 > MAX_SEGMENT {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "this change would make log segment {} of {} {} bytes, more than a segment may hold ({MAX_SEGMENT}): nothing was written; snapshot the tree in parts (smaller workspaces)",
                    self.key(seq),
                    self.name,
                    body.len()
                ),
            ));
        }
        if seq == 1 {
            if let Owner::Node { node, .. } = &self.owner {
                self.name_node(node)?;
            }
        }
        crate::base::failpoint::failpoint("log:publishing");
        match self.store.put(&self.key(seq), &encode_by(seq, SCHEMA_VERSION, &body, writer)?) {
            Ok(()) => {
                crate::base::failpoint::failpoint("log:published");
                self.writers.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
                set_position(tx, seq)?;
                if self.copy_every > 0 && seq % self.copy_every == 0 {
                    self.copy_due.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(Published::Won)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => match writer {
                None | Some((_, VERSION_COLLECTOR)) => Ok(Published::Lost),
                // This cache's own segment (a commit that failed after its create) is caught
                // up with; another writer's is another process writing as this node.
                Some((mine, _)) => match self.store.get_range(&self.key(seq), 0, (HEADER + WRITER_LEN) as u64) {
                    // Listed as taken but not read back yet (a store that lags): caught up with
                    // and tried again, as any lost race.
                    Err(e) if e.kind() == ErrorKind::NotFound => Ok(Published::Lost),
                    // The store failing is not another writer: this write fails, nothing marked.
                    Err(e) => Err(e.context(format!("reading who created {}", self.key(seq)))),
                    Ok(head) if Log::writer_of(&head) == Some(*mine) || Log::by_collector(&head) => Ok(Published::Lost),
                    Ok(_) => {
                        let why = format!("it created segment {} first", self.key(seq));
                        Err(self.usurped_by(why))
                    }
                },
            },
            Err(e) => Err(e),
        }
    }

    fn check_fence(&self, conn: &Connection, fence: i64) -> Result<()> {
        let swept = crate::manifest::gc::swept_horizon(conn)?;
        if swept > fence {
            return Err(super::fenced(&self.name, swept, fence));
        }
        Ok(())
    }

    fn catch_up(&self, tx: &Connection) -> Result<u64> {
        self.catch_up_to(tx)
    }

    fn check(&self, conn: &Connection) -> Result<LogCheck> {
        self.check_against(conn)
    }

    fn committed(&self, conn: &Connection) {
        if !self.copy_due.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some(path) = conn.path().filter(|p| !p.is_empty()) else { return };
        match self.write_copy(std::path::Path::new(path)) {
            Ok(seq) => {
                tracing::info!(key = %self.copy_key(seq), store = %self.name, "a copy of the replica was written, for new hosts to start from")
            }
            Err(e) => {
                tracing::warn!(store = %self.name, error = %e, "a copy of the replica was not written: new hosts replay more of the log until the next one")
            }
        }
    }

    fn news(&self, conn: &Connection) -> Result<bool> {
        let next = position(conn)? + 1;
        let Some(stored) = self.fetch(next)? else { return Ok(false) };
        *self.fetched.lock().unwrap_or_else(|p| p.into_inner()) = Some((next, stored));
        Ok(true)
    }
}

impl Log {
    /// Replays every segment from the first into a scratch manifest beside `replica` (a file in
    /// its directory, removed after; one a killed check left is removed by a later one once a
    /// day old), then compares every logged table's rows with the replica's, at one state of
    /// the replica (one read transaction): a damaged segment, a segment the replica applied that
    /// the log does not hold, or rows that differ, is a problem. Segments published meanwhile
    /// (another process of this host, another host) are applied to the scratch, or the replica
    /// catches up, and the comparison is tried again, eight times at most.
    fn check_against(&self, replica: &Connection) -> Result<LogCheck> {
        let path = replica
            .path()
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from)
            .ok_or_else(|| Error::internal("a replica in memory has no file to check the log beside"))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        sweep_leftovers_older(dir, CHECKING, 86_400);
        let tmp = tempfile::Builder::new()
            .prefix(CHECKING)
            .tempdir_in(dir)
            .map_err(|e| Error::io("create a directory in", dir, e))?;
        let scratch = Manifest::create(&tmp.path().join("manifest.db"))?;
        let fresh = Log {
            logged: attach(scratch.conn())?,
            fetched: Default::default(),
            copy_every: 0,
            copy_due: Default::default(),
            ..self.clone()
        };
        let catch_up = |log: &Log, conn: &Connection| -> Result<u64> {
            let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(db("starting a transaction"))?;
            let n = log.catch_up_to(&tx)?;
            tx.commit().map_err(db("committing"))?;
            Ok(n)
        };
        let mut report = LogCheck::default();
        for _ in 0..8 {
            // Only damage is a finding; a failure to read the store or write the scratch is
            // the check's own.
            match catch_up(&fresh, scratch.conn()) {
                Ok(n) => report.segments += n,
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    report.problems.push(e.message().to_owned());
                    return Ok(report);
                }
                Err(e) => return Err(e),
            }
            let log_end = position(scratch.conn())?;
            let (applied, problems) = compare_rows(scratch.conn(), &path, &self.logged, &self.name, log_end)?;
            if applied == log_end {
                report.compared = true;
                report.problems.extend(problems);
                return Ok(report);
            }
            if applied > log_end {
                // Published after the scratch's last look, or really missing.
                if self.holds(log_end + 1)? {
                    continue;
                }
                let missing = match log_end + 1 == applied {
                    true => format!("segment {} is", self.key(applied)),
                    false => format!("segments {} to {} are", self.key(log_end + 1), self.key(applied)),
                };
                report.problems.push(format!(
                    "{} ends at segment {log_end}, but this host's replica {} applied or wrote segments up to {applied}: {missing} missing from the log (restore them from a backup of the repository, or move the replica aside to read the log as it is)",
                    self.name,
                    path.display()
                ));
                return Ok(report);
            }
            // The replica is behind what the scratch read: it catches up.
            match catch_up(self, replica) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    report.problems.push(format!(
                        "this host's replica {} cannot catch up: {}",
                        path.display(),
                        e.message()
                    ));
                    return Ok(report);
                }
                Err(e) => return Err(e),
            }
        }
        tracing::info!(store = %self.name, "the log grew through every try of this check: its rows were not compared with the replica's");
        Ok(report)
    }
}

/// Where a check replays the log, in the replica's directory.
const CHECKING: &str = ".check-replay-";

/// Columns a schema migration rewrote in place on replicas that existed then (schema 19: the
/// epochs closed, the cache generation keyed), so that a replica migrated then and one replayed
/// since may hold other values there for rows of that time: not compared. A migration that
/// rewrites a logged column must add it here.
const MIGRATED: &[(&str, &str)] = &[("gc_epochs", "closed_ns"), ("cache_generation", "generation")];

/// The replica at `replica` attached to `conn` (the scratch, at log position `log_end`), and
/// in one read transaction (one state of the replica): the replica's position and, when it is
/// `log_end`, a message per logged table whose rows differ, compared by the replica's columns
/// (`logged`) less [`MIGRATED`].
fn compare_rows(
    conn: &Connection,
    replica: &std::path::Path,
    logged: &[Logged],
    name: &str,
    log_end: u64,
) -> Result<(u64, Vec<String>)> {
    let at = replica.to_str().ok_or_else(|| {
        Error::invalid_argument(format!(
            "{} is not UTF-8, so SQLite cannot attach it: give --cache-dir a UTF-8 path",
            replica.display()
        ))
    })?;
    conn.execute("ATTACH DATABASE ?1 AS replica", [at]).map_err(db("attaching the replica to compare"))?;
    let compared = (|| -> Result<(u64, Vec<String>)> {
        let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Deferred)
            .map_err(db("starting a read of the replica"))?;
        let applied: i64 = tx
            .query_row("SELECT seq FROM replica.log_position", [], |r| r.get(0))
            .map_err(db("reading the replica's log position"))?;
        let applied = applied as u64;
        let mut problems = Vec::new();
        if applied == log_end {
            for ((table, _), l) in DURABLE.iter().zip(logged) {
                let cols = l
                    .columns
                    .iter()
                    .filter(|c| !MIGRATED.contains(&(*table, c.as_str())))
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(", ");
                let count = |a: &str, b: &str| -> Result<i64> {
                    let sql = format!(
                        "SELECT count(*) FROM (SELECT {cols} FROM {a}.{table} EXCEPT SELECT {cols} FROM {b}.{table})"
                    );
                    tx.query_row(&sql, [], |r| r.get(0)).map_err(db("comparing the log's rows with the replica's"))
                };
                let (only_log, only_replica) = (count("main", "replica")?, count("replica", "main")?);
                if only_log > 0 || only_replica > 0 {
                    problems.push(format!(
                        "table {table}: {only_log} rows replayed from {name} are not in this host's replica {}, which holds {only_replica} rows the log does not (move the replica aside to read the log as it is)",
                        replica.display()
                    ));
                }
            }
        }
        tx.commit().map_err(db("ending the read of the replica"))?;
        Ok((applied, problems))
    })();
    conn.execute("DETACH DATABASE replica", []).map_err(db("detaching the replica"))?;
    compared
}

/// Opens (or creates) the node-local replica at `path` of the manifest whose durable rows are
/// `log`'s, and brings it up to date with the log.
///
/// A replica is a cache: one that does not open as a manifest (an interrupted creation left it
/// empty, or it was damaged) is deleted and replayed from the log again.
pub fn open_replica(path: &std::path::Path, log: Log) -> Result<Manifest> {
    // A new host starts from the newest copy of a replica, when there is one, and replays only
    // the segments after it; a copy that cannot be used is only slower to do without.
    if !path.exists() {
        if let Err(e) = log.fetch_copy(path) {
            tracing::warn!(store = %log.name, error = %e, "no copy of a replica could be used: the whole log is replayed");
        }
    }
    if !path.exists() {
        create_replica(path)?;
    }
    let mut m = match Manifest::open(path) {
        Err(e) if e.kind() == ErrorKind::Corrupt => {
            tracing::warn!(path = %path.display(), error = %e, "this host's replica of the manifest is damaged: it is rebuilt from the record log");
            for suffix in ["", "-wal", "-shm"] {
                let mut file = path.as_os_str().to_owned();
                file.push(suffix);
                match std::fs::remove_file(&file) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Error::io("remove the damaged replica", std::path::Path::new(&file), e))
                    }
                    _ => {}
                }
            }
            create_replica(path)?;
            Manifest::open(path)?
        }
        other => other?,
    };
    let logged = attach(m.conn())?;
    m.replicate(std::sync::Arc::new(Log { logged, ..log }))?;
    Ok(m)
}

/// Makes an empty replica at `path`, whole or not at all: its schema is installed in a
/// temporary of its own and put in place only if `path` is still free. Two handles opening a
/// new cache directory at once (a server and a command started together) would otherwise both
/// create the file, and one could open it half made, take it for damage and remove it under the
/// other.
fn create_replica(path: &std::path::Path) -> Result<()> {
    let part = temporary_beside(path, CREATING)?;
    // Closed before it is moved: its write-ahead log is folded in and removed on closing,
    // which must be seen done (a close's failure is not returned).
    drop(Manifest::create(part.path())?);
    let mut wal = part.path().as_os_str().to_owned();
    wal.push("-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return Err(Error::io(
            "fold the write-ahead log of the new replica",
            std::path::Path::new(&wal),
            std::io::Error::other("it is still there after its database was closed"),
        ));
    }
    part.as_file().sync_all().map_err(|e| Error::io("sync", part.path(), e))?;
    put_in_place(part, path, "put the new replica in place at").map(|_| ())
}

/// Renames `part` to `path` unless something is there already (then `false`: another process
/// put its own in place first). The temporary's descriptor is closed before the rename: closing
/// one on the replica's file later would drop the locks this process's SQLite connections hold
/// on it. Where the file system cannot refuse to replace (no `RENAME_NOREPLACE`, no hard
/// links), a plain rename if `path` is still free.
fn put_in_place(part: tempfile::NamedTempFile, path: &std::path::Path, what: &str) -> Result<bool> {
    let part = part.into_temp_path();
    match part.persist_noclobber(path) {
        Ok(()) => Ok(true),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if path.exists() => {
            tracing::debug!(path = %path.display(), error = %e.error, "another process put its replica in place first");
            Ok(false)
        }
        Err(e) => match e.path.persist(path) {
            Ok(()) => Ok(true),
            Err(e) => Err(Error::io(what, path, e.error)),
        },
    }
}

/// A temporary file named `prefix…` beside `path`, where it can be renamed to `path`; the
/// leftovers of killed processes an hour old are removed first.
fn temporary_beside(path: &std::path::Path, prefix: &str) -> Result<tempfile::NamedTempFile> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    sweep_leftovers(dir, prefix);
    tempfile::Builder::new().prefix(prefix).tempfile_in(dir).map_err(|e| Error::io("create a temporary in", dir, e))
}

/// Why a segment's body could not be applied: it is malformed or does not fit this manifest
/// (damage, or a replica that diverged), or the database failed.
enum Replay {
    Damaged(String),
    Failed(Error),
}

impl From<Error> for Replay {
    fn from(e: Error) -> Replay {
        Replay::Failed(e)
    }
}

fn take_str<'a>(b: &mut &'a [u8]) -> std::result::Result<&'a [u8], Replay> {
    let n = varint::take(b).ok_or_else(|| Replay::Damaged("ends inside a length".into()))?;
    if n > b.len() as u64 {
        return Err(Replay::Damaged(format!("claims {n} bytes where {} remain", b.len())));
    }
    let (s, rest) = b.split_at(n as usize);
    *b = rest;
    Ok(s)
}

fn take_value(b: &mut &[u8]) -> std::result::Result<Value, Replay> {
    let (&tag, rest) = b.split_first().ok_or_else(|| Replay::Damaged("ends inside a row".into()))?;
    *b = rest;
    Ok(match tag {
        0 => Value::Null,
        1 => Value::Integer(varint::unzigzag(
            varint::take(b).ok_or_else(|| Replay::Damaged("ends inside an integer".into()))?,
        )),
        2 => {
            if b.len() < 8 {
                return Err(Replay::Damaged("ends inside a real".into()));
            }
            let (f, rest) = b.split_at(8);
            *b = rest;
            let mut a = [0u8; 8];
            a.copy_from_slice(f);
            Value::Real(f64::from_le_bytes(a))
        }
        3 => Value::Text(
            String::from_utf8(take_str(b)?.to_vec())
                .map_err(|_| Replay::Damaged("holds text that is not UTF-8".into()))?,
        ),
        4 => Value::Blob(take_str(b)?.to_vec()),
        t => return Err(Replay::Damaged(format!("holds a value of unknown type {t}"))),
    })
}

/// A logged table as a segment names it, with the statements that apply its changes.
struct Target {
    insert: String,
    update: String,
    delete: String,
    width: usize,
    /// Where the key's columns are among the segment's columns.
    key_at: Vec<usize>,
    /// What to clear before a delete (`DERIVED`).
    derived: Option<&'static str>,
}

/// Applies a segment's body. Table and column names are checked against [`DURABLE`] and this
/// database's schema before any statement names them; a change that finds no row to update or
/// delete means the replica is not the writer's state: damage.
fn replay(conn: &Connection, logged: &[Logged], body: &[u8]) -> std::result::Result<(), Replay> {
    let mut b = body;
    let count = varint::take(&mut b).ok_or_else(|| Replay::Damaged("is empty".into()))?;
    // An entry takes at least three bytes.
    if count > b.len() as u64 / 3 {
        return Err(Replay::Damaged(format!("claims {count} tables in {} bytes", b.len())));
    }
    let mut targets = Vec::new();
    for _ in 0..count {
        let name = std::str::from_utf8(take_str(&mut b)?).unwrap_or("");
        let at = DURABLE
            .iter()
            .position(|(t, _)| *t == name)
            .ok_or_else(|| Replay::Damaged(format!("names a table that is not logged: {name:?}")))?;
        let (table, key) = DURABLE[at];
        let have = &logged.get(at).ok_or_else(|| Error::internal(format!("table {table} is not attached")))?.columns;
        let width = varint::take(&mut b).ok_or_else(|| Replay::Damaged("ends inside its tables".into()))?;
        if width == 0 || width > MAX_COLUMNS as u64 {
            return Err(Replay::Damaged(format!("gives table {table} {width} columns")));
        }
        let mut cols = Vec::new();
        for _ in 0..width {
            let c = std::str::from_utf8(take_str(&mut b)?).unwrap_or("");
            let c = have
                .iter()
                .find(|h| h.as_str() == c)
                .ok_or_else(|| Replay::Damaged(format!("names a column {table} does not have: {c:?}")))?;
            cols.push(c.clone());
        }
        let key_at = key
            .iter()
            .map(|k| cols.iter().position(|c| c == k))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Replay::Damaged(format!("gives table {table} without its key")))?;
        let quoted: Vec<String> = cols.iter().map(|c| format!("\"{c}\"")).collect();
        let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
        let set: Vec<String> = quoted.iter().zip(&marks).map(|(c, m)| format!("{c} = {m}")).collect();
        let matched: Vec<String> = key_at.iter().map(|&i| format!("{} = ?{}", quoted[i], i + 1)).collect();
        targets.push(Target {
            insert: format!(
                "INSERT OR REPLACE INTO main.{table} ({}) VALUES ({})",
                quoted.join(", "),
                marks.join(", ")
            ),
            update: format!("UPDATE main.{table} SET {} WHERE {}", set.join(", "), matched.join(" AND ")),
            delete: format!(
                "DELETE FROM main.{table} WHERE {}",
                key_at.iter().map(|&i| format!("{} = ?{}", quoted[i], i + 1)).collect::<Vec<_>>().join(" AND ")
            ),
            derived: DERIVED.iter().find(|(t, _)| *t == table).map(|(_, sql)| *sql),
            width: cols.len(),
            key_at,
        });
    }
    let mut row = Vec::with_capacity(MAX_COLUMNS);
    while let Some((&op, rest)) = b.split_first() {
        b = rest;
        let op = Op::from_byte(op).ok_or_else(|| Replay::Damaged(format!("holds an unknown change {op}")))?;
        let t = varint::take(&mut b).ok_or_else(|| Replay::Damaged("ends inside a change".into()))?;
        let target = targets.get(t as usize).ok_or_else(|| Replay::Damaged(format!("names table {t} of {count}")))?;
        row.clear();
        for _ in 0..target.width {
            row.push(take_value(&mut b)?);
        }
        if let (Op::Delete, Some(derived), [at]) = (op, target.derived, target.key_at.as_slice()) {
            let mut st = conn.prepare_cached(derived).map_err(db("clearing derived rows before applying the log"))?;
            st.execute([&row[*at]]).map_err(db("clearing derived rows before applying the log"))?;
        }
        let sql = match op {
            Op::Insert => &target.insert,
            Op::Update => &target.update,
            Op::Delete => &target.delete,
        };
        let mut st = conn.prepare_cached(sql).map_err(db("applying the log"))?;
        let changed = match op {
            // A delete binds only its key's columns, at their positions.
            Op::Delete => {
                for &i in &target.key_at {
                    st.raw_bind_parameter(i + 1, &row[i]).map_err(db("applying the log"))?;
                }
                st.raw_execute().map_err(db("applying the log"))?
            }
            _ => st.execute(rusqlite::params_from_iter(row.iter())).map_err(db("applying the log"))?,
        };
        if changed == 0 {
            return Err(Replay::Damaged(format!("changes a row this manifest does not have ({sql})")));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::manifest::Manifest;
    use crate::model::audit::AuditRecord;
    use crate::object::MemoryBackend;

    fn replica(dir: &std::path::Path, name: &str, store: &Arc<MemoryBackend>) -> Manifest {
        open_replica(&dir.join(name), Log::new(store.clone() as Arc<dyn Backend>, "memory")).expect("a replica opens")
    }

    /// Every logged row of `m`, table by table, in key order.
    fn rows(m: &Manifest) -> Vec<String> {
        let mut out = Vec::new();
        for (table, key) in DURABLE {
            let sql = format!("SELECT * FROM {table} ORDER BY {}", key.join(", "));
            let mut st = m.conn().prepare(&sql).expect("prepare");
            let width = st.column_count();
            let mut q = st.query([]).expect("query");
            while let Some(r) = q.next().expect("row") {
                let vals: Vec<String> = (0..width).map(|i| format!("{:?}", r.get_ref(i).expect("value"))).collect();
                out.push(format!("{table}: {}", vals.join(" | ")));
            }
        }
        out
    }

    fn record(m: &Manifest, op: &str) {
        m.write(|tx| {
            crate::manifest::audit::append(tx, &AuditRecord::ok(crate::base::time::now_ns(), "tester", op))?;
            crate::manifest::loose::store(tx, op.as_bytes(), 3, &Default::default())?;
            Ok(())
        })
        .expect("a write");
    }

    /// A replica at `dir/name` of node `node`'s log, written under `writer` (None: read as
    /// another node's).
    fn node_replica(
        dir: &std::path::Path,
        name: &str,
        store: &Arc<MemoryBackend>,
        node: &str,
        writer: Option<u8>,
    ) -> Manifest {
        let owner = match writer {
            Some(w) => Owner::Node { node: node.into(), writer: [w; WRITER_LEN] },
            None => Owner::Foreign { node: node.into() },
        };
        let log = Log::new(store.clone() as Arc<dyn Backend>, "memory").of_node(owner);
        open_replica(&dir.join(name), log).expect("a replica opens")
    }

    #[test]
    fn a_node_writes_only_its_own_log_and_another_writer_of_it_is_refused_for_good() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = node_replica(dir.path(), "a.db", &store, "a", Some(1));
        record(&a, "first");
        let b = node_replica(dir.path(), "b.db", &store, "b", Some(2));
        record(&b, "of b");
        let keys = store.list("").expect("list");
        assert_eq!(
            keys,
            ["fleet/a", "fleet/b", "nodes/a/log/00000000000000000001", "nodes/b/log/00000000000000000001"]
        );
        let stored = store.get_whole("nodes/a/log/00000000000000000001", MAX_SEGMENT).expect("segment");
        assert_eq!((stored[7], Log::writer_of(&stored)), (VERSION_WRITER, Some([1; WRITER_LEN])));

        // The same writer (another process of one cache directory, here a stale replica)
        // catches up with its own segment and writes after it.
        let again = node_replica(dir.path(), "a-again.db", &store, "a", Some(1));
        record(&a, "second");
        record(&again, "third");
        assert_eq!(store.list("nodes/a/log/").expect("list").len(), 3);
        // Another writer of node a, behind: refused on its create, and after it too.
        let other = node_replica(dir.path(), "a-other.db", &store, "a", Some(9));
        record(&a, "fourth");
        for _ in 0..2 {
            let e = other
                .write(|tx| crate::manifest::audit::append(tx, &AuditRecord::ok(1, "t", "intrude")))
                .expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
            assert!(e.message().contains("another process is writing as node a"), "{e}");
        }
        assert_eq!(store.list("nodes/a/log/").expect("list").len(), 4, "nothing created or replaced");
        // One that caught up before writing is no collision: the node's process, which wrote
        // before, finds that writer's segment when it catches up, and writes no more.
        let late = node_replica(dir.path(), "a-late.db", &store, "a", Some(7));
        record(&late, "fifth");
        a.catch_up().expect("a catches up");
        let e =
            a.write(|tx| crate::manifest::audit::append(tx, &AuditRecord::ok(1, "t", "after"))).expect_err("refused");
        assert!(e.message().contains("after this process wrote"), "{e}");
        // Another node's replica reads a's log and writes none of it.
        let read = node_replica(dir.path(), "a-read.db", &store, "a", None);
        assert_eq!(rows(&read), rows(&a));
        let e =
            read.write(|tx| crate::manifest::audit::append(tx, &AuditRecord::ok(1, "t", "x"))).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("only node a writes its records"), "{e}");
    }

    #[test]
    fn a_collector_writes_only_collection_rows_and_the_node_writes_on_after_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = node_replica(dir.path(), "a.db", &store, "a", Some(1));
        record(&a, "first");
        let owner = Owner::Collector { node: "a".into(), writer: [5; WRITER_LEN], purges: false };
        let log = Log::new(store.clone() as Arc<dyn Backend>, "memory").of_node(owner);
        let c = open_replica(&dir.path().join("a-collecting.db"), log).expect("a replica opens");
        c.write(|tx| crate::manifest::gc::open_epoch(tx, 1)).expect("a collector's epoch");
        let stored = store.get_whole("nodes/a/log/00000000000000000002", MAX_SEGMENT).expect("segment");
        assert_eq!(stored[7], VERSION_COLLECTOR);
        // The node, behind, meets the collector's segment on its create: it catches up and
        // writes after it, as after its own; and again once it has written.
        record(&a, "second");
        c.write(|tx| crate::manifest::gc::open_epoch(tx, 2)).expect("a collector's second epoch");
        a.catch_up().expect("a catches up");
        record(&a, "third");
        assert_eq!(store.list("nodes/a/log/").expect("list").len(), 5);
        c.catch_up().expect("c catches up");
        assert_eq!(rows(&a), rows(&c));
        // A collector never writes the node's records.
        let e = c.write(|tx| crate::manifest::audit::append(tx, &AuditRecord::ok(1, "t", "x"))).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("would change its audit"), "{e}");
        assert_eq!(store.list("nodes/a/log/").expect("list").len(), 5, "nothing published");
    }

    #[test]
    fn a_new_host_starts_from_the_newest_copy_of_a_replica_and_replays_only_what_follows() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let every = |name: &str| {
            open_replica(&tmp.path().join(name), Log::new(store.clone() as Arc<dyn Backend>, "memory").copy_every(3))
                .expect("a replica opens")
        };
        let a = every("a.db");
        for op in ["one", "two", "three", "four", "five", "six", "seven"] {
            if op == "five" {
                // Node-local rows are not copied.
                a.conn()
                    .execute("INSERT INTO api_tokens (hash, label, created_ns) VALUES (x'00', 'here', 1)", [])
                    .expect("a local row");
            }
            record(&a, op);
        }
        let copies = store.list(COPIES).expect("list");
        assert_eq!(copies, [copy_key(3), copy_key(6)]);
        // The newest copy, fetched, is a manifest at its position with the rows up to it.
        let log = Log::new(store.clone() as Arc<dyn Backend>, "memory");
        let path = tmp.path().join("fetched.db");
        assert_eq!(log.fetch_copy(&path).expect("fetch"), Some(6));
        // Another process that fetched too finds it in place and leaves it be.
        assert_eq!(log.fetch_copy(&path).expect("fetch again"), None);
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".replica-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        let fetched = Manifest::open(&path).expect("open the copy");
        assert_eq!(position(fetched.conn()).expect("position"), 6);
        let count = |m: &Manifest, t: &str| -> i64 {
            m.conn().query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0)).expect("count")
        };
        assert_eq!((count(&fetched, "audit"), count(&fetched, "api_tokens")), (6, 0));
        drop(fetched);
        // A new host opens from it and catches up with segment 7: the same rows as a's.
        let c = replica(tmp.path(), "c.db", &store);
        assert_eq!(rows(&c), rows(&a));
        // A damaged newest copy is done without: the whole log is replayed.
        store.put(&copy_key(7), b"not a copy").expect("put");
        let d = replica(tmp.path(), "d.db", &store);
        assert_eq!(rows(&d), rows(&a));
        assert!(!tmp.path().join("d.db.copy").exists());
        assert_eq!(copy_seq("replica/7"), None);
    }

    /// `repair snapshots` on one host bumps the cache generation every host's directory cache
    /// is checked against: the bump is logged, so another host's next snapshot empties its cache.
    #[test]
    fn a_cache_generation_bumped_on_one_host_reaches_every_replica() {
        use crate::manifest::dir_cache;
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let (a, b) = (replica(tmp.path(), "a.db", &store), replica(tmp.path(), "b.db", &store));
        assert_eq!(dir_cache::generation(b.conn()).expect("generation"), 0);
        a.write(|tx| dir_cache::bump_generation(tx)).expect("bump");
        b.catch_up().expect("catch up");
        let bumped = dir_cache::generation(a.conn()).expect("generation");
        assert!(bumped > 0);
        assert_eq!(dir_cache::generation(b.conn()).expect("generation"), bumped);
        let c = replica(tmp.path(), "c.db", &store);
        assert_eq!(dir_cache::generation(c.conn()).expect("generation"), bumped);
    }

    /// A lease fences its handle's writes: once another host records a sweep of the epoch the
    /// lease began at, a write of logged rows is refused and publishes nothing, while a write
    /// of node-local rows (withdrawing the lease) still goes through.
    #[test]
    fn a_sweep_recorded_on_another_host_refuses_the_writes_of_an_older_lease() {
        use crate::manifest::gc;
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let (a, b) = (replica(tmp.path(), "a.db", &store), replica(tmp.path(), "b.db", &store));
        let closed = a.write(|tx| gc::new_epoch(tx, 1)).expect("epoch");
        // An epoch still condemning is not seen whole by a lease taken meanwhile.
        let open = a.write(|tx| gc::open_epoch(tx, 2)).expect("epoch");
        b.catch_up().expect("catch up");
        let (lease, seen) = b.write(|tx| gc::insert_lease(tx, 1, 1, 1, "snapshot")).expect("lease");
        assert_eq!(seen, closed);
        b.fence(lease, seen);
        a.write(|tx| gc::close_epoch(tx, open, 3)).expect("close");
        // A sweep up to the epoch it saw whole leaves it alone.
        a.write(|tx| gc::record_sweep(tx, closed, 4)).expect("sweep");
        record(&b, "before");
        let published = position(b.conn()).expect("position");
        a.write(|tx| gc::record_sweep(tx, open, 5)).expect("sweep");
        let refused = b
            .write(|tx| crate::manifest::audit::append(tx, &AuditRecord::ok(4, "tester", "after")))
            .expect_err("refused");
        assert_eq!(refused.kind(), ErrorKind::Conflict, "{refused}");
        assert!(refused.to_string().contains("run the operation again"), "{refused}");
        assert_eq!(store.list("log/").expect("list").len() as u64, published + 1, "nothing published");
        b.write(|tx| gc::delete_lease(tx, lease)).expect("a lease is withdrawn");
        b.unfence(lease);
        record(&b, "after");
        assert_eq!(rows(&b), rows(&replica(tmp.path(), "c.db", &store)));
    }

    #[test]
    fn replicas_writing_in_turn_and_out_of_date_end_with_the_same_rows_as_a_new_one() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        let b = replica(tmp.path(), "b.db", &store);
        record(&a, "one");
        // b has not seen segment 1: its write loses the race, catches up, and runs again.
        record(&b, "two");
        record(&a, "three");
        assert_eq!(position(a.conn()).expect("position"), 3);
        assert_eq!(b.catch_up().expect("catch up"), 1);
        // Seqs are contiguous across writers: the second ran again on the first's state.
        let seqs: Vec<i64> = a
            .conn()
            .prepare("SELECT seq FROM audit ORDER BY seq")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("seqs");
        assert_eq!(seqs, vec![1, 2, 3]);
        let c = replica(tmp.path(), "c.db", &store);
        assert!(!rows(&a).is_empty());
        assert_eq!(rows(&a), rows(&b));
        assert_eq!(rows(&a), rows(&c));
        // The audit tree was grown over the records a replay brought.
        let tree = crate::manifest::audit::tree_size(c.conn()).expect("tree");
        assert_eq!(tree, 3);
        // A write that changes no logged row writes no segment.
        a.write(|tx| tx.execute("UPDATE log_position SET seq = seq", []).map_err(db("test"))).expect("write");
        assert_eq!(store.list("log/").expect("list").len(), 3);
    }

    /// A replica far behind (more segments than several windows, ending inside one) catches up
    /// with every one, in order, as a replica that read them one by one does; a window stops
    /// at its first absent segment.
    #[test]
    fn a_replica_far_behind_catches_up_in_windows_with_every_segment_in_order() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        let b = replica(tmp.path(), "b.db", &store);
        for i in 0..(1 + 1 + 2 + 4 + 8 + 8 + 5) {
            record(&a, &format!("write {i}"));
        }
        assert_eq!(b.catch_up().expect("catch up"), 29);
        assert_eq!(position(b.conn()).expect("position"), 29);
        assert_eq!(rows(&a), rows(&b));
        let log = Log::new(store.clone() as Arc<dyn Backend>, "memory");
        let (got, end) = log.fetch_window(28, 4).expect("window");
        assert_eq!((got.len(), matches!(end, WindowEnd::Absent)), (2, true));
        record(&a, "one more");
        assert_eq!(b.catch_up().expect("catch up"), 1);
        assert_eq!(rows(&a), rows(&b));
        assert_eq!(crate::manifest::audit::tree_size(b.conn()).expect("tree"), 30);

        // A segment too big to read ahead ends its window, and is read by itself next.
        let mut big = vec![0u8; CATCH_UP_WINDOW_BYTES + 1000];
        crate::base::random::fill_random(&mut big).expect("random");
        a.write(|tx| {
            tx.execute(
                "INSERT INTO loose_objects (id, raw_len, encoded) VALUES (?1, ?2, ?3)",
                rusqlite::params![&[7u8; 32][..], big.len() as i64, big],
            )
            .map_err(db("test"))
        })
        .expect("a big write");
        for i in 0..6 {
            record(&a, &format!("after the big one {i}"));
        }
        let (got, end) = log.fetch_window(30, 3).expect("window");
        assert_eq!((got.len(), matches!(end, WindowEnd::Cut)), (1, true), "segment 31 is too big to read ahead");
        assert_eq!(b.catch_up().expect("catch up"), 7);
        assert_eq!(rows(&a), rows(&b));
    }

    /// Segment `seq`'s body as `store` holds it.
    fn body_of(store: &MemoryBackend, seq: u64) -> Vec<u8> {
        let stored = store.get_whole(&key(seq), MAX_SEGMENT).expect("segment");
        assert_eq!(&stored[..8], b"trvLOG\0\x02");
        zstd::bulk::Decompressor::with_dictionary(dictionary_1())
            .and_then(|mut d| d.decompress(&stored[HEADER..], 1 << 20))
            .expect("decompress")
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn an_update_logs_the_key_and_what_changed_and_a_change_to_nothing_logs_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        let run = |sql: &str| a.write(|tx| tx.execute(sql, []).map_err(db("test"))).expect("write");
        run("INSERT INTO sessions (id, workspace, live_dir, persistent, ttl, metadata, file_access, status, created_ns, last_activity_ns) \
             VALUES ('s1', 'ws', x'2f77', 0, 60, '{}', '{}', 'ready', 1, 1)");
        assert!(contains(&body_of(&store, 1), b"live_dir"), "an insert gives every column");
        run("UPDATE sessions SET last_activity_ns = MAX(last_activity_ns, 5) WHERE id = 's1'");
        let touch = body_of(&store, 2);
        assert!(contains(&touch, b"last_activity_ns") && contains(&touch, b"s1"), "{touch:?}");
        assert!(!contains(&touch, b"live_dir") && !contains(&touch, b"workspace"), "only what changed: {touch:?}");
        // Kept at 5 by MAX: no row changed, so no segment.
        run("UPDATE sessions SET last_activity_ns = MAX(last_activity_ns, 3) WHERE id = 's1'");
        assert_eq!(store.list("log/").expect("list").len(), 2);
        run("UPDATE sessions SET status = 'ended', ended_ns = 9, end_reason = 'idle' WHERE id = 's1'");
        let delete_from = |t: &str| format!("DELETE FROM {t}");
        run(&delete_from("sessions"));
        let gone = body_of(&store, 4);
        assert!(!contains(&gone, b"ttl") && contains(&gone, b"s1"), "a delete gives its key: {gone:?}");
        // Replayed, partial updates leave the writer's rows.
        run("INSERT INTO sessions (id, workspace, live_dir, persistent, ttl, metadata, file_access, status, created_ns, last_activity_ns) \
             VALUES ('s2', 'ws', x'2f77', 0, 60, '{}', '{}', 'ready', 1, 1)");
        run("UPDATE sessions SET last_activity_ns = 7, metadata = '{\"a\":1}' WHERE id = 's2'");
        let b = replica(tmp.path(), "b.db", &store);
        assert_eq!(rows(&a), rows(&b));
        let s2: (String, i64) = b
            .conn()
            .query_row("SELECT metadata, last_activity_ns FROM sessions WHERE id = 's2'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("s2");
        assert_eq!(s2, ("{\"a\":1}".to_string(), 7));
    }

    /// Segments in buckets are compressed with it: a change to one byte would make every one
    /// of them unreadable.
    #[test]
    fn dictionary_1_never_changes() {
        assert_eq!(
            blake3::hash(dictionary_1()).to_hex().as_str(),
            "5850011b50e5129a6f6ffd81b71e18340342ea47bfe73510a417a41917475d98"
        );
    }

    #[test]
    fn a_segment_of_format_1_without_a_dictionary_still_replays() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        record(&a, "one");
        let body = body_of(&store, 1);
        let mut v1 = b"trvLOG\0\x01".to_vec();
        v1.extend_from_slice(&1u64.to_le_bytes());
        v1.extend_from_slice(&(SCHEMA_VERSION as u32).to_le_bytes());
        v1.extend_from_slice(&0u32.to_le_bytes());
        v1.extend_from_slice(&zstd::bulk::compress(&body, 3).expect("compress"));
        let old = Arc::new(MemoryBackend::new());
        old.put(&key(1), &v1).expect("put");
        let b = replica(tmp.path(), "b.db", &old);
        assert_eq!(rows(&a), rows(&b));
        // A dictionary no trove has is damage; a newer format asks for an upgrade.
        for (version, dictionary, kind) in [(2u8, 7u32, ErrorKind::Corrupt), (5, 1, ErrorKind::InvalidArgument)] {
            let mut bad = v1.clone();
            bad[7] = version;
            bad[20..24].copy_from_slice(&dictionary.to_le_bytes());
            let other = Arc::new(MemoryBackend::new());
            other.put(&key(1), &bad).expect("put");
            let e = open_replica(&tmp.path().join(format!("v{version}.db")), Log::new(other, "memory"))
                .err()
                .expect("refused");
            assert_eq!(e.kind(), kind, "{e}");
        }
    }

    #[test]
    fn a_catch_up_that_finds_nothing_new_takes_no_write_lock() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        let b = replica(tmp.path(), "b.db", &store);
        record(&a, "one");
        assert_eq!(b.catch_up().expect("catch up"), 1);
        // Another connection of b's file holds the write lock, as a long write would: asking
        // the log, which has nothing new, does not wait for it (it would wait 10 s and fail).
        let other = rusqlite::Connection::open(tmp.path().join("b.db")).expect("open");
        other.execute_batch("BEGIN IMMEDIATE").expect("lock");
        assert_eq!(b.catch_up().expect("nothing new, no lock needed"), 0);
        other.execute_batch("ROLLBACK").expect("unlock");
        // A segment found while asking is applied from what was fetched.
        record(&a, "two");
        assert_eq!(b.catch_up().expect("catch up"), 1);
        assert_eq!(rows(&a), rows(&b));
    }

    #[test]
    fn a_failed_write_publishes_nothing_and_records_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        let e = a
            .write(|tx| {
                crate::manifest::audit::append(tx, &AuditRecord::ok(1, "tester", "doomed"))?;
                Err::<(), _>(Error::invalid_argument("no"))
            })
            .expect_err("the write fails");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(store.list("log/").expect("list").is_empty());
        record(&a, "kept");
        let c = replica(tmp.path(), "c.db", &store);
        assert_eq!(rows(&a), rows(&c));
        assert_eq!(crate::manifest::audit::size(c.conn()).expect("size"), 1);
    }

    #[test]
    fn a_damaged_segment_is_corrupt_naming_it_and_a_segment_under_another_name_is_refused() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Arc::new(MemoryBackend::new());
        let a = replica(tmp.path(), "a.db", &store);
        record(&a, "one");
        let good = store.get_range(&key(1), 0, store.size(&key(1)).expect("size")).expect("get");
        for (name, bytes) in [
            ("cut", {
                let mut cut = good[..good.len() - 3].to_vec();
                cut[8] = 2;
                cut
            }),
            ("renamed", encode(2, 18, b"\x00").expect("encode")),
            ("garbage", encode(2, 18, b"\x01\x05packs\xff").expect("encode")),
            ("foreign table", encode(2, 18, b"\x01\x0dsqlite_master\x01\x01a").expect("encode")),
        ] {
            let other = Arc::new(MemoryBackend::new());
            other.put(&key(1), if name == "renamed" { &bytes } else { &good }).expect("put");
            if name != "renamed" {
                other.put(&key(2), &bytes).expect("put");
            }
            let e = open_replica(&tmp.path().join(format!("{name}.db")), Log::new(other, "memory"))
                .err()
                .expect("a damaged log is refused");
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{name}: {e}");
            assert!(e.message().contains("log/0000000000000000000"), "{name}: {e}");
        }
    }
}
