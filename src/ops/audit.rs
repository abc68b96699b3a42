//! The audit log of a repository: appending a record, and reading records back.

use crate::base::error::Result;
use crate::manifest;
use crate::model::audit::{AuditRecord, FullRecord};
use crate::repo::Repo;

impl Repo {
    /// Appends one audit record in a transaction of its own and returns its sequence number.
    pub fn audit(&self, record: AuditRecord) -> Result<i64> {
        self.manifest.write(|tx| manifest::audit::append(tx, &record))
    }

    /// Appends one audit record without waiting for it to reach the disk: for records a flood
    /// of bad requests could otherwise make expensive (refusals), where losing the last few in
    /// a power cut is acceptable.
    pub fn audit_relaxed(&self, record: AuditRecord) -> Result<i64> {
        self.manifest.write_relaxed(|tx| manifest::audit::append(tx, &record))
    }

    /// Record `seq`, if there is one.
    pub fn audit_record(&self, seq: i64) -> Result<Option<FullRecord>> {
        manifest::audit::get(self.manifest.conn(), seq)
    }

    /// The last `limit` records (of `session`, if given), oldest first.
    pub fn audit_log(&self, session: Option<&str>, limit: i64) -> Result<Vec<FullRecord>> {
        manifest::audit::tail(self.manifest.conn(), session, limit)
    }
}
