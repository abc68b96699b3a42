//! Audit records: one immutable entry per repository-changing operation, and its canonical
//! byte encoding, the future leaf of the log's Merkle tree.
//!
//! Encoding (ARCHITECTURE.md, "Audit record encoding"): the tag `trove-audit-v1`, then seq u64
//! LE, time_ns i64 LE, then the fields actor, operation, workspace, session, path, dest_path,
//! before_sha256, after_sha256, before_object, after_object, outcome, details (compact JSON),
//! each as a u32 LE length and the bytes, with length 0xFFFFFFFF for an absent field.

use crate::base::id::SessionId;
use crate::object::{ObjectId, Sha256};

/// One audit record as appended (its `seq` is given by the log; see [`FullRecord`]).
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// When, in nanoseconds since the Unix epoch.
    pub time_ns: i64,
    /// Who: `cli:<user>`, a session id, or an operator key id.
    pub actor: String,
    /// What was done: the tool's name (`write_file`...) or the operation (`session_end`...).
    pub operation: String,
    /// The workspace it concerned, if any.
    pub workspace: Option<String>,
    /// The session it was done in, if any.
    pub session: Option<SessionId>,
    /// The workspace-relative path it concerned.
    pub path: Option<Vec<u8>>,
    /// The destination of a move.
    pub dest_path: Option<Vec<u8>>,
    /// The file's SHA-256 before the change.
    pub before_sha256: Option<Sha256>,
    /// The file's SHA-256 after the change.
    pub after_sha256: Option<Sha256>,
    /// The stored object holding the content before the change (the pre-image).
    pub before_object: Option<ObjectId>,
    /// The stored object holding the content after the change.
    pub after_object: Option<ObjectId>,
    /// `ok` or the error kind of a refusal.
    pub outcome: String,
    /// Facts particular to the operation (the plan id, the change, a trash id...), as JSON.
    pub details: serde_json::Value,
}

const TAG: &[u8] = b"trove-audit-v1";

impl AuditRecord {
    /// A successful operation by `actor` with nothing else filled in yet.
    pub fn ok(time_ns: i64, actor: &str, operation: &str) -> AuditRecord {
        AuditRecord {
            time_ns,
            actor: actor.to_string(),
            operation: operation.to_string(),
            workspace: None,
            session: None,
            path: None,
            dest_path: None,
            before_sha256: None,
            after_sha256: None,
            before_object: None,
            after_object: None,
            outcome: "ok".to_string(),
            details: serde_json::Value::Object(Default::default()),
        }
    }

    /// The canonical encoding of the record as entry `seq` (see the module's documentation).
    pub fn encode(&self, seq: i64) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, v: Option<&[u8]>) {
            match v {
                Some(b) => {
                    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                    out.extend_from_slice(b);
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(TAG);
        out.extend_from_slice(&(seq as u64).to_le_bytes());
        out.extend_from_slice(&self.time_ns.to_le_bytes());
        let details = self.details.to_string();
        field(&mut out, Some(self.actor.as_bytes()));
        field(&mut out, Some(self.operation.as_bytes()));
        field(&mut out, self.workspace.as_deref().map(str::as_bytes));
        field(&mut out, self.session.as_ref().map(|s| s.as_str().as_bytes()));
        field(&mut out, self.path.as_deref());
        field(&mut out, self.dest_path.as_deref());
        field(&mut out, self.before_sha256.as_ref().map(|s| &s.as_bytes()[..]));
        field(&mut out, self.after_sha256.as_ref().map(|s| &s.as_bytes()[..]));
        field(&mut out, self.before_object.as_ref().map(|o| &o.as_bytes()[..]));
        field(&mut out, self.after_object.as_ref().map(|o| &o.as_bytes()[..]));
        field(&mut out, Some(self.outcome.as_bytes()));
        field(&mut out, Some(details.as_bytes()));
        out
    }
}

/// A stored record: its sequence number and the record as it was appended.
#[derive(Debug, Clone)]
pub struct FullRecord {
    /// The record's position in the log, from 1.
    pub seq: i64,
    /// The record itself.
    pub record: AuditRecord,
}

impl FullRecord {
    /// The record as JSON: hashes and object ids in hex, paths as text.
    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.record;
        let mut m = serde_json::Map::new();
        m.insert("seq".into(), self.seq.into());
        m.insert("time".into(), crate::base::time::iso_time(r.time_ns).into());
        m.insert("actor".into(), r.actor.clone().into());
        m.insert("operation".into(), r.operation.clone().into());
        m.insert("workspace".into(), r.workspace.clone().into());
        m.insert("session".into(), r.session.clone().into());
        if let Some(p) = &r.path {
            crate::base::path::put_json(&mut m, "path", p);
        }
        if let Some(p) = &r.dest_path {
            crate::base::path::put_json(&mut m, "destPath", p);
        }
        m.insert("beforeSha256".into(), r.before_sha256.map(hex::encode).into());
        m.insert("afterSha256".into(), r.after_sha256.map(hex::encode).into());
        m.insert("beforeObject".into(), r.before_object.map(|o| o.to_hex()).into());
        m.insert("afterObject".into(), r.after_object.map(|o| o.to_hex()).into());
        m.insert("outcome".into(), r.outcome.clone().into());
        m.insert("details".into(), r.details.clone());
        serde_json::Value::Object(m)
    }
}
