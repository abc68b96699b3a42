//! Deadlines stop work before it changes anything (issue 11, item 9): a change that cannot
//! finish in time (here, because another change holds the workspace) answers `timeout` with
//! `changed: false`, and nothing lands later; the same over HTTP, where the answer used to be
//! a 500 while the patch went on to be applied a minute later.

mod common;

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use trove::tools::ToolCall;
use trove::SessionSpec;
use trove::{ErrorKind, Repo, SnapshotOptions};

/// Holds the workspace lock of `ws` in `repo` as another writer would (the lock file is keyed
/// on the directory's device and inode).
fn hold_workspace_lock(repo: &Path, ws: &Path) -> File {
    let meta = fs::metadata(ws).expect("stat");
    let dir = repo.join("locks");
    fs::create_dir_all(&dir).expect("mkdir");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{:x}-{:x}.lock", meta.dev(), meta.ino())))
        .expect("open lock");
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).expect("lock");
    file
}

const PATCH: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch";

#[test]
fn a_change_past_its_deadline_is_refused_and_never_lands() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, ws) = (tmp.path().join("repo"), tmp.path().join("ws"));
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "one\ntwo\n").expect("write");
    let repo = Repo::init(&root, "test").expect("init");
    let w = ws.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(w), "test").expect("session");

    let lock = hold_workspace_lock(&root, &ws);
    repo.set_deadline(Some(Instant::now() + Duration::from_millis(300)));
    let call = ToolCall::parse("apply_patch", json!({"patch": PATCH})).expect("parse");
    let e = trove::tools::run(&repo, &s, call, "agent").expect_err("the lock is not free in time");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.details().and_then(|d| d.get("changed")), Some(&json!(false)));
    drop(lock);
    repo.set_deadline(None);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fs::read_to_string(ws.join("a.txt")).expect("read"), "one\ntwo\n", "nothing landed later");
    let pending: i64 = rusqlite::Connection::open(root.join("manifest.db"))
        .expect("open")
        .query_row("SELECT COUNT(*) FROM journal", [], |r| r.get(0))
        .expect("count");
    assert_eq!(pending, 0, "no plan left behind");

    // A deadline already past stops a snapshot before it records anything.
    // (The session's start snapshot is the only one.)
    let before = repo.snapshots(None).expect("list").len();
    repo.set_deadline(Some(Instant::now()));
    let e = repo.snapshot(&ws, &SnapshotOptions::default()).expect_err("past its deadline");
    assert_eq!(e.kind(), ErrorKind::Timeout);
    repo.set_deadline(None);
    assert_eq!(repo.snapshots(None).expect("list").len(), before);
    // And without one, the same patch applies.
    let call = ToolCall::parse("apply_patch", json!({"patch": PATCH})).expect("parse");
    trove::tools::run(&repo, &s, call, "agent").expect("applies");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).expect("read"), "ONE\ntwo\n");
}

#[test]
fn over_http_a_timed_out_patch_answers_503_unchanged_and_never_applies() {
    let server = common::http::start(Some(common::http::TOKEN), &["--request-timeout", "1s"]);
    let id = server.session(r#"{"workspace": "w"}"#);
    let ws = server.workspace("w");
    fs::write(ws.join("a.txt"), "one\ntwo\n").expect("write");
    let lock = hold_workspace_lock(&server.repo, &ws);
    let body = json!({"patch": PATCH}).to_string();
    let r = server.call("POST", &format!("/v1/sessions/{id}/tools/apply_patch"), &body);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!((r.json()["kind"].as_str(), &r.json()["changed"]), (Some("timeout"), &json!(false)), "{}", r.text());
    drop(lock);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fs::read_to_string(ws.join("a.txt")).expect("read"), "one\ntwo\n", "nothing landed later");
    let r = server.call("POST", &format!("/v1/sessions/{id}/tools/apply_patch"), &body);
    assert_eq!(r.json()["ok"], true, "{}", r.text());
}
