//! Garbage collection's packs: packs no index row points into are retired; packs whose dead
//! bytes pass the threshold have their live blobs copied, verbatim, into new packs and are
//! retired; retired packs and pack files the index never knew (a crash's leftovers) are
//! deleted once nothing in flight can still hold a location in them.
//!
//! With a level to recompress at, packs compressed below it are rewritten too, their blobs
//! encoded again at it.
//!
//! Order, for crashes: new packs are durable before the transaction that points the index at
//! them (a crash before it leaves orphans, reclaimed later); a retired pack's file is deleted
//! inside the transaction deleting its row (a crash between leaves a retired row without its
//! file, which nothing points into and the next collection deletes), and an orphan's inside
//! one that finds the index still without it. A snapshot checks its packs' files in its own
//! transaction, so it never commits a pack deleted under it (packs are named by their bytes,
//! which a writer can produce again).

use std::collections::BTreeMap;

use crate::base::error::{Error, Result};
use crate::base::failpoint::failpoint;
use crate::base::time::now_ns;
use crate::manifest::{gc, objects};
use crate::object::pack::HEADER_LEN;
use crate::object::{blob, ObjectId, PackWriter};
use crate::repo::Repo;

use super::{GcOptions, GcReport};

/// Live bytes copied into one run of new packs at most, so a rewrite holds a bounded amount
/// in memory (the writer keeps about four packs of the target size besides).
const REPACK_RUN: u64 = 256 << 20;

impl Repo {
    /// Retires, rewrites and deletes packs (see the module docs).
    pub(super) fn gc_packs(&self, opts: &GcOptions, report: &mut GcReport) -> Result<()> {
        let conn = self.manifest.conn();
        // Packs nothing points into any more.
        self.manifest.write(|tx| {
            let in_use = gc::packs_in_use(tx)?;
            let epoch = gc::new_epoch(tx, now_ns())?;
            for p in gc::pack_use(tx)? {
                if !in_use.contains(&p.id) {
                    gc::retire_pack(tx, p.id, epoch)?;
                }
            }
            Ok(())
        })?;
        // Packs mostly dead, and with `recompress`, packs compressed below its level.
        let base = self.config.zstd_level;
        let below = |p: &gc::PackUse| opts.recompress.is_some_and(|l| p.level.unwrap_or(base) < l);
        let chosen: Vec<gc::PackUse> = gc::pack_use(conn)?
            .into_iter()
            .filter(|p| {
                let body = p.size.saturating_sub(HEADER_LEN).max(1);
                let sparse = (body.saturating_sub(p.live)) as f64 / body as f64 > opts.repack_threshold;
                p.live > 0 && (sparse || below(p))
            })
            .collect();
        report.packs_recompressed += chosen.iter().filter(|p| below(p)).count() as u64;
        let mut run: Vec<gc::PackUse> = Vec::new();
        let mut run_bytes = 0u64;
        for p in chosen {
            run_bytes += p.live;
            run.push(p);
            if run_bytes >= REPACK_RUN {
                self.repack(&std::mem::take(&mut run), opts.recompress, report)?;
                run_bytes = 0;
            }
        }
        if !run.is_empty() {
            self.repack(&run, opts.recompress, report)?;
        }
        failpoint("gc:repacked");
        self.delete_retired(opts, report)?;
        self.delete_orphans(opts, report)?;
        // Net of the copies: the packs they replace are only deleted once nothing in flight can
        // read them, in this collection or a later one.
        report.bytes_reclaimed = report.bytes_reclaimed.saturating_sub(report.pack_bytes_written);
        Ok(())
    }

    /// Copies the live blobs of `packs` into new packs, points the index at the copies, and
    /// retires the old packs. With `recompress`, the blobs of a pack compressed below that level
    /// are encoded again at it (kept as they are where that is no smaller); the others are
    /// copied verbatim.
    fn repack(&self, packs: &[gc::PackUse], recompress: Option<i32>, report: &mut GcReport) -> Result<()> {
        let ids: Vec<i64> = packs.iter().map(|p| p.id).collect();
        let blobs = self.manifest.read(|| gc::pack_blobs(self.manifest.conn(), &ids))?;
        let base = self.config.zstd_level;
        // Per pack: its key, and the level to encode its blobs at (None: copied verbatim).
        let sources: BTreeMap<i64, (&str, Option<i32>)> = packs
            .iter()
            .map(|p| (p.id, (p.name.as_str(), recompress.filter(|l| p.level.unwrap_or(base) < *l))))
            .collect();
        // Each copied blob: (old pack, old offset, the id of one object in it).
        let mut moved: Vec<(i64, u64, ObjectId)> = Vec::new();
        let ((), sealed) = PackWriter::run(self.backend.as_ref(), self.config.pack_target as usize, |writer| {
            // Blobs are read a batch at a time, encoded again on every core, and added in order.
            let mut batch: Vec<Rewrite<'_>> = Vec::new();
            let mut batch_bytes = 0u64;
            let all = blobs.iter().flat_map(|(pack, list)| list.iter().map(move |b| (*pack, b)));
            let mut all = all.peekable();
            while let Some((pack, (offset, stored_len, members))) = all.next() {
                self.check_deadline("rewriting packs")?;
                let &(name, level) = sources.get(&pack).ok_or_else(|| Error::internal("a pack to rewrite vanished"))?;
                let read = match self.backend.get_range(name, *offset, *stored_len) {
                    Ok(read) => read,
                    // Left where it is (its pack stays in use): `check` reports it, `repair`
                    // mends it, and the rest of the collection goes on.
                    Err(e) => {
                        tracing::warn!(pack = name, offset, error = %e, "a blob cannot be read; left in its pack");
                        report.blobs_left += 1;
                        continue;
                    }
                };
                batch_bytes += read.len() as u64;
                batch.push(Rewrite {
                    pack,
                    name,
                    offset: *offset,
                    members,
                    read,
                    level,
                    encoded: None,
                    damaged: false,
                });
                if batch_bytes < REENCODE_BATCH && all.peek().is_some() {
                    continue;
                }
                reencode_batch(&mut batch);
                for c in batch.drain(..) {
                    if c.damaged {
                        // Not copied beside healthy blobs, where it would make the new pack
                        // unscannable: left in its pack, which stays in use.
                        report.blobs_left += 1;
                        continue;
                    }
                    // Verbatim, or encoded again from its verified raw bytes: either way the
                    // blob's header names its id and lengths, checked on every read.
                    let bytes = c.encoded.as_deref().unwrap_or(&c.read);
                    match c.members.as_slice() {
                        [(id, raw_len, None)] => writer.add(*id, *raw_len, bytes)?,
                        _ => {
                            let rows: Vec<(ObjectId, u64, u64)> =
                                c.members.iter().map(|&(id, len, inner)| (id, len, inner.unwrap_or(0))).collect();
                            writer.add_bundle(&rows, bytes)?;
                        }
                    }
                    if let Some(first) = c.members.first() {
                        moved.push((c.pack, c.offset, first.0));
                    }
                }
                batch_bytes = 0;
            }
            Ok(())
        })?;
        failpoint("gc:repack-written");
        let new_bytes: u64 = sealed.iter().map(|p| p.size).sum();
        // What the new packs' blobs are compressed at, at least: the level they were encoded
        // at, or the lowest of their sources' (unknown if one is the repository's own).
        let level =
            recompress.or_else(|| packs.iter().map(|p| p.level).collect::<Option<Vec<i32>>>()?.into_iter().min());
        self.manifest.write(|tx| {
            let epoch = gc::new_epoch(tx, now_ns())?;
            let mut at: BTreeMap<ObjectId, (i64, u64, u64)> = BTreeMap::new();
            for p in &sealed {
                // Its objects' rows are moved to it below, not inserted.
                let id = objects::record_pack(tx, p, now_ns(), level)?;
                for o in &p.objects {
                    at.insert(o.id, (id, o.offset, o.stored_len));
                }
            }
            for (old, offset, first) in &moved {
                let &(new, new_offset, stored_len) =
                    at.get(first).ok_or_else(|| Error::internal("a copied blob is not in the new packs"))?;
                gc::move_blob(tx, *old, *offset, new, new_offset, stored_len)?;
            }
            let in_use = gc::packs_in_use(tx)?;
            for p in packs {
                if !in_use.contains(&p.id) {
                    gc::retire_pack(tx, p.id, epoch)?;
                }
            }
            Ok(())
        })?;
        report.packs_rewritten += packs.len() as u64;
        report.pack_bytes_written += new_bytes;
        Ok(())
    }

    /// Deletes retired packs past the horizon: the row, then the file.
    fn delete_retired(&self, opts: &GcOptions, report: &mut GcReport) -> Result<()> {
        let horizon = self.gc_horizon(opts.grace, report)?;
        for (id, name, size, retired) in gc::retired_packs(self.manifest.conn())? {
            if retired > horizon {
                continue;
            }
            // The file goes inside the transaction that deletes the row, and only if the row
            // was still retired: a snapshot that wrote the same bytes again (a pack is named by
            // them) either committed first, taking the row back, or commits after and finds its
            // file gone (it checks in its own transaction) and fails, storing nothing.
            let deleted = self.manifest.write(|tx| {
                if !gc::delete_pack(tx, id)? {
                    return Ok(false);
                }
                failpoint("gc:pack-row-deleted");
                self.backend.delete(&name)?;
                failpoint("gc:pack-file-deleted");
                Ok(true)
            })?;
            if deleted {
                report.packs_deleted += 1;
                report.bytes_reclaimed += size;
            }
        }
        Ok(())
    }

    /// Notes pack files the index does not know, and deletes those noted in an epoch past the
    /// horizon: their writer (a snapshot or a rewrite) either committed since, or is gone.
    fn delete_orphans(&self, opts: &GcOptions, report: &mut GcReport) -> Result<()> {
        let conn = self.manifest.conn();
        let files = self.backend.list("packs/")?;
        let known = gc::pack_names(conn)?;
        let orphans: Vec<&String> = files.iter().filter(|f| f.ends_with(".pack") && !known.contains(*f)).collect();
        let seen: BTreeMap<String, i64> = gc::orphans(conn)?.into_iter().collect();
        // The listing came first, then the epoch that notes it: a writer in flight took its
        // lease (and the epoch then) before it wrote the file, so before this epoch.
        self.manifest.write(|tx| {
            let epoch = gc::new_epoch(tx, now_ns())?;
            for f in &orphans {
                gc::note_orphan(tx, f, epoch)?;
            }
            for name in seen.keys() {
                if !orphans.contains(&name) {
                    gc::forget_orphan(tx, name)?;
                }
            }
            Ok(())
        })?;
        let horizon = self.gc_horizon(opts.grace, report)?;
        for (name, epoch) in gc::orphans(conn)? {
            if epoch > horizon {
                continue;
            }
            // Its writer may have committed it since it was noted (and ended, taking its lease
            // away): then it is no orphan. Checked and deleted in one transaction, so a writer
            // committing the same bytes (a snapshot run again after a crash) is not cut short.
            let size = self.backend.size(&name).unwrap_or(0);
            let deleted = self.manifest.write(|tx| {
                let orphan = !gc::pack_known(tx, &name)?;
                if orphan {
                    self.backend.delete(&name)?;
                }
                gc::forget_orphan(tx, &name)?;
                Ok(orphan)
            })?;
            if deleted {
                report.orphans_deleted += 1;
                report.bytes_reclaimed += size;
            }
        }
        Ok(())
    }
}

/// Bytes of blobs a rewrite reads before encoding them again: bounds what it holds (these and
/// their new encodings) while giving every core a share.
const REENCODE_BATCH: u64 = 16 << 20;

/// A blob being rewritten: copied verbatim, or encoded again at a level.
struct Rewrite<'a> {
    pack: i64,
    name: &'a str,
    offset: u64,
    /// The objects in it: (id, raw length, offset inside a bundle).
    members: &'a Vec<(ObjectId, u64, Option<u64>)>,
    /// Its stored bytes.
    read: Vec<u8>,
    /// The level to encode it at again; None: copied verbatim.
    level: Option<i32>,
    /// Its new encoding, where one was made and is smaller.
    encoded: Option<Vec<u8>>,
    /// It did not decode or verify, so it is not copied.
    damaged: bool,
}

/// Threads encoding a batch at most: a server's maintenance shares the machine with requests.
const REENCODE_THREADS: usize = 4;

/// Encodes again the blobs of `batch` that have a level, on a thread per core (at most
/// [`REENCODE_THREADS`]). A blob that does not decode or verify is marked damaged and logged:
/// it stays in its pack for `check` to report and `repair` to mend.
fn reencode_batch(batch: &mut [Rewrite<'_>]) {
    if batch.iter().all(|c| c.level.is_none()) {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(REENCODE_THREADS).min(batch.len()).max(1);
    let share = batch.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for part in batch.chunks_mut(share) {
            scope.spawn(move || {
                for c in part {
                    let Some(level) = c.level else { continue };
                    let mut out = Vec::new();
                    match blob::reencode(&c.read, level, &mut out) {
                        Ok(true) => c.encoded = Some(out),
                        Ok(false) => {}
                        Err(e) => {
                            c.damaged = true;
                            tracing::warn!(
                                pack = c.name,
                                offset = c.offset,
                                error = %e,
                                "a blob does not decode; left in its pack, not recompressed"
                            )
                        }
                    }
                }
            });
        }
    });
}
