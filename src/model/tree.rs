//! Trees: one directory's sorted entries, content-addressed so unchanged directories are shared.
//!
//! The tree id is BLAKE3 over the canonical encoding (ARCHITECTURE.md, "Tree encoding"):
//! the ASCII tag `trove-tree-v1`, then per entry in byte order of name: name length u32 LE,
//! name, kind u8, mode u32 LE, size u64 LE, mtime_ns i64 LE, content (32 bytes, zero if none),
//! sha256 (32 bytes, zero if none), target length u32 LE, target.

use crate::object::{ObjectId, Sha256};

/// What an entry is; shown and stored as `file`, `dir` or `symlink`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File = 0,
    /// A directory.
    Dir = 1,
    /// A symbolic link, kept as its target.
    Symlink = 2,
}

impl EntryKind {
    /// The kind a stored number stands for (its discriminant), `None` for any other.
    pub fn from_i64(v: i64) -> Option<EntryKind> {
        match v {
            0 => Some(EntryKind::File),
            1 => Some(EntryKind::Dir),
            2 => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    /// The kind a name stands for (`file`, `dir`, `symlink`), `None` for any other text.
    pub fn parse(s: &str) -> Option<EntryKind> {
        match s {
            "file" => Some(EntryKind::File),
            "dir" => Some(EntryKind::Dir),
            "symlink" => Some(EntryKind::Symlink),
            _ => None,
        }
    }

    /// The name listings and the manifest use.
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
    /// The entry's name in its directory (one component, any bytes but `/` and NUL).
    pub name: Vec<u8>,
    /// File, directory or symlink.
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// A file's size in bytes (0 for the others).
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// A file's content id or a directory's tree id; `None` for a symlink.
    pub content: Option<ObjectId>,
    /// A file's SHA-256; `None` for the others.
    pub sha256: Option<Sha256>,
    /// A symlink's target, as stored in the link.
    pub target: Option<Vec<u8>>,
}

const TAG: &[u8] = b"trove-tree-v1";

/// The canonical encoding of entries already sorted by name (without the tag).
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * 112);
    for e in entries {
        out.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.name);
        out.push(e.kind as u8);
        out.extend_from_slice(&e.mode.to_le_bytes());
        out.extend_from_slice(&e.size.to_le_bytes());
        out.extend_from_slice(&e.mtime_ns.to_le_bytes());
        out.extend_from_slice(e.content.as_ref().map_or(&[0u8; 32], |c| c.as_bytes()));
        out.extend_from_slice(e.sha256.as_ref().map_or(&[0u8; 32], |s| s.as_bytes()));
        let target = e.target.as_deref().unwrap_or(&[]);
        out.extend_from_slice(&(target.len() as u32).to_le_bytes());
        out.extend_from_slice(target);
    }
    out
}

/// The id of a tree from its canonical encoding.
pub fn id_of_encoding(encoded: &[u8]) -> ObjectId {
    let mut h = blake3::Hasher::new();
    h.update(TAG);
    h.update(encoded);
    ObjectId(*h.finalize().as_bytes())
}

/// The id of a tree whose entries are already sorted by name.
#[cfg(test)]
pub fn tree_id(entries: &[Entry]) -> ObjectId {
    id_of_encoding(&encode(entries))
}

/// The number of entries of a canonical encoding, walking lengths only; `None` if malformed.
pub fn count(encoded: &[u8]) -> Option<usize> {
    let len_at =
        |at: usize| -> Option<usize> { Some(u32::from_le_bytes(encoded.get(at..at + 4)?.try_into().ok()?) as usize) };
    // Fixed fields after the name: kind 1, mode 4, size 8, mtime 8, content 32, sha256 32.
    const FIXED: usize = 1 + 4 + 8 + 8 + 32 + 32;
    let (mut at, mut n) = (0, 0);
    while at < encoded.len() {
        let name = len_at(at)?;
        let target_at = at + 4 + name + FIXED;
        at = target_at + 4 + len_at(target_at)?;
        n += 1;
    }
    (at == encoded.len()).then_some(n)
}

/// Parses a canonical encoding back into entries; `None` if it is malformed.
pub fn decode(mut b: &[u8]) -> Option<Vec<Entry>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = b.split_at_checked(n)?;
        *b = rest;
        Some(head)
    }
    fn u32_(b: &mut &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?))
    }
    fn u64_(b: &mut &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(take(b, 8)?.try_into().ok()?))
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let n = u32_(&mut b)? as usize;
        let name = take(&mut b, n)?.to_vec();
        let kind = EntryKind::from_i64(i64::from(take(&mut b, 1)?[0]))?;
        let mode = u32_(&mut b)?;
        let size = u64_(&mut b)?;
        let mtime_ns = u64_(&mut b)? as i64;
        let content: [u8; 32] = take(&mut b, 32)?.try_into().ok()?;
        let sha: [u8; 32] = take(&mut b, 32)?.try_into().ok()?;
        let t = u32_(&mut b)? as usize;
        let target = take(&mut b, t)?.to_vec();
        out.push(Entry {
            name,
            kind,
            mode,
            size,
            mtime_ns,
            content: (kind != EntryKind::Symlink).then_some(ObjectId(content)),
            sha256: (kind == EntryKind::File).then_some(Sha256(sha)),
            target: (kind == EntryKind::Symlink).then_some(target),
        });
    }
    Some(out)
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
            sha256: Some(Sha256([byte; 32])),
            target: None,
        }
    }

    #[test]
    fn encoding_round_trips() {
        let mut link = file("l", 0);
        link.kind = EntryKind::Symlink;
        link.content = None;
        link.sha256 = None;
        link.target = Some(b"../x".to_vec());
        let mut dir = file("d", 3);
        dir.kind = EntryKind::Dir;
        dir.sha256 = None;
        let entries = vec![file("a", 1), dir, link];
        assert_eq!(decode(&encode(&entries)).expect("decode"), entries);
        assert_eq!(count(&encode(&entries)), Some(3));
        assert_eq!(count(&encode(&entries)[..10]), None);
        assert!(decode(&encode(&entries)[..10]).is_none());
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
