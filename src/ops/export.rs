//! Exporting as a tar archive, optionally zstd-compressed, to any writer: a snapshot (or a
//! path of it) here, trash items in `trash/export.rs`, both through [`Archive`].

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::base::progress::Progress;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::{Entry, EntryKind};
use crate::repo::Repo;

fn tar_err(p: &[u8]) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::with_source(ErrorKind::Io, format!("cannot write '{}' to the archive: {e}", path::display(p)), e)
}

/// A tar stream being written: directories, symlinks and files with their modes and mtimes.
/// Where an export writes its entries: a tar archive, or a directory (trash items copied out,
/// `trash/copy_out.rs`).
pub(crate) trait EntrySink {
    /// Directory `rel`.
    fn dir(&mut self, rel: &[u8], mode: u32, mtime_ns: i64) -> Result<()>;
    /// Symlink `rel` to `target`.
    fn symlink(&mut self, rel: &[u8], target: &[u8], mode: u32, mtime_ns: i64) -> Result<()>;
    /// File `rel` of `size` bytes, streamed from `content`.
    fn file(&mut self, rel: &[u8], mode: u32, mtime_ns: i64, size: u64, content: &mut dyn Read) -> Result<()>;
}

impl EntrySink for Archive<'_> {
    fn dir(&mut self, rel: &[u8], mode: u32, mtime_ns: i64) -> Result<()> {
        Archive::dir(self, rel, mode, mtime_ns)
    }

    fn symlink(&mut self, rel: &[u8], target: &[u8], mode: u32, mtime_ns: i64) -> Result<()> {
        Archive::symlink(self, rel, target, mode, mtime_ns)
    }

    fn file(&mut self, rel: &[u8], mode: u32, mtime_ns: i64, size: u64, content: &mut dyn Read) -> Result<()> {
        Archive::file(self, rel, mode, mtime_ns, size, content)
    }
}

pub(crate) struct Archive<'w> {
    tar: tar::Builder<&'w mut dyn Write>,
    /// Entries written so far.
    pub count: u64,
}

impl<'w> Archive<'w> {
    fn header(kind: tar::EntryType, mode: u32, mtime_ns: i64, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_mtime(mtime_ns.div_euclid(1_000_000_000).max(0) as u64);
        h.set_size(size);
        h
    }

    /// Directory `rel`.
    pub fn dir(&mut self, rel: &[u8], mode: u32, mtime_ns: i64) -> Result<()> {
        let mut h = Archive::header(tar::EntryType::Directory, mode, mtime_ns, 0);
        let mut dir = rel.to_vec();
        dir.push(b'/');
        self.tar.append_data(&mut h, OsStr::from_bytes(&dir), std::io::empty()).map_err(tar_err(rel))?;
        self.count += 1;
        Ok(())
    }

    /// Symlink `rel` to `target`.
    pub fn symlink(&mut self, rel: &[u8], target: &[u8], mode: u32, mtime_ns: i64) -> Result<()> {
        let mut h = Archive::header(tar::EntryType::Symlink, mode, mtime_ns, 0);
        self.tar.append_link(&mut h, OsStr::from_bytes(rel), OsStr::from_bytes(target)).map_err(tar_err(rel))?;
        self.count += 1;
        Ok(())
    }

    /// File `rel` of `size` bytes, streamed from `content`; an error `content` raises (a
    /// damaged object) comes back as itself, not as a write failure.
    pub fn file(&mut self, rel: &[u8], mode: u32, mtime_ns: i64, size: u64, content: impl Read) -> Result<()> {
        let mut h = Archive::header(tar::EntryType::Regular, mode, mtime_ns, size);
        self.tar.append_data(&mut h, OsStr::from_bytes(rel), content).map_err(|err| match err.get_ref() {
            Some(inner) if inner.is::<Error>() => crate::base::error::from_io(err),
            _ => tar_err(rel)(err),
        })?;
        self.count += 1;
        Ok(())
    }
}

/// Writes an archive to `out` (zstd-compressed at `zstd_level` when given) with what `fill`
/// puts in it; returns the number of entries.
pub(crate) fn write_archive(
    out: &mut dyn Write,
    zstd_level: Option<i32>,
    fill: impl FnOnce(&mut Archive<'_>) -> Result<()>,
) -> Result<u64> {
    match zstd_level {
        Some(level) => {
            let mut enc = zstd::stream::Encoder::new(out, level)
                .map_err(|e| Error::with_source(ErrorKind::Io, "cannot start zstd", e))?;
            let n = fill_tar(&mut enc, fill)?;
            enc.finish().map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot finish zstd: {e}"), e))?;
            Ok(n)
        }
        None => fill_tar(out, fill),
    }
}

fn fill_tar(out: &mut dyn Write, fill: impl FnOnce(&mut Archive<'_>) -> Result<()>) -> Result<u64> {
    let mut a = Archive { tar: tar::Builder::new(out), count: 0 };
    fill(&mut a)?;
    a.tar.finish().map_err(tar_err(b"(end)"))?;
    Ok(a.count)
}

impl Repo {
    /// Writes `path` of `snap` (everything when empty) as a tar stream; returns the entry count.
    /// `progress` is told the file bytes written, with no total known in advance.
    pub fn export(
        &self,
        snap: &SnapshotInfo,
        path: &[u8],
        out: &mut dyn Write,
        zstd_level: Option<i32>,
        progress: &dyn Progress,
    ) -> Result<u64> {
        progress.start("exporting", 0);
        let root = path::components(path)?.join(&b'/');
        let _lease = self.lease("export")?;
        let n = write_archive(out, zstd_level, |a| {
            let mut add = |rel: &[u8], e: &Entry| -> Result<()> {
                match e.kind {
                    EntryKind::Dir => a.dir(rel, e.mode, e.mtime_ns),
                    EntryKind::Symlink => a.symlink(rel, e.target.as_deref().unwrap_or(b""), e.mode, e.mtime_ns),
                    EntryKind::File => {
                        a.file(rel, e.mode, e.mtime_ns, e.size, self.open_content(e)?)?;
                        progress.advance(e.size);
                        Ok(())
                    }
                }
            };
            let entry = self.lookup(snap, &root)?;
            if !root.is_empty() {
                add(&root, &entry)?;
            }
            if entry.kind == EntryKind::Dir {
                self.list(snap, &root, true, &mut add)?;
            }
            Ok(())
        })?;
        progress.finish();
        Ok(n)
    }
}
