//! Failed logins, audited without letting a flood of them grow the permanent log: the first
//! [`AT_ONCE`] refusals of an interval are each recorded as they happen (a single bad request is
//! in the log at once, with its route); the rest are counted by reason and route, and one
//! summary record gives the counts when the interval ends. However many requests come without a
//! valid token, the log grows by at most `AT_ONCE + 1` records an interval.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::base::error::{ErrorKind, Result};
use crate::base::time::now_ns;
use crate::model::audit::AuditRecord;

/// Refusals recorded one by one in an interval.
pub const AT_ONCE: u64 = 10;
/// Distinct (reason, method, route) counts a summary keeps; the rest are summed as `other`.
const KEYS: usize = 64;

/// What is counted of one interval.
#[derive(Default)]
struct Interval {
    started: Option<Instant>,
    started_ns: i64,
    recorded: u64,
    /// (reason, method, route) -> refusals not recorded one by one.
    suppressed: BTreeMap<(String, String, String), u64>,
    total_suppressed: u64,
}

/// The refusals of the current interval.
pub(crate) struct Refusals {
    every: Duration,
    now: Mutex<Interval>,
}

/// One refused login: why, and what it asked for.
pub(crate) struct Refused {
    pub reason: &'static str,
    pub method: String,
    /// The route's pattern (`/v1/sessions/{id}`), never the raw path: the keys stay few.
    pub route: String,
    /// Which kind of token was expected: `operator` or `session`.
    pub token: &'static str,
}

fn lock(m: &Mutex<Interval>) -> std::sync::MutexGuard<'_, Interval> {
    // Counts are changed whole under the lock: a panic elsewhere leaves them sound.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Refusals {
    /// Refusals summarized every `every`.
    pub fn new(every: Duration) -> Refusals {
        Refusals { every: every.max(Duration::from_millis(1)), now: Mutex::new(Interval::default()) }
    }

    /// Counts `r`; the records to append now: `r` itself while the interval has room, and
    /// the summary of the interval before when `r` opens a new one.
    pub fn count(&self, r: Refused) -> Vec<AuditRecord> {
        let mut out = Vec::new();
        let mut now = lock(&self.now);
        if now.started.is_some_and(|s| s.elapsed() >= self.every) {
            out.extend(summary(&mut now));
        }
        if now.started.is_none() {
            *now = Interval { started: Some(Instant::now()), started_ns: now_ns(), ..Interval::default() };
        }
        if now.recorded < AT_ONCE {
            now.recorded += 1;
            out.push(record(json!({
                "reason": r.reason, "method": r.method, "route": r.route, "token": r.token,
            })));
        } else {
            let room = now.suppressed.len() < KEYS;
            let key = (r.reason.to_string(), r.method, r.route);
            let key = if room || now.suppressed.contains_key(&key) {
                key
            } else {
                (r.reason.to_string(), "*".into(), "other".into())
            };
            *now.suppressed.entry(key).or_insert(0) += 1;
            now.total_suppressed += 1;
        }
        out
    }

    /// The summary of an interval that has ended, if it suppressed anything: for a tick of the
    /// server, so a flood's last interval is recorded without waiting for another refusal.
    pub fn due(&self) -> Option<AuditRecord> {
        let mut now = lock(&self.now);
        if now.started.is_some_and(|s| s.elapsed() >= self.every) {
            return summary(&mut now);
        }
        None
    }

    /// The summary of the interval so far, whatever its age: at shutdown.
    pub fn flush(&self) -> Option<AuditRecord> {
        summary(&mut lock(&self.now))
    }
}

/// Ends `now`'s interval; its summary, if it suppressed anything.
fn summary(now: &mut Interval) -> Option<AuditRecord> {
    let ended = std::mem::take(now);
    if ended.total_suppressed == 0 {
        return None;
    }
    let by_route: Vec<_> = ended
        .suppressed
        .iter()
        .map(|((reason, method, route), n)| json!({"reason": reason, "method": method, "route": route, "count": n}))
        .collect();
    Some(record(json!({
        "reason": "summary",
        "suppressed": ended.total_suppressed,
        "since": crate::base::time::iso_time(ended.started_ns),
        "byRoute": by_route,
    })))
}

fn record(details: serde_json::Value) -> AuditRecord {
    let mut rec = AuditRecord::ok(now_ns(), "anonymous", "auth");
    rec.outcome = ErrorKind::Unauthorized.as_str().to_string();
    rec.details = details;
    rec
}

/// Appends `records` through `append`; a failure is logged, never the failure of the refusal.
pub(crate) fn append_all(records: Vec<AuditRecord>, append: impl Fn(AuditRecord) -> Result<i64>) {
    for r in records {
        if let Err(e) = append(r) {
            tracing::warn!(error = %e, "an authentication failure could not be audited");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(route: &str) -> Refused {
        Refused { reason: "missing token", method: "GET".into(), route: route.into(), token: "operator" }
    }

    #[test]
    fn a_flood_is_recorded_as_its_first_refusals_and_one_summary() {
        let r = Refusals::new(Duration::from_secs(3600));
        let mut records = Vec::new();
        for i in 0..5000 {
            records.extend(r.count(refused(if i % 2 == 0 { "/v1/sessions" } else { "/v1/trash" })));
        }
        assert_eq!(records.len() as u64, AT_ONCE);
        assert!(r.due().is_none(), "the interval has not ended");
        let s = r.flush().expect("a summary");
        assert_eq!(s.details["suppressed"], 5000 - AT_ONCE);
        let counted: u64 =
            s.details["byRoute"].as_array().expect("routes").iter().map(|x| x["count"].as_u64().unwrap_or(0)).sum();
        assert_eq!(counted, 5000 - AT_ONCE);
        assert!(r.flush().is_none(), "nothing left once summarized");
    }

    #[test]
    fn routes_past_the_key_limit_are_summed_as_other() {
        let r = Refusals::new(Duration::from_secs(3600));
        for i in 0..(AT_ONCE as usize + KEYS + 10) {
            r.count(refused(&format!("/r{i}")));
        }
        let s = r.flush().expect("a summary");
        let routes = s.details["byRoute"].as_array().expect("routes");
        assert_eq!(routes.len(), KEYS + 1);
        assert!(routes.iter().any(|x| x["route"] == "other" && x["count"] == 10));
    }
}
