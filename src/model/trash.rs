//! The trash: files and directories the tools deleted, kept as manifest rows over objects, so
//! any of them comes back with `restore_file` (DESIGN.md, "Trash").

use serde::{Deserialize, Serialize};

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
}

impl TrashItem {
    /// The JSON the tools and the CLI show.
    pub fn record(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("trashId".into(), self.id.clone().into());
        crate::base::path::put_json(&mut m, "path", &self.path);
        m.insert("kind".into(), self.kind.as_str().into());
        m.insert("size".into(), self.size.into());
        m.insert("sha256".into(), self.sha256.map(|s| s.to_hex()).into());
        m.insert("workspace".into(), self.workspace.clone().into());
        m.insert("session".into(), self.session.clone().into());
        m.insert("deletedBy".into(), self.deleted_by.clone().into());
        m.insert("deletedAt".into(), crate::base::time::iso_time(self.deleted_ns).into());
        m.insert("reason".into(), self.reason.clone().into());
        m.insert("auditSeq".into(), self.audit_seq.into());
        m.insert("restoredAt".into(), self.restored_ns.map(crate::base::time::iso_time).into());
        if self.kind == EntryKind::Dir {
            m.insert("entries".into(), self.entries.len().into());
        }
        serde_json::Value::Object(m)
    }
}
