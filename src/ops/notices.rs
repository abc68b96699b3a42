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

/// Whether `s` is `n` lowercase hex digits.
fn hex_of(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is a step number.
fn step(s: &str) -> Option<usize> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// The change and step a temporary name of trove's belongs to, if it is one: exactly the names
/// trove makes (`.trove-op_<12 hex>-<i>.tmp` or `.del`, `.trove-rst-rst_<12 hex>-<i>` or
/// `-l<i>`), so a file an agent names `.trove-something` is the agent's.
pub fn temporary(name: &[u8]) -> Option<(String, usize)> {
    let rest = std::str::from_utf8(name.strip_prefix(b".trove-")?).ok()?;
    if let Some(restore) = rest.strip_prefix("rst-") {
        let (id, n) = restore.rsplit_once('-')?;
        let ok =
            id.strip_prefix("rst_").is_some_and(|h| hex_of(h, 12)) && step(n.strip_prefix('l').unwrap_or(n)).is_some();
        return ok.then(|| (id.to_string(), 0));
    }
    let stem = rest.strip_suffix(".tmp").or_else(|| rest.strip_suffix(".del"))?;
    let (plan, i) = stem.rsplit_once('-')?;
    if !plan.strip_prefix("op_").is_some_and(|h| hex_of(h, 12)) {
        return None;
    }
    Some((plan.to_string(), step(i)?))
}

/// The name of an upload's temporary: `.trove-up-<16 hex>.tmp`, at the workspace root.
pub fn upload_temporary(random: &[u8; 8]) -> Vec<u8> {
    format!(".trove-up-{}.tmp", hex::encode(random)).into_bytes()
}

/// Whether `name` is one trove gives its own temporaries: a change's, a restore's or an
/// upload's (see [`temporary`] and [`upload_temporary`]).
pub fn is_temporary(name: &[u8]) -> bool {
    let upload = name
        .strip_prefix(b".trove-up-")
        .and_then(|r| r.strip_suffix(b".tmp"))
        .and_then(|h| std::str::from_utf8(h).ok())
        .is_some_and(|h| hex_of(h, 16));
    upload || temporary(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_name_their_change_and_step() {
        assert_eq!(temporary(b".trove-op_0123456789ab-3.tmp"), Some(("op_0123456789ab".into(), 3)));
        assert_eq!(temporary(b".trove-op_0123456789ab-12.del"), Some(("op_0123456789ab".into(), 12)));
        assert_eq!(temporary(b".trove-rst-rst_00ff00ff00ff-l7"), Some(("rst_00ff00ff00ff".into(), 0)));
        assert_eq!(temporary(b".trove-rst-rst_00ff00ff00ff-12"), Some(("rst_00ff00ff00ff".into(), 0)));
        assert_eq!(temporary(b".trove-op_1-x.tmp"), None);
        assert_eq!(temporary(b"notes.txt"), None);
        assert_eq!(temporary(b".trove-op_1-2.txt"), None);
        // Names an agent may well choose are its own.
        for own in
            [&b".trove-notes"[..], b".trove-my-1.tmp", b".trove-op_x-1.tmp", b".trove-rst-mine-1", b".trove-up-1.tmp"]
        {
            assert!(!is_temporary(own), "{}", String::from_utf8_lossy(own));
        }
        assert!(is_temporary(&upload_temporary(&[0xab; 8])));
        assert!(is_temporary(b".trove-op_0123456789ab-3.tmp"));
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
