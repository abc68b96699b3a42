//! Garbage collection: what no snapshot, trash item, recent audit record or journaled plan
//! reaches is condemned, and deleted once it is still unreached and nothing in
//! flight can have seen it as present; packs that are mostly dead are rewritten; pack files
//! nothing indexes are deleted after the same wait (ARCHITECTURE.md, "Garbage collection").
//!
//! It takes no lock that snapshots, tool writes or restores wait on: each step is a short
//! transaction of its own (batches of a few thousand rows), and the marks live in the
//! connection's temporary tables. Only one collection runs at a time (`gc.lock`).
//!
//! Stages, each safe to stop after (a crash leaves at worst rows condemned, or files a later
//! collection reclaims): mark (`mark.rs`); delete what an earlier pass condemned and this mark
//! still does not reach; condemn what it newly does not reach (and clear the condemnation of
//! what it reaches again); gather live whole loose objects into packs (`gather.rs`); retire empty
//! packs and rewrite sparse ones (`packs.rs`); delete the files of retired and orphan packs. What one pass condemns the next deletes: with no grace
//! period, one collection runs two passes.

mod dry;
mod fleet;
mod gather;
mod mark;
mod packs;

use std::time::Duration;

use serde::Serialize;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::failpoint::failpoint;
use crate::base::process;
use crate::base::time::now_ns;
use crate::manifest::gc::{self, Kind};
use crate::model::audit::AuditRecord;
use crate::repo::Repo;

pub use mark::Marked;

/// Rows condemned or deleted in one write transaction.
const BATCH: usize = 4096;
/// The grace period when none is given: an hour, as rustic's prune.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);
/// A pack whose dead bytes pass this fraction is rewritten.
pub const DEFAULT_REPACK_THRESHOLD: f64 = 0.10;

/// How a collection runs.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Change nothing: the collection runs on a copy of the manifest over a store that writes
    /// and deletes nothing, and reports what it would have done (`gc/dry.rs`).
    pub dry_run: bool,
    /// What is condemned is deleted no sooner than this after its condemnation.
    pub grace: Duration,
    /// Packs whose dead fraction passes this are rewritten (0.10: 10%).
    pub repack_threshold: f64,
    /// Who runs it, for the audit record.
    pub actor: String,
    /// Rewrite the manifest whole at the end (`VACUUM`): gives back its free pages when it
    /// was made without incremental auto-vacuum, and blocks writers while it runs.
    pub vacuum: bool,
    /// Rewrite the packs compressed below this zstd level (1-19), every live blob decoded and
    /// encoded again at it: snapshots compress fast, and this buys the size back later, as
    /// `git gc` does for loose objects. None: no pack is rewritten for its level.
    pub recompress: Option<i32>,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            grace: DEFAULT_GRACE,
            repack_threshold: DEFAULT_REPACK_THRESHOLD,
            actor: "library".into(),
            vacuum: false,
            recompress: None,
        }
    }
}

/// Counts by kind of stored thing.
#[derive(Debug, Clone, Copy, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KindCounts {
    /// Packed objects.
    pub objects: u64,
    /// Loose objects (the file tools' pre-images and contents, small snapshots' files).
    pub loose: u64,
    /// Trees.
    pub trees: u64,
    /// Chunk lists of big files' contents.
    pub chunk_lists: u64,
}

impl KindCounts {
    fn add(&mut self, kind: Kind, n: u64) {
        match kind {
            Kind::Object => self.objects += n,
            Kind::Loose => self.loose += n,
            Kind::Tree => self.trees += n,
            Kind::ChunkList => self.chunk_lists += n,
        }
    }
}

/// What a collection found and did.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    /// Nothing was changed.
    pub dry_run: bool,
    /// What the roots reach.
    pub reachable: Marked,
    /// What they do not reach.
    pub unreachable: KindCounts,
    /// Newly condemned by this collection.
    pub condemned: KindCounts,
    /// Condemned before, reached again: no longer condemned.
    pub resurrected: u64,
    /// Deleted from the manifest.
    pub deleted: KindCounts,
    /// Condemned and unreached but kept for now: within the grace period, or an operation in
    /// flight began before they were condemned.
    pub waiting: u64,
    /// Operations in flight (leases of live processes).
    pub in_flight: u64,
    /// Leases of processes that are gone, removed.
    pub stale_leases: u64,
    /// In a bucket, tool changes another host began over a week ago and never closed, whose
    /// stored contents are kept for them no longer (`PLAN_ROOTS_KEPT_NS`).
    pub abandoned_plans: u64,
    /// Packs rewritten: most of them was dead, or they were compressed below `recompress`.
    pub packs_rewritten: u64,
    /// Of those, packs rewritten to be compressed at the `recompress` level.
    pub packs_recompressed: u64,
    /// Bundles with dead members a rewrite rebuilt from their live ones.
    pub bundles_rebuilt: u64,
    /// Pack files deleted (emptied or rewritten ones, once nothing can still read them).
    pub packs_deleted: u64,
    /// Pack files the index did not know (left by a crash), deleted.
    pub orphans_deleted: u64,
    /// Bytes freed: deleted pack files and loose objects, less the packs written anew. In a
    /// dry run, what a run with the same options would free, counted the same way.
    pub bytes_reclaimed: u64,
    /// Loose objects gathered into packs (the manifest keeps their index rows, not their
    /// bytes).
    pub loose_gathered: u64,
    /// Bytes of the packs rewrites and gathering wrote.
    pub pack_bytes_written: u64,
    /// Blobs a rewrite could not read or decode: left in their packs (which stay) for `check`
    /// to report and `repair` to mend.
    pub blobs_left: u64,
    /// Bytes the manifest file gave back (its pages freed by deleted rows).
    pub manifest_bytes_reclaimed: u64,
    /// The newest epoch whose condemnations could be deleted.
    pub horizon: i64,
    /// In a fleet, each node's collection (this one's first): the figures above are their
    /// sums, and `horizon` this node's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeCollected>,
    /// The store's clock less this host's, in ns: a collection in a bucket dates its epochs
    /// and measures its grace period by the store's clock, which every host shares (0 in a
    /// directory, whose clock is this host's).
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) clock_offset_ns: i64,
}

/// One node's collection within a fleet's.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCollected {
    /// The node whose log was collected.
    pub node: String,
    /// What its collection found and did.
    pub report: GcReport,
}

impl GcReport {
    /// Now, by the clock the collection dates its epochs with.
    fn now(&self) -> i64 {
        now_ns().saturating_add(self.clock_offset_ns)
    }
}

/// The level `trove gc --recompress` without a level and `trove serve`'s scheduled collection
/// recompress at: on the trees measured, 86% of level 15's saving for a sixth of its CPU, and a
/// repository about as small as a `.tar.zst` of its tree.
pub const DEFAULT_RECOMPRESS: i32 = 9;

/// The highest level `recompress` takes: zstd's levels past it need windows larger than any
/// blob and memory to match.
pub const MAX_RECOMPRESS: i32 = 19;

/// How long taking the collection lock waits for a holder to let go.
const GC_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The exclusive right to collect in one repository: a `flock` on `gc.lock`, released by the
/// kernel if the process dies.
pub(crate) struct GcLock {
    _file: Option<std::fs::File>,
}

impl Repo {
    /// Takes the repository's collection lock (also taken by index repairs).
    pub(crate) fn gc_lock(&self) -> Result<GcLock> {
        self.flock_gc(true)
    }

    /// Holds the collection lock shared: no collection starts while it is held. The lease of
    /// an operation the manifest cannot record (`lease.rs`).
    pub(crate) fn gc_lock_shared(&self) -> Result<GcLock> {
        self.flock_gc(false)
    }

    fn flock_gc(&self, exclusive: bool) -> Result<GcLock> {
        let Some(root) = self.root() else { return Ok(GcLock { _file: None }) };
        let path = root.join("gc.lock");
        // A shared hold needs only to read: where the file exists, opened without writing (the
        // disk may be full, or the file system read-only).
        let file = match std::fs::File::open(&path) {
            Ok(f) if !exclusive => f,
            _ => std::fs::File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| Error::io("open", &path, e))?,
        };
        let op = if exclusive {
            rustix::fs::FlockOperation::NonBlockingLockExclusive
        } else {
            rustix::fs::FlockOperation::NonBlockingLockShared
        };
        // A lock held a moment longer than its collection: a process forked meanwhile (any
        // child this process starts) shares the descriptor until it execs. A collection that
        // really runs holds it far longer than this wait.
        let until = std::time::Instant::now() + GC_LOCK_WAIT;
        loop {
            match rustix::fs::flock(&file, op) {
                Ok(()) => return Ok(GcLock { _file: Some(file) }),
                Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(rustix::io::Errno::WOULDBLOCK) if exclusive => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        "another garbage collection, or an operation whose lease the manifest could not record (a full disk), is running in this repository: wait for it to finish",
                    ))
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        "a garbage collection is running in this repository: wait for it to finish",
                    ))
                }
                Err(e) => return Err(Error::io("lock", &path, e.into())),
            }
        }
    }

    /// Collects garbage (see the module docs). With no grace period, a second pass deletes at
    /// once what the first condemned. On a node of a fleet, every node's log is collected, one
    /// collector at a time across the fleet (`fleet.rs`).
    pub fn gc(&self, opts: &GcOptions) -> Result<GcReport> {
        self.refuse_foreign("collect garbage")?;
        if let Some(level) = opts.recompress {
            if !(1..=MAX_RECOMPRESS).contains(&level) {
                return Err(Error::invalid_argument(format!(
                    "recompression level {level} is not a zstd level from 1 to {MAX_RECOMPRESS}: give e.g. 9"
                )));
            }
        }
        if self.node().is_some() && !opts.dry_run {
            return self.gc_fleet(opts);
        }
        let report = self.gc_log(opts, None)?;
        if !report.dry_run {
            self.audit(gc_record(opts, &report))?;
        }
        Ok(report)
    }

    /// The collection of this handle's log, recorded in no audit log; `clock_offset_ns` is the
    /// store's clock less this host's when a collection of the fleet read it already (and holds
    /// the fleet's run: see [`Repo::begin_run`]).
    fn gc_log(&self, opts: &GcOptions, fleet_clock: Option<i64>) -> Result<GcReport> {
        let _lock = self.gc_lock()?;
        // This process's own leases whose withdrawal failed would hold this collection back.
        self.withdraw_leases();
        if opts.dry_run {
            return self.gc_dry_run(opts);
        }
        // In a bucket: the store's clock, and one collection at a time across hosts.
        let clock_offset_ns = match (fleet_clock, self.manifest.is_replica()) {
            (Some(offset), _) => offset,
            (None, true) => self.backend.clock_ns()?.saturating_sub(now_ns()),
            (None, false) => 0,
        };
        let run = self.begin_run(clock_offset_ns)?;
        let collected = self.collect(opts, clock_offset_ns);
        if let Some(id) = run {
            let now = now_ns().saturating_add(clock_offset_ns);
            if let Err(e) = self.manifest.write(|tx| gc::end_run(tx, id, now)) {
                tracing::warn!(run = id, error = %e, "could not record this collection's end: others wait until it is stale");
            }
        }
        collected
    }

    /// In a bucket, records this collection as running (logged), unless another host's is:
    /// `gc.lock` keeps collections apart on one host only, and two on two hosts would each
    /// take the packs the other is writing for orphans. Closes the epoch a stopped collection
    /// left open. Returns the run's id (None in a directory). In a fleet too, under the fleet's
    /// run: a collector whose fleet run was taken over as stale may still be at work in a log.
    fn begin_run(&self, clock_offset_ns: i64) -> Result<Option<i64>> {
        let now = now_ns().saturating_add(clock_offset_ns);
        let Some(host) = self.host_id()? else {
            self.manifest.write(|tx| gc::close_open_epochs(tx, now))?;
            return Ok(None);
        };
        let begun = self.manifest.write(|tx| {
            let begun = gc::begin_run(tx, &host, now)?;
            if begun.is_ok() {
                gc::close_open_epochs(tx, now)?;
            }
            Ok(begun)
        })?;
        match begun {
            Ok(id) => Ok(Some(id)),
            Err((other, since)) => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "a garbage collection began on host {other} at {} and has not ended: wait for it to finish (one killed stops holding others back {} hours after it began)",
                    crate::base::time::iso_time(since),
                    gc::RUN_STALE_NS / 3_600_000_000_000
                ),
            )),
        }
    }

    /// The collection itself, under the caller's lock, recording nothing in the audit log:
    /// passes, packs, and the manifest's pages.
    fn collect(&self, opts: &GcOptions, clock_offset_ns: i64) -> Result<GcReport> {
        let mut report = GcReport { stale_leases: self.drop_stale_leases()?, clock_offset_ns, ..GcReport::default() };
        report.abandoned_plans = self.drop_abandoned_plans(report.now())?;
        let condemned = self.gc_pass(opts, &mut report, true)?;
        if opts.grace.is_zero() && condemned > 0 {
            self.gc_pass(opts, &mut report, false)?;
        }
        let conn = self.manifest.conn();
        report.waiting = 0;
        for kind in Kind::ALL {
            report.waiting += gc::condemned_count(conn, kind)?;
        }
        let gathered = self.gc_gather(&mut report)?;
        failpoint("gc:gathered");
        self.gc_packs(opts, &mut report, &gathered)?;
        failpoint("gc:packs");
        report.manifest_bytes_reclaimed = gc::shrink(conn, 2048, opts.vacuum)?;
        Ok(report)
    }

    /// One pass: mark; delete what earlier passes condemned that is still unreached, as far as
    /// the horizon allows; condemn what is newly unreached, and clear what is reached again.
    /// Returns how many rows it condemned.
    ///
    /// Why the horizon is taken from the mark's own view: an operation in flight when the
    /// marks were read may commit a reference to something the marks do not see, and end
    /// before the deletion; its lease, seen in that view, keeps back whatever was condemned
    /// after it began. Whatever was condemned before it began, it saw as absent.
    ///
    /// In a bucket, the horizon is recorded (logged) before the marks are read: another
    /// host's operation that began at an epoch up to it and commits after the record is
    /// refused (`Manifest::fence`); one that committed before it is in the marks.
    fn gc_pass(&self, opts: &GcOptions, report: &mut GcReport, first: bool) -> Result<u64> {
        let swept = self.gc_sweep_horizon(opts.grace, report)?;
        let view = self.gc_mark(report.now())?;
        let conn = self.manifest.conn();
        if first {
            report.reachable = view.marked.clone();
            for kind in Kind::ALL {
                report.unreachable.add(kind, gc::dead_count(conn, kind)?.0);
            }
        }
        failpoint("gc:marked");

        let mut horizon = view.epoch.min(swept);
        for lease in &view.leases {
            if process::alive(lease.pid, lease.pid_start) {
                horizon = horizon.min(kept_back_from(lease.epoch));
            }
        }
        report.horizon = horizon;
        for kind in Kind::ALL {
            let mut after = Vec::new();
            loop {
                let keys = gc::dead_batch(conn, kind, &after, BATCH)?;
                let Some(last) = keys.last().cloned() else { break };
                let (n, bytes) = self.manifest.write(|tx| gc::sweep(tx, kind, &keys, horizon))?;
                report.deleted.add(kind, n);
                report.bytes_reclaimed += bytes;
                after = last;
            }
        }
        failpoint("gc:swept");

        // Condemn in an epoch of its own, then clear what is reached again.
        let epoch = self.manifest.write(|tx| gc::open_epoch(tx, report.now()))?;
        let mut condemned = 0;
        for kind in Kind::ALL {
            let mut after = Vec::new();
            loop {
                let keys = gc::dead_batch(conn, kind, &after, BATCH)?;
                let Some(last) = keys.last().cloned() else { break };
                let n = self.manifest.write(|tx| {
                    // An operation whose lease began at a later epoch relies on having seen
                    // every condemnation of this one (`gc::seen_epoch`): so none lands once
                    // another collection (on another host) began an epoch.
                    let latest = gc::latest_epoch(tx)?;
                    if latest != epoch {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "another garbage collection began epoch {latest} while this one was condemning in epoch {epoch}: nothing more was condemned; run it again once the other has finished"
                            ),
                        ));
                    }
                    gc::condemn(tx, kind, &keys, epoch)
                })?;
                report.condemned.add(kind, n);
                condemned += n;
                after = last;
            }
            report.resurrected += self.manifest.write(|tx| gc::resurrect(tx, kind))?;
        }
        self.manifest.write(|tx| gc::close_epoch(tx, epoch, report.now()))?;
        failpoint("gc:condemned");
        Ok(condemned)
    }

    /// Drops the logged roots of tool changes begun on some host more than `PLAN_ROOTS_KEPT_NS`
    /// ago by the store's clock and never closed: that host is gone, or lost its cache
    /// directory (and with it the journal that would close them). Returns how many plans.
    fn drop_abandoned_plans(&self, now: i64) -> Result<u64> {
        let mut abandoned = Vec::new();
        for (plan, host, created_ns) in crate::manifest::journal::rooted_plans(self.manifest.conn())? {
            if created_ns > now.saturating_sub(PLAN_ROOTS_KEPT_NS) {
                break;
            }
            tracing::warn!(
                plan,
                host = host.as_deref().unwrap_or("?"),
                began = %crate::base::time::iso_time(created_ns),
                "a tool change begun on another host over a week ago was never closed: what it stored is no longer kept for it"
            );
            abandoned.push(plan);
        }
        if !abandoned.is_empty() {
            // One write (one segment in a bucket) for all of them.
            self.manifest.write(|tx| abandoned.iter().try_for_each(|p| crate::manifest::journal::drop_roots(tx, p)))?;
        }
        Ok(abandoned.len() as u64)
    }

    /// Removes the leases of processes that are gone; returns how many.
    fn drop_stale_leases(&self) -> Result<u64> {
        let mut n = 0;
        for lease in gc::leases(self.manifest.conn())? {
            if !process::alive(lease.pid, lease.pid_start) {
                let began = crate::base::time::iso_time(lease.started_ns);
                tracing::info!(pid = lease.pid, what = %lease.what, %began, "removing the lease of a process that is gone");
                self.manifest.write(|tx| gc::delete_lease(tx, lease.id))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// [`Repo::gc_horizon`], recorded first in a bucket (a sweep up to it is about to start:
    /// see [`Repo::gc_pass`]). What it deletes is decided on the state that follows the record.
    fn gc_sweep_horizon(&self, grace: Duration, report: &mut GcReport) -> Result<i64> {
        let horizon = self.gc_horizon(grace, report)?;
        if self.manifest.is_replica() && horizon > 0 {
            let now = report.now();
            self.manifest.write(|tx| gc::record_sweep(tx, horizon, now))?;
        }
        Ok(horizon)
    }

    /// The newest epoch whose condemnations (and retirements) may be acted on now: begun at
    /// least `grace` ago (by the store's clock in a bucket), and not after any live operation
    /// of this host began (it may have seen as present what that epoch condemned).
    fn gc_horizon(&self, grace: Duration, report: &mut GcReport) -> Result<i64> {
        let conn = self.manifest.conn();
        let grace_ns = i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX);
        // No grace: every epoch, however the store's clock (read to a second) dates this one.
        let before = if grace.is_zero() { i64::MAX } else { report.now().saturating_sub(grace_ns) };
        let mut horizon = gc::epoch_at(conn, before)?;
        report.in_flight = 0;
        for lease in gc::leases(conn)? {
            if process::alive(lease.pid, lease.pid_start) {
                report.in_flight += 1;
                horizon = horizon.min(kept_back_from(lease.epoch));
            }
        }
        // In a fleet, the node's processes on every host, by their leases in the bucket.
        for epoch in self.bucket_leases_held(report.now())? {
            report.in_flight += 1;
            horizon = horizon.min(kept_back_from(epoch));
        }
        Ok(horizon)
    }
}

/// The audit record of a collection: its figures.
fn gc_record(opts: &GcOptions, report: &GcReport) -> AuditRecord {
    let mut rec = AuditRecord::ok(now_ns(), &opts.actor, "gc");
    rec.details = serde_json::json!({
        "deleted": report.deleted,
        "condemned": report.condemned,
        "waiting": report.waiting,
        "packsRewritten": report.packs_rewritten,
        "packsRecompressed": report.packs_recompressed,
        "recompressLevel": opts.recompress,
        "bundlesRebuilt": report.bundles_rebuilt,
        "packsDeleted": report.packs_deleted,
        "orphansDeleted": report.orphans_deleted,
        "bytesReclaimed": report.bytes_reclaimed,
        "packBytesWritten": report.pack_bytes_written,
        "looseGathered": report.loose_gathered,
        "blobsLeft": report.blobs_left,
        "manifestBytesReclaimed": report.manifest_bytes_reclaimed,
        "graceSeconds": opts.grace.as_secs(),
    });
    rec
}

/// How long the contents a tool change in flight on a host of a bucket stored are kept for it
/// (`plan_roots`): a host killed in the middle of one and back within a week finds them.
pub const PLAN_ROOTS_KEPT_NS: i64 = 7 * 24 * 3_600_000_000_000;

/// The newest epoch whose condemnations a lease of epoch `epoch` lets go: the one before it. An
/// epoch's row is committed before its condemnations, which follow in batches of their own
/// transactions; a lease taken between them records that epoch, yet may have found present
/// (and relied on) what a later batch of it condemned.
fn kept_back_from(epoch: i64) -> i64 {
    epoch.saturating_sub(1)
}
