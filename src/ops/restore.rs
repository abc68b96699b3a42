//! Restoring a snapshot (or some of its paths) into a directory, modes and mtimes included,
//! without ever writing outside the target and without ever leaving a torn file.
//!
//! Order of work, and why it is safe (ARCHITECTURE.md, "Restore"):
//! 1. plan: every entry to create, with every object located (packed, or loose: read later
//!    through a shared reader), in one manifest read; a missing object or a bad name fails
//!    before the target is touched;
//! 2. record the restore in the manifest (`restores`), holding a lock file for as long as it
//!    runs;
//! 3. directories: created (or checked) parents first, each in its parent's descriptor and
//!    opened there with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a symlink planted
//!    anywhere on the way (or swapped in meanwhile) is never followed; the subtrees below
//!    depth 2 on every core; with `overwrite`, a non-directory where the snapshot has a
//!    directory is replaced;
//! 4. stage: files are written in parallel, each under a temporary name beside its place
//!    (`.trove-rst-<id>-<n>`), verified, given their mode and mtime; symlinks too;
//! 5. one `syncfs` makes all of their data durable (not one fsync per file); while step 4
//!    runs, a thread calls `syncfs` after every 64 MiB staged, so the disk writes while the
//!    workers decode and this last sync finds little left (one of those failing fails the
//!    restore here: a write error may be reported to one sync only);
//! 6. each staged entry is renamed over its place (atomic: a reader or a crash sees the old
//!    file or the new one, never a torn one), on every core; directory modes and mtimes are
//!    set, children before parents;
//! 7. a second `syncfs` makes the renames durable, then the `restores` row goes, with the audit
//!    record.
//!
//! A crash leaves whole files only: some already in place, the rest still under their
//! temporary names, which `Repo::open` removes (`recover_restores`) once the lock shows that the
//! restoring process is gone. Running the restore again completes it. Staging beside each file
//! (not in one directory) keeps the parallel writers out of each other's directory locks, and
//! makes each rename one within a directory.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, Timespec, Timestamps, UTIME_OMIT};
use rustix::io::Errno;
use serde::Serialize;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::failpoint::failpoint;
use crate::base::flush;
use crate::base::path;
use crate::base::progress::{NoProgress, Progress};
use crate::base::time::now_ns;
use crate::fs::walk;
use crate::manifest::loose;
use crate::manifest::objects::{self, Location};
use crate::manifest::restores::{self, Pending};
use crate::model::audit::AuditRecord;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::{Entry, EntryKind};
use crate::object::bundle::BundleCache;
use crate::object::ObjectId;
use crate::repo::Repo;

/// What `Repo::restore` restores, where from, and who asks.
pub struct RestoreOptions<'a> {
    /// Snapshot paths to restore (files or directories); empty means everything.
    pub paths: Vec<Vec<u8>>,
    /// Restore into a non-empty directory, replacing what is at the snapshot's paths.
    pub overwrite: bool,
    /// Who restores, for the audit record.
    pub actor: String,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for RestoreOptions<'_> {
    fn default() -> Self {
        RestoreOptions { paths: Vec::new(), overwrite: false, actor: "library".into(), progress: &NoProgress }
    }
}

/// What a restore created.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RestoreReport {
    /// Regular files written.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Bytes of file content written.
    pub bytes: u64,
}

/// Everything a restore creates; paths are relative to the target.
struct Plan {
    /// In pre-order: each directory after its parent, each subtree contiguous.
    dirs: Vec<(Vec<u8>, Entry)>,
    /// In listing order, which keeps a directory's files together (each step opens a file's
    /// directory once per run of its files).
    files: Vec<FilePlan>,
    /// Indexes into `files` in the order their contents are stored, which step 4 stages in.
    by_storage: Vec<usize>,
    links: Vec<(Vec<u8>, Entry)>,
}

struct FilePlan {
    rel: Vec<u8>,
    entry: Entry,
    /// Each object of the file and where it lies in a pack; `None`: loose in the manifest (a
    /// small snapshot's or a tool's object).
    parts: Vec<(ObjectId, Option<Location>)>,
}

fn timespec(ns: i64) -> Timespec {
    Timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) as _ }
}

/// Sets only the modification time (the access time is left as it is).
fn mtime_only(ns: i64) -> Timestamps {
    Timestamps { last_access: Timespec { tv_sec: 0, tv_nsec: UTIME_OMIT }, last_modification: timespec(ns) }
}

/// Names from the manifest become path components on disk: refuse anything that could step
/// outside the target even if the manifest was tampered with.
fn safe_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(Error::corrupt(format!("snapshot holds an unusable entry name '{}'", path::display(name))));
    }
    Ok(())
}

/// The temporary name of the `i`th file (or, with `l`, link) of restore `prefix`.
fn staged_name(prefix: &[u8], i: usize) -> Vec<u8> {
    let mut n = prefix.to_vec();
    n.extend_from_slice(i.to_string().as_bytes());
    n
}

fn link_name(prefix: &[u8], i: usize) -> Vec<u8> {
    let mut n = prefix.to_vec();
    n.push(b'l');
    n.extend_from_slice(i.to_string().as_bytes());
    n
}

/// The restore's target directory: its descriptor, and its path for messages.
struct Target<'a> {
    fd: OwnedFd,
    path: &'a Path,
}

impl Target<'_> {
    /// The refusal to replace what is at `rel` without `--overwrite`.
    fn taken(&self, rel: &[u8]) -> Error {
        Error::new(
            ErrorKind::AlreadyExists,
            format!("'{}' exists in {}: pass --overwrite to replace it", path::display(rel), self.path.display()),
        )
    }

    fn err(&self, verb: &str, rel: &[u8], e: impl Into<std::io::Error>) -> Error {
        let e: std::io::Error = e.into();
        match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => Error::new(
                ErrorKind::Conflict,
                format!(
                    "cannot {verb} '{}' in {}: a symlink or a file is in the way, and restore never follows a symlink",
                    path::display(rel),
                    self.path.display()
                ),
            ),
            _ => Error::io(verb, &self.path.join(OsStr::from_bytes(rel)), e),
        }
    }

    /// The directory at `rel` beneath the target, no symlink followed.
    fn dir(&self, rel: &[u8]) -> Result<OwnedFd> {
        walk::open_dir_beneath(&self.fd, rel).map_err(|e| self.err("open directory", rel, e))
    }

    /// Makes directory `rel` in `dir`, its parent (plans list parents first); with `overwrite`,
    /// a file or symlink in its place is removed first, never followed.
    fn ensure_dir(&self, dir: &OwnedFd, rel: &[u8], overwrite: bool) -> Result<()> {
        let (_, name) = split(rel);
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory => {
                return Ok(())
            }
            Ok(_) if overwrite => {
                rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(|e| self.err("replace", rel, e))?
            }
            Ok(_) => return Err(self.taken(rel)),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(self.err("stat", rel, e)),
        }
        match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(self.err("create directory", rel, e)),
        }
    }
}

/// Splits `a/b/c` into (`a/b`, `c`).
fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (b"", rel),
    }
}

/// The last directory a worker opened: consecutive entries of a plan mostly share a parent (in
/// listing order, and in storage order too, where a bundle's members are files read in path
/// order).
#[derive(Default)]
struct DirCache {
    rel: Option<Vec<u8>>,
    fd: Option<OwnedFd>,
}

impl DirCache {
    fn get<'a>(&'a mut self, target: &Target<'_>, rel: &[u8]) -> Result<&'a OwnedFd> {
        if self.rel.as_deref() != Some(rel) || self.fd.is_none() {
            self.fd = Some(target.dir(rel)?);
            self.rel = Some(rel.to_vec());
        }
        self.fd.as_ref().ok_or_else(|| Error::internal("directory cache emptied"))
    }
}

/// Holds the lock that tells recovery a restore is still running (see `recover_restores`).
struct RestoreLock {
    _file: File,
    path: std::path::PathBuf,
}

impl Drop for RestoreLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn new_restore_id() -> Result<String> {
    let mut bytes = [0u8; 6];
    crate::base::random::fill_random(&mut bytes)?;
    Ok(format!("rst_{}", hex::encode(bytes)))
}

/// Whether the restore target is new or empty: then nothing can be in the way, and the checks
/// for what is are skipped. A target with entries needs `overwrite`.
fn fresh_target(target: &Path, overwrite: bool) -> Result<bool> {
    match std::fs::read_dir(target) {
        Ok(mut it) => {
            let fresh = it.next().is_none();
            if !fresh && !overwrite {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "restore target {} is not empty: choose an empty directory or pass --overwrite",
                        target.display()
                    ),
                ));
            }
            Ok(fresh)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::io("open restore target", target, e)),
    }
}

/// The audit record of a finished restore of `snap` into `abs`.
fn restore_record(snap: &SnapshotInfo, abs: &Path, opts: &RestoreOptions<'_>, report: &RestoreReport) -> AuditRecord {
    let mut record = AuditRecord::ok(now_ns(), &opts.actor, "restore");
    record.workspace = Some(snap.workspace.clone());
    record.dest_path = Some(abs.as_os_str().as_bytes().to_vec());
    record.details = serde_json::json!({
        "snapshot": snap.id,
        "paths": opts.paths.iter().map(|p| path::display(p).into_owned()).collect::<Vec<_>>(),
        "files": report.files,
        "bytes": report.bytes,
    });
    record
}

impl Repo {
    fn restore_lock_path(&self, id: &str) -> std::path::PathBuf {
        let dir = match self.root() {
            Some(r) => r.join("locks"),
            None => std::env::temp_dir().join("trove-locks"),
        };
        dir.join(format!("{id}.lock"))
    }

    /// Takes the lock of restore `id`: waiting when `wait`, else `None` if someone holds it.
    fn lock_restore(&self, id: &str, wait: bool) -> Result<Option<RestoreLock>> {
        let path = self.restore_lock_path(id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        use rustix::fs::FlockOperation;
        let op = if wait { FlockOperation::LockExclusive } else { FlockOperation::NonBlockingLockExclusive };
        match rustix::fs::flock(&file, op) {
            Ok(()) => Ok(Some(RestoreLock { _file: file, path })),
            Err(Errno::WOULDBLOCK) if !wait => Ok(None),
            Err(e) => Err(Error::io("lock", &path, e.into())),
        }
    }

    /// Restores snapshot `snap` (or `opts.paths` of it) into `target`, durably: files are staged
    /// beside their place, synced, then renamed; nothing outside `target` is touched.
    pub fn restore(&self, snap: &SnapshotInfo, target: &Path, opts: &RestoreOptions<'_>) -> Result<RestoreReport> {
        let fresh = fresh_target(target, opts.overwrite)?;
        // Garbage collection keeps what this restore reads, even should its snapshot be
        // forgotten meanwhile, until it is done.
        let _lease = self.lease("restore")?;

        // 1. Plan: every entry to create, resolved before anything is written.
        let plan = self.manifest.read(|| self.plan(snap, opts))?;
        self.check_deadline("planning the restore")?;

        std::fs::create_dir_all(target).map_err(|e| Error::io("create restore target", target, e))?;
        let abs = std::path::absolute(target).map_err(|e| Error::io("resolve", target, e))?;
        let target = Target { fd: walk::open_root(&abs)?, path: target };

        // 2. Record it.
        let id = new_restore_id()?;
        let prefix = format!(".trove-rst-{id}-").into_bytes();
        let pending = Pending { id: id.clone(), target: abs.as_os_str().as_bytes().to_vec(), staging: prefix.clone() };
        // Another node's snapshot: the restore is this node's, recorded in its own replica (whose
        // next open clears what a kill left) and its own log.
        let acting = self.recorder()?;
        let recorder = acting.as_ref().unwrap_or(self);
        let lock = recorder.record_restore(&pending, &abs, fresh)?;
        let result = self.restore_planned(&target, &prefix, &plan, opts, fresh);
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                // Nothing half-written stays behind: staged files go (found by walking the target:
                // a directory may have moved meanwhile), files already renamed into place are
                // whole. If even that fails, recovery tries again on the next open.
                if remove_temporaries(&target.fd, &prefix).is_ok() && lock.is_some() {
                    recorder.manifest.write(|tx| restores::remove(tx, &id))?;
                }
                return Err(e);
            }
        };
        failpoint("restore:renamed");

        let record = self.naming_node(restore_record(snap, &abs, opts, &report));
        let Some(lock) = lock else {
            // Unrecorded (the repository's disk is full): the audit record too may not fit.
            match recorder.manifest.write(|tx| crate::manifest::audit::append(tx, &record)) {
                Ok(seq) => {
                    crate::ops::notices::publish(&id, [(0, crate::ops::notices::Published { seq, created: false })])
                }
                Err(e) => {
                    tracing::warn!(target = %abs.display(), error = %e, "the restore is done but not in the audit log: the manifest cannot be written")
                }
            }
            return Ok(report);
        };
        let seq = recorder.manifest.write(|tx| {
            restores::remove(tx, &id)?;
            crate::manifest::audit::append(tx, &record)
        })?;
        crate::ops::notices::publish(&id, [(0, crate::ops::notices::Published { seq, created: false })]);
        drop(lock);
        Ok(report)
    }

    /// Records restore `pending` into `abs` (its lock, then its row), so that a kill leaves
    /// temporaries the next open removes; returns the lock, held until the restore's end.
    ///
    /// When the repository cannot be written (its disk is full), a restore into a new or empty
    /// directory (`fresh`) goes on unrecorded: it changes nothing that was there, and a kill
    /// leaves at worst its temporaries, named `.trove-rst-<id>-…`, in a directory that held
    /// nothing. Into a directory with files in it, it is refused.
    fn record_restore(&self, pending: &Pending, abs: &Path, fresh: bool) -> Result<Option<RestoreLock>> {
        let recorded = match self.read_only() {
            Some(why) => Err(Error::new(ErrorKind::Io, why.to_string())),
            None => self.lock_restore(&pending.id, true).and_then(|lock| {
                let lock = lock.ok_or_else(|| Error::internal("a blocking lock returned nothing"))?;
                self.manifest.write(|tx| restores::insert(tx, pending, now_ns()))?;
                Ok(lock)
            }),
        };
        match recorded {
            Ok(lock) => Ok(Some(lock)),
            Err(e) if e.is_storage_full() || self.read_only().is_some() => {
                if !fresh {
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!(
                            "the repository cannot record a restore into {}, which is not empty ({}): restore into a new or empty directory, or free space on the repository's disk first",
                            abs.display(),
                            e.message()
                        ),
                    ));
                }
                tracing::warn!(target = %abs.display(), error = %e, "the repository cannot be written: restoring into a new directory unrecorded");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Steps 3 to 7 of a restore whose temporary names start with `prefix`.
    fn restore_planned(
        &self,
        target: &Target<'_>,
        prefix: &[u8],
        plan: &Plan,
        opts: &RestoreOptions<'_>,
        fresh: bool,
    ) -> Result<RestoreReport> {
        // 3. Into a directory that was not empty, refuse before anything changes; then the
        // directories, parents first.
        if !fresh {
            check_in_the_way(target, plan, opts)?;
        }
        let levels = Levels::of(&plan.dirs.iter().map(|(rel, _)| rel.as_slice()).collect::<Vec<_>>());
        make_dirs(target, plan, &levels, opts, fresh)?;
        self.check_deadline("preparing the restore")?;
        // 4. Stage.
        let total: u64 = plan.files.iter().map(|f| f.entry.size).sum();
        opts.progress.start("restoring", total);
        self.stage_all(target, prefix, plan, opts)?;
        failpoint("restore:staged");
        self.check_deadline("restoring files")?;
        // 5. Every staged byte durable before any of it replaces a file.
        rustix::fs::syncfs(&target.fd).map_err(|e| target.err("sync", b"", e))?;
        failpoint("restore:synced");
        // 6. Into place. From here on the restore goes to the end: it is quick, and stopping
        // halfway would leave the target neither old nor new.
        put_in_place(target, prefix, plan, opts.overwrite)?;
        set_dir_times(target, plan, &levels)?;
        // 7. The renames and directory times durable.
        rustix::fs::syncfs(&target.fd).map_err(|e| target.err("sync", b"", e))?;
        opts.progress.finish();
        Ok(RestoreReport {
            files: plan.files.len() as u64,
            dirs: plan.dirs.len() as u64,
            symlinks: plan.links.len() as u64,
            bytes: total,
        })
    }

    /// Step 4: every file staged beside its place under a temporary name, in parallel over the
    /// plan's storage order (each worker's contiguous runs keep a bundle's members together),
    /// with the data written out behind them; then every symlink.
    fn stage_all(&self, target: &Target<'_>, prefix: &[u8], plan: &Plan, opts: &RestoreOptions<'_>) -> Result<()> {
        // From a bucket, the packs first, whole and several at once, into the node's cache:
        // one request a pack, where reading blob by blob would make one a bundle.
        let packs = plan.by_storage.iter().filter_map(|&i| plan.files.get(i)).flat_map(|f| &f.parts);
        self.warm_packs(packs.filter_map(|(_, loc)| loc.as_ref().map(|l| l.pack.as_str())))?;
        let (backend, bundles) = (self.backend.as_ref(), &self.caches.bundles);
        // Loose objects are read through a connection of their own, shared by the workers;
        // opened only when the plan has any.
        let has_loose = plan.files.iter().any(|f| f.parts.iter().any(|(_, l)| l.is_none()));
        let loose = if has_loose { Some(Mutex::new(self.manifest.reader()?)) } else { None };
        let store = Store { backend, bundles, loose: loose.as_ref() };
        let deadline = self.deadline();
        let staged = AtomicU64::new(0);
        let (written, flushed) = flush::behind(
            || rustix::fs::syncfs(&target.fd).map_err(Into::into),
            |kick| {
                plan.by_storage.par_iter().with_min_len(16).try_for_each_init(
                    DirCache::default,
                    |cache, &i| -> Result<()> {
                        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                            return Err(Error::timeout("restoring files", false));
                        }
                        let f = plan.files.get(i).ok_or_else(|| Error::internal("a restore's order names no file"))?;
                        let dir = cache.get(target, split(&f.rel).0)?;
                        stage_file(&store, dir, &staged_name(prefix, i), f)
                            .map_err(|e| e.context(path::display(&f.rel)))?;
                        opts.progress.advance(f.entry.size);
                        let before = staged.fetch_add(f.entry.size, Ordering::Relaxed);
                        if before / FLUSH_BATCH != (before + f.entry.size) / FLUSH_BATCH {
                            kick.kick();
                        }
                        Ok(())
                    },
                )
            },
        );
        written?;
        // A failed early sync may be reported once only: step 5's could then succeed over data
        // that never reached the disk.
        flushed.map_err(|e| target.err("sync", b"", e))?;
        let mut cache = DirCache::default();
        for (i, (rel, e)) in plan.links.iter().enumerate() {
            let name = link_name(prefix, i);
            let dir = cache.get(target, split(rel).0)?;
            let t = e.target.as_deref().unwrap_or(b"");
            rustix::fs::symlinkat(t, dir, name.as_slice()).map_err(|err| target.err("create symlink", rel, err))?;
            rustix::fs::utimensat(dir, name.as_slice(), &mtime_only(e.mtime_ns), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|err| target.err("set times of", rel, err))?;
        }
        Ok(())
    }

    /// What a restore will create, with every object located.
    fn plan(&self, snap: &SnapshotInfo, opts: &RestoreOptions<'_>) -> Result<Plan> {
        let mut dirs: Vec<(Vec<u8>, Entry)> = Vec::new();
        let mut files: Vec<FilePlan> = Vec::new();
        let mut links: Vec<(Vec<u8>, Entry)> = Vec::new();
        // Paths given twice, or one inside another, are planned once; a whole snapshot's
        // listing names each path once, so it needs no set of them.
        let mut planned = std::collections::HashSet::new();
        let roots: Vec<Vec<u8>> = if opts.paths.is_empty() { vec![Vec::new()] } else { opts.paths.clone() };
        let once = roots.len() == 1 && roots[0].is_empty();
        let conn = self.manifest.conn();
        let mut locator = objects::Locator::new(conn)?;
        for root in &roots {
            let entry = self.lookup(snap, root)?;
            let norm = path::components(root)?.join(&b'/');
            let mut add = |rel: &[u8], e: &Entry| -> Result<()> {
                for part in rel.split(|&b| b == b'/') {
                    safe_name(part)?;
                }
                if !once && !planned.insert(rel.to_vec()) {
                    return Ok(());
                }
                match e.kind {
                    EntryKind::Dir => dirs.push((rel.to_vec(), e.clone())),
                    EntryKind::Symlink => links.push((rel.to_vec(), e.clone())),
                    EntryKind::File => {
                        let id = e.content.ok_or_else(|| {
                            Error::corrupt(format!("'{}' has no content in the snapshot", path::display(rel)))
                        })?;
                        let chunks = locator.chunk_list(&id)?;
                        let ids: Vec<ObjectId> =
                            if chunks.is_empty() { vec![id] } else { chunks.into_iter().map(|(_, c)| c).collect() };
                        let mut parts = Vec::with_capacity(ids.len());
                        for oid in ids {
                            let loc = locator.locate(&oid)?;
                            if loc.is_none() && !loose::contains(conn, &oid)? {
                                return Err(Error::corrupt(format!(
                                    "object {oid} is referenced but not stored; run `trove check`"
                                )));
                            }
                            parts.push((oid, loc));
                        }
                        files.push(FilePlan { rel: rel.to_vec(), entry: e.clone(), parts });
                    }
                }
                Ok(())
            };
            if norm.is_empty() {
                self.list(snap, b"", true, &mut add)?;
            } else {
                // Ancestors first, as directories of their own: each is checked (or replaced)
                // on the way, so nothing is written through a symlink in the target.
                let parts: Vec<&[u8]> = norm.split(|&b| b == b'/').collect();
                for i in 1..parts.len() {
                    let ancestor = parts[..i].join(&b'/');
                    let e = self.lookup(snap, &ancestor)?;
                    add(&ancestor, &e)?;
                }
                add(&norm, &entry)?;
                if entry.kind == EntryKind::Dir {
                    self.list(snap, &norm, true, &mut add)?;
                }
            }
        }
        // Several paths are listed one after the other (and ancestors on their own): sorted by
        // components, the directories are in pre-order again, each subtree contiguous and after
        // its parent, as steps 3 and 6 need (byte order would not do: `a/b-c` sorts between
        // `a/b` and `a/b/d`).
        if !once {
            dirs.sort_unstable_by(|a, b| a.0.split(|&c| c == b'/').cmp(b.0.split(|&c| c == b'/')));
        }
        // Staged in storage order: the workers take contiguous runs of it, so each decodes a
        // bundle once for all its members and reads each pack front to back. Listing order
        // would visit a bundle several times (deduplication puts a file's content in a bundle
        // written for another path), decoding it again each time it left the small shared
        // cache.
        fn stored_at(f: &FilePlan) -> Option<(&str, u64, Option<u64>)> {
            f.parts.first().and_then(|(_, l)| l.as_ref()).map(|l| (l.pack.as_str(), l.offset, l.inner_offset))
        }
        let mut by_storage: Vec<usize> = (0..files.len()).collect();
        by_storage.sort_unstable_by(|&a, &b| stored_at(&files[a]).cmp(&stored_at(&files[b])));
        Ok(Plan { dirs, files, by_storage, links })
    }

    /// Cleans up after restores a crash interrupted: run when a repository is opened. A restore
    /// whose lock is held is still running (another process) and is left alone. Files already
    /// renamed into place are whole and stay; the files still under temporary names go.
    pub(crate) fn recover_restores(&self) -> Result<usize> {
        let mut settled = 0;
        for p in restores::pending(self.manifest.conn())? {
            let _lock = match self.lock_restore(&p.id, false) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(restore = %p.id, error = %e, "an interrupted restore is left for a later open: its lock cannot be taken");
                    continue;
                }
            };
            let target = Path::new(OsStr::from_bytes(&p.target));
            let cleaned = match walk::open_root(target) {
                Ok(fd) => remove_temporaries(&fd, &p.staging),
                // The target itself is gone: nothing left on disk to clean.
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = cleaned {
                tracing::warn!(restore = %p.id, error = %e, "an interrupted restore's temporary files cannot be removed yet");
                continue;
            }
            let mut record = AuditRecord::ok(now_ns(), "trove", "restore");
            record.outcome = "interrupted".into();
            record.dest_path = Some(p.target.clone());
            record.details = serde_json::json!({
                "restore": p.id,
                "message": "a restore was interrupted; the files it had put in place are whole, the rest were discarded: run it again to complete it",
            });
            self.manifest.write(|tx| {
                restores::remove(tx, &p.id)?;
                crate::manifest::audit::append(tx, &record)
            })?;
            settled += 1;
        }
        Ok(settled)
    }
}

/// Staged bytes after which step 4 has them written out (`syncfs`, beside the writers): large
/// enough that the syncs stay few, small enough that step 5 finds little left to write.
const FLUSH_BATCH: u64 = 64 << 20;

/// Removes every entry named `prefix…` anywhere under `root` (a crashed restore's temporaries,
/// found by walking the target), with an explicit stack and no symlink followed.
fn remove_temporaries(root: &OwnedFd, prefix: &[u8]) -> Result<()> {
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let dir = match walk::open_dir_beneath(root, &rel) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue,
            Err(e) => return Err(Error::io("open directory", Path::new(&*path::display(&rel)), e)),
        };
        let shown = || std::path::PathBuf::from(&*path::display(&rel));
        for entry in rustix::fs::Dir::read_from(&dir).map_err(|e| Error::io("read directory", &shown(), e.into()))? {
            let entry = entry.map_err(|e| Error::io("read directory", &shown(), e.into()))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if name.starts_with(prefix) {
                match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(Error::io("remove", &shown().join(OsStr::from_bytes(name)), e.into())),
                }
            } else {
                let is_dir = match entry.file_type() {
                    rustix::fs::FileType::Directory => true,
                    // Some filesystems do not say in the listing: ask.
                    rustix::fs::FileType::Unknown => rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
                        }),
                    _ => false,
                };
                if is_dir {
                    stack.push(walk::join_rel(&rel, name));
                }
            }
        }
    }
    Ok(())
}

/// Where a restore's workers read objects: packs through the backend and the bundle cache,
/// loose objects through a manifest connection.
struct Store<'a> {
    backend: &'a dyn crate::object::Backend,
    bundles: &'a BundleCache,
    loose: Option<&'a Mutex<rusqlite::Connection>>,
}

impl Store<'_> {
    /// The verified bytes of object `id`, from `loc` or, without one, loose (a delta through
    /// the manifest, which finds its bases).
    fn fetch(&self, id: &ObjectId, loc: Option<&Location>) -> Result<Vec<u8>> {
        if let Some(loc) = loc {
            return crate::ops::view::fetch(self.backend, self.bundles, id, loc);
        }
        let conn = self.loose.ok_or_else(|| Error::internal("a restore reads a loose object without a reader"))?;
        let conn = conn.lock().map_err(|_| Error::internal("loose reader poisoned"))?;
        crate::ops::view::read_stored(&conn, self.backend, self.bundles, id)
    }
}

/// Writes one file under the temporary `name` in its directory `dir`, verified, with its mode
/// and mtime.
fn stage_file(store: &Store<'_>, dir: &OwnedFd, name: &[u8], f: &FilePlan) -> Result<()> {
    let shown = || Path::new(OsStr::from_bytes(&f.rel)).to_path_buf();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| Error::io("create", &shown(), e.into()))?;
    let mut file = File::from(fd);
    let chunked = f.parts.len() > 1 || f.parts.first().is_some_and(|p| Some(p.0) != f.entry.content);
    let mut whole = blake3::Hasher::new();
    for (id, loc) in &f.parts {
        let raw = store.fetch(id, loc.as_ref())?;
        if chunked {
            whole.update(&raw);
        }
        file.write_all(&raw).map_err(|e| Error::io("write", &shown(), e))?;
    }
    if chunked && f.entry.content != Some(ObjectId(*whole.finalize().as_bytes())) {
        return Err(Error::corrupt(format!(
            "'{}' does not match its content id after reassembly; run `trove check`",
            path::display(&f.rel)
        )));
    }
    rustix::fs::fchmod(&file, Mode::from_raw_mode(f.entry.mode))
        .map_err(|e| Error::io("set mode of", &shown(), e.into()))?;
    rustix::fs::futimens(&file, &mtime_only(f.entry.mtime_ns))
        .map_err(|e| Error::io("set mtime of", &shown(), e.into()))?;
    Ok(())
}

/// Step 3: the plan's directories, parents first. Into a fresh target a directory someone makes
/// meanwhile is fine; otherwise an existing one is checked (`Target::ensure_dir`). The shallow
/// ones first, then the subtrees below them on every core (`Levels`).
fn make_dirs(target: &Target<'_>, plan: &Plan, levels: &Levels, opts: &RestoreOptions<'_>, fresh: bool) -> Result<()> {
    let make = |dirs: &mut dyn Iterator<Item = &(Vec<u8>, Entry)>| {
        let enter = |dir: &OwnedFd, rel: &[u8]| {
            if !fresh {
                return target.ensure_dir(dir, rel, opts.overwrite);
            }
            match rustix::fs::mkdirat(dir, split(rel).1, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(Errno::EXIST) => Ok(()),
                Err(e) => Err(target.err("create directory", rel, e)),
            }
        };
        walk_dirs(target, dirs, enter, |_, _, _| Ok(()))
    };
    make(&mut levels.shallow.iter().map(|&i| &plan.dirs[i]))?;
    levels.subtrees.par_iter().try_for_each(|r| make(&mut plan.dirs[r.clone()].iter()))
}

/// Visits `dirs` (in pre-order) with a [`DirStack`]: `enter` is given each directory's parent,
/// open, before the directory itself is opened there (to make or check it), and `leave` each
/// directory, with its descriptor if held, once everything beneath it was visited.
fn walk_dirs<'p>(
    target: &Target<'_>,
    dirs: &mut dyn Iterator<Item = &'p (Vec<u8>, Entry)>,
    mut enter: impl FnMut(&OwnedFd, &[u8]) -> Result<()>,
    mut leave: impl FnMut(&'p [u8], &'p Entry, Option<&OwnedFd>) -> Result<()>,
) -> Result<()> {
    let mut stack = DirStack::default();
    for (rel, entry) in dirs {
        stack.leave_for(rel, &mut leave)?;
        let (parent, name) = split(rel);
        let opened;
        let dir = match stack.fd_of(target, parent) {
            Some(fd) => fd,
            None => {
                opened = target.dir(parent)?;
                &opened
            }
        };
        enter(dir, rel)?;
        let fd = if stack.deep() {
            None
        } else {
            Some(walk::open_dir_beneath(dir, name).map_err(|e| target.err("open directory", rel, e))?)
        };
        stack.push(rel, entry, fd);
    }
    stack.leave_for(b"", leave)
}

/// A plan's directories (in listing order) cut for work on every core: those above
/// [`SUBTREE_DEPTH`], and the runs of the subtrees rooted at that depth, which touch disjoint
/// parts of the tree.
struct Levels {
    shallow: Vec<usize>,
    subtrees: Vec<std::ops::Range<usize>>,
}

/// The depth (components) at which [`Levels`] cuts subtrees: two, so a tree with one big
/// directory at its top (`deps/`, `node_modules/`, `src/`) still falls into many.
const SUBTREE_DEPTH: usize = 2;

impl Levels {
    /// Cuts `dirs`, which must be in pre-order (`Plan::dirs`); a deeper directory that does
    /// not follow its subtree's root (which a pre-order never has) puts everything in one
    /// sequential run rather than risk a child made beside its parent.
    fn of(dirs: &[&[u8]]) -> Levels {
        let mut levels = Levels { shallow: Vec::new(), subtrees: Vec::new() };
        let mut root: &[u8] = b"";
        for (i, &rel) in dirs.iter().enumerate() {
            let depth = rel.iter().filter(|&&b| b == b'/').count() + 1;
            if depth < SUBTREE_DEPTH {
                levels.shallow.push(i);
            } else if depth == SUBTREE_DEPTH {
                levels.subtrees.push(i..i + 1);
                root = rel;
            } else {
                let beneath = rel.starts_with(root) && rel.get(root.len()) == Some(&b'/');
                match levels.subtrees.last_mut() {
                    Some(run) if run.end == i && beneath => run.end = i + 1,
                    _ => return Levels { shallow: (0..dirs.len()).collect(), subtrees: Vec::new() },
                }
            }
        }
        levels
    }
}

/// While a plan's directories are visited in listing (pre-)order: the directories on the path to
/// the current one, open, so each is made or opened by one lookup in its parent instead of a
/// walk from the target, and handed back (`leave_for`) once everything beneath it was visited.
/// Descriptors are held for the first levels only ([`DIR_STACK`] in all, shared by the
/// workers), so their number stays bounded whatever the tree's depth and the number of cores
/// (deeper directories are opened from the target).
struct DirStack<'p> {
    path: Vec<(&'p [u8], &'p Entry, Option<OwnedFd>)>,
    held: usize,
}

/// Directory descriptors the stacks of one restore hold open at most, all workers together.
const DIR_STACK: usize = 256;

impl Default for DirStack<'_> {
    fn default() -> Self {
        DirStack { path: Vec::new(), held: (DIR_STACK / rayon::current_num_threads().max(1)).clamp(2, 64) }
    }
}

impl<'p> DirStack<'p> {
    /// Leaves every directory `rel` is not beneath, deepest first, handing each to `left`.
    fn leave_for(
        &mut self,
        rel: &[u8],
        mut left: impl FnMut(&'p [u8], &'p Entry, Option<&OwnedFd>) -> Result<()>,
    ) -> Result<()> {
        while let Some(&(top, _, _)) = self.path.last() {
            if rel.len() > top.len() && rel.starts_with(top) && rel[top.len()] == b'/' {
                break;
            }
            if let Some((top, entry, fd)) = self.path.pop() {
                left(top, entry, fd.as_ref())?;
            }
        }
        Ok(())
    }

    /// The open directory `rel` (the target itself when empty), if held.
    fn fd_of<'s>(&'s self, target: &'s Target<'_>, rel: &[u8]) -> Option<&'s OwnedFd> {
        if rel.is_empty() {
            return Some(&target.fd);
        }
        match self.path.last() {
            Some((top, _, fd)) if *top == rel => fd.as_ref(),
            _ => None,
        }
    }

    /// Whether the next directory entered is past the levels held open.
    fn deep(&self) -> bool {
        self.path.len() >= self.held
    }

    /// Enters directory `rel` (beneath the current one), open or not.
    fn push(&mut self, rel: &'p [u8], entry: &'p Entry, fd: Option<OwnedFd>) {
        self.path.push((rel, entry, fd));
    }
}

/// Refuses, before anything in the target changes, a directory where the snapshot has a file
/// or link, and without `overwrite` anything else in the place of a snapshot entry. An entry
/// whose parent is missing, or is not a directory (replaced by step 3 with `overwrite`, refused
/// here as that parent's own entry without it), has nothing in its way.
fn check_in_the_way(target: &Target<'_>, plan: &Plan, opts: &RestoreOptions<'_>) -> Result<()> {
    let dirs = plan.dirs.iter().map(|(rel, _)| (rel, true));
    let others = plan.files.iter().map(|f| (&f.rel, false)).chain(plan.links.iter().map(|l| (&l.0, false)));
    let mut open: Option<(&[u8], Option<OwnedFd>)> = None;
    for (rel, is_dir) in dirs.chain(others) {
        let (parent, name) = split(rel);
        if open.as_ref().map(|(p, _)| *p) != Some(parent) {
            let fd = match walk::open_dir_beneath(&target.fd, parent) {
                Ok(fd) => Some(fd),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => None,
                Err(e) => return Err(target.err("open directory", parent, e)),
            };
            open = Some((parent, fd));
        }
        let Some((_, Some(dir))) = &open else { continue };
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let there = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
                match (is_dir, there) {
                    (true, true) => {}
                    (false, true) => {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "'{}' in {} is a directory where the snapshot has a file: move it away first",
                                path::display(rel),
                                target.path.display()
                            ),
                        ))
                    }
                    _ if !opts.overwrite => return Err(target.taken(rel)),
                    _ => {}
                }
            }
            Err(Errno::NOENT) => {}
            Err(e) => return Err(target.err("stat", rel, e)),
        }
    }
    Ok(())
}

/// Step 6: every staged file and link renamed into its place (over what is there only with
/// `overwrite`), in runs of listing order on every core: a run's entries mostly share a
/// directory (opened once), and different runs mostly lock different directories.
fn put_in_place(target: &Target<'_>, prefix: &[u8], plan: &Plan, overwrite: bool) -> Result<()> {
    let flags = if overwrite { RenameFlags::empty() } else { RenameFlags::NOREPLACE };
    let files = plan.files.len();
    (0..files + plan.links.len()).into_par_iter().with_min_len(RENAME_RUN).try_for_each_init(
        DirCache::default,
        |cache, n| -> Result<()> {
            let (from, rel) = match n.checked_sub(files) {
                None => (staged_name(prefix, n), &plan.files[n].rel),
                Some(i) => (link_name(prefix, i), &plan.links[i].0),
            };
            let (parent, name) = split(rel);
            let dir = cache.get(target, parent)?;
            rustix::fs::renameat_with(dir, from.as_slice(), dir, name, flags)
                .map_err(|e| target.err("put in place", rel, e))?;
            if n == 0 {
                failpoint("restore:rename:first");
            }
            Ok(())
        },
    )
}

/// Renames a worker of step 6 takes at least at a time.
const RENAME_RUN: usize = 256;

/// The directories' modes and times, children first (writing into a directory changes its
/// mtime): each set through its own descriptor when a walk in listing order leaves it; the
/// subtrees of `Levels` on every core, then the shallow directories.
fn set_dir_times(target: &Target<'_>, plan: &Plan, levels: &Levels) -> Result<()> {
    let set = |rel: &[u8], e: &Entry, fd: Option<&OwnedFd>| -> Result<()> {
        // Past the levels held open, the directory is opened now (beneath the target, no
        // symlink followed): never named in a call that could follow one.
        let opened;
        let fd = match fd {
            Some(fd) => fd,
            None => {
                opened = target.dir(rel)?;
                &opened
            }
        };
        rustix::fs::fchmod(fd, Mode::from_raw_mode(e.mode)).map_err(|err| target.err("set mode of", rel, err))?;
        rustix::fs::futimens(fd, &mtime_only(e.mtime_ns)).map_err(|err| target.err("set mtime of", rel, err))
    };
    let walk = |dirs: &mut dyn Iterator<Item = &(Vec<u8>, Entry)>| walk_dirs(target, dirs, |_, _| Ok(()), set);
    levels.subtrees.par_iter().try_for_each(|r| walk(&mut plan.dirs[r.clone()].iter()))?;
    walk(&mut levels.shallow.iter().map(|&i| &plan.dirs[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `src/lib/a` comes after `src/bin` in the listing of `src`, which the paths give after
    /// `src/lib`'s own directories: the plan sorts them back into pre-order.
    #[test]
    fn a_plan_of_several_paths_lists_directories_in_pre_order() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", Path::new("/tmp"), e))?;
        let ws = tmp.path().join("ws");
        for d in ["src/bin/x", "src/lib/a", "src/lib/sub/h"] {
            std::fs::create_dir_all(ws.join(d)).map_err(|e| Error::io("mkdir", &ws, e))?;
        }
        let repo = Repo::in_memory()?;
        let snap = repo.snapshot(&ws, &crate::SnapshotOptions::default())?;
        let opts =
            RestoreOptions { paths: vec![b"src/lib/sub/h".to_vec(), b"src".to_vec()], ..RestoreOptions::default() };
        let plan = repo.manifest.read(|| repo.plan(&snap, &opts))?;
        let dirs: Vec<&[u8]> = plan.dirs.iter().map(|(rel, _)| rel.as_slice()).collect();
        let expected: [&[u8]; 7] =
            [b"src", b"src/bin", b"src/bin/x", b"src/lib", b"src/lib/a", b"src/lib/sub", b"src/lib/sub/h"];
        assert_eq!(dirs, expected);
        assert_eq!(Levels::of(&dirs).subtrees, [1..3, 3..7]);
        Ok(())
    }

    #[test]
    fn levels_cut_the_listing_into_shallow_directories_and_disjoint_subtrees() {
        let dirs: [&[u8]; 8] = [b"a", b"a/b", b"a/b/c", b"a/b/c/d", b"a/e", b"f", b"f/g", b"f/g/h"];
        let levels = Levels::of(&dirs);
        assert_eq!(levels.shallow, [0, 5]);
        assert_eq!(levels.subtrees, [1..4, 4..5, 6..8]);
        // Not a pre-order (`a/b/x` away from `a/b`): one sequential run, parents first.
        let dirs: [&[u8]; 5] = [b"a", b"a/b", b"a/c", b"a/c/y", b"a/b/x"];
        let levels = Levels::of(&dirs);
        assert_eq!(levels.shallow, [0, 1, 2, 3, 4]);
        assert!(levels.subtrees.is_empty());
    }
}
