//! Snapshot retention: a workspace's policy (which snapshots to keep, as restic's `forget`
//! rules) and the pure decision of which of its snapshots the policy keeps, with every rule
//! that keeps each one. A workspace without a policy keeps every snapshot.

use serde::{Deserialize, Serialize};

use crate::base::time::iso_time;

/// Which snapshots of a workspace to keep; a snapshot kept by any rule stays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetentionPolicy {
    /// The newest N snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u32>,
    /// Every snapshot taken within this many seconds of the workspace's newest one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_within_s: Option<i64>,
    /// The newest snapshot of each of the last N hours (UTC) that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_hourly: Option<u32>,
    /// The newest snapshot of each of the last N days (UTC) that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_daily: Option<u32>,
    /// The newest snapshot of each of the last N weeks (Monday to Sunday, UTC) that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_weekly: Option<u32>,
    /// Every snapshot a session took when it ended (`session_end`), for this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_session_end_s: Option<i64>,
}

impl RetentionPolicy {
    /// Whether it has no rule at all (then nothing is forgotten).
    pub fn is_empty(&self) -> bool {
        *self == RetentionPolicy::default()
    }
}

/// One snapshot as the decision sees it.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// When it was taken.
    pub created_ns: i64,
    /// Why it was taken (`manual`, `session_end`, ...).
    pub reason: String,
    /// Pinned by an operator.
    pub pinned: bool,
    /// Taken by a session that has not ended.
    pub active_session: bool,
}

const HOUR_NS: i64 = 3_600_000_000_000;
const DAY_NS: i64 = 24 * HOUR_NS;

/// The hour, day and week (starting Monday; the epoch fell on a Thursday) of a time, as
/// bucket numbers.
fn buckets(t: i64) -> [i64; 3] {
    let day = t.div_euclid(DAY_NS);
    [t.div_euclid(HOUR_NS), day, (day + 3).div_euclid(7)]
}

/// A bucket's name: `2026-11-25T14`, `2026-11-25`, `week of 2026-11-23`.
fn bucket_name(kind: usize, bucket: i64) -> String {
    let start = match kind {
        0 => bucket.saturating_mul(HOUR_NS),
        1 => bucket.saturating_mul(DAY_NS),
        _ => (bucket.saturating_mul(7) - 3).saturating_mul(DAY_NS),
    };
    let iso = iso_time(start);
    match kind {
        0 => format!("hourly {}", iso.get(..13).unwrap_or(&iso)),
        1 => format!("daily {}", iso.get(..10).unwrap_or(&iso)),
        _ => format!("weekly (week of {})", iso.get(..10).unwrap_or(&iso)),
    }
}

fn duration(s: i64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(s.max(0) as u64)).to_string()
}

/// For each candidate (given oldest first), the rules that keep it; an empty list means the
/// policy forgets it. The newest snapshot, pinned ones and those of running sessions are
/// always kept. `now_ns` dates `keep_session_end_s`.
pub fn decide(policy: &RetentionPolicy, snapshots: &[Candidate], now_ns: i64) -> Vec<Vec<String>> {
    let mut keep: Vec<Vec<String>> = vec![Vec::new(); snapshots.len()];
    let Some(newest) = snapshots.iter().map(|s| s.created_ns).max() else { return keep };
    let counts = [policy.keep_hourly, policy.keep_daily, policy.keep_weekly];
    let mut left = counts.map(|c| c.unwrap_or(0));
    let mut last_bucket: [Option<i64>; 3] = [None; 3];
    let mut rank = 0u32;
    // Newest first, as restic counts its buckets.
    for (i, s) in snapshots.iter().enumerate().rev() {
        let reasons = &mut keep[i];
        if rank == 0 {
            reasons.push("latest".to_string());
        }
        rank += 1;
        if s.pinned {
            reasons.push("pinned".to_string());
        }
        if s.active_session {
            reasons.push("session still running".to_string());
        }
        if policy.keep_last.is_some_and(|n| rank <= n) {
            reasons.push(format!("last {rank}"));
        }
        if let Some(w) = policy.keep_within_s {
            if s.created_ns >= newest.saturating_sub(w.saturating_mul(1_000_000_000)) {
                reasons.push(format!("within {} of the newest", duration(w)));
            }
        }
        for (kind, bucket) in buckets(s.created_ns).into_iter().enumerate() {
            if left[kind] > 0 && last_bucket[kind] != Some(bucket) {
                last_bucket[kind] = Some(bucket);
                left[kind] -= 1;
                reasons.push(bucket_name(kind, bucket));
            }
        }
        if let Some(d) = policy.keep_session_end_s {
            if s.reason == "session_end" && s.created_ns >= now_ns.saturating_sub(d.saturating_mul(1_000_000_000)) {
                reasons.push(format!("session end within {}", duration(d)));
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(_: u32, t: i64, reason: &str) -> Candidate {
        Candidate { created_ns: t, reason: reason.into(), pinned: false, active_session: false }
    }

    fn kept(policy: &RetentionPolicy, snaps: &[Candidate], now: i64) -> Vec<usize> {
        decide(policy, snaps, now).iter().enumerate().filter(|(_, r)| !r.is_empty()).map(|(i, _)| i).collect()
    }

    #[test]
    fn rules_keep_what_they_say_and_the_newest_always_stays() {
        // Three snapshots an hour for three days, starting at midnight on a Monday (2026-11-23).
        let monday = 20_780 * DAY_NS;
        let snaps: Vec<Candidate> = (0..72 * 3)
            .map(|i| snap(i, monday + i64::from(i) * HOUR_NS / 3, if i % 10 == 0 { "session_end" } else { "manual" }))
            .collect();
        let now = snaps.last().map(|s| s.created_ns).unwrap_or(0) + HOUR_NS;
        assert_eq!(kept(&RetentionPolicy::default(), &snaps, now), [215], "no rule: the newest only");
        let last = RetentionPolicy { keep_last: Some(5), ..Default::default() };
        assert_eq!(kept(&last, &snaps, now), [211, 212, 213, 214, 215]);
        let hourly = RetentionPolicy { keep_hourly: Some(3), ..Default::default() };
        assert_eq!(kept(&hourly, &snaps, now), [209, 212, 215], "the newest of each of the last 3 hours");
        let daily = RetentionPolicy { keep_daily: Some(5), ..Default::default() };
        assert_eq!(kept(&daily, &snaps, now), [71, 143, 215], "three days exist: three kept");
        let weekly = RetentionPolicy { keep_weekly: Some(2), ..Default::default() };
        assert_eq!(kept(&weekly, &snaps, now), [215], "one week");
        let within = RetentionPolicy { keep_within_s: Some(3600), ..Default::default() };
        assert_eq!(kept(&within, &snaps, now), [212, 213, 214, 215]);
        let ends = RetentionPolicy { keep_session_end_s: Some(6 * 3600), ..Default::default() };
        assert_eq!(kept(&ends, &snaps, now), [200, 210, 215]);
        let r = decide(&daily, &snaps, now);
        assert_eq!(r[215], ["latest", "daily 2026-11-25"]);
        assert_eq!(r[71], ["daily 2026-11-23"]);
        assert_eq!(decide(&weekly, &snaps, now)[215][1], "weekly (week of 2026-11-23)");
    }

    #[test]
    fn pins_and_running_sessions_are_never_forgotten() {
        let mut snaps: Vec<Candidate> = (0..4).map(|i| snap(i, i64::from(i) * DAY_NS, "manual")).collect();
        snaps[0].pinned = true;
        snaps[1].active_session = true;
        let policy = RetentionPolicy { keep_last: Some(1), ..Default::default() };
        let r = decide(&policy, &snaps, 10 * DAY_NS);
        assert_eq!(r[0], ["pinned"]);
        assert_eq!(r[1], ["session still running"]);
        assert!(r[2].is_empty());
        assert_eq!(r[3], ["latest", "last 1"]);
    }
}
