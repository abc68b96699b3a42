//! Restoring a snapshot (or some of its paths) into a directory, modes and mtimes included.
//!
//! The plan (which entries, where each object lies) is made on the calling thread, since the
//! manifest connection is single-threaded; file contents are then fetched, verified and
//! written in parallel. Directory modes and mtimes are set last, deepest first, because
//! creating entries inside a directory changes its mtime.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use filetime::FileTime;
use rayon::prelude::*;
use serde::Serialize;

use crate::audit::AuditRecord;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::objects::{self, Location};
use crate::manifest::snapshots::SnapshotInfo;
use crate::object::bundle::BundleCache;
use crate::object::ObjectId;
use crate::path;
use crate::progress::{NoProgress, Progress};
use crate::repo::{now_ns, Repo};
use crate::tree::{Entry, EntryKind};

pub struct RestoreOptions<'a> {
    /// Snapshot paths to restore (files or directories); empty means everything.
    pub paths: Vec<Vec<u8>>,
    /// Restore into a non-empty directory, replacing what is at the snapshot's paths.
    pub overwrite: bool,
    pub actor: String,
    pub progress: &'a dyn Progress,
}

impl Default for RestoreOptions<'_> {
    fn default() -> Self {
        RestoreOptions { paths: Vec::new(), overwrite: false, actor: "library".into(), progress: &NoProgress }
    }
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct RestoreReport {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

/// Everything a restore creates, in listing (pre-)order.
struct Plan {
    dirs: Vec<(PathBuf, Entry)>,
    files: Vec<FilePlan>,
    links: Vec<(PathBuf, Entry)>,
}

struct FilePlan {
    path: PathBuf,
    entry: Entry,
    parts: Vec<(ObjectId, Location)>,
}

fn mtime(ns: i64) -> FileTime {
    FileTime::from_unix_time(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000) as u32)
}

/// Names from the manifest become path components on disk: refuse anything that could step
/// outside the target even if the manifest was tampered with.
fn safe_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(Error::corrupt(format!("snapshot holds an unusable entry name '{}'", path::display(name))));
    }
    Ok(())
}

/// Removes whatever non-directory is at `p` (overwrite mode), so a symlink there is replaced,
/// never written through. Directories get the same treatment in `ensure_dir`, and every
/// ancestor of a restored path is planned as a directory, so no write follows a symlink that
/// sits anywhere under the target.
fn clear_non_dir(p: &Path) -> Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Err(Error::new(
            ErrorKind::Conflict,
            format!("{} is a directory where the snapshot has a file: move it away first", p.display()),
        )),
        Ok(_) => fs::remove_file(p).map_err(|e| Error::io("replace", p, e)),
        Err(_) => Ok(()),
    }
}

fn ensure_dir(p: &Path) -> Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => {
            fs::remove_file(p).map_err(|e| Error::io("replace", p, e))?;
            fs::create_dir(p).map_err(|e| Error::io("create directory", p, e))
        }
        // The parent was made (or checked) just before: plans list ancestors first.
        Err(_) => fs::create_dir(p).map_err(|e| Error::io("create directory", p, e)),
    }
}

impl Repo {
    pub fn restore(&self, snap: &SnapshotInfo, target: &Path, opts: &RestoreOptions<'_>) -> Result<RestoreReport> {
        match fs::read_dir(target) {
            Ok(mut it) => {
                if it.next().is_some() && !opts.overwrite {
                    return Err(Error::new(
                        ErrorKind::AlreadyExists,
                        format!(
                            "restore target {} is not empty: choose an empty directory or pass --overwrite",
                            target.display()
                        ),
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("open restore target", target, e)),
        }

        // Plan: every entry to create, resolved before anything is written, so a bad path
        // or a missing object fails before the target is touched.
        let Plan { dirs, files, links } = self.manifest.read(|| self.plan(snap, target, opts))?;

        fs::create_dir_all(target).map_err(|e| Error::io("create restore target", target, e))?;
        for (p, _) in &dirs {
            ensure_dir(p)?;
        }
        let total: u64 = files.iter().map(|f| f.entry.size).sum();
        opts.progress.start("restoring", total);
        let (backend, bundles) = (self.backend.as_ref(), &self.bundles);
        // Contiguous runs per worker keep neighbouring files, which share bundles, together.
        files.par_iter().with_min_len(16).try_for_each(|f| -> Result<()> {
            write_file(backend, bundles, f, opts.overwrite)?;
            opts.progress.advance(f.entry.size);
            Ok(())
        })?;
        for (p, e) in &links {
            if opts.overwrite {
                clear_non_dir(p)?;
            }
            let t = OsStr::from_bytes(e.target.as_deref().unwrap_or(b""));
            std::os::unix::fs::symlink(t, p).map_err(|err| Error::io("create symlink", p, err))?;
            filetime::set_symlink_file_times(p, mtime(e.mtime_ns), mtime(e.mtime_ns))
                .map_err(|err| Error::io("set times of", p, err))?;
        }
        for (p, e) in dirs.iter().rev() {
            fs::set_permissions(p, fs::Permissions::from_mode(e.mode))
                .map_err(|err| Error::io("set mode of", p, err))?;
            filetime::set_file_mtime(p, mtime(e.mtime_ns)).map_err(|err| Error::io("set mtime of", p, err))?;
        }
        opts.progress.finish();

        let report = RestoreReport {
            files: files.len() as u64,
            dirs: dirs.len() as u64,
            symlinks: links.len() as u64,
            bytes: total,
        };
        let mut record = AuditRecord::ok(now_ns(), &opts.actor, "restore");
        record.workspace = Some(snap.workspace.clone());
        record.dest_path = Some(target.as_os_str().as_bytes().to_vec());
        record.details = serde_json::json!({
            "snapshot": snap.id,
            "paths": opts.paths.iter().map(|p| path::display(p).into_owned()).collect::<Vec<_>>(),
            "files": report.files,
            "bytes": report.bytes,
        });
        self.audit(record)?;
        Ok(report)
    }

    /// What a restore will create, with every object located.
    fn plan(&self, snap: &SnapshotInfo, target: &Path, opts: &RestoreOptions<'_>) -> Result<Plan> {
        let mut dirs: Vec<(PathBuf, Entry)> = Vec::new();
        let mut files: Vec<FilePlan> = Vec::new();
        let mut links: Vec<(PathBuf, Entry)> = Vec::new();
        let mut planned = std::collections::HashSet::new();
        let roots: Vec<Vec<u8>> = if opts.paths.is_empty() { vec![Vec::new()] } else { opts.paths.clone() };
        for root in &roots {
            let entry = self.lookup(snap, root)?;
            let norm = path::components(root)?.join(&b'/');
            let mut add = |rel: &[u8], e: &Entry| -> Result<()> {
                for part in rel.split(|&b| b == b'/') {
                    safe_name(part)?;
                }
                let p = target.join(OsStr::from_bytes(rel));
                if !planned.insert(p.clone()) {
                    return Ok(());
                }
                match e.kind {
                    EntryKind::Dir => dirs.push((p, e.clone())),
                    EntryKind::Symlink => links.push((p, e.clone())),
                    EntryKind::File => {
                        let id = e.content.ok_or_else(|| {
                            Error::corrupt(format!("'{}' has no content in the snapshot", path::display(rel)))
                        })?;
                        let chunks = objects::chunk_list(self.manifest.conn(), &id)?;
                        let ids: Vec<ObjectId> =
                            if chunks.is_empty() { vec![id] } else { chunks.into_iter().map(|(_, c)| c).collect() };
                        let mut parts = Vec::with_capacity(ids.len());
                        for oid in ids {
                            let loc = objects::locate(self.manifest.conn(), &oid)?.ok_or_else(|| {
                                Error::corrupt(format!("object {oid} is referenced but not stored; run `trove check`"))
                            })?;
                            parts.push((oid, loc));
                        }
                        files.push(FilePlan { path: p, entry: e.clone(), parts });
                    }
                }
                Ok(())
            };
            if norm.is_empty() {
                self.list(snap, b"", true, &mut add)?;
            } else {
                // Ancestors first, as directories of their own (see `clear_non_dir`).
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
        Ok(Plan { dirs, files, links })
    }
}

fn write_file(
    backend: &dyn crate::object::Backend,
    bundles: &BundleCache,
    f: &FilePlan,
    overwrite: bool,
) -> Result<()> {
    if overwrite {
        clear_non_dir(&f.path)?;
    }
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&f.path)
        .map_err(|e| Error::io("create", &f.path, e))?;
    if let Err(e) = write_content(backend, bundles, f, &mut file) {
        // No truncated file at a real path: what was restored is whole or absent.
        drop(file);
        let _ = fs::remove_file(&f.path);
        return Err(e);
    }
    file.set_permissions(fs::Permissions::from_mode(f.entry.mode)).map_err(|e| Error::io("set mode of", &f.path, e))?;
    filetime::set_file_handle_times(&file, None, Some(mtime(f.entry.mtime_ns)))
        .map_err(|e| Error::io("set mtime of", &f.path, e))?;
    Ok(())
}

/// Writes a file's objects in order; a chunked file's whole content is checked against its id.
fn write_content(
    backend: &dyn crate::object::Backend,
    bundles: &BundleCache,
    f: &FilePlan,
    file: &mut File,
) -> Result<()> {
    let chunked = f.parts.len() > 1 || f.parts.first().is_some_and(|p| Some(p.0) != f.entry.content);
    let mut whole = blake3::Hasher::new();
    for (id, loc) in &f.parts {
        let raw = crate::view::fetch(backend, bundles, id, loc)?;
        if chunked {
            whole.update(&raw);
        }
        file.write_all(&raw).map_err(|e| Error::io("write", &f.path, e))?;
    }
    if chunked && f.entry.content != Some(ObjectId(*whole.finalize().as_bytes())) {
        return Err(Error::corrupt(format!(
            "{} does not match its content id after reassembly; run `trove check`",
            f.path.display()
        )));
    }
    Ok(())
}
