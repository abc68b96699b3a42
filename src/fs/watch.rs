//! Change notices of a directory tree for people watching it (the sandbox file API's watchers),
//! read from inotify as create, write, remove, rename, chmod, and overflow when notices were lost.
//!
//! One watch per directory, each added through the directory's open descriptor (never by a path
//! a symlink could redirect; symlinks are never followed into) and each taken from the server's
//! [`WatchQuota`], so no tree an agent makes can take the user's every inotify watch. A
//! directory is known by its parent's watch and its own name, never by its whole path: memory
//! grows with names, however deep the tree, and a rename inside the tree moves a whole subtree's
//! paths by changing one entry. The caller's thread reads the kernel's queue itself, so nothing
//! but that (bounded) queue lies between a change and the watcher; its overflow is reported.
//!
//! inotify reports a rename as two halves (moved from, moved to) joined by a cookie; a half whose
//! partner never comes is a move across the watched tree's edge: out of it (a removal) or into
//! it (a creation).

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, ReadFlags};
use rustix::io::Errno;

use crate::base::error::{Error, ErrorKind, Result};
use crate::fs::notify;
use crate::fs::quota::{Refused, WatchQuota};
use crate::fs::walk::{join_rel, open_dir_beneath};

/// How long the first half of a rename waits for its second before it counts as a move out of
/// the tree. The kernel queues both halves together, so this is only ever reached by a real
/// move out.
const PAIR_WAIT: Duration = Duration::from_millis(30);

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// It appeared (created, or moved in from outside the tree).
    Create,
    /// Its content changed.
    Write,
    /// It went away (deleted, or moved out of the tree).
    Remove,
    /// It was renamed within the tree (`old_path` is where it was).
    Rename,
    /// Its permissions or other metadata changed.
    Chmod,
}

/// One change, its paths relative to the watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub path: Vec<u8>,
    /// For a rename, where it was.
    pub old_path: Option<Vec<u8>>,
    /// Whether it is a directory, when the notice says.
    pub is_dir: Option<bool>,
}

/// What a watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Change(Change),
    /// Notices were lost (the kernel's queue overflowed, or a new directory could not be
    /// watched): whoever follows the tree must read it again.
    Overflow,
}

/// A place in the order notices leave in.
enum Slot {
    Ready(Notice),
    /// The first half of a rename, waiting for its second. What came after it waits behind it,
    /// so notices keep the order of the changes.
    Half {
        cookie: u32,
        path: Vec<u8>,
        is_dir: bool,
        moved: Option<i32>,
        until: Instant,
    },
}

/// A watched directory: its parent's watch (none for the watched directory itself), its name,
/// and the watches of the directories in it.
struct Dir {
    parent: Option<i32>,
    name: Vec<u8>,
    children: Vec<i32>,
}

/// Which directories below the watched one are watched: given a path relative to it.
pub type DirFilter = Box<dyn Fn(&[u8]) -> bool + Send>;

/// A running watch of one directory (and, recursively, those below it).
pub struct DirWatch {
    fd: OwnedFd,
    root: OwnedFd,
    root_wd: i32,
    dirs: HashMap<i32, Dir>,
    recursive: bool,
    filter: DirFilter,
    quota: Arc<WatchQuota>,
    owner: String,
    queue: VecDeque<Slot>,
    buf: Vec<MaybeUninit<u8>>,
    /// The watched directory went away: nothing more will come.
    ended: bool,
    /// A directory could not be watched since the last overflow said so.
    short: bool,
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        // Closing the inotify descriptor removes every watch.
        self.quota.give(&self.owner, self.dirs.len());
    }
}

/// Why a directory could not be watched.
enum Unwatched {
    Quota(Refused),
    Os(Errno),
}

impl DirWatch {
    /// Starts watching the directory open as `root` (`shown` names it in errors), and with
    /// `recursive` every directory below it that `filter` lets in, including ones made later,
    /// each watch taken from `quota` for `owner`. A tree with more directories than the quota
    /// grants is refused (`conflict`), naming the limit.
    pub fn start(
        root: OwnedFd,
        shown: &Path,
        recursive: bool,
        filter: DirFilter,
        quota: Arc<WatchQuota>,
        owner: &str,
    ) -> Result<DirWatch> {
        let fd = notify::instance("cannot watch", "; stop watchers no longer needed and try again")?;
        let mut w = DirWatch {
            fd,
            root,
            root_wd: -1,
            dirs: HashMap::new(),
            recursive,
            filter,
            quota,
            owner: owner.to_string(),
            queue: VecDeque::new(),
            buf: notify::buffer(),
            ended: false,
            short: false,
        };
        let root_fd = rustix::io::fcntl_dupfd_cloexec(&w.root, 0).map_err(|e| watch_error(shown, Unwatched::Os(e)))?;
        w.root_wd = w.add(&root_fd, None, Vec::new()).map_err(|e| watch_error(shown, e))?;
        if recursive {
            w.add_below(w.root_wd, false).map_err(|e| watch_error(shown, e))?;
        }
        Ok(w)
    }

    /// Directories watched now.
    #[cfg(test)]
    pub fn watched(&self) -> usize {
        self.dirs.len()
    }

    /// Watches the directory open as `dir`, named `name` in the directory of watch `parent`.
    fn add(&mut self, dir: &OwnedFd, parent: Option<i32>, name: Vec<u8>) -> std::result::Result<i32, Unwatched> {
        self.quota.take(&self.owner).map_err(Unwatched::Quota)?;
        let wd = match notify::watch(&self.fd, dir.as_fd(), notify::CHANGES) {
            Ok(wd) => wd,
            Err(e) => {
                self.quota.give(&self.owner, 1);
                return Err(Unwatched::Os(e));
            }
        };
        if self.dirs.contains_key(&wd) {
            // A directory watched already (moved back in before its move out was settled): it
            // keeps its one watch, at its new place.
            self.quota.give(&self.owner, 1);
            self.place(wd, parent, name);
            return Ok(wd);
        }
        self.dirs.insert(wd, Dir { parent, name, children: Vec::new() });
        if let Some(p) = parent.and_then(|p| self.dirs.get_mut(&p)) {
            p.children.push(wd);
        }
        Ok(wd)
    }

    /// Moves watch `wd` to `name` in the directory of watch `parent`.
    fn place(&mut self, wd: i32, parent: Option<i32>, name: Vec<u8>) {
        let old_parent = self.dirs.get(&wd).and_then(|d| d.parent);
        if let Some(p) = old_parent.and_then(|p| self.dirs.get_mut(&p)) {
            p.children.retain(|c| *c != wd);
        }
        if let Some(d) = self.dirs.get_mut(&wd) {
            d.parent = parent;
            d.name = name;
        }
        if let Some(p) = parent.and_then(|p| self.dirs.get_mut(&p)) {
            p.children.push(wd);
        }
    }

    /// The path of watch `wd`'s directory below the watched one.
    fn path_of(&self, wd: i32) -> Vec<u8> {
        let mut names: Vec<&[u8]> = Vec::new();
        let mut at = wd;
        // Parents never form a cycle (a directory cannot move into itself); the bound only
        // keeps a bug from looping.
        for _ in 0..=self.dirs.len() {
            match self.dirs.get(&at) {
                Some(Dir { parent: Some(p), name, .. }) => {
                    names.push(name);
                    at = *p;
                }
                _ => break,
            }
        }
        names.reverse();
        names.join(&b'/')
    }

    /// The watch of directory `name` in the directory of watch `parent`, if it has one.
    fn child(&self, parent: i32, name: &[u8]) -> Option<i32> {
        let p = self.dirs.get(&parent)?;
        p.children.iter().copied().find(|c| self.dirs.get(c).is_some_and(|d| d.name == name))
    }

    /// Watches every directory below watch `top`'s that the filter lets in (an explicit stack:
    /// never recursion in the tree's depth). With `announce`, everything found is reported as
    /// created: it appeared in a directory made after the watch began, before its own watch.
    fn add_below(&mut self, top: i32, announce: bool) -> std::result::Result<(), Unwatched> {
        let mut stack = vec![top];
        while let Some(wd) = stack.pop() {
            let rel = self.path_of(wd);
            let Ok(dir) = open_dir_beneath(&self.root, &rel) else {
                // Gone or replaced meanwhile: its parent's notices say what became of it.
                continue;
            };
            let Ok(listing) = rustix::fs::Dir::read_from(&dir) else { continue };
            for entry in listing {
                let Ok(entry) = entry else { break };
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let is_dir = match entry.file_type() {
                    rustix::fs::FileType::Directory => true,
                    rustix::fs::FileType::Unknown => {
                        rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                            .map(|s| rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Directory)
                            .unwrap_or(false)
                    }
                    _ => false,
                };
                let path = join_rel(&rel, name);
                if announce {
                    self.push(ChangeKind::Create, path.clone(), None, Some(is_dir));
                }
                if !is_dir || !(self.filter)(&path) {
                    continue;
                }
                let flags = rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::NOFOLLOW
                    | rustix::fs::OFlags::CLOEXEC;
                let Ok(child) = rustix::fs::openat(&dir, name, flags, rustix::fs::Mode::empty()) else { continue };
                match self.add(&child, Some(wd), name.to_vec()) {
                    Ok(c) => stack.push(c),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Stops watching `top`'s directory and every one below it (moved out of the tree, or out
    /// of what the filter lets in).
    fn drop_below(&mut self, top: i32) {
        let parent = self.dirs.get(&top).and_then(|d| d.parent);
        if let Some(p) = parent.and_then(|p| self.dirs.get_mut(&p)) {
            p.children.retain(|c| *c != top);
        }
        let mut stack = vec![top];
        let mut gone = 0;
        while let Some(wd) = stack.pop() {
            if let Some(d) = self.dirs.remove(&wd) {
                stack.extend(d.children);
                gone += 1;
                // Already gone with its directory, or the last notice is on its way: either
                // way nothing more is to be undone.
                let _ = inotify::remove_watch(&self.fd, wd);
            }
        }
        self.quota.give(&self.owner, gone);
    }

    /// A directory that could not be watched: its changes will be missed, which the reader
    /// must know (once, until it has been told).
    fn fell_short(&mut self, path: &[u8], why: Unwatched) {
        if !self.short {
            let why = match why {
                Unwatched::Quota(Refused::Owner(n)) => format!("the session's watchers hold their {n} watches"),
                Unwatched::Quota(Refused::Server(n)) => format!("the server holds its {n} watches"),
                Unwatched::Os(e) => e.to_string(),
            };
            tracing::warn!(dir = %String::from_utf8_lossy(path), why = %why,
                "a new directory could not be watched; the watcher reports overflow");
            self.queue.push_back(Slot::Ready(Notice::Overflow));
            self.short = true;
        }
    }

    /// The notices that arrive within `timeout` (at least one, unless none came); `None` once
    /// the watch can report nothing more (the watched directory went away).
    pub fn next(&mut self, timeout: Duration) -> Option<Vec<Notice>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Err(e) = self.read_queued() {
                tracing::warn!(error = %e, "the watch's notices cannot be read; the watcher stops");
                self.ended = true;
            }
            let out = self.leave(Instant::now());
            if !out.is_empty() {
                return Some(out);
            }
            if self.ended && self.queue.is_empty() {
                return None;
            }
            let now = Instant::now();
            if now >= deadline {
                return Some(Vec::new());
            }
            // Wake for a half's time running out, if that comes first.
            let until = match self.queue.front() {
                Some(Slot::Half { until, .. }) => (*until).min(deadline),
                _ => deadline,
            };
            let wait = until.saturating_duration_since(now);
            let timeout = rustix::event::Timespec {
                tv_sec: wait.as_secs().min(i64::MAX as u64) as i64,
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            let mut fds = [rustix::event::PollFd::new(&self.fd, rustix::event::PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the watch cannot wait for notices; the watcher stops");
                    self.ended = true;
                }
            }
        }
    }

    /// Takes every notice the kernel has queued.
    fn read_queued(&mut self) -> std::io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        let mut events = Vec::new();
        let read = notify::read_queued(&self.fd, &mut buf, |n| events.push((n.wd, n.flags, n.cookie, n.name.to_vec())));
        self.buf = buf;
        read?;
        for (wd, flags, cookie, name) in events {
            self.take(wd, flags, cookie, name);
        }
        Ok(())
    }

    /// The notices at the front that may leave now; a half whose time ran out is a move out
    /// of the tree.
    fn leave(&mut self, now: Instant) -> Vec<Notice> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.pop_front() {
            match front {
                Slot::Ready(n) => {
                    if n == Notice::Overflow {
                        self.short = false;
                    }
                    out.push(n)
                }
                Slot::Half { path, is_dir, moved, until, .. } if until <= now => {
                    if let Some(m) = moved {
                        self.drop_below(m);
                    }
                    out.push(Notice::Change(Change {
                        kind: ChangeKind::Remove,
                        path,
                        old_path: None,
                        is_dir: Some(is_dir),
                    }))
                }
                half @ Slot::Half { .. } => {
                    self.queue.push_front(half);
                    break;
                }
            }
        }
        out
    }

    fn push(&mut self, kind: ChangeKind, path: Vec<u8>, old_path: Option<Vec<u8>>, is_dir: Option<bool>) {
        self.queue.push_back(Slot::Ready(Notice::Change(Change { kind, path, old_path, is_dir })));
    }

    /// Watches a directory that appeared at `path` (named `name` in watch `parent`'s) and, with
    /// `announce`, reports what it already holds.
    fn adopt(&mut self, parent: i32, name: &[u8], path: &[u8], announce: bool) {
        if !self.recursive || !(self.filter)(path) {
            return;
        }
        let Ok(dir) = open_dir_beneath(&self.root, path) else { return };
        match self.add(&dir, Some(parent), name.to_vec()) {
            Ok(wd) => {
                if let Err(e) = self.add_below(wd, announce) {
                    self.fell_short(path, e);
                }
            }
            Err(e) => self.fell_short(path, e),
        }
    }

    /// Turns one inotify notice into changes.
    fn take(&mut self, wd: i32, flags: ReadFlags, cookie: u32, name: Vec<u8>) {
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.queue.push_back(Slot::Ready(Notice::Overflow));
            return;
        }
        if flags.contains(ReadFlags::IGNORED) {
            // The directory is gone (its removal was reported by its parent's notices).
            if wd == self.root_wd {
                self.ended = true;
            }
            if self.dirs.contains_key(&wd) {
                self.drop_below(wd);
            }
            return;
        }
        if !self.dirs.contains_key(&wd) {
            // A directory no longer watched; its last notices are of no use.
            return;
        }
        if name.is_empty() {
            // About the directory itself: its parent's notices report it, but the watched
            // directory has no watched parent.
            if wd == self.root_wd
                && flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::UNMOUNT)
            {
                self.push(ChangeKind::Remove, Vec::new(), None, Some(true));
                self.ended = true;
            }
            return;
        }
        let path = join_rel(&self.path_of(wd), &name);
        let is_dir = flags.contains(ReadFlags::ISDIR);
        if flags.contains(ReadFlags::CREATE) {
            self.push(ChangeKind::Create, path.clone(), None, Some(is_dir));
            if is_dir {
                self.adopt(wd, &name, &path, true);
            }
        } else if flags.contains(ReadFlags::DELETE) {
            self.push(ChangeKind::Remove, path, None, Some(is_dir));
        } else if flags.contains(ReadFlags::MODIFY) {
            self.push(ChangeKind::Write, path, None, None);
        } else if flags.contains(ReadFlags::ATTRIB) {
            self.push(ChangeKind::Chmod, path, None, Some(is_dir));
        } else if flags.contains(ReadFlags::MOVED_FROM) {
            let moved = if is_dir { self.child(wd, &name) } else { None };
            let until = Instant::now() + PAIR_WAIT;
            self.queue.push_back(Slot::Half { cookie, path, is_dir, moved, until });
        } else if flags.contains(ReadFlags::MOVED_TO) {
            let half = self.queue.iter().position(|s| matches!(s, Slot::Half { cookie: c, .. } if *c == cookie));
            let Some(i) = half else {
                // Moved in from outside the tree.
                self.push(ChangeKind::Create, path.clone(), None, Some(is_dir));
                if is_dir {
                    self.adopt(wd, &name, &path, false);
                }
                return;
            };
            let Some(Slot::Half { path: from, moved, .. }) = self.queue.get(i) else { return };
            let (from, moved) = (from.clone(), *moved);
            let change =
                Change { kind: ChangeKind::Rename, path: path.clone(), old_path: Some(from), is_dir: Some(is_dir) };
            // In the place of its first half: the rename happened then.
            self.queue[i] = Slot::Ready(Notice::Change(change));
            match moved {
                Some(m) if self.recursive && (self.filter)(&path) => self.place(m, Some(wd), name),
                Some(m) => self.drop_below(m),
                None if is_dir => self.adopt(wd, &name, &path, false),
                None => {}
            }
        }
    }
}

fn watch_error(dir: &Path, e: Unwatched) -> Error {
    match e {
        Unwatched::Quota(Refused::Owner(n)) => Error::new(
            ErrorKind::Conflict,
            format!(
                "cannot watch '{}': the session's watchers may watch {n} directories in all: watch a narrower \
                 directory, exclude directories, watch it without `recursive`, or stop other watchers",
                dir.display()
            ),
        ),
        Unwatched::Quota(Refused::Server(n)) => Error::new(
            ErrorKind::Conflict,
            format!(
                "cannot watch '{}': the server's watchers watch {n} directories already: try again when some are stopped",
                dir.display()
            ),
        ),
        Unwatched::Os(e) => {
            // Out of inotify watches is a limit of the system's, met by other programs: a
            // state to wait out (409), not a failure of the server.
            let kind = match e {
                Errno::NOENT | Errno::NOTDIR => ErrorKind::NotFound,
                Errno::NOSPC | Errno::MFILE | Errno::NFILE => ErrorKind::Conflict,
                _ => ErrorKind::Io,
            };
            let hint = match kind {
                ErrorKind::Conflict => {
                    ": the system's inotify limits are reached (fs.inotify.max_user_instances, max_user_watches); \
                     stop watchers no longer needed and try again"
                }
                _ => "",
            };
            Error::with_source(kind, format!("cannot watch '{}'{hint}", dir.display()), std::io::Error::from(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(dir: &Path, quota: &Arc<WatchQuota>) -> Result<DirWatch> {
        let root = crate::fs::walk::open_root(dir)?;
        DirWatch::start(root, dir, true, Box::new(|_: &[u8]| true), quota.clone(), "test")
    }

    fn changes(w: &mut DirWatch, want: usize) -> Vec<Change> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.len() < want && Instant::now() < deadline {
            for n in w.next(Duration::from_millis(200)).expect("open") {
                if let Notice::Change(c) = n {
                    out.push(c);
                }
            }
        }
        out
    }

    #[test]
    fn renames_pair_and_moves_across_the_edge_are_creations_and_removals() {
        let root = tempfile::tempdir().expect("tmp");
        let (inside, outside) = (root.path().join("in"), root.path().join("out"));
        std::fs::create_dir_all(&inside).expect("in");
        std::fs::create_dir_all(&outside).expect("out");
        let quota = Arc::new(WatchQuota::new(100, 100));
        let mut w = start(&inside, &quota).expect("watch");
        std::fs::write(inside.join("a"), b"1").expect("a");
        std::fs::rename(inside.join("a"), inside.join("b")).expect("rename");
        std::fs::rename(inside.join("b"), outside.join("b")).expect("out");
        std::fs::write(outside.join("c"), b"1").expect("c");
        std::fs::rename(outside.join("c"), inside.join("c")).expect("in");
        let got = changes(&mut w, 5);
        let kinds: Vec<(ChangeKind, &[u8])> =
            got.iter().filter(|c| c.kind != ChangeKind::Write).map(|c| (c.kind, c.path.as_slice())).collect();
        assert_eq!(
            kinds,
            [
                (ChangeKind::Create, &b"a"[..]),
                (ChangeKind::Rename, b"b"),
                (ChangeKind::Remove, b"b"),
                (ChangeKind::Create, b"c"),
            ],
            "{got:?}"
        );
        let rename = got.iter().find(|c| c.kind == ChangeKind::Rename).expect("rename");
        assert_eq!(rename.old_path.as_deref(), Some(&b"a"[..]));
    }

    /// A directory renamed inside the tree keeps its watches, under its new name; one moved out
    /// gives its watches back.
    #[test]
    fn a_renamed_directory_reports_under_its_new_name_and_a_moved_out_one_is_unwatched() {
        let root = tempfile::tempdir().expect("tmp");
        let (inside, outside) = (root.path().join("in"), root.path().join("out"));
        std::fs::create_dir_all(inside.join("d/e")).expect("in");
        std::fs::create_dir_all(&outside).expect("out");
        let quota = Arc::new(WatchQuota::new(100, 100));
        let mut w = start(&inside, &quota).expect("watch");
        assert_eq!(quota.held(), 3);
        std::fs::rename(inside.join("d"), inside.join("x")).expect("rename");
        std::fs::write(inside.join("x/e/f"), b"1").expect("write");
        let got = changes(&mut w, 2);
        assert_eq!(got[0].kind, ChangeKind::Rename, "{got:?}");
        assert_eq!(got[1].path, b"x/e/f", "{got:?}");
        std::fs::rename(inside.join("x"), outside.join("x")).expect("out");
        let got = changes(&mut w, 1);
        assert_eq!((got[0].kind, got[0].path.as_slice()), (ChangeKind::Remove, &b"x"[..]), "{got:?}");
        assert_eq!(quota.held(), 1, "the moved-out subtree's watches were given back");
        std::fs::write(outside.join("x/e/g"), b"1").expect("write outside");
        assert!(changes(&mut w, 1).is_empty(), "nothing outside the tree is reported");
        drop(w);
        assert_eq!(quota.held(), 0);
    }

    /// A tree with more directories than the quota grants is refused at the start; one that
    /// grows past it later reports overflow, and the watches it holds stay within the quota.
    #[test]
    fn a_watch_never_holds_more_than_its_quota() {
        let root = tempfile::tempdir().expect("tmp");
        for i in 0..5 {
            std::fs::create_dir_all(root.path().join(format!("d{i}"))).expect("dir");
        }
        let small = Arc::new(WatchQuota::new(100, 4));
        let e = start(root.path(), &small).err().expect("refused");
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(e.message().contains("4 directories"), "{e}");
        assert_eq!(small.held(), 0, "a refused start gives back what it took");

        let quota = Arc::new(WatchQuota::new(100, 8));
        let mut w = start(root.path(), &quota).expect("watch");
        assert_eq!(w.watched(), 6);
        std::fs::create_dir_all(root.path().join("new/a/b/c")).expect("deep");
        let mut overflow = false;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !overflow && Instant::now() < deadline {
            overflow = w.next(Duration::from_millis(100)).expect("open").contains(&Notice::Overflow);
        }
        assert!(overflow, "running out of watches is reported");
        assert_eq!(quota.held(), 8);
    }
}
