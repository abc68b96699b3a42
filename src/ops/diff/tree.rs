//! Walking two trees side by side: which paths differ, found top-down and skipping every
//! subtree whose id is the same on both sides, so a diff costs what changed, not the tree's size.

use std::cmp::Ordering;

use rusqlite::Connection;

use crate::base::error::Result;
use crate::base::path::covers;
use crate::model::scope::Scope;
use crate::model::tree::{Entry, EntryKind};
use crate::object::ObjectId;
use crate::ops::scan::{tree_entries, Built};

/// Where trees come from: the manifest, plus the trees built in memory from a live tree.
pub(crate) struct Trees<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) built: &'a Built,
}

impl Trees<'_> {
    fn entries(&self, id: Option<ObjectId>) -> Result<Vec<Entry>> {
        match id {
            Some(id) => tree_entries(self.conn, &id, self.built),
            None => Ok(Vec::new()),
        }
    }
}

/// Which paths a diff looks at: those under one of `paths` (all when empty) that `scope` can
/// read. Directories outside both are never opened.
pub struct PathSelect<'a> {
    /// Workspace-relative paths (files or directories); empty means everything.
    pub paths: &'a [Vec<u8>],
    /// The caller's scope.
    pub scope: &'a Scope,
}

impl PathSelect<'_> {
    /// Whether anything under directory `dir` can be selected.
    fn enter(&self, dir: &[u8]) -> bool {
        self.scope.dir_visible(dir)
            && (self.paths.is_empty() || self.paths.iter().any(|p| covers(p, dir) || covers(dir, p)))
    }

    /// Whether the leaf `path` is selected.
    pub(crate) fn keep(&self, path: &[u8]) -> bool {
        self.scope.can_read(path) && (self.paths.is_empty() || self.paths.iter().any(|p| covers(p, path)))
    }
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    if !prefix.is_empty() {
        p.extend_from_slice(prefix);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Whether two leaves (files or symlinks of the same kind) differ.
fn leaf_differs(x: &Entry, y: &Entry) -> bool {
    match x.kind {
        EntryKind::File => x.content != y.content || x.mode != y.mode,
        _ => x.target != y.target || x.mode != y.mode,
    }
}

/// The entries of two trees (each in name order) side by side: a name in both as a pair, one in
/// only one beside `None`.
fn paired(a: Vec<Entry>, b: Vec<Entry>) -> impl Iterator<Item = (Option<Entry>, Option<Entry>)> {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return None,
        };
        Some(match order {
            Ordering::Less => (a.next(), None),
            Ordering::Greater => (None, b.next()),
            Ordering::Equal => (a.next(), b.next()),
        })
    })
}

/// Calls `each(path, old, new)` for every leaf (file or symlink) that differs between the trees
/// `old` and `new` (either may be absent: the empty tree). A directory on one side and a leaf on
/// the other is the leaf deleted or added and the directory's leaves added or deleted, as git
/// shows it; a file that became a symlink is one call with both. Directories alone are not
/// reported (an empty directory added is no change of content). The order is the walk's; callers
/// sort. The walk keeps its own stack, so a deep tree cannot exhaust the thread's.
pub(crate) fn diff_trees(
    trees: &Trees<'_>,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    select: &PathSelect<'_>,
    mut each: impl FnMut(Vec<u8>, Option<Entry>, Option<Entry>) -> Result<()>,
) -> Result<()> {
    let mut stack: Vec<(Vec<u8>, Option<ObjectId>, Option<ObjectId>)> = vec![(Vec::new(), old, new)];
    while let Some((prefix, old, new)) = stack.pop() {
        if old == new {
            continue;
        }
        for (x, y) in paired(trees.entries(old)?, trees.entries(new)?) {
            let name = x.as_ref().or(y.as_ref()).map(|e| e.name.clone()).unwrap_or_default();
            let path = join(&prefix, &name);
            let dir_of = |e: &Option<Entry>| match e {
                Some(e) if e.kind == EntryKind::Dir => Some(e.content),
                _ => None,
            };
            match (dir_of(&x), dir_of(&y)) {
                (Some(o), Some(n)) => {
                    if o != n && select.enter(&path) {
                        stack.push((path, o, n));
                    }
                }
                (Some(o), None) => {
                    if select.enter(&path) {
                        stack.push((path.clone(), o, None));
                    }
                    if y.is_some() && select.keep(&path) {
                        each(path, None, y)?;
                    }
                }
                (None, Some(n)) => {
                    if select.enter(&path) {
                        stack.push((path.clone(), None, n));
                    }
                    if x.is_some() && select.keep(&path) {
                        each(path, x, None)?;
                    }
                }
                (None, None) => {
                    let differs = match (&x, &y) {
                        (Some(x), Some(y)) => x.kind != y.kind || leaf_differs(x, y),
                        _ => true,
                    };
                    if differs && select.keep(&path) {
                        each(path, x, y)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A change of what a tree holds in all, counted as a snapshot counts it: files, their bytes,
/// directories (the root is on both sides, so it never counts) and symlinks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) files: i64,
    pub(crate) bytes: i64,
    pub(crate) dirs: i64,
    pub(crate) symlinks: i64,
}

impl Totals {
    /// Adds (`sign` 1) or takes away (-1) one entry; a directory's own entries are counted
    /// when its tree is walked.
    fn count(&mut self, e: &Entry, sign: i64) {
        match e.kind {
            EntryKind::File => {
                self.files += sign;
                self.bytes += sign * e.size as i64;
            }
            EntryKind::Dir => self.dirs += sign,
            EntryKind::Symlink => self.symlinks += sign,
        }
    }
}

/// How the totals of tree `new` differ from those of tree `old`, found like [`diff_trees`]:
/// equal subtrees are skipped, so it costs what changed. A snapshot that did not walk its whole
/// tree counts from its parent's totals with this.
pub(crate) fn totals_change(trees: &Trees<'_>, old: ObjectId, new: ObjectId) -> Result<Totals> {
    let mut t = Totals::default();
    let mut stack: Vec<(Option<ObjectId>, Option<ObjectId>)> = vec![(Some(old), Some(new))];
    let subtree = |e: &Entry| if e.kind == EntryKind::Dir { e.content } else { None };
    while let Some((old, new)) = stack.pop() {
        if old == new {
            continue;
        }
        for (x, y) in paired(trees.entries(old)?, trees.entries(new)?) {
            match (&x, &y) {
                (Some(x), Some(y)) if x.kind == y.kind => match x.kind {
                    EntryKind::Dir => stack.push((x.content, y.content)),
                    EntryKind::File => t.bytes += y.size as i64 - x.size as i64,
                    EntryKind::Symlink => {}
                },
                _ => {
                    if let Some(x) = &x {
                        t.count(x, -1);
                        if let Some(o) = subtree(x) {
                            stack.push((Some(o), None));
                        }
                    }
                    if let Some(y) = &y {
                        t.count(y, 1);
                        if let Some(n) = subtree(y) {
                            stack.push((None, Some(n)));
                        }
                    }
                }
            }
        }
    }
    Ok(t)
}
