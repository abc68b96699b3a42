//! The trash: files and directories deleted through trove (by the tools or an operator), kept
//! as manifest rows over objects, so any of them comes back (DESIGN.md, "Trash"); and the shapes
//! listing, restoring, purging and retention are asked and answered in.

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind};
use crate::base::id::{SessionId, TrashId};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};

/// One deleted file or directory. Hashes and object ids are hex; paths are workspace-relative.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrashItem {
    /// The item's id.
    pub id: TrashId,
    /// The workspace it was deleted from.
    pub workspace: String,
    /// The session that deleted it, if any.
    pub session: Option<SessionId>,
    /// Where it was, workspace-relative.
    pub path: Vec<u8>,
    /// A file, a directory, or a symlink.
    pub kind: EntryKind,
    /// A file's size, or the total size of a directory's files, in bytes.
    pub size: u64,
    /// A file's SHA-256.
    pub sha256: Option<Sha256>,
    /// Permission bits.
    pub mode: u32,
    /// A file's content in the store.
    pub object: Option<ObjectId>,
    /// Who deleted it (an actor, as in the audit log).
    pub deleted_by: String,
    /// When, nanoseconds since the Unix epoch.
    pub deleted_ns: i64,
    /// The tool that deleted it.
    pub reason: String,
    /// The audit record of the deletion.
    pub audit_seq: Option<i64>,
    /// When it was last restored, nanoseconds since the Unix epoch.
    pub restored_ns: Option<i64>,
    /// Its modification time when deleted, nanoseconds (0 when an older version did not keep it).
    #[serde(default)]
    pub mtime_ns: i64,
    /// A directory's number of files.
    #[serde(default)]
    pub files: u64,
    /// A directory's members, relative to it, parents before children.
    pub entries: Vec<TrashEntry>,
}

/// One member of a deleted directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrashEntry {
    /// Its path relative to the directory.
    pub rel: Vec<u8>,
    /// A file, a directory, or a symlink.
    pub kind: EntryKind,
    /// A file's size in bytes.
    pub size: u64,
    /// A file's SHA-256.
    pub sha256: Option<Sha256>,
    /// Permission bits.
    pub mode: u32,
    /// A file's content in the store.
    pub object: Option<ObjectId>,
    /// A symlink's target.
    pub target: Option<Vec<u8>>,
    /// Its modification time when deleted, nanoseconds (0 when an older version did not keep it).
    #[serde(default)]
    pub mtime_ns: i64,
}

/// What a restore does when something is at the target path.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// Refuse with `already_exists`.
    #[default]
    Fail,
    /// Restore beside it, as `name (restored).ext`.
    Rename,
    /// Replace it (a file, whose sha256 must be given), sending it to the trash.
    Overwrite,
    /// A directory onto an existing directory: restore every member that does not collide,
    /// and report each one that does.
    Merge,
}

/// A trash item brought back (`restore_file`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreResult {
    /// Where it now is.
    pub path: String,
    /// The trash item restored.
    pub trash_id: TrashId,
    /// What it is.
    pub kind: EntryKind,
    /// A file's sha256.
    pub sha256: Option<String>,
    /// The trash item that keeps the file it replaced (`onConflict: overwrite`).
    pub replaced_trash_id: Option<TrashId>,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
    /// Missing parent directories the restore made first, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub made_parents: Vec<String>,
    /// `merge`: the members left out because something was at their path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collisions: Vec<String>,
}

/// What went wrong with one item of a bulk operation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemError {
    /// The error's kind.
    pub kind: ErrorKind,
    /// One sentence for people.
    pub message: String,
}

/// One item of a bulk restore: restored, or why not.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreOutcome {
    /// The item.
    pub trash_id: TrashId,
    /// Its original path, when the item was found.
    pub path: Option<String>,
    /// Whether it was restored.
    pub ok: bool,
    /// What the restore did, when `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<RestoreResult>,
    /// Why not, when not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemError>,
}

impl RestoreOutcome {
    /// Item `trash_id` (at `path`), restored as `r` says.
    pub fn done(trash_id: TrashId, path: String, r: RestoreResult) -> RestoreOutcome {
        RestoreOutcome { trash_id, path: Some(path), ok: true, restored: Some(r), error: None }
    }

    /// Item `trash_id` (at `path`, if it was found), refused with `e`.
    pub fn failed(trash_id: TrashId, path: Option<String>, e: &Error) -> RestoreOutcome {
        let error = ItemError { kind: e.kind(), message: e.message().to_string() };
        RestoreOutcome { trash_id, path, ok: false, restored: None, error: Some(error) }
    }
}

/// What a bulk restore did: every item's outcome, in the order restored (parents first).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkRestore {
    /// How many items were restored.
    pub restored: usize,
    /// How many were not.
    pub failed: usize,
    /// Each item's outcome.
    pub items: Vec<RestoreOutcome>,
}

impl TrashItem {
    /// The item as listings show it.
    pub fn record(&self) -> TrashRecord {
        let (path, path_base64) = crate::base::path::for_json(&self.path);
        let files = (self.kind == EntryKind::Dir).then_some(self.files);
        TrashRecord {
            node: None,
            id: self.id.clone(),
            workspace: self.workspace.clone(),
            path,
            path_base64,
            kind: self.kind,
            size: self.size,
            files,
            sha256: self.sha256,
            mode: format!("{:o}", self.mode),
            session: self.session.clone(),
            deleted_by: self.deleted_by.clone(),
            deleted_at: crate::base::time::iso_time(self.deleted_ns),
            reason: self.reason.clone(),
            audit_seq: self.audit_seq,
            restored: self.restored_ns.is_some(),
            restored_at: self.restored_ns.map(crate::base::time::iso_time),
        }
    }
}

/// A trash item as `trove trash ls --json` and the trash routes show it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrashRecord {
    /// The item's id: what restoring, showing or purging it takes.
    pub id: TrashId,
    /// The workspace it was deleted from.
    pub workspace: String,
    /// Where it was, workspace-relative, with U+FFFD for bytes that are not UTF-8.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// What it was.
    pub kind: EntryKind,
    /// A file's size, or the total of a directory's files, in bytes.
    pub size: u64,
    /// A directory's number of files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// A file's sha256.
    pub sha256: Option<Sha256>,
    /// Its permission bits, in octal.
    pub mode: String,
    /// The session that deleted it; none when an operator did.
    pub session: Option<SessionId>,
    /// Who deleted it: a session's actor, a token id, or an operator.
    pub deleted_by: String,
    /// When, RFC 3339 UTC.
    pub deleted_at: String,
    /// Why: the tool (`delete_file`, `apply_patch`, `restore_file` for a file a restore
    /// overwrote, `revert`) or `rm` for an operator.
    pub reason: String,
    /// The audit record of the deletion.
    pub audit_seq: Option<i64>,
    /// Whether it was restored since (the item stays, and can be restored again).
    pub restored: bool,
    /// When it was last restored.
    pub restored_at: Option<String>,
    /// In a fleet (a bucket of a log per node), the node whose record it is; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// One member of a deleted directory as `trove trash show` lists it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrashMember {
    /// Its path relative to the directory.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// What it is.
    pub kind: EntryKind,
    /// A file's size in bytes.
    pub size: u64,
    /// A file's sha256.
    pub sha256: Option<Sha256>,
    /// Its permission bits, in octal.
    pub mode: String,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl TrashEntry {
    /// The member as `trove trash show` lists it.
    pub fn record(&self) -> TrashMember {
        let (path, path_base64) = crate::base::path::for_json(&self.rel);
        TrashMember {
            path,
            path_base64,
            kind: self.kind,
            size: self.size,
            sha256: self.sha256,
            mode: format!("{:o}", self.mode),
            target: self.target.as_deref().map(|t| String::from_utf8_lossy(t).into_owned()),
        }
    }
}

/// Whether a listing shows items still in the trash, restored ones, or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RestoredFilter {
    /// Items not restored (the default: what is in the trash).
    #[default]
    No,
    /// Items restored since.
    Yes,
    /// Every item.
    All,
}

/// Which trash items a listing shows, newest first.
#[derive(Debug, Clone, Default)]
pub struct TrashFilter {
    /// Only this workspace's.
    pub workspace: Option<String>,
    /// Only those this session deleted.
    pub session: Option<SessionId>,
    /// Only items at this path or below it (normalized; empty: everything).
    pub prefix: Vec<u8>,
    /// Only items deleted at or after this time (ns).
    pub since_ns: Option<i64>,
    /// Only items deleted before this time (ns).
    pub until_ns: Option<i64>,
    /// Only files, or only directories.
    pub kind: Option<EntryKind>,
    /// Restored items, items still in the trash, or both.
    pub restored: RestoredFilter,
    /// At most this many (0: no limit).
    pub limit: usize,
    /// Resume after this item of an earlier page.
    pub after: Option<TrashCursor>,
}

/// Where a page of a trash listing ended: the last item's deletion time and row, which order
/// the listing. Shown as `<ns>.<row>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrashCursor {
    /// The last item's deletion time.
    pub deleted_ns: i64,
    /// Its row, which orders items deleted in the same nanosecond.
    pub row: i64,
}

impl std::fmt::Display for TrashCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.deleted_ns, self.row)
    }
}

impl std::str::FromStr for TrashCursor {
    type Err = crate::base::error::Error;

    fn from_str(s: &str) -> crate::base::error::Result<TrashCursor> {
        let bad = || {
            crate::base::error::Error::invalid_argument(format!(
                "cursor '{s}' is not one a trash listing gave: pass the nextCursor of the previous page"
            ))
        };
        // Exactly the documented form: an optional '-' and 1 to 19 digits on each side. A
        // cursor is only a position, so one past the ends of i64 is clamped, not refused.
        let part = |p: &str| -> crate::base::error::Result<i64> {
            let digits = p.strip_prefix('-').unwrap_or(p);
            if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let wide: i128 = p.parse().map_err(|_| bad())?;
            Ok(wide.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
        };
        let (ns, row) = s.split_once('.').ok_or_else(bad)?;
        Ok(TrashCursor { deleted_ns: part(ns)?, row: part(row)? })
    }
}

/// One page of a trash listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrashPage {
    /// The items, newest first.
    pub items: Vec<TrashRecord>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
}

/// One item a purge took (or, in a dry run, would take).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurgedItem {
    /// The item's id.
    pub id: TrashId,
    /// Its workspace.
    pub workspace: String,
    /// Where it was.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// What it was.
    pub kind: EntryKind,
    /// Its size in bytes (a directory's files together).
    pub size: u64,
    /// When it was deleted, RFC 3339 UTC.
    pub deleted_at: String,
    /// Why it went: `operator`, `age` or `quota`.
    pub reason: String,
}

/// What a purge or an expiry did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurgeReport {
    /// Only listed, nothing purged.
    pub dry_run: bool,
    /// How many items went.
    pub purged: usize,
    /// Their bytes together.
    pub bytes: u64,
    /// Each item.
    pub items: Vec<PurgedItem>,
}

/// A workspace's trash retention.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// The workspace.
    pub workspace: String,
    /// How long items are kept, as a duration (`30days`).
    pub trash_age: String,
    /// The same in seconds.
    pub trash_age_seconds: i64,
    /// Whether the age is the default one.
    pub default_age: bool,
    /// The most bytes the trash keeps, when there is a quota.
    pub trash_quota: Option<u64>,
}
