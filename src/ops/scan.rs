//! The live tree as trees in memory: which files the directory cache vouches for, which
//! directories keep their tree id unchanged, and the trees of the others built from the walk
//! once every file's content is known. Taking a snapshot stores what this builds (and the new
//! directory records); a diff against the live tree only compares it.

use rayon::prelude::*;
use rusqlite::Connection;

use crate::base::error::{Error, ErrorKind, Result};
use crate::fs::walk::{self, Node, Stat, Walked};
use crate::manifest::dir_cache::{dir_key, DirCacheMap, DirKey};
use crate::manifest::trees;
use crate::model::dir_cache::{CachedEntry, Record, RecordWriter};
use crate::model::snapshot::Counts;
use crate::model::tree::{self, Entry, EntryKind};
use crate::object::{ObjectId, RandomKeyMap, Sha256};

/// The content of one file as read (or as the directory cache remembers it).
#[derive(Debug, Clone)]
pub(crate) struct Content {
    pub(crate) id: ObjectId,
    pub(crate) sha256: Sha256,
    pub(crate) size: u64,
    /// For chunked files: (offset, chunk id) in order.
    pub(crate) chunks: Option<Vec<(u64, ObjectId)>>,
    /// Safe to trust to the directory cache (not racy, not changed while read).
    pub(crate) cacheable: bool,
    pub(crate) from_cache: bool,
}

impl Content {
    /// The content of a file read whole as one object: its ids, not yet trusted to the cache.
    pub(crate) fn read(id: ObjectId, sha256: Sha256, size: u64) -> Content {
        Content { id, sha256, size, chunks: None, cacheable: false, from_cache: false }
    }
}

/// Per-file outcome of step (2).
pub(crate) enum Outcome {
    /// To read. `recheck`: its record matches its stat but could not vouch for it (written
    /// within the racy window of the snapshot that recorded it): most likely unchanged.
    Pending {
        recheck: bool,
    },
    /// Boxed: most files of a snapshot are `Vouched`, and an outcome the size of a `Content`
    /// made every file's slot 230 bytes.
    Done(Box<Content>),
    /// The directory cache vouches for the file and its directory keeps its recorded tree,
    /// whose entry holds the content: nothing to look up.
    Vouched,
    Dropped,
}

/// The trees this snapshot built, by id: their canonical encodings (`tree::encode`), which take
/// about half the memory of the entries themselves.
pub(crate) type Built = RandomKeyMap<ObjectId, Vec<u8>>;

/// One file of the walk and what became of it. A directory's files are kept in name order,
/// which is also the order `build` visits them, so no map by path is needed.
pub(crate) struct FileOutcome {
    /// The file's status as the walk saw it, and once the file is read, as it was after
    /// reading (what its tree entry and directory-cache record hold).
    pub(crate) stat: Stat,
    pub(crate) outcome: Outcome,
}

/// A file still to be read (its outcome `Pending`), found by [`pending`]: its directory and its
/// listing entry, borrowed from the walk (a path of its own per file took 5 MB at 100,000
/// files), and its outcome to fill. 24 bytes.
pub(crate) struct PendingFile<'a> {
    dir: &'a walk::DirNode,
    node: &'a Node,
    pub(crate) file: &'a mut FileOutcome,
}

impl PendingFile<'_> {
    /// Its directory's workspace-relative path and its name.
    pub(crate) fn place(&self) -> (&[u8], &[u8]) {
        (&self.dir.rel, self.node.name())
    }

    /// Whether its record matched its stat and only the racy window kept it from vouching.
    pub(crate) fn recheck(&self) -> bool {
        matches!(self.file.outcome, Outcome::Pending { recheck: true })
    }

    /// The workspace-relative path.
    pub(crate) fn rel(&self) -> Vec<u8> {
        let (dir, name) = self.place();
        walk::join_rel(dir, name)
    }
}

/// Every pending file of `outcomes` (as [`classify`] left them for `walked`), in walk order.
pub(crate) fn pending<'a>(walked: &'a Walked, outcomes: &'a mut Outcomes) -> Vec<PendingFile<'a>> {
    let count = outcomes.iter().flatten().filter(|f| matches!(f.outcome, Outcome::Pending { .. })).count();
    let mut out = Vec::with_capacity(count);
    if count == 0 {
        // A snapshot where nothing changed: no second pass over the listing.
        return out;
    }
    for (dir, files) in walked.dirs.iter().zip(outcomes.iter_mut()) {
        let nodes = dir.children.iter().filter(|c| matches!(c, Node::File { .. }));
        for (node, file) in nodes.zip(files.iter_mut()) {
            if matches!(file.outcome, Outcome::Pending { .. }) {
                out.push(PendingFile { dir, node, file });
            }
        }
    }
    out
}

/// Each walked directory's files (in walk order).
pub(crate) type Outcomes = Vec<Vec<FileOutcome>>;

/// A directory's recorded tree id, and its subdirectories' recorded tree ids in order: what it
/// keeps if they keep theirs.
pub(crate) type Keeps = (ObjectId, Vec<ObjectId>);

/// What the directory cache said of the walked tree, per directory (in walk order).
pub(crate) struct Classified {
    /// Each directory's key; the records as they were (to write only what changes).
    pub(crate) keys: Vec<DirKey>,
    pub(crate) cache: DirCacheMap,
    /// The recorded tree id of each directory that keeps it ([`keeping`]): `build` takes these
    /// as they are, and builds every other directory.
    pub(crate) kept: Vec<Option<ObjectId>>,
    /// Records of directories the walk did not see.
    pub(crate) stale: Vec<DirKey>,
}

fn stat_matches(c: &Stat, s: &Stat) -> bool {
    c.size == s.size
        && c.mtime_ns == s.mtime_ns
        && c.ctime_ns == s.ctime_ns
        && c.inode == s.inode
        && c.device == s.device
        && c.mode == s.mode
}

/// Walks the live tree open as `fd` and loads the workspace's directory records from the
/// node-local cache (`records`), the two at once. A record whose tree the manifest lacks or holds
/// condemned is dropped, so its directory is read again rather than named by a tree that is not
/// (or soon not) there.
pub(crate) fn walk_and_load(
    conn: &Connection,
    records: Records<'_>,
    fd: &std::os::fd::OwnedFd,
    dir: &std::path::Path,
    opts: &walk::WalkOptions<'_>,
) -> Result<(Walked, DirCacheMap)> {
    // The records load on this thread while the pool walks: the walk waits on the kernel
    // more than it keeps both cores busy (no-change snapshot of 26k files: 85 -> 73 ms).
    std::thread::scope(|sc| {
        let walking = sc.spawn(|| walk::walk(fd, dir, opts));
        let cache = load_records(conn, records);
        let walked = walking.join().map_err(|_| Error::internal("the walk panicked"))?;
        Ok((walked?, cache?))
    })
}

/// Where a walk's directory records come from: the node-local cache and the workspace's name;
/// None: there are none (no cache, or a read that keeps none).
pub(crate) type Records<'a> = Option<(&'a crate::manifest::node_cache::NodeCache, &'a str)>;

/// The workspace's directory records, less those whose trees the manifest lacks or holds
/// condemned. The cache is this machine's, not the repository's: garbage collection does not
/// keep what it names, so a record is trusted only while its tree is live (and the snapshot's
/// lease keeps it so until the commit). A cache built against another generation of the
/// manifest (`repair snapshots` ran since) is emptied first. A cache that cannot be read costs
/// a full read, never the snapshot: that is logged.
fn load_records(conn: &Connection, records: Records<'_>) -> Result<DirCacheMap> {
    let Some((cache, workspace)) = records else { return Ok(DirCacheMap::default()) };
    let generation = crate::manifest::dir_cache::generation(conn)?;
    let loaded = (|| {
        if cache.generation()? != Some(generation) {
            cache.reset(generation)?;
            return Ok(DirCacheMap::default());
        }
        crate::manifest::dir_cache::load(cache.conn(), workspace)
    })();
    let mut cache = match loaded {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(workspace, error = %e, "the directory cache could not be read: every file is read again");
            return Ok(DirCacheMap::default());
        }
    };
    // In one read transaction of the manifest (a lock per lookup cost more than the lookups).
    crate::manifest::read_on(conn, || {
        // A tree per directory: the condemned ones listed once (`has_live` per tree read
        // the table row too, 4% of a no-change snapshot's CPU on 18k files).
        let condemned = trees::condemned_ids(conn)?;
        let mut dropped = Vec::new();
        for (key, blob) in &cache {
            // One that does not parse stays: `classify` names its directory when it warns.
            if let Some(r) = Record::parse(blob) {
                // A version 1 record names contents nothing keeps (none is written any more).
                if r.names_contents() || condemned.contains(&r.tree) || !trees::exists(conn, &r.tree)? {
                    dropped.push(*key);
                }
            }
        }
        for key in dropped {
            cache.remove(&key);
        }
        Ok(cache)
    })
}

/// Matches one directory's walked children (sorted by name) against its record's entries
/// (sorted by name): files the record vouches for are `Vouched` (`Done` from a version 1
/// record, which names their contents), the others pending. Returns the directory's files and
/// what it keeps when everything matched.
fn classify_dir(
    walked: &Walked,
    children: &[Node],
    record: Option<&Record<'_>>,
    use_cache: bool,
) -> (Vec<FileOutcome>, Option<Keeps>) {
    let cached: Vec<CachedEntry<'_>> = match (record, use_cache) {
        (Some(r), true) => r.entries().map_while(|e| e.ok()).collect(),
        _ => Vec::new(),
    };
    let mut keeps = use_cache && record.is_some_and(|r| r.count() == cached.len() && cached.len() == children.len());
    let mut subtrees = Vec::new();
    let mut outcomes = Vec::with_capacity(children.len());
    let mut j = 0;
    for child in children {
        let name = child.name();
        while j < cached.len() && cached[j].name < name {
            j += 1;
        }
        let hit = cached.get(j).filter(|c| c.name == name);
        match child {
            Node::File { stat, .. } => {
                let same = hit.filter(|c| c.kind == EntryKind::File && stat_matches(&c.stat, stat));
                let done = same.filter(|c| !c.racy);
                let outcome = match done.map(|c| (c.content, c.sha256)) {
                    // A version 1 record names the content itself.
                    Some((Some(id), Some(sha256))) => Outcome::Done(Box::new(cached_content(id, sha256, stat))),
                    Some(_) => Outcome::Vouched,
                    None => {
                        keeps = false;
                        Outcome::Pending { recheck: same.is_some() }
                    }
                };
                outcomes.push(FileOutcome { stat: *stat, outcome });
            }
            Node::Symlink { link, .. } => {
                keeps &= hit.is_some_and(|c| {
                    c.kind == EntryKind::Symlink
                        && c.target == link.target.as_slice()
                        && c.stat.mode == link.stat.mode
                        && c.stat.mtime_ns == link.stat.mtime_ns
                });
            }
            Node::Dir { index, .. } => {
                let stat = &walked.dirs[*index].stat;
                match hit.filter(|c| {
                    c.kind == EntryKind::Dir && c.stat.mode == stat.mode && c.stat.mtime_ns == stat.mtime_ns
                }) {
                    Some(c) => subtrees.extend(c.content),
                    None => keeps = false,
                }
            }
        }
    }
    let keeps = match (keeps, record) {
        (true, Some(r)) => Some((r.tree, subtrees)),
        _ => None,
    };
    (outcomes, keeps)
}

/// One directory classified against its record.
struct DirClass {
    key: DirKey,
    /// The cache held a record for it (parsed or not).
    had_record: bool,
    files: Vec<FileOutcome>,
    /// What it keeps if nothing below it changes (`classify_dir`).
    keeps: Option<Keeps>,
    /// The tree its record names; `None` with `had_record`: the record did not parse.
    recorded: Option<ObjectId>,
}

/// What `resolve_vouched` found damaged: recorded trees that cannot be read, files a tree lacks.
#[derive(Default)]
struct Damage {
    unreadable: Tally,
    lacking: Tally,
}

/// Damage of one kind met in the directory cache, logged once with how often and where first:
/// a wholly damaged cache of a big tree would otherwise log a line per directory or file.
#[derive(Default)]
struct Tally {
    count: usize,
    first: String,
    error: String,
}

impl Tally {
    fn add(&mut self, path: &[u8], error: impl FnOnce() -> String) {
        if self.count == 0 {
            self.first = String::from_utf8_lossy(path).into_owned();
            self.error = error();
        }
        self.count += 1;
    }

    fn log(&self, message: &str) {
        match (self.count, self.error.is_empty()) {
            (0, _) => {}
            (count, true) => tracing::warn!(count, first = %self.first, "{message}"),
            (count, false) => tracing::warn!(count, first = %self.first, error = %self.error, "{message}"),
        }
    }
}

/// A file's content as a record (or its directory's recorded tree) names it.
fn cached_content(id: ObjectId, sha256: Sha256, stat: &Stat) -> Content {
    Content { id, sha256, size: stat.size, chunks: None, cacheable: true, from_cache: true }
}

/// Collects every file of the walked tree into `outcomes`, directory by directory in the
/// walk's order and by name within one, resolving what the directory cache vouches for; the
/// directories are matched in parallel. With `use_cache` off every file is pending and no
/// directory keeps its tree (the records are still tracked, to be rewritten).
///
/// A vouched-for file of a directory that will be built again (it or something below it
/// changed) takes its content from the directory's recorded tree, read from `conn`; in one
/// that keeps its tree it stays `Vouched`.
pub(crate) fn classify(
    conn: &Connection,
    walked: &Walked,
    cache: DirCacheMap,
    use_cache: bool,
    outcomes: &mut Outcomes,
) -> Result<Classified> {
    let per_dir: Vec<DirClass> = walked
        .dirs
        .par_iter()
        .map(|dir| {
            let key = dir_key(&dir.rel);
            let old = cache.get(&key);
            let record = old.and_then(|b| Record::parse(b));
            let (files, keeps) = classify_dir(walked, &dir.children, record.as_ref(), use_cache);
            DirClass { key, had_record: old.is_some(), files, keeps, recorded: record.map(|r| r.tree) }
        })
        .collect();
    let n = per_dir.len();
    let mut c = Classified { keys: Vec::with_capacity(n), cache, kept: Vec::new(), stale: Vec::new() };
    let mut keeps = Vec::with_capacity(n);
    let mut recorded = Vec::with_capacity(n);
    outcomes.reserve(n);
    let mut matched = 0;
    let mut unparsed = Tally::default();
    for (d, dir) in per_dir.into_iter().zip(&walked.dirs) {
        matched += usize::from(d.had_record);
        if d.had_record && d.recorded.is_none() {
            unparsed.add(&dir.rel, String::new);
        }
        c.keys.push(d.key);
        keeps.push(d.keeps);
        recorded.push(d.recorded);
        outcomes.push(d.files);
    }
    unparsed.log("a directory cache record does not parse; its files are read again");
    // Walked directories have distinct keys: when as many had a record as there are records,
    // none is stale, and the set below (a hash per directory) is not needed.
    if matched < c.cache.len() {
        let seen: crate::object::RandomKeySet<DirKey> = c.keys.iter().copied().collect();
        c.stale = c.cache.keys().filter(|k| !seen.contains(*k)).copied().collect();
    }
    let keeping = keeping(walked, &keeps);
    c.kept = keeps.into_iter().zip(&keeping).map(|(k, &yes)| k.filter(|_| yes).map(|(tree, _)| tree)).collect();
    // One read transaction for all the tree reads (a lock per read cost more than the reads).
    let mut damage = Damage::default();
    crate::manifest::read_on(conn, || {
        for (((dir, files), keep), tree) in walked.dirs.iter().zip(outcomes.iter_mut()).zip(&keeping).zip(&recorded) {
            if !keep {
                resolve_vouched(conn, dir, tree.as_ref(), files, &mut damage)?;
            }
        }
        Ok::<_, Error>(())
    })?;
    damage.unreadable.log("a directory's recorded tree cannot be read; its files are read again");
    damage.lacking.log("a directory's recorded tree lacks a file its record vouches for; it is read again");
    Ok(c)
}

/// The directories that keep their recorded tree, whatever the pending reads return: every
/// entry matched its record, and every subdirectory is one of these with the tree id the record
/// names for it. Deepest first. This is `build`'s decision: a directory above a subdirectory
/// built again is built too, even when that subdirectory comes out with its old id (the same
/// entries encode to the same tree).
fn keeping(walked: &Walked, keeps: &[Option<Keeps>]) -> Vec<bool> {
    let mut keeping = vec![false; walked.dirs.len()];
    for (i, dir) in walked.dirs.iter().enumerate().rev() {
        let Some((_, subtrees)) = &keeps[i] else { continue };
        let mut expected = subtrees.iter();
        let mut same = true;
        for child in &dir.children {
            if let Node::Dir { index, .. } = child {
                let kept = keeps.get(*index).and_then(|k| k.as_ref()).map(|(tree, _)| tree);
                same &= keeping.get(*index) == Some(&true) && expected.next() == kept;
            }
        }
        keeping[i] = same && expected.next().is_none();
    }
    keeping
}

/// The content of `dir`'s vouched-for files, from the entries of its recorded tree `tree`. A
/// file the tree does not hold as the record says (or a tree that cannot be read) is read
/// again instead, and counted in `damage` (trees that cannot be read, files a tree lacks).
fn resolve_vouched(
    conn: &Connection,
    dir: &walk::DirNode,
    tree: Option<&ObjectId>,
    files: &mut [FileOutcome],
    damage: &mut Damage,
) -> Result<()> {
    if !files.iter().any(|f| matches!(f.outcome, Outcome::Vouched)) {
        return Ok(());
    }
    let entries = match tree.map(|t| trees::entries(conn, t)) {
        Some(Ok(entries)) => entries,
        // Damage or a vanished tree only costs reading the files; anything else is an error.
        Some(Err(e)) if !matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound) => return Err(e),
        failed => {
            damage.unreadable.add(&dir.rel, || {
                failed.and_then(Result::err).map_or_else(|| "it has none".to_string(), |e| e.to_string())
            });
            Vec::new()
        }
    };
    let names = dir.children.iter().filter_map(|c| match c {
        Node::File { name, .. } => Some(name),
        _ => None,
    });
    for (name, f) in names.zip(files.iter_mut()) {
        if !matches!(f.outcome, Outcome::Vouched) {
            continue;
        }
        let found = entries
            .binary_search_by(|e| e.name.as_slice().cmp(name.as_slice()))
            .ok()
            .and_then(|k| entries.get(k))
            .filter(|e| e.kind == EntryKind::File && e.size == f.stat.size);
        f.outcome = match found.and_then(|e| Some((e.content?, e.sha256?))) {
            Some((id, sha256)) => Outcome::Done(Box::new(cached_content(id, sha256, &f.stat))),
            None => {
                if !entries.is_empty() {
                    damage.lacking.add(&walk::join_rel(&dir.rel, name), String::new);
                }
                Outcome::Pending { recheck: false }
            }
        };
    }
    Ok(())
}

/// A file's tree entry: its content as read, with the mode the walk saw (`walked`) and the
/// mtime it had once read (`read`).
fn file_entry(name: &[u8], walked: &Stat, read: &Stat, c: &Content) -> Entry {
    Entry {
        name: name.to_vec(),
        kind: EntryKind::File,
        mode: walked.perm(),
        size: c.size,
        mtime_ns: read.mtime_ns,
        content: Some(c.id),
        sha256: Some(c.sha256),
        target: None,
    }
}

/// A symlink's tree entry: its target kept, never followed.
pub(crate) fn symlink_entry(name: &[u8], target: &[u8], stat: &Stat) -> Entry {
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
pub(crate) fn dir_entry(name: &[u8], stat: &Stat, tree: ObjectId) -> Entry {
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

/// The tree id of every walked directory (in walk order), and which kept theirs unencoded.
pub(crate) struct BuiltIds {
    pub(crate) root: ObjectId,
    pub(crate) ids: Vec<ObjectId>,
    pub(crate) kept: Vec<bool>,
}

/// Builds every directory's tree, deepest first (the walk lists parents before children): a
/// directory `classify` found kept keeps its recorded tree id; the others are encoded into
/// `trees`. Fills `counts`.
pub(crate) fn build(
    walked: &Walked,
    classified: &Classified,
    outcomes: &Outcomes,
    trees: &mut Built,
    counts: &mut Counts,
) -> Result<BuiltIds> {
    let n = walked.dirs.len();
    let mut ids: Vec<Option<ObjectId>> = vec![None; n];
    let mut kept = vec![false; n];
    for (i, dir) in walked.dirs.iter().enumerate().rev() {
        let sub = |index: usize| ids[index].ok_or_else(|| Error::internal("a subdirectory came before its parent"));
        let mut files = outcomes[i].iter();
        if let Some(tree) = classified.kept[i] {
            for child in &dir.children {
                match child {
                    Node::File { .. } => {
                        let size = match files.next().map(|f| (&f.outcome, f.stat.size)) {
                            Some((Outcome::Done(c), _)) => Some(c.size),
                            Some((Outcome::Vouched, size)) => Some(size),
                            _ => None,
                        };
                        if let Some(size) = size {
                            counts.files += 1;
                            counts.bytes += size;
                        }
                    }
                    Node::Symlink { .. } => counts.symlinks += 1,
                    Node::Dir { .. } => counts.dirs += 1,
                }
            }
            ids[i] = Some(tree);
            kept[i] = true;
            continue;
        }
        let mut entries = Vec::with_capacity(dir.children.len());
        for child in &dir.children {
            match child {
                Node::File { name, stat } => match files.next().map(|f| (&f.outcome, &f.stat)) {
                    Some((Outcome::Done(c), read)) => {
                        counts.files += 1;
                        counts.bytes += c.size;
                        entries.push(file_entry(name, stat, read, c));
                    }
                    // `classify` resolves every file of a directory that is built again.
                    Some((Outcome::Vouched, _)) => {
                        return Err(Error::internal(format!(
                            "'{}' was vouched for in a directory built again",
                            String::from_utf8_lossy(&walk::join_rel(&dir.rel, name))
                        )))
                    }
                    _ => {}
                },
                Node::Symlink { name, link } => {
                    counts.symlinks += 1;
                    entries.push(symlink_entry(name, &link.target, &link.stat));
                }
                Node::Dir { name, index } => {
                    counts.dirs += 1;
                    entries.push(dir_entry(name, &walked.dirs[*index].stat, sub(*index)?));
                }
            }
        }
        let encoded = tree::encode(&entries);
        let id = tree::id_of_encoding(&encoded);
        trees.insert(id, encoded);
        ids[i] = Some(id);
    }
    let ids: Vec<ObjectId> =
        ids.into_iter().collect::<Option<_>>().ok_or_else(|| Error::internal("a directory has no tree"))?;
    let root = *ids.first().ok_or_else(|| Error::internal("the walk has no root"))?;
    Ok(BuiltIds { root, ids, kept })
}

/// The directory records a snapshot writes: (key, record) for every directory whose record is
/// new or changed. A directory that kept its tree kept its record too.
pub(crate) fn records(
    walked: &Walked,
    classified: &Classified,
    outcomes: &Outcomes,
    built: &BuiltIds,
) -> Vec<(DirKey, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, dir) in walked.dirs.iter().enumerate() {
        if built.kept[i] {
            continue;
        }
        let mut w = RecordWriter::new(&built.ids[i]);
        let mut files = outcomes[i].iter();
        for child in &dir.children {
            let (name, kind, stat, content, sha256, target, racy) = match child {
                Node::File { name, .. } => match files.next() {
                    Some(FileOutcome { outcome: Outcome::Done(c), stat }) => {
                        (name, EntryKind::File, *stat, Some(c.id), Some(c.sha256), &[][..], !c.cacheable)
                    }
                    _ => continue,
                },
                Node::Symlink { name, link } => {
                    (name, EntryKind::Symlink, link.stat, None, None, &link.target[..], false)
                }
                Node::Dir { name, index } => {
                    (name, EntryKind::Dir, walked.dirs[*index].stat, Some(built.ids[*index]), None, &[][..], false)
                }
            };
            w.push(&CachedEntry { name, kind, stat, content, sha256, target, racy });
        }
        let record = w.finish();
        if classified.cache.get(&classified.keys[i]).map(Vec::as_slice) != Some(record.as_slice()) {
            out.push((classified.keys[i], record));
        }
    }
    out
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_pending_file_is_three_references() {
        // One per file to read, all held through the read phase, a snapshot's memory peak.
        assert_eq!(std::mem::size_of::<super::PendingFile<'_>>(), 3 * std::mem::size_of::<usize>());
    }
}
