//! The local-filesystem backend: one file per key under a root directory.
//!
//! A put writes a temporary file in the key's directory, fsyncs it, links it under its key
//! only if the key is free (never replacing a file: the local form of S3's conditional create)
//! and fsyncs the directory, so a crash leaves either the whole file or none (plus a stray
//! `.tmp` that nothing references). A key already there is compared with the new bytes: the
//! same is success, other bytes are refused. A staged value (a pack being written) is such a
//! temporary in the directory it was staged below, linked under its key when committed. Reads
//! use positioned reads on cached open handles.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::backend::Staged;
use crate::object::Backend;

/// Open handles kept for reads; packs are immutable, so a cached handle never reads stale
/// bytes. One whose file was deleted (by a collection in another process, or through another
/// backend) would hold the file's space until evicted: each open of a file not held first lets
/// go of those.
const MAX_OPEN: usize = 64;

/// One file per key under a root directory (the repository's packs).
pub struct LocalBackend {
    root: PathBuf,
    /// Open handles and the size each file had when opened (keys are written once, so it is
    /// their size for good): every read is checked against it before anything is allocated.
    open: Mutex<HashMap<String, (Arc<File>, u64)>>,
}

impl LocalBackend {
    /// The backend keeping its files under `root`.
    pub fn new(root: impl Into<PathBuf>) -> LocalBackend {
        LocalBackend { root: root.into(), open: Mutex::new(HashMap::new()) }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// [`persist`], then lets go of any handle held on the key: a damaged file it replaced
    /// must not be read through one.
    fn persist(&self, tmp: tempfile::NamedTempFile, path: &Path, key: &str) -> Result<()> {
        let done = persist(tmp, path, key, &self.root);
        if let Ok(mut open) = self.open.lock() {
            open.remove(key);
        }
        done
    }

    fn handle(&self, key: &str) -> Result<(Arc<File>, u64)> {
        let mut open = self.open.lock().map_err(|_| Error::internal("backend handle cache poisoned"))?;
        if let Some(f) = open.get(key) {
            return Ok(f.clone());
        }
        let path = self.path(key);
        let file = File::open(&path).map_err(|e| Error::io("open", &path, e))?;
        let size = file.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
        // A deleted file has no links left: `fstat` through the descriptor says so without a
        // path lookup, so this costs at most `MAX_OPEN` system calls on a miss.
        open.retain(|_, (f, _)| f.metadata().is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 0));
        if open.len() >= MAX_OPEN {
            open.clear();
        }
        let entry = (Arc::new(file), size);
        open.insert(key.to_string(), entry.clone());
        Ok(entry)
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync directory", dir, e))
}

/// Creates `dir` if missing, with its own entry made durable in its parent.
fn ensure_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

fn temporary_in(dir: &Path) -> Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io("create a temporary file in", dir, e))
}

/// Syncs the temporary, links it as `path` if nothing is there yet and syncs `path`'s
/// directory: after this the value is whole under its key whatever happens next. A file
/// already at `path` is kept: the same bytes are success (synced again, in case it is the
/// leftover of a writer killed before its directory sync), other bytes are `already_exists`,
/// unless the key names its content (`.../<BLAKE3 hex>.pack`) and the file there no longer
/// hashes to it while the new bytes do: damage, replaced (logged), as a rename always did.
fn persist(mut tmp: tempfile::NamedTempFile, path: &Path, key: &str, root: &Path) -> Result<()> {
    let dir =
        path.parent().ok_or_else(|| Error::internal(format!("backend path {} has no directory", path.display())))?;
    tmp.as_file().sync_all().map_err(|e| Error::io("sync", tmp.path(), e))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => sync_dir(dir),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            tmp = e.file;
            let there = File::open(path).map_err(|e| Error::io("open", path, e))?;
            if !same_bytes(tmp.as_file(), &there).map_err(|e| Error::io("compare with", path, e))? {
                let named = content_name(key);
                let hashes = |f: &File| hash_file(f).map_err(|e| Error::io("hash", path, e));
                if named.is_none() || named != Some(hashes(tmp.as_file())?) || named == Some(hashes(&there)?) {
                    return Err(crate::object::backend::other_bytes(&root.display().to_string(), key));
                }
                tracing::warn!(key, "a damaged value was replaced by its right bytes");
                tmp.persist(path).map_err(|e| Error::io("rename into place", path, e.error))?;
                return sync_dir(dir);
            }
            there.sync_all().map_err(|e| Error::io("sync", path, e))?;
            sync_dir(dir)
        }
        // A file system without hard links or `RENAME_NOREPLACE`: a rename, after checking
        // that the key is free, as before (not atomic against another writer). Only for a
        // value named by its content (a pack), which two writers write the same: the record
        // log's segments rest on exactly one writer winning a key.
        Err(e)
            if !path.exists() && matches!(e.error.raw_os_error(), Some(libc::EPERM | libc::ENOTSUP | libc::EINVAL)) =>
        {
            if content_name(key).is_none() {
                return Err(Error::with_source(
                    ErrorKind::Io,
                    format!(
                        "cannot create {} only if it is free: the file system under {} has neither RENAME_NOREPLACE nor hard links, which a record log needs; keep the repository on a local file system",
                        path.display(),
                        root.display()
                    ),
                    e.error,
                ));
            }
            e.file.persist(path).map_err(|e| Error::io("rename into place", path, e.error))?;
            sync_dir(dir)
        }
        Err(e) => Err(Error::io("link into place", path, e.error)),
    }
}

/// The BLAKE3 a key is named after, if it is: its last segment is 64 hex digits and `.pack`.
fn content_name(key: &str) -> Option<[u8; 32]> {
    let name = key.rsplit('/').next()?.strip_suffix(".pack")?;
    let mut out = [0u8; 32];
    hex::decode_to_slice(name, &mut out).ok()?;
    Some(out)
}

fn hash_file(f: &File) -> std::io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    loop {
        let n = f.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(*h.finalize().as_bytes());
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
}

/// Whether two files hold the same bytes, compared a block at a time.
fn same_bytes(a: &File, b: &File) -> std::io::Result<bool> {
    if a.metadata()?.len() != b.metadata()?.len() {
        return Ok(false);
    }
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let mut at = 0u64;
    loop {
        let n = a.read_at(&mut x, at)?;
        if n == 0 {
            return Ok(true);
        }
        b.read_exact_at(&mut y[..n], at)?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
        at += n as u64;
    }
}

/// A pack being written: a temporary file, written through a kernel buffer and renamed under
/// its key at commit (the temporary vanishes if dropped; a crash leaves a stray `.tmp`).
struct StagedFile<'a> {
    backend: &'a LocalBackend,
    tmp: tempfile::NamedTempFile,
}

impl Staged for StagedFile<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.tmp.write_all(bytes).map_err(|e| Error::io("write", self.tmp.path(), e))
    }

    fn commit(self: Box<Self>, key: &str) -> Result<()> {
        let path = self.backend.path(key);
        let dir = path.parent().ok_or_else(|| Error::internal(format!("backend key '{key}' has no directory")))?;
        ensure_dir(dir)?;
        self.backend.persist(self.tmp, &path, key)
    }
}

impl Backend for LocalBackend {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(key);
        let dir = path.parent().ok_or_else(|| Error::internal(format!("backend key '{key}' has no directory")))?;
        ensure_dir(dir)?;
        let mut tmp = temporary_in(dir)?;
        tmp.write_all(bytes).map_err(|e| Error::io("write", tmp.path(), e))?;
        self.persist(tmp, &path, key)
    }

    fn stage(&self, dir: &str) -> Result<Box<dyn Staged + '_>> {
        let dir = self.path(dir);
        ensure_dir(&dir)?;
        Ok(Box::new(StagedFile { backend: self, tmp: temporary_in(&dir)? }))
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (file, size) = self.handle(key)?;
        // A damaged index can claim any length: it is checked against the file before it sizes
        // an allocation.
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{key} has {size} bytes: a read of {len} bytes at {offset} runs past its end; run `trove check`"
                ),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("{key} ends before byte {}; run `trove check`", offset + len),
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read pack", &self.path(key), e)),
            }
        }
        Ok(buf)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        // From the prefix's directory: listing the packs must not walk a log of a million
        // segments beside them.
        let start = match prefix.rfind('/') {
            Some(i) => self.root.join(&prefix[..i]),
            None => self.root.clone(),
        };
        if !start.exists() {
            return Ok(keys);
        }
        for entry in walkdir::WalkDir::new(&start) {
            let entry =
                entry.map_err(|e| Error::new(ErrorKind::Io, format!("cannot list {}: {e}", start.display())))?;
            if !entry.file_type().is_file() || entry.path().extension().is_some_and(|x| x == "tmp") {
                continue;
            }
            let rel = entry.path().strip_prefix(&self.root).map_err(|_| Error::internal("walk left the root"))?;
            let key = rel.to_string_lossy().replace('\\', "/");
            if key.starts_with(prefix) {
                keys.push(key);
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn size(&self, key: &str) -> Result<u64> {
        let path = self.path(key);
        match std::fs::symlink_metadata(&path) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::not_found(format!("{key} does not exist")))
            }
            Err(e) => Err(Error::io("stat", &path, e)),
        }
    }

    fn delete(&self, key: &str) -> Result<()> {
        if let Ok(mut open) = self.open.lock() {
            open.remove(key);
        }
        let path = self.path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("delete", &path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_backend_contract() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::object::backend::contract(&LocalBackend::new(dir.path()));
    }

    #[test]
    fn a_damaged_pack_is_replaced_by_its_right_bytes_and_nothing_else_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = LocalBackend::new(dir.path());
        let bytes = b"a pack's bytes".to_vec();
        let key = format!("packs/ab/{}.pack", blake3::hash(&bytes).to_hex());
        b.put(&key, &bytes).expect("put");
        let mut damaged = bytes.clone();
        damaged[3] ^= 1;
        fs::write(dir.path().join(&key), &damaged).expect("damage");
        assert_eq!(b.get_range(&key, 0, 5).expect("read"), damaged[..5], "a handle is held on the damaged file");
        // Other bytes than the name says: refused.
        assert_eq!(b.put(&key, b"not its content").expect_err("wrong bytes").kind(), ErrorKind::AlreadyExists);
        b.put(&key, &bytes).expect("the right bytes replace the damage");
        assert_eq!(fs::read(dir.path().join(&key)).expect("read"), bytes);
        assert_eq!(b.get_range(&key, 0, 5).expect("read"), bytes[..5], "read through a new handle");
    }
}
