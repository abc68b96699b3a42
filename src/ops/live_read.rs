//! Reading a live tree into trees in memory, as a snapshot would see it but storing nothing:
//! whole (the directory cache vouching for unchanged files, the others hashed in parallel), or,
//! where a server keeps a change feed of the tree ([`LiveFeeds`]), by patching the trees of the
//! last read where the feed says something changed. A running session's diff then costs what
//! changed since the last one, not one `lstat` per file of the workspace.
//!
//! A patch lists again every directory the feed names and their ancestors (deepest first),
//! keeps a file's last content when the feed named no change of it and its size, mtime and mode
//! match, hashes the others, and reads whole any directory that is new, moved or recreated
//! (watching it before listing it). Whatever the feed cannot vouch for (lost notices, a patch
//! that fails) has the tree read whole again.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use rusqlite::Connection;

use crate::base::error::{Error, Result};
use crate::base::path;
use crate::fs::inotify::{Dirty, Drained, FeedQuota, TreeFeed};
use crate::fs::walk::{self, Node, Stat, WalkOptions};
use crate::fs::workdir::hash_stream;
use crate::manifest::dir_cache::DirCacheMap;
use crate::model::snapshot::{Counts, Warning};
use crate::model::tree::{self, Entry, EntryKind};
use crate::object::ObjectId;
use crate::ops::scan::{
    build, classify, dir_entry, pending, symlink_entry, tree_entries, walk_and_load, Built, Content, Outcome, Outcomes,
    Records,
};

/// A live tree read into memory: its trees by id (the ones not in the manifest), its root, the
/// descriptor its files are read through, and what could not be read.
pub(crate) struct LiveTree {
    pub(crate) root: ObjectId,
    pub(crate) built: Arc<Built>,
    pub(crate) fd: OwnedFd,
    pub(crate) warnings: Vec<Warning>,
    /// Sockets, FIFOs and devices in the tree (not in its trees; a snapshot counts them).
    pub(crate) skipped: u64,
}

/// Live trees a server keeps current from change feeds, one per directory read, shared by its
/// repository handles. At most [`MAX_FEEDS`]; one unused for [`IDLE`] is dropped.
#[derive(Default)]
pub struct LiveFeeds {
    feeds: Mutex<HashMap<PathBuf, Arc<Mutex<Feed>>>>,
    /// Reads answered whole and answered by a patch (or unchanged), for logs and tests.
    whole: AtomicU64,
    patched: AtomicU64,
    /// Snapshots taken from a feed, and those that had to walk their tree whole after all.
    watched: AtomicU64,
    walked: AtomicU64,
    /// Per (directory, workspace): when this server last snapshotted it by a whole walk, and
    /// the manifest's cache generation then (see [`LiveFeeds::walked_at`]).
    walks: Mutex<HashMap<(PathBuf, String), (Instant, i64)>>,
    /// The inotify watches the feeds may take, if they are counted.
    quota: Option<Arc<crate::fs::quota::WatchQuota>>,
}

/// Feeds kept at once: each holds an inotify instance (the system allows 128 a user) and a
/// watch per directory.
const MAX_FEEDS: usize = 8;

/// A feed not read for this long is dropped (its watches with it).
const IDLE: Duration = Duration::from_secs(10 * 60);

/// One directory's feed and the trees of its last read.
struct Feed {
    /// The workspace whose directory records the last read used.
    workspace: Option<String>,
    excludes: Vec<String>,
    tree: Option<TreeFeed>,
    memo: Option<Memo>,
    used: Instant,
}

/// The last read of a live tree: every directory's tree id by path (a directory before those
/// below it), the trees not in the manifest, and the warnings of that read.
struct Memo {
    dirs: BTreeMap<Vec<u8>, ObjectId>,
    built: Arc<Built>,
    warnings: Vec<Warning>,
    /// Sockets, FIFOs and devices, by directory (those with any).
    skipped_in: BTreeMap<Vec<u8>, u64>,
}

impl Memo {
    fn root(&self) -> Result<ObjectId> {
        self.dirs.get(&b""[..]).copied().ok_or_else(|| Error::internal("a live read has no root"))
    }
}

impl LiveFeeds {
    /// No feeds yet: each starts with the first read of its directory.
    pub fn new() -> LiveFeeds {
        LiveFeeds::default()
    }

    /// Feeds whose watches are taken from `quota` (a server's, shared with its file watchers),
    /// each at most a quarter of it: a tree with more directories is read whole instead.
    pub fn within(quota: Arc<crate::fs::quota::WatchQuota>) -> LiveFeeds {
        LiveFeeds { quota: Some(quota), ..LiveFeeds::default() }
    }

    /// Reads the live tree `dir` (open as `fd`), with the directory records `records`: patched
    /// from its feed when one is running, else whole while a feed starts.
    pub(crate) fn read(
        &self,
        conn: &Connection,
        records: Records<'_>,
        fd: OwnedFd,
        dir: &Path,
        opts: &WalkOptions<'_>,
    ) -> Result<LiveTree> {
        let feed = self.feed(dir)?;
        let mut feed = match feed.lock() {
            Ok(f) => f,
            Err(poisoned) => {
                // A read that panicked left the feed half patched: what it kept is not trusted.
                feed.clear_poison();
                let mut f = poisoned.into_inner();
                f.memo = None;
                f
            }
        };
        feed.used = Instant::now();
        let excludes = opts.excludes.patterns().to_vec();
        let workspace = records.map(|(_, w)| w.to_string());
        if feed.workspace != workspace || feed.excludes != excludes {
            // Another workspace's cache or exclusions: what the last read kept does not apply.
            feed.memo = None;
            (feed.workspace, feed.excludes) = (workspace, excludes);
        }
        let memo = feed.memo.take();
        if let (Some(memo), Some(tree)) = (memo, feed.tree.as_ref()) {
            let patched = match tree.drain() {
                Ok(Drained::Changed(dirty)) if dirty.is_empty() => Some(memo),
                Ok(Drained::Changed(dirty)) => match patch(conn, &fd, dir, memo, &dirty, opts, tree) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "patching the live tree failed; it is read whole");
                        None
                    }
                },
                Ok(Drained::Lost) => {
                    tracing::info!(dir = %dir.display(), "the change feed lost notices; the live tree is read whole");
                    None
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "the change feed could not be read; the live tree is read whole");
                    None
                }
            };
            if let Some(memo) = patched {
                self.patched.fetch_add(1, Ordering::Relaxed);
                let live = LiveTree {
                    root: memo.root()?,
                    built: memo.built.clone(),
                    fd,
                    warnings: memo.warnings.clone(),
                    skipped: memo.skipped_in.values().sum(),
                };
                feed.memo = Some(memo);
                return Ok(live);
            }
        }
        // A new watch for every directory, added as the walk opens it.
        self.whole.fetch_add(1, Ordering::Relaxed);
        feed.tree = None;
        let counted = self.quota.as_ref().map(|q| {
            let share = q.total() / 4;
            FeedQuota::new(q.clone(), format!("feed:{}", dir.display()), share)
        });
        let tree = match TreeFeed::within(counted) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "no change feed; the live tree is read whole each time");
                None
            }
        };
        let mut whole = {
            let hook = |d: BorrowedFd<'_>, rel: &[u8]| {
                if let Some(t) = &tree {
                    t.add(d, rel)
                }
            };
            read_whole(
                conn,
                records,
                &fd,
                dir,
                &WalkOptions { excludes: opts.excludes, deadline: opts.deadline, on_dir: Some(&hook), stop_at: None },
            )?
        };
        let dirs = std::mem::take(&mut whole.dirs).into_iter().collect();
        // Empty but where the tree holds sockets, FIFOs or devices.
        let skipped_in = whole.skipped_in.clone();
        let live = whole.into_live(fd);
        if tree.is_some() {
            feed.memo = Some(Memo { dirs, built: live.built.clone(), warnings: live.warnings.clone(), skipped_in });
            feed.tree = tree;
        }
        Ok(live)
    }

    /// The feed of `dir`, started when there is none; the least recently used one gives way
    /// when too many run, and idle ones and those whose directory is gone are dropped.
    fn feed(&self, dir: &Path) -> Result<Arc<Mutex<Feed>>> {
        let mut feeds = self.feeds.lock().map_err(|_| Error::internal("live feeds poisoned"))?;
        let now = Instant::now();
        feeds.retain(|d, f| f.try_lock().map(|f| now.duration_since(f.used) < IDLE && d.is_dir()).unwrap_or(true));
        if let Some(f) = feeds.get(dir) {
            return Ok(f.clone());
        }
        if feeds.len() >= MAX_FEEDS {
            let oldest =
                feeds.iter().filter_map(|(d, f)| f.try_lock().ok().map(|f| (f.used, d.clone()))).min().map(|(_, d)| d);
            if let Some(d) = oldest {
                feeds.remove(&d);
            }
        }
        let f = Arc::new(Mutex::new(Feed { workspace: None, excludes: Vec::new(), tree: None, memo: None, used: now }));
        feeds.insert(dir.to_path_buf(), f.clone());
        Ok(f)
    }

    /// How many feeds run.
    pub fn len(&self) -> usize {
        self.feeds.lock().map(|f| f.len()).unwrap_or(0)
    }

    /// How many live reads were answered whole, and how many from a feed.
    pub fn reads(&self) -> (u64, u64) {
        (self.whole.load(Ordering::Relaxed), self.patched.load(Ordering::Relaxed))
    }

    /// Counts a snapshot taken from a feed (`watched`) or one that walked its tree after all.
    pub(crate) fn note_snapshot(&self, watched: bool) {
        let counter = if watched { &self.watched } else { &self.walked };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes that a snapshot of `dir` as `workspace` walked the whole tree, against the
    /// manifest's cache `generation`.
    /// The feed's last read of `dir` is dropped: the walk may have seen what the feed missed
    /// (which the feed's next read must not patch back to what it had), and its next read,
    /// whole, starts afresh with the records the walk just wrote.
    pub(crate) fn note_walk(&self, dir: &Path, workspace: &str, generation: i64) {
        if let Ok(mut w) = self.walks.lock() {
            w.insert((dir.to_path_buf(), workspace.to_string()), (Instant::now(), generation));
        }
        let feed = self.feeds.lock().ok().and_then(|f| f.get(dir).cloned());
        if let Some(feed) = feed {
            match feed.lock() {
                Ok(mut f) => f.memo = None,
                Err(poisoned) => poisoned.into_inner().memo = None,
            }
        }
    }

    /// When the last whole walk of `dir` as `workspace` by this server was, and against which
    /// cache generation: a snapshot from a feed relies on one (the feed cannot see what was
    /// lost from the store, and a few changes escape inotify), so none before it is taken.
    pub(crate) fn walked_at(&self, dir: &Path, workspace: &str) -> Option<(Instant, i64)> {
        let w = self.walks.lock().ok()?;
        w.get(&(dir.to_path_buf(), workspace.to_string())).copied()
    }

    /// How many snapshots were taken from a feed, and how many of those that tried had to walk
    /// their tree whole after all (the feed could not vouch for it).
    pub fn snapshots(&self) -> (u64, u64) {
        (self.watched.load(Ordering::Relaxed), self.walked.load(Ordering::Relaxed))
    }

    /// Whether no feed runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A tree read whole: its root, the trees built, every directory's path and tree id.
pub(crate) struct Whole {
    pub(crate) root: ObjectId,
    pub(crate) built: Built,
    pub(crate) dirs: Vec<(Vec<u8>, ObjectId)>,
    pub(crate) warnings: Vec<Warning>,
    /// Sockets, FIFOs and devices met (not in the trees), by directory.
    pub(crate) skipped_in: BTreeMap<Vec<u8>, u64>,
}

impl Whole {
    /// The read as a diff's live side, its files read through `fd`.
    pub(crate) fn into_live(self, fd: OwnedFd) -> LiveTree {
        LiveTree {
            root: self.root,
            built: Arc::new(self.built),
            fd,
            warnings: self.warnings,
            skipped: self.skipped_in.values().sum(),
        }
    }
}

/// Reads the live tree `dir` (open as `fd`) whole, the directory records of `workspace`
/// vouching for files whose `lstat` they match.
pub(crate) fn read_whole(
    conn: &Connection,
    records: Records<'_>,
    fd: &OwnedFd,
    dir: &Path,
    opts: &WalkOptions<'_>,
) -> Result<Whole> {
    let (walked, cache) = walk_and_load(conn, records, fd, dir, opts)?;
    trees_of(conn, walked, cache, fd)
}

/// Builds the trees of a walk: classified against `cache`, the files it does not vouch for
/// hashed in parallel.
fn trees_of(conn: &Connection, mut walked: walk::Walked, cache: DirCacheMap, fd: &OwnedFd) -> Result<Whole> {
    let mut outcomes = Outcomes::new();
    let classified = classify(conn, &walked, cache, true, &mut outcomes)?;
    let warnings = Mutex::new(std::mem::take(&mut walked.report.warnings));
    let skipped_in = std::mem::take(&mut walked.report.skipped_in);
    pending(&walked, &mut outcomes).par_iter_mut().for_each(|job| {
        let rel = job.rel();
        job.file.outcome = match hash_file(fd, &rel, job.file.stat.size) {
            Ok((sha256, id, size)) => Outcome::Done(Box::new(Content::read(id, sha256, size))),
            Err(e) => {
                unreadable(&warnings, &rel, &e);
                Outcome::Dropped
            }
        };
    });
    let mut built = Built::default();
    let ids = build(&walked, &classified, &outcomes, &mut built, &mut Counts::default())?;
    let dirs = walked.dirs.into_iter().map(|d| d.rel).zip(ids.ids).collect();
    let warnings = warnings.into_inner().map_err(|_| Error::internal("warnings poisoned"))?;
    Ok(Whole { root: ids.root, built, dirs, warnings, skipped_in })
}

fn hash_file(fd: &OwnedFd, rel: &[u8], size: u64) -> std::io::Result<(crate::object::Sha256, ObjectId, u64)> {
    walk::open_beneath(fd, rel).and_then(|file| hash_stream(std::io::Read::take(file, size)))
}

fn unreadable(warnings: &Mutex<Vec<Warning>>, rel: &[u8], e: &std::io::Error) {
    if let Ok(mut w) = warnings.lock() {
        w.push(Warning { path: path::display(rel).into_owned(), message: format!("cannot be read ({e}); left out") });
    }
}

/// Removes `rel` and every directory below it from `dirs`.
fn forget_under<V>(dirs: &mut BTreeMap<Vec<u8>, V>, rel: &[u8]) {
    dirs.remove(rel);
    let mut under = rel.to_vec();
    under.push(b'/');
    let doomed: Vec<Vec<u8>> =
        dirs.range(under.clone()..).map(|(k, _)| k).take_while(|k| k.starts_with(&under)).cloned().collect();
    for k in doomed {
        dirs.remove(&k);
    }
}

/// The directories above `rel`, nearest first, ending with the root ("").
fn ancestors(rel: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut cut = Some(rel.len());
    std::iter::from_fn(move || {
        let end = cut?;
        let parent = rel[..end].iter().rposition(|b| *b == b'/');
        cut = parent;
        match (end, parent) {
            (0, _) => None,
            (_, Some(p)) => Some(&rel[..p]),
            (_, None) => Some(&rel[..0]),
        }
    })
}

fn depth(rel: &[u8]) -> usize {
    if rel.is_empty() {
        0
    } else {
        1 + rel.iter().filter(|b| **b == b'/').count()
    }
}

/// The trees of `memo` brought up to date with what `dirty` names.
fn patch(
    conn: &Connection,
    fd: &OwnedFd,
    dir: &Path,
    mut memo: Memo,
    dirty: &Dirty,
    opts: &WalkOptions<'_>,
    tree: &TreeFeed,
) -> Result<Memo> {
    for rel in &dirty.replaced {
        forget_under(&mut memo.dirs, rel);
        forget_under(&mut memo.skipped_in, rel);
    }
    // A directory still known has every ancestor known (what is forgotten goes with all below).
    let mut todo: Vec<&[u8]> = Vec::new();
    for rel in dirty.dirs.iter().filter(|r| memo.dirs.contains_key(*r)) {
        todo.push(rel);
        todo.extend(ancestors(rel));
    }
    todo.sort_unstable_by(|a, b| depth(b).cmp(&depth(a)).then(a.cmp(b)));
    todo.dedup();
    let built = Arc::make_mut(&mut memo.built);
    let warnings = Mutex::new(Vec::new());
    // As warnings name them (display text), every directory listed by this patch.
    let mut listed_dirs: std::collections::HashSet<String> = std::collections::HashSet::new();
    for rel in todo {
        let Some(old_id) = memo.dirs.get(rel).copied() else { continue };
        let listed = match walk::list_one(fd, rel, opts) {
            Ok(l) => l,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)) => {
                // Gone, or no longer a directory: its parent (changed too) says what is there.
                forget_under(&mut memo.dirs, rel);
                forget_under(&mut memo.skipped_in, rel);
                continue;
            }
            Err(e) => return Err(Error::io("list directory again", &dir.join(path::display(rel).as_ref()), e)),
        };
        if let Ok(mut w) = warnings.lock() {
            w.extend(listed.report.warnings);
        }
        listed_dirs.insert(path::display(rel).into_owned());
        match listed.report.skipped_in.get(rel) {
            Some(n) => memo.skipped_in.insert(rel.to_vec(), *n),
            None => memo.skipped_in.remove(rel),
        };
        let old = tree_entries(conn, &old_id, built)?;
        let mut entries: Vec<Entry> = Vec::with_capacity(listed.children.len() + listed.subdirs.len());
        let mut pending: Vec<(usize, Vec<u8>, Stat)> = Vec::new();
        for child in &listed.children {
            match child {
                Node::File { name, stat } => {
                    let child_rel = walk::join_rel(rel, name);
                    let kept =
                        old.binary_search_by(|e| e.name.as_slice().cmp(name)).ok().map(|i| &old[i]).filter(|e| {
                            e.kind == EntryKind::File
                                && e.size == stat.size
                                && e.mtime_ns == stat.mtime_ns
                                && e.mode == stat.perm()
                                && e.content.is_some()
                                && e.sha256.is_some()
                                && !dirty.paths.contains(&child_rel)
                        });
                    match kept {
                        Some(e) => entries.push(e.clone()),
                        None => {
                            pending.push((entries.len(), child_rel, *stat));
                            entries.push(Entry {
                                name: name.clone(),
                                kind: EntryKind::File,
                                mode: stat.perm(),
                                size: stat.size,
                                mtime_ns: stat.mtime_ns,
                                content: None,
                                sha256: None,
                                target: None,
                            });
                        }
                    }
                }
                Node::Symlink { name, link } => entries.push(symlink_entry(name, &link.target, &link.stat)),
                Node::Dir { .. } => {}
            }
        }
        for (name, stat) in &listed.subdirs {
            let sub = walk::join_rel(rel, name);
            let id = match memo.dirs.get(&sub) {
                Some(id) => *id,
                None => {
                    // New here: read whole, watched as it is listed.
                    let hook = |d: BorrowedFd<'_>, r: &[u8]| tree.add(d, r);
                    let with_hook = WalkOptions {
                        excludes: opts.excludes,
                        deadline: opts.deadline,
                        on_dir: Some(&hook),
                        stop_at: None,
                    };
                    let walked = walk::walk_from(fd, dir, &sub, &with_hook)?;
                    let whole = trees_of(conn, walked, DirCacheMap::default(), fd)?;
                    built.extend(whole.built);
                    listed_dirs.extend(whole.dirs.iter().map(|(d, _)| path::display(d).into_owned()));
                    memo.dirs.extend(whole.dirs);
                    forget_under(&mut memo.skipped_in, &sub);
                    memo.skipped_in.extend(whole.skipped_in);
                    if let Ok(mut w) = warnings.lock() {
                        w.extend(whole.warnings);
                    }
                    whole.root
                }
            };
            entries.push(dir_entry(name, stat, id));
        }
        let hashed: Vec<(usize, std::io::Result<_>)> =
            pending.par_iter().map(|(i, rel, stat)| (*i, hash_file(fd, rel, stat.size))).collect();
        let mut dropped = Vec::new();
        for ((i, result), (_, child_rel, _)) in hashed.into_iter().zip(&pending) {
            match result {
                Ok((sha256, id, size)) => {
                    let e = &mut entries[i];
                    (e.content, e.sha256, e.size) = (Some(id), Some(sha256), size);
                }
                Err(e) => {
                    unreadable(&warnings, child_rel, &e);
                    dropped.push(i);
                }
            }
        }
        for i in dropped.into_iter().rev() {
            entries.remove(i);
        }
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let encoded = tree::encode(&entries);
        let id = tree::id_of_encoding(&encoded);
        built.insert(id, encoded);
        memo.dirs.insert(rel.to_vec(), id);
    }
    // Trees no directory names any more would only pile up.
    if built.len() > 2 * memo.dirs.len() + 1024 {
        let live: crate::object::RandomKeySet<ObjectId> = memo.dirs.values().copied().collect();
        built.retain(|id, _| live.contains(id));
    }
    let mut fresh = warnings.into_inner().map_err(|_| Error::internal("warnings poisoned"))?;
    // A warning of the last read stands only while its place was not read again: the entries
    // of a directory listed again, and whatever is below a directory no longer known, warn
    // afresh (a file made readable since is in the trees again).
    if !memo.warnings.is_empty() {
        let known: std::collections::HashSet<String> =
            memo.dirs.keys().map(|d| path::display(d).into_owned()).collect();
        memo.warnings.retain(|w| {
            let parent = w.path.rfind('/').map_or("", |i| &w.path[..i]);
            !listed_dirs.contains(parent) && known.contains(parent) && !fresh.iter().any(|f| f.path == w.path)
        });
    }
    memo.warnings.append(&mut fresh);
    Ok(memo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_run_up_to_the_root() {
        let got: Vec<&[u8]> = ancestors(b"a/b/c").collect();
        assert_eq!(got, [&b"a/b"[..], b"a", b""]);
        assert_eq!(ancestors(b"a").collect::<Vec<_>>(), [&b""[..]]);
        assert!(ancestors(b"").next().is_none());
        assert_eq!((depth(b""), depth(b"a"), depth(b"a/b")), (0, 1, 2));
    }

    #[test]
    fn forgetting_a_directory_forgets_what_is_below_it_only() {
        let mut dirs: BTreeMap<Vec<u8>, ObjectId> = BTreeMap::new();
        for k in ["", "a", "a/b", "a/b/c", "a-b", "ab"] {
            dirs.insert(k.as_bytes().to_vec(), ObjectId::of(k.as_bytes()));
        }
        forget_under(&mut dirs, b"a");
        let left: Vec<&[u8]> = dirs.keys().map(Vec::as_slice).collect();
        assert_eq!(left, [&b""[..], b"a-b", b"ab"]);
    }
}
