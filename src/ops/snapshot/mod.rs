//! Taking a snapshot: live tree -> objects + trees + one snapshot row, in one transaction.
//!
//! Order of work, and why it is crash-safe: (1) walk and `lstat`; (2) files whose stat matches
//! the directory cache reuse their recorded content; the others are read, hashed (BLAKE3 + SHA-256 in
//! one pass), chunked if large, compressed and appended to packs, in parallel; (3) every pack is
//! sealed and fsynced; (4) one manifest transaction indexes the packs and records trees,
//! snapshot and audit record; (5) the directory records that changed go to the node-local
//! cache. A later snapshot that reads only a few files stores them as loose objects in (4)
//! instead (a changed file as a delta against the parent's version), and writes no pack. A
//! crash before (4) commits leaves only unindexed packs, which nothing references and garbage
//! collection reclaims; the repository still opens and earlier snapshots are untouched.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

use rayon::prelude::*;
use rusqlite::Connection;
use sha2::Digest;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{SessionId, SnapshotId};
use crate::base::progress::{NoProgress, Progress};
use crate::base::time::now_ns;
use crate::fs::walk::{self, Excludes, Stat};
use crate::manifest::dir_cache::{self, DirKey};
use crate::manifest::{self, objects, snapshots, workspaces};
use crate::model::audit::AuditRecord;
use crate::model::scope::Scope;
use crate::model::session::check_workspace_name;
use crate::model::snapshot::{Counts, SnapshotInfo, Warning};
use crate::model::tree::{Entry, EntryKind};
use crate::object::bundle::{self, BundleBuilder, SealedBundle};
use crate::object::{blob, ObjectId, PackWriter, RandomKeySet, Sha256};
use crate::ops::diff::tree::{diff_trees, PathSelect, Trees};
use crate::ops::scan::{
    build, classify, pending, records, walk_and_load, Built, Content, Outcome, Outcomes, PendingFile,
};
use crate::repo::Repo;

mod batched;
mod spill;
mod staged;
mod watched;

/// A file whose mtime or ctime is this close to the scan's start is not trusted to the stat
/// cache: a write within the same timestamp tick would leave its stat unchanged (git's and
/// borg's "racy" files). Two seconds covers filesystems with one- and two-second timestamps.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

thread_local! {
    // Per-worker buffers for file contents and encoded blobs, reused across files so the
    // allocator does not accumulate freed megabyte buffers (see `blob::encode_into`).
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static ENCODED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    // The window large files are chunked from (`Chunking::for_each_chunk_in`).
    static WINDOW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    // The worker's bundle builder, taken by a run and put back, so its buffers are reused.
    static BUNDLE: std::cell::RefCell<BundleBuilder> = std::cell::RefCell::new(BundleBuilder::default());
}

/// Below this many trees built, a snapshot frees its walk's structures on a thread beside the
/// commit; at or above it (much changed, or a big tree's first snapshot) before, for the
/// memory peak.
const FREE_BESIDE: usize = 1024;

/// Frees every pool thread's read, encode, chunking and bundle buffers (megabytes each): they
/// would otherwise stay resident through the tree building and the commit, where a snapshot of
/// a small change peaks (a big tree's first snapshot peaks while reading, buffers included).
fn release_buffers() {
    rayon::broadcast(|_| {
        for buf in [&READ_BUF, &ENCODED, &WINDOW] {
            buf.with(|cell| {
                if let Ok(mut b) = cell.try_borrow_mut() {
                    *b = Vec::new();
                }
            });
        }
        BUNDLE.with(|cell| {
            if let Ok(mut b) = cell.try_borrow_mut() {
                *b = BundleBuilder::default();
            }
        });
    });
}

/// A snapshot of a workspace snapshotted before, with at most this many new files to read (and
/// whole blobs to keep), none over `LOOSE_MAX` bytes and `LOOSE_TOTAL` in all (new versions of the
/// parent's paths count apart: `LOOSE_READS`), stores them as loose objects in its own
/// transaction (ARCHITECTURE.md, "Loose objects"), read on the calling thread: a pack for an
/// edit of a few files cost its writer's threads, a second connection, and the pack's fsync,
/// rename and directory fsync (3-4 ms of a 65 ms snapshot), and left a pack file of a few
/// hundred bytes behind each snapshot of an agent's session. Bigger contents go to packs: they
/// are written through the WAL and copied again at its checkpoint. Raised from 16 KiB (64 in
/// all) in issue 18's eleventh stop: with today's pack path, one file of 19 or 56 KB and ten of
/// 228 KB in all were 4-9% faster loose (the fifth stop had found a 45 KB file even). Loose
/// objects stay in the manifest, each compressed alone (`gc --recompress` rewrites packs only):
/// about what a pack of one small bundle of the same files holds. A file over `LOOSE_MAX` (up
/// to `blob::MAX_DELTA_RAW`) goes loose too when the parent snapshot holds an earlier version
/// of its path, and is stored as a delta against it when that is worth it (issue 38: an agent's
/// hundred edits of a 68 KB file are a few hundred bytes each, not a whole copy in a pack each).
const LOOSE_FILES: usize = 16;
/// Files a small change reads in all, and the bytes of those beside its new files: new versions
/// of the parent's paths and files read again only to make sure (see `read_pending`). Read,
/// hashed and compressed (against their earlier versions) on the calling thread, so bounded to
/// some milliseconds of work; a version whose delta is not worth keeping is stored whole, in a
/// pack when over `LOOSE_MAX`.
const LOOSE_READS: usize = 64;
const LOOSE_READ_BYTES: u64 = 4 << 20;
const LOOSE_MAX: u64 = 64 << 10;
const LOOSE_TOTAL: u64 = 256 << 10;

/// Files read by one worker in a row, sharing one bundle builder: long enough for bundles to
/// fill (a run's last bundle is sealed however full: at 64 files most bundles were a fraction
/// of the target), short enough to spread work over the cores. 512 small files fill about
/// 2.5 MiB of a 4 MiB bundle on npm; runs of 2048 saved 0.2% (npm) and 0.9% (crates) of the
/// repository for a cold snapshot 3% slower and 2.5 MiB more memory.
const FILES_PER_RUN: usize = 512;

/// How `Repo::snapshot` takes a snapshot.
pub struct SnapshotOptions<'a> {
    /// Workspace name; defaults to the directory's name.
    pub workspace: Option<String>,
    /// The session taking it, if any.
    pub session: Option<SessionId>,
    /// Why: `manual`, `session_end`, `pause`, `before_restore`, ...
    pub reason: String,
    /// Who takes it, for the audit record.
    pub actor: String,
    /// Per-call exclusions: replace the workspace's list when `Some`, then add `extra_excludes`.
    pub replace_excludes: Option<Vec<String>>,
    /// Patterns added to the effective exclusion list for this call.
    pub extra_excludes: Vec<String>,
    /// Off forces every file to be read (what the directory cache's property test compares against).
    pub use_stat_cache: bool,
    /// Files changed this close to the scan's start are read, not trusted to the directory cache
    /// (see `RACY_WINDOW_NS`).
    pub racy_window_ns: i64,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for SnapshotOptions<'_> {
    fn default() -> Self {
        SnapshotOptions {
            workspace: None,
            session: None,
            reason: "manual".into(),
            actor: "library".into(),
            replace_excludes: None,
            extra_excludes: Vec::new(),
            use_stat_cache: true,
            racy_window_ns: RACY_WINDOW_NS,
            progress: &NoProgress,
        }
    }
}

/// A loose object ready for the snapshot's transaction: id, raw length, blob.
type LooseBlob = (ObjectId, u64, Vec<u8>);

/// Where the read phase puts what the repository may lack.
enum Sink<'a> {
    /// Into packs, after a lookup in the index through a reader connection, and among the loose
    /// objects when there are any (`loose_too`): content an earlier small snapshot or a tool
    /// stored loose is not stored a second time.
    /// Of a snapshot taken in batches, also among what the batches before staged (`staged`).
    Packs { packs: &'a PackWriter, reader: Mutex<Connection>, loose_too: bool, staged: Option<&'a staged::Staged> },
    /// Encoded blobs (id, raw length, blob) for the snapshot's transaction, which stores those
    /// it lacks as loose objects.
    Loose(Mutex<Vec<LooseBlob>>),
}

/// What a snapshot read and stored: sealed packs, and (a small change) loose blobs for its
/// transaction.
#[derive(Default)]
struct Stored {
    packs: Vec<crate::object::SealedPack>,
    loose: Vec<LooseBlob>,
    /// For loose blobs that are a new version of a path the parent snapshot holds: the version
    /// as a delta against that one, and its base's depth (`ops/versions.rs`), by index into
    /// `loose`. The transaction stores the delta while its base is live, else the whole blob.
    deltas: Vec<Option<(Vec<u8>, u8)>>,
}

/// Shared state of the read phase.
struct Writer<'a> {
    zstd_level: i32,
    chunking: crate::object::Chunking,
    seen: Mutex<RandomKeySet<ObjectId>>,
    sink: Sink<'a>,
    warnings: Mutex<Vec<Warning>>,
}

impl Writer<'_> {
    /// Stores `raw` as object `id` unless the repository or this snapshot already has it: an
    /// object up to a chunk's size joins `bundle`, unless it samples as incompressible; a larger
    /// or incompressible one becomes a blob of its own.
    fn store(&self, id: ObjectId, raw: &[u8], bundle: &mut BundleBuilder) -> Result<()> {
        if !self.claim(&id)? {
            return Ok(());
        }
        let packs = match &self.sink {
            Sink::Packs { packs, .. } => packs,
            Sink::Loose(kept) => {
                let encoded = blob::encode(&id, raw, self.zstd_level)?;
                kept.lock().map_err(|_| Error::internal("loose list poisoned"))?.push((id, raw.len() as u64, encoded));
                return Ok(());
            }
        };
        let member = raw.len() <= bundle::MEMBER_MAX;
        if member && blob::looks_compressible(raw, self.zstd_level)? {
            return add_sealed(packs, bundle.add(id, raw, self.zstd_level)?);
        }
        // A member-sized object got here because its sample did not compress.
        Self::store_alone(packs, id, raw, self.zstd_level, member)
    }

    /// Marks `id` seen by this snapshot; true if it is new, to store: neither this snapshot nor
    /// (for packs) the repository has it.
    fn claim(&self, id: &ObjectId) -> Result<bool> {
        if !self.seen.lock().map_err(|_| Error::internal("seen set poisoned"))?.insert(*id) {
            return Ok(false);
        }
        let Sink::Packs { reader, loose_too, staged, .. } = &self.sink else { return Ok(true) };
        if let Some(staged) = staged {
            if staged.contains(id)? {
                return Ok(false);
            }
        }
        let reader = reader.lock().map_err(|_| Error::internal("reader poisoned"))?;
        Ok(!(objects::has_live(&reader, id)? || (*loose_too && manifest::loose::has_live(&reader, id)?)))
    }

    /// Stores `raw` as a blob of its own: compressed through the worker's encode buffer, or
    /// (most such objects do not compress) its header and `raw` appended to the pack as they
    /// are. `incompressible`: its sample was taken already and did not compress.
    fn store_alone(packs: &PackWriter, id: ObjectId, raw: &[u8], level: i32, incompressible: bool) -> Result<()> {
        ENCODED.with(|cell| {
            let mut encoded = cell.borrow_mut();
            if incompressible {
                blob::raw_header(blob::Kind::Object, &id, raw.len(), &mut encoded);
                packs.add_raw(id, &encoded, raw)
            } else if blob::encode_parts(blob::Kind::Object, &id, raw, level, &mut encoded)? {
                packs.add_raw(id, &encoded, raw)
            } else {
                packs.add(id, raw.len() as u64, &encoded)
            }
        })
    }

    fn seal_bundle(&self, bundle: &mut BundleBuilder) -> Result<()> {
        match &self.sink {
            Sink::Packs { packs, .. } => add_sealed(packs, bundle.seal(self.zstd_level)?),
            // A loose sink never fills a bundle.
            Sink::Loose(_) => Ok(()),
        }
    }

    fn warn(&self, rel: &[u8], message: String) {
        if let Ok(mut w) = self.warnings.lock() {
            w.push(Warning { path: String::from_utf8_lossy(rel).into_owned(), message });
        }
    }

    /// Opens a file to read, beneath the root, no symlink followed in any component: if the
    /// file or a directory above it was replaced by a symlink since the walk, it is not read.
    /// `None`: it could not be opened, and a warning says why.
    fn open_file(&self, root: &OwnedFd, rel: &[u8]) -> Option<std::fs::File> {
        match walk::open_beneath(root, rel) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.warn(rel, "vanished before it could be read; not in this snapshot".into());
                None
            }
            Err(e) => {
                self.warn(rel, format!("cannot be read ({e}); not in this snapshot"));
                None
            }
        }
    }

    /// The file's status once read, if it is still a regular file; `None` with a warning if not.
    fn stat_after(&self, file: &std::fs::File, rel: &[u8]) -> Option<Stat> {
        match file.metadata() {
            Ok(m) if m.is_file() => Some(Stat::of(&m)),
            Ok(_) => {
                self.warn(rel, "is no longer a regular file; not in this snapshot".into());
                None
            }
            Err(e) => {
                self.warn(rel, format!("cannot be read ({e}); not in this snapshot"));
                None
            }
        }
    }

    /// Reads one pending file into its outcome: `Done` with its status after reading, or
    /// `Dropped` (it could not be read: a warning says why). `Err` is a repository failure that
    /// must abort the snapshot.
    fn read_into(
        &self,
        root: &OwnedFd,
        job: &mut PendingFile<'_>,
        scan_start: i64,
        racy_ns: i64,
        bundle: &mut BundleBuilder,
    ) -> Result<()> {
        let rel = job.rel();
        match self.read_file(root, &rel, &job.file.stat, scan_start, racy_ns, bundle)? {
            Some((content, after)) => {
                job.file.outcome = Outcome::Done(Box::new(content));
                job.file.stat = after;
            }
            None => job.file.outcome = Outcome::Dropped,
        }
        Ok(())
    }

    /// Reads the file at `rel`, which the walk saw as `before`: its content and its status after
    /// reading. `Ok(None)` means it could not be read and a warning was recorded.
    fn read_file(
        &self,
        root: &OwnedFd,
        rel: &[u8],
        before: &Stat,
        scan_start: i64,
        racy_ns: i64,
        bundle: &mut BundleBuilder,
    ) -> Result<Option<(Content, Stat)>> {
        let Some(file) = self.open_file(root, rel) else { return Ok(None) };
        // The walk's lstat is the "before"; one fstat after reading tells whether the file
        // changed in between (or was replaced: the inode differs).
        let before = *before;
        // Read exactly the size the walk saw: a file that keeps growing (a log being written)
        // must not keep the snapshot chasing its end; the growth is caught below.
        let limited = Read::take(&file, before.size);
        let read = if before.size <= self.chunking.threshold {
            self.read_whole(limited, before.size, bundle)
        } else {
            self.read_chunked(limited, bundle)
        };
        let mut content = match read {
            Ok(Some(c)) => c,
            Ok(None) => {
                self.warn(rel, "cannot be read; not in this snapshot".into());
                return Ok(None);
            }
            Err(e) if e.kind() == ErrorKind::Io && e.message().starts_with("cannot read file") => {
                // The warning carries the message; the log keeps the OS error it came from.
                let source = std::error::Error::source(&e).map(|s| s.to_string());
                tracing::debug!(path = %String::from_utf8_lossy(rel), error = %e, source = ?source, "a file left out of a snapshot");
                self.warn(rel, format!("{e}; not in this snapshot"));
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let Some(after) = self.stat_after(&file, rel) else { return Ok(None) };
        let changed = after.size != before.size
            || after.mtime_ns != before.mtime_ns
            || after.ctime_ns != before.ctime_ns
            || after.inode != before.inode
            || content.size != before.size;
        if changed {
            self.warn(rel, "changed while being read; this snapshot holds the bytes as read".into());
        }
        let newest = before.mtime_ns.max(before.ctime_ns);
        content.cacheable = !changed && newest < scan_start.saturating_sub(racy_ns);
        Ok(Some((content, after)))
    }

    /// Reads a file of `size` bytes, at most the chunking threshold, whole: into packs, straight
    /// into the worker's bundle (read once, never copied); into loose objects, into a buffer.
    fn read_whole(&self, file: impl Read, size: u64, bundle: &mut BundleBuilder) -> Result<Option<Content>> {
        let packs = match &self.sink {
            Sink::Packs { packs, .. } if size <= bundle::MEMBER_MAX as u64 => packs,
            _ => return self.read_buffered(file, size, bundle),
        };
        add_sealed(packs, bundle.room_for(size as usize, self.zstd_level)?)?;
        let next = bundle.read_next(file).map_err(read_failed)?;
        let raw = next.bytes();
        let id = ObjectId::of(raw);
        let content = Content::read(id, sha2::Sha256::digest(raw).into(), raw.len() as u64);
        if self.claim(&id)? {
            if blob::looks_compressible(raw, self.zstd_level)? {
                next.keep(id);
            } else {
                Self::store_alone(packs, id, raw, self.zstd_level, true)?;
            }
        }
        Ok(Some(content))
    }

    /// Reads a file whole into the worker's read buffer, then stores it.
    fn read_buffered(&self, mut file: impl Read, size: u64, bundle: &mut BundleBuilder) -> Result<Option<Content>> {
        READ_BUF.with(|cell| {
            let mut raw = cell.borrow_mut();
            raw.clear();
            raw.reserve(size as usize + 1);
            file.read_to_end(&mut raw).map_err(read_failed)?;
            self.hash_and_store(&raw, bundle)
        })
    }

    fn hash_and_store(&self, raw: &[u8], bundle: &mut BundleBuilder) -> Result<Option<Content>> {
        let id = ObjectId::of(raw);
        let sha256: Sha256 = sha2::Sha256::digest(raw).into();
        self.store(id, raw, bundle)?;
        Ok(Some(Content::read(id, sha256, raw.len() as u64)))
    }

    fn read_chunked(&self, file: impl Read, bundle: &mut BundleBuilder) -> Result<Option<Content>> {
        let mut whole = blake3::Hasher::new();
        let mut sha = sha2::Sha256::new();
        let mut chunks = Vec::new();
        let mut size = 0u64;
        let result = WINDOW.with(|cell| {
            // Borrowed already only if this thread re-entered (it does not): a window of its own.
            let (mut kept, mut own) = (cell.try_borrow_mut().ok(), Vec::new());
            let window = kept.as_deref_mut().unwrap_or(&mut own);
            self.chunking.for_each_chunk_in(window, file, |offset, data| {
                whole.update(data);
                sha.update(data);
                size += data.len() as u64;
                let id = ObjectId::of(data);
                self.store(id, data, bundle)?;
                chunks.push((offset, id));
                Ok(())
            })
        });
        match result {
            Ok(()) => {}
            // The file's read failed, not the store: labelled as `read_failed` labels a read
            // error, so `read_file` leaves the file out with a warning (and logs the source).
            Err(e) if e.kind() == ErrorKind::Io && e.message().starts_with("cannot read while chunking") => {
                return Err(e.context("cannot read file"));
            }
            Err(e) => return Err(e),
        }
        Ok(Some(Content {
            id: ObjectId(*whole.finalize().as_bytes()),
            sha256: sha.finalize().into(),
            size,
            chunks: Some(chunks),
            cacheable: false,
            from_cache: false,
        }))
    }
}

/// Appends the bundle a builder sealed to the pack, if it sealed one (adding a member, making
/// room for one, or at the end of a run).
fn add_sealed(packs: &PackWriter, sealed: Option<SealedBundle<'_>>) -> Result<()> {
    match sealed {
        Some(sealed) => packs.add_bundle(sealed.members, sealed.encoded),
        None => Ok(()),
    }
}

/// A file that could not be read: `read_file` turns this error into a warning (the file is
/// left out) by its message's start.
fn read_failed(e: std::io::Error) -> Error {
    Error::with_source(ErrorKind::Io, format!("cannot read file: {e}"), e)
}

/// Inserts the trees this snapshot built that the manifest lacks (or holds condemned), in id
/// order (dense B-tree pages, as for objects). Only changed directories and their ancestors
/// are built (the others kept their ids through the directory cache), so each is looked up:
/// no tree is assumed present because an ancestor is, which damage could make untrue.
fn insert_trees(conn: &Connection, trees: &[(ObjectId, manifest::trees::StoredTree)]) -> Result<()> {
    for (id, tree) in trees {
        if !manifest::trees::has_live(conn, id)? {
            manifest::trees::insert_stored(conn, id, tree)?;
        }
    }
    Ok(())
}

/// The rows of the trees a snapshot built, compressed in parallel and in id order, before the
/// transaction that inserts them (compressing 2,600 trees inside it held it 70 ms).
fn stored_trees(trees: &Built) -> Result<Vec<(ObjectId, manifest::trees::StoredTree)>> {
    let mut ids: Vec<&ObjectId> = trees.keys().collect();
    ids.sort_unstable();
    ids.into_par_iter()
        .map(|id| {
            let encoded = trees.get(id).ok_or_else(|| Error::internal(format!("tree {id} was not built")))?;
            Ok((*id, manifest::trees::stored(id, encoded)?))
        })
        .collect()
}

/// Adds to `counts` the files added, changed and removed between two trees; equal subtrees
/// are skipped whole, so a small change costs the depth of the tree, not its size.
fn diff_counts(conn: &Connection, old: &ObjectId, new: &ObjectId, built: &Built, counts: &mut Counts) -> Result<()> {
    let whole = Scope::whole();
    let select = PathSelect { paths: &[], scope: &whole };
    let is_file = |e: &Option<Entry>| e.as_ref().is_some_and(|e| e.kind == EntryKind::File);
    diff_trees(&Trees { conn, built }, Some(*old), Some(*new), &select, |_, x, y| {
        match (is_file(&x), is_file(&y)) {
            (true, true) => counts.changed += 1,
            (true, false) => counts.removed += 1,
            (false, true) => counts.added += 1,
            (false, false) => {}
        }
        Ok(())
    })
}

/// A served workspace to snapshot: its server's feeds, its directory and name, the exclusions
/// in force, its parent snapshot, and when the snapshot began.
#[derive(Clone, Copy)]
struct Watched<'a> {
    feeds: &'a crate::ops::live_read::LiveFeeds,
    dir: &'a Path,
    name: &'a str,
    excludes: &'a Excludes,
    parent: &'a SnapshotInfo,
    scan_start: i64,
}

/// What a snapshot read whole is of (`batched.rs`; defined here, as `Watched` is, so that the
/// module leans on this one and not the other way round).
struct Cold<'a> {
    dir: &'a Path,
    name: &'a str,
    excludes: &'a Excludes,
    parent: Option<&'a SnapshotInfo>,
    scan_start: i64,
}

/// What a snapshot found, for [`Repo::commit`] to record.
struct Taken<'a> {
    dir: &'a Path,
    name: &'a str,
    parent: Option<&'a SnapshotInfo>,
    root: ObjectId,
    counts: Counts,
    warnings: Vec<Warning>,
    /// The packs of the batches before, of a snapshot taken in batches: recorded and indexed
    /// by the commit.
    staged: Option<&'a staged::Staged>,
}

fn snapshot_id(workspace: &str, root: &ObjectId, created_ns: i64, parent: Option<&SnapshotId>) -> SnapshotId {
    let mut h = blake3::Hasher::new();
    h.update(b"trove-snapshot-v1");
    h.update(workspace.as_bytes());
    h.update(&[0]);
    h.update(root.as_bytes());
    h.update(&created_ns.to_le_bytes());
    h.update(parent.map_or("", |p| p.as_str()).as_bytes());
    SnapshotId::from_hash(&h.finalize())
}

/// What a read of a snapshot's pending files is of: its tree (the root's descriptor), when its
/// scan started, the parent whose versions new ones may be stored against, the snapshot's
/// options, and for a snapshot in batches what the batches before staged (not stored again).
struct ReadOf<'a> {
    root_fd: &'a OwnedFd,
    scan_start: i64,
    parent: Option<&'a SnapshotInfo>,
    opts: &'a SnapshotOptions<'a>,
    staged: Option<&'a staged::Staged>,
}

impl<'a> ReadOf<'a> {
    /// A read of one walk, with nothing staged.
    fn new(
        root_fd: &'a OwnedFd,
        scan_start: i64,
        parent: Option<&'a SnapshotInfo>,
        opts: &'a SnapshotOptions<'a>,
    ) -> ReadOf<'a> {
        ReadOf { root_fd, scan_start, parent, opts, staged: None }
    }
}

impl Repo {
    /// The exclusion list a snapshot of `workspace` would use with these per-call overrides.
    pub fn effective_excludes(&self, workspace: &str, opts: &SnapshotOptions<'_>) -> Result<Excludes> {
        let row = workspaces::get(self.manifest.conn(), workspace)?;
        let mut replace = row.as_ref().and_then(|r| r.excludes.clone());
        let mut extra = row.map(|r| r.extra_excludes).unwrap_or_default();
        if let Some(r) = &opts.replace_excludes {
            replace = Some(r.clone());
            extra.clear();
        }
        extra.extend(opts.extra_excludes.iter().cloned());
        Excludes::effective(replace.as_deref(), &extra)
    }

    /// Snapshots the directory `dir`.
    pub fn snapshot(&self, dir: &Path, opts: &SnapshotOptions<'_>) -> Result<SnapshotInfo> {
        self.refuse_foreign("take a snapshot")?;
        let scan_start = now_ns();
        // From before the first lookup to the commit: garbage collection keeps what this
        // snapshot may rely on (a directory record, a copy found in the store).
        let _lease = self.lease("snapshot")?;
        let name = workspace_name(dir, opts)?;
        let excludes = self.effective_excludes(&name, opts)?;
        let temps = self.upload_temps(dir)?;
        let conn = self.manifest.conn();
        let parent = snapshots::latest(conn, Some(&name))?;
        let generation = dir_cache::generation(conn)?;
        // A served workspace is read from its change feed: what changed since the last read.
        // Not with uploads in flight (their temporaries are left out of snapshots only).
        if let (Some(feeds), Some(p), true) = (&self.live_feeds, &parent, opts.use_stat_cache && temps.is_empty()) {
            let w = Watched { feeds, dir, name: &name, excludes: &excludes, parent: p, scan_start };
            let watched = self.snapshot_watched(&w, opts)?;
            feeds.note_snapshot(watched.is_some());
            if let Some(info) = watched {
                return Ok(info);
            }
        }
        // Uploads in flight (or left by a crash) are trove's, not the workspace's.
        let excludes = excludes.with_root_names(temps);
        // A big tree read whole (no directory records to go by) is taken in batches.
        let cold = Cold { dir, name: &name, excludes: &excludes, parent: parent.as_ref(), scan_start };
        if let Some(info) = self.snapshot_in_batches(&cold, opts)? {
            if let Some(feeds) = &self.live_feeds {
                feeds.note_walk(dir, &name, generation);
            }
            self.checkpoint_if_due();
            return Ok(info);
        }

        opts.progress.start("scanning", 0);
        let root_fd = walk::open_root(dir)?;
        let walk_opts = walk::WalkOptions::new(&excludes, self.deadline());
        let node_cache = if opts.use_stat_cache { self.node_cache() } else { None };
        let kept = node_cache.map(|c| (c, name.as_str()));
        let (mut walked, cache) = walk_and_load(conn, kept, &root_fd, dir, &walk_opts)?;
        let mut outcomes = Outcomes::new();
        let mut classified = classify(conn, &walked, cache, opts.use_stat_cache, &mut outcomes)?;

        // A workspace's first snapshot always packs: loose objects are for the edits after it.
        let (warnings, stored) =
            self.read_pending(&ReadOf::new(&root_fd, scan_start, parent.as_ref(), opts), &mut walked, &mut outcomes)?;
        crate::base::failpoint::failpoint("snapshot:packed");

        let mut counts = Counts { skipped: walked.report.skipped, ..Counts::default() };
        let mut trees_built = Built::default();
        let built = build(&walked, &classified, &outcomes, &mut trees_built, &mut counts)?;
        let root = built.root;
        let new_records = records(&walked, &classified, &outcomes, &built);
        let stale = std::mem::take(&mut classified.stale);
        let walk_state = (walked, classified, built);
        if trees_built.len() < FREE_BESIDE {
            // Little changed: the tree's names and records are freed on a thread beside the
            // commit (a millisecond of a no-change snapshot of 18k files). Should the thread
            // not start, the closure is dropped here, and they with it.
            let _ = std::thread::Builder::new().name("trove-free".into()).spawn(move || drop(walk_state));
        } else {
            // Much was built: freed before the trees are encoded, to keep the peak down.
            drop(walk_state);
        }
        match &parent {
            Some(p) => diff_counts(conn, &p.root, &root, &trees_built, &mut counts)?,
            None => counts.added = counts.files,
        }

        let trees_stored = stored_trees(&trees_built)?;
        let taken = Taken { dir, name: &name, parent: parent.as_ref(), root, counts, warnings, staged: None };
        let info = self.commit(taken, &stored, &outcomes, &trees_stored, opts)?;
        // After the commit: a record may name only trees the manifest holds. A crash before this
        // leaves the records of the snapshot before, which still describe their files truly.
        if let Some(cache) = self.node_cache() {
            if let Err(e) = cache.write(|c| record_dirs(c, &name, &new_records, &stale)) {
                tracing::warn!(workspace = %name, error = %e, "the directory cache was not updated: the next snapshot reads the changed directories' files again");
            }
        }
        if let Some(feeds) = &self.live_feeds {
            feeds.note_walk(dir, &name, generation);
        }
        self.checkpoint_if_due();
        Ok(info)
    }

    /// Step 4: one transaction makes it all visible: the packs and loose objects `stored`, the
    /// chunk lists of `outcomes`' files, the trees, the snapshot row and its audit record.
    fn commit(
        &self,
        taken: Taken<'_>,
        stored: &Stored,
        outcomes: &Outcomes,
        trees_stored: &[(ObjectId, manifest::trees::StoredTree)],
        opts: &SnapshotOptions<'_>,
    ) -> Result<SnapshotInfo> {
        let Taken { dir, name, parent, root, counts, warnings, staged } = taken;
        // The last moment to give up: after this the snapshot commits.
        self.check_deadline("recording a snapshot")?;
        let created_ns = now_ns();
        let mut info = SnapshotInfo {
            id: snapshot_id(name, &root, created_ns, parent.map(|p| &p.id)),
            workspace: name.to_string(),
            session: opts.session.clone(),
            parent: parent.map(|p| p.id.clone()),
            created_ns,
            reason: opts.reason.clone(),
            root,
            source_dir: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()).as_os_str().as_bytes().to_vec(),
            counts,
            warnings,
        };
        // A write that loses a bucket's race runs again: its counts start afresh each time.
        let counted = info.counts.clone();
        self.manifest.write(|tx| {
            info.counts = counted.clone();
            let ws = workspaces::ensure(tx, name, created_ns)?;
            workspaces::set_root(tx, ws.id, &info.source_dir)?;
            let loose = self.store_rows(tx, stored, outcomes, trees_stored, created_ns)?;
            if let Some(staged) = staged {
                staged.record(tx, created_ns, |key| self.pack_still_there(key))?;
                // A snapshot in batches counts its changes here, where every tree it built is
                // readable (they wait for this transaction).
                if let Some(p) = parent {
                    diff_counts(tx, &p.root, &info.root, &Built::default(), &mut info.counts)?;
                }
            }
            snapshots::insert(tx, ws.id, &info)?;
            let packs = staged.map_or(0, |s| s.pack_count()) + stored.packs.len();
            manifest::audit::append(tx, &snapshot_record(&info, opts, packs, loose))?;
            Ok(())
        })?;
        Ok(info)
    }

    /// What a snapshot stored, recorded in the caller's transaction: the packs and loose
    /// objects `stored`, the chunk lists of `outcomes`' files, the trees. Returns how many
    /// loose objects were new.
    fn store_rows(
        &self,
        tx: &Connection,
        stored: &Stored,
        outcomes: &Outcomes,
        trees_stored: &[(ObjectId, manifest::trees::StoredTree)],
        now: i64,
    ) -> Result<usize> {
        self.record_packs(tx, &stored.packs, now)?;
        let mut loose = 0;
        for (i, (id, raw_len, encoded)) in stored.loose.iter().enumerate() {
            if manifest::loose::is_stored(tx, id)? {
                continue;
            }
            let as_delta = match stored.deltas.get(i) {
                Some(Some((delta, base_depth))) => manifest::loose::insert_delta(tx, id, *raw_len, delta, *base_depth)?,
                _ => false,
            };
            if !as_delta {
                manifest::loose::insert_encoded(tx, id, *raw_len, encoded)?;
            }
            loose += 1;
        }
        record_chunk_lists(tx, outcomes)?;
        insert_trees(tx, trees_stored)?;
        Ok(loose)
    }

    /// Step 2: reads what the directory cache could not vouch for, in parallel, into packs; step 3:
    /// every pack durable (`PackWriter::run` returns only once all are sealed) before the
    /// manifest may point at them. A small change after an earlier snapshot (with a `parent`:
    /// `LOOSE_FILES`, `LOOSE_READS`) is read here instead, into loose blobs (deltas where they
    /// pay) for the snapshot's transaction. Returns the warnings (the walk's, then
    /// the reads') and what was stored. `staged`: what the batches before stored, of a snapshot
    /// taken in batches, which is not stored again.
    fn read_pending(
        &self,
        of: &ReadOf<'_>,
        walked: &mut walk::Walked,
        outcomes: &mut Outcomes,
    ) -> Result<(Vec<Warning>, Stored)> {
        let &ReadOf { root_fd, scan_start, parent, opts, staged } = of;
        // The walk's warnings come first, then the reads'.
        let walk_warnings = std::mem::take(&mut walked.report.warnings);
        let mut jobs = pending(walked, outcomes);
        if jobs.is_empty() {
            // Nothing to read (a snapshot where nothing changed): no pack writer, no threads.
            return Ok((walk_warnings, Stored::default()));
        }
        // Path order, so a run of jobs is a run of siblings, whose small files share a bundle.
        jobs.sort_unstable_by(|a, b| a.place().cmp(&b.place()));
        opts.progress.start("reading", jobs.iter().map(|j| j.file.stat.size).sum());
        let racy = opts.racy_window_ns;
        // A few small new files; and beside them, new versions of paths the parent holds (up to
        // `delta_limit` bytes each), which are stored as deltas against those versions (a few
        // hundred bytes, where a pack would hold each whole again), and files read again only
        // because the racy window kept their records from vouching for them (an agent's edits
        // a moment before: most likely unchanged). At most `LOOSE_READS` files to read in all.
        let small = match parent {
            Some(parent) if jobs.len() <= LOOSE_READS => {
                let (mut new, mut new_bytes, mut other_bytes) = (0usize, 0u64, 0u64);
                let mut fits = true;
                for j in &jobs {
                    let size = j.file.stat.size;
                    if (j.recheck() && size <= LOOSE_MAX)
                        || (size <= self.delta_limit() && self.has_version(parent, &j.rel()))
                    {
                        other_bytes += size;
                    } else if size <= LOOSE_MAX {
                        new += 1;
                        new_bytes += size;
                    } else {
                        fits = false;
                        break;
                    }
                }
                fits && new <= LOOSE_FILES && new_bytes <= LOOSE_TOTAL && other_bytes <= LOOSE_READ_BYTES
            }
            _ => false,
        };
        if small {
            let writer = Writer {
                zstd_level: self.config.zstd_level,
                chunking: self.config.chunking,
                seen: Mutex::new(RandomKeySet::default()),
                sink: Sink::Loose(Mutex::new(Vec::new())),
                warnings: Mutex::new(walk_warnings),
            };
            let mut bundle = BundleBuilder::default();
            for job in &mut jobs {
                self.check_deadline("reading files for a snapshot")?;
                let size = job.file.stat.size;
                writer.read_into(root_fd, job, scan_start, racy, &mut bundle)?;
                opts.progress.advance(size);
            }
            opts.progress.finish();
            let loose = match writer.sink {
                Sink::Loose(kept) => kept.into_inner().map_err(|_| Error::internal("loose list poisoned"))?,
                Sink::Packs { .. } => Vec::new(),
            };
            let warnings = writer.warnings.into_inner().map_err(|_| Error::internal("warnings poisoned"))?;
            let deltas = match parent {
                Some(parent) => self.versions_against(parent, &jobs, &loose),
                None => Vec::new(),
            };
            return Ok((warnings, self.pack_big_wholes(loose, deltas)?));
        }
        let reader = self.manifest.pinned_reader()?;
        let loose_too = manifest::loose::any(&reader)?;
        let read =
            PackWriter::run_in(self.backend.as_ref(), &self.packs_dir(), self.config.pack_target as usize, |packs| {
                let writer = Writer {
                    zstd_level: self.config.zstd_level,
                    chunking: self.config.chunking,
                    seen: Mutex::new(RandomKeySet::default()),
                    sink: Sink::Packs { packs, reader: Mutex::new(reader), loose_too, staged },
                    warnings: Mutex::new(walk_warnings),
                };
                let deadline = self.deadline();
                jobs.par_chunks_mut(FILES_PER_RUN).try_for_each(|run| -> Result<()> {
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return Err(Error::timeout("reading files for a snapshot", false));
                    }
                    let mut bundle = BUNDLE
                        .with(|cell| cell.try_borrow_mut().map(|mut b| std::mem::take(&mut *b)).unwrap_or_default());
                    for job in run {
                        let size = job.file.stat.size;
                        writer.read_into(root_fd, job, scan_start, racy, &mut bundle)?;
                        opts.progress.advance(size);
                    }
                    writer.seal_bundle(&mut bundle)?;
                    BUNDLE.with(|cell| {
                        if let Ok(mut b) = cell.try_borrow_mut() {
                            *b = bundle;
                        }
                    });
                    Ok(())
                })?;
                writer.warnings.into_inner().map_err(|_| Error::internal("warnings poisoned"))
            })?;
        release_buffers();
        opts.progress.finish();
        let (warnings, packs) = read;
        Ok((warnings, Stored { packs, loose: Vec::new(), deltas: Vec::new() }))
    }

    /// The loose blobs over `LOOSE_MAX` that are not stored as deltas (a rewrite, or a delta not
    /// worth keeping) go to a pack after all, as they would have without an earlier version: a
    /// rebuilt binary must not put megabytes into the manifest at each snapshot.
    fn pack_big_wholes(&self, loose: Vec<LooseBlob>, deltas: Vec<Option<(Vec<u8>, u8)>>) -> Result<Stored> {
        let mut kept = Stored::default();
        let mut big = Vec::new();
        // The whole blobs kept loose: within the limits of a small change's new files, however
        // many versions came along (a rewrite of sixty files is not sixty deltas).
        let (mut wholes, mut whole_bytes) = (0usize, 0u64);
        let mut deltas = deltas.into_iter();
        for blob in loose {
            let delta = deltas.next().flatten();
            if delta.is_none() {
                // Unchanged content (a file touched, or put back as it was) is stored already.
                if manifest::loose::is_stored(self.manifest.conn(), &blob.0)? {
                    continue;
                }
                wholes += 1;
                whole_bytes += blob.1;
                if blob.1 > LOOSE_MAX || wholes > LOOSE_FILES || whole_bytes > LOOSE_TOTAL {
                    big.push(blob);
                    continue;
                }
            }
            kept.loose.push(blob);
            kept.deltas.push(delta);
        }
        if !big.is_empty() {
            let ((), packs) =
                PackWriter::run_in(self.backend.as_ref(), &self.packs_dir(), self.config.pack_target as usize, |w| {
                    big.iter().try_for_each(|(id, raw_len, encoded)| w.add(*id, *raw_len, encoded))
                })?;
            kept.packs = packs;
        }
        Ok(kept)
    }

    /// The largest version stored against another: whole objects only (a chunked file's
    /// chunks are stored once each already), of at most `MAX_DELTA_RAW` bytes.
    fn delta_limit(&self) -> u64 {
        blob::MAX_DELTA_RAW.min(self.config.chunking.threshold)
    }

    /// Whether `parent` holds a file at `rel` of at most `delta_limit` bytes: an earlier
    /// version a new one may be stored against. A lookup that fails is logged and says no.
    fn has_version(&self, parent: &SnapshotInfo, rel: &[u8]) -> bool {
        match self.lookup(parent, rel) {
            Ok(e) => e.kind == EntryKind::File && e.size <= self.delta_limit() && e.content.is_some(),
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(path = %crate::base::path::display(rel), error = %e, "the parent snapshot's version could not be looked up; the file goes to a pack");
                false
            }
        }
    }

    /// For each loose blob a job read, the blob as a delta against the version of the same
    /// path in `parent` (and that version's depth), when the parent holds an earlier version
    /// of at most `MAX_DELTA_RAW` bytes and the delta is worth keeping. An economy, never a
    /// condition of the snapshot: a version that cannot be read is logged and the blob stays
    /// whole.
    fn versions_against(
        &self,
        parent: &SnapshotInfo,
        jobs: &[PendingFile<'_>],
        loose: &[LooseBlob],
    ) -> Vec<Option<(Vec<u8>, u8)>> {
        let mut paths: crate::object::RandomKeyMap<ObjectId, Vec<u8>> = Default::default();
        for job in jobs {
            if let Outcome::Done(c) = &job.file.outcome {
                if c.chunks.is_none() {
                    paths.insert(c.id, job.rel());
                }
            }
        }
        let level = self.config.zstd_level;
        let against = |id: &ObjectId, rel: &[u8], encoded: &[u8]| -> Result<Option<(Vec<u8>, u8)>> {
            let entry = match self.lookup(parent, rel) {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let base = match (entry.kind, entry.content) {
                (EntryKind::File, Some(base)) if base != *id && entry.size <= self.delta_limit() => base,
                _ => return Ok(None),
            };
            // Content stored already (a file put back as it was) needs no base read; past the
            // deadline deltas are given up, not the snapshot (they are an economy).
            let late = self.deadline().is_some_and(|d| std::time::Instant::now() >= d);
            if late || manifest::loose::is_stored(self.manifest.conn(), id)? {
                return Ok(None);
            }
            let base_raw = self.read_object(&base)?;
            let raw = blob::decode(id, encoded)?;
            self.delta_against(id, &raw, &base, &base_raw, level)
        };
        loose
            .iter()
            .map(|(id, _, encoded)| {
                let rel = paths.get(id)?;
                against(id, rel, encoded)
                    .map_err(|e| {
                        tracing::warn!(path = %crate::base::path::display(rel), error = %e, "stored whole: the previous version could not be read");
                    })
                    .ok()
                    .flatten()
            })
            .collect()
    }
}

/// The workspace a snapshot of `dir` belongs to: the one named, else the directory's name.
fn workspace_name(dir: &Path, opts: &SnapshotOptions<'_>) -> Result<String> {
    let name = match &opts.workspace {
        Some(n) => n.clone(),
        None => {
            let abs = std::path::absolute(dir).map_err(|e| Error::io("resolve", dir, e))?;
            abs.file_name().and_then(|n| n.to_str()).map(str::to_string).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "cannot name a workspace after {}: pass --workspace NAME",
                    dir.display()
                ))
            })?
        }
    };
    check_workspace_name(&name)?;
    Ok(name)
}

/// Records the chunk lists of new big files, in the snapshot's transaction.
fn record_chunk_lists(tx: &Connection, outcomes: &Outcomes) -> Result<()> {
    for (id, chunks) in new_chunk_lists(outcomes) {
        objects::insert_chunk_list(tx, id, chunks)?;
    }
    Ok(())
}

/// The chunk lists of the files read (not vouched for by a record): (content id, chunks).
fn new_chunk_lists(outcomes: &Outcomes) -> impl Iterator<Item = (&ObjectId, &[(u64, ObjectId)])> {
    outcomes.iter().flatten().filter_map(|f| match &f.outcome {
        Outcome::Done(c) => match &**c {
            Content { chunks: Some(chunks), id, from_cache: false, .. } => Some((id, chunks.as_slice())),
            _ => None,
        },
        _ => None,
    })
}

/// Writes workspace `ws`'s directory records that changed into the node-local cache, and
/// deletes those of directories gone (none for a directory the walk did not see).
fn record_dirs(cache: &Connection, ws: &str, new_records: &[(DirKey, Vec<u8>)], stale: &[DirKey]) -> Result<()> {
    // Keys in order, so the cache's pages fill densely (see `insert_packs`).
    let mut sorted: Vec<&(DirKey, Vec<u8>)> = new_records.iter().collect();
    sorted.sort_unstable_by_key(|(k, _)| *k);
    for (key, record) in sorted {
        dir_cache::upsert(cache, ws, key, record)?;
    }
    for key in stale {
        dir_cache::delete(cache, ws, key)?;
    }
    Ok(())
}

/// The audit record of snapshot `info`.
/// `packs` written, `loose` objects stored in the manifest.
fn snapshot_record(info: &SnapshotInfo, opts: &SnapshotOptions<'_>, packs: usize, loose: usize) -> AuditRecord {
    let mut record = AuditRecord::ok(info.created_ns, &opts.actor, "snapshot");
    record.workspace = Some(info.workspace.clone());
    record.session = opts.session.clone();
    record.details = serde_json::json!({
        "snapshot": info.id,
        "reason": info.reason,
        "files": info.counts.files,
        "bytes": info.counts.bytes,
        "added": info.counts.added,
        "changed": info.counts.changed,
        "removed": info.counts.removed,
        "warnings": info.warnings.len(),
        "packs": packs,
        "loose": loose,
    });
    record
}
