//! Failpoints: named points where a test stops the process (`abort`) or panics, to show what a
//! crash or a panicking handler leaves behind. Compiled in only with the `testing` feature,
//! which the tests enable; without it every point is an empty inline function.

/// Kills the process at a named point when `TROVE_FAILPOINT` names it: how the crash tests
/// stop a mutation between two exact steps. Unset, it costs one cached lookup.
#[cfg(feature = "testing")]
pub fn failpoint(name: &str) {
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
