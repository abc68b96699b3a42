//! How the CLI shows things: sizes, times, modes, and paths in JSON.

use trove::{Entry, EntryKind};

pub fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// RFC 3339 UTC with seconds, for tables (a time before 1970 shown as it is, not as 1970).
pub fn time(ns: i64) -> String {
    trove::rfc3339(ns, 0)
}

/// RFC 3339 UTC with nanoseconds, for JSON.
pub fn time_precise(ns: i64) -> String {
    trove::rfc3339(ns, 9)
}

pub fn mode(e: &Entry) -> String {
    let kind = match e.kind {
        EntryKind::Dir => 'd',
        EntryKind::Symlink => 'l',
        EntryKind::File => '-',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    for shift in [6u32, 3, 0] {
        let bits = (e.mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// One entry of a snapshot as `trove ls --json` (one per line) and `trove cat --json` show it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryRecord {
    /// The workspace-relative path, with U+FFFD for bytes that are not UTF-8.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// `file`, `dir` or `symlink`.
    pub kind: EntryKind,
    /// The permission bits, in octal.
    pub mode: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 UTC to the nanosecond.
    pub mtime: String,
    /// A file's sha256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A file's content object (BLAKE3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The exact target bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_base64: Option<String>,
}

impl EntryRecord {
    /// `e`, found at `path`.
    pub fn of(path: &[u8], e: &Entry) -> EntryRecord {
        let (path, path_base64) = trove::path::for_json(path);
        let file = e.kind == EntryKind::File;
        let (target, target_base64) = e.target.as_deref().map(trove::path::for_json).unzip();
        EntryRecord {
            path,
            path_base64,
            kind: e.kind,
            mode: format!("{:o}", e.mode),
            size: e.size,
            mtime: time_precise(e.mtime_ns),
            sha256: e.sha256.filter(|_| file).map(hex::encode),
            content: e.content.filter(|_| file).map(|c| c.to_hex()),
            target,
            target_base64: target_base64.flatten(),
        }
    }
}

/// A time given on the command line: RFC 3339, or an age (`7d`, `90m`) before `now`.
pub fn time_arg(flag: &str, text: &str, now: i64) -> Result<i64, trove::Error> {
    if let Some(ns) = trove::parse_rfc3339(text) {
        return Ok(ns);
    }
    match humantime::parse_duration(text) {
        Ok(age) => Ok(now.saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX))),
        Err(_) => Err(trove::Error::invalid_argument(format!(
            "{flag} '{text}' is neither a time (2026-11-24T10:00:00Z) nor an age (7d, 2h)"
        ))),
    }
}
