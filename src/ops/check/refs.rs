//! The reference check: every tree decodes and verifies, and every reference names something
//! stored: trees' file contents and subtrees, snapshots' roots, trash items' contents, the
//! pre-images and contents of audit records within their workspace's trash age, and the
//! objects of journaled plans.

use std::collections::BTreeSet;

use rusqlite::Connection;

use crate::base::error::{Error, Result};
use crate::base::time::now_ns;
use crate::manifest::{loose, objects, trees};
use crate::model::tree::EntryKind;
use crate::model::workspace::DEFAULT_TRASH_AGE_S;
use crate::object::ObjectId;

use super::{is_finding, Checking, Problem, ProblemKind};

fn db(verb: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::db(verb, e)
}

/// Whether a file content is stored: as one object (packed or loose) or as a chunk list.
fn content_stored(conn: &Connection, id: &ObjectId) -> Result<bool> {
    Ok(objects::contains(conn, id)? || loose::contains(conn, id)? || !objects::chunk_list(conn, id)?.is_empty())
}

/// (text naming the referrer, content id) for each row of a query of (name, id blob).
fn referrers(conn: &Connection, sql: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let mut stmt = conn.prepare(sql).map_err(db("reading references"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .map_err(db("reading references"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db("reading references"))
}

impl Checking<'_> {
    /// Every tree decodes and verifies; every tree a snapshot reaches names stored contents and
    /// trees. A tree nothing reaches is garbage: a reference it holds
    /// to something lost is not damage (garbage collection takes it).
    pub(super) fn check_trees(&mut self) -> Result<()> {
        let conn = self.repo.manifest.conn();
        let mut missing_trees: BTreeSet<ObjectId> = BTreeSet::new();
        let mut seen: BTreeSet<ObjectId> = BTreeSet::new();
        // (tree, who refers to it) from the roots, depth first with an explicit stack.
        let mut stack: Vec<(ObjectId, String)> = Vec::new();
        for snap in crate::manifest::snapshots::list(conn, None)? {
            self.report.snapshots += 1;
            stack.push((snap.root, format!("the root of snapshot {}", snap.id)));
        }
        while let Some((id, referrer)) = stack.pop() {
            self.repo.check_deadline("checking trees")?;
            if !seen.insert(id) {
                continue;
            }
            if !trees::exists(conn, &id)? {
                if missing_trees.insert(id) {
                    let p = Problem::new(ProblemKind::TreeMissing, format!("tree {id} ({referrer}) is not stored"));
                    self.tree_problem(id, p);
                }
                continue;
            }
            self.report.trees += 1;
            let entries = match trees::entries(conn, &id) {
                Ok(e) => e,
                Err(e) if is_finding(&e) => {
                    self.tree_problem(id, Problem::new(ProblemKind::TreeDamaged, e.message().to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            for e in entries {
                let name = String::from_utf8_lossy(&e.name);
                match (e.kind, e.content) {
                    (EntryKind::File, Some(c)) if !self.reported.contains(&c) && !content_stored(conn, &c)? => {
                        let p = Problem::new(
                            ProblemKind::ObjectMissing,
                            format!("file content {c} (named '{name}' in tree {id}) is not stored"),
                        );
                        self.object_problem(c, p);
                    }
                    (EntryKind::Dir, Some(t)) => stack.push((t, format!("directory '{name}' of tree {id}"))),
                    _ => {}
                }
            }
        }
        // Garbage trees: each still decodes, or it is damage in the manifest all the same.
        for id in trees::all_ids(conn)? {
            if seen.contains(&id) {
                continue;
            }
            self.report.trees += 1;
            match trees::entries(conn, &id) {
                Ok(_) => {}
                Err(e) if is_finding(&e) => {
                    self.tree_problem(id, Problem::new(ProblemKind::TreeDamaged, e.message().to_string()));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Trash items, recent audit records and journaled plans name stored contents.
    pub(super) fn check_references(&mut self) -> Result<()> {
        let conn = self.repo.manifest.conn();
        let now = now_ns();
        let mut refs = referrers(conn, "SELECT 'trash item ' || id, object FROM trash WHERE object IS NOT NULL")?;
        refs.extend(referrers(
            conn,
            "SELECT 'a member of trash item ' || trash_id, object FROM trash_entries WHERE object IS NOT NULL",
        )?);
        refs.extend(referrers(
            conn,
            &format!(
                "SELECT 'audit record ' || seq, o FROM (
                     SELECT a.seq, a.before_object AS o, a.time_ns AS t, w.trash_age_s AS age FROM audit a
                         LEFT JOIN workspaces w ON w.name = a.workspace WHERE a.before_object IS NOT NULL
                     UNION ALL SELECT a.seq, a.after_object, a.time_ns, w.trash_age_s FROM audit a
                         LEFT JOIN workspaces w ON w.name = a.workspace WHERE a.after_object IS NOT NULL)
                 WHERE t >= {now} - COALESCE(age, {DEFAULT_TRASH_AGE_S}) * 1000000000"
            ),
        )?);
        for (who, raw) in refs {
            let Ok(id) = ObjectId::from_slice(&raw) else {
                self.problem(Problem::new(ProblemKind::Row, format!("{who} holds a malformed object id")));
                continue;
            };
            if !self.reported.contains(&id) && !content_stored(conn, &id)? {
                self.object_problem(
                    id,
                    Problem::new(ProblemKind::ObjectMissing, format!("content {id} of {who} is not stored")),
                );
            }
        }
        for (plan, json) in crate::manifest::journal::pending(conn)? {
            let parsed: std::result::Result<crate::ops::journal::Plan, _> = serde_json::from_str(&json);
            let Ok(parsed) = parsed else {
                self.problem(Problem::new(ProblemKind::Row, format!("journaled plan {plan} does not parse")));
                continue;
            };
            for step in &parsed.steps {
                use crate::ops::journal::Step;
                let hex: Vec<&String> = match step {
                    // A new content held in memory is stored with the plan's records, so a
                    // plan in flight (or interrupted) names one the store need not hold yet;
                    // recovery stages it from its temporary.
                    Step::Write { before_object, .. } => before_object.iter().collect(),
                    Step::Move { object, .. } => object.iter().collect(),
                    _ => Vec::new(),
                };
                for h in hex {
                    match ObjectId::from_hex(h) {
                        Ok(id) if !self.reported.contains(&id) && !content_stored(conn, &id)? => self.object_problem(
                            id,
                            Problem::new(
                                ProblemKind::ObjectMissing,
                                format!("content {id} of journaled plan {plan} is not stored"),
                            ),
                        ),
                        Ok(_) => {}
                        Err(_) => {
                            self.problem(Problem::new(
                                ProblemKind::Row,
                                format!("journaled plan {plan} holds a malformed object id"),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
