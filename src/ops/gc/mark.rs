//! Garbage collection's mark: everything the roots reach, written to the connection's
//! temporary tables in one read transaction (so the view is consistent), then every row of the
//! object store's tables those marks do not reach.
//!
//! Roots: every snapshot's tree, every trash item, the pre-images and new contents of audit
//! records within their workspace's trash age, every journaled plan, and in a bucket what other
//! hosts' plans in flight stored (`plan_roots`). Operations in flight
//! are not roots: they hold leases, which the sweep honours. The directory cache is no root:
//! it is each machine's own, outside the repository.

use rusqlite::Connection;
use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::manifest::gc;
use crate::model::tree::EntryKind;
use crate::model::workspace::DEFAULT_TRASH_AGE_S;
use crate::object::ObjectId;
use crate::ops::journal::Plan;
use crate::repo::Repo;

/// What the mark reached.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Marked {
    /// Trees reached.
    pub trees: u64,
    /// File contents reached (a chunked file's content counts once).
    pub contents: u64,
    /// Objects reached (contents' own objects and chunks).
    pub objects: u64,
}

/// The marks' view: what they reached, the newest epoch and the leases it held, all read in
/// the one read transaction of the marks.
pub(super) struct View {
    pub(super) marked: Marked,
    pub(super) epoch: i64,
    pub(super) leases: Vec<gc::LeaseRow>,
}

/// An id column's bytes as an object id; a malformed one is damage the collection will not
/// work around (it could hide a root).
fn id_of(bytes: &[u8], what: &str) -> Result<ObjectId> {
    ObjectId::from_slice(bytes)
        .map_err(|_| Error::corrupt(format!("{what} holds a malformed object id; run `trove check` before collecting")))
}

/// Runs `each` on every row of a one-column query of object ids.
fn each_id(conn: &Connection, sql: &str, what: &str, mut each: impl FnMut(ObjectId) -> Result<()>) -> Result<()> {
    let mut stmt = conn.prepare(sql).map_err(|e| Error::db("reading the roots", e))?;
    let mut rows = stmt.query([]).map_err(|e| Error::db("reading the roots", e))?;
    while let Some(r) = rows.next().map_err(|e| Error::db("reading the roots", e))? {
        let bytes = r.get_ref(0).and_then(|v| v.as_blob().map_err(Into::into));
        let bytes = bytes.map_err(|e| Error::db("reading the roots", e))?;
        each(id_of(bytes, what)?)?;
    }
    Ok(())
}

/// The object ids a journaled plan refers to.
fn plan_objects(id: &str, json: &str) -> Result<Vec<ObjectId>> {
    let plan: Plan = serde_json::from_str(json).map_err(|e| {
        Error::corrupt(format!("journaled plan {id} does not parse ({e}); run `trove check` before collecting"))
    })?;
    plan.objects()
}

impl Repo {
    /// Marks what the roots reach and lists what they do not (see the module docs).
    pub(super) fn gc_mark(&self, now_ns: i64) -> Result<View> {
        let conn = self.manifest.conn();
        gc::reset_marks(conn)?;
        self.manifest.read(|| -> Result<View> {
            // First, so the view is this transaction's from here on.
            let epoch = gc::latest_epoch(conn)?;
            let leases = gc::leases(conn)?;
            // (tree, whether it must exist): a snapshot's must. The directory cache is no root:
            // it is each machine's own (`manifest/node_cache.rs`), and a snapshot trusts a
            // record only while its tree is live, its lease keeping it so until the commit.
            let mut trees: Vec<(ObjectId, bool)> = Vec::new();
            each_id(conn, "SELECT root FROM snapshots", "a snapshot's root", |id| {
                trees.push((id, true));
                Ok(())
            })?;
            let mut marked = Marked::default();
            // Depth first with an explicit stack: no tree shape can exhaust a thread's stack.
            while let Some((id, required)) = trees.pop() {
                self.check_deadline("marking what snapshots reach")?;
                if !required && !crate::manifest::trees::exists(conn, &id)? {
                    continue;
                }
                if !gc::mark_tree(conn, &id)? {
                    continue;
                }
                marked.trees += 1;
                let entries = crate::manifest::trees::entries(conn, &id).map_err(|e| {
                    e.context("a tree a root reaches cannot be read; run `trove check` (nothing was collected)")
                })?;
                for e in entries {
                    match (e.kind, e.content) {
                        (EntryKind::File, Some(c)) => gc::mark_content(conn, &c)?,
                        (EntryKind::Dir, Some(t)) => trees.push((t, true)),
                        _ => {}
                    }
                }
            }
            let content = |id: ObjectId| gc::mark_content(conn, &id);
            each_id(conn, "SELECT object FROM trash WHERE object IS NOT NULL", "a trash item", content)?;
            each_id(
                conn,
                "SELECT object FROM trash_entries WHERE object IS NOT NULL",
                "a trash item's member",
                content,
            )?;
            let within = format!(
                "SELECT o FROM (SELECT a.before_object AS o, a.time_ns AS t, w.trash_age_s AS age FROM audit a
                     LEFT JOIN workspaces w ON w.name = a.workspace WHERE a.before_object IS NOT NULL
                 UNION ALL SELECT a.after_object, a.time_ns, w.trash_age_s FROM audit a
                     LEFT JOIN workspaces w ON w.name = a.workspace WHERE a.after_object IS NOT NULL)
                 WHERE t >= {now_ns} - COALESCE(age, {DEFAULT_TRASH_AGE_S}) * 1000000000"
            );
            each_id(conn, &within, "an audit record", content)?;
            each_id(conn, "SELECT object FROM plan_roots", "a tool change in flight on a host", content)?;
            for (id, json) in crate::manifest::journal::pending(conn)? {
                for o in plan_objects(&id, &json)? {
                    gc::mark_content(conn, &o)?;
                }
            }
            gc::collect_dead(conn)?;
            let count = |sql: &str| -> Result<u64> {
                conn.query_row(sql, [], |r| r.get::<_, i64>(0))
                    .map(|n| n as u64)
                    .map_err(|e| Error::db("counting marks", e))
            };
            marked.contents = count("SELECT COUNT(*) FROM temp.gc_contents")?;
            marked.objects = count("SELECT COUNT(*) FROM temp.gc_live")?;
            Ok(View { marked, epoch, leases })
        })
    }
}
