//! Exporting trash items as a tar archive: each at its original path, with its mode and mtime
//! (a directory with its members), the contents streamed from the store a buffer at a time.

use std::io::Write;

use crate::base::error::Result;
use crate::base::progress::Progress;
use crate::fs::walk::join_rel;
use crate::model::trash::TrashItem;
use crate::model::tree::EntryKind;
use crate::ops::export::write_archive;
use crate::repo::Repo;

/// An item's mtime, or its deletion time for one kept before mtimes were.
fn mtime(mtime_ns: i64, deleted_ns: i64) -> i64 {
    if mtime_ns == 0 {
        deleted_ns
    } else {
        mtime_ns
    }
}

impl Repo {
    /// Writes `items` (oldest deletion first, so extracting leaves a path's newest version in
    /// place) as a tar stream, zstd-compressed at `zstd_level` when given; returns the entry
    /// count. `progress` is told the file bytes written.
    pub fn export_trash(
        &self,
        items: &[TrashItem],
        out: &mut dyn Write,
        zstd_level: Option<i32>,
        progress: &dyn Progress,
    ) -> Result<u64> {
        let mut order: Vec<&TrashItem> = items.iter().collect();
        order.sort_by_key(|t| t.deleted_ns);
        progress.start("exporting", order.iter().map(|t| t.size).sum());
        // One read transaction for every lookup: a lock per query would cost more than the
        // copying for a directory of small files.
        let n = self.manifest.read(|| {
            write_archive(out, zstd_level, |a| {
                for item in order {
                    // Members come with the item only when it was read whole.
                    let entries = match (item.kind, item.entries.is_empty()) {
                        (EntryKind::Dir, true) => self.trash_item(&item.id)?.entries,
                        _ => Vec::new(),
                    };
                    let entries = if entries.is_empty() { &item.entries } else { &entries };
                    let when = mtime(item.mtime_ns, item.deleted_ns);
                    match item.kind {
                        EntryKind::File => {
                            let id = item.object.ok_or_else(|| {
                                crate::base::error::Error::corrupt(format!("trash item {} has no content", item.id))
                            })?;
                            a.file(&item.path, item.mode, when, item.size, self.open_object(id, Some(item.size))?)?;
                            progress.advance(item.size);
                        }
                        EntryKind::Symlink => a.symlink(&item.path, b"", item.mode, when)?,
                        EntryKind::Dir => {
                            a.dir(&item.path, item.mode, when)?;
                            for e in entries {
                                let rel = join_rel(&item.path, &e.rel);
                                let at = mtime(e.mtime_ns, item.deleted_ns);
                                match (e.kind, e.object, &e.target) {
                                    (EntryKind::Dir, _, _) => a.dir(&rel, e.mode, at)?,
                                    (EntryKind::Symlink, _, t) => {
                                        a.symlink(&rel, t.as_deref().unwrap_or(b""), e.mode, at)?
                                    }
                                    (EntryKind::File, Some(id), _) => {
                                        a.file(&rel, e.mode, at, e.size, self.open_object(id, Some(e.size))?)?;
                                        progress.advance(e.size);
                                    }
                                    (EntryKind::File, None, _) => {
                                        return Err(crate::base::error::Error::corrupt(format!(
                                            "trash item {} records a member without its content",
                                            item.id
                                        )))
                                    }
                                }
                            }
                        }
                    }
                }
                Ok(())
            })
        })?;
        progress.finish();
        Ok(n)
    }
}
