//! The audit log of a repository (DESIGN.md, "Audit log"): appending records (one at a time
//! here, many threads' at once through `appender.rs`), reading and querying them, proofs
//! (`proof.rs`), checkpoints (`checkpoint.rs`), verification and bundles (`verify.rs`,
//! `bundle.rs`), a fleet node's log published as C2SP tiles (`tiles.rs`) and a path's history
//! (`history.rs`).

pub mod appender;
pub mod bundle;
pub mod checkpoint;
pub mod history;
pub mod proof;
pub mod tiles;
pub mod verify;

use serde_json::{json, Value};

use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::base::time::now_ns;
use crate::manifest;
use crate::model::audit::{AuditQuery, AuditRecord, FullRecord, Order};
use crate::object::Sha256;
use crate::repo::Repo;

impl Repo {
    /// Appends one audit record in a transaction of its own and returns its sequence number.
    pub fn audit(&self, record: AuditRecord) -> Result<i64> {
        let seq = self.manifest.write(|tx| manifest::audit::append(tx, &record))?;
        self.checkpoint_if_due();
        Ok(seq)
    }

    /// Appends one audit record without waiting for it to reach the disk: for records a flood
    /// of bad requests could otherwise make expensive (refusals), where losing the last few in
    /// a power cut is acceptable.
    pub fn audit_relaxed(&self, record: AuditRecord) -> Result<i64> {
        let seq = self.manifest.write_relaxed(|tx| manifest::audit::append(tx, &record))?;
        self.checkpoint_if_due();
        Ok(seq)
    }

    /// The records `q` selects (see [`AuditQuery`]), oldest first.
    pub fn audit_query(&self, q: &AuditQuery) -> Result<Vec<FullRecord>> {
        self.manifest.read(|| manifest::audit::query(self.manifest.conn(), q))
    }

    /// The operations the log's records name, sorted: what an operation filter can match.
    pub fn audit_operations(&self) -> Result<Vec<String>> {
        manifest::audit::operations(self.manifest.conn())
    }

    /// How many operations of `session` were refused (audited with an outcome other than `ok`).
    pub fn audit_refusals(&self, session: &SessionId) -> Result<u64> {
        self.manifest.read(|| manifest::audit::refusals(self.manifest.conn(), session))
    }

    /// How many records the log holds.
    pub fn audit_size(&self) -> Result<u64> {
        manifest::audit::size(self.manifest.conn())
    }

    /// Record `seq`, if there is one.
    pub fn audit_record(&self, seq: i64) -> Result<Option<FullRecord>> {
        manifest::audit::get(self.manifest.conn(), seq)
    }

    /// The last `limit` records (of `session`, if given), oldest first.
    pub fn audit_log(&self, session: Option<&str>, limit: i64) -> Result<Vec<FullRecord>> {
        let session = session.map(SessionId::parse).transpose()?;
        let q = AuditQuery { session, order: Order::Newest, limit: limit.max(0) as usize, ..Default::default() };
        self.audit_query(&q)
    }

    /// Appends the record of a change `operation` refused with `e`, in `workspace` (and
    /// `session`) for `actor`: the path the error names (or `path`), the file's sha256 when
    /// the error gives it (a stale file), and the message.
    pub(crate) fn audit_refusal(
        &self,
        workspace: &str,
        session: Option<&SessionId>,
        actor: &str,
        operation: &str,
        path: Option<&str>,
        e: &Error,
    ) -> Result<i64> {
        let mut rec = AuditRecord::ok(now_ns(), actor, operation);
        rec.outcome = e.kind().as_str().to_string();
        rec.workspace = Some(workspace.to_string());
        rec.session = session.cloned();
        let detail_path = e.details().and_then(|d| d.get("path")).and_then(Value::as_str);
        rec.path = detail_path.or(path).map(|p| p.as_bytes().to_vec());
        rec.before_sha256 = e
            .details()
            .and_then(|d| d.get("currentSha256"))
            .and_then(Value::as_str)
            .map(Sha256::from_hex)
            .transpose()?;
        rec.details = json!({"message": e.message()});
        self.audit(rec)
    }
}
