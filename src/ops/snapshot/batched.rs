//! A big snapshot read whole, taken in batches: the tree is split by its entry counts into
//! subtrees of at most `Repo::batch_files` entries, gathered into batches of about as many;
//! each batch is walked, read and built, and what it stored (objects, trees, chunk lists) staged
//! (`staged.rs`) before the next is walked; the directories above them come last, with the
//! snapshot, whose transaction records everything staged. Memory follows a batch, not the tree.
//!
//! Until the snapshot commits, the batches' packs are files the index does not know: the
//! snapshot's lease keeps a collection running meanwhile from deleting them, and a kill leaves
//! them for garbage collection to take and `check` to count as garbage, not damage. The
//! directory records of the batches wait in a temporary file until the commit, as records may
//! name only trees a snapshot reaches. A subtree a batch took that the final walk no longer
//! finds (the tree changed meanwhile) gives the snapshot to one whole walk.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;

use super::spill::Spill;
use super::staged::Staged;
use super::{new_chunk_lists, record_dirs, stored_trees, Cold, ReadOf, Stored, Taken};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::now_ns;
use crate::fs::walk::{self, Walked};
use crate::manifest::dir_cache::{self, DirCacheMap, DirKey};
use crate::manifest::node_cache::NodeCache;
use crate::model::snapshot::{Counts, SnapshotInfo, Warning};
use crate::object::ObjectId;
use crate::ops::scan::{build, classify, records, Built, BuiltIds, Classified, Outcomes};
use crate::repo::Repo;
use rusqlite::Connection;

/// Directory records written to the cache per transaction after the commit.
const RECORDS_PER_WRITE: usize = 10_000;

/// A record longer than this in the temporary file is damage (a directory of a million
/// entries writes about 40 MB).
const MAX_RECORD: usize = 256 << 20;

impl Repo {
    /// The snapshot of `c` taken in batches, when there are no directory records to go by (the
    /// workspace's first snapshot here, a cache deleted, or the cache not used) and its tree
    /// holds more than `batch_files` entries; None otherwise (the whole walk takes it).
    pub(super) fn snapshot_in_batches(
        &self,
        c: &Cold<'_>,
        opts: &super::SnapshotOptions<'_>,
    ) -> Result<Option<SnapshotInfo>> {
        let conn = self.manifest.conn();
        let cache = match self.node_cache() {
            Some(cache) => match cache_for_batches(cache, conn, c.name, opts.use_stat_cache) {
                Ok(true) => return Ok(None),
                Ok(false) => Some(cache),
                Err(e) => {
                    tracing::warn!(workspace = c.name, error = %e, "the directory cache is not used: this snapshot's records are not kept");
                    None
                }
            },
            None => None,
        };
        let root_fd = walk::open_root(c.dir)?;
        let walk_opts = walk::WalkOptions::new(c.excludes, self.deadline());
        let counted = walk::count_entries(&root_fd, &walk_opts)?;
        let limit = self.batch_files;
        let entries = counted.first().map_or(0, |root| root.total);
        if entries <= limit {
            return Ok(None);
        }
        // The largest subtrees within the limit, in path order, gathered into batches.
        let mut cuts: Vec<(Vec<u8>, u64)> = Vec::new();
        for d in counted.iter().skip(1) {
            if d.total <= limit && counted.get(d.parent).is_some_and(|p| p.total > limit) {
                cuts.push((d.rel.clone(), d.total));
            }
        }
        drop(counted);
        cuts.sort_unstable();
        let mut batches: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut filled = limit;
        for (rel, total) in cuts {
            if filled + total > limit {
                batches.push(Vec::new());
                filled = 0;
            }
            filled += total;
            if let Some(b) = batches.last_mut() {
                b.push(rel);
            }
        }
        tracing::debug!(workspace = c.name, entries, batches = batches.len(), "a snapshot in batches");

        let _unmapped = self.manifest.unmapped()?;
        // The records wait on disk for the commit. Without a cache, or a file to keep them in,
        // the next snapshot reads the files again (logged), as on the whole walk's path.
        let mut spill = cache.and_then(|_| match Spill::new(self.cache_dir(), "directory record", MAX_RECORD) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(workspace = c.name, error = %e, "this snapshot's directory records are not kept: the next one reads the files again");
                None
            }
        });
        // The batches' objects are indexed by the commit, in one ordered pass (`staged.rs`).
        let mut staged = Staged::new(self.cache_dir(), entries)?;
        let reading = Reading { root_fd: &root_fd, c, opts };
        let mut subtrees: BTreeMap<Vec<u8>, ObjectId> = BTreeMap::new();
        let (mut below, mut warnings) = (Counts::default(), Vec::new());
        for batch in batches {
            self.check_deadline("taking a snapshot in batches")?;
            let mut walked = Walked { dirs: Vec::new(), report: walk::WalkReport::default() };
            let mut roots = Vec::new();
            for rel in batch {
                match walk::walk_from(&root_fd, c.dir, &rel, &walk_opts) {
                    Ok(w) => {
                        let at = walked.append(w);
                        roots.push((rel, at));
                    }
                    // Gone or replaced since it was counted: the walk above takes what is there.
                    Err(e) if e.kind() == ErrorKind::Io || e.kind() == ErrorKind::NotFound => {
                        tracing::debug!(dir = %crate::base::path::display(&rel), error = %e, "left to the walk above the batches");
                    }
                    Err(e) => return Err(e),
                }
            }
            if walked.dirs.is_empty() {
                continue;
            }
            let mut outcomes = Outcomes::new();
            let classified = classify(conn, &walked, DirCacheMap::default(), opts.use_stat_cache, &mut outcomes)?;
            let (mut stored, trees, built, counts) =
                self.read_and_build(&reading, &staged, &mut walked, &classified, &mut outcomes, &mut warnings)?;
            staged.add_packs(std::mem::take(&mut stored.packs))?;
            staged.add_chunk_lists(new_chunk_lists(&outcomes).map(|(id, c)| (*id, c.to_vec())).collect());
            for (rel, at) in roots {
                let tree =
                    built.ids.get(at).copied().ok_or_else(|| Error::internal("a batch's subtree was not built"))?;
                subtrees.insert(rel, tree);
            }
            keep_records(&mut spill, c.name, &records(&walked, &classified, &outcomes, &built));
            drop((walked, classified, built));
            staged.add_trees(&stored_trees(&trees)?)?;
            drop(trees);
            // Only loose objects (a small batch's, against a parent) are recorded now: they are
            // stored and indexed at once, and nothing the manifest holds names them yet.
            if !stored.loose.is_empty() {
                self.manifest.write(|tx| self.store_rows(tx, &stored, &Outcomes::new(), &[], now_ns()).map(|_| ()))?;
            }
            crate::base::failpoint::failpoint("snapshot:batch-recorded");
            add(&mut below, &counts);
        }

        // The directories above the batches: each subtree a batch took is a directory whose tree
        // is known, walked no further.
        let stop: BTreeSet<Vec<u8>> = subtrees.keys().cloned().collect();
        let upper_opts =
            walk::WalkOptions { stop_at: Some(&stop), ..walk::WalkOptions::new(c.excludes, self.deadline()) };
        let mut walked = walk::walk(&root_fd, c.dir, &upper_opts)?;
        let mut outcomes = Outcomes::new();
        let mut classified = classify(conn, &walked, DirCacheMap::default(), opts.use_stat_cache, &mut outcomes)?;
        let mut stopped = 0;
        for (i, dir) in walked.dirs.iter().enumerate().skip(1) {
            if let (Some(tree), true) = (subtrees.get(&dir.rel), dir.children.is_empty()) {
                if let Some(kept) = classified.kept.get_mut(i) {
                    *kept = Some(*tree);
                    stopped += 1;
                }
            }
        }
        // A subtree a batch took that is gone now (or no longer a directory) would leave its
        // counts and warnings behind: the tree changed under the snapshot, and one walk takes it.
        if stopped != subtrees.len() {
            tracing::info!(
                workspace = c.name,
                batched = subtrees.len(),
                found = stopped,
                "the tree changed during a snapshot in batches: one walk takes it"
            );
            // What the batches packed is indexed first, so that the walk finds it stored rather
            // than pack it again; nothing reaches it until that walk commits.
            self.manifest.write(|tx| staged.record_objects(tx, now_ns(), |key| self.pack_still_there(key)))?;
            return Ok(None);
        }
        let (stored, trees, built, mut counts) =
            self.read_and_build(&reading, &staged, &mut walked, &classified, &mut outcomes, &mut warnings)?;
        add(&mut counts, &below);
        let root = built.root;
        keep_records(&mut spill, c.name, &records(&walked, &classified, &outcomes, &built));
        drop((walked, classified, built));
        // Against a parent, the commit counts what changed: the batches' trees are readable
        // only in its transaction.
        if c.parent.is_none() {
            counts.added = counts.files;
        }
        let trees_stored = stored_trees(&trees)?;
        drop(trees);
        let taken = Taken { dir: c.dir, name: c.name, parent: c.parent, root, counts, warnings, staged: Some(&staged) };
        let info = self.commit(taken, &stored, &outcomes, &trees_stored, opts)?;
        // After the commit, as on the whole walk's path: a failure costs the next snapshot reads.
        if let (Some(cache), Some(mut spill)) = (cache, spill) {
            if let Err(e) =
                replay_records(&mut spill, |chunk| cache.write(|c| record_dirs(c, &info.workspace, chunk, &[])))
            {
                tracing::warn!(workspace = %info.workspace, error = %e, "the directory cache was not updated: the next snapshot reads the files again");
            }
        }
        Ok(Some(info))
    }
}

/// Makes `cache` current for the manifest `conn` (one built against another generation, or
/// new, is emptied and marked with the current one, as a walk's load of records does: records
/// written into it otherwise would be dropped unread by the next snapshot); returns whether it
/// holds records of `workspace` to go by (when `use_records`), for the whole walk to use.
fn cache_for_batches(cache: &NodeCache, conn: &Connection, workspace: &str, use_records: bool) -> Result<bool> {
    let generation = dir_cache::generation(conn)?;
    if cache.generation()? != Some(generation) {
        cache.reset(generation)?;
        return Ok(false);
    }
    Ok(use_records && dir_cache::any(cache.conn(), workspace)?)
}

/// Adds `records` to `spill`; a failure to write them is logged and the rest of the snapshot's
/// records are given up (the next snapshot reads the files again), not the snapshot.
fn keep_records(spill: &mut Option<Spill<16>>, workspace: &str, records: &[(DirKey, Vec<u8>)]) {
    if let Some(s) = spill {
        if let Err(e) = records.iter().try_for_each(|(key, record)| s.push(key, record)) {
            tracing::warn!(workspace, error = %e, "this snapshot's directory records are not kept: the next one reads the files again");
            *spill = None;
        }
    }
}

/// Every spilled directory record, in chunks of at most `RECORDS_PER_WRITE`, to `f`.
fn replay_records(spill: &mut Spill<16>, mut f: impl FnMut(&[(DirKey, Vec<u8>)]) -> Result<()>) -> Result<()> {
    spill.flush()?;
    let mut chunk = Vec::with_capacity(RECORDS_PER_WRITE);
    spill.replay(|key, record| {
        chunk.push((key, record));
        if chunk.len() == RECORDS_PER_WRITE {
            f(&chunk)?;
            chunk.clear();
        }
        Ok(())
    })?;
    if chunk.is_empty() {
        Ok(())
    } else {
        f(&chunk)
    }
}

impl Repo {
    /// Step 3 for the files of `walked` that `classified` left pending (their outcomes in
    /// `outcomes`; the warnings of the walk and the reads added to `warnings`; what the batches
    /// before staged not stored again), then its trees: what was stored, the trees encoded,
    /// every directory's tree id, the counts.
    fn read_and_build(
        &self,
        r: &Reading<'_>,
        staged: &Staged,
        walked: &mut Walked,
        classified: &Classified,
        outcomes: &mut Outcomes,
        warnings: &mut Vec<Warning>,
    ) -> Result<(Stored, Built, BuiltIds, Counts)> {
        let (mut read_warnings, stored) = self.read_pending(&r.read_of(staged), walked, outcomes)?;
        warnings.append(&mut read_warnings);
        let mut counts = Counts { skipped: walked.report.skipped, ..Counts::default() };
        let mut trees = Built::default();
        let built = build(walked, classified, outcomes, &mut trees, &mut counts)?;
        Ok((stored, trees, built, counts))
    }
}

/// What every batch reads with: the tree's root, what the snapshot is of, its options.
struct Reading<'a> {
    root_fd: &'a OwnedFd,
    c: &'a Cold<'a>,
    opts: &'a super::SnapshotOptions<'a>,
}

impl<'a> Reading<'a> {
    /// A read of one batch, beside what the batches before it staged.
    fn read_of(&self, staged: &'a Staged) -> ReadOf<'a> {
        ReadOf { staged: Some(staged), ..ReadOf::new(self.root_fd, self.c.scan_start, self.c.parent, self.opts) }
    }
}

/// `from`'s counts of entries added to `to`'s (what each batch built).
fn add(to: &mut Counts, from: &Counts) {
    to.files += from.files;
    to.dirs += from.dirs;
    to.symlinks += from.symlinks;
    to.bytes += from.bytes;
    to.skipped += from.skipped;
}
