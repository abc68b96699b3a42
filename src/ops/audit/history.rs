//! A path's history from the audit log (`trove audit history`): every recorded change to it,
//! newest first, following it back through renames (a move into the path continues with the
//! path it came from, for the records before the move).

use crate::base::error::Result;
use crate::base::path;
use crate::manifest;
use crate::model::audit::HistoryEntry;
use crate::repo::Repo;

/// The most records one history lists.
pub const HISTORY_LIMIT: usize = 10_000;

impl Repo {
    /// The changes to `rel` in `workspace`, newest first, at most `limit`, renames followed.
    pub fn path_history(&self, workspace: &str, rel: &[u8], limit: usize) -> Result<Vec<HistoryEntry>> {
        let rel = path::components(rel)?.join(&b'/');
        let limit = limit.clamp(1, HISTORY_LIMIT);
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let (mut current, mut before, mut out) = (rel.clone(), i64::MAX, Vec::new());
            'names: while out.len() < limit {
                let rows = manifest::audit::touching(conn, workspace, &current, before, limit - out.len())?;
                if rows.is_empty() {
                    break;
                }
                for r in rows {
                    let moved_in = r.record.dest_path.as_deref() == Some(&current[..]);
                    let change = r.record.details.get("change").and_then(|c| c.as_str()).map(str::to_string);
                    out.push(HistoryEntry { entry: r.entry(), change, as_path: path::display(&current).into_owned() });
                    if moved_in {
                        // Before this move the file had the move's source path.
                        if let Some(src) = r.record.path.clone() {
                            current = src;
                            before = r.seq;
                            continue 'names;
                        }
                    }
                    if out.len() >= limit {
                        break 'names;
                    }
                }
                break;
            }
            Ok(out)
        })
    }
}
