//! Checking a repository: every indexed object reads back and hashes to its id, and every
//! file content and tree a snapshot references exists.

use serde::Serialize;

use crate::error::{ErrorKind, Result};
use crate::manifest::db;
use crate::manifest::objects;
use crate::repo::Repo;

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
        let missing_content: i64 = conn
            .query_row(
                "SELECT COUNT(DISTINCT e.content) FROM tree_entries e WHERE e.kind = 0
                 AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.id = e.content)
                 AND NOT EXISTS (SELECT 1 FROM chunk_lists c WHERE c.content = e.content)",
                [],
                |r| r.get(0),
            )
            .map_err(db("checking file references"))?;
        if missing_content > 0 {
            report.problems.push(format!("{missing_content} file contents are referenced by trees but not stored"));
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
        let missing_trees: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM (SELECT root AS t FROM snapshots UNION SELECT content FROM tree_entries WHERE kind = 1)
                 WHERE t NOT IN (SELECT id FROM trees)",
                [],
                |r| r.get(0),
            )
            .map_err(db("checking tree references"))?;
        if missing_trees > 0 {
            report.problems.push(format!("{missing_trees} trees are referenced but missing"));
        }
        Ok(report)
    }
}
