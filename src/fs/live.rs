//! The live tree: listing a workspace's files and reading one, as the Files API serves them
//! while a session runs (`"source": "sandbox"`).
//!
//! Listings reuse the snapshot walk (exclusions, no symlink followed) and keep regular files
//! only, each with its size and mtime. Reads resolve the path with `resolve.rs`: a symlink is
//! followed only while it stays inside the workspace (an absolute target or a `..` escape is
//! not found), so `link -> /etc/passwd` reads as not found, never as `/etc/passwd`; the caller
//! checks the scope on the resolved path before the file is opened there.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::fs::resolve::{self, Found, Resolved};
use crate::fs::walk::{self, Excludes, Node};
use crate::model::scope::Scope;
use crate::object::Sha256;

/// The Files API's read limit.
pub const READ_LIMIT: u64 = 1 << 20;

/// One file of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// The workspace-relative path.
    pub path: Vec<u8>,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
}

/// Every regular file under `root` not excluded, in path order; with a scope, only what it
/// lets the session read, and nothing under directories that lead nowhere in scope.
pub fn list_files(
    root: &Path,
    excludes: &Excludes,
    scope: Option<&Scope>,
    deadline: Option<std::time::Instant>,
) -> Result<Vec<LiveFile>> {
    let fd = walk::open_root(root)?;
    let walked = walk::walk(&fd, root, &walk::WalkOptions::new(excludes, deadline))?;
    let mut out = Vec::new();
    // A directory that leads nowhere in scope has no descendant in scope either, so judging
    // each directory on its own path hides whole invisible subtrees.
    for dir in walked.dirs.iter().filter(|d| d.rel.is_empty() || scope.is_none_or(|s| s.dir_visible(&d.rel))) {
        for child in &dir.children {
            if let Node::File { name, stat } = child {
                let rel = walk::join_rel(&dir.rel, name);
                if scope.is_none_or(|s| s.can_read(&rel)) {
                    out.push(LiveFile { path: rel, size: stat.size, mtime_ns: stat.mtime_ns });
                }
            }
        }
    }
    out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A file read whole (from the live tree or a snapshot).
#[derive(Debug)]
pub struct LiveRead {
    pub path: Vec<u8>,
    pub bytes: Vec<u8>,
    pub mtime_ns: i64,
    /// Of `bytes`: the ETag of a download and the stale-file protocol's hash.
    pub sha256: Sha256,
    /// The share of the memory budget `bytes` take, given back when this is dropped.
    pub(crate) _held: Option<crate::base::budget::Permit>,
}

/// What to do when a file changes while it is read (`change_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangePolicy {
    /// Read again, up to `READ_ATTEMPTS` times, then give up with `conflict`.
    #[default]
    Retry,
    /// Answer `conflict` at the first change.
    Abort,
}

impl ChangePolicy {
    /// The policy a `change_policy` value names (`retry` or `abort`); anything else is `invalid_argument`.
    pub fn parse(s: &str) -> Result<ChangePolicy> {
        match s {
            "retry" => Ok(ChangePolicy::Retry),
            "abort" => Ok(ChangePolicy::Abort),
            _ => Err(Error::invalid_argument(format!("change_policy '{s}' is not one of: retry, abort"))),
        }
    }
}

pub const READ_ATTEMPTS: usize = 3;

/// What tells two states of an open file apart: a writer changes the size, the mtime or (even
/// with the mtime put back) the ctime.
pub type Fingerprint = (u64, i64, i64, i64, i64);

pub fn fingerprint(meta: &std::fs::Metadata) -> Fingerprint {
    (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec())
}

/// Where `rel` leads in the live tree under `fd`: symlinks are followed by [`resolve`], each
/// directory opened beneath the root with no symlink followed by the kernel.
pub fn resolve(fd: &OwnedFd, rel: &[u8]) -> Result<Resolved> {
    // The directory looked in last, kept open: most lookups go one level below it.
    let mut open: Option<(Vec<u8>, OwnedFd)> = None;
    let mut look = |dir: &[u8], name: &[u8]| -> Result<Found> {
        let reuse = open.as_ref().is_some_and(|(p, _)| p == dir);
        if !reuse {
            let fd = match walk::open_dir_beneath(fd, dir) {
                Ok(d) => d,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {
                    return Ok(Found::Missing)
                }
                Err(e) => return Err(Error::io("open directory", Path::new(&*path::display(dir)), e)),
            };
            open = Some((dir.to_vec(), fd));
        }
        let Some((_, dfd)) = open.as_ref() else { return Ok(Found::Missing) };
        let st = match rustix::fs::statat(dfd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Ok(Found::Missing),
            Err(e) => return Err(Error::io("stat", Path::new(&*path::display(name)), e.into())),
        };
        Ok(match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Found::Dir,
            FileType::RegularFile => Found::File,
            FileType::Symlink => match rustix::fs::readlinkat(dfd, name, Vec::new()) {
                Ok(t) => Found::Symlink(t.into_bytes()),
                Err(Errno::NOENT) => Found::Missing,
                Err(e) => return Err(Error::io("read link", Path::new(&*path::display(name)), e.into())),
            },
            _ => Found::Other,
        })
    };
    resolve::resolve(rel, &mut look)
}

/// Opens the file that [`resolve`] found for `rel`: `is_directory` for a directory,
/// `not_found` for anything but a regular file. It is opened at the resolved path with no
/// symlink followed, so a link swapped in since the resolution is not followed either.
pub fn open_resolved(fd: &OwnedFd, rel: &[u8], resolved: &Resolved) -> Result<(std::fs::File, std::fs::Metadata)> {
    let shown = path::display(rel).into_owned();
    let not_found = || Error::new(ErrorKind::NotFound, format!("file '{shown}' not found"));
    let is_dir = || Error::new(ErrorKind::IsDirectory, format!("'{shown}' is a directory: list it instead"));
    match resolved.kind {
        Found::Dir => return Err(is_dir()),
        Found::File => {}
        _ => return Err(not_found()),
    }
    let file = walk::open_beneath(fd, &resolved.path).map_err(|e| match e.raw_os_error() {
        // Gone, or something was swapped in since the resolution: the same answer as for a link
        // leading outside, so a response never confirms what lies there.
        Some(libc::ENOENT) | Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::ENOTDIR) => not_found(),
        _ => Error::io("open", Path::new(&shown), e),
    })?;
    let meta = file.metadata().map_err(|e| Error::io("stat", Path::new(&shown), e))?;
    if meta.is_dir() {
        return Err(is_dir());
    }
    if !meta.is_file() {
        return Err(not_found());
    }
    Ok((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scope::FileAccess;
    use crate::ops::source::{Source, WorkspaceView};

    /// A whole live read with no scope, as the Files API makes one.
    fn read_file(root: &Path, rel: &[u8], limit: u64, policy: ChangePolicy) -> Result<LiveRead> {
        let repo = crate::Repo::in_memory()?;
        let ex = Excludes::none();
        let view = WorkspaceView { name: "w", session: None, live_dir: Some(root), excludes: &ex, scope: None };
        repo.read_file_from(&view, &Source::Live, rel, limit, policy).map(|(r, _)| r)
    }
    use std::fs;
    use std::os::unix::fs::symlink;

    fn ws() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tmp");
        let w = t.path().join("ws");
        fs::create_dir_all(w.join("src/deep")).expect("mkdir");
        fs::create_dir_all(w.join("node_modules/x")).expect("mkdir");
        fs::create_dir_all(w.join("secret")).expect("mkdir");
        fs::write(w.join("src/a.rs"), "fn a() {}").expect("write");
        fs::write(w.join("src/deep/b.rs"), "fn b() {}").expect("write");
        fs::write(w.join("secret/key"), "k").expect("write");
        fs::write(w.join("node_modules/x/i.js"), "x").expect("write");
        fs::write(w.join("big.bin"), vec![0u8; (READ_LIMIT + 1) as usize]).expect("write");
        fs::write(t.path().join("outside.txt"), "OUTSIDE").expect("write");
        symlink("/etc/passwd", w.join("etc-link")).expect("symlink");
        symlink("../outside.txt", w.join("up-link")).expect("symlink");
        symlink("src/a.rs", w.join("in-link")).expect("symlink");
        symlink("hop2", w.join("hop1")).expect("symlink");
        symlink("up-link", w.join("hop2")).expect("symlink");
        t
    }

    #[test]
    fn listing_keeps_files_only_applies_exclusions_and_scope() {
        let t = ws();
        let root = t.path().join("ws");
        let ex = Excludes::effective(None, &[]).expect("excludes");
        let all: Vec<Vec<u8>> = list_files(&root, &ex, None, None).expect("list").into_iter().map(|f| f.path).collect();
        assert_eq!(
            all,
            vec![b"big.bin".to_vec(), b"secret/key".to_vec(), b"src/a.rs".to_vec(), b"src/deep/b.rs".to_vec()]
        );
        let scope = Scope::new("s1", &FileAccess { read: vec!["src/deep".into()], write: vec![] }).expect("scope");
        let scoped: Vec<Vec<u8>> =
            list_files(&root, &ex, Some(&scope), None).expect("list").into_iter().map(|f| f.path).collect();
        assert_eq!(scoped, vec![b"src/deep/b.rs".to_vec()]);
    }

    #[test]
    fn reads_stay_beneath_the_root_whatever_the_links_say() {
        let t = ws();
        let root = t.path().join("ws");
        assert_eq!(read_file(&root, b"src/a.rs", READ_LIMIT, ChangePolicy::Retry).expect("read").bytes, b"fn a() {}");
        assert_eq!(
            read_file(&root, b"in-link", READ_LIMIT, ChangePolicy::Retry).expect("in-workspace link").bytes,
            b"fn a() {}"
        );
        for escape in [&b"etc-link"[..], b"up-link", b"hop1"] {
            let e = read_file(&root, escape, READ_LIMIT, ChangePolicy::Retry).expect_err("escape");
            assert_eq!(e.kind(), ErrorKind::NotFound, "{}", String::from_utf8_lossy(escape));
        }
        assert_eq!(
            read_file(&root, b"src", READ_LIMIT, ChangePolicy::Retry).expect_err("dir").kind(),
            ErrorKind::IsDirectory
        );
        assert_eq!(
            read_file(&root, b"big.bin", READ_LIMIT, ChangePolicy::Retry).expect_err("big").kind(),
            ErrorKind::TooLarge
        );
        assert_eq!(
            read_file(&root, b"nope", READ_LIMIT, ChangePolicy::Retry).expect_err("missing").kind(),
            ErrorKind::NotFound
        );
        for bad in [&b"../outside.txt"[..], b"/etc/passwd", b"", b"a\0b"] {
            assert_eq!(
                read_file(&root, bad, READ_LIMIT, ChangePolicy::Retry).expect_err("bad").kind(),
                ErrorKind::InvalidPath
            );
        }
    }
}
