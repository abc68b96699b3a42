//! Manifest rows of the audit log: records appended with the next contiguous sequence number
//! and a time that never goes backwards, the hashes of the log's perfect Merkle subtrees kept
//! as records are appended, the signed checkpoints, and the queries operators run.

use rusqlite::types::Value as V;
use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::model::audit::{AuditQuery, AuditRecord, Checkpointed, FullRecord, Order};
use crate::object::Sha256;
use crate::tlog::merkle::{self, Hash, Nodes};
use crate::tlog::tiles::MAX_ENTRY;

/// The perfect subtrees of the log's Merkle tree as the manifest holds them.
pub struct StoredNodes<'c>(pub &'c Connection);

impl Nodes for StoredNodes<'_> {
    fn node(&self, level: u32, index: u64) -> Result<Hash> {
        let hash: Option<Vec<u8>> = self
            .0
            .prepare_cached("SELECT hash FROM audit_tree WHERE level = ?1 AND idx = ?2")
            .and_then(|mut st| st.query_row(params![level, index as i64], |r| r.get(0)).optional())
            .map_err(db("reading the audit log's tree"))?;
        let hash = hash.ok_or_else(|| {
            Error::corrupt(format!("the audit log's tree lacks subtree ({level}, {index}): run `trove audit verify`"))
        })?;
        hash.try_into().map_err(|_| Error::corrupt(format!("the audit log's subtree ({level}, {index}) is not a hash")))
    }
}

/// How many records the stored tree covers.
pub fn tree_size(conn: &Connection) -> Result<u64> {
    let last: Option<i64> = conn
        .prepare_cached("SELECT MAX(idx) FROM audit_tree WHERE level = 0")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .map_err(db("reading the audit log's tree"))?;
    Ok(last.map_or(0, |i| i as u64 + 1))
}

/// The last record's seq and time, if there is one.
fn last(conn: &Connection) -> Result<Option<(i64, i64)>> {
    conn.prepare_cached("SELECT seq, time_ns FROM audit ORDER BY seq DESC LIMIT 1")
        .and_then(|mut st| st.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db("appending to the audit log"))
}

/// Inserts the leaf of record `seq` (encoded as `encoded`) and every subtree it completes.
fn add_leaf(conn: &Connection, seq: i64, encoded: &[u8]) -> Result<()> {
    let index = (seq - 1) as u64;
    let mut hash = merkle::leaf_hash(encoded);
    let mut st = conn
        .prepare_cached("INSERT INTO audit_tree (level, idx, hash) VALUES (?1, ?2, ?3)")
        .map_err(db("growing the audit log's tree"))?;
    st.execute(params![0, index as i64, &hash[..]]).map_err(db("growing the audit log's tree"))?;
    let (mut level, mut i) = (0u32, index);
    // A right child completes its parent: climb while the node is one.
    while i & 1 == 1 {
        let left = StoredNodes(conn).node(level, i - 1)?;
        hash = merkle::node_hash(&left, &hash);
        level += 1;
        i >>= 1;
        st.execute(params![level, i as i64, &hash[..]]).map_err(db("growing the audit log's tree"))?;
    }
    Ok(())
}

/// Computes the tree of records the stored tree does not cover yet (a log from before schema
/// 6); returns how many it added.
pub fn catch_up_tree(conn: &Connection) -> Result<u64> {
    let from = tree_size(conn)?;
    let sql = format!("{}, encoded FROM audit WHERE seq > ?1 ORDER BY seq", FULL.trim_end_matches(" FROM audit"));
    let mut st = conn.prepare(&sql).map_err(db("growing the audit log's tree"))?;
    let mut rows = st.query([from as i64]).map_err(db("growing the audit log's tree"))?;
    let mut added = 0;
    while let Some(r) = rows.next().map_err(db("growing the audit log's tree"))? {
        let seq: i64 = r.get(0).map_err(db("reading the audit log"))?;
        if seq as u64 != from + added + 1 {
            return Err(Error::corrupt(format!("audit record {} follows {}: the log has a gap", seq, from + added)));
        }
        let mut encoded: Vec<u8> = r.get(14).map_err(db("reading the audit log"))?;
        // Only the records stored once (schema 17) are read whole, from the same row, to be
        // encoded again; an older row's stored encoding is its leaf as it stands.
        if encoded.is_empty() {
            let full = finish_row(full_row(r).map_err(db("reading the audit log"))?)?;
            encoded = full.record.encode(seq);
        }
        add_leaf(conn, seq, &encoded)?;
        added += 1;
    }
    Ok(added)
}

/// Appends `record` in the caller's transaction and returns its sequence number.
///
/// Inside the caller's write transaction no other writer can interleave, so MAX + 1 keeps the
/// sequence contiguous (a trigger refuses anything else). A time before the last record's
/// (the clock stepped back) is recorded as the last record's time, with the step in
/// `details.clockStepBackNs`: times never go backwards, and the step is not hidden.
pub fn append(conn: &Connection, record: &AuditRecord) -> Result<i64> {
    Ok(append_all(conn, std::slice::from_ref(record))?.first().copied().unwrap_or(0))
}

/// Appends `records` in order in the caller's transaction, as [`append`] one by one would, and
/// returns their sequence numbers; the log's last seq, time and tree frontier are read once.
pub fn append_all(conn: &Connection, records: &[AuditRecord]) -> Result<Vec<i64>> {
    let (mut seq, mut last_time) = match last(conn)? {
        Some((s, t)) => (s, t),
        None => (0, i64::MIN),
    };
    if tree_size(conn)? != seq.max(0) as u64 {
        catch_up_tree(conn)?;
    }
    let mut frontier = merkle::Frontier::of(&StoredNodes(conn), seq.max(0) as u64)?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO audit (seq, time_ns, actor, operation, workspace, session, path, dest_path,
                                before_sha256, after_sha256, before_object, after_object, outcome, details, encoded)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .map_err(db("appending to the audit log"))?;
    let mut node = conn
        .prepare_cached("INSERT INTO audit_tree (level, idx, hash) VALUES (?1, ?2, ?3)")
        .map_err(db("growing the audit log's tree"))?;
    let mut seqs = Vec::with_capacity(records.len());
    for record in records {
        seq += 1;
        let stepped;
        let record = if record.time_ns < last_time {
            let mut r = record.clone();
            r.time_ns = last_time;
            if let Some(d) = r.details.as_object_mut() {
                d.insert("clockStepBackNs".into(), (last_time - record.time_ns).into());
            }
            stepped = r;
            &stepped
        } else {
            record
        };
        last_time = record.time_ns;
        // Schema 17: the row keeps an empty encoding, which readers compute from its columns.
        // The leaf is the hash of the record as they will read it back: its details parsed
        // from the very text stored (a float need not survive a text round trip bit for bit).
        let mut details = record.details.to_string();
        let mut as_read = AuditRecord {
            details: serde_json::from_str(&details)
                .map_err(|e| Error::internal(format!("audit record {seq}'s details do not parse back: {e}")))?,
            ..record.clone()
        };
        let mut encoded = as_read.encode(seq);
        // A record is one entry of the log's tiles (`tlog/tiles.rs`), at most 64 KiB: details
        // longer than that are kept as their length and hash.
        if encoded.len() > MAX_ENTRY {
            as_read.details = AuditRecord::truncated_details(&details);
            details = as_read.details.to_string();
            encoded = as_read.encode(seq);
            if encoded.len() > MAX_ENTRY {
                return Err(Error::invalid_argument(format!(
                    "the audit record of {} by {} would take {} bytes, more than a record may ({MAX_ENTRY}): its paths are too long",
                    record.operation,
                    record.actor,
                    encoded.len()
                )));
            }
        }
        insert
            .execute(params![
                seq,
                record.time_ns,
                record.actor,
                record.operation,
                record.workspace,
                record.session,
                record.path,
                record.dest_path,
                record.before_sha256.as_ref().map(|s| &s.as_bytes()[..]),
                record.after_sha256.as_ref().map(|s| &s.as_bytes()[..]),
                record.before_object.as_ref().map(|o| &o.as_bytes()[..]),
                record.after_object.as_ref().map(|o| &o.as_bytes()[..]),
                record.outcome,
                details,
                &[] as &[u8],
            ])
            .map_err(db("appending to the audit log"))?;
        for (level, index, hash) in frontier.push(merkle::leaf_hash(&encoded)) {
            node.execute(params![level, index as i64, &hash[..]]).map_err(db("growing the audit log's tree"))?;
        }
        seqs.push(seq);
    }
    Ok(seqs)
}

const FULL: &str = "SELECT seq, time_ns, actor, operation, workspace, session, path, dest_path, before_sha256,
                    after_sha256, before_object, after_object, outcome, details FROM audit";

/// The row with its object ids and details still raw, decoded by `finish_row`.
type RawRecord = (FullRecord, Option<Vec<u8>>, Option<Vec<u8>>, String);

fn full_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
    let mut record = AuditRecord::ok(r.get(1)?, &r.get::<_, String>(2)?, &r.get::<_, String>(3)?);
    record.workspace = r.get(4)?;
    record.session = r.get(5)?;
    record.path = r.get(6)?;
    record.dest_path = r.get(7)?;
    record.before_sha256 = r.get::<_, Option<[u8; 32]>>(8)?.map(Sha256);
    record.after_sha256 = r.get::<_, Option<[u8; 32]>>(9)?.map(Sha256);
    record.outcome = r.get(12)?;
    Ok((FullRecord { seq: r.get(0)?, record }, r.get(10)?, r.get(11)?, r.get(13)?))
}

fn finish_row(raw: RawRecord) -> Result<FullRecord> {
    let (mut full, before, after, details) = raw;
    let id = |o: Option<Vec<u8>>| o.map(|o| crate::object::ObjectId::from_slice(&o)).transpose();
    full.record.before_object = id(before)?;
    full.record.after_object = id(after)?;
    full.record.details = serde_json::from_str(&details).map_err(|e| {
        crate::base::error::Error::corrupt(format!("audit record {} has malformed details: {e}", full.seq))
    })?;
    Ok(full)
}

/// Whether records of tool plan `plan` (operation `operation`, of `session` if any, none
/// older than `since_ns`) are in the log: a plan whose outcome reached a bucket's record log
/// while its host's local commit did not (killed in between) is settled already. Looked up by
/// the session's index, else the operation's: only recovery asks.
pub fn plan_recorded(
    conn: &Connection,
    plan: &str,
    operation: &str,
    session: Option<&str>,
    since_ns: i64,
) -> Result<bool> {
    let sql = if session.is_some() {
        "SELECT 1 FROM audit WHERE session = ?4 AND operation = ?2 AND time_ns >= ?3 AND json_extract(details, '$.plan') = ?1 LIMIT 1"
    } else {
        "SELECT 1 FROM audit WHERE ?4 IS NULL AND operation = ?2 AND time_ns >= ?3 AND json_extract(details, '$.plan') = ?1 LIMIT 1"
    };
    conn.prepare_cached(sql)
        .and_then(|mut st| st.exists(params![plan, operation, since_ns, session]))
        .map_err(db("looking up a plan's records"))
}

/// Whether this log records the purge of node `node`'s trash item `trash_id` (by this node).
pub fn purge_recorded(conn: &Connection, trash_id: &str, node: &str) -> Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM audit WHERE operation = 'trash_purge' AND json_extract(details, '$.trashId') = ?1 AND json_extract(details, '$.node') = ?2 LIMIT 1",
    )
    .and_then(|mut st| st.exists(params![trash_id, node]))
    .map_err(db("looking up a purge's record"))
}

/// Whether this log records the whole restore of node `node`'s trash item `trash_id` (by this
/// node, into its workspace).
pub fn restore_recorded(conn: &Connection, trash_id: &str, node: &str) -> Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM audit WHERE operation = 'trash_restore' AND json_extract(details, '$.restoredTrashId') = ?1 AND json_extract(details, '$.node') = ?2 LIMIT 1",
    )
    .and_then(|mut st| st.exists(params![trash_id, node]))
    .map_err(db("looking up a restore's record"))
}

/// Record `seq`, if there is one.
pub fn get(conn: &Connection, seq: i64) -> Result<Option<FullRecord>> {
    let raw = conn
        .query_row(&format!("{FULL} WHERE seq = ?1"), [seq], full_row)
        .optional()
        .map_err(db("reading the audit log"))?;
    raw.map(finish_row).transpose()
}

/// Records a path prefix may select for a query to walk them through the path index and sort
/// them; past this, walking the log in seq order until the page is full is cheaper.
const FEW: i64 = 5_000;

/// Every operation named in the log, sorted (asked only when a filter by operation matched
/// nothing, to tell a misspelt name from one not used yet).
pub fn operations(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare_cached("SELECT DISTINCT operation FROM audit ORDER BY operation")
        .map_err(|e| Error::db("listing the audit log's operations", e))?;
    let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| Error::db("listing the audit log's operations", e))?;
    rows.collect::<rusqlite::Result<Vec<String>>>().map_err(|e| Error::db("listing the audit log's operations", e))
}

/// The records `q` selects, in seq order from `q.after` (or the newest `q.limit`, oldest
/// first). Only the filters given become conditions, so SQLite uses the index of the one it
/// can (session, path, actor, operation: each with seq); a path prefix is counted first, as in
/// the trash's listing, because SQLite cannot tell a prefix of 1% from one of 100%.
pub fn query(conn: &Connection, q: &AuditQuery) -> Result<Vec<FullRecord>> {
    let mut conds: Vec<&str> = Vec::new();
    let mut args: Vec<V> = Vec::new();
    let text = |cond: &'static str, v: &Option<String>, conds: &mut Vec<&str>, args: &mut Vec<V>| {
        if let Some(v) = v {
            conds.push(cond);
            args.push(V::Text(v.clone()));
        }
    };
    text("actor = ?", &q.actor, &mut conds, &mut args);
    text("session = ?", &q.session.as_ref().map(|s| s.to_string()), &mut conds, &mut args);
    text("workspace = ?", &q.workspace, &mut conds, &mut args);
    text("operation = ?", &q.operation, &mut conds, &mut args);
    text("outcome = ?", &q.outcome, &mut conds, &mut args);
    if let Some(p) = &q.path {
        conds.push("path = ?");
        args.push(V::Blob(p.clone()));
    }
    let mut index = "";
    if let Some(p) = q.prefix.as_ref().filter(|p| !p.is_empty()) {
        let with = |last: u8| {
            let mut b = p.clone();
            b.push(last);
            b
        };
        conds.push("(path >= ? AND path < ? AND (path = ? OR path >= ?))");
        args.extend([V::Blob(p.clone()), V::Blob(with(b'0')), V::Blob(p.clone()), V::Blob(with(b'/'))]);
        let n: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM audit INDEXED BY audit_by_path
                 WHERE path >= ?1 AND path < ?2 AND (path = ?1 OR path >= ?3) LIMIT ?4)",
            )
            .and_then(|mut st| st.query_row(params![p, with(b'0'), with(b'/'), FEW + 1], |r| r.get(0)))
            .map_err(db("querying the audit log"))?;
        // Many: the table itself, in seq order (seq is its rowid), until the page is full.
        index = if n <= FEW { "INDEXED BY audit_by_path" } else { "NOT INDEXED" };
    }
    // Times never decrease along seq: a time bound is a seq bound, found by binary search.
    if let Some(t) = q.since_ns {
        conds.push("seq >= ?");
        args.push(V::Integer(first_at_or_after(conn, t)?));
    }
    if let Some(t) = q.until_ns {
        conds.push("seq < ?");
        args.push(V::Integer(first_at_or_after(conn, t)?));
    }
    let order = match q.order {
        Order::After(seq) => {
            conds.push("seq > ?");
            args.push(V::Integer(seq));
            "ASC"
        }
        Order::Newest => "DESC",
        Order::Before(seq) => {
            conds.push("seq < ?");
            args.push(V::Integer(seq));
            "DESC"
        }
    };
    args.push(V::Integer(i64::try_from(q.limit).unwrap_or(i64::MAX)));
    let clause = if conds.is_empty() { String::new() } else { format!("WHERE {}", conds.join(" AND ")) };
    let sql = format!("{FULL} {index} {clause} ORDER BY seq {order} LIMIT ?");
    let mut st = conn.prepare_cached(&sql).map_err(db("querying the audit log"))?;
    let rows = st.query_map(rusqlite::params_from_iter(args), full_row).map_err(db("querying the audit log"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(finish_row(r.map_err(db("querying the audit log"))?)?);
    }
    if matches!(q.order, Order::Newest | Order::Before(_)) {
        out.reverse();
    }
    Ok(out)
}

/// The first seq whose time is at or after `t` (one past the last record if none is), by binary
/// search over seq: appends keep times from decreasing. Each probe is a rowid lookup.
fn first_at_or_after(conn: &Connection, t: i64) -> Result<i64> {
    let mut probe = conn
        .prepare_cached("SELECT seq, time_ns FROM audit WHERE seq >= ?1 ORDER BY seq LIMIT 1")
        .map_err(db("querying the audit log"))?;
    let mut at = |seq: i64| -> Result<Option<(i64, i64)>> {
        probe.query_row([seq], |r| Ok((r.get(0)?, r.get(1)?))).optional().map_err(db("querying the audit log"))
    };
    let (mut lo, mut hi) = (1i64, size(conn)? as i64 + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match at(mid)? {
            Some((_, time)) if time >= t => hi = mid,
            Some((seq, _)) => lo = seq + 1,
            None => hi = mid,
        }
    }
    Ok(lo)
}

/// Records of `workspace` that changed `path` (as their path or, for a move, their
/// destination), newest first, before seq `before`.
pub fn touching(conn: &Connection, workspace: &str, path: &[u8], before: i64, limit: usize) -> Result<Vec<FullRecord>> {
    let sql = format!(
        "SELECT * FROM ({FULL} WHERE path = ?1 AND workspace = ?2 AND seq < ?3
                         UNION ALL {FULL} WHERE dest_path = ?1 AND workspace = ?2 AND seq < ?3)
         ORDER BY seq DESC LIMIT ?4"
    );
    let mut st = conn.prepare_cached(&sql).map_err(db("reading a path's history"))?;
    let rows = st
        .query_map(params![path, workspace, before, i64::try_from(limit).unwrap_or(i64::MAX)], full_row)
        .map_err(db("reading a path's history"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(finish_row(r.map_err(db("reading a path's history"))?)?);
    }
    Ok(out)
}

/// Every record from `from` on, in seq order, with its encoding (as stored, or computed from
/// the columns where the row keeps an empty one: see [`append_all`]).
pub fn each_from(conn: &Connection, from: i64, mut f: impl FnMut(FullRecord, Vec<u8>) -> Result<()>) -> Result<()> {
    let sql = format!("{}, encoded FROM audit WHERE seq >= ?1 ORDER BY seq", FULL.trim_end_matches(" FROM audit"));
    let mut st = conn.prepare(&sql).map_err(db("reading the audit log"))?;
    let mut rows = st.query([from]).map_err(db("reading the audit log"))?;
    while let Some(r) = rows.next().map_err(db("reading the audit log"))? {
        let raw = full_row(r).map_err(db("reading the audit log"))?;
        let encoded: Vec<u8> = r.get(14).map_err(db("reading the audit log"))?;
        let full = finish_row(raw)?;
        let encoded = if encoded.is_empty() { full.record.encode(full.seq) } else { encoded };
        f(full, encoded)?;
    }
    Ok(())
}

/// Every record from `from` on, in seq order, with its stored encoding (none where the row keeps
/// an empty one, its columns being the whole record) and its stored leaf hash (if the tree has
/// one for it): what verification and the signer re-encode and compare.
pub fn each_checked(
    conn: &Connection,
    from: i64,
    f: impl FnMut(FullRecord, Option<Vec<u8>>, Option<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    each_checked_to(conn, from, i64::MAX, f)
}

/// [`each_checked`] of the records `from` to `to` (both included).
pub fn each_checked_to(
    conn: &Connection,
    from: i64,
    to: i64,
    mut f: impl FnMut(FullRecord, Option<Vec<u8>>, Option<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    let sql = "SELECT a.seq, a.time_ns, a.actor, a.operation, a.workspace, a.session, a.path, a.dest_path,
                      a.before_sha256, a.after_sha256, a.before_object, a.after_object, a.outcome, a.details,
                      a.encoded, t.hash
               FROM audit a LEFT JOIN audit_tree t ON t.level = 0 AND t.idx = a.seq - 1
               WHERE a.seq >= ?1 AND a.seq <= ?2 ORDER BY a.seq";
    let mut st = conn.prepare_cached(sql).map_err(db("reading the audit log"))?;
    let mut rows = st.query([from, to]).map_err(db("reading the audit log"))?;
    while let Some(r) = rows.next().map_err(db("reading the audit log"))? {
        let raw = full_row(r).map_err(db("reading the audit log"))?;
        let encoded: Vec<u8> = r.get(14).map_err(db("reading the audit log"))?;
        let leaf: Option<Vec<u8>> = r.get(15).map_err(db("reading the audit log"))?;
        f(finish_row(raw)?, Some(encoded).filter(|e| !e.is_empty()), leaf)?;
    }
    Ok(())
}

/// Stores checkpoint `c` (its note signed); one already stored at that size is kept.
pub fn insert_checkpoint(conn: &Connection, c: &Checkpointed) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO audit_checkpoints (size, time_ns, root, note) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut st| st.execute(params![c.size as i64, c.time_ns, &c.root[..], c.note]))
        .map_err(db("storing a checkpoint"))?;
    Ok(())
}

fn checkpoint_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, i64, Vec<u8>, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

fn to_checkpoint(raw: (i64, i64, Vec<u8>, String)) -> Result<Checkpointed> {
    let (size, time_ns, root, note) = raw;
    let root: Hash = root
        .try_into()
        .map_err(|_| Error::corrupt(format!("the checkpoint at {size} has a root that is not a hash")))?;
    Ok(Checkpointed { size: size.max(0) as u64, time_ns, root, note })
}

/// The newest checkpoint, if there is one.
pub fn latest_checkpoint(conn: &Connection) -> Result<Option<Checkpointed>> {
    conn.prepare_cached("SELECT size, time_ns, root, note FROM audit_checkpoints ORDER BY size DESC LIMIT 1")
        .and_then(|mut st| st.query_row([], checkpoint_row).optional())
        .map_err(db("reading checkpoints"))?
        .map(to_checkpoint)
        .transpose()
}

/// Every checkpoint, smallest first.
pub fn checkpoints(conn: &Connection) -> Result<Vec<Checkpointed>> {
    let mut st = conn
        .prepare_cached("SELECT size, time_ns, root, note FROM audit_checkpoints ORDER BY size")
        .map_err(db("reading checkpoints"))?;
    let rows = st.query_map([], checkpoint_row).map_err(db("reading checkpoints"))?;
    rows.map(|r| r.map_err(db("reading checkpoints")).and_then(to_checkpoint)).collect()
}

/// Registers `verifier` (a public key as text) as one that signs this log's checkpoints, from
/// `host` (None in a directory) at `now_ns`; a key registered already keeps its first row.
pub fn register_key(conn: &Connection, verifier: &str, host: Option<&str>, now_ns: i64) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO audit_keys (verifier, host, added_ns) VALUES (?1, ?2, ?3)")
        .and_then(|mut st| st.execute(params![verifier, host, now_ns]))
        .map_err(db("registering an audit signing key"))?;
    Ok(())
}

/// The registered signing keys as text, each with its host and when it was registered, oldest
/// first.
pub fn keys(conn: &Connection) -> Result<Vec<(String, Option<String>, i64)>> {
    let mut st = conn
        .prepare_cached("SELECT verifier, host, added_ns FROM audit_keys ORDER BY added_ns, verifier")
        .map_err(db("reading the audit signing keys"))?;
    let rows =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(db("reading the audit signing keys"))?;
    rows.map(|r| r.map_err(db("reading the audit signing keys"))).collect()
}

/// The checkpoints of more than `size` records, smallest first.
pub fn checkpoints_after(conn: &Connection, size: u64) -> Result<Vec<Checkpointed>> {
    let mut st = conn
        .prepare_cached("SELECT size, time_ns, root, note FROM audit_checkpoints WHERE size > ?1 ORDER BY size")
        .map_err(db("reading checkpoints"))?;
    let rows =
        st.query_map([i64::try_from(size).unwrap_or(i64::MAX)], checkpoint_row).map_err(db("reading checkpoints"))?;
    rows.map(|r| r.map_err(db("reading checkpoints")).and_then(to_checkpoint)).collect()
}

/// How many of `session`'s records are refusals (any outcome but `ok`), by the session index.
pub fn refusals(conn: &Connection, session: &crate::base::id::SessionId) -> Result<u64> {
    conn.prepare_cached("SELECT count(*) FROM audit WHERE session = ?1 AND outcome != 'ok'")
        .and_then(|mut st| st.query_row([session.to_string()], |r| r.get::<_, i64>(0)))
        .map(|n| n.max(0) as u64)
        .map_err(db("counting a session's refusals"))
}

/// How many records the log holds.
pub fn size(conn: &Connection) -> Result<u64> {
    Ok(last(conn)?.map_or(0, |(s, _)| s.max(0) as u64))
}
