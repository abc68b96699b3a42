//! Failpoints: named points where a test kills the process (`abort`), pauses it (SIGSTOP) or panics, to show what a
//! crash or a panicking handler leaves behind, or runs something of its own on the thread that
//! reached it (another host's collection between two steps). Compiled in only with the
//! `testing` feature, which the tests enable; without it every point is an empty inline
//! function.

/// Runs this thread's hook for a named point, if a test set one, then kills the process there
/// when `TROVE_FAILPOINT` names it: how the crash tests stop a mutation between two exact
/// steps. Unset, it costs a thread-local lookup and one cached lookup.
#[cfg(feature = "testing")]
pub fn failpoint(name: &str) {
    // Taken out while it runs, so that a point it reaches itself finds none; put back unless
    // it cleared the hooks or set another for this point.
    let hook = HOOKS.with(|h| h.borrow_mut().remove(name));
    if let Some(mut f) = hook {
        CLEARED.with(|c| c.set(false));
        f();
        let cleared = CLEARED.with(|c| c.get());
        HOOKS.with(|h| {
            let mut hooks = h.borrow_mut();
            if !cleared && !hooks.contains_key(name) {
                hooks.insert(name.to_string(), f);
            }
        });
    }
    if armed(name) {
        // A crash, not an exit: nothing is flushed, no destructor runs, as with kill -9.
        std::process::abort();
    }
    if stop_armed(name) {
        // Every thread stops, as under an operator's `kill -STOP`, until a SIGCONT: once, so
        // that a point reached again (a collection's next pass) does not stop it for good.
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::STOP);
    }
}

/// Whether `TROVE_FAILPOINT_STOP` names `name`: the process stops itself there (SIGSTOP).
#[cfg(feature = "testing")]
fn stop_armed(name: &str) -> bool {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    POINT.get_or_init(|| std::env::var("TROVE_FAILPOINT_STOP").ok()).as_deref() == Some(name)
        && !STOPPED.swap(true, std::sync::atomic::Ordering::Relaxed)
}

/// Panics at a named point when `TROVE_FAILPOINT` names it: how the server's tests show that a
/// panicking handler is contained (answered, logged, the server still up).
#[cfg(feature = "testing")]
#[allow(clippy::panic)]
pub fn panic_point(name: &str) {
    if armed(name) {
        panic!("failpoint {name} reached");
    }
}

#[cfg(feature = "testing")]
thread_local! {
    /// What runs when this thread reaches a point, by point: per thread, so tests running in
    /// parallel never reach each other's.
    static HOOKS: std::cell::RefCell<std::collections::HashMap<String, Box<dyn FnMut()>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
    /// Set by [`clear_hooks`], so that a hook that clears them is not put back after it runs.
    static CLEARED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` each time this thread reaches failpoint `name` (replacing its hook there, if any),
/// until [`clear_hooks`].
#[cfg(feature = "testing")]
pub fn set_hook(name: &str, f: impl FnMut() + 'static) {
    HOOKS.with(|h| h.borrow_mut().insert(name.to_string(), Box::new(f)));
}

/// Removes this thread's hooks.
#[cfg(feature = "testing")]
pub fn clear_hooks() {
    HOOKS.with(|h| h.borrow_mut().clear());
    CLEARED.with(|c| c.set(true));
}

#[cfg(feature = "testing")]
fn armed(name: &str) -> bool {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    POINT.get_or_init(|| std::env::var("TROVE_FAILPOINT").ok()).as_deref() == Some(name)
}

/// Without the `testing` feature, a point does nothing.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub fn failpoint(_name: &str) {}

/// Without the `testing` feature, a point does nothing.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub fn panic_point(_name: &str) {}
