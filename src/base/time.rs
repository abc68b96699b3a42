//! Time: nanoseconds since the Unix epoch, as stored, and RFC 3339 UTC, as shown.

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// ISO 8601 UTC with milliseconds (`2025-06-15T10:30:00.000Z`), the API's time format.
pub fn iso_time(ns: i64) -> String {
    use std::time::{Duration, UNIX_EPOCH};
    let t = if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    };
    humantime::format_rfc3339_millis(t).to_string()
}
