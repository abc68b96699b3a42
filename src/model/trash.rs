//! The trash: files and directories the tools deleted, kept as manifest rows over objects, so
//! any of them comes back with `restore_file` (DESIGN.md, "Trash").

use serde::{Deserialize, Serialize};

/// One deleted file or directory. Hashes and object ids are hex; paths are workspace-relative.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrashItem {
    pub id: String,
    pub workspace: String,
    pub session: Option<String>,
    pub path: Vec<u8>,
    /// `file` or `dir`.
    pub kind: String,
    pub size: u64,
    pub sha256: Option<String>,
    pub mode: u32,
    pub object: Option<String>,
    pub deleted_by: String,
    pub deleted_ns: i64,
    /// The tool that deleted it.
    pub reason: String,
    pub audit_seq: Option<i64>,
    pub restored_ns: Option<i64>,
    /// A directory's members, relative to it, parents before children.
    pub entries: Vec<TrashEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrashEntry {
    pub rel: Vec<u8>,
    /// `file`, `dir` or `symlink`.
    pub kind: String,
    pub size: u64,
    pub sha256: Option<String>,
    pub mode: u32,
    pub object: Option<String>,
    pub target: Option<Vec<u8>>,
}

impl TrashItem {
    /// The JSON the tools and the CLI show.
    pub fn record(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("trashId".into(), self.id.clone().into());
        crate::base::path::put_json(&mut m, "path", &self.path);
        m.insert("kind".into(), self.kind.clone().into());
        m.insert("size".into(), self.size.into());
        m.insert("sha256".into(), self.sha256.clone().into());
        m.insert("workspace".into(), self.workspace.clone().into());
        m.insert("session".into(), self.session.clone().into());
        m.insert("deletedBy".into(), self.deleted_by.clone().into());
        m.insert("deletedAt".into(), crate::base::time::iso_time(self.deleted_ns).into());
        m.insert("reason".into(), self.reason.clone().into());
        m.insert("auditSeq".into(), self.audit_seq.into());
        m.insert("restoredAt".into(), self.restored_ns.map(crate::base::time::iso_time).into());
        if self.kind == "dir" {
            m.insert("entries".into(), self.entries.len().into());
        }
        serde_json::Value::Object(m)
    }
}
