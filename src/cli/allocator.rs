//! glibc malloc's settings for `trove serve`, a process that lives for weeks.
//!
//! glibc gives each thread that meets contention an arena of its own (up to eight per core),
//! and once a large block is freed it raises the size below which blocks come from those arenas
//! rather than from `mmap` (up to 32 MiB), and how much free space an arena keeps before it
//! gives it back. A server's blocking threads each handle 4 MiB bundles, upload chunks and
//! compression contexts in turn, so every arena came to keep 20 MiB and more: a soak's server
//! held 250-340 MiB of anonymous memory, most of it free blocks, and 120-150 MiB with the
//! settings below (mimalloc, tried instead, held over 450 MiB within three minutes).
//!
//! glibc reads these settings from `GLIBC_TUNABLES` only as a process starts, and setting them
//! from inside takes `mallopt`, an `unsafe` call this crate forbids. So `trove serve` started
//! without them starts itself again with them, once, before it does anything else: `exec` keeps
//! its process id, arguments, descriptors and environment. A user's own malloc settings are
//! left alone.

/// Set in the environment of the restarted process, so it does not restart again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const RESTARTED: &str = "TROVE_MALLOC_TUNED";

/// The settings: two arenas a core; blocks of 1 MiB and more mapped on their own (and unmapped
/// when freed); 4 MiB of free space kept at an arena's top.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tunables() -> String {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let arenas = cores.saturating_mul(2).max(2);
    format!("glibc.malloc.arena_max={arenas}:glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold=4194304")
}

/// Restarts this process with the settings above unless it has them, or the user chose their
/// own; returns only if it does not restart (then with why, when `exec` failed).
pub fn restart_with_server_settings() -> Option<std::io::Error> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let own = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let chosen = own.contains("glibc.malloc.")
            || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("MALLOC_"));
        if std::env::var_os(RESTARTED).is_some() || chosen {
            return None;
        }
        let tunables = if own.is_empty() { tunables() } else { format!("{own}:{}", tunables()) };
        let mut args = std::env::args_os();
        let argv0 = args.next()?;
        // `exec` returns only when it failed.
        let failed = std::process::Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", tunables)
            .env(RESTARTED, "1")
            .exec();
        return Some(failed);
    }
    #[allow(unreachable_code)]
    None
}
