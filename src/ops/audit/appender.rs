//! Group commit for the audit log: many threads append records, and every record waiting when
//! a commit starts goes into it, so a burst costs one fsync instead of one per record. Each
//! `append` returns only once its record is durable. The server appends the records that are
//! not part of another operation's transaction (refusals, reads with `--audit-reads`) here.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::base::error::{Error, Result};
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::repo::Repo;

/// The most records one commit takes: a bound on the transaction's size and on the wait of the
/// first in line.
const BATCH: usize = 4096;

/// A record's outcome as the queue keeps it: its seq, or the failure's kind and message.
type Outcome = std::result::Result<i64, (crate::base::error::ErrorKind, String)>;

#[derive(Default)]
struct Queue {
    /// Records waiting, with their tickets.
    waiting: Vec<(u64, AuditRecord)>,
    /// Outcomes not yet collected, by ticket: the seq, or the error's kind and message.
    done: std::collections::HashMap<u64, Outcome>,
    /// Whether a thread is committing now.
    writing: bool,
    next: u64,
}

/// Appends audit records with group commit; cheap to clone and to share between threads.
#[derive(Clone)]
pub struct AuditAppender {
    inner: Arc<Inner>,
}

struct Inner {
    /// The handle commits go through: one at a time, by whichever caller leads.
    repo: Mutex<Repo>,
    queue: Mutex<Queue>,
    wake: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking caller cannot leave the queue half changed (pushes and removals only).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AuditAppender {
    /// An appender on the repository at `path`, with a handle of its own.
    pub fn open(path: &Path) -> Result<AuditAppender> {
        AuditAppender::over(Repo::open(path)?)
    }

    /// An appender committing through `repo`.
    pub fn over(repo: Repo) -> Result<AuditAppender> {
        Ok(AuditAppender {
            inner: Arc::new(Inner {
                repo: Mutex::new(repo),
                queue: Mutex::new(Queue::default()),
                wake: Condvar::new(),
            }),
        })
    }

    /// Appends `record` and returns its seq once it is durable. The first caller to find no
    /// commit running commits everything waiting, its own record included; the others wait.
    pub fn append(&self, record: AuditRecord) -> Result<i64> {
        let mut q = lock(&self.inner.queue);
        let ticket = q.next;
        q.next += 1;
        q.waiting.push((ticket, record));
        loop {
            if let Some(outcome) = q.done.remove(&ticket) {
                return outcome.map_err(|(kind, message)| Error::new(kind, message));
            }
            if q.writing {
                q = self.inner.wake.wait(q).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            q.writing = true;
            let take = q.waiting.len().min(BATCH);
            let batch: Vec<_> = q.waiting.drain(..take).collect();
            drop(q);
            let outcomes = self.commit(&batch);
            q = lock(&self.inner.queue);
            q.done.extend(outcomes);
            q.writing = false;
            self.inner.wake.notify_all();
        }
    }

    /// One transaction for `batch`: each record's seq, or (every record's) the failure.
    fn commit(&self, batch: &[(u64, AuditRecord)]) -> Vec<(u64, Outcome)> {
        let repo = lock(&self.inner.repo);
        let written = repo.manifest.write(|tx| {
            batch.iter().map(|(t, r)| manifest::audit::append(tx, r).map(|seq| (*t, seq))).collect::<Result<Vec<_>>>()
        });
        match written {
            Ok(seqs) => {
                repo.checkpoint_if_due();
                seqs.into_iter().map(|(t, s)| (t, Ok(s))).collect()
            }
            Err(e) => {
                tracing::warn!(records = batch.len(), error = %e, "a batch of audit records could not be appended");
                batch.iter().map(|(t, _)| (*t, Err((e.kind(), e.message().to_string())))).collect()
            }
        }
    }
}
