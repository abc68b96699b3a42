//! Snapshots as data: the record of one workspace state, its counts and its warnings.

use serde::{Deserialize, Serialize};

use crate::object::ObjectId;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
    pub added: u64,
    pub changed: u64,
    pub removed: u64,
    /// Sockets, FIFOs and devices met during the walk, which are not kept.
    pub skipped: u64,
}

/// Something a snapshot could not keep exactly, recorded instead of failing the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub path: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotInfo {
    pub id: String,
    pub workspace: String,
    pub session: Option<String>,
    pub parent: Option<String>,
    pub created_ns: i64,
    pub reason: String,
    #[serde(serialize_with = "ser_id")]
    pub root: ObjectId,
    #[serde(skip)]
    pub source_dir: Vec<u8>,
    pub counts: Counts,
    pub warnings: Vec<Warning>,
}

fn ser_id<S: serde::Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&id.to_hex())
}
