//! The CLI's progress bar: the library's `Progress` drawn with indicatif on a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar on stderr when it is a terminal, otherwise one that draws nothing.
    pub fn new() -> Bar {
        let target =
            if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Bar { bar: ProgressBar::with_draw_target(None, target) }
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
