//! Trees: one directory's sorted entries, content-addressed so unchanged directories are shared.
//!
//! The tree id is BLAKE3 over the canonical encoding (ARCHITECTURE.md, "Tree encoding"):
//! the ASCII tag `trove-tree-v1`, then per entry in byte order of name: name length u32 LE,
//! name, kind u8, mode u32 LE, size u64 LE, mtime_ns i64 LE, content (32 bytes, zero if none),
//! sha256 (32 bytes, zero if none), target length u32 LE, target.

use crate::object::{ObjectId, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
}

impl EntryKind {
    pub fn from_i64(v: i64) -> Option<EntryKind> {
        match v {
            0 => Some(EntryKind::File),
            1 => Some(EntryKind::Dir),
            2 => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
}

/// One entry of a tree. `content` is the file's content id or the directory's tree id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub kind: EntryKind,
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub content: Option<ObjectId>,
    pub sha256: Option<Sha256>,
    pub target: Option<Vec<u8>>,
}

const TAG: &[u8] = b"trove-tree-v1";

/// The id of a tree whose entries are already sorted by name.
pub fn tree_id(entries: &[Entry]) -> ObjectId {
    let mut h = blake3::Hasher::new();
    h.update(TAG);
    for e in entries {
        h.update(&(e.name.len() as u32).to_le_bytes());
        h.update(&e.name);
        h.update(&[e.kind as u8]);
        h.update(&e.mode.to_le_bytes());
        h.update(&e.size.to_le_bytes());
        h.update(&e.mtime_ns.to_le_bytes());
        h.update(e.content.as_ref().map_or(&[0u8; 32], |c| c.as_bytes()));
        h.update(e.sha256.as_ref().unwrap_or(&[0u8; 32]));
        let target = e.target.as_deref().unwrap_or(&[]);
        h.update(&(target.len() as u32).to_le_bytes());
        h.update(target);
    }
    ObjectId(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, byte: u8) -> Entry {
        Entry {
            name: name.as_bytes().to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 1,
            mtime_ns: 5,
            content: Some(ObjectId::of(&[byte])),
            sha256: Some([byte; 32]),
            target: None,
        }
    }

    #[test]
    fn id_depends_on_every_field_and_entry_boundary() {
        let base = vec![file("a", 1), file("b", 2)];
        let id = tree_id(&base);
        assert_eq!(id, tree_id(&base.clone()));
        let mut m = base.clone();
        m[1].mtime_ns = 6;
        assert_ne!(id, tree_id(&m));
        let mut m = base.clone();
        m[0].mode = 0o755;
        assert_ne!(id, tree_id(&m));
        // "ab" + "" must not collide with "a" + "b": lengths delimit names.
        assert_ne!(tree_id(&[file("ab", 1)]), tree_id(&[file("a", 1)]));
    }
}
