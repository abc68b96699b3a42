//! The live tree as trees in memory: which files the stat cache vouches for, and the
//! directory trees built from the walk once every file's content is known. Taking a snapshot
//! stores what this builds; a diff against the live tree only compares it.

use rusqlite::Connection;

use crate::base::error::{Error, Result};
use crate::fs::walk::{self, Node, Stat, Walked};
use crate::manifest::stat_cache::{child_key, CacheMap, CachedStat, PathKey};
use crate::manifest::trees;
use crate::model::snapshot::Counts;
use crate::model::tree::{self, Entry, EntryKind};
use crate::object::{ObjectId, RandomKeyMap, Sha256};

/// The content of one file as read (or as the stat cache remembers it).
#[derive(Debug, Clone)]
pub(crate) struct Content {
    pub(crate) id: ObjectId,
    pub(crate) sha256: Sha256,
    pub(crate) size: u64,
    pub(crate) stat: Stat,
    /// For chunked files: (offset, chunk id) in order.
    pub(crate) chunks: Option<Vec<(u64, ObjectId)>>,
    /// Safe to remember in the stat cache (not racy, not changed while read).
    pub(crate) cacheable: bool,
    pub(crate) from_cache: bool,
}

/// Per-file outcome of step (2).
pub(crate) enum Outcome {
    Pending,
    Done(Content),
    Dropped,
}

/// The trees this snapshot built, by id: their canonical encodings (`tree::encode`), which take
/// about half the memory of the entries themselves.
pub(crate) type Built = RandomKeyMap<ObjectId, Vec<u8>>;

/// One file of the walk and what became of it. Files are kept in walk order, which is also the
/// order `build` visits them, so no map by path is needed.
pub(crate) struct FileOutcome {
    pub(crate) stat: Stat,
    pub(crate) key: PathKey,
    /// Whether the stat cache had a row for this path (stale rows of misses are deleted).
    pub(crate) had_row: bool,
    /// The workspace-relative path, built only for files that must be read.
    pub(crate) rel: Option<Vec<u8>>,
    pub(crate) outcome: Outcome,
}

pub(crate) type Outcomes = Vec<FileOutcome>;

fn cache_matches(c: &CachedStat, s: &Stat) -> bool {
    c.size == s.size
        && c.mtime_ns == s.mtime_ns
        && c.ctime_ns == s.ctime_ns
        && c.inode == s.inode
        && c.device == s.device
        && c.mode == s.mode
}

/// Collects every file of the walked tree into `outcomes`, directory by directory in the
/// walk's (breadth-first) order and by name within one, resolving stat-cache hits; returns where
/// each directory's files start in `outcomes`. With `use_cache` off every file is a miss (the
/// rows are still tracked for cleanup).
pub(crate) fn classify(walked: &Walked, cache: &mut CacheMap, use_cache: bool, outcomes: &mut Outcomes) -> Vec<usize> {
    let mut starts = Vec::with_capacity(walked.dirs.len());
    for dir in &walked.dirs {
        starts.push(outcomes.len());
        for child in &dir.children {
            let Node::File { name, stat } = child else { continue };
            let key = child_key(&dir.rel, name);
            let cached = cache.remove(&key);
            let had_row = cached.is_some();
            let outcome = match cached {
                Some(c) if use_cache && cache_matches(&c, stat) => Outcome::Done(Content {
                    id: c.content,
                    sha256: c.sha256,
                    size: c.size,
                    stat: *stat,
                    chunks: None,
                    cacheable: true,
                    from_cache: true,
                }),
                _ => Outcome::Pending,
            };
            let rel = matches!(outcome, Outcome::Pending).then(|| walk::join_rel(&dir.rel, name));
            outcomes.push(FileOutcome { stat: *stat, key, had_row, rel, outcome });
        }
    }
    starts
}

/// A file's tree entry: its content as read, with the mode the walk saw.
fn file_entry(name: &[u8], stat: &Stat, c: &Content) -> Entry {
    Entry {
        name: name.to_vec(),
        kind: EntryKind::File,
        mode: stat.perm(),
        size: c.size,
        mtime_ns: c.stat.mtime_ns,
        content: Some(c.id),
        sha256: Some(c.sha256),
        target: None,
    }
}

/// A symlink's tree entry: its target kept, never followed.
fn symlink_entry(name: &[u8], target: &[u8], stat: &Stat) -> Entry {
    Entry {
        name: name.to_vec(),
        kind: EntryKind::Symlink,
        mode: stat.perm(),
        size: target.len() as u64,
        mtime_ns: stat.mtime_ns,
        content: None,
        sha256: None,
        target: Some(target.to_vec()),
    }
}

/// A subdirectory's tree entry, naming its tree.
fn dir_entry(name: &[u8], stat: &Stat, tree: ObjectId) -> Entry {
    Entry {
        name: name.to_vec(),
        kind: EntryKind::Dir,
        mode: stat.perm(),
        size: 0,
        mtime_ns: stat.mtime_ns,
        content: Some(tree),
        sha256: None,
        target: None,
    }
}

/// Builds every directory's tree, deepest first (the walk lists parents before children), and
/// returns the root's id; fills `trees` and `counts`. `starts` is what `classify` returned.
pub(crate) fn build(
    walked: &Walked,
    starts: &[usize],
    outcomes: &Outcomes,
    trees: &mut Built,
    counts: &mut Counts,
) -> Result<ObjectId> {
    let mut ids: Vec<Option<ObjectId>> = vec![None; walked.dirs.len()];
    for (i, dir) in walked.dirs.iter().enumerate().rev() {
        let mut entries = Vec::with_capacity(dir.children.len());
        let mut files = outcomes[starts[i]..].iter();
        for child in &dir.children {
            match child {
                Node::File { name, stat } => {
                    if let Some(FileOutcome { outcome: Outcome::Done(c), .. }) = files.next() {
                        counts.files += 1;
                        counts.bytes += c.size;
                        entries.push(file_entry(name, stat, c));
                    }
                }
                Node::Symlink { name, target, stat } => {
                    counts.symlinks += 1;
                    entries.push(symlink_entry(name, target, stat));
                }
                Node::Dir { name, index } => {
                    counts.dirs += 1;
                    let id = ids[*index].ok_or_else(|| Error::internal("a subdirectory came before its parent"))?;
                    entries.push(dir_entry(name, &walked.dirs[*index].stat, id));
                }
            }
        }
        let encoded = tree::encode(&entries);
        let id = tree::id_of_encoding(&encoded);
        trees.insert(id, encoded);
        ids[i] = Some(id);
    }
    ids.first().copied().flatten().ok_or_else(|| Error::internal("the walk has no root"))
}

/// Entries of tree `id`, from this snapshot's trees or the manifest.
pub(crate) fn tree_entries(conn: &Connection, id: &ObjectId, new: &Built) -> Result<Vec<Entry>> {
    match new.contains_key(id) {
        true => built_entries(new, id),
        false => trees::entries(conn, id),
    }
}

/// The entries of a tree this snapshot built.
pub(crate) fn built_entries(trees: &Built, id: &ObjectId) -> Result<Vec<Entry>> {
    let encoded = trees.get(id).ok_or_else(|| Error::internal(format!("tree {id} was not built")))?;
    tree::decode(encoded).ok_or_else(|| Error::internal(format!("tree {id} does not decode")))
}
