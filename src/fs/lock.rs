//! The workspace lock: one `flock` per live directory, taken by every change through trove.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::fs::workdir::WorkDir;

/// The live tree of one workspace, held exclusively: every mutation through trove, in this
/// process or another, takes this lock first, so two writes to one path are serialized and
/// the second sees the first's result. A `flock` on a file per workspace directory: released
/// by the kernel when the process dies, so a crash never leaves it held.
pub struct Locked {
    /// The tree, to change while the lock is held.
    pub wd: WorkDir,
    _lock: File,
}

impl Locked {
    /// Waits for the lock of the workspace at `live_dir`.
    pub fn acquire(locks: &Path, live_dir: &Path, deadline: Option<Instant>) -> Result<Locked> {
        Locked::take(locks, live_dir, true, deadline)?
            .ok_or_else(|| Error::internal("a blocking lock returned without the lock"))
    }

    /// The lock if nobody holds it: how recovery tells a plan whose process died from one that
    /// is still running.
    pub fn try_acquire(locks: &Path, live_dir: &Path) -> Result<Option<Locked>> {
        Locked::take(locks, live_dir, false, None)
    }

    fn take(dir: &Path, live_dir: &Path, wait: bool, deadline: Option<Instant>) -> Result<Option<Locked>> {
        let wd = WorkDir::open(live_dir)?;
        // Keyed on the directory itself, not its spelling (`ws`, `ws/`, a symlink to it).
        let (dev, ino) = wd.identity()?;
        let file_path = dir.join(format!("{dev:x}-{ino:x}.lock"));
        let open = || File::options().create(true).truncate(false).write(true).open(&file_path);
        let file = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
                open().map_err(|e| Error::io("open", &file_path, e))?
            }
            Err(e) => return Err(Error::io("open", &file_path, e)),
        };
        use rustix::fs::FlockOperation;
        // With a deadline, waiting is polling, so a request gives up in time instead of
        // queueing behind a long change (and its answer can say that nothing changed).
        let deadline = deadline.filter(|_| wait);
        let op = if wait && deadline.is_none() {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::NonBlockingLockExclusive
        };
        let mut pause = Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&file, op) {
                Ok(()) => return Ok(Some(Locked { wd, _lock: file })),
                Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    if deadline.is_some_and(|d| Instant::now() + pause >= d) {
                        return Err(Error::timeout("waiting for another change to the workspace to finish", false));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(e) => return Err(Error::io("lock", &file_path, e.into())),
            }
        }
    }
}
