//! The process's descriptor table, grown once while the process has one thread, and its limit:
//! raised to the hard limit for a server, and the room left under it for connections.
//!
//! Linux grows a process's table of open descriptors by doubling it as descriptors are opened
//! (64, 128, 256, ...). Once the table is shared by several threads, each growth waits for an
//! RCU grace period (`expand_fdtable` calls `synchronize_rcu`), a few milliseconds in which the
//! thread that opens is stopped: a snapshot's walk, holding a few hundred directories open on
//! its thread pool, paid up to three of them, 5-20 ms with every thread idle (a tenth of a
//! no-change snapshot of 26k files). Grown up front, before any thread starts, it costs nothing
//! (no other thread shares the table) and a table never shrinks.

/// Descriptors the table is grown to hold by [`reserve`]'s callers: what a walk
/// (`fs::walk::HELD_DIRS`) and a restore (`ops::restore::DIR_STACK`) hold at once, with room
/// for the manifest, packs and a server's connections besides.
pub const RESERVED: u32 = 1024;

/// Grows the descriptor table to hold `n` descriptors (fewer if the descriptor limit is lower),
/// by duplicating a descriptor of `/` (opened `O_PATH`) to the highest number wanted and
/// closing both. Call it first thing in `main`, before a thread exists. Best effort: where
/// either step fails, the table grows later as it would have.
pub fn reserve(n: u32) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    let highest = u64::from(n).min(limit).saturating_sub(1);
    let Ok(highest) = i32::try_from(highest) else { return };
    if highest < 64 {
        return;
    }
    let source =
        rustix::fs::open("/", rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC, rustix::fs::Mode::empty());
    if let Ok(fd) = source {
        // The duplicate takes the lowest free number >= `highest`, growing the table to hold
        // it; dropped at once, it leaves the table grown.
        drop(rustix::io::fcntl_dupfd_cloexec(&fd, highest));
    }
}

/// Descriptors a server keeps for its own files (the manifest, packs, workspaces, watches)
/// beyond its connections.
pub const SERVER_SPARE: u64 = 256;

/// Raises the soft limit on open descriptors to the hard limit (best effort: where it fails,
/// the limit stays as it was and [`room_for_connections`] says what that leaves).
pub fn raise_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        l.current = l.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, l) {
            tracing::warn!(error = %e, "cannot raise the open-file limit; connections are limited by the current one");
        }
    }
}

/// How many connections fit under the current soft limit on open descriptors, with
/// [`SERVER_SPARE`] kept for the server's files. Read at each call: the limit can change while
/// the process runs.
pub fn room_for_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(limit.saturating_sub(SERVER_SPARE)).unwrap_or(usize::MAX).max(1)
}

#[cfg(test)]
mod tests {
    /// The slots of this process's descriptor table (`FDSize` in `/proc/self/status`).
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let line = status.lines().find_map(|l| l.strip_prefix("FDSize:")).unwrap_or("0");
        line.trim().parse().unwrap_or(0)
    }

    #[test]
    fn reserving_grows_the_table_and_leaves_no_descriptor_open() {
        let open = || std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
        let before = open();
        super::reserve(super::RESERVED);
        assert_eq!(open(), before, "nothing left open");
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
        assert!(table_size() >= u64::from(super::RESERVED).min(limit), "table of {} slots", table_size());
    }
}
