//! Upload temporaries in live trees: an upload streams into `.trove-up-<16 hex>.tmp` at the
//! workspace's root, which the journal then renames into place. Each is recorded in the manifest
//! (with the process writing it) before the file is made, and forgotten once placed or removed,
//! so trove only ever removes temporaries it recorded itself: those of a process that is gone,
//! when a repository is next opened. A snapshot leaves the recorded ones out: a half-received
//! upload is nobody's file.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::base::error::{ErrorKind, Result};
use crate::base::process;
use crate::base::time::now_ns;
use crate::fs::workdir::WorkDir;
use crate::manifest::uploads::{self, UploadTemp};
use crate::repo::Repo;

/// A recorded upload temporary, forgotten (its row removed) when dropped. Its file is the
/// uploader's to rename into place or remove; the journal may have taken it over, so dropping
/// this never removes it.
pub struct Staging<'r> {
    repo: &'r Repo,
    live_dir: Vec<u8>,
    name: Vec<u8>,
}

impl Staging<'_> {
    /// The temporary's name at the root of its live tree.
    pub fn name(&self) -> &[u8] {
        &self.name
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let forgot = self.repo.manifest.write_relaxed(|tx| uploads::remove(tx, &self.live_dir, &self.name));
        if let Err(e) = forgot {
            // The row stays until this process is gone; then recovery finds no file, or one
            // it removes. Until then a snapshot leaves the name out.
            tracing::warn!(name = %String::from_utf8_lossy(&self.name), error = %e,
                "an upload temporary could not be forgotten; it is settled once this process ends");
        }
    }
}

/// How a live tree is named in the rows: its absolute path (a snapshot may be asked for by a
/// relative one).
fn key(live_dir: &Path) -> Vec<u8> {
    std::path::absolute(live_dir).unwrap_or_else(|_| live_dir.to_path_buf()).as_os_str().as_bytes().to_vec()
}

impl Repo {
    /// Names and records a new upload temporary at the root of `live_dir` (the file is not made
    /// here: the caller creates it exclusively under [`Staging::name`]).
    pub fn stage_upload(&self, live_dir: &Path) -> Result<Staging<'_>> {
        let mut random = [0u8; 8];
        crate::base::random::fill_random(&mut random)?;
        let name = crate::ops::notices::upload_temporary(&random);
        let (pid, pid_start) = process::current();
        let t = UploadTemp { live_dir: key(live_dir), name, pid, pid_start };
        // Durable before the file exists: a crash after the file is made must find the row.
        self.manifest.write(|tx| uploads::insert(tx, &t, now_ns()))?;
        Ok(Staging { repo: self, live_dir: t.live_dir, name: t.name })
    }

    /// The names of the upload temporaries recorded at the root of `live_dir`, in flight or
    /// left by a crash: what a snapshot of it leaves out.
    pub fn upload_temps(&self, live_dir: &Path) -> Result<Vec<Vec<u8>>> {
        let rows = uploads::list(self.manifest.conn(), Some(&key(live_dir)))?;
        Ok(rows.into_iter().map(|t| t.name).collect())
    }

    /// Removes the upload temporaries of processes that are gone (killed mid-upload) and forgets
    /// them; one in a workspace with a plan still pending in the journal is left for the open
    /// that settles it (the plan may need it). A file that is not a regular file is left where
    /// it is. Returns how many were settled.
    pub(crate) fn recover_uploads(&self) -> Result<usize> {
        let rows = uploads::list(self.manifest.conn(), None)?;
        if rows.is_empty() {
            return Ok(0);
        }
        let pending: Vec<Vec<u8>> = crate::manifest::journal::pending(self.manifest.conn())?
            .into_iter()
            .filter_map(|(_, encoded)| serde_json::from_str::<crate::ops::journal::Plan>(&encoded).ok())
            .map(|p| p.root.as_os_str().as_bytes().to_vec())
            .collect();
        let mut settled = 0;
        for t in rows {
            if process::alive(t.pid, t.pid_start) || pending.contains(&t.live_dir) {
                continue;
            }
            let dir = Path::new(std::ffi::OsStr::from_bytes(&t.live_dir));
            let removed = match WorkDir::open(dir) {
                Ok(wd) => wd.remove_file(&t.name),
                // The workspace is gone, and the temporary with it.
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            };
            match removed {
                Ok(was) => {
                    if was {
                        tracing::info!(dir = %dir.display(), name = %String::from_utf8_lossy(&t.name),
                            "removed the temporary of an upload its process did not finish");
                    }
                    self.manifest.write(|tx| uploads::remove(tx, &t.live_dir, &t.name))?;
                    settled += 1;
                }
                Err(e) => tracing::warn!(dir = %dir.display(), name = %String::from_utf8_lossy(&t.name), error = %e,
                    "an interrupted upload's temporary could not be removed; tried again at the next open"),
            }
        }
        Ok(settled)
    }
}
