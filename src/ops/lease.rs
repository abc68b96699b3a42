//! Leases: an operation in flight (a snapshot, a tool's change, a restore) announces itself in
//! the manifest before its first lookup of a stored object and withdraws when it ends, so
//! garbage collection never deletes what it may have seen as present (ARCHITECTURE.md,
//! "Garbage collection"). A process that dies leaves its leases behind; they name its pid and
//! start time, and a collection ignores (and removes) those of processes that are gone.

use crate::base::error::Result;
use crate::base::process;
use crate::base::time::now_ns;
use crate::manifest::gc;
use crate::repo::Repo;

/// An operation in flight; the lease ends when this is dropped.
pub struct Lease<'r> {
    repo: &'r Repo,
    id: i64,
}

impl Repo {
    /// Takes a lease for `what` (logged if a collection finds it stale).
    pub(crate) fn lease(&self, what: &str) -> Result<Lease<'_>> {
        let (pid, start) = process::current();
        // Relaxed: a lease matters only while its process lives, and a crash ends both.
        let id = self.manifest.write_relaxed(|tx| gc::insert_lease(tx, pid, start, now_ns(), what))?;
        Ok(Lease { repo: self, id })
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.repo.manifest.write_relaxed(|tx| gc::delete_lease(tx, self.id)) {
            // A lease left behind only makes garbage collection wait for this process to end.
            tracing::warn!(lease = self.id, error = %e, "could not end a lease; garbage collection waits for this process");
        }
    }
}
