//! Exporting trash items as a tar archive (or into any `EntrySink`): each at its original path,
//! with its mode and mtime (a directory with its members), the contents streamed from the
//! store a buffer at a time.

use std::io::Write;

use crate::base::error::{Error, Result};
use crate::base::progress::Progress;
use crate::fs::walk::join_rel;
use crate::model::trash::TrashItem;
use crate::model::tree::EntryKind;
use crate::ops::export::{write_archive, EntrySink};
use crate::repo::Repo;

/// An item's mtime, or its deletion time for one kept before mtimes were.
fn mtime(mtime_ns: i64, deleted_ns: i64) -> i64 {
    if mtime_ns == 0 {
        deleted_ns
    } else {
        mtime_ns
    }
}

/// Files whose lookups share one read transaction: one per query would cost more than the
/// copying for a directory of small files, and one for a whole export would let a slow reader
/// of the archive keep the WAL from being checkpointed.
const BATCH: usize = 256;

/// [`Repo::export_trash`] of several nodes' items, each read through its node's handle, in one
/// archive: every item in order of deletion, whichever node's it is.
pub fn export_trash_of(
    parts: &[(&Repo, &[TrashItem])],
    out: &mut dyn Write,
    zstd_level: Option<i32>,
    progress: &dyn Progress,
) -> Result<u64> {
    let _leases = parts.iter().map(|(r, _)| r.lease("trash export")).collect::<Result<Vec<_>>>()?;
    let mut order: Vec<(&Repo, &TrashItem)> =
        parts.iter().flat_map(|(r, items)| items.iter().map(move |t| (*r, t))).collect();
    order.sort_by_key(|(_, t)| t.deleted_ns);
    progress.start("exporting", order.iter().fold(0u64, |n, (_, t)| n.saturating_add(t.size)));
    let n = write_archive(out, zstd_level, |a| {
        order.iter().try_for_each(|(repo, item)| repo.export_item(&mut *a, item, progress))
    })?;
    progress.finish();
    Ok(n)
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
        export_trash_of(&[(self, items)], out, zstd_level, progress)
    }

    /// One item into the archive: a file, or a directory and its members (read now when the
    /// item came without them).
    pub(super) fn export_item(&self, a: &mut dyn EntrySink, item: &TrashItem, progress: &dyn Progress) -> Result<()> {
        let when = mtime(item.mtime_ns, item.deleted_ns);
        match item.kind {
            EntryKind::File => {
                self.manifest
                    .read(|| self.export_file(a, &item.path, (item.mode, when), item.size, item.object, item))?;
                progress.advance(item.size);
                Ok(())
            }
            EntryKind::Symlink => a.symlink(&item.path, b"", item.mode, when),
            EntryKind::Dir => {
                a.dir(&item.path, item.mode, when)?;
                let whole;
                let entries = if item.entries.is_empty() {
                    whole = self.trash_item(&item.id)?;
                    &whole.entries
                } else {
                    &item.entries
                };
                for batch in entries.chunks(BATCH) {
                    self.manifest.read(|| {
                        batch.iter().try_for_each(|e| {
                            let rel = join_rel(&item.path, &e.rel);
                            let at = mtime(e.mtime_ns, item.deleted_ns);
                            match (e.kind, &e.target) {
                                (EntryKind::Dir, _) => a.dir(&rel, e.mode, at),
                                (EntryKind::Symlink, t) => a.symlink(&rel, t.as_deref().unwrap_or(b""), e.mode, at),
                                (EntryKind::File, _) => {
                                    self.export_file(a, &rel, (e.mode, at), e.size, e.object, item)?;
                                    progress.advance(e.size);
                                    Ok(())
                                }
                            }
                        })
                    })?;
                }
                Ok(())
            }
        }
    }

    /// A file of `item` at `rel` with (mode, mtime), its content streamed from `object`.
    fn export_file(
        &self,
        a: &mut dyn EntrySink,
        rel: &[u8],
        (mode, mtime_ns): (u32, i64),
        size: u64,
        object: Option<crate::object::ObjectId>,
        item: &TrashItem,
    ) -> Result<()> {
        let id = object.ok_or_else(|| {
            Error::corrupt(format!(
                "trash item {} records '{}' without its content",
                item.id,
                crate::base::path::display(rel)
            ))
        })?;
        a.file(rel, mode, mtime_ns, size, &mut self.open_object(id, Some(size))?)
    }
}
