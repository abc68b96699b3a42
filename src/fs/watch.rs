//! Change notices of a directory tree, from inotify through the `notify` crate, as the changes
//! the sandbox file API reports: create, write, remove, rename, chmod, and overflow when
//! notices were lost. inotify reports a rename as two halves (moved from, moved to) joined by
//! a cookie; a half whose partner never comes is a move across the watched tree's edge: out of
//! it (a removal) or into it (a creation). Symlinks are never followed into, so a watch stays
//! inside the tree it was started on.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::event::{EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};

use crate::base::error::{Error, ErrorKind, Result};

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

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub path: PathBuf,
    /// For a rename, where it was.
    pub old_path: Option<PathBuf>,
    /// Whether it is a directory, when the notice says (creations and removals do).
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
    /// The first half of a rename, waiting for its second: (cookie, path, until). What came
    /// after it waits behind it, so notices keep the order of the changes.
    Half(usize, PathBuf, Instant),
}

/// A running watch of one directory (and, recursively, those below it).
pub struct DirWatch {
    _watcher: notify::RecommendedWatcher,
    rx: Receiver<notify::Result<notify::Event>>,
    queue: VecDeque<Slot>,
}

impl DirWatch {
    /// Starts watching `dir` (every directory below it too with `recursive`, including ones
    /// made later). Symlinks are not followed.
    pub fn start(dir: &Path, recursive: bool) -> Result<DirWatch> {
        let (tx, rx) = std::sync::mpsc::channel();
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(tx, config).map_err(|e| watch_error(dir, e))?;
        let mode = if recursive { RecursiveMode::Recursive } else { RecursiveMode::NonRecursive };
        watcher.watch(dir, mode).map_err(|e| watch_error(dir, e))?;
        Ok(DirWatch { _watcher: watcher, rx, queue: VecDeque::new() })
    }

    /// The notices that arrive within `timeout` (at least one, unless none came); `None` once
    /// the watch can report nothing more.
    pub fn next(&mut self, timeout: Duration) -> Option<Vec<Notice>> {
        let deadline = Instant::now() + timeout;
        loop {
            // Whatever is already queued comes in the same batch.
            loop {
                match self.rx.try_recv() {
                    Ok(e) => self.take(e),
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
                }
            }
            let out = self.leave(Instant::now());
            if !out.is_empty() {
                return Some(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return Some(Vec::new());
            }
            // Wake for a half's time running out, if that comes first.
            let until = match self.queue.front() {
                Some(Slot::Half(_, _, until)) => (*until).min(deadline),
                _ => deadline,
            };
            match self.rx.recv_timeout(until.saturating_duration_since(now)) {
                Ok(e) => self.take(e),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The notices at the front that may leave now; a half whose time ran out is a move out
    /// of the tree.
    fn leave(&mut self, now: Instant) -> Vec<Notice> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.pop_front() {
            match front {
                Slot::Ready(n) => out.push(n),
                Slot::Half(_, path, until) if until <= now => {
                    out.push(Notice::Change(Change { kind: ChangeKind::Remove, path, old_path: None, is_dir: None }))
                }
                half @ Slot::Half(..) => {
                    self.queue.push_front(half);
                    break;
                }
            }
        }
        out
    }

    fn push(&mut self, kind: ChangeKind, path: PathBuf, old_path: Option<PathBuf>, is_dir: Option<bool>) {
        self.queue.push_back(Slot::Ready(Notice::Change(Change { kind, path, old_path, is_dir })));
    }

    /// Turns one notice of `notify` into changes.
    fn take(&mut self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                // A directory that could not be watched (the inotify limit, a race with its
                // removal): its changes will be missed, which the reader must know.
                tracing::warn!(error = %e, paths = ?e.paths, "a change notice was lost; reported as overflow");
                self.queue.push_back(Slot::Ready(Notice::Overflow));
                return;
            }
        };
        if event.need_rescan() {
            self.queue.push_back(Slot::Ready(Notice::Overflow));
            return;
        }
        let mut paths = event.paths.iter().cloned();
        let Some(first) = paths.next() else { return };
        match event.kind {
            EventKind::Create(k) => {
                let dir = matches!(k, notify::event::CreateKind::Folder);
                self.push(ChangeKind::Create, first, None, Some(dir));
            }
            EventKind::Remove(k) => {
                let dir = matches!(k, notify::event::RemoveKind::Folder);
                self.push(ChangeKind::Remove, first, None, Some(dir));
            }
            EventKind::Modify(ModifyKind::Metadata(_)) => self.push(ChangeKind::Chmod, first, None, None),
            EventKind::Modify(ModifyKind::Name(mode)) => self.renamed(mode, event.attrs.tracker(), first, paths.next()),
            EventKind::Modify(_) => self.push(ChangeKind::Write, first, None, None),
            // Opens and closes change nothing; anything else says nothing a reader can use.
            EventKind::Access(_) | EventKind::Any | EventKind::Other => {}
        }
    }

    fn renamed(&mut self, mode: RenameMode, cookie: Option<usize>, first: PathBuf, second: Option<PathBuf>) {
        let waiting = |q: &VecDeque<Slot>, c: usize| q.iter().position(|s| matches!(s, Slot::Half(h, ..) if *h == c));
        match (mode, cookie) {
            (RenameMode::From, Some(c)) => self.queue.push_back(Slot::Half(c, first, Instant::now() + PAIR_WAIT)),
            (RenameMode::To, Some(c)) if waiting(&self.queue, c).is_some() => {
                // The whole rename follows as one notice.
            }
            (RenameMode::Both, _) => {
                let change = match second {
                    Some(to) => Change { kind: ChangeKind::Rename, path: to, old_path: Some(first), is_dir: None },
                    None => Change { kind: ChangeKind::Write, path: first, old_path: None, is_dir: None },
                };
                // In the place of its first half: the rename happened then.
                match cookie.and_then(|c| waiting(&self.queue, c)) {
                    Some(i) => self.queue[i] = Slot::Ready(Notice::Change(change)),
                    None => self.queue.push_back(Slot::Ready(Notice::Change(change))),
                }
            }
            // Moved in from outside the tree.
            (RenameMode::To, _) => self.push(ChangeKind::Create, first, None, None),
            // The watched directory itself moved: gone from where it was watched.
            (RenameMode::From, None) => self.push(ChangeKind::Remove, first, None, Some(true)),
            (RenameMode::Any | RenameMode::Other, _) => self.push(ChangeKind::Write, first, None, None),
        }
    }
}

fn watch_error(dir: &Path, e: notify::Error) -> Error {
    // Out of inotify instances or watches is a limit of the system's, met by this server's
    // other watchers: a state to wait out (409), not a failure of the server.
    let exhausted = match &e.kind {
        notify::ErrorKind::MaxFilesWatch => true,
        notify::ErrorKind::Io(io) => {
            matches!(io.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOSPC))
        }
        _ => false,
    };
    let kind = match &e.kind {
        notify::ErrorKind::PathNotFound => ErrorKind::NotFound,
        _ if exhausted => ErrorKind::Conflict,
        _ => ErrorKind::Io,
    };
    let hint = match kind {
        ErrorKind::Conflict => {
            ": the system's inotify limits are reached (fs.inotify.max_user_instances, max_user_watches); \
             stop watchers no longer needed and try again"
        }
        _ => "",
    };
    Error::with_source(kind, format!("cannot watch '{}'{hint}", dir.display()), e)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut w = DirWatch::start(&inside, true).expect("watch");
        std::fs::write(inside.join("a"), b"1").expect("a");
        std::fs::rename(inside.join("a"), inside.join("b")).expect("rename");
        std::fs::rename(inside.join("b"), outside.join("b")).expect("out");
        std::fs::write(outside.join("c"), b"1").expect("c");
        std::fs::rename(outside.join("c"), inside.join("c")).expect("in");
        let got = changes(&mut w, 5);
        let kinds: Vec<(ChangeKind, PathBuf)> = got
            .iter()
            .filter(|c| c.kind != ChangeKind::Write)
            .map(|c| (c.kind, c.path.strip_prefix(&inside).expect("inside").to_path_buf()))
            .collect();
        assert_eq!(
            kinds,
            [
                (ChangeKind::Create, "a".into()),
                (ChangeKind::Rename, "b".into()),
                (ChangeKind::Remove, "b".into()),
                (ChangeKind::Create, "c".into()),
            ],
            "{got:?}"
        );
        let rename = got.iter().find(|c| c.kind == ChangeKind::Rename).expect("rename");
        assert_eq!(rename.old_path.as_deref(), Some(inside.join("a").as_path()));
    }
}
