//! A path's history across snapshots, and paths found across snapshots: what `trove log` and
//! `trove find` answer from the path index. trove's own shapes, camelCase.

use serde::Serialize;

use crate::base::id::SnapshotId;
use crate::model::audit::AuditEntry;
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};

/// One version of a path and the run of snapshots holding it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathVersion {
    /// The workspace.
    pub workspace: String,
    /// The path, with U+FFFD for bytes that are not UTF-8.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// `file` or `symlink`.
    pub kind: EntryKind,
    /// Permission bits, octal.
    pub mode: String,
    /// Size in bytes.
    pub size: u64,
    /// A file's content id, which `trove cat` and `GET .../content/{id}` read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<ObjectId>,
    /// A file's SHA-256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256>,
    /// A symlink's target, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The first snapshot holding this version.
    pub first_snapshot: SnapshotId,
    /// When it was taken, RFC 3339 UTC.
    pub first_at: String,
    /// The last snapshot holding it.
    pub last_snapshot: SnapshotId,
    /// When that was taken.
    pub last_at: String,
    /// How many snapshots in a row hold it.
    pub snapshots: u64,
    /// Whether the workspace's latest snapshot holds it.
    pub current: bool,
}

/// How a version came to be, in a path's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum VersionOrigin {
    /// The path appeared (first, or again after a deletion).
    Added,
    /// The path's previous version changed into it.
    Modified,
    /// It arrived by a rename (`--follow`): `renamedFrom` says from where.
    Renamed,
}

/// One entry of `trove log`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// The version.
    #[serde(flatten)]
    pub version: PathVersion,
    /// How it came to be.
    pub origin: VersionOrigin,
    /// For a rename: the path it had before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// The snapshot in which it was gone (deleted or renamed away), if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gone_in: Option<SnapshotId>,
    /// The audit record of the change that produced it, where the log knows it: the last write
    /// of this content to this path before the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<AuditEntry>,
}

/// `trove log`: a path's versions, newest first.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathLog {
    /// The workspace.
    pub workspace: String,
    /// The path asked for.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// Its versions, newest first (with `--follow`, those under earlier names after).
    pub versions: Vec<LogEntry>,
}

/// `trove find`: the versions of matching paths across snapshots.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindResult {
    /// The name or glob searched for.
    pub pattern: String,
    /// Matching versions, by workspace, path and first snapshot.
    pub matches: Vec<PathVersion>,
    /// Distinct paths matched (also those `limit` left out).
    pub paths: u64,
    /// Whether `limit` left versions out.
    pub truncated: bool,
}
