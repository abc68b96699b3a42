//! Group commit for the audit log: many threads append records, and every record waiting when
//! a commit starts goes into it, so a burst costs one fsync instead of one per record. Each
//! `append` returns only once its record is durable. The server appends the records that are
//! not part of another operation's transaction (refusals, reads with `--audit-reads`) here.
//!
//! One caller at a time leads: it commits what is waiting, batch after batch, until its own
//! record is in, then hands the lead to the first caller still waiting. Each caller waits on a
//! slot of its own, so a commit wakes exactly the callers it served.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::base::error::{Error, ErrorKind, Result};
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::repo::Repo;

/// The most records one commit takes: a bound on the transaction's size and on the wait of the
/// first in line.
const BATCH: usize = 4096;

/// A record's outcome: its seq, or the failure's kind and message.
type Outcome = std::result::Result<i64, (ErrorKind, String)>;

/// Where a waiting caller learns what became of its record.
enum State {
    Waiting,
    /// Its turn to lead the commits.
    Lead,
    Done(Outcome),
}

struct Slot {
    state: Mutex<State>,
    wake: Condvar,
}

impl Slot {
    fn set(&self, s: State) {
        *lock(&self.state) = s;
        self.wake.notify_one();
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(AuditRecord, Arc<Slot>)>,
    /// Whether a caller leads now.
    leading: bool,
}

/// Appends audit records with group commit; cheap to clone and to share between threads.
#[derive(Clone)]
pub struct AuditAppender {
    inner: Arc<Inner>,
}

struct Inner {
    /// The handle commits go through, by whichever caller leads.
    repo: Mutex<Repo>,
    queue: Mutex<Queue>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking caller cannot leave these half changed (whole values are set).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AuditAppender {
    /// An appender on the repository at `path`, with a handle of its own.
    pub fn open(path: &Path) -> Result<AuditAppender> {
        AuditAppender::over(Repo::open(path)?)
    }

    /// An appender committing through `repo`.
    pub fn over(repo: Repo) -> Result<AuditAppender> {
        Ok(AuditAppender { inner: Arc::new(Inner { repo: Mutex::new(repo), queue: Mutex::new(Queue::default()) }) })
    }

    /// Appends `record` and returns its seq once it is durable.
    pub fn append(&self, record: AuditRecord) -> Result<i64> {
        let slot = Arc::new(Slot { state: Mutex::new(State::Waiting), wake: Condvar::new() });
        let lead = {
            let mut q = lock(&self.inner.queue);
            q.waiting.push((record, slot.clone()));
            !std::mem::replace(&mut q.leading, true)
        };
        if !lead {
            let mut s = lock(&slot.state);
            loop {
                match std::mem::replace(&mut *s, State::Waiting) {
                    State::Waiting => s = slot.wake.wait(s).unwrap_or_else(|p| p.into_inner()),
                    State::Lead => break,
                    State::Done(outcome) => return outcome.map_err(|(kind, message)| Error::new(kind, message)),
                }
            }
        }
        self.lead(&slot)
    }

    /// Commits batch after batch until `own` is done, then passes the lead on (or drops it).
    fn lead(&self, own: &Slot) -> Result<i64> {
        loop {
            let batch: Vec<_> = {
                let mut q = lock(&self.inner.queue);
                let take = q.waiting.len().min(BATCH);
                q.waiting.drain(..take).collect()
            };
            self.commit(batch);
            if let State::Done(outcome) = std::mem::replace(&mut *lock(&own.state), State::Waiting) {
                let mut q = lock(&self.inner.queue);
                match q.waiting.first() {
                    Some((_, next)) => next.set(State::Lead),
                    None => q.leading = false,
                }
                return outcome.map_err(|(kind, message)| Error::new(kind, message));
            }
        }
    }

    /// One transaction for `batch`; each caller is told its record's seq, or the failure.
    fn commit(&self, batch: Vec<(AuditRecord, Arc<Slot>)>) {
        if batch.is_empty() {
            return;
        }
        let repo = lock(&self.inner.repo);
        let written = repo
            .manifest
            .write(|tx| batch.iter().map(|(r, _)| manifest::audit::append(tx, r)).collect::<Result<Vec<_>>>());
        match written {
            Ok(seqs) => {
                repo.checkpoint_if_due();
                for ((_, slot), seq) in batch.iter().zip(seqs) {
                    slot.set(State::Done(Ok(seq)));
                }
            }
            Err(e) => {
                tracing::warn!(records = batch.len(), error = %e, "a batch of audit records could not be appended");
                for (_, slot) in &batch {
                    slot.set(State::Done(Err((e.kind(), e.message().to_string()))));
                }
            }
        }
    }
}
