//! Exporting a snapshot as a tar archive, optionally zstd-compressed, to any writer.

use std::ffi::OsStr;
use std::io::Write;
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
        let n = match zstd_level {
            Some(level) => {
                let mut enc = zstd::stream::Encoder::new(out, level)
                    .map_err(|e| Error::with_source(ErrorKind::Io, "cannot start zstd", e))?;
                let n = self.export_tar(snap, path, &mut enc, progress)?;
                enc.finish().map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot finish zstd: {e}"), e))?;
                n
            }
            None => self.export_tar(snap, path, out, progress)?,
        };
        progress.finish();
        Ok(n)
    }

    fn export_tar(
        &self,
        snap: &SnapshotInfo,
        path: &[u8],
        out: &mut dyn Write,
        progress: &dyn Progress,
    ) -> Result<u64> {
        let mut tar = tar::Builder::new(out);
        let mut count = 0u64;
        let root = path::components(path)?.join(&b'/');
        let mut add = |rel: &[u8], e: &Entry| -> Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_mode(e.mode);
            h.set_mtime(e.mtime_ns.div_euclid(1_000_000_000).max(0) as u64);
            let name = OsStr::from_bytes(rel);
            match e.kind {
                EntryKind::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    let mut dir = rel.to_vec();
                    dir.push(b'/');
                    tar.append_data(&mut h, OsStr::from_bytes(&dir), std::io::empty()).map_err(tar_err(rel))?;
                }
                EntryKind::Symlink => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    let target = OsStr::from_bytes(e.target.as_deref().unwrap_or(b""));
                    tar.append_link(&mut h, name, target).map_err(tar_err(rel))?;
                }
                EntryKind::File => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(e.size);
                    let reader = self.open_content(e)?;
                    tar.append_data(&mut h, name, reader).map_err(|err| match err.get_ref() {
                        Some(inner) if inner.is::<Error>() => crate::base::error::from_io(err),
                        _ => tar_err(rel)(err),
                    })?;
                    progress.advance(e.size);
                }
            }
            count += 1;
            Ok(())
        };
        let entry = self.lookup(snap, &root)?;
        if !root.is_empty() {
            add(&root, &entry)?;
        }
        if entry.kind == EntryKind::Dir {
            self.list(snap, &root, true, &mut add)?;
        }
        tar.finish().map_err(tar_err(b"(end)"))?;
        Ok(count)
    }
}
