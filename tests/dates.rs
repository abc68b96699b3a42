//! Dates at the edges (issue 36, item 16): before 1970, before 1677 and after 2262 (past what
//! i64 nanoseconds hold), given to every command and endpoint that takes a time, and files whose
//! mtime is before 1970. None may panic: an old date selects nothing before it, a far one
//! everything, and a file of 1960 is shown as of 1960.

mod common;

use std::path::Path;

use common::http::{self, TOKEN};
use common::{stderr, stdout, trove};
use serde_json::{json, Value};

/// The dates, from before the first representable nanosecond to after the last.
const DATES: [&str; 7] = [
    "0001-01-01T00:00:00Z",
    "0152-04-23T15:37:00Z",
    "1677-09-21T00:12:43.145224191Z",
    "1969-12-31T23:59:59.999999999Z",
    "1970-01-01T00:00:00Z",
    "2262-04-11T23:47:16.854775808Z",
    "9999-12-31T23:59:59.999999999Z",
];

/// Whether `date` is after the deletions the tests make (today): the dates past 2262.
fn after_now(date: &str) -> bool {
    date.starts_with("2262") || date.starts_with("9999")
}

/// Sets the mtime of `path` to `ns` nanoseconds since 1970 (negative: before).
fn set_mtime(path: &Path, ns: i64) {
    let ts = rustix::fs::Timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) as _ };
    let times = rustix::fs::Timestamps { last_access: ts, last_modification: ts };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::empty()).expect("set mtime");
}

#[test]
fn every_command_taking_a_time_takes_any_date_without_panicking() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = tmp.path().join("repo");
    let ws = tmp.path().join("w");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::write(ws.join("a.txt"), "a\n").expect("write");
    std::fs::write(ws.join("old.txt"), "old\n").expect("write");
    set_mtime(&ws.join("old.txt"), -315_619_200_000_000_000);
    assert!(trove(&repo, &["init"]).status.success());
    let out = trove(&repo, &["snapshot", ws.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = trove(&repo, &["--json", "ls", "latest"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(r#""mtime":"1960-01-01T00:00:00.000000000Z""#), "{}", stdout(&out));

    let out = trove(&repo, &["rm", "--workspace", "w", "a.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for date in DATES {
        for args in [
            &["trash", "ls", "--since", date][..],
            &["trash", "ls", "--until", date],
            &["audit", "log", "--since", date],
            &["audit", "log", "--until", date],
        ] {
            let out = trove(&repo, args);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        }
        if after_now(date) {
            continue;
        }
        // Nothing was deleted before it: `not_found` (exit 1), naming the path.
        let out = trove(&repo, &["trash", "restore", "--workspace", "w", "--path", "a.txt", "--before", date]);
        assert_eq!(out.status.code(), Some(1), "{date}: {}", stderr(&out));
        assert!(stderr(&out).contains("nothing deleted at 'a.txt'"), "{date}: {}", stderr(&out));
    }
    // After today, the deletion is found and restored.
    let out = trove(&repo, &["trash", "restore", "--workspace", "w", "--path", "a.txt", "--before", DATES[6]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(ws.join("a.txt")).expect("restored"), b"a\n");
}

#[test]
fn every_endpoint_taking_a_time_takes_any_date_without_panicking() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    let ws = s.workspace("w");
    http::write(&ws.join("a.txt"), b"a\n");
    http::write(&ws.join("old.txt"), b"old\n");
    set_mtime(&ws.join("old.txt"), -1);
    // A file of 1969 is listed and read with its time as it is.
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/read_file"), &json!({"path": "old.txt"}).to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"]["modifiedAt"], json!("1969-12-31T23:59:59.999Z"), "{}", r.text());
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/list_directory"), &json!({"path": ""}).to_string());
    assert_eq!((r.status, r.json()["ok"].clone()), (200, json!(true)), "{}", r.text());
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/delete_file"), &json!({"path": "a.txt"}).to_string());
    assert_eq!(r.json()["ok"], json!(true), "{}", r.text());

    let encode = |d: &str| d.replace('+', "%2B");
    for date in DATES {
        let q = encode(date);
        for target in [
            format!("/v1/trash?since={q}"),
            format!("/v1/trash?until={q}"),
            format!("/v1/sessions/{id}/trash?since={q}&until={q}"),
            format!("/v1/audit?since={q}"),
            format!("/v1/audit?until={q}"),
        ] {
            let r = s.get(&target);
            assert_eq!(r.status, 200, "{target}: {}", r.text());
        }
        let r = s.get(&format!("/v1/trash/export?since={q}"));
        assert!(r.status == 200 || r.status == 404, "export since {date}: {} {}", r.status, r.text());
        if after_now(date) {
            continue;
        }
        let body = json!({"path": "a.txt", "workspace": "w", "before": date}).to_string();
        let r = s.call("POST", "/v1/trash/restore", &body);
        assert_eq!(r.status, 404, "{date}: {}", r.text());
        let v: Value = r.json();
        assert_eq!(v["kind"], json!("not_found"), "{v}");
    }
    let body = json!({"path": "a.txt", "workspace": "w", "before": DATES[6]}).to_string();
    let r = s.call("POST", "/v1/trash/restore", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(std::fs::read(ws.join("a.txt")).expect("restored"), b"a\n");
}
