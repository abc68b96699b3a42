//! The trash of a repository (DESIGN.md, "Trash"): reading items back and listing them here;
//! deleting into it (`remove.rs`), restoring from it (`restore.rs`), purging and expiring items
//! (`purge.rs`), another node's items purged or restored from this one (`elsewhere.rs`), copying
//! items out into a directory (`copy_out.rs`) and exporting them as a tar archive (`export.rs`).

pub mod copy_out;
pub mod elsewhere;
pub mod export;
pub mod purge;
pub mod remove;
pub mod restore;

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::manifest;
use crate::model::trash::{TrashCursor, TrashFilter, TrashItem, TrashPage};
use crate::repo::Repo;

/// The `not_found` of a trash item, saying where to look.
fn no_item(id: &TrashId) -> Error {
    Error::not_found(format!("trash item '{id}' not found: list the trash with `trove trash ls`"))
}

impl Repo {
    /// One trash item by id.
    pub fn trash_item(&self, id: &TrashId) -> Result<TrashItem> {
        manifest::trash::get(self.manifest.conn(), id)?.ok_or_else(|| no_item(id))
    }

    /// Trash items of `workspace`, newest first, optionally only those at `path`.
    pub fn trash(&self, workspace: &str, path: Option<&[u8]>) -> Result<Vec<TrashItem>> {
        manifest::trash::list(self.manifest.conn(), workspace, path)
    }

    /// The items `filter` selects, newest first, `filter.limit` at most (0: all), with the
    /// cursor of the next page when there is one; `keep` drops items (a session's scope).
    pub fn trash_page(&self, filter: &TrashFilter, keep: impl Fn(&TrashItem) -> bool) -> Result<TrashPage> {
        let mut items = Vec::new();
        // One row more than a page tells whether another page follows; a `keep` that drops
        // rows makes this read more rows, in batches of at least 256, until the page is full.
        let batch = if filter.limit == 0 { 0 } else { filter.limit.saturating_add(1).clamp(256, 1000) };
        let mut next = TrashFilter { limit: batch, ..filter.clone() };
        let conn = self.manifest.conn();
        let index = manifest::trash::index_for(conn, filter)?;
        loop {
            let rows = manifest::trash::page_by(conn, &next, index)?;
            let exhausted = batch == 0 || rows.len() < batch;
            for (item, row) in rows {
                let cursor = TrashCursor { deleted_ns: item.deleted_ns, row };
                next.after = Some(cursor);
                if !keep(&item) {
                    continue;
                }
                if filter.limit != 0 && items.len() == filter.limit {
                    let last: Option<&(_, TrashCursor)> = items.last();
                    let next_cursor = last.map(|(_, c)| c.to_string());
                    return Ok(TrashPage { items: items.into_iter().map(|(r, _)| r).collect(), next_cursor });
                }
                items.push((item.record(), cursor));
            }
            if exhausted {
                return Ok(TrashPage { items: items.into_iter().map(|(r, _)| r).collect(), next_cursor: None });
            }
        }
    }
}
