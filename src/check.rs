//! Checking a repository: every indexed object reads back and hashes to its id, and every
//! file content and tree a snapshot references exists.

use serde::Serialize;

use crate::error::{ErrorKind, Result};

use crate::manifest::{db, objects, snapshots, trees};
use crate::repo::Repo;
use crate::tree::EntryKind;

#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    pub objects: u64,
    pub bytes: u64,
    pub problems: Vec<String>,
}

impl Repo {
    /// Verifies every object and reference; problems are collected, not returned as errors,
    /// so one damaged pack does not hide another.
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = CheckReport::default();
        for (id, loc) in objects::all_locations(self.manifest.conn())? {
            report.objects += 1;
            report.bytes += loc.raw_len;
            match self.read_object(&id) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound | ErrorKind::Io) => {
                    report.problems.push(e.message().to_string())
                }
                Err(e) => return Err(e),
            }
        }
        let conn = self.manifest.conn();
        // Every tree decodes and verifies, and everything it points at exists.
        let (mut missing_content, mut missing_trees) = (0u64, 0u64);
        for id in trees::all_ids(conn)? {
            let entries = match trees::entries(conn, &id) {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    report.problems.push(e.message().to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            for e in entries {
                match (e.kind, e.content) {
                    (EntryKind::File, Some(c))
                        if !objects::contains(conn, &c)? && objects::chunk_list(conn, &c)?.is_empty() =>
                    {
                        missing_content += 1
                    }
                    (EntryKind::Dir, Some(t)) if !trees::exists(conn, &t)? => missing_trees += 1,
                    _ => {}
                }
            }
        }
        for snap in snapshots::list(conn, None)? {
            if !trees::exists(conn, &snap.root)? {
                missing_trees += 1;
            }
        }
        if missing_content > 0 {
            report.problems.push(format!("{missing_content} file contents are referenced by trees but not stored"));
        }
        if missing_trees > 0 {
            report.problems.push(format!("{missing_trees} trees are referenced but missing"));
        }
        let missing_chunks: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM chunk_lists c WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.id = c.chunk)",
                [],
                |r| r.get(0),
            )
            .map_err(db("checking chunk references"))?;
        if missing_chunks > 0 {
            report.problems.push(format!("{missing_chunks} chunks are referenced by chunk lists but not stored"));
        }
        Ok(report)
    }
}
