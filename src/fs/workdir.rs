//! The live tree as the file tools change it: every operation resolves its path beneath the
//! workspace root, directory by directory, without following a symlink, so no tool can write
//! outside the workspace whatever links the agent made.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sha2::Digest;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::fs::walk;
use crate::object::{ObjectId, Sha256};

const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub mtime_ns: i64,
    pub inode: u64,
}

/// A file as it is on disk now: its hashes, size and mode. Its bytes are not kept: they are
/// streamed again when they must be stored (a pre-image), so a file of any size costs a
/// buffer, not its size in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub sha256: Sha256,
    /// BLAKE3 of the bytes: the object id they are stored under.
    pub content: ObjectId,
    pub size: u64,
    pub mode: u32,
}

/// Bytes read at a time when a file is hashed or copied.
const BUF: usize = 256 << 10;

/// Hashes everything `reader` yields: (sha256, BLAKE3 content id, size).
pub fn hash_stream(mut reader: impl Read) -> std::io::Result<(Sha256, ObjectId, u64)> {
    let mut sha = sha2::Sha256::new();
    let mut blake = blake3::Hasher::new();
    let mut buf = vec![0u8; BUF];
    let mut size = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sha.update(&buf[..n]);
        blake.update(&buf[..n]);
        size += n as u64;
    }
    Ok((sha.finalize().into(), ObjectId(*blake.finalize().as_bytes()), size))
}

/// A live tree opened by its root directory's descriptor: every path is resolved beneath it,
/// never through a symlink.
pub struct WorkDir {
    fd: OwnedFd,
    root: PathBuf,
    /// Whether each write, rename and new directory is synced as it happens (the default), or
    /// left for one [`WorkDir::sync_all`]: a change of thousands of files would otherwise cost
    /// thousands of fsyncs.
    sync_each: std::cell::Cell<bool>,
}

fn shown(rel: &[u8]) -> String {
    path::display(rel).into_owned()
}

/// Where a copy failed: reading the source (a trove error, e.g. a corrupt object) or writing.
enum Copy {
    Read(Error),
    Write(std::io::Error),
}

/// Copies `from` into `to` a buffer at a time.
fn copy(from: &mut dyn Read, to: &mut std::fs::File) -> std::result::Result<u64, Copy> {
    let mut buf = vec![0u8; BUF];
    let mut n = 0u64;
    loop {
        let got = match from.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copy::Read(crate::base::error::from_io(e))),
        };
        to.write_all(&buf[..got]).map_err(Copy::Write)?;
        n += got as u64;
    }
}

/// Splits `a/b/c` into (`a/b`, `c`).
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (b"", rel),
    }
}

impl WorkDir {
    /// Opens the tree at `root`.
    pub fn open(root: &Path) -> Result<WorkDir> {
        Ok(WorkDir { fd: walk::open_root(root)?, root: root.to_path_buf(), sync_each: std::cell::Cell::new(true) })
    }

    /// From now on, writes, renames and new directories are not synced one by one: the caller
    /// makes them durable with [`WorkDir::sync_all`] before it relies on them.
    pub fn defer_syncs(&self) {
        self.sync_each.set(false);
    }

    /// Whether syncs are deferred to [`WorkDir::sync_all`].
    pub fn syncs_deferred(&self) -> bool {
        !self.sync_each.get()
    }

    /// Back to syncing each write, rename and new directory as it happens.
    pub fn resume_syncs(&self) {
        self.sync_each.set(true);
    }

    /// Makes everything written to the tree's filesystem durable (one `syncfs`).
    pub fn sync_all(&self) -> Result<()> {
        rustix::fs::syncfs(&self.fd).map_err(|e| Error::io("sync the filesystem of", &self.root, e.into()))
    }

    fn fsync(&self, fd: &OwnedFd, rel: &[u8]) -> Result<()> {
        if self.sync_each.get() {
            rustix::fs::fsync(fd).map_err(|e| self.io("sync", rel, e))?;
        }
        Ok(())
    }

    /// The root's path, as opened.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn io(&self, verb: &str, rel: &[u8], e: impl Into<std::io::Error>) -> Error {
        let e: std::io::Error = e.into();
        match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => Error::new(
                ErrorKind::InvalidPath,
                format!("'{}' passes through a symlink or a file: tools only follow real directories", shown(rel)),
            ),
            // Named by its path in the workspace: the answer may go to a client.
            _ => Error::io(verb, Path::new(&format!("'{}'", shown(rel))), e),
        }
    }

    /// Opens directory `dir` (workspace-relative, "" for the root); with `create`, makes the
    /// missing ones (mode 0755) and reports them in `made`. No component may be a symlink.
    fn dir(&self, dir: &[u8], create: bool, made: &mut Vec<Vec<u8>>) -> Result<Option<OwnedFd>> {
        // The common case in one call: the whole path beneath the root, no symlink followed.
        match walk::open_dir_beneath(&self.fd, dir) {
            Ok(fd) => return Ok(Some(fd)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if !create {
                    return Ok(None);
                }
            }
            Err(e) => return Err(self.io("open directory", dir, e)),
        }
        // Something is missing: go component by component, making what is not there.
        let mut fd = rustix::io::dup(&self.fd).map_err(|e| self.io("open", b"", e))?;
        let mut so_far = Vec::new();
        for part in dir.split(|&b| b == b'/') {
            if !so_far.is_empty() {
                so_far.push(b'/');
            }
            so_far.extend_from_slice(part);
            // openat would follow these out of the root: only `openat2` above refuses them.
            if part == b".." || part == b"." {
                return Err(Error::new(
                    ErrorKind::InvalidPath,
                    format!("'{}' has a '.' or '..' component: give a path below the root", shown(dir)),
                ));
            }
            fd = match rustix::fs::openat(&fd, part, DIR_FLAGS, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&fd, part, Mode::from_raw_mode(0o755)) {
                        Ok(()) => {
                            // The new entry is durable once its parent is.
                            self.fsync(&fd, &so_far)?;
                            made.push(so_far.clone())
                        }
                        Err(Errno::EXIST) => {}
                        Err(e) => return Err(self.io("create directory", &so_far, e)),
                    }
                    rustix::fs::openat(&fd, part, DIR_FLAGS, Mode::empty())
                        .map_err(|e| self.io("open directory", &so_far, e))?
                }
                Err(e) => return Err(self.io("open directory", &so_far, e)),
            };
        }
        Ok(Some(fd))
    }

    /// The directory at `rel` ("" for the root), open; no component may be a symlink, and
    /// nothing there is `not_found`.
    pub fn open_dir(&self, rel: &[u8]) -> Result<OwnedFd> {
        self.dir(rel, false, &mut Vec::new())?.ok_or_else(|| {
            Error::new(ErrorKind::NotFound, format!("directory '{}' does not exist", shown(rel)))
                .with_detail("path", shown(rel).as_str())
        })
    }

    fn vanished(&self, dir: &[u8]) -> Error {
        Error::new(
            ErrorKind::Conflict,
            format!("directory '{}' vanished while it was being used: try again", shown(dir)),
        )
    }

    /// What is at `rel`, not following a final symlink; `None` if nothing (or no parent).
    pub fn stat(&self, rel: &[u8]) -> Result<Option<Meta>> {
        if rel.is_empty() {
            return self.stat_at(&self.fd, b".");
        }
        let (parent, name) = split(rel);
        let Some(dir) = self.dir(parent, false, &mut Vec::new())? else { return Ok(None) };
        self.stat_at(&dir, name)
    }

    fn stat_at(&self, dir: &OwnedFd, name: &[u8]) -> Result<Option<Meta>> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let kind = match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => Kind::File,
                    FileType::Directory => Kind::Dir,
                    FileType::Symlink => Kind::Symlink,
                    _ => Kind::Other,
                };
                Ok(Some(Meta {
                    kind,
                    size: st.st_size as u64,
                    mode: st.st_mode & 0o7777,
                    mtime_ns: st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec as i64),
                    inode: st.st_ino,
                }))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.io("stat", name, e)),
        }
    }

    /// The regular file at `rel`, open for reading, `None` if nothing is there; a directory is
    /// `is_directory`, a symlink or device `invalid_argument`.
    pub fn open_file(&self, rel: &[u8]) -> Result<Option<(std::fs::File, std::fs::Metadata)>> {
        let (parent, name) = split(rel);
        let Some(dir) = self.dir(parent, false, &mut Vec::new())? else { return Ok(None) };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => {
                return Err(Error::invalid_argument(format!(
                    "'{}' is a symlink: tools change regular files only",
                    shown(rel)
                )))
            }
            Err(e) => return Err(self.io("open", rel, e)),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(|e| self.io("stat", rel, e))?;
        if meta.is_dir() {
            return Err(Error::new(ErrorKind::IsDirectory, format!("'{}' is a directory", shown(rel))));
        }
        if !meta.is_file() {
            return Err(Error::invalid_argument(format!("'{}' is not a regular file", shown(rel))));
        }
        Ok(Some((file, meta)))
    }

    /// The file at `rel` as it is now (hashed a buffer at a time), `None` if nothing is there;
    /// a directory is `is_directory`, a symlink or device `invalid_argument`.
    pub fn current(&self, rel: &[u8]) -> Result<Option<Current>> {
        let Some((file, meta)) = self.open_file(rel)? else { return Ok(None) };
        let (sha256, content, size) = hash_stream(&file).map_err(|e| self.io("read", rel, e))?;
        Ok(Some(Current {
            sha256,
            content,
            size,
            mode: std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
        }))
    }

    /// The whole file at `rel` and what it is, for the tools that rewrite a text in memory;
    /// a file over `limit` bytes is `too_large`.
    pub fn read_whole(&self, rel: &[u8], limit: u64) -> Result<Option<(Current, Vec<u8>)>> {
        let Some((mut file, meta)) = self.open_file(rel)? else { return Ok(None) };
        if meta.len() > limit {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "'{}' is {} bytes, over the {limit}-byte limit for editing in place: replace it with write_file",
                    shown(rel),
                    meta.len()
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&mut file).take(limit + 1).read_to_end(&mut bytes).map_err(|e| self.io("read", rel, e))?;
        if bytes.len() as u64 > limit {
            return Err(Error::new(ErrorKind::TooLarge, format!("'{}' grew past the {limit}-byte limit", shown(rel))));
        }
        let cur = Current {
            sha256: sha2::Sha256::digest(&bytes).into(),
            content: ObjectId::of(&bytes),
            size: bytes.len() as u64,
            mode: std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
        };
        Ok(Some((cur, bytes)))
    }

    /// Writes what `bytes` yields to a new file `tmp` beside `rel` (creating parent
    /// directories, reported in `made`), a buffer at a time, and makes it durable.
    pub fn write_temp(
        &self,
        rel: &[u8],
        tmp: &[u8],
        bytes: &mut dyn Read,
        mode: u32,
        made: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let mut file = self.create_temp(rel, tmp, mode, made)?;
        copy(bytes, &mut file).map_err(|e| match e {
            Copy::Read(e) => e,
            Copy::Write(e) => self.io("write", rel, e),
        })?;
        if self.sync_each.get() {
            file.sync_all().map_err(|e| self.io("sync", rel, e))?;
        }
        Ok(())
    }

    /// Creates the temporary `tmp` beside `rel` (its parent made if missing), new, with
    /// permission bits `mode`, open for writing; the caller writes and syncs it.
    pub fn create_temp(&self, rel: &[u8], tmp: &[u8], mode: u32, made: &mut Vec<Vec<u8>>) -> Result<std::fs::File> {
        let (parent, _) = split(rel);
        let dir = self.dir(parent, true, made)?.ok_or_else(|| self.vanished(parent))?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // Permission bits only: the new inode belongs to trove's user, so a setuid or setgid bit
        // carried over would hand the agent's content trove's privileges.
        let mode = mode & 0o777;
        let fd = rustix::fs::openat(&dir, tmp, flags, Mode::from_raw_mode(mode))
            .map_err(|e| self.io("create", &walk::join_rel(parent, tmp), e))?;
        // The umask narrowed the mode given to openat; the file keeps the mode it had.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| self.io("chmod", rel, e))?;
        Ok(std::fs::File::from(fd))
    }

    /// Renames `from` to `to`, both workspace-relative; with `noreplace` the kernel refuses an
    /// existing `to` (`already_exists`), so no check-then-rename race can overwrite it.
    pub fn rename(&self, from: &[u8], to: &[u8], noreplace: bool, made: &mut Vec<Vec<u8>>) -> Result<()> {
        let (fparent, fname) = split(from);
        let (tparent, tname) = split(to);
        let fdir =
            self.dir(fparent, false, made)?.ok_or_else(|| Error::not_found(format!("'{}' not found", shown(from))))?;
        let tdir = self.dir(tparent, true, made)?.ok_or_else(|| self.vanished(tparent))?;
        let flags = if noreplace { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
        rustix::fs::renameat_with(&fdir, fname, &tdir, tname, flags).map_err(|e| match e {
            Errno::EXIST => Error::new(
                ErrorKind::AlreadyExists,
                format!("'{}' already exists: choose another path or delete it first", shown(to)),
            ),
            Errno::NOENT => Error::not_found(format!("'{}' not found", shown(from))),
            e => self.io("rename", from, e),
        })?;
        // The rename is durable once both directories are.
        self.fsync(&tdir, tparent)?;
        if fparent != tparent {
            self.fsync(&fdir, fparent)?;
        }
        Ok(())
    }

    /// Removes the file, symlink or whole directory at `rel`; nothing there is fine. Works
    /// through descriptors, entry by entry and depth first with an explicit stack, so a symlink
    /// swapped in meanwhile is removed as a link, never followed, and no depth of tree
    /// exhausts the thread's stack.
    pub fn remove(&self, rel: &[u8]) -> Result<()> {
        if rel.is_empty() {
            return Err(Error::invalid_argument("the workspace root itself cannot be removed"));
        }
        // (path, its entries are gone): a directory is visited twice, to empty it, then to
        // remove it.
        let mut stack: Vec<(Vec<u8>, bool)> = vec![(rel.to_vec(), false)];
        while let Some((path, emptied)) = stack.pop() {
            let (parent, name) = split(&path);
            let Some(dir) = self.dir(parent, false, &mut Vec::new())? else { continue };
            if emptied {
                match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => continue,
                    Err(e) => return Err(self.io("remove directory", &path, e)),
                }
            }
            match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => continue,
                // Linux answers EISDIR for a directory.
                Err(Errno::ISDIR) | Err(Errno::PERM) => {}
                Err(e) => return Err(self.io("remove", &path, e)),
            }
            let sub = match rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(self.io("open directory", &path, e)),
            };
            let mut names = Vec::new();
            for entry in rustix::fs::Dir::read_from(&sub).map_err(|e| self.io("read directory", &path, e))? {
                let entry = entry.map_err(|e| self.io("read directory", &path, e))?;
                let n = entry.file_name().to_bytes();
                if n != b"." && n != b".." {
                    names.push(walk::join_rel(&path, n));
                }
            }
            stack.push((path, true));
            stack.extend(names.into_iter().map(|n| (n, false)));
        }
        Ok(())
    }

    /// Removes the regular file at `rel`: whether one was there. Anything else there (a
    /// directory, a symlink, a device) is left as it is and `Ok(false)`.
    pub fn remove_file(&self, rel: &[u8]) -> Result<bool> {
        match self.stat(rel)? {
            Some(m) if m.kind == Kind::File => {}
            _ => return Ok(false),
        }
        let (parent, name) = split(rel);
        let Some(dir) = self.dir(parent, false, &mut Vec::new())? else { return Ok(false) };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) | Err(Errno::ISDIR) => Ok(false),
            Err(e) => Err(self.io("remove", rel, e)),
        }
    }

    /// Removes directory `rel` if it is empty; a non-empty or missing one is left as it is.
    pub fn rmdir(&self, rel: &[u8]) -> Result<()> {
        let (parent, name) = split(rel);
        let Some(dir) = self.dir(parent, false, &mut Vec::new())? else { return Ok(()) };
        match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) | Err(Errno::NOTEMPTY) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(self.io("remove directory", rel, e)),
        }
    }

    /// The identity of the root directory (device, inode): what the workspace lock is keyed
    /// on, so every spelling of one directory takes the same lock.
    pub fn identity(&self) -> Result<(u64, u64)> {
        let st = rustix::fs::fstat(&self.fd).map_err(|e| self.io("stat", b"", e))?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Creates directory `rel` and its parents.
    pub fn mkdirs(&self, rel: &[u8], made: &mut Vec<Vec<u8>>) -> Result<()> {
        self.dir(rel, true, made).map(|_| ())
    }

    /// Gives directory `rel` permission bits `mode` (no setuid, setgid or sticky bit: the
    /// directory belongs to trove's user); a symlink on the way is not followed.
    pub fn set_dir_mode(&self, rel: &[u8], mode: u32) -> Result<()> {
        let dir = self.dir(rel, false, &mut Vec::new())?.ok_or_else(|| self.vanished(rel))?;
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode & 0o777)).map_err(|e| self.io("chmod", rel, e))
    }

    /// Creates symlink `rel` pointing at `target`.
    pub fn symlink(&self, rel: &[u8], target: &[u8], made: &mut Vec<Vec<u8>>) -> Result<()> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent, true, made)?.ok_or_else(|| self.vanished(parent))?;
        rustix::fs::symlinkat(target, &dir, name).map_err(|e| self.io("create symlink", rel, e))
    }

    /// The entries of directory `rel`: (name, metadata), unsorted.
    pub fn list(&self, rel: &[u8]) -> Result<Vec<(Vec<u8>, Meta)>> {
        let Some(dir) = self.dir(rel, false, &mut Vec::new())? else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        let listing = rustix::fs::Dir::read_from(&dir).map_err(|e| self.io("read directory", rel, e))?;
        for entry in listing {
            let entry = entry.map_err(|e| self.io("read directory", rel, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if let Some(meta) = self.stat_at(&dir, name)? {
                out.push((name.to_vec(), meta));
            }
        }
        Ok(out)
    }

    /// Walks the directory `rel` depth first: (relative path inside it, metadata), directories
    /// before their contents, names in byte order. Iterative: an explicit stack of directories
    /// still to list, so depth costs heap, not thread stack.
    pub fn walk(&self, rel: &[u8], out: &mut Vec<(Vec<u8>, Meta)>) -> Result<()> {
        let mut stack: Vec<std::vec::IntoIter<Vec<u8>>> = vec![self.sorted_names(rel)?.into_iter()];
        let mut dirs: Vec<Vec<u8>> = vec![rel.to_vec()];
        while let Some(names) = stack.last_mut() {
            let Some(name) = names.next() else {
                stack.pop();
                dirs.pop();
                continue;
            };
            let parent = dirs.last().map(Vec::as_slice).unwrap_or(b"");
            let child = walk::join_rel(parent, &name);
            let Some(meta) = self.stat(&child)? else { continue };
            out.push((child.clone(), meta));
            if meta.kind == Kind::Dir {
                stack.push(self.sorted_names(&child)?.into_iter());
                dirs.push(child);
            }
        }
        Ok(())
    }

    /// The names in directory `rel`, in byte order; none if it is not there.
    fn sorted_names(&self, rel: &[u8]) -> Result<Vec<Vec<u8>>> {
        let Some(dir) = self.dir(rel, false, &mut Vec::new())? else { return Ok(Vec::new()) };
        let mut names = Vec::new();
        let listing = rustix::fs::Dir::read_from(&dir).map_err(|e| self.io("read directory", rel, e))?;
        for entry in listing {
            let entry = entry.map_err(|e| self.io("read directory", rel, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        names.sort();
        Ok(names)
    }

    /// A symlink's target.
    pub fn read_link(&self, rel: &[u8]) -> Result<Vec<u8>> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent, false, &mut Vec::new())?.ok_or_else(|| Error::not_found(shown(rel)))?;
        rustix::fs::readlinkat(&dir, name, Vec::new()).map(|c| c.into_bytes()).map_err(|e| self.io("read link", rel, e))
    }
}
