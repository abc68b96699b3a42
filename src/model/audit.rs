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

    /// What a record keeps of details (as JSON text) too long for a record:
    /// `{"truncated":{"bytes":N,"sha256":"<hex>"}}`.
    pub fn truncated_details(text: &str) -> serde_json::Value {
        use sha2::Digest;
        let hash = Sha256(sha2::Sha256::digest(text.as_bytes()).into());
        serde_json::json!({ "truncated": { "bytes": text.len(), "sha256": hash.to_hex() } })
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

/// Which records an audit query selects: every filter given must hold.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Only this actor's.
    pub actor: Option<String>,
    /// Only this session's.
    pub session: Option<SessionId>,
    /// Only this workspace's.
    pub workspace: Option<String>,
    /// Only this operation's (`write_file`, `trash_purge`, ...).
    pub operation: Option<String>,
    /// Only this outcome's (`ok`, or an error kind).
    pub outcome: Option<String>,
    /// Only records of exactly this path.
    pub path: Option<Vec<u8>>,
    /// Only records of this path or below it.
    pub prefix: Option<Vec<u8>>,
    /// Only records at or after this time (ns).
    pub since_ns: Option<i64>,
    /// Only records before this time (ns).
    pub until_ns: Option<i64>,
    /// Which end of the log to read from.
    pub order: Order,
    /// At most this many.
    pub limit: usize,
}

/// Where a query reads: the newest records (shown oldest first), or those after a seq, in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// The newest `limit` records.
    #[default]
    Newest,
    /// The first `limit` records after this seq: incremental reading.
    After(i64),
    /// The newest `limit` records before this seq (shown oldest first): reading back a page at
    /// a time.
    Before(i64),
}

/// A stored checkpoint: the log's size and root then, and the signed note saying so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointed {
    /// Records covered.
    pub size: u64,
    /// When it was written (ns).
    pub time_ns: i64,
    /// The Merkle root of those records.
    pub root: [u8; 32],
    /// The C2SP signed note, cosignatures included.
    pub note: String,
}

impl AuditRecord {
    /// The record and its seq from a canonical encoding: the inverse of [`AuditRecord::encode`].
    /// Every length is checked against what is left; anything else is `corrupt`.
    pub fn decode(bytes: &[u8]) -> crate::base::error::Result<(i64, AuditRecord)> {
        let bad = |what: &str| crate::base::error::Error::corrupt(format!("not an audit record's encoding: {what}"));
        let rest = bytes.strip_prefix(TAG).ok_or_else(|| bad("no tag"))?;
        let (head, mut rest) = rest.split_at_checked(16).ok_or_else(|| bad("too short"))?;
        let seq = u64::from_le_bytes(head[..8].try_into().map_err(|_| bad("seq"))?);
        let time_ns = i64::from_le_bytes(head[8..].try_into().map_err(|_| bad("time"))?);
        let mut field = || -> crate::base::error::Result<Option<Vec<u8>>> {
            let (len, after) = rest.split_at_checked(4).ok_or_else(|| bad("a field's length is cut"))?;
            let len = u32::from_le_bytes(len.try_into().map_err(|_| bad("length"))?);
            if len == u32::MAX {
                rest = after;
                return Ok(None);
            }
            let (value, after) = after.split_at_checked(len as usize).ok_or_else(|| bad("a field is cut"))?;
            rest = after;
            Ok(Some(value.to_vec()))
        };
        let text =
            |v: Option<Vec<u8>>| v.map(String::from_utf8).transpose().map_err(|_| bad("a text field is not UTF-8"));
        let hash = |v: Option<Vec<u8>>| -> crate::base::error::Result<Option<[u8; 32]>> {
            v.map(|b| b.try_into().map_err(|_| bad("a hash is not 32 bytes"))).transpose()
        };
        let actor = text(field()?)?.ok_or_else(|| bad("no actor"))?;
        let operation = text(field()?)?.ok_or_else(|| bad("no operation"))?;
        let mut r = AuditRecord::ok(time_ns, &actor, &operation);
        r.workspace = text(field()?)?;
        r.session = text(field()?)?.map(|s| SessionId::parse(&s)).transpose().map_err(|_| bad("a session id"))?;
        r.path = field()?;
        r.dest_path = field()?;
        r.before_sha256 = hash(field()?)?.map(Sha256);
        r.after_sha256 = hash(field()?)?.map(Sha256);
        r.before_object = hash(field()?)?.map(ObjectId);
        r.after_object = hash(field()?)?.map(ObjectId);
        r.outcome = text(field()?)?.ok_or_else(|| bad("no outcome"))?;
        let details = text(field()?)?.ok_or_else(|| bad("no details"))?;
        r.details = serde_json::from_str(&details).map_err(|_| bad("the details are not JSON"))?;
        if !rest.is_empty() {
            return Err(bad("bytes after the last field"));
        }
        let seq = i64::try_from(seq).map_err(|_| bad("seq"))?;
        Ok((seq, r))
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
    /// The record as the CLI's JSON and the HTTP API show it.
    pub fn entry(&self) -> AuditEntry {
        let r = &self.record;
        let (path, path_base64) = match &r.path {
            Some(p) => {
                let (p, b) = crate::base::path::for_json(p);
                (Some(p), b)
            }
            None => (None, None),
        };
        AuditEntry {
            seq: self.seq,
            time: crate::base::time::iso_time(r.time_ns),
            actor: r.actor.clone(),
            operation: r.operation.clone(),
            workspace: r.workspace.clone(),
            session: r.session.clone(),
            path,
            path_base64,
            dest_path: r.dest_path.as_deref().map(|d| crate::base::path::for_json(d).0),
            before_sha256: r.before_sha256,
            after_sha256: r.after_sha256,
            before_object: r.before_object,
            after_object: r.after_object,
            outcome: r.outcome.clone(),
            details: r.details.clone(),
            proof: None,
            node: None,
        }
    }

    /// The record as JSON (see [`FullRecord::entry`]).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.entry()).unwrap_or(serde_json::Value::Null)
    }
}

/// An audit record as operators read it: `trove audit log --json`, `GET /v1/audit`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its position in the log, from 1.
    pub seq: i64,
    /// When, RFC 3339 UTC.
    pub time: String,
    /// Who: a token id over HTTP, `cli:<user>` from the command line, a session's actor.
    pub actor: String,
    /// What: a tool (`write_file`, ...) or an operation (`session_end`, `trash_purge`, ...).
    pub operation: String,
    /// The workspace it concerned.
    pub workspace: Option<String>,
    /// The session it was done in.
    pub session: Option<SessionId>,
    /// The path it concerned, with U+FFFD for bytes that are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// A move's destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dest_path: Option<String>,
    /// The file's sha256 before.
    pub before_sha256: Option<Sha256>,
    /// The file's sha256 after.
    pub after_sha256: Option<Sha256>,
    /// The stored content before (the pre-image).
    pub before_object: Option<ObjectId>,
    /// The stored content after.
    pub after_object: Option<ObjectId>,
    /// `ok`, or the error kind of a refusal.
    pub outcome: String,
    /// What else the operation recorded.
    pub details: serde_json::Value,
    /// Its inclusion proof, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<InclusionProof>,
    /// The node whose log holds it, in a fleet's bucket (its `seq` is in that node's log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Proof that record `seq` is in the log of `tree_size` records whose root a checkpoint signs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InclusionProof {
    /// The record's leaf index (`seq - 1`).
    pub leaf_index: u64,
    /// The size of the tree the proof is for.
    pub tree_size: u64,
    /// The record's leaf hash, base64: SHA-256(0x00 || its canonical encoding).
    pub leaf_hash: String,
    /// The hashes, base64, from the leaf's sibling up.
    pub proof: Vec<String>,
    /// The root they lead to, base64.
    pub root: String,
}

/// Proof that the log of `to` records extends the log of `from` records.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsistencyProof {
    /// The smaller size.
    pub from: u64,
    /// The larger size.
    pub to: u64,
    /// The root of the smaller tree, base64.
    pub from_root: String,
    /// The root of the larger tree, base64.
    pub to_root: String,
    /// The hashes, base64.
    pub proof: Vec<String>,
}

/// A checkpoint as shown: its size, root, time and signed note.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// Records covered.
    pub size: u64,
    /// Their Merkle root, base64.
    pub root: String,
    /// When it was written, RFC 3339 UTC.
    pub time: String,
    /// The C2SP signed note.
    pub note: String,
}

impl Checkpointed {
    /// The checkpoint as shown.
    pub fn record(&self) -> CheckpointRecord {
        use base64::Engine;
        CheckpointRecord {
            size: self.size,
            root: base64::engine::general_purpose::STANDARD.encode(self.root),
            time: crate::base::time::iso_time(self.time_ns),
            note: self.note.clone(),
        }
    }
}

/// What `trove audit verify` found: the range a signature proves, the records none covers, or
/// the first thing wrong.
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The first record read: 1, or a bundle's first.
    pub from: u64,
    /// Records read (verified or not: see `verifiedTo` and `unsigned`).
    pub records: u64,
    /// Checkpoints whose signature and root were checked.
    pub checkpoints: u64,
    /// Records up to this one are proven by a signed checkpoint (0: none is).
    pub verified_to: u64,
    /// How many records no signed checkpoint covers (those of `unsigned`).
    pub unsigned_tail: u64,
    /// The records no signed checkpoint covers, never counted as verified: every record when
    /// there is no checkpoint, else those after the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsigned: Option<SeqRange>,
    /// The last signed checkpoint the records were found to match: its size and the time it
    /// was signed (a bundle cut back to an old checkpoint shows its age here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_checkpoint: Option<CheckpointSeen>,
    /// The first record (by seq) found rewritten, missing, out of place or out of time order.
    pub first_bad_seq: Option<i64>,
    /// Every problem, in the order found.
    pub problems: Vec<String>,
}

/// Records `first` to `last`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeqRange {
    /// The first record of the range.
    pub first: u64,
    /// The last record of the range.
    pub last: u64,
}

impl std::fmt::Display for SeqRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// A public key the log registers as signing its checkpoints (`trove audit keys`): in a
/// bucket, each host signs with a key of its own unless they share one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditKeyInfo {
    /// The public key, as `trove audit pubkey` prints it and `--pubkey` takes it.
    pub key: String,
    /// The host that registered it (its id, `host` in its cache directory); none in a directory.
    pub host: Option<String>,
    /// When it was registered, with its first checkpoint (RFC 3339 UTC).
    pub added: String,
    /// Whether it is this host's own key.
    pub this_host: bool,
}

/// A signed checkpoint as verification met it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointSeen {
    /// Records it signs.
    pub size: u64,
    /// When it was signed, RFC 3339 UTC, from its signed text (absent in checkpoints written
    /// before checkpoints carried their time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

impl VerifyReport {
    /// Whether nothing was found wrong. Records no checkpoint covers are not wrong: see
    /// [`VerifyReport::covered`].
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether every record read is covered by a signed checkpoint.
    pub fn covered(&self) -> bool {
        self.unsigned.is_none()
    }
}

/// One change of a path's history, newest first (`trove audit history`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The record.
    #[serde(flatten)]
    pub entry: AuditEntry,
    /// What the record did to the path (`write`, `create`, `delete`, `move`, `mkdir`, ...).
    pub change: Option<String>,
    /// The path's name at that time (it differs from the one asked for before a rename).
    pub as_path: String,
}
