//! The inotify calls both of trove's watchers make ([`crate::fs::inotify`]'s change feed and
//! [`crate::fs::watch`]'s notices): an instance, a watch added through a directory's open
//! descriptor, and a read of every notice the kernel has queued.

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::base::error::{Error, ErrorKind, Result};

/// The notices a directory's watch asks for: everything that changes what a listing shows.
/// Opens, reads and closes are left out. (No `DONT_FOLLOW`: the watch is added through the
/// magic link `/proc/self/fd/N` of a directory opened without following symlinks, which must
/// be followed.)
pub const CHANGES: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

/// The read buffer's size: room for many notices per `read`.
const BUF: usize = 64 << 10;

/// A non-blocking inotify instance. The system's instances used up is `conflict`, naming
/// `what` could not start and, after the cause, `advice` (empty, or starting with "; ").
pub fn instance(what: &str, advice: &str) -> Result<OwnedFd> {
    inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).map_err(|e| {
        Error::with_source(
            ErrorKind::Conflict,
            format!("{what}: the system's inotify instances are used up (fs.inotify.max_user_instances){advice}"),
            std::io::Error::from(e),
        )
    })
}

/// Adds a watch with `mask` on the directory open as `dir`, through its descriptor, never
/// through a path a symlink could redirect. The same directory watched twice gives the same
/// watch descriptor.
pub fn watch(fd: &OwnedFd, dir: BorrowedFd<'_>, mask: WatchFlags) -> std::result::Result<i32, Errno> {
    inotify::add_watch(fd, format!("/proc/self/fd/{}", dir.as_raw_fd()).as_str(), mask)
}

/// A buffer for [`read_queued`], allocated once per watcher.
pub fn buffer() -> Vec<MaybeUninit<u8>> {
    vec![MaybeUninit::uninit(); BUF]
}

/// One notice: the watch it came from, what happened, the cookie joining a rename's halves,
/// and the entry's name in the watched directory (empty when it is about the directory).
pub struct Notice<'a> {
    pub wd: i32,
    pub flags: ReadFlags,
    pub cookie: u32,
    pub name: &'a [u8],
}

/// Hands every notice queued now to `each`, in order, until the queue is empty.
pub fn read_queued(fd: &OwnedFd, buf: &mut [MaybeUninit<u8>], mut each: impl FnMut(Notice<'_>)) -> std::io::Result<()> {
    let mut reader = inotify::Reader::new(fd, buf);
    loop {
        match reader.next() {
            Ok(e) => each(Notice {
                wd: e.wd(),
                flags: e.events(),
                cookie: e.cookie(),
                name: e.file_name().map(|n| n.to_bytes()).unwrap_or_default(),
            }),
            Err(Errno::AGAIN) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
