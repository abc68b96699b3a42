//! Which audit record a change this process made became, for file watchers: trove changes a
//! live tree by renaming temporaries into place (`.trove-<plan>-<i>.tmp`, graves
//! `.trove-<plan>-<i>.del`, a restore's `.trove-rst-<id>-<n>`), and records the change only
//! after the renames. A watcher that sees such a rename asks here, a moment later, which audit
//! record it became. In memory and bounded: only recent changes are ever asked about.

use std::collections::VecDeque;
use std::sync::Mutex;

/// The most recent steps kept.
const KEEP: usize = 8192;

/// What a step of a change became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// Its audit record.
    pub seq: i64,
    /// Whether it made a file where there was none (else it replaced or removed one).
    pub created: bool,
}

static RECENT: Mutex<VecDeque<(String, usize, Published)>> = Mutex::new(VecDeque::new());

fn recent() -> std::sync::MutexGuard<'static, VecDeque<(String, usize, Published)>> {
    // Entries are pushed and popped whole: a panic elsewhere leaves the queue consistent.
    RECENT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records what the steps of change `key` (a plan or restore id) became: (step, published).
pub fn publish(key: &str, steps: impl IntoIterator<Item = (usize, Published)>) {
    let mut q = recent();
    for (step, p) in steps {
        if q.len() == KEEP {
            q.pop_front();
        }
        q.push_back((key.to_string(), step, p));
    }
}

/// What step `step` of change `key` became, once published. A restore publishes one record
/// for all its files, as step 0.
pub fn published(key: &str, step: usize) -> Option<Published> {
    recent().iter().rev().find(|(k, s, _)| k == key && *s == step).map(|(_, _, p)| *p)
}

/// The change and step a temporary name of trove's belongs to, if it is one.
pub fn temporary(name: &[u8]) -> Option<(String, usize)> {
    let rest = std::str::from_utf8(name.strip_prefix(b".trove-")?).ok()?;
    if let Some(restore) = rest.strip_prefix("rst-") {
        let (id, _) = restore.rsplit_once('-')?;
        return Some((id.to_string(), 0));
    }
    let stem = rest.strip_suffix(".tmp").or_else(|| rest.strip_suffix(".del"))?;
    let (plan, step) = stem.rsplit_once('-')?;
    Some((plan.to_string(), step.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_name_their_change_and_step() {
        assert_eq!(temporary(b".trove-op_0123456789ab-3.tmp"), Some(("op_0123456789ab".into(), 3)));
        assert_eq!(temporary(b".trove-op_0123456789ab-12.del"), Some(("op_0123456789ab".into(), 12)));
        assert_eq!(temporary(b".trove-rst-rst_00ff-l7"), Some(("rst_00ff".into(), 0)));
        assert_eq!(temporary(b".trove-op_1-x.tmp"), None);
        assert_eq!(temporary(b"notes.txt"), None);
        assert_eq!(temporary(b".trove-op_1-2.txt"), None);
    }

    #[test]
    fn the_newest_publication_answers_and_old_ones_fall_out() {
        let p = |seq| Published { seq, created: false };
        publish("op_test_a", [(0, p(5)), (1, p(6))]);
        assert_eq!(published("op_test_a", 1), Some(p(6)));
        assert_eq!(published("op_test_a", 2), None);
        publish("op_test_fill", (0..KEEP).map(|i| (i, p(i as i64))));
        assert_eq!(published("op_test_a", 0), None, "bounded");
    }
}
