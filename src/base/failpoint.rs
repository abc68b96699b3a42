//! Failpoints: named points where a test stops the process (`abort`) or panics, to show what a
//! crash or a panicking handler leaves behind, or runs something of its own on the thread that
//! reached it (another host's collection between two steps). Compiled in only with the
//! `testing` feature, which the tests enable; without it every point is an empty inline
//! function.

/// Kills the process at a named point when `TROVE_FAILPOINT` names it: how the crash tests
/// stop a mutation between two exact steps. Unset, it costs one cached lookup.
#[cfg(feature = "testing")]
pub fn failpoint(name: &str) {
    // Taken out while it runs, so that a point it reaches itself finds none.
    let hook = HOOK.with(|h| h.borrow_mut().take_if(|(point, _)| point == name));
    if let Some((point, mut f)) = hook {
        f();
        HOOK.with(|h| {
            h.borrow_mut().get_or_insert((point, f));
        });
    }
    if armed(name) {
        // A crash, not an exit: nothing is flushed, no destructor runs, as with kill -9.
        std::process::abort();
    }
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
type Hook = Option<(String, Box<dyn FnMut()>)>;

#[cfg(feature = "testing")]
thread_local! {
    /// What runs when this thread reaches a point: one per thread, so tests running in
    /// parallel never reach each other's.
    static HOOK: std::cell::RefCell<Hook> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` each time this thread reaches failpoint `name`, until [`clear_hook`].
#[cfg(feature = "testing")]
pub fn set_hook(name: &str, f: impl FnMut() + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some((name.to_string(), Box::new(f))));
}

/// Removes this thread's hook.
#[cfg(feature = "testing")]
pub fn clear_hook() {
    HOOK.with(|h| *h.borrow_mut() = None);
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
