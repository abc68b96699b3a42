//! Progress reporting: the library announces work, a front end (the CLI's bar) shows it.

/// Receives progress from long operations. Implementations must be cheap: `advance` is called
/// from worker threads once per file.
pub trait Progress: Sync {
    /// A phase begins with `total` units (files or bytes, as the phase says).
    fn start(&self, phase: &str, total: u64);
    /// `n` more units of the current phase are done.
    fn advance(&self, n: u64);
    /// The current phase is over.
    fn finish(&self);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
