//! What damage affects: for each problem naming an object, content or tree, the snapshots
//! holding it and the paths within them, found by walking every snapshot's trees (an explicit
//! stack; only when there are problems). A chunk's damage affects the contents listing it.

use std::collections::BTreeMap;

use crate::base::error::{Error, Result};
use crate::manifest::trees;
use crate::model::tree::EntryKind;
use crate::object::ObjectId;

use super::Checking;

/// At most this many snapshots and paths are named per problem.
const NAMED: usize = 100;

impl Checking<'_> {
    /// Fills in the snapshots and paths of every problem that names something bad.
    pub(super) fn affected(&mut self) -> Result<()> {
        let conn = self.repo.manifest.conn();
        // A bad chunk makes the contents listing it bad, under the same problems.
        let mut contents = self.bad.objects.clone();
        {
            let mut stmt = conn
                .prepare_cached("SELECT content FROM chunk_lists WHERE chunk = ?1")
                .map_err(|e| Error::db("finding what damage affects", e))?;
            for (chunk, problems) in &self.bad.objects {
                let rows = stmt
                    .query_map([&chunk.as_bytes()[..]], |r| r.get::<_, Vec<u8>>(0))
                    .map_err(|e| Error::db("finding what damage affects", e))?;
                for row in rows {
                    let raw = row.map_err(|e| Error::db("finding what damage affects", e))?;
                    if let Ok(c) = ObjectId::from_slice(&raw) {
                        contents.entry(c).or_default().extend(problems.iter().copied());
                    }
                }
            }
        }
        let mut hits: BTreeMap<usize, (Vec<crate::base::id::SnapshotId>, Vec<String>)> = BTreeMap::new();
        for snap in crate::manifest::snapshots::list(conn, None)? {
            let mut stack: Vec<(ObjectId, Vec<u8>)> = vec![(snap.root, Vec::new())];
            while let Some((tree, dir)) = stack.pop() {
                self.repo.check_deadline("finding what damage affects")?;
                let mut note = |problems: &[usize], path: &[u8]| {
                    for &i in problems {
                        let (snaps, paths) = hits.entry(i).or_default();
                        if snaps.last() != Some(&snap.id) && snaps.len() < NAMED {
                            snaps.push(snap.id.clone());
                        }
                        if paths.len() < NAMED {
                            let shown =
                                if path.is_empty() { "/".into() } else { String::from_utf8_lossy(path).into_owned() };
                            paths.push(format!("{}:{shown}", crate::ops::view::short_id(&snap.id)));
                        }
                    }
                };
                if let Some(problems) = self.bad.trees.get(&tree) {
                    note(problems, &dir);
                    continue;
                }
                let Ok(entries) = trees::entries(conn, &tree) else { continue };
                for e in entries {
                    let path = crate::fs::walk::join_rel(&dir, &e.name);
                    match (e.kind, e.content) {
                        (EntryKind::File, Some(c)) => {
                            if let Some(problems) = contents.get(&c) {
                                note(problems, &path);
                            }
                        }
                        (EntryKind::Dir, Some(t)) => stack.push((t, path)),
                        _ => {}
                    }
                }
            }
        }
        for (i, (snaps, paths)) in hits {
            if let Some(p) = self.report.problems.get_mut(i) {
                p.snapshots = snaps;
                p.paths = paths;
            }
        }
        Ok(())
    }
}
