//! How the CLI shows things: sizes, times, modes, and paths in JSON.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Map, Value};
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

/// RFC 3339 UTC with seconds, for tables.
pub fn time(ns: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// RFC 3339 UTC with nanoseconds, for JSON.
pub fn time_precise(ns: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_nanos(t).to_string()
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

pub use trove::path::put_json as put_path;

pub fn entry_json(path: &[u8], e: &Entry) -> Value {
    let mut m = Map::new();
    put_path(&mut m, "path", path);
    m.insert("kind".into(), json!(e.kind.as_str()));
    m.insert("mode".into(), json!(format!("{:o}", e.mode)));
    m.insert("size".into(), json!(e.size));
    m.insert("mtime".into(), json!(time_precise(e.mtime_ns)));
    if e.kind == EntryKind::File {
        if let Some(s) = e.sha256 {
            m.insert("sha256".into(), json!(hex::encode(s)));
        }
        if let Some(c) = e.content {
            m.insert("content".into(), json!(c.to_hex()));
        }
    }
    if let Some(t) = &e.target {
        put_path(&mut m, "target", t);
    }
    Value::Object(m)
}
