//! Snapshots as data: the record of one workspace state, its counts and its warnings.

use serde::{Deserialize, Serialize};

use crate::base::id::{SessionId, SnapshotId};
use crate::object::ObjectId;

/// What a snapshot holds, and what changed since its parent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// Regular files kept.
    pub files: u64,
    /// Directories kept (the root included).
    pub dirs: u64,
    /// Symlinks kept.
    pub symlinks: u64,
    /// The files' total size in bytes.
    pub bytes: u64,
    /// Files new since the parent snapshot.
    pub added: u64,
    /// Files whose content changed since the parent snapshot.
    pub changed: u64,
    /// Files of the parent snapshot that are gone.
    pub removed: u64,
    /// Sockets, FIFOs and devices met during the walk, which are not kept.
    pub skipped: u64,
}

/// Something a snapshot could not keep exactly, recorded instead of failing the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warning {
    /// The workspace-relative path concerned, as text.
    pub path: String,
    /// What was not kept, and why.
    pub message: String,
}

/// One snapshot: a workspace's whole tree at one moment. It is shown as a [`SnapshotRecord`].
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    /// The snapshot's id.
    pub id: SnapshotId,
    /// The workspace it is a state of.
    pub workspace: String,
    /// The session that took it, if any.
    pub session: Option<SessionId>,
    /// The workspace's previous snapshot, which `counts` compares against.
    pub parent: Option<SnapshotId>,
    /// When it was taken, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// Why it was taken (`manual`, `pause`, `session_end`...).
    pub reason: String,
    /// The root tree's id.
    pub root: ObjectId,
    /// The directory it was taken of, as raw path bytes.
    pub source_dir: Vec<u8>,
    /// What it holds and what changed.
    pub counts: Counts,
    /// What it could not keep exactly.
    pub warnings: Vec<Warning>,
}

/// A snapshot as the CLI's `--json` and the HTTP API show it: trove's own shape, so camelCase
/// and the time in RFC 3339 UTC.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRecord<'a> {
    /// The snapshot's id.
    pub id: &'a SnapshotId,
    /// The workspace it is a state of.
    pub workspace: &'a str,
    /// The session that took it, if any.
    pub session: Option<&'a SessionId>,
    /// The workspace's previous snapshot.
    pub parent: Option<&'a SnapshotId>,
    /// When it was taken, RFC 3339 UTC.
    pub created_at: String,
    /// Why it was taken.
    pub reason: &'a str,
    /// The root tree's id.
    pub root: ObjectId,
    /// What it holds and what changed.
    pub counts: &'a Counts,
    /// What it could not keep exactly.
    pub warnings: &'a [Warning],
    /// In a fleet (a bucket of a log per node), the node whose record it is; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl SnapshotInfo {
    /// The snapshot as it is shown.
    pub fn record(&self) -> SnapshotRecord<'_> {
        SnapshotRecord {
            node: None,
            id: &self.id,
            workspace: &self.workspace,
            session: self.session.as_ref(),
            parent: self.parent.as_ref(),
            created_at: crate::base::time::iso_time(self.created_ns),
            reason: &self.reason,
            root: self.root,
            counts: &self.counts,
            warnings: &self.warnings,
        }
    }
}
