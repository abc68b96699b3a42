//! Walking a live tree: which entries are kept (exclusions, file kinds) and their `lstat`.
//!
//! The walk is iterative: each directory is a queued rayon task that lists it and queues its
//! subdirectories, and the result is a flat list ([`Walked`]), so no depth of tree can exhaust
//! a thread's stack. Entries are sorted by name bytes so trees come out canonical. Symlinks are
//! recorded, never followed: every directory and file is opened beneath the root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` ([`openat_beneath`], a run of components at
//! a time past `PATH_MAX`), so swapping a directory for a symlink to `/etc` mid-walk cannot
//! pull outside files into a snapshot. Sockets, FIFOs and devices are counted and skipped. A
//! directory that cannot be read becomes a warning.

use std::ffi::CStr;
use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use globset::{GlobSet, GlobSetBuilder};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::model::snapshot::Warning;

/// The exclusions every workspace starts with (the Files API seed's list).
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "node_modules",
    ".git",
    "__pycache__",
    ".cache",
    ".npm",
    ".pnpm-store",
    ".yarn",
    ".venv",
    "venv",
    ".tmp",
    "tmp",
    "*.sock",
    "*.lock",
    "*.pid",
];

/// Compiled exclusion patterns. A pattern without `/` matches an entry's name at any depth
/// (`node_modules`, `*.lock`); one with `/` matches the workspace-relative path from the root
/// (`build/out`, `/docs/*.pdf`). A trailing `/` limits a pattern to directories.
#[derive(Debug, Clone)]
pub struct Excludes {
    patterns: Vec<String>,
    names: GlobSet,
    paths: GlobSet,
    dir_names: GlobSet,
    dir_paths: GlobSet,
    /// Exact names at the root left out besides the patterns: trove's own temporaries there
    /// (uploads in flight), which no pattern may describe without hiding an agent's files.
    root_names: Vec<Vec<u8>>,
}

impl Excludes {
    /// Compiles `patterns` (gitignore-like globs, limits checked first); a bad one is `invalid_argument`.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Excludes> {
        crate::base::pattern::check_list("exclusion", patterns)?;
        let mut sets = [GlobSetBuilder::new(), GlobSetBuilder::new(), GlobSetBuilder::new(), GlobSetBuilder::new()];
        for p in patterns {
            let p = p.as_ref();
            let (body, dir_only) = match p.strip_suffix('/') {
                Some(b) => (b, true),
                None => (p, false),
            };
            let anchored = body.contains('/');
            let body = body.trim_start_matches('/');
            if body.is_empty() {
                return Err(Error::invalid_argument(format!("exclusion pattern '{p}' matches nothing")));
            }
            let glob = crate::base::pattern::glob(body, false, true).map_err(|e| e.context("exclusion pattern"))?;
            sets[usize::from(anchored) + 2 * usize::from(dir_only)].add(glob);
        }
        let build =
            |b: GlobSetBuilder| b.build().map_err(|e| Error::invalid_argument(format!("exclusion patterns: {e}")));
        let [names, paths, dir_names, dir_paths] = sets;
        Ok(Excludes {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            names: build(names)?,
            paths: build(paths)?,
            dir_names: build(dir_names)?,
            dir_paths: build(dir_paths)?,
            root_names: Vec::new(),
        })
    }

    /// The effective list: `replace` instead of the defaults when given, then `extra`.
    pub fn effective(replace: Option<&[String]>, extra: &[String]) -> Result<Excludes> {
        let mut all: Vec<String> = match replace {
            Some(r) => r.to_vec(),
            None => DEFAULT_EXCLUDES.iter().map(|s| s.to_string()).collect(),
        };
        all.extend(extra.iter().cloned());
        Excludes::new(&all)
    }

    /// Excludes nothing: for reads by path, which exclusions never hide.
    pub fn none() -> Excludes {
        Excludes {
            patterns: Vec::new(),
            names: GlobSet::empty(),
            paths: GlobSet::empty(),
            dir_names: GlobSet::empty(),
            dir_paths: GlobSet::empty(),
            root_names: Vec::new(),
        }
    }

    /// These, also leaving out the entries named `names` at the root.
    pub fn with_root_names(mut self, names: Vec<Vec<u8>>) -> Excludes {
        self.root_names = names;
        self
    }

    /// The patterns as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether the entry `name` at workspace-relative `rel` (a directory if `is_dir`) is left out.
    pub fn is_excluded(&self, rel: &[u8], name: &[u8], is_dir: bool) -> bool {
        if !self.root_names.is_empty() && rel == name && self.root_names.iter().any(|n| n == name) {
            return true;
        }
        // A walk asks this of every entry: each candidate is built once, and only for the
        // sets that have patterns (none at all with `--no-default-excludes`).
        let matches = |sets: [&GlobSet; 2], path: &[u8]| {
            let [a, b] = sets;
            if a.is_empty() && (!is_dir || b.is_empty()) {
                return false;
            }
            let c = globset::Candidate::new(Path::new(std::ffi::OsStr::from_bytes(path)));
            a.is_match_candidate(&c) || (is_dir && b.is_match_candidate(&c))
        };
        matches([&self.names, &self.dir_names], name) || matches([&self.paths, &self.dir_paths], rel)
    }
}

pub use crate::model::dir_cache::Stat;

/// A raw `stat` as a [`Stat`]; its field widths differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn stat_of_raw(s: &rustix::fs::Stat) -> Stat {
    Stat {
        size: s.st_size as u64,
        mtime_ns: (s.st_mtime as i64).saturating_mul(1_000_000_000).saturating_add(s.st_mtime_nsec as i64),
        ctime_ns: (s.st_ctime as i64).saturating_mul(1_000_000_000).saturating_add(s.st_ctime_nsec as i64),
        inode: s.st_ino as u64,
        device: s.st_dev as u64,
        mode: s.st_mode as u32,
    }
}

/// One entry of a walked directory. A subdirectory is an index into [`Walked::dirs`]. A
/// snapshot holds one per entry of the tree until it commits: a symlink's target and status are
/// boxed so that files, nearly every entry, are not sized for symlinks (72 bytes, not 96).
#[derive(Debug)]
pub enum Node {
    File { name: Vec<u8>, stat: Stat },
    Symlink { name: Vec<u8>, link: Box<Link> },
    Dir { name: Vec<u8>, index: usize },
}

/// A walked symlink's target and status.
#[derive(Debug)]
pub struct Link {
    pub target: Vec<u8>,
    pub stat: Stat,
}

impl Node {
    pub fn name(&self) -> &[u8] {
        match self {
            Node::File { name, .. } | Node::Symlink { name, .. } | Node::Dir { name, .. } => name,
        }
    }
}

/// One walked directory.
#[derive(Debug)]
pub struct DirNode {
    /// Workspace-relative path of this directory ("" for the root).
    pub rel: Vec<u8>,
    pub stat: Stat,
    /// Sorted by name bytes.
    pub children: Vec<Node>,
}

/// A walked tree as a flat list of directories: the root first, and every directory before its
/// subdirectories, so a reverse pass visits children before parents. Flat, so nothing that
/// visits or drops it recurses, however deep the tree is.
#[derive(Debug)]
pub struct Walked {
    pub dirs: Vec<DirNode>,
    pub report: WalkReport,
}

impl Walked {
    /// Adds the directories of `other` (another subtree's walk) after this walk's, and its
    /// report to this one's; returns where its first directory now is. Each walk keeps its
    /// directories before their subdirectories, so the whole does too.
    pub fn append(&mut self, mut other: Walked) -> usize {
        let offset = self.dirs.len();
        for dir in &mut other.dirs {
            for child in &mut dir.children {
                if let Node::Dir { index, .. } = child {
                    *index += offset;
                }
            }
        }
        self.dirs.append(&mut other.dirs);
        self.report.skipped += other.report.skipped;
        for (dir, n) in other.report.skipped_in {
            *self.report.skipped_in.entry(dir).or_default() += n;
        }
        self.report.warnings.append(&mut other.report.warnings);
        offset
    }
}

/// One directory of [`count_entries`]: how many entries it holds (subdirectories included),
/// and how many its whole subtree holds (its own included).
#[derive(Debug, Clone)]
pub struct DirCount {
    pub rel: Vec<u8>,
    /// Index of the parent in the list (the root's is itself, 0).
    pub parent: usize,
    pub own: u64,
    pub total: u64,
}

/// The tree's directories with their entry counts, parents before children, from the names
/// alone (`getdents` and its file types; `lstat` only where the file system gives none): what a
/// snapshot splits into batches by, far cheaper than a walk and holding a directory's path and
/// three numbers a directory, nothing a file. Stops with `timeout` past the deadline. Excluded directories are left out, as the walk would; a directory
/// that cannot be read counts as empty (the walk will say why). An estimate only: the tree may
/// change before it is walked.
pub fn count_entries(root: &OwnedFd, opts: &WalkOptions<'_>) -> Result<Vec<DirCount>> {
    let mut dirs = vec![DirCount { rel: Vec::new(), parent: 0, own: 0, total: 0 }];
    let mut depth = vec![0usize];
    let mut next = 0;
    while next < dirs.len() {
        if next % 256 == 0 {
            check_deadline(opts.deadline)?;
        }
        let (rel, at_depth) = (dirs[next].rel.clone(), depth[next]);
        let listing = open_dir_beneath(root, &rel).and_then(|fd| Ok(rustix::fs::Dir::new(fd)?));
        let mut listing = match listing {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(dir = %path::display(&rel), error = %e, "not counted for the batches");
                next += 1;
                continue;
            }
        };
        let entries: Vec<(std::ffi::CString, FileType)> = listing
            .by_ref()
            .flatten()
            .filter(|e| !matches!(e.file_name().to_bytes(), b"." | b".."))
            .map(|e| (e.file_name().to_owned(), e.file_type()))
            .collect();
        let mut own = 0;
        let mut subdirs = Vec::new();
        for (cname, kind) in entries {
            let name = cname.to_bytes();
            // Asked of the directory itself, no symlink followed, where `getdents` did not say.
            let is_dir = match kind {
                FileType::Directory => true,
                FileType::Unknown => listing.fd().is_ok_and(|fd| {
                    rustix::fs::statat(fd, cname.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode as _) == FileType::Directory)
                }),
                _ => false,
            };
            let child = join_rel(&rel, name);
            if opts.excludes.is_excluded(&child, name, is_dir) {
                continue;
            }
            // A subdirectory is an entry of its parent too: the walk holds one for each.
            own += 1;
            if is_dir && at_depth + 1 < path::MAX_DEPTH {
                subdirs.push(child);
            }
        }
        dirs[next].own = own;
        for child in subdirs {
            dirs.push(DirCount { rel: child, parent: next, own: 0, total: 0 });
            depth.push(at_depth + 1);
        }
        next += 1;
    }
    // Children come after their parents: one pass from the end sums every subtree.
    for i in (0..dirs.len()).rev() {
        dirs[i].total += dirs[i].own;
        if i > 0 {
            let (parent, total) = (dirs[i].parent, dirs[i].total);
            dirs[parent].total += total;
        }
    }
    Ok(dirs)
}

#[derive(Debug, Default)]
pub struct WalkReport {
    pub skipped: u64,
    /// Where those were met: how many in each directory that had any (workspace-relative).
    pub skipped_in: std::collections::BTreeMap<Vec<u8>, u64>,
    pub warnings: Vec<Warning>,
}

pub fn join_rel(parent: &[u8], name: &[u8]) -> Vec<u8> {
    if parent.is_empty() {
        return name.to_vec();
    }
    let mut p = Vec::with_capacity(parent.len() + 1 + name.len());
    p.extend_from_slice(parent);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Opens the workspace root (which may itself be a symlink: the caller named it).
pub fn open_root(root: &Path) -> Result<OwnedFd> {
    let meta = fs::metadata(root).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::new(ErrorKind::NotFound, format!("directory {} does not exist: check the path", root.display()))
        }
        _ => Error::io("read directory", root, e),
    })?;
    if !meta.is_dir() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{} is not a directory: give the workspace directory to snapshot", root.display()),
        ));
    }
    rustix::fs::openat(CWD, root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Error::io("open directory", root, e.into()))
}

/// The longest run of path bytes handed to the kernel in one call: paths of deep trees can pass
/// `PATH_MAX` (4096), so longer ones are opened a run of whole components at a time.
const PATH_RUN: usize = 2048;

/// Opens `rel` (workspace-relative, not empty) beneath `root` with `flags`, following no
/// symlink in any component and never leaving the root, whatever its length.
pub fn openat_beneath(root: &OwnedFd, rel: &[u8], flags: OFlags) -> std::io::Result<OwnedFd> {
    let mut rest = rel;
    let mut at: Option<OwnedFd> = None;
    // Intermediate runs: the longest prefix of whole components within PATH_RUN bytes.
    while rest.len() > PATH_RUN {
        let cut = rest[..=PATH_RUN].iter().rposition(|&b| b == b'/').filter(|&i| i > 0);
        // One name over PATH_RUN bytes cannot exist (NAME_MAX is 255): refuse like the kernel.
        let Some(cut) = cut else { return Err(Errno::NAMETOOLONG.into()) };
        let dir = open_run(at.as_ref().unwrap_or(root), &rest[..cut], DIR_FLAGS)?;
        at = Some(dir);
        rest = &rest[cut + 1..];
    }
    open_run(at.as_ref().unwrap_or(root), rest, flags)
}

/// One `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; on kernels before 5.6, which lack it,
/// a walk of the components, each opened with `O_NOFOLLOW`.
fn open_run(at: &OwnedFd, rel: &[u8], flags: OFlags) -> std::io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat2(at, rel, flags, Mode::empty(), ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOSYS) => {
            let mut parts = rel.split(|&b| b == b'/').peekable();
            let mut dir: Option<OwnedFd> = None;
            while let Some(part) = parts.next() {
                if part == b".." || part.is_empty() || part == b"." {
                    return Err(Errno::INVAL.into());
                }
                let base = dir.as_ref().unwrap_or(at);
                if parts.peek().is_none() {
                    return Ok(rustix::fs::openat(base, part, flags, Mode::empty())?);
                }
                dir = Some(rustix::fs::openat(base, part, DIR_FLAGS, Mode::empty())?);
            }
            Err(std::io::Error::from(Errno::INVAL))
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens the directory at workspace-relative `rel` ("" is the root itself) beneath `root`.
pub fn open_dir_beneath(root: &OwnedFd, rel: &[u8]) -> std::io::Result<OwnedFd> {
    if rel.is_empty() {
        // Opened again, not duplicated: a duplicate shares the directory's read offset, so a
        // second listing of the root through the same descriptor would find it read already.
        return Ok(rustix::fs::openat(root, ".", DIR_FLAGS, Mode::empty())?);
    }
    openat_beneath(root, rel, DIR_FLAGS)
}

/// Opens the regular file at workspace-relative `rel` for reading, refusing to follow a
/// symlink in any component or to leave the root.
pub fn open_beneath(root: &OwnedFd, rel: &[u8]) -> std::io::Result<fs::File> {
    openat_beneath(root, rel, OFlags::RDONLY | OFlags::NONBLOCK).map(fs::File::from)
}

/// What the walk needs besides the tree: the exclusions, and when to give up.
pub struct WalkOptions<'a> {
    pub excludes: &'a Excludes,
    /// The walk stops with `timeout` once this passes (checked per directory).
    pub deadline: Option<std::time::Instant>,
    /// Called with each directory open, before its names are read: a change watch added here
    /// sees every change the listing could miss.
    pub on_dir: Option<&'a OnDir<'a>>,
    /// Directories (workspace-relative) listed by their parents but not entered: each is a
    /// directory of the walk with no children (a snapshot in batches took them already).
    pub stop_at: Option<&'a std::collections::BTreeSet<Vec<u8>>>,
}

/// What [`WalkOptions::on_dir`] is given: the directory open, and its workspace-relative path.
pub type OnDir<'a> = dyn Fn(BorrowedFd<'_>, &[u8]) + Sync + 'a;

impl<'a> WalkOptions<'a> {
    pub fn new(excludes: &'a Excludes, deadline: Option<std::time::Instant>) -> WalkOptions<'a> {
        WalkOptions { excludes, deadline, on_dir: None, stop_at: None }
    }
}

/// Walks the directory open as `fd` (from [`open_root`]; `root` names it in errors). Each
/// directory is a task of a rayon scope that lists it and spawns one task per subdirectory:
/// tasks are queued, not nested, so no depth of tree grows a stack, and both cores stay busy
/// from the first levels on. Each directory is opened beneath the root with no symlink
/// followed. Directories deeper than [`path::MAX_DEPTH`] are left out with a `too_deep`
/// warning, so a tree made deep on purpose cannot stop a snapshot of the rest.
pub fn walk(fd: &OwnedFd, root: &Path, opts: &WalkOptions<'_>) -> Result<Walked> {
    walk_from(fd, root, b"", opts)
}

/// Walks the subtree at `rel` (workspace-relative, "" for the root) of the tree open as `fd`:
/// as [`walk`], with every path still relative to the root, so exclusions anchored at the root
/// apply as they would in a whole walk.
pub fn walk_from(fd: &OwnedFd, root: &Path, rel: &[u8], opts: &WalkOptions<'_>) -> Result<Walked> {
    let (stat, opened, depth) = if rel.is_empty() {
        (rustix::fs::fstat(fd).map_err(|e| Error::io("stat", root, e.into()))?, None, 0)
    } else {
        let shown = root.join(path::display(rel).as_ref());
        let dir = open_dir_beneath(fd, rel).map_err(|e| Error::io("open directory", &shown, e))?;
        let stat = rustix::fs::fstat(&dir).map_err(|e| Error::io("stat", &shown, e.into()))?;
        (stat, Some(dir), rel.split(|b| *b == b'/').count())
    };
    let ctx = WalkCtx {
        root: fd,
        opts,
        report: Mutex::new(WalkReport::default()),
        // A first directory opened here counts as held, as one opened by a parent would.
        held: AtomicUsize::new(usize::from(opened.is_some())),
        next: AtomicUsize::new(1),
        listed: Mutex::new(Vec::new()),
        failed: Mutex::new(None),
    };
    let first = Job { index: 0, rel: rel.to_vec(), stat: stat_of_raw(&stat), depth, opened };
    rayon::scope(|s| visit(s, &ctx, first));
    if let Some(e) = ctx.failed.into_inner().map_err(|_| Error::internal("walk failure poisoned"))? {
        return Err(e);
    }
    if let Some(e) =
        ctx.listed.lock().ok().and_then(|l| l.is_empty().then(|| Error::internal("the walk listed nothing")))
    {
        return Err(e);
    }
    // Every index the walk handed out, in order: a parent's is always lower than its children's.
    let count = ctx.next.load(Ordering::Relaxed);
    let mut slots: Vec<Option<DirNode>> = (0..count).map(|_| None).collect();
    for (index, node) in ctx.listed.into_inner().map_err(|_| Error::internal("walk results poisoned"))? {
        if let Some(slot) = slots.get_mut(index) {
            *slot = Some(node);
        }
    }
    // A subdirectory that could not be listed (a warning says why) is left out of its parent.
    let mut dirs = Vec::with_capacity(count);
    let mut renumber = vec![usize::MAX; count];
    for (old, slot) in slots.into_iter().enumerate() {
        if let Some(node) = slot {
            renumber[old] = dirs.len();
            dirs.push(node);
        }
    }
    for dir in &mut dirs {
        dir.children.retain_mut(|c| match c {
            Node::Dir { index, .. } => {
                *index = renumber[*index];
                *index != usize::MAX
            }
            _ => true,
        });
    }
    let report = ctx.report.into_inner().map_err(|_| Error::internal("walk report poisoned"))?;
    Ok(Walked { dirs, report })
}

/// What the tasks of one walk share.
struct WalkCtx<'a> {
    root: &'a OwnedFd,
    opts: &'a WalkOptions<'a>,
    report: Mutex<WalkReport>,
    /// Subdirectory descriptors open and waiting for their task (at most `HELD_DIRS`).
    held: AtomicUsize,
    /// The next directory index to hand out.
    next: AtomicUsize,
    listed: Mutex<Vec<(usize, DirNode)>>,
    /// The first error that stops the walk (the root unreadable, the deadline passed).
    failed: Mutex<Option<Error>>,
}

/// One directory to list.
struct Job {
    index: usize,
    rel: Vec<u8>,
    stat: Stat,
    depth: usize,
    opened: Option<OwnedFd>,
}

fn visit<'s>(s: &rayon::Scope<'s>, ctx: &'s WalkCtx<'s>, job: Job) {
    let stop = |e: Error| {
        if let Ok(mut f) = ctx.failed.lock() {
            f.get_or_insert(e);
        }
    };
    if ctx.failed.lock().map(|f| f.is_some()).unwrap_or(true) {
        return;
    }
    if let Err(e) = check_deadline(ctx.opts.deadline) {
        return stop(e);
    }
    let listing = match list_dir(ctx.root, &job.rel, job.opened, ctx.opts, &ctx.report, &ctx.held) {
        Ok(l) => l,
        Err(e) if job.index == 0 => return stop(Error::io("read directory", Path::new("."), e)),
        Err(e) => {
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) => "vanished during the walk".to_string(),
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    "was replaced by a symlink or a file during the walk".to_string()
                }
                _ => format!("cannot read directory: {e}"),
            };
            return warn(&ctx.report, &job.rel, why);
        }
    };
    let Listing { mut children, subdirs } = listing;
    for (name, stat, opened) in subdirs {
        let rel = join_rel(&job.rel, &name);
        if job.depth + 1 >= path::MAX_DEPTH {
            let message = format!(
                "too_deep: more than {} directories deep; not in this snapshot (exclude it or move it up)",
                path::MAX_DEPTH
            );
            warn(&ctx.report, &rel, message);
            if opened.is_some() {
                ctx.held.fetch_sub(1, Ordering::Relaxed);
            }
            continue;
        }
        let index = ctx.next.fetch_add(1, Ordering::Relaxed);
        children.push(Node::Dir { name, index });
        if ctx.opts.stop_at.is_some_and(|s| s.contains(&rel)) {
            if opened.is_some() {
                ctx.held.fetch_sub(1, Ordering::Relaxed);
            }
            if let Ok(mut listed) = ctx.listed.lock() {
                listed.push((index, DirNode { rel, stat, children: Vec::new() }));
            }
            continue;
        }
        let child = Job { index, rel, stat, depth: job.depth + 1, opened };
        s.spawn(move |s| visit(s, ctx, child));
    }
    children.sort_unstable_by(|a, b| a.name().cmp(b.name()));
    // Held until the snapshot is built: without the room pushing left (a quarter of it on
    // average).
    children.shrink_to_fit();
    let node = DirNode { rel: job.rel, stat: job.stat, children };
    if let Ok(mut listed) = ctx.listed.lock() {
        listed.push((job.index, node));
    }
}

fn check_deadline(deadline: Option<std::time::Instant>) -> Result<()> {
    match deadline {
        Some(d) if std::time::Instant::now() >= d => Err(Error::timeout("walking the directory tree", false)),
        _ => Ok(()),
    }
}

fn warn(report: &Mutex<WalkReport>, rel: &[u8], message: String) {
    if let Ok(mut r) = report.lock() {
        r.warnings.push(Warning { path: String::from_utf8_lossy(rel).into_owned(), message });
    }
}

/// One directory's kept entries: files and symlinks as nodes, subdirectories by name (with
/// their descriptor, if it was opened here).
struct Listing {
    children: Vec<Node>,
    subdirs: Vec<(Vec<u8>, Stat, Option<OwnedFd>)>,
}

/// Subdirectory descriptors kept open at once between two levels of a walk: opening one
/// relative to its parent while the parent is open is cheaper than a lookup from the root, but
/// descriptors are a limited resource.
const HELD_DIRS: usize = 256;

/// The names in directory `fd` (at `rel`), read before any is looked at: the listing owns the
/// descriptor (no second open of "." as `Dir::read_from` would do) and borrows it mutably while
/// it iterates. The names are kept NUL-terminated end to end in one buffer ([`names`]), not
/// one allocation each: a walk lists every entry of the tree.
/// Returns the listing, the names and how many there are.
fn read_names(
    fd: OwnedFd,
    rel: &[u8],
    report: &Mutex<WalkReport>,
) -> std::io::Result<(rustix::fs::Dir, Vec<u8>, usize)> {
    let mut listing = rustix::fs::Dir::new(fd)?;
    // Room for a typical directory's names at once, not a dozen reallocations on the way.
    let mut names = Vec::with_capacity(2048);
    let mut count = 0;
    for entry in listing.by_ref() {
        match entry {
            Ok(e) => {
                names.extend_from_slice(e.file_name().to_bytes_with_nul());
                count += 1;
            }
            Err(e) => warn(report, rel, format!("could not list an entry: {e}")),
        }
    }
    Ok((listing, names, count))
}

/// The names `read_names` packed into one buffer, in order.
fn names(buf: &[u8]) -> impl Iterator<Item = &CStr> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let name = CStr::from_bytes_until_nul(rest).ok()?;
        rest = &rest[name.to_bytes_with_nul().len()..];
        Some(name)
    })
}

/// Subdirectory `cname` of `dir` opened for the next level, while fewer than `HELD_DIRS` are
/// held; `None` has it opened from the root when its turn comes. O_NOFOLLOW: a directory
/// swapped for a symlink since the stat is refused.
fn open_subdir(dir: std::os::fd::BorrowedFd<'_>, cname: &CStr, held: &AtomicUsize) -> Option<OwnedFd> {
    let fd = if held.fetch_add(1, Ordering::Relaxed) < HELD_DIRS {
        rustix::fs::openat(dir, cname, DIR_FLAGS, Mode::empty()).ok()
    } else {
        None
    };
    if fd.is_none() {
        held.fetch_sub(1, Ordering::Relaxed);
    }
    fd
}

fn list_dir(
    root: &OwnedFd,
    rel: &[u8],
    opened: Option<OwnedFd>,
    opts: &WalkOptions<'_>,
    report: &Mutex<WalkReport>,
    held: &AtomicUsize,
) -> std::io::Result<Listing> {
    let excludes = opts.excludes;
    let fd = match opened {
        Some(fd) => {
            held.fetch_sub(1, Ordering::Relaxed);
            fd
        }
        None => open_dir_beneath(root, rel)?,
    };
    if let Some(hook) = opts.on_dir {
        hook(fd.as_fd(), rel);
    }
    let (listing, buf, count) = read_names(fd, rel, report)?;
    let dir = listing.fd()?;
    let mut children = Vec::with_capacity(count);
    let mut subdirs = Vec::new();
    // Each child's workspace-relative path, for exclusions and warnings: one buffer whose
    // tail is rewritten per child (`rel/`, or nothing at the root).
    let mut child_rel = join_rel(rel, b"");
    let base = child_rel.len();
    for cname in names(&buf) {
        let name = cname.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        child_rel.truncate(base);
        child_rel.extend_from_slice(name);
        let child_rel = &child_rel[..];
        let st = match rustix::fs::statat(dir, cname, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(Errno::NOENT) => {
                warn(report, child_rel, "vanished during the walk".into());
                continue;
            }
            Err(e) => {
                warn(report, child_rel, format!("cannot stat: {e}"));
                continue;
            }
        };
        let ft = FileType::from_raw_mode(st.st_mode as _);
        if excludes.is_excluded(child_rel, name, ft == FileType::Directory) {
            continue;
        }
        let stat = stat_of_raw(&st);
        match ft {
            FileType::Directory => subdirs.push((name.to_vec(), stat, open_subdir(dir, cname, held))),
            FileType::RegularFile => children.push(Node::File { name: name.to_vec(), stat }),
            FileType::Symlink => match rustix::fs::readlinkat(dir, cname, Vec::new()) {
                Ok(t) => children
                    .push(Node::Symlink { name: name.to_vec(), link: Box::new(Link { target: t.into_bytes(), stat }) }),
                Err(e) => warn(report, child_rel, format!("cannot read symlink: {e}")),
            },
            _ => {
                if let Ok(mut r) = report.lock() {
                    r.skipped += 1;
                    *r.skipped_in.entry(rel.to_vec()).or_default() += 1;
                }
            }
        }
    }
    Ok(Listing { children, subdirs })
}

/// One directory listed again on its own: its files and symlinks (as nodes), and
/// its subdirectories by name with their `lstat`. Nothing below it is opened.
pub struct OneDir {
    pub children: Vec<Node>,
    pub subdirs: Vec<(Vec<u8>, Stat)>,
    pub report: WalkReport,
}

/// Lists directory `rel` beneath `root` (opened with no symlink followed), applying
/// `opts.excludes` as a walk would.
pub fn list_one(root: &OwnedFd, rel: &[u8], opts: &WalkOptions<'_>) -> std::io::Result<OneDir> {
    let fd = open_dir_beneath(root, rel)?;
    let report = Mutex::new(WalkReport::default());
    // As many held as allowed: no subdirectory is opened for a next level that never comes.
    let held = AtomicUsize::new(HELD_DIRS + 1);
    let opts = WalkOptions { on_dir: None, ..*opts };
    let Listing { mut children, subdirs } = list_dir(root, rel, Some(fd), &opts, &report, &held)?;
    children.sort_unstable_by(|a, b| a.name().cmp(b.name()));
    let mut subdirs: Vec<(Vec<u8>, Stat)> = subdirs.into_iter().map(|(name, stat, _)| (name, stat)).collect();
    subdirs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let report = report.into_inner().unwrap_or_default();
    Ok(OneDir { children, subdirs, report })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_entry_is_sized_for_a_file() {
        // One per entry of the tree for a whole snapshot: a file's name and status, not a
        // symlink's target beside them.
        assert_eq!(std::mem::size_of::<Node>(), std::mem::size_of::<Vec<u8>>() + std::mem::size_of::<Stat>());
    }

    #[test]
    fn default_excludes_match_names_anywhere_and_suffixes() {
        let ex = Excludes::effective(None, &[]).expect("defaults");
        assert!(ex.is_excluded(b"a/node_modules", b"node_modules", true));
        assert!(ex.is_excluded(b"x.lock", b"x.lock", false));
        assert!(!ex.is_excluded(b"src/lockfile.rs", b"lockfile.rs", false));
        assert!(!ex.is_excluded(b"tmpfile", b"tmpfile", false));
    }

    #[test]
    fn anchored_and_dir_only_patterns() {
        let ex = Excludes::new(&["/build/out", "logs/", "*.bak"]).expect("patterns");
        assert!(ex.is_excluded(b"build/out", b"out", true));
        assert!(!ex.is_excluded(b"x/build/out", b"out", true));
        assert!(ex.is_excluded(b"a/logs", b"logs", true));
        assert!(!ex.is_excluded(b"a/logs", b"logs", false));
        assert!(ex.is_excluded(b"deep/er/f.bak", b"f.bak", false));
        assert!(Excludes::new(&["a["]).is_err());
    }
}
