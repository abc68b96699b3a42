//! Leases: an operation in flight (a snapshot, a tool's change, a restore) announces itself in
//! the manifest before its first lookup of a stored object and withdraws when it ends, so
//! garbage collection never deletes what it may have seen as present (ARCHITECTURE.md,
//! "Garbage collection"). A process that dies leaves its leases behind; they name its pid and
//! start time, and a collection ignores (and removes) those of processes that are gone.
//!
//! A live process must not leave one behind either: a collection waits for every lease of a
//! live process, so one left by a failed withdrawal (the disk was full) would stop every
//! collection until the process ends, a server's for good. Such a lease is kept in a list of
//! this process's and withdrawn again whenever a lease is taken or withdrawn, a collection
//! starts, or the server's reaper ticks, until the manifest takes the delete.
//!
//! When the manifest cannot record a lease at all (its disk is full, or it is open read-only
//! for that reason), an operation that only reads stored objects (a restore elsewhere, an
//! export) holds the repository's collection lock (`gc.lock`) shared instead: no collection
//! can start while it is held, so nothing it may read is deleted under it, and nothing needs
//! writing. A collection that is running already holds the lock exclusively; the operation
//! then waits a moment for it and otherwise fails, naming both causes.

use std::sync::Mutex;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::process;
use crate::base::time::now_ns;
use crate::manifest::gc;
use crate::repo::Repo;

/// An operation in flight; the lease ends when this is dropped.
pub struct Lease<'r> {
    repo: &'r Repo,
    held: Held,
    /// On a fleet node, this operation's share of its process's lease in the bucket, for other
    /// nodes' collections (`fleet_lease.rs`).
    _bucket: Option<crate::ops::fleet_lease::BucketLease>,
}

/// What keeps collections off what the operation reads.
enum Held {
    /// A row of `gc_leases`, by id.
    Row(i64),
    /// A shared hold of `gc.lock`, released with the descriptor.
    Lock { _lock: crate::ops::gc::GcLock },
}

/// Leases of this process whose withdrawal failed: (the manifest's key, the lease's id).
static UNWITHDRAWN: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());

fn unwithdrawn() -> std::sync::MutexGuard<'static, Vec<(String, i64)>> {
    // A panic while the list was held leaves it as it was: still a list of ids to withdraw.
    UNWITHDRAWN.lock().unwrap_or_else(|p| p.into_inner())
}

impl Repo {
    /// Takes a lease for `what` (logged if a collection finds it stale).
    pub(crate) fn lease(&self, what: &str) -> Result<Lease<'_>> {
        self.withdraw_leases();
        if let Some(why) = self.manifest.read_only() {
            return self.lease_by_lock(what, why);
        }
        // A replica's lease fences the operation's writes with the epoch it began at (an older
        // one, kept by a replica behind its log, fences more than it must): caught up first, at
        // most once a second, so that epoch is as new as the log's.
        if self.manifest.is_replica() {
            self.manifest.refresh(std::time::Duration::from_secs(1))?;
        }
        let (pid, start) = process::current();
        // Relaxed: a lease matters only while its process lives, and a crash ends both.
        match self.manifest.write_relaxed(|tx| gc::insert_lease(tx, pid, start, now_ns(), what)) {
            Ok((id, epoch)) => {
                self.manifest.fence(id, epoch);
                Ok(Lease { repo: self, held: Held::Row(id), _bucket: self.bucket_lease(epoch) })
            }
            Err(e) if e.is_storage_full() => self.lease_by_lock(what, e.message()),
            Err(e) => Err(e),
        }
    }

    /// The lease of an operation the manifest cannot record (`why`): a shared hold of the
    /// collection lock.
    fn lease_by_lock(&self, what: &str, why: &str) -> Result<Lease<'_>> {
        match self.gc_lock_shared() {
            Ok(lock) => {
                tracing::warn!(what, why, "the manifest cannot record this operation's lease; garbage collection is held off by gc.lock until it ends");
                Ok(Lease { repo: self, held: Held::Lock { _lock: lock }, _bucket: None })
            }
            Err(e) if e.kind() == ErrorKind::Conflict => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "a garbage collection is running, and this {what} cannot record its lease ({why}): wait for the collection to finish"
                ),
            )),
            Err(e) => Err(e),
        }
    }

    /// Withdraws again the leases of this process whose withdrawal failed, in this
    /// repository; returns how many are still waiting. Each failure is logged.
    pub(crate) fn withdraw_leases(&self) -> usize {
        let key = self.manifest.key();
        let mine: Vec<i64> = {
            let list = unwithdrawn();
            list.iter().filter(|(k, _)| *k == key).map(|(_, id)| *id).collect()
        };
        if mine.is_empty() || self.manifest.read_only().is_some() {
            return mine.len();
        }
        let mut left = 0;
        for id in mine {
            match self.manifest.write_relaxed(|tx| gc::delete_lease(tx, id)) {
                Ok(()) => {
                    tracing::info!(lease = id, "a lease whose withdrawal had failed is withdrawn");
                    unwithdrawn().retain(|(k, i)| !(*k == key && *i == id));
                }
                Err(e) => {
                    tracing::warn!(lease = id, error = %e, "still cannot withdraw a lease; garbage collection waits for it");
                    left += 1;
                }
            }
        }
        left
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Held::Row(id) = self.held else { return };
        self.repo.manifest.unfence(id);
        match self.repo.manifest.write_relaxed(|tx| gc::delete_lease(tx, id)) {
            Ok(()) => {
                self.repo.withdraw_leases();
            }
            Err(e) => {
                tracing::warn!(lease = id, error = %e, "could not withdraw a lease; tried again at the next lease, collection or reaper tick");
                unwithdrawn().push((self.repo.manifest.key(), id));
            }
        }
    }
}
