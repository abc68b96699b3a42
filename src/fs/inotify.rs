//! A change feed of a whole tree: one inotify watch per directory, read synchronously. Unlike
//! [`crate::fs::watch`] (notices delivered by a thread, for people watching), this answers
//! "which directories may differ from when I last looked?", exactly: the kernel queues a
//! notice inside the system call that makes the change, so once [`TreeFeed::drain`] has read
//! the queue empty, every change completed before it is in what it returns.
//!
//! A directory is watched before it is listed ([`TreeFeed::add`] is the walk's `on_dir`), so a
//! change is either seen by the listing or noticed afterwards. Directories are watched through
//! their open descriptor (`/proc/self/fd/N`), never by a path a symlink could redirect. What
//! a feed cannot vouch for (the kernel queue overflowed, a watch could not be added, the root
//! itself moved) makes the whole tree [`Drained::Lost`]: read it all again.

use std::collections::{HashMap, HashSet};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rustix::fs::inotify::{ReadFlags, WatchFlags};

use crate::base::error::{Error, ErrorKind, Result};
use crate::fs::notify;
use crate::fs::walk::join_rel;

/// The notices a directory's watch asks for: everything that changes what a listing or a file's
/// content would show, a file closed after writing included.
const MASK: WatchFlags = notify::CHANGES.union(WatchFlags::CLOSE_WRITE);

/// What changed since the last drain.
#[derive(Debug, PartialEq, Eq)]
pub enum Drained {
    /// Notices were lost: nothing of the tree can be vouched for.
    Lost,
    /// The directories to list again and the paths changed in them.
    Changed(Dirty),
}

/// The places a drain found changed, as workspace-relative paths.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dirty {
    /// Directories whose entries (names, kinds, metadata or a file's content) changed.
    pub dirs: HashSet<Vec<u8>>,
    /// Entries that changed (a file written, anything created, removed, moved or chmodded).
    pub paths: HashSet<Vec<u8>>,
    /// Directories created, removed or moved in or out: whatever was known below these paths
    /// no longer holds; what is there now must be read whole.
    pub replaced: HashSet<Vec<u8>>,
}

impl Dirty {
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.paths.is_empty() && self.replaced.is_empty()
    }
}

/// The watches of one tree.
pub struct TreeFeed {
    fd: OwnedFd,
    /// Watch descriptor -> the directory's workspace-relative path.
    dirs: Mutex<HashMap<i32, Vec<u8>>>,
    /// A watch could not be added (a limit reached, a race with a removal).
    lost: AtomicBool,
    /// The server's quota the watches are taken from, this feed's name in it and its share,
    /// and every watch descriptor taken (the kernel keeps a watch until the directory goes or
    /// the feed is dropped, whatever `dirs` forgot).
    quota: Option<FeedQuota>,
}

/// What a feed's watches are counted against.
pub struct FeedQuota {
    pub quota: std::sync::Arc<crate::fs::quota::WatchQuota>,
    pub owner: String,
    pub share: usize,
    taken: Mutex<HashSet<i32>>,
}

impl FeedQuota {
    /// Watches of feed `owner`, at most `share` of `quota`.
    pub fn new(quota: std::sync::Arc<crate::fs::quota::WatchQuota>, owner: String, share: usize) -> FeedQuota {
        FeedQuota { quota, owner, share, taken: Mutex::new(HashSet::new()) }
    }
}

impl Drop for TreeFeed {
    fn drop(&mut self) {
        if let Some(q) = &self.quota {
            let n = q.taken.lock().map(|t| t.len()).unwrap_or(0);
            q.quota.give(&q.owner, n);
        }
    }
}

impl TreeFeed {
    /// A feed whose watches are taken from `quota`; a watch it refuses makes the feed lost.
    pub fn within(quota: Option<FeedQuota>) -> Result<TreeFeed> {
        let fd = notify::instance("cannot start a change feed", "")?;
        Ok(TreeFeed { fd, dirs: Mutex::new(HashMap::new()), lost: AtomicBool::new(false), quota })
    }

    /// Watches the directory open as `dir`, at `rel`. A watch that cannot be added makes the
    /// feed lost (the next drain says so): the tree then has to be read whole.
    pub fn add(&self, dir: BorrowedFd<'_>, rel: &[u8]) {
        if let Some(q) = &self.quota {
            if let Err(refused) = q.quota.take_up_to(&q.owner, q.share) {
                if !self.lost.swap(true, Ordering::Relaxed) {
                    tracing::info!(dir = %String::from_utf8_lossy(rel), refused = ?refused,
                        "the live tree has more directories than its change feed may watch; it is read whole");
                }
                return;
            }
        }
        match notify::watch(&self.fd, dir, MASK) {
            Ok(wd) => {
                if let Some(q) = &self.quota {
                    // The same directory watched again keeps its one watch.
                    let new = q.taken.lock().map(|mut t| t.insert(wd)).unwrap_or(false);
                    if !new {
                        q.quota.give(&q.owner, 1);
                    }
                }
                if let Ok(mut d) = self.dirs.lock() {
                    d.insert(wd, rel.to_vec());
                }
            }
            Err(e) => {
                if let Some(q) = &self.quota {
                    q.quota.give(&q.owner, 1);
                }
                tracing::warn!(dir = %String::from_utf8_lossy(rel), error = %e,
                    "a directory could not be watched; the live tree will be read whole");
                self.lost.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Reads every notice queued until now.
    pub fn drain(&self) -> Result<Drained> {
        let mut dirty = Dirty::default();
        let mut lost = self.lost.load(Ordering::Relaxed);
        let mut dirs = self.dirs.lock().map_err(|_| Error::internal("change feed poisoned"))?;
        let mut buf = notify::buffer();
        notify::read_queued(&self.fd, &mut buf, |notice| {
            let flags = notice.flags;
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::UNMOUNT) {
                lost = true;
                return;
            }
            let Some(dir) = dirs.get(&notice.wd).cloned() else {
                // A directory since replaced (its notices are read again from where it went).
                return;
            };
            if flags.contains(ReadFlags::IGNORED) {
                dirs.remove(&notice.wd);
                return;
            }
            if notice.name.is_empty() {
                // About the directory itself: its removal or move shows in its parent's notices,
                // except the root's, which has none.
                if dir.is_empty() && flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                    lost = true;
                }
                return;
            }
            let path = join_rel(&dir, notice.name);
            if flags.contains(ReadFlags::ISDIR)
                && flags.intersects(ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO)
            {
                // Watches of the directories below `path` now name the wrong paths: forget
                // them; reading what is there again watches it again.
                let mut under = path.clone();
                under.push(b'/');
                dirs.retain(|_, rel| *rel != path && !rel.starts_with(&under));
                dirty.replaced.insert(path.clone());
            }
            dirty.dirs.insert(dir);
            dirty.paths.insert(path);
        })
        .map_err(|e| Error::with_source(ErrorKind::Io, "reading the change feed", e))?;
        if lost {
            // The watches are kept: a feed read whole again re-adds them, each to the same
            // watch descriptor.
            self.lost.store(false, Ordering::Relaxed);
            dirs.clear();
            return Ok(Drained::Lost);
        }
        Ok(Drained::Changed(dirty))
    }

    /// How many directories are watched.
    #[cfg(test)]
    pub fn watched(&self) -> usize {
        self.dirs.lock().map(|d| d.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::walk;

    fn feed_of(root: &std::path::Path) -> (TreeFeed, OwnedFd) {
        let feed = TreeFeed::within(None).expect("feed");
        let fd = walk::open_root(root).expect("root");
        let ex = walk::Excludes::none();
        let hook = |d: BorrowedFd<'_>, rel: &[u8]| feed.add(d, rel);
        let opts = walk::WalkOptions { on_dir: Some(&hook), ..walk::WalkOptions::new(&ex, None) };
        walk::walk(&fd, root, &opts).expect("walk");
        (feed, fd)
    }

    fn dirty(feed: &TreeFeed) -> Dirty {
        match feed.drain().expect("drain") {
            Drained::Changed(d) => d,
            Drained::Lost => panic!("lost"),
        }
    }

    fn set(items: &[&str]) -> HashSet<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_drain_names_the_directories_changed_before_it() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(t.path().join("a/b")).expect("dirs");
        std::fs::write(t.path().join("a/b/f"), b"1").expect("f");
        std::fs::write(t.path().join("top"), b"1").expect("top");
        let (feed, _fd) = feed_of(t.path());
        assert_eq!(feed.watched(), 3);
        assert!(dirty(&feed).is_empty());

        std::fs::write(t.path().join("a/b/f"), b"2").expect("write");
        let d = dirty(&feed);
        assert_eq!(d.dirs, set(&["a/b"]));
        assert_eq!(d.paths, set(&["a/b/f"]));
        assert!(d.replaced.is_empty());

        std::fs::rename(t.path().join("a/b"), t.path().join("c")).expect("move");
        let d = dirty(&feed);
        assert_eq!(d.dirs, set(&["", "a"]));
        assert_eq!(d.replaced, set(&["a/b", "c"]));
        // The moved directory's watch was forgotten: its notices are not put under `a/b`.
        std::fs::write(t.path().join("c/f"), b"3").expect("write moved");
        assert!(dirty(&feed).is_empty());
        assert_eq!(feed.watched(), 2);
    }

    /// A feed never holds more watches than its share of the server's quota: past it, the feed
    /// is lost (the tree is read whole), and dropping it gives back what it took.
    #[test]
    fn a_feed_takes_at_most_its_share_of_the_quota() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(t.path().join("a/b/c")).expect("dirs");
        let quota = std::sync::Arc::new(crate::fs::quota::WatchQuota::new(100, 100));
        let feed = TreeFeed::within(Some(FeedQuota::new(quota.clone(), "feed:t".into(), 2))).expect("feed");
        let fd = walk::open_root(t.path()).expect("root");
        let ex = walk::Excludes::none();
        let hook = |d: BorrowedFd<'_>, rel: &[u8]| feed.add(d, rel);
        let opts = walk::WalkOptions { on_dir: Some(&hook), ..walk::WalkOptions::new(&ex, None) };
        walk::walk(&fd, t.path(), &opts).expect("walk");
        assert_eq!(quota.held(), 2);
        assert_eq!(feed.drain().expect("drain"), Drained::Lost);
        drop(feed);
        assert_eq!(quota.held(), 0);
    }

    #[test]
    fn removing_the_root_loses_the_feed() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("r");
        std::fs::create_dir_all(&root).expect("root");
        let (feed, _fd) = feed_of(&root);
        std::fs::rename(&root, t.path().join("elsewhere")).expect("move");
        assert_eq!(feed.drain().expect("drain"), Drained::Lost);
    }
}
