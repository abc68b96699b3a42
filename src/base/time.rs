//! Time: nanoseconds since the Unix epoch, as stored, and RFC 3339 UTC, as shown.

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// ISO 8601 UTC with milliseconds (`2025-06-15T10:30:00.000Z`), the API's time format.
pub fn iso_time(ns: i64) -> String {
    rfc3339(ns, 3)
}

/// RFC 3339 UTC with nanoseconds (`2025-06-15T10:30:00.123456789Z`), which [`parse_rfc3339`]
/// reads back exactly: the time a checkpoint signs.
pub fn rfc3339_nanos(ns: i64) -> String {
    rfc3339(ns, 9)
}

/// RFC 3339 UTC of `ns` with `digits` fraction digits (0, 3 or 9; others are taken as 9),
/// truncated as `humantime` does. Every `i64` is a time (1677-09-21 to 2262-04-11): times
/// before 1970 are negative, and a file's mtime or a date a user gives can be (`humantime`'s
/// formatter panics on them, which is why this one exists).
pub fn rfc3339(ns: i64, digits: u8) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let (days, in_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date of a day count since 1970-01-01 (Howard Hinnant's civil_from_days).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (hour, minute, second) = (in_day / 3600, in_day / 60 % 60, in_day % 60);
    let fraction = match digits {
        0 => String::new(),
        3 => format!(".{:03}", nanos / 1_000_000),
        _ => format!(".{nanos:09}"),
    };
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z")
}

/// Parses an RFC 3339 date-time (`2026-11-24T10:00:00Z`, `2026-11-24t10:00:00.5+01:00`), as
/// JSON Schema's `date-time` format has it: any offset, any number of fraction digits (past
/// nanoseconds ignored), a leap second read as the last nanosecond of its minute. Times outside
/// what `i64` nanoseconds hold (before 1677 or after 2262) are clamped to its ends.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |n, d| d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let seps = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) || !matches!(b.get(10), Some(b'T' | b't')) {
        return None;
    }
    let leap_year = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap_year => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for k in 0..9 {
            nanos = nanos * 10 + if k < digits { i64::from(b[i + 1 + k] - b'0') } else { 0 };
        }
        i += 1 + digits;
    }
    let offset_s = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if h > 23 || m > 59 || ![h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (h * 60 + m) * 60 * if *sign == b'-' { -1 } else { 1 }
        }
        _ => return None,
    };
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let (second, nanos) = if second == 60 { (59, 999_999_999) } else { (second, nanos) };
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(
        i128::from(secs)
            .saturating_mul(1_000_000_000)
            .saturating_add(i128::from(nanos))
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_rfc3339_utc_and_read_back_before_1970_too() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_764_000_000_123_456_789, "2025-11-24T16:00:00.123Z"),
            (951_782_400_000_000_000, "2000-02-29T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (-86_400_000_000_000, "1969-12-31T00:00:00.000Z"),
            (i64::MIN, "1677-09-21T00:12:43.145Z"),
            (i64::MAX, "2262-04-11T23:47:16.854Z"),
        ];
        for (ns, text) in cases {
            assert_eq!(iso_time(ns), text, "{ns}");
        }
        for ns in [0, 1, -1, 1_764_000_000_123_456_789, -5_726_593_693_729_427_849, i64::MIN, i64::MAX] {
            assert_eq!(parse_rfc3339(&rfc3339_nanos(ns)), Some(ns), "{ns}");
        }
    }

    #[test]
    fn rfc3339_times_parse_as_json_schema_has_them() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("1970-01-01t01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.5z"), Some(-500_000_000));
        assert_eq!(parse_rfc3339("2026-11-24T10:00:00.123456789123Z"), Some(1_795_514_400_123_456_789));
        assert_eq!(parse_rfc3339(&iso_time(1_795_514_400_123_000_000)), Some(1_795_514_400_123_000_000));
        assert_eq!(parse_rfc3339("2024-02-29T00:00:00Z").map(|n| n > 0), Some(true));
        assert_eq!(parse_rfc3339("2016-12-31T23:59:60Z"), parse_rfc3339("2016-12-31T23:59:59.999999999Z"));
        assert_eq!(parse_rfc3339("0001-01-01T00:00:00Z"), Some(i64::MIN));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-24 10:00:00Z",
            "2026-11-24T10:00:00",
            "2026-11-24T10:00:00.Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T10:00:00+1:00",
            "2026-11-24",
            "",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    /// Issue 36, item 16: every i64 is a time, and formatting one never panics (`humantime`
    /// panicked on anything before 1970: a trash restore `--before 0152-04-23`, or a file whose
    /// mtime is in 1960). The extremes, each way round.
    #[test]
    fn every_time_formats_and_parses_back_even_before_1970() {
        let table = [
            (i64::MIN, "1677-09-21T00:12:43.145224192Z"),
            (-1, "1969-12-31T23:59:59.999999999Z"),
            (0, "1970-01-01T00:00:00.000000000Z"),
            (-315_619_200_000_000_000, "1960-01-01T00:00:00.000000000Z"),
            (951_782_400_000_000_000, "2000-02-29T00:00:00.000000000Z"),
            (i64::MAX, "2262-04-11T23:47:16.854775807Z"),
        ];
        for (ns, text) in table {
            assert_eq!(rfc3339(ns, 9), text);
            assert_eq!(parse_rfc3339(text), Some(ns), "{text}");
        }
        assert_eq!(iso_time(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(-1, 0), "1969-12-31T23:59:59Z");
        // Dates past what i64 nanoseconds hold are clamped to its ends, never wrapped.
        for (text, ns) in [
            ("0001-01-01T00:00:00Z", i64::MIN),
            ("0152-04-23T15:37:00Z", i64::MIN),
            ("1677-09-21T00:12:43.145224191Z", i64::MIN),
            ("2262-04-11T23:47:16.854775808Z", i64::MAX),
            ("9999-12-31T23:59:59.999999999Z", i64::MAX),
            ("9999-12-31T23:59:60-23:59", i64::MAX),
            ("0000-01-01T00:00:00+23:59", i64::MIN),
        ] {
            assert_eq!(parse_rfc3339(text), Some(ns), "{text}");
        }
    }

    proptest::proptest! {
        /// Formatting agrees with humantime wherever humantime can format (from 1970), and
        /// parses back to the nanosecond (to the millisecond, rounded down, for `iso_time`).
        #[test]
        fn formatting_is_humantimes_after_1970_and_parses_back_everywhere(ns in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(parse_rfc3339(&rfc3339(ns, 9)), Some(ns));
            proptest::prop_assert_eq!(parse_rfc3339(&iso_time(ns)), Some(ns.div_euclid(1_000_000) * 1_000_000));
            if ns >= 0 {
                let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns as u64);
                proptest::prop_assert_eq!(rfc3339(ns, 3), humantime::format_rfc3339_millis(t).to_string());
                proptest::prop_assert_eq!(rfc3339(ns, 0), humantime::format_rfc3339_seconds(t).to_string());
                proptest::prop_assert_eq!(rfc3339(ns, 9), humantime::format_rfc3339_nanos(t).to_string());
            }
        }
    }
}
