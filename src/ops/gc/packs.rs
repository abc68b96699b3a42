//! Garbage collection's packs: packs no index row points into are retired; packs whose dead
//! bytes pass the threshold have their live blobs copied (verbatim, or a bundle rebuilt from
//! its live members) into new packs and are retired; retired packs and pack files the index
//! never knew (a crash's leftovers) are deleted once nothing in flight can still hold a
//! location in them.
//!
//! With a level to recompress at, packs compressed below it are rewritten too, their blobs
//! encoded again at it.
//!
//! A bundle is one blob: while any member lives, the bytes of its dead members stay in it.
//! The sweep counts them (`bundle_dead`), the pack's dead share includes them, and a rewrite
//! rebuilds any bundle whose header says it holds more than its live members from those (one
//! left is stored alone) instead of copying it: without that, every file an agent ever changed
//! would keep its first version in the bundle of its unchanged siblings for good.
//!
//! Order, for crashes: new packs are durable before the transaction that points the index at
//! them (a crash before it leaves orphans, reclaimed later); a retired pack's file is deleted
//! inside the transaction deleting its row (a crash between leaves a retired row without its
//! file, which nothing points into and the next collection deletes), and an orphan's inside
//! one that finds the index still without it. A snapshot checks its packs' files in its own
//! transaction, so it never commits a pack deleted under it (packs are named by their bytes,
//! which a writer can produce again).

use std::collections::BTreeMap;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::failpoint::failpoint;
use crate::base::time::now_ns;
use crate::manifest::{gc, objects};
use crate::object::pack::{PackedObject, HEADER_LEN};
use crate::object::{blob, ObjectId, PackWriter};
use crate::repo::Repo;

use super::{GcOptions, GcReport};

/// Live bytes copied into one run of new packs at most, so a rewrite holds a bounded amount
/// in memory (the writer keeps about four packs of the target size besides).
const REPACK_RUN: u64 = 256 << 20;

impl Repo {
    /// Retires, rewrites and deletes packs (see the module docs); `fresh`, the packs this
    /// collection wrote gathering loose objects, are never rewritten by it.
    pub(super) fn gc_packs(&self, opts: &GcOptions, report: &mut GcReport, fresh: &[String]) -> Result<()> {
        let conn = self.manifest.conn();
        // Packs nothing points into any more.
        self.manifest.write(|tx| {
            let in_use = gc::packs_in_use(tx)?;
            let epoch = gc::new_epoch(tx, report.now())?;
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
                p.live > 0 && (sparse || below(p)) && !fresh.contains(&p.name)
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
    /// retires the old packs. A bundle holding dead members is rebuilt from its live ones. With
    /// `recompress`, the other blobs of a pack compressed below that level are encoded again at
    /// it (kept as they are where that is no smaller); the rest are copied verbatim.
    fn repack(&self, packs: &[gc::PackUse], recompress: Option<i32>, report: &mut GcReport) -> Result<()> {
        let ids: Vec<i64> = packs.iter().map(|p| p.id).collect();
        let blobs = self.manifest.read(|| gc::pack_blobs(self.manifest.conn(), &ids))?;
        let base = self.config.zstd_level;
        // Per pack: its key, the level to encode its blobs at (None: copied verbatim), and the
        // level its blobs are at (a rebuilt bundle keeps it unless recompressed).
        let sources: BTreeMap<i64, (&str, Option<i32>, i32)> = packs
            .iter()
            .map(|p| {
                let own = p.level.unwrap_or(base);
                (p.id, (p.name.as_str(), recompress.filter(|l| own < *l), own))
            })
            .collect();
        // Each blob copied whole: (old pack, old offset, the id of one object in it).
        let mut moved: Vec<(i64, u64, ObjectId)> = Vec::new();
        // Each rebuilt bundle: (old pack, old offset, its members' ids); their rows move one by
        // one (each member's offset in the bundle changed).
        let mut rebuilt: Vec<(i64, u64, Vec<ObjectId>)> = Vec::new();
        let ((), sealed) =
            PackWriter::run_in(self.backend.as_ref(), &self.packs_dir(), self.config.pack_target as usize, |writer| {
                // Blobs are read a batch at a time, encoded again on every core, and added in order.
                let mut batch: Vec<Rewrite<'_>> = Vec::new();
                let mut batch_bytes = 0u64;
                let all = blobs.iter().flat_map(|(pack, list)| list.iter().map(move |b| (*pack, b)));
                let mut all = all.peekable();
                while let Some((pack, (offset, stored_len, members))) = all.next() {
                    self.check_deadline("rewriting packs")?;
                    let &(name, level, own_level) =
                        sources.get(&pack).ok_or_else(|| Error::internal("a pack to rewrite vanished"))?;
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
                    let rebuild = has_dead_members(&read, members);
                    batch.push(Rewrite {
                        pack,
                        name,
                        offset: *offset,
                        members,
                        read,
                        level,
                        own_level,
                        rebuild,
                        encoded: None,
                        rebuilt: None,
                        damaged: false,
                    });
                    if batch_bytes < REENCODE_BATCH && all.peek().is_some() {
                        continue;
                    }
                    reencode_batch(&mut batch)?;
                    for c in batch.drain(..) {
                        if c.damaged {
                            // Not copied beside healthy blobs, where it would make the new pack
                            // unscannable: left in its pack, which stays in use.
                            report.blobs_left += 1;
                            continue;
                        }
                        if let Some(new) = &c.rebuilt {
                            match new.members.as_slice() {
                                [(id, raw_len, _)] => writer.add(*id, *raw_len, &new.encoded)?,
                                rows => writer.add_bundle(rows, &new.encoded)?,
                            }
                            report.bundles_rebuilt += 1;
                            rebuilt.push((c.pack, c.offset, new.members.iter().map(|m| m.0).collect()));
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
            let epoch = gc::new_epoch(tx, report.now())?;
            let mut at: BTreeMap<ObjectId, (i64, &PackedObject)> = BTreeMap::new();
            for p in &sealed {
                // Its objects' rows are moved to it below, not inserted.
                let id = objects::record_pack(tx, p, now_ns(), level)?;
                for o in &p.objects {
                    at.insert(o.id, (id, o));
                }
            }
            let missing = || Error::internal("a copied blob is not in the new packs");
            for (old, offset, first) in &moved {
                let &(new, o) = at.get(first).ok_or_else(missing)?;
                gc::move_blob(tx, *old, *offset, new, o.offset, o.stored_len)?;
            }
            for (old, offset, ids) in &rebuilt {
                // A bundle goes to one pack whole: its first member's is every member's.
                let &(pack, _) = ids.first().and_then(|id| at.get(id)).ok_or_else(missing)?;
                let placed = ids.iter().map(|id| at.get(id).map(|&(_, o)| o).ok_or_else(missing));
                gc::move_members(tx, *old, *offset, pack, placed.collect::<Result<Vec<_>>>()?)?;
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
        let horizon = self.gc_sweep_horizon(opts.grace, report)?;
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
        let files = self.backend.list(&self.packs_dir())?;
        let known = gc::pack_names(conn)?;
        let orphans: Vec<&String> = files.iter().filter(|f| f.ends_with(".pack") && !known.contains(*f)).collect();
        let seen: BTreeMap<String, i64> = gc::orphans(conn)?.into_iter().collect();
        // The listing came first, then the epoch that notes it: a writer in flight took its
        // lease (and the epoch then) before it wrote the file, so before this epoch.
        self.manifest.write(|tx| {
            let epoch = gc::new_epoch(tx, report.now())?;
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
        let horizon = self.gc_sweep_horizon(opts.grace, report)?;
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
    /// The level its pack's blobs are at.
    own_level: i32,
    /// A bundle with dead members, to rebuild from its live ones.
    rebuild: bool,
    /// Its new encoding, where one was made and is smaller.
    encoded: Option<Vec<u8>>,
    /// The rebuilt bundle, when `rebuild`.
    rebuilt: Option<Rebuilt>,
    /// It did not decode or verify, so it is not copied.
    damaged: bool,
}

/// Threads encoding a batch at most: a server's maintenance shares the machine with requests.
const REENCODE_THREADS: usize = 4;

/// Whether `read` is a bundle holding more than `members` (the rows still pointing into it):
/// its header's raw length against their lengths and the table they need. Told by the blob
/// itself, so a rewrite drops dead members whenever it meets them, also those of repositories
/// older than the dead counts that choose the packs to rewrite.
fn has_dead_members(read: &[u8], members: &[(ObjectId, u64, Option<u64>)]) -> bool {
    let Ok(header) = blob::parse_header(read) else { return false };
    // Lengths from the index: a damaged row's must not overflow (such a bundle is copied as it
    // is, for `check` to report).
    let live = members.iter().try_fold(blob::bundle_table_len(members.len()) as u64, |sum, m| sum.checked_add(m.1));
    header.kind == blob::Kind::Bundle
        && members.iter().all(|m| m.2.is_some())
        && live.is_some_and(|l| header.raw_len > l)
}

/// A bundle rebuilt from its live members: its encoding and its members (id, raw length,
/// offset in the new bundle). One member left is an object stored alone.
struct Rebuilt {
    encoded: Vec<u8>,
    members: Vec<(ObjectId, u64, u64)>,
}

/// Rebuilds the bundle `c` read from its live members, each checked against its id first (a
/// new bundle must not vouch for damaged bytes), encoded at the level asked or its pack's.
fn rebuild(c: &Rewrite<'_>) -> Result<Rebuilt> {
    let (header, raw) = blob::decode_unverified(&c.read)?;
    if header.kind != blob::Kind::Bundle {
        return Err(Error::corrupt("the index has it as a bundle, but its header says it is an object"));
    }
    let mut live: Vec<(u64, ObjectId, &[u8])> = Vec::with_capacity(c.members.len());
    for &(id, raw_len, inner) in c.members {
        let start = inner.unwrap_or(0);
        let bytes = start
            .checked_add(raw_len)
            .and_then(|end| raw.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?))
            .ok_or_else(|| Error::corrupt(format!("member {id} lies past the bundle's end")))?;
        if ObjectId::of(bytes) != id {
            return Err(Error::corrupt(format!("member {id} does not hash to its id")));
        }
        live.push((start, id, bytes));
    }
    // In their old order (the snapshot's path order), not the index's id order: siblings stay
    // together for restores and for reads that decode a bundle up to a member.
    live.sort_by_key(|m| m.0);
    let level = c.level.unwrap_or(c.own_level);
    match live.as_slice() {
        [(_, id, bytes)] => {
            Ok(Rebuilt { encoded: blob::encode(id, bytes, level)?, members: vec![(*id, bytes.len() as u64, 0)] })
        }
        _ => {
            let slices: Vec<&[u8]> = live.iter().map(|m| m.2).collect();
            let (encoded, offsets) = blob::encode_bundle(&slices, level)?;
            let members = live.iter().zip(offsets).map(|((_, id, bytes), at)| (*id, bytes.len() as u64, at)).collect();
            Ok(Rebuilt { encoded, members })
        }
    }
}

impl Rewrite<'_> {
    /// Rebuilds it (a bundle with dead members), or encodes it again at its level, keeping the
    /// new encoding where it is smaller; does nothing to a blob copied verbatim.
    fn encode_again(&mut self) -> Result<()> {
        if self.rebuild {
            self.rebuilt = Some(rebuild(self)?);
        } else if let Some(level) = self.level {
            let mut out = Vec::new();
            if blob::reencode(&self.read, level, &mut out)? {
                self.encoded = Some(out);
            }
        }
        Ok(())
    }
}

/// Encodes again the blobs of `batch` that have a level, and rebuilds its bundles with dead
/// members, on a thread per core (at most [`REENCODE_THREADS`]). A blob that does not decode
/// or verify is marked damaged and logged: it stays in its pack for `check` to report and
/// `repair` to mend.
fn reencode_batch(batch: &mut [Rewrite<'_>]) -> Result<()> {
    if batch.iter().all(|c| c.level.is_none() && !c.rebuild) {
        return Ok(());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(REENCODE_THREADS).min(batch.len()).max(1);
    let share = batch.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = batch
            .chunks_mut(share)
            .map(|part| {
                scope.spawn(move || -> Result<()> {
                    for c in part {
                        match c.encode_again() {
                            Ok(()) => {}
                            Err(e) if e.kind() == ErrorKind::Corrupt => {
                                c.damaged = true;
                                tracing::warn!(
                                    pack = c.name,
                                    offset = c.offset,
                                    error = %e,
                                    "a blob does not decode or verify; left in its pack, not rewritten"
                                )
                            }
                            // Not the blob's fault (the compressor failed): the rewrite stops.
                            Err(e) => {
                                return Err(e.context(format!("rewriting the blob at {} of pack {}", c.offset, c.name)))
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().map_err(|_| Error::internal("a rewrite thread panicked"))?)
    })
}
