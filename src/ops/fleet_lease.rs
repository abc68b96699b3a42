//! A fleet node's leases in the bucket: what its operations in flight may rely on, for a
//! collection on another node to honour (ARCHITECTURE.md, "A fleet's collection").
//!
//! A node's leases live in its replica, which no other node reads. So each process of a fleet
//! node that has operations in flight also keeps one plain object,
//! `nodes/<node>/leases/<writer id>-<pid>`, whose body is the oldest epoch (of the node's log)
//! any of them began at. It is written when an operation begins at an epoch older than the one
//! it says, or once a third of the lease's time passed since it was written, and written again
//! on that beat by a thread while operations run; a command deletes it as it ends, and a
//! server's lapses a lease time after its last operation. The store dates each write (`Last-Modified`): a collector reads
//! a lease as held for [`lease_time`] after that, by the store's clock, and keeps back what
//! epochs from the lease's on condemned.
//!
//! A lease is for liveness only: a process paused past its lease (SIGSTOP) is no longer
//! honoured, and what it then publishes is refused by its log's fence (a sweep recorded past
//! the epoch it began at, `Manifest::fence`) instead of naming packs the collector removed; the
//! caller runs it again. A lease that cannot be written is logged and the operation goes on,
//! for the same reason.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::base::error::Result;
use crate::manifest::log::{Owner, NODES};
use crate::object::backend::Backend;
use crate::repo::{BucketKeys, Repo};

/// Where a node's leases are, under `nodes/<node>/`.
const LEASES: &str = "leases/";
/// How long a lease holds after its last write, unless `TROVE_FLEET_LEASE_SECS` says otherwise.
const LEASE_SECS: u64 = 120;

/// How long a lease holds after the store dated its last write: `TROVE_FLEET_LEASE_SECS`
/// (whole seconds, at least 1), else two minutes.
pub fn lease_time() -> Duration {
    let secs = std::env::var("TROVE_FLEET_LEASE_SECS").ok().and_then(|v| v.trim().parse::<u64>().ok());
    Duration::from_secs(secs.filter(|s| *s > 0).unwrap_or(LEASE_SECS))
}

/// This process's lease on one node's log.
struct Held {
    /// The bucket it is in.
    keys: Arc<BucketKeys>,
    /// In-flight operations by the epoch each began at.
    epochs: BTreeMap<i64, usize>,
    /// When the object was last written, and the epoch it says.
    written: Option<(Instant, i64)>,
    /// When the last operation ended (None while one runs).
    idle_since: Option<Instant>,
}

/// This process's leases, by key.
static HELD: Mutex<Option<HashMap<String, Held>>> = Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<HashMap<String, Held>>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// An operation's share of its process's lease in the bucket; let go when dropped.
pub(crate) struct BucketLease {
    key: String,
    epoch: i64,
}

impl Drop for BucketLease {
    fn drop(&mut self) {
        let mut all = held();
        let Some(h) = all.as_mut().and_then(|m| m.get_mut(&self.key)) else { return };
        if let Some(n) = h.epochs.get_mut(&self.epoch) {
            *n -= 1;
            if *n == 0 {
                h.epochs.remove(&self.epoch);
            }
        }
        if h.epochs.is_empty() {
            h.idle_since = Some(Instant::now());
        }
    }
}

/// The key of this process's lease on `node`'s log, written under `writer`.
fn lease_key(node: &str, writer: &[u8; 16]) -> String {
    format!("{NODES}{node}/{LEASES}{}-{}", hex::encode(writer), std::process::id())
}

/// Writes the lease at `key` saying `epoch`; a failure is logged (the fence keeps it safe).
fn write(keys: &BucketKeys, key: &str, epoch: i64) -> bool {
    match keys.store.inner().inner().replace(key, epoch.to_string().as_bytes()) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(key, epoch, error = %e, "a lease in the bucket was not written: another node's collection may not see this operation, whose write its fence then refuses if a sweep passed it");
            false
        }
    }
}

/// The beat of a lease's renewal thread, `key`'s: renews while operations run; once none has
/// for a beat, forgets the lease and ends. The object is left to lapse (a lease time after its
/// last write), never deleted here: a delete racing the next operation's write could remove
/// that operation's lease. The one exception is a write of this thread that a command's
/// [`let_go_of_leases`] overtook: that object is deleted again, under the lock.
fn renew(keys: Arc<BucketKeys>, key: String) {
    let beat = lease_time() / 3;
    loop {
        std::thread::sleep(beat);
        let epoch = {
            let mut all = held();
            let Some(map) = all.as_mut() else { return };
            let Some(h) = map.get_mut(&key) else { return };
            match (h.epochs.keys().next().copied(), h.idle_since) {
                (Some(epoch), _) => epoch,
                (None, Some(idle)) if idle.elapsed() >= beat => {
                    map.remove(&key);
                    return;
                }
                (None, _) => continue,
            }
        };
        if write(&keys, &key, epoch) {
            let mut all = held();
            match all.as_mut().and_then(|m| m.get_mut(&key)) {
                Some(h) => h.written = Some((Instant::now(), epoch)),
                None => {
                    // Let go of while this write was on its way (the command's last operation
                    // ended and `let_go_of_leases` deleted the object): the write put it back,
                    // where it would hold other nodes' collections back for a lease time. The
                    // delete runs under the lock, so that a next operation's lease is written
                    // after it, never removed by it (this is rare: the lock is held only here).
                    if let Err(e) = keys.store.inner().inner().delete(&key) {
                        tracing::warn!(key, error = %e, "a lease written back after it was let go of was not deleted; it holds other nodes' collections back until its time is past");
                    }
                    drop(all);
                    return;
                }
            }
        }
    }
}

/// Deletes this process's leases in the bucket that no operation holds, as a command ends:
/// otherwise each would hold other nodes' collections back until its time is past (a server's
/// lapse a lease time after its last operation). Failures are logged.
pub fn let_go_of_leases() {
    let idle: Vec<(String, Arc<BucketKeys>)> = {
        let mut all = held();
        let Some(map) = all.as_mut() else { return };
        let keys: Vec<String> = map.iter().filter(|(_, h)| h.epochs.is_empty()).map(|(k, _)| k.clone()).collect();
        keys.into_iter().filter_map(|k| map.remove(&k).map(|h| (k, h.keys))).collect()
    };
    for (key, keys) in idle {
        if let Err(e) = keys.store.inner().inner().delete(&key) {
            tracing::warn!(key, error = %e, "a lease in the bucket was not deleted as this command ended; it holds other nodes' collections back until its time is past");
        }
    }
}

impl Repo {
    /// On a fleet node's own handle, this process's lease in the bucket for an operation
    /// begun at `epoch` of the node's log (None elsewhere).
    pub(crate) fn bucket_lease(&self, epoch: i64) -> Option<BucketLease> {
        let keys = self.bucket_keys.clone()?;
        let Owner::Node { node, writer } = &keys.owner else { return None };
        let key = lease_key(node, writer);
        let beat = lease_time() / 3;
        let (write_now, start_thread) = {
            let mut all = held();
            let map = all.get_or_insert_with(HashMap::new);
            let fresh = !map.contains_key(&key);
            let h = map.entry(key.clone()).or_insert_with(|| Held {
                keys: keys.clone(),
                epochs: BTreeMap::new(),
                written: None,
                idle_since: None,
            });
            *h.epochs.entry(epoch).or_default() += 1;
            h.idle_since = None;
            let oldest = h.epochs.keys().next().copied().unwrap_or(epoch);
            let stale = h.written.is_none_or(|(at, said)| said > oldest || at.elapsed() >= beat);
            (stale.then_some(oldest), fresh)
        };
        if let Some(oldest) = write_now {
            if write(&keys, &key, oldest) {
                if let Some(h) = held().as_mut().and_then(|m| m.get_mut(&key)) {
                    h.written = Some((Instant::now(), oldest));
                }
            }
        }
        if start_thread {
            let (keys, k) = (keys.clone(), key.clone());
            if let Err(e) = std::thread::Builder::new().name("trove-lease".into()).spawn(move || renew(keys, k)) {
                tracing::warn!(key, error = %e, "the thread renewing a lease in the bucket did not start: it lapses while a long operation runs");
            }
        }
        Some(BucketLease { key, epoch })
    }

    /// The epochs of the leases in the bucket on this handle's node's log that hold at
    /// `now` (the store's clock): dated by the store less than [`lease_time`] before it.
    /// Leases past twice that (their process killed) are deleted, logged. Empty outside a fleet.
    pub(crate) fn bucket_leases_held(&self, now: i64) -> Result<Vec<i64>> {
        let Some(keys) = self.bucket_keys.clone() else { return Ok(Vec::new()) };
        let (node, mine) = match &keys.owner {
            // This cache directory's processes' leases are rows of the replica the collection
            // reads already.
            Owner::Node { node, writer } => (node, Some(hex::encode(writer))),
            Owner::Collector { node, .. } | Owner::Foreign { node } => (node, None),
            Owner::Shared => return Ok(Vec::new()),
        };
        let store = keys.store.inner().inner();
        let ttl = i64::try_from(lease_time().as_nanos()).unwrap_or(i64::MAX);
        let mut held = Vec::new();
        let prefix = format!("{NODES}{node}/{LEASES}");
        for (key, dated) in store.list_dated(&prefix)? {
            if mine.as_deref().is_some_and(|w| key.strip_prefix(prefix.as_str()).is_some_and(|k| k.starts_with(w))) {
                continue;
            }
            let age = now.saturating_sub(dated);
            if age >= ttl.saturating_mul(2) {
                tracing::info!(key, "removing a lease in the bucket long past its time (its process is gone)");
                if let Err(e) = store.delete(&key) {
                    tracing::warn!(key, error = %e, "a lapsed lease was not deleted; it holds nothing back");
                }
                continue;
            }
            if age >= ttl {
                tracing::info!(key, "a lease in the bucket is past its time: not honoured (its process paused or gone; its writes meet the fence)");
                continue;
            }
            let body = match store.get_whole(&key, 64) {
                Ok(b) => b,
                // Deleted since the listing: its operations ended.
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.context(format!("reading lease {key}"))),
            };
            match std::str::from_utf8(&body).ok().and_then(|t| t.trim().parse::<i64>().ok()) {
                Some(epoch) => held.push(epoch),
                None => {
                    // Honoured as holding everything back: better than deleting under it.
                    tracing::warn!(
                        key,
                        "a lease in the bucket does not name an epoch: every epoch is kept back for it"
                    );
                    held.push(0);
                }
            }
        }
        Ok(held)
    }
}
