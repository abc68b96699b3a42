//! Manifest rows of garbage collection: epochs, the leases of operations in flight, pins, the
//! marks of one collection (temporary tables of what the roots reach, and of what they do not),
//! condemnation and its reversal, and the deletion of what stayed condemned.
//!
//! The marks live in the connection's temporary database, which SQLite keeps on disk past its
//! cache: marking a million objects costs pages, not a hash map of the index in memory.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::Result;
use crate::object::pack::PackedObject;
use crate::object::ObjectId;

/// What can be condemned: the table and its key column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Packed objects (`objects.id`).
    Object = 0,
    /// Loose objects (`loose_objects.id`).
    Loose = 1,
    /// Trees (`trees.id`).
    Tree = 2,
    /// Chunk lists, by content (`chunk_lists.content`).
    ChunkList = 3,
}

impl Kind {
    /// Every kind, in the order a sweep deletes them.
    pub const ALL: [Kind; 4] = [Kind::Tree, Kind::ChunkList, Kind::Loose, Kind::Object];

    fn table(self) -> (&'static str, &'static str) {
        match self {
            Kind::Object => ("objects", "id"),
            Kind::Loose => ("loose_objects", "id"),
            Kind::Tree => ("trees", "id"),
            Kind::ChunkList => ("chunk_lists", "content"),
        }
    }
}

/// Starts a new epoch at `now_ns`, closed: all it marks is marked in this transaction.
pub fn new_epoch(conn: &Connection, now_ns: i64) -> Result<i64> {
    conn.prepare_cached("INSERT INTO gc_epochs (time_ns, closed_ns) VALUES (?1, ?1)")
        .and_then(|mut s| s.execute([now_ns]))
        .map_err(db("starting a collection epoch"))?;
    Ok(conn.last_insert_rowid())
}

/// Starts a new epoch at `now_ns` whose condemnations follow in transactions of their own
/// ([`close_epoch`] once they are all made).
pub fn open_epoch(conn: &Connection, now_ns: i64) -> Result<i64> {
    conn.prepare_cached("INSERT INTO gc_epochs (time_ns) VALUES (?1)")
        .and_then(|mut s| s.execute([now_ns]))
        .map_err(db("starting a collection epoch"))?;
    Ok(conn.last_insert_rowid())
}

/// Records that epoch `epoch` condemns nothing more.
pub fn close_epoch(conn: &Connection, epoch: i64, now_ns: i64) -> Result<()> {
    conn.prepare_cached("UPDATE gc_epochs SET closed_ns = ?2 WHERE epoch = ?1 AND closed_ns IS NULL")
        .and_then(|mut s| s.execute([epoch, now_ns]))
        .map_err(db("closing a collection epoch"))?;
    Ok(())
}

/// The newest epoch all of whose condemnations are in this state: the newest, once closed;
/// the one before while it is open. (An older epoch left open by a killed collection takes no
/// more: condemnations land only while their epoch is the newest.)
pub fn seen_epoch(conn: &Connection) -> Result<i64> {
    conn.prepare_cached(
        "SELECT COALESCE((SELECT CASE WHEN closed_ns IS NULL THEN epoch - 1 ELSE epoch END
                          FROM gc_epochs ORDER BY epoch DESC LIMIT 1), 0)",
    )
    .and_then(|mut s| s.query_row([], |r| r.get(0)))
    .map_err(db("reading the collection epoch"))
}

/// The newest epoch (0 before the first).
pub fn latest_epoch(conn: &Connection) -> Result<i64> {
    conn.prepare_cached("SELECT COALESCE(MAX(epoch), 0) FROM gc_epochs")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db("reading the collection epoch"))
}

/// The newest epoch closed (or, from before closing was recorded, begun) at or before
/// `time_ns` (0 if none): an epoch's grace runs from its last condemnation.
pub fn epoch_at(conn: &Connection, time_ns: i64) -> Result<i64> {
    conn.prepare_cached("SELECT COALESCE(MAX(epoch), 0) FROM gc_epochs WHERE COALESCE(closed_ns, time_ns) <= ?1")
        .and_then(|mut s| s.query_row([time_ns], |r| r.get(0)))
        .map_err(db("reading the collection epochs"))
}

/// One operation in flight.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    /// The row's id.
    pub id: i64,
    /// The process holding it.
    pub pid: u32,
    /// That process's start time, telling it from a later process with the same id.
    pub pid_start: u64,
    /// The newest epoch when it began: what was condemned up to this epoch it saw as absent.
    pub epoch: i64,
    /// When it began.
    pub started_ns: i64,
    /// What it is (`snapshot`, `tool`, `restore`...).
    pub what: String,
}

/// Records an operation in flight, with the newest epoch now (read in this write transaction,
/// so it orders against condemnations by commit); returns the lease's id and the newest epoch
/// whose condemnations it sees whole ([`seen_epoch`]), for a fence (`Manifest::fence`).
pub fn insert_lease(conn: &Connection, pid: u32, pid_start: u64, started_ns: i64, what: &str) -> Result<(i64, i64)> {
    let epoch = latest_epoch(conn)?;
    let seen = seen_epoch(conn)?;
    conn.prepare_cached("INSERT INTO gc_leases (pid, pid_start, epoch, started_ns, what) VALUES (?1, ?2, ?3, ?4, ?5)")
        .and_then(|mut s| s.execute(params![pid, pid_start as i64, epoch, started_ns, what]))
        .map_err(db("recording an operation in flight"))?;
    Ok((conn.last_insert_rowid(), seen))
}

/// How long a collection in a bucket that has not ended keeps others from starting: one killed
/// stops holding them back after this (by the store's clock).
pub const RUN_STALE_NS: i64 = 6 * 3600 * 1_000_000_000;

/// Begins a collection by `host` at `now_ns` in a bucket, unless another began less than
/// [`RUN_STALE_NS`] ago and has not ended: returns the run's id, or the other's host and start.
pub fn begin_run(conn: &Connection, host: &str, now_ns: i64) -> Result<std::result::Result<i64, (String, i64)>> {
    let running = conn
        .prepare_cached(
            "SELECT host, started_ns FROM gc_runs WHERE ended_ns IS NULL AND started_ns > ?1 ORDER BY id DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row([now_ns.saturating_sub(RUN_STALE_NS)], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db("reading the collections running"))?;
    if let Some(other) = running {
        return Ok(Err(other));
    }
    conn.prepare_cached("INSERT INTO gc_runs (host, started_ns) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![host, now_ns]))
        .map_err(db("recording a collection"))?;
    Ok(Ok(conn.last_insert_rowid()))
}

/// Ends collection run `id` at `now_ns`.
pub fn end_run(conn: &Connection, id: i64, now_ns: i64) -> Result<()> {
    conn.prepare_cached("UPDATE gc_runs SET ended_ns = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute([id, now_ns]))
        .map_err(db("recording a collection's end"))?;
    Ok(())
}

/// Closes at `now_ns` every epoch still open: at a collection's start, the one a stopped
/// collection left open (no other is condemning then), so leases see it whole again.
pub fn close_open_epochs(conn: &Connection, now_ns: i64) -> Result<()> {
    conn.prepare_cached("UPDATE gc_epochs SET closed_ns = ?1 WHERE closed_ns IS NULL")
        .and_then(|mut s| s.execute([now_ns]))
        .map_err(db("closing a stopped collection's epoch"))?;
    Ok(())
}

/// Records that a collection is about to delete what epochs up to `horizon` condemned (in a
/// bucket, before it marks: see `Manifest::fence`).
pub fn record_sweep(conn: &Connection, horizon: i64, time_ns: i64) -> Result<()> {
    conn.prepare_cached("INSERT INTO gc_sweeps (horizon, time_ns) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute([horizon, time_ns]))
        .map_err(db("recording a collection's sweep"))?;
    Ok(())
}

/// The highest horizon a collection recorded a sweep up to (0 for none).
pub fn swept_horizon(conn: &Connection) -> Result<i64> {
    conn.prepare_cached("SELECT COALESCE(MAX(horizon), 0) FROM gc_sweeps")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db("reading the collections' sweeps"))
}

/// Removes a lease (its operation ended).
pub fn delete_lease(conn: &Connection, id: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM gc_leases WHERE id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(db("ending an operation in flight"))?;
    Ok(())
}

/// Every lease.
pub fn leases(conn: &Connection) -> Result<Vec<LeaseRow>> {
    let mut stmt = conn
        .prepare_cached("SELECT id, pid, pid_start, epoch, started_ns, what FROM gc_leases ORDER BY id")
        .map_err(db("reading the operations in flight"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(LeaseRow {
                id: r.get(0)?,
                pid: r.get(1)?,
                pid_start: r.get::<_, i64>(2)? as u64,
                epoch: r.get(3)?,
                started_ns: r.get(4)?,
                what: r.get(5)?,
            })
        })
        .map_err(db("reading the operations in flight"))?;
    rows.map(|r| r.map_err(db("reading the operations in flight"))).collect()
}

/// Pins snapshot `snapshot`; true if it was not pinned.
pub fn pin(conn: &Connection, snapshot: &str, now_ns: i64, by: &str) -> Result<bool> {
    let n = conn
        .execute(
            "INSERT OR IGNORE INTO pins (snapshot, pinned_ns, pinned_by) VALUES (?1, ?2, ?3)",
            params![snapshot, now_ns, by],
        )
        .map_err(db("pinning a snapshot"))?;
    Ok(n == 1)
}

/// Unpins snapshot `snapshot`; true if it was pinned.
pub fn unpin(conn: &Connection, snapshot: &str) -> Result<bool> {
    let n = conn.execute("DELETE FROM pins WHERE snapshot = ?1", [snapshot]).map_err(db("unpinning a snapshot"))?;
    Ok(n == 1)
}

/// Whether snapshot `snapshot` is pinned.
pub fn is_pinned(conn: &Connection, snapshot: &str) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM pins WHERE snapshot = ?1")
        .and_then(|mut s| s.query_row([snapshot], |_| Ok(())).optional())
        .map(|r| r.is_some())
        .map_err(db("reading pins"))
}

/// Creates (or empties) this connection's mark tables: live trees, live file contents, live
/// objects, and the dead of each kind.
pub fn reset_marks(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS gc_trees (id BLOB PRIMARY KEY) WITHOUT ROWID;
         CREATE TEMP TABLE IF NOT EXISTS gc_contents (id BLOB PRIMARY KEY) WITHOUT ROWID;
         CREATE TEMP TABLE IF NOT EXISTS gc_live (id BLOB PRIMARY KEY) WITHOUT ROWID;
         CREATE TEMP TABLE IF NOT EXISTS gc_dead (kind INTEGER NOT NULL, id BLOB NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID;
         DELETE FROM temp.gc_trees; DELETE FROM temp.gc_contents; DELETE FROM temp.gc_live; DELETE FROM temp.gc_dead;",
    )
    .map_err(db("preparing the collection's marks"))
}

/// Marks tree `id` live; true if it was not marked yet (its entries are then to be visited).
pub fn mark_tree(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let n = conn
        .prepare_cached("INSERT OR IGNORE INTO temp.gc_trees (id) VALUES (?1)")
        .and_then(|mut s| s.execute([&id.as_bytes()[..]]))
        .map_err(db("marking a tree"))?;
    Ok(n == 1)
}

/// Marks file content `id` live (its object, or its chunk list and chunks).
pub fn mark_content(conn: &Connection, id: &ObjectId) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO temp.gc_contents (id) VALUES (?1)")
        .and_then(|mut s| s.execute([&id.as_bytes()[..]]))
        .map_err(db("marking a content"))?;
    Ok(())
}

/// Every object the marked contents need (a content's own object, or its chunks, and the bases
/// of those stored as deltas), then every row of each kind the marks do not reach, as the dead
/// of this collection.
pub fn collect_dead(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "INSERT OR IGNORE INTO temp.gc_live SELECT id FROM temp.gc_contents;
         INSERT OR IGNORE INTO temp.gc_live
             SELECT c.chunk FROM temp.gc_contents m JOIN chunk_lists c ON c.content = m.id;
         -- Every base a live delta is stored against, down each chain (UNION stops at a cycle).
         WITH RECURSIVE bases(id) AS (
             SELECT b.base FROM temp.gc_live l JOIN object_bases b ON b.id = l.id
             UNION
             SELECT b.base FROM bases c JOIN object_bases b ON b.id = c.id)
         INSERT OR IGNORE INTO temp.gc_live SELECT id FROM bases;
         INSERT INTO temp.gc_dead SELECT 0, id FROM objects WHERE id NOT IN (SELECT id FROM temp.gc_live);
         INSERT INTO temp.gc_dead SELECT 1, id FROM loose_objects WHERE id NOT IN (SELECT id FROM temp.gc_live);
         INSERT INTO temp.gc_dead SELECT 2, id FROM trees WHERE id NOT IN (SELECT id FROM temp.gc_trees);
         INSERT OR IGNORE INTO temp.gc_dead
             SELECT 3, content FROM chunk_lists WHERE content NOT IN (SELECT id FROM temp.gc_contents);",
    )
    .map_err(db("finding what no root reaches"))
}

/// How many rows of `kind` this collection found dead, and of those how many are condemned
/// already (by an earlier collection).
///
/// The condemned are found through the table's partial index on `condemned`, never by
/// reading rows: in `loose_objects` and `trees` the column comes after the stored bytes, and
/// reading it from the row walks the blob's overflow pages (over 3 GB for a soak's manifest).
pub fn dead_count(conn: &Connection, kind: Kind) -> Result<(u64, u64)> {
    let (table, key) = kind.table();
    let sql = format!(
        "SELECT (SELECT COUNT(*) FROM temp.gc_dead WHERE kind = ?1),
                (SELECT COUNT(*) FROM (SELECT DISTINCT {key} AS k FROM {table} INDEXED BY {table}_condemned
                                       WHERE condemned IS NOT NULL) c
                 WHERE EXISTS (SELECT 1 FROM temp.gc_dead d WHERE d.kind = ?1 AND d.id = c.k))"
    );
    conn.query_row(&sql, [kind as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)))
        .map_err(db("counting what no root reaches"))
}

/// How many rows of `kind` are condemned now.
pub fn condemned_count(conn: &Connection, kind: Kind) -> Result<u64> {
    let (table, key) = kind.table();
    conn.query_row(&format!("SELECT COUNT(DISTINCT {key}) FROM {table} WHERE condemned IS NOT NULL"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as u64)
    .map_err(db("counting condemned rows"))
}

/// The most stored bytes (loose objects' or trees' own) one batch of condemnations or
/// deletions touches: SQLite rewrites a whole row to change its mark and reads a deleted row's
/// overflow pages to free them, all inside the batch's write transaction, which every other
/// writer waits for. 4,096 loose objects of a few MiB each held it for minutes.
pub const BATCH_BYTES: u64 = 32 << 20;

/// Up to `limit` dead keys of `kind` after `after`, in key order, and no more than
/// [`BATCH_BYTES`] of stored bytes (at least one key): a batch to condemn or delete.
pub fn dead_batch(conn: &Connection, kind: Kind, after: &[u8], limit: usize) -> Result<Vec<Vec<u8>>> {
    // `LENGTH` of a blob is read from the row's header, not its overflow pages.
    let sql = match kind {
        Kind::Loose => {
            "SELECT d.id, COALESCE(LENGTH(t.encoded), 0) FROM temp.gc_dead d LEFT JOIN loose_objects t ON t.id = d.id
             WHERE d.kind = ?1 AND d.id > ?2 ORDER BY d.id LIMIT ?3"
        }
        Kind::Tree => {
            "SELECT d.id, COALESCE(LENGTH(t.data), 0) FROM temp.gc_dead d LEFT JOIN trees t ON t.id = d.id
             WHERE d.kind = ?1 AND d.id > ?2 ORDER BY d.id LIMIT ?3"
        }
        Kind::Object | Kind::ChunkList => {
            "SELECT id, 0 FROM temp.gc_dead WHERE kind = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
        }
    };
    let mut stmt = conn.prepare_cached(sql).map_err(db("reading what no root reaches"))?;
    let rows = stmt
        .query_map(params![kind as i64, after, limit as i64], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)))
        .map_err(db("reading what no root reaches"))?;
    let (mut keys, mut bytes) = (Vec::new(), 0u64);
    for row in rows {
        let (key, len) = row.map_err(db("reading what no root reaches"))?;
        bytes = bytes.saturating_add(len.max(0) as u64);
        if bytes > BATCH_BYTES && !keys.is_empty() {
            break;
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Condemns the rows of `kind` with these keys in `epoch` (those not condemned already).
pub fn condemn(conn: &Connection, kind: Kind, keys: &[Vec<u8>], epoch: i64) -> Result<u64> {
    let (table, key) = kind.table();
    let mut stmt = conn
        .prepare_cached(&format!("UPDATE {table} SET condemned = ?1 WHERE {key} = ?2 AND condemned IS NULL"))
        .map_err(db("condemning"))?;
    let mut n = 0;
    for k in keys {
        n += stmt.execute(params![epoch, k]).map_err(db("condemning"))? as u64;
    }
    Ok(n)
}

/// Clears the condemnation of every condemned row of `kind` the marks reach again. The
/// condemned are read from the partial index (see [`dead_count`]): looking each mark up in
/// the table and reading its `condemned` walked every live loose object's bytes inside this
/// write transaction, holding every other writer off for minutes.
pub fn resurrect(conn: &Connection, kind: Kind) -> Result<u64> {
    let (table, key) = kind.table();
    let marks = match kind {
        Kind::Object | Kind::Loose => "gc_live",
        Kind::Tree => "gc_trees",
        Kind::ChunkList => "gc_contents",
    };
    let n = conn
        .execute(
            &format!(
                "UPDATE {table} SET condemned = NULL
                 WHERE {key} IN (SELECT c.{key} FROM {table} AS c INDEXED BY {table}_condemned
                                 WHERE c.condemned IS NOT NULL AND c.{key} IN (SELECT id FROM temp.{marks}))
                   AND condemned IS NOT NULL"
            ),
            [],
        )
        .map_err(db("clearing condemnations"))?;
    Ok(n as u64)
}

/// Deletes the rows of `kind` with these keys that are condemned in `horizon` or before;
/// returns how many went and the bytes of loose objects among them. A content whose object or
/// chunk list goes loses its search index document too.
pub fn sweep(conn: &Connection, kind: Kind, keys: &[Vec<u8>], horizon: i64) -> Result<(u64, u64)> {
    let (table, key) = kind.table();
    // What a deleted row leaves: a loose object's bytes; a bundle member's place and length.
    let what = match kind {
        Kind::Loose => "COALESCE(SUM(LENGTH(encoded)), 0), NULL, NULL, NULL",
        Kind::Object => "0, pack, offset, CASE WHEN inner_offset IS NOT NULL THEN raw_len END",
        Kind::Tree | Kind::ChunkList => "0, NULL, NULL, NULL",
    };
    let mut measure = conn
        .prepare_cached(&format!(
            "SELECT COUNT(*), {what} FROM {table} WHERE {key} = ?1 AND condemned IS NOT NULL AND condemned <= ?2"
        ))
        .map_err(db("collecting"))?;
    let mut delete = conn
        .prepare_cached(&format!("DELETE FROM {table} WHERE {key} = ?1 AND condemned IS NOT NULL AND condemned <= ?2"))
        .map_err(db("collecting"))?;
    let mut undoc = conn.prepare_cached("DELETE FROM search_docs WHERE id = ?1").map_err(db("collecting"))?;
    // A delta's row in `object_bases` goes with it: deltas are only ever loose, and a loose
    // object is its id's one delta copy (a packed copy is always whole).
    let mut unbase = conn.prepare_cached("DELETE FROM object_bases WHERE id = ?1").map_err(db("collecting"))?;
    // A bundle member's bytes stay in its bundle: counted as dead there (`bundle_dead`), so the
    // pack's dead share sees them and a rewrite drops them. Summed per bundle over the batch
    // first: members of one bundle tend to die together, and one row write per bundle is what
    // keeps a sweep of a million objects as fast as it was.
    let mut dead: std::collections::BTreeMap<(i64, i64), i64> = Default::default();
    let (mut rows, mut bytes) = (0u64, 0u64);
    for k in keys {
        type Measured = (i64, i64, Option<i64>, Option<i64>, Option<i64>);
        let (n, b, pack, offset, member): Measured = measure
            .query_row(params![k, horizon], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .map_err(db("collecting"))?;
        if n == 0 {
            continue;
        }
        if let (Some(pack), Some(offset), Some(len)) = (pack, offset, member) {
            *dead.entry((pack, offset)).or_default() += len;
        }
        delete.execute(params![k, horizon]).map_err(db("collecting"))?;
        if kind == Kind::Loose {
            unbase.execute([k]).map_err(db("collecting"))?;
        }
        if kind != Kind::Tree {
            undoc.execute([k]).map_err(db("collecting"))?;
        }
        rows += 1;
        bytes += b as u64;
    }
    let mut note_dead = conn
        .prepare_cached(
            "INSERT INTO bundle_dead (pack, offset, dead_raw) VALUES (?1, ?2, ?3)
             ON CONFLICT (pack, offset) DO UPDATE SET dead_raw = dead_raw + excluded.dead_raw",
        )
        .map_err(db("collecting"))?;
    for ((pack, offset), len) in dead {
        note_dead.execute(params![pack, offset, len]).map_err(db("collecting"))?;
    }
    Ok((rows, bytes))
}

/// Gives free pages of the manifest back to the file system, `step` pages a transaction,
/// when it was made with incremental auto-vacuum; returns the bytes given back. A manifest
/// without it keeps its free pages for later rows (`full` rewrites it once, with it, blocking
/// writers while it runs).
pub fn shrink(conn: &Connection, step: u32, full: bool) -> Result<u64> {
    let pragma = |p: &str| {
        conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0)).map_err(db("shrinking the manifest"))
    };
    let page = pragma("page_size")?.max(0) as u64;
    let before = pragma("page_count")?.max(0) as u64;
    if full {
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;").map_err(db("vacuuming the manifest"))?;
    } else if pragma("auto_vacuum")? == 2 {
        while pragma("freelist_count")? > 0 {
            conn.execute_batch(&format!("PRAGMA incremental_vacuum({step});")).map_err(db("shrinking the manifest"))?;
        }
    }
    Ok(before.saturating_sub(pragma("page_count")?.max(0) as u64) * page)
}

/// One pack and the bytes of the blobs its index rows still point into.
#[derive(Debug, Clone)]
pub struct PackUse {
    /// The pack's row id.
    pub id: i64,
    /// Its backend key.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Bytes of blobs some index row points into; of a bundle with dead members, the share of
    /// its stored bytes its live members' raw bytes make of the live and dead ones' (at least
    /// one byte: live empty files keep their pack in use, so it must stay a candidate).
    pub live: u64,
    /// The level a recompression encoded it at (`packs.level`); None: the repository's.
    pub level: Option<i32>,
}

/// Every pack not yet retired, with its live bytes.
pub fn pack_use(conn: &Connection) -> Result<Vec<PackUse>> {
    let mut stmt = conn
        .prepare(
            "SELECT p.id, p.name, p.size, COALESCE(SUM(b.live), 0), p.level FROM packs p
             LEFT JOIN (
                 SELECT o.pack AS pack, CASE WHEN d.dead_raw > 0
                     THEN MAX(1, CAST(o.stored * (o.raw * 1.0 / (o.raw + d.dead_raw)) AS INTEGER))
                     ELSE o.stored END AS live
                 FROM (SELECT pack, offset, MAX(stored_len) AS stored, SUM(raw_len) AS raw FROM objects
                       GROUP BY pack, offset) o
                 LEFT JOIN bundle_dead d ON d.pack = o.pack AND d.offset = o.offset
             ) b ON b.pack = p.id
             WHERE p.retired IS NULL GROUP BY p.id ORDER BY p.id",
        )
        .map_err(db("measuring packs"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(PackUse {
                id: r.get(0)?,
                name: r.get(1)?,
                size: r.get::<_, i64>(2)? as u64,
                live: r.get::<_, i64>(3)? as u64,
                level: r.get(4)?,
            })
        })
        .map_err(db("measuring packs"))?;
    rows.map(|r| r.map_err(db("measuring packs"))).collect()
}

/// One blob of a pack and the objects in it: (offset, stored length, [(id, raw length, offset
/// inside a bundle)]).
pub type Blob = (u64, u64, Vec<(ObjectId, u64, Option<u64>)>);

/// The blobs index rows point into in each of `packs`, in offset order, by pack: one scan of
/// the index for all of them (there is no index by pack: it would cost a third of the objects
/// table for what only a collection reads).
pub fn pack_blobs(conn: &Connection, packs: &[i64]) -> Result<std::collections::BTreeMap<i64, Vec<Blob>>> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS gc_repack (pack INTEGER PRIMARY KEY); DELETE FROM temp.gc_repack;",
    )
    .map_err(db("listing packs' objects"))?;
    for p in packs {
        conn.execute("INSERT OR IGNORE INTO temp.gc_repack (pack) VALUES (?1)", [p])
            .map_err(db("listing packs' objects"))?;
    }
    let mut stmt = conn
        .prepare(
            "SELECT pack, offset, stored_len, id, raw_len, inner_offset FROM objects
             WHERE pack IN (SELECT pack FROM temp.gc_repack) ORDER BY pack, offset, id",
        )
        .map_err(db("listing packs' objects"))?;
    let mut rows = stmt.query([]).map_err(db("listing packs' objects"))?;
    let mut out: std::collections::BTreeMap<i64, Vec<Blob>> = Default::default();
    while let Some(r) = rows.next().map_err(db("listing packs' objects"))? {
        let get = db("listing packs' objects");
        let pack: i64 = r.get(0).map_err(&get)?;
        let offset = r.get::<_, i64>(1).map_err(&get)? as u64;
        let stored = r.get::<_, i64>(2).map_err(&get)? as u64;
        let id = ObjectId::from_slice(&r.get::<_, Vec<u8>>(3).map_err(&get)?)?;
        let raw_len = r.get::<_, i64>(4).map_err(&get)? as u64;
        let inner = r.get::<_, Option<i64>>(5).map_err(&get)?.map(|i| i as u64);
        let blobs = out.entry(pack).or_default();
        match blobs.last_mut() {
            Some(last) if last.0 == offset => last.2.push((id, raw_len, inner)),
            _ => blobs.push((offset, stored, vec![(id, raw_len, inner)])),
        }
    }
    Ok(out)
}

/// Points the rows of a rebuilt bundle's members, those still in the blob at (`old_pack`,
/// `old_offset`), at their places in pack `pack` (`objects`, as the pack writer recorded them:
/// each member's offset in the new bundle, or none for one stored alone), and forgets the old
/// blob's dead count (the new bundle has none).
pub fn move_members<'a>(
    conn: &Connection,
    old_pack: i64,
    old_offset: u64,
    pack: i64,
    objects: impl IntoIterator<Item = &'a PackedObject>,
) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE objects SET pack = ?1, offset = ?2, stored_len = ?3, inner_offset = ?4
             WHERE id = ?5 AND pack = ?6 AND offset = ?7",
        )
        .map_err(db("moving objects to a new pack"))?;
    for o in objects {
        stmt.execute(params![
            pack,
            o.offset as i64,
            o.stored_len as i64,
            o.inner_offset.map(|i| i as i64),
            &o.id.as_bytes()[..],
            old_pack,
            old_offset as i64
        ])
        .map_err(db("moving objects to a new pack"))?;
    }
    forget_dead(conn, old_pack, old_offset)
}

/// Forgets the dead count of the blob at (`pack`, `offset`): it was copied or rebuilt.
fn forget_dead(conn: &Connection, pack: i64, offset: u64) -> Result<()> {
    conn.prepare_cached("DELETE FROM bundle_dead WHERE pack = ?1 AND offset = ?2")
        .and_then(|mut s| s.execute(params![pack, offset as i64]))
        .map_err(db("moving objects to a new pack"))?;
    Ok(())
}

/// The packs some index row points into.
pub fn packs_in_use(conn: &Connection) -> Result<std::collections::BTreeSet<i64>> {
    let mut stmt = conn.prepare("SELECT DISTINCT pack FROM objects").map_err(db("listing packs in use"))?;
    let rows = stmt.query_map([], |r| r.get::<_, i64>(0)).map_err(db("listing packs in use"))?;
    rows.map(|r| r.map_err(db("listing packs in use"))).collect()
}

/// Points the objects of the blob at `old_offset` of pack `old` at its copy, `stored_len` bytes
/// at `new_offset` of pack `new` (those still there: a writer may have stored its own copy
/// meanwhile). A recompressed copy is shorter; a verbatim one is as long.
pub fn move_blob(
    conn: &Connection,
    old: i64,
    old_offset: u64,
    new: i64,
    new_offset: u64,
    stored_len: u64,
) -> Result<()> {
    conn.prepare_cached("UPDATE objects SET pack = ?1, offset = ?2, stored_len = ?3 WHERE pack = ?4 AND offset = ?5")
        .and_then(|mut s| s.execute(params![new, new_offset as i64, stored_len as i64, old, old_offset as i64]))
        .map_err(db("moving objects to a new pack"))?;
    // A blob copied whole has no dead members (or they were not known); a count left here would
    // make its pack look sparse, and be rewritten, in every collection.
    forget_dead(conn, old, old_offset)
}

/// Retires pack `pack` in `epoch`: the caller found, in this transaction, that no index row
/// points into it (`packs_in_use`).
pub fn retire_pack(conn: &Connection, pack: i64, epoch: i64) -> Result<()> {
    conn.execute("UPDATE packs SET retired = ?1 WHERE id = ?2 AND retired IS NULL", params![epoch, pack])
        .map_err(db("retiring a pack"))?;
    // Nothing points into it: what its bundles held dead no longer matters (and a snapshot
    // writing the same bytes again, which takes the row back, indexes every member).
    conn.execute("DELETE FROM bundle_dead WHERE pack = ?1", [pack]).map_err(db("retiring a pack"))?;
    Ok(())
}

/// Retired packs: (row id, key, size, epoch retired).
pub fn retired_packs(conn: &Connection) -> Result<Vec<(i64, String, u64, i64)>> {
    let mut stmt = conn
        .prepare("SELECT id, name, size, retired FROM packs WHERE retired IS NOT NULL ORDER BY id")
        .map_err(db("listing retired packs"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get(3)?)))
        .map_err(db("listing retired packs"))?;
    rows.map(|r| r.map_err(db("listing retired packs"))).collect()
}

/// Forgets retired pack `pack` (its file goes next).
pub fn delete_pack(conn: &Connection, pack: i64) -> Result<bool> {
    let n = conn
        .execute("DELETE FROM packs WHERE id = ?1 AND retired IS NOT NULL", [pack])
        .map_err(db("deleting a pack"))?;
    Ok(n == 1)
}

/// Every pack key the index knows, retired ones included.
pub fn pack_names(conn: &Connection) -> Result<std::collections::BTreeSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM packs").map_err(db("listing packs"))?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(db("listing packs"))?;
    rows.map(|r| r.map_err(db("listing packs"))).collect()
}

/// Whether the index knows pack `name`, retired or not.
pub fn pack_known(conn: &Connection, name: &str) -> Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM packs WHERE name = ?1)", [name], |r| r.get(0))
        .map_err(db("looking up a pack"))
}

/// The orphan pack files seen before, with the epoch each was first seen in.
pub fn orphans(conn: &Connection) -> Result<Vec<(String, i64)>> {
    let mut stmt = conn.prepare("SELECT name, epoch FROM gc_orphans ORDER BY name").map_err(db("listing orphans"))?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(db("listing orphans"))?;
    rows.map(|r| r.map_err(db("listing orphans"))).collect()
}

/// Records an orphan pack file first seen in `epoch` (a row kept from before stays).
pub fn note_orphan(conn: &Connection, name: &str, epoch: i64) -> Result<()> {
    conn.execute("INSERT OR IGNORE INTO gc_orphans (name, epoch) VALUES (?1, ?2)", params![name, epoch])
        .map_err(db("recording an orphan pack"))?;
    Ok(())
}

/// Forgets an orphan record (its file is gone, or the index knows it now).
pub fn forget_orphan(conn: &Connection, name: &str) -> Result<()> {
    conn.execute("DELETE FROM gc_orphans WHERE name = ?1", [name]).map_err(db("forgetting an orphan pack"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{loose, Manifest};

    /// A manifest (in memory, under `name`) holding `n` loose objects of `size` incompressible
    /// bytes, their ids in order.
    fn with_loose(name: &str, n: u64, size: usize) -> (Manifest, Vec<ObjectId>) {
        let m = Manifest::create_in_memory(name).expect("manifest");
        let mut ids: Vec<ObjectId> = (0..n)
            .map(|i| {
                let raw = crate::fs::sample::Rng::new(i).bytes(size);
                let id = ObjectId::of(&raw);
                loose::insert(m.conn(), &id, &raw, 1).expect("insert");
                id
            })
            .collect();
        ids.sort();
        (m, ids)
    }

    #[test]
    fn a_batch_holds_at_most_its_bytes_of_loose_objects_and_at_least_one() {
        let (m, ids) = with_loose("gc-batch-bytes", 12, 3 << 20);
        let conn = m.conn();
        reset_marks(conn).expect("reset");
        collect_dead(conn).expect("dead");
        let mut after = Vec::new();
        let mut seen = Vec::new();
        loop {
            let keys = dead_batch(conn, Kind::Loose, &after, 4096).expect("batch");
            let Some(last) = keys.last().cloned() else { break };
            assert!(keys.len() * (3 << 20) <= BATCH_BYTES as usize, "{} keys of 3 MiB in one batch", keys.len());
            seen.extend(keys);
            after = last;
        }
        let ids: Vec<Vec<u8>> = ids.iter().map(|id| id.as_bytes().to_vec()).collect();
        assert_eq!(seen, ids, "every dead object, each once, in key order");

        // One object bigger than the bound is a batch of its own.
        let (m, ids) = with_loose("gc-batch-one", 2, BATCH_BYTES as usize + 1);
        reset_marks(m.conn()).expect("reset");
        collect_dead(m.conn()).expect("dead");
        let keys = dead_batch(m.conn(), Kind::Loose, &[], 4096).expect("batch");
        assert_eq!(keys, vec![ids[0].as_bytes().to_vec()]);
    }

    #[test]
    fn condemned_rows_reached_again_are_cleared_and_counted_through_the_index() {
        let (m, ids) = with_loose("gc-resurrect", 4, 1000);
        let conn = m.conn();
        let epoch = new_epoch(conn, 1).expect("epoch");
        let all: Vec<Vec<u8>> = ids.iter().map(|id| id.as_bytes().to_vec()).collect();
        assert_eq!(condemn(conn, Kind::Loose, &all[..3], epoch).expect("condemn"), 3);
        // Now only the first is unreached: of the dead, one is condemned; two come back.
        reset_marks(conn).expect("reset");
        for id in &ids[1..] {
            mark_content(conn, id).expect("mark");
        }
        collect_dead(conn).expect("dead");
        assert_eq!(dead_count(conn, Kind::Loose).expect("count"), (1, 1));
        assert_eq!(resurrect(conn, Kind::Loose).expect("resurrect"), 2);
        assert_eq!(condemned_count(conn, Kind::Loose).expect("condemned"), 1);
        assert_eq!(resurrect(conn, Kind::Loose).expect("again"), 0, "nothing left to clear");
    }
}
