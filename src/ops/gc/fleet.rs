//! A fleet's collection: one collector at a time across the bucket, collecting every node's
//! log (ARCHITECTURE.md, "A fleet's collection").
//!
//! The collector takes the fleet's run, `gc/runs/<20-digit n>` (sealed JSON: the collecting
//! node, when it began by the store's clock), created only if absent (`If-None-Match`): of two
//! collectors that both found run `n - 1` ended, the store tells exactly one it created run
//! `n`. A run ends with `gc/runs/<n>.ended`; one not ended and begun less than six hours
//! before (`gc::RUN_STALE_NS`) holds every other collector off. The newest run is found by
//! asking for runs by name, never by a listing, which may lag behind writes.
//!
//! Each node's log is then collected as a node collects its own, by the same passes: its own
//! through its handle, every other through a handle that writes that node's log as a
//! collector (`Owner::Collector`: segments of format 4 that change only collection's rows,
//! which the node's writers catch up with and write after). Each log's marks are that log's
//! roots (a node's records name only its own packs); its horizon honours the node's leases in
//! the bucket (`fleet_lease.rs`) besides this host's; its sweeps are recorded in that log
//! before its marks, so the node's writers are fenced as a bucket's hosts are. What each
//! collection did is recorded in the collecting node's audit log, naming the node.

use super::{gc_record, GcOptions, GcReport, KindCounts, NodeCollected};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::{iso_time, now_ns};
use crate::manifest::gc::RUN_STALE_NS;
use crate::repo::Repo;

/// Where the fleet's collection runs are.
const RUNS: &str = "gc/runs/";
/// What ends a run's key.
const ENDED: &str = ".ended";

/// The fleet's run a collection (or an index repair) holds: ended when dropped.
pub(crate) struct FleetRun<'r> {
    repo: &'r Repo,
    n: u64,
}

impl Drop for FleetRun<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.repo.backend.put(&format!("{}{ENDED}", run_key(self.n)), b"{}") {
            tracing::warn!(run = self.n, error = %e, "could not record the end of this run of the fleet's collection: other collectors wait until it is stale");
        }
    }
}

fn run_key(n: u64) -> String {
    format!("{RUNS}{n:020}")
}

impl Repo {
    /// Collects every node's log of the fleet under one fleet's run; see the module docs.
    pub(super) fn gc_fleet(&self, opts: &GcOptions) -> Result<GcReport> {
        let me = self.node().unwrap_or_default().to_owned();
        let offset = self.backend.clock_ns()?.saturating_sub(now_ns());
        let _run = self.begin_fleet_run(&me, now_ns().saturating_add(offset))?;
        self.collect_fleet(opts, offset, &me)
    }

    /// On a node of a fleet, the fleet's collection run, held until dropped, so that no
    /// collector on any host deletes packs while this handle's work relies on the listing of
    /// its packs (an index repair); None elsewhere, where `gc.lock` does that.
    pub(crate) fn hold_fleet_run(&self) -> Result<Option<FleetRun<'_>>> {
        let Some(me) = self.node().filter(|_| !self.is_other_node()) else { return Ok(None) };
        let now = self.backend.clock_ns()?;
        self.begin_fleet_run(me, now).map(Some)
    }

    fn collect_fleet(&self, opts: &GcOptions, offset: i64, me: &str) -> Result<GcReport> {
        let mine = self.gc_log(opts, Some(offset))?;
        self.audit(gc_record(opts, &mine))?;
        let mut total = mine.clone();
        total.nodes.push(NodeCollected { node: me.to_owned(), report: mine });
        let opener = self.opener()?;
        let mut failed = None;
        for node in self.fleet_nodes()?.into_iter().filter(|n| n.as_str() != me) {
            let collected = opener.open_collecting(&node).and_then(|h| h.gc_log(opts, Some(offset)));
            match collected {
                Ok(report) => {
                    let mut rec = gc_record(opts, &report);
                    if let serde_json::Value::Object(details) = &mut rec.details {
                        details.insert("node".into(), node.as_str().into());
                    }
                    if let Err(e) = self.audit(rec) {
                        tracing::warn!(node = %node, error = %e, "a node's collection was not recorded");
                        failed.get_or_insert(e.context(format!("recording the collection of node {node}'s log")));
                    }
                    total.absorb(&report);
                    total.nodes.push(NodeCollected { node: node.to_string(), report });
                }
                Err(e) => {
                    // The other nodes are still collected; the first failure is the answer.
                    tracing::warn!(node = %node, error = %e, "a node's log was not collected");
                    failed.get_or_insert(e.context(format!("collecting node {node}'s log")));
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }

    /// Takes the fleet's next collection run, unless another collector holds one (`conflict`).
    fn begin_fleet_run(&self, me: &str, now: i64) -> Result<FleetRun<'_>> {
        let newest = self.newest_fleet_run()?;
        if newest > 0 && !self.exists(&format!("{}{ENDED}", run_key(newest)))? {
            let held = self.backend.get_whole(&run_key(newest), 4096).and_then(|bytes| {
                serde_json::from_slice::<serde_json::Value>(&bytes)
                    .map_err(|e| Error::corrupt(format!("collection run {} is not JSON: {e}", run_key(newest))))
            })?;
            let begun = held["begunNs"].as_i64().unwrap_or(0);
            let by = held["node"].as_str().unwrap_or("?");
            if begun > now.saturating_sub(RUN_STALE_NS) {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "node {by} began collecting the fleet at {} (run {newest}) and has not ended: one collector runs at a time; wait for it (one killed stops holding others back {} hours after it began)",
                        iso_time(begun),
                        RUN_STALE_NS / 3_600_000_000_000
                    ),
                ));
            }
            tracing::warn!(run = newest, node = by, began = %iso_time(begun), "a collection of the fleet never ended and is stale: this one goes on");
        }
        let n = newest + 1;
        let body = serde_json::json!({ "node": me, "begunNs": now, "begun": iso_time(now) });
        match self.backend.put(&run_key(n), body.to_string().as_bytes()) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("another node began collecting the fleet (run {n}) first: one collector runs at a time; run this again once it has finished"),
                ))
            }
            Err(e) => return Err(e.context(format!("taking the fleet's collection run {n}"))),
        }
        self.remember_fleet_run(n);
        Ok(FleetRun { repo: self, n })
    }

    /// The newest run of the fleet (0: none yet), found by asking for runs by name, never by a
    /// listing (which may lag behind the newest): from the newest this cache directory saw,
    /// forward in doubling steps to one absent, then halving back. Runs are created in order
    /// and never deleted, so those present are exactly 1 to the newest.
    fn newest_fleet_run(&self) -> Result<u64> {
        let mut present = self.remembered_fleet_run();
        if present > 0 && !self.exists(&run_key(present))? {
            // A hint from another bucket of the same id cannot be: start over.
            present = 0;
        }
        let mut step = 1u64;
        let mut absent = loop {
            let at = present.saturating_add(step);
            if !self.exists(&run_key(at))? {
                break at;
            }
            present = at;
            step = step.saturating_mul(2);
        };
        while absent - present > 1 {
            let mid = present + (absent - present) / 2;
            if self.exists(&run_key(mid))? {
                present = mid;
            } else {
                absent = mid;
            }
        }
        Ok(present)
    }

    /// Whether the bucket holds `key`.
    fn exists(&self, key: &str) -> Result<bool> {
        match self.backend.size(key) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.context(format!("looking for {key}"))),
        }
    }

    /// Where this cache directory keeps the newest run of the fleet it saw.
    fn fleet_run_hint(&self) -> Option<std::path::PathBuf> {
        self.root().map(|r| r.join("gc-run"))
    }

    fn remembered_fleet_run(&self) -> u64 {
        let Some(path) = self.fleet_run_hint() else { return 0 };
        std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    /// Remembers run `n` for the next collection here: a hint, so a failure is only logged.
    fn remember_fleet_run(&self, n: u64) {
        let Some(path) = self.fleet_run_hint() else { return };
        if let Err(e) = std::fs::write(&path, n.to_string()) {
            tracing::warn!(path = %path.display(), error = %e, "the fleet's newest collection run was not remembered: the next collection looks for it from the start");
        }
    }
}

impl KindCounts {
    fn absorb(&mut self, other: &KindCounts) {
        self.objects += other.objects;
        self.loose += other.loose;
        self.trees += other.trees;
        self.chunk_lists += other.chunk_lists;
    }
}

impl GcReport {
    /// Adds another node's figures to these.
    fn absorb(&mut self, o: &GcReport) {
        self.reachable.trees += o.reachable.trees;
        self.reachable.contents += o.reachable.contents;
        self.reachable.objects += o.reachable.objects;
        self.unreachable.absorb(&o.unreachable);
        self.condemned.absorb(&o.condemned);
        self.deleted.absorb(&o.deleted);
        self.resurrected += o.resurrected;
        self.waiting += o.waiting;
        self.in_flight += o.in_flight;
        self.stale_leases += o.stale_leases;
        self.abandoned_plans += o.abandoned_plans;
        self.packs_rewritten += o.packs_rewritten;
        self.packs_recompressed += o.packs_recompressed;
        self.bundles_rebuilt += o.bundles_rebuilt;
        self.packs_deleted += o.packs_deleted;
        self.orphans_deleted += o.orphans_deleted;
        self.bytes_reclaimed += o.bytes_reclaimed;
        self.loose_gathered += o.loose_gathered;
        self.pack_bytes_written += o.pack_bytes_written;
        self.blobs_left += o.blobs_left;
        self.manifest_bytes_reclaimed += o.manifest_bytes_reclaimed;
    }
}
