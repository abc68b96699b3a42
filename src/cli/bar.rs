//! The CLI's progress bar: the library's `Progress` drawn with indicatif on a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

/// The bar on the terminal, if one is: the log's writer hides it while it writes a line.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Runs `f` (a write to stderr) with the bar on the terminal, if any, cleared and redrawn after.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    match SHOWN.lock().ok().and_then(|shown| shown.clone()) {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar on stderr when it is a terminal, otherwise one that draws nothing.
    pub fn new() -> Bar {
        let shown = std::io::stderr().is_terminal();
        let target = if shown { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        if shown {
            if let Ok(mut s) = SHOWN.lock() {
                *s = Some(bar.clone());
            }
        }
        Bar { bar }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Ok(mut s) = SHOWN.lock() {
            *s = None;
        }
    }
}

impl trove::Progress for Bar {
    fn start(&self, phase: &str, total: u64) {
        self.bar.reset();
        if total == 0 {
            self.bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {bytes} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
        } else {
            self.bar.set_length(total);
            self.bar.set_style(
                ProgressStyle::with_template("{msg:10} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
        }
        self.bar.set_message(phase.to_string());
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
