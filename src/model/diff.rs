//! Diffs as data: how each path changed between two states of a workspace, the totals, and
//! what was compared. trove's own shapes, so camelCase and RFC 3339 UTC times.

use serde::Serialize;

use crate::base::id::{SessionId, SnapshotId};
use crate::base::path;
use crate::base::time::iso_time;
use crate::model::audit::AuditEntry;
use crate::model::snapshot::Warning;
use crate::model::trash::TrashRecord;
use crate::model::tree::{Entry, EntryKind};
use crate::object::{ObjectId, Sha256};

/// How one path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ChangeStatus {
    /// There only on the new side.
    Added,
    /// Its content changed (its mode may have too).
    Modified,
    /// There only on the old side.
    Deleted,
    /// The same or similar content at a new path; `oldPath` says where it was.
    Renamed,
    /// A file became a symlink or a directory, or the other way round.
    TypeChanged,
    /// Only its permission bits changed.
    ModeChanged,
}

impl ChangeStatus {
    /// git's letter for it in `--name-status` (a mode change is an `M` there too).
    pub fn letter(self) -> char {
        match self {
            ChangeStatus::Added => 'A',
            ChangeStatus::Modified | ChangeStatus::ModeChanged => 'M',
            ChangeStatus::Deleted => 'D',
            ChangeStatus::Renamed => 'R',
            ChangeStatus::TypeChanged => 'T',
        }
    }
}

/// One side of a change: what was at the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// `file`, `dir` or `symlink`.
    pub kind: EntryKind,
    /// The permission bits, in octal.
    pub mode: String,
    /// A file's size in bytes (a symlink's target length; 0 for a directory).
    pub size: u64,
    /// Modification time, RFC 3339 UTC.
    pub modified_at: String,
    /// A file's content id (BLAKE3), which `GET .../content/{id}` and `trove cat` read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<ObjectId>,
    /// A file's SHA-256, the stale-file protocol's hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256>,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The exact target bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_base64: Option<String>,
}

impl Version {
    /// The version a tree entry records.
    pub fn of(e: &Entry) -> Version {
        let (target, target_base64) = e.target.as_deref().map(path::for_json).unzip();
        Version {
            kind: e.kind,
            mode: format!("{:o}", e.mode),
            size: e.size,
            modified_at: iso_time(e.mtime_ns),
            content: if e.kind == EntryKind::File { e.content } else { None },
            sha256: e.sha256,
            target,
            target_base64: target_base64.flatten(),
        }
    }
}

/// One changed path.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffEntry {
    /// How it changed.
    pub status: ChangeStatus,
    /// The workspace-relative path (the new one for a rename), with U+FFFD for bytes that are
    /// not UTF-8.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// A rename's old path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// The exact old path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path_base64: Option<String>,
    /// A rename's similarity in percent (100: the same content).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<u8>,
    /// What was there before; absent for an addition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Version>,
    /// What is there now; absent for a deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Version>,
    /// Either side is a file that is not text (a NUL byte early on, or not UTF-8).
    pub binary: bool,
    /// Lines added, for text files (absent when binary, too large, or not asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_added: Option<u64>,
    /// Lines removed, for text files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_removed: Option<u64>,
    /// The unified diff, git style, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Why the content was not compared line by line, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The exact path bytes (shown as `path`/`pathBase64`).
    #[serde(skip)]
    pub raw_path: Vec<u8>,
    /// The exact old path bytes of a rename.
    #[serde(skip)]
    pub raw_old_path: Option<Vec<u8>>,
}

impl DiffEntry {
    /// A change of `path` from `old` to `new` (either may be absent), before content is compared.
    pub fn new(status: ChangeStatus, path: &[u8], old: Option<&Entry>, new: Option<&Entry>) -> DiffEntry {
        let (shown, path_base64) = path::for_json(path);
        DiffEntry {
            status,
            path: shown,
            path_base64,
            old_path: None,
            old_path_base64: None,
            similarity: None,
            old: old.map(Version::of),
            new: new.map(Version::of),
            binary: false,
            lines_added: None,
            lines_removed: None,
            patch: None,
            note: None,
            raw_path: path.to_vec(),
            raw_old_path: None,
        }
    }

    /// Marks it a rename from `old_path` at `similarity` percent.
    pub fn renamed_from(mut self, old_path: &[u8], similarity: u8) -> DiffEntry {
        let (shown, b64) = path::for_json(old_path);
        self.status = ChangeStatus::Renamed;
        self.old_path = Some(shown);
        self.old_path_base64 = b64;
        self.similarity = Some(similarity);
        self.raw_old_path = Some(old_path.to_vec());
        self
    }
}

/// The totals of a diff, over every change (also those a `limit` left out of `entries`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffStats {
    /// Paths changed in any way.
    pub changed: u64,
    /// Paths added.
    pub added: u64,
    /// Paths modified.
    pub modified: u64,
    /// Paths deleted.
    pub deleted: u64,
    /// Paths renamed.
    pub renamed: u64,
    /// Paths whose kind changed.
    pub type_changed: u64,
    /// Paths whose mode alone changed.
    pub mode_changed: u64,
    /// Lines added over the text files compared.
    pub lines_added: u64,
    /// Lines removed over the text files compared.
    pub lines_removed: u64,
}

impl DiffStats {
    /// Counts `e` in.
    pub fn add(&mut self, e: &DiffEntry) {
        self.changed += 1;
        match e.status {
            ChangeStatus::Added => self.added += 1,
            ChangeStatus::Modified => self.modified += 1,
            ChangeStatus::Deleted => self.deleted += 1,
            ChangeStatus::Renamed => self.renamed += 1,
            ChangeStatus::TypeChanged => self.type_changed += 1,
            ChangeStatus::ModeChanged => self.mode_changed += 1,
        }
        self.lines_added += e.lines_added.unwrap_or(0);
        self.lines_removed += e.lines_removed.unwrap_or(0);
    }
}

/// What one side of a diff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointKind {
    /// A snapshot.
    Snapshot,
    /// The live tree, as it is now.
    Live,
    /// Nothing: the state before a workspace's first snapshot.
    Empty,
}

/// One side of a diff, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// A snapshot, the live tree, or nothing.
    pub kind: EndpointKind,
    /// The snapshot's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotId>,
    /// When the snapshot was taken, or when the live tree was read; RFC 3339 UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// A whole diff.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffReport {
    /// The old side.
    pub from: Endpoint,
    /// The new side.
    pub to: Endpoint,
    /// The changed paths, in path order.
    pub entries: Vec<DiffEntry>,
    /// The totals.
    pub stats: DiffStats,
    /// Whether `limit` left changes out of `entries` (`stats` still counts them).
    pub truncated: bool,
    /// Whether there were too many additions and deletions to look for similar-content
    /// renames (exact renames are still found).
    pub renames_skipped: bool,
    /// What reading the live tree could not do exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// One changed path of a session, with what touched it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedPath {
    /// How the path changed from the session's start to its end (or now).
    #[serde(flatten)]
    pub change: DiffEntry,
    /// The session's audit records of this path (or of a directory holding it, or a move to
    /// it), oldest first: who, which tool, when.
    pub records: Vec<AuditEntry>,
    /// For a deleted path: the trash items holding it, which `trove trash restore` takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trash: Vec<TrashRecord>,
}

/// What a session changed: its start against its end (or its live tree while it runs).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionChanges {
    /// The session.
    pub session: SessionId,
    /// Its workspace.
    pub workspace: String,
    /// Whether it still runs (then `to` is its live tree).
    pub active: bool,
    /// What it started from.
    pub from: Endpoint,
    /// Where it is now.
    pub to: Endpoint,
    /// The changed paths in path order, each with its audit records.
    pub entries: Vec<ChangedPath>,
    /// The totals.
    pub stats: DiffStats,
    /// Whether `limit` left changes out of `entries`.
    pub truncated: bool,
    /// See [`DiffReport::renames_skipped`].
    pub renames_skipped: bool,
    /// Every item the session deleted into the trash (also of paths it had created), newest
    /// first.
    pub trash: Vec<TrashRecord>,
    /// The session's audit records that name a path, in all.
    pub records: u64,
    /// What reading the live tree could not do exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}
