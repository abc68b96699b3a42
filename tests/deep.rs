//! Deep trees (issue 11, item 1): a workspace thousands of directories deep is snapshotted,
//! listed, read, restored, exported, checked, deleted into the trash and restored from it,
//! on a thread with a small stack, as the server's worker threads have; and over HTTP, where a
//! stack overflow used to take the whole server down. Paths past `PATH_MAX` are included, and
//! a tree deeper than `path::MAX_DEPTH` is left out with a `too_deep` warning, not a crash.

mod common;

use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, CWD};
use serde_json::json;
use trove::tools::ToolCall;
use trove::RestoreOptions;
use trove::SessionSpec;
use trove::{EntryKind, NoProgress, Repo, SnapshotOptions};

/// Makes `depth` nested directories named `name` under `root` (opened one from the other, so
/// the total path may pass PATH_MAX), with `leaf.txt` holding `content` at the bottom.
fn deep_chain(root: &Path, name: &str, depth: usize, content: &[u8]) {
    fs::create_dir_all(root).expect("mkdir root");
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd: OwnedFd = rustix::fs::openat(CWD, root, dir_flags, Mode::empty()).expect("open root");
    for _ in 0..depth {
        rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdir");
        fd = rustix::fs::openat(&fd, name, dir_flags, Mode::empty()).expect("open");
    }
    let file = rustix::fs::openat(&fd, "leaf.txt", OFlags::WRONLY | OFlags::CREATE, Mode::from_raw_mode(0o644))
        .expect("create leaf");
    rustix::io::write(&file, content).expect("write leaf");
}

/// The content of `leaf.txt` at the bottom of a chain made by `deep_chain`.
fn read_leaf(root: &Path, name: &str, depth: usize) -> Vec<u8> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd: OwnedFd = rustix::fs::openat(CWD, root, dir_flags, Mode::empty()).expect("open root");
    for _ in 0..depth {
        fd = rustix::fs::openat(&fd, name, dir_flags, Mode::empty()).expect("open");
    }
    let leaf =
        rustix::fs::openat(&fd, "leaf.txt", OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty()).expect("open leaf");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut fs::File::from(leaf), &mut out).expect("read leaf");
    out
}

fn chain_path(name: &str, depth: usize) -> Vec<u8> {
    let mut p = vec![name; depth].join("/").into_bytes();
    p.extend_from_slice(b"/leaf.txt");
    p
}

/// Runs `f` in a fresh temporary directory on a thread with a 256 KiB stack: any recursion in
/// proportion to the tree's depth overflows it and aborts the test binary. The directory is
/// emptied here, on the test's thread and without recursion (`std::fs::remove_dir_all` recurses
/// one frame a level).
fn on_small_stack(f: impl FnOnce(&Path) + Send + 'static) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    let outcome = std::thread::Builder::new().stack_size(256 << 10).spawn(move || f(&path)).expect("spawn").join();
    let wd = trove::testing::WorkDir::open(dir.path()).expect("open");
    for entry in fs::read_dir(dir.path()).expect("list") {
        wd.remove(entry.expect("entry").file_name().as_encoded_bytes()).expect("remove");
    }
    outcome.expect("the work panicked");
}

#[test]
fn every_operation_handles_a_tree_thousands_of_directories_deep() {
    on_small_stack(|dir| {
        let ws = dir.join("ws");
        // 1,500 levels of `a` (3 KB of path), and 2,000 levels of `dd` (6 KB: past PATH_MAX).
        deep_chain(&ws, "a", 1500, b"bottom of a\n");
        deep_chain(&ws, "dd", 2000, b"bottom of dd\n");
        fs::write(ws.join("top.txt"), "top\n").expect("write");
        let repo = Repo::init(&dir.join("repo"), "test").expect("init");

        let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
        assert_eq!(snap.counts.files, 3);
        assert_eq!(snap.counts.dirs, 3500);
        assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
        // A second snapshot goes through the stat cache and the tree diff.
        fs::write(ws.join("top.txt"), "changed\n").expect("write");
        let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("second snapshot");
        assert_eq!((snap.counts.changed, snap.counts.added, snap.counts.removed), (1, 0, 0));

        for (name, depth, content) in [("a", 1500, &b"bottom of a\n"[..]), ("dd", 2000, b"bottom of dd\n")] {
            let entry = repo.lookup(&snap, &chain_path(name, depth)).expect("lookup");
            assert_eq!(repo.read_content(&entry).expect("read"), content);
        }
        let mut listed = 0usize;
        repo.list(&snap, b"", true, &mut |_, _| {
            listed += 1;
            Ok(())
        })
        .expect("list");
        assert_eq!(listed, 3500 + 3);

        let target = dir.join("restored");
        let report = repo.restore(&snap, &target, &RestoreOptions::default()).expect("restore");
        assert_eq!((report.files, report.dirs), (3, 3500));
        assert_eq!(read_leaf(&target, "a", 1500), b"bottom of a\n");
        assert_eq!(read_leaf(&target, "dd", 2000), b"bottom of dd\n");
        assert_eq!(fs::read(target.join("top.txt")).expect("top"), b"changed\n");

        let mut tar = Vec::new();
        let n = repo.export(&snap, b"", &mut tar, None, &NoProgress).expect("export");
        assert_eq!(n, 3503);
        let mut archive = tar::Archive::new(&tar[..]);
        let deepest = archive
            .entries()
            .expect("entries")
            .filter_map(|e| e.ok())
            .filter(|e| e.header().entry_type().is_file())
            .count();
        assert_eq!(deepest, 3);

        let report = repo.check().expect("check");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    });
}

#[test]
fn the_file_tools_list_delete_and_restore_a_deep_directory() {
    on_small_stack(|dir| {
        let ws = dir.join("ws");
        deep_chain(&ws, "a", 1200, b"deep\n");
        let repo = Repo::init(&dir.join("repo"), "test").expect("init");
        let root = ws.clone();
        let s = repo.create_session(&SessionSpec::default(), move |_| Ok(root), "test").expect("session");
        let call = |tool: &str, params: serde_json::Value| {
            let s = repo.session(&s.id).expect("session");
            trove::tools::run(&repo, &s, ToolCall::parse(tool, params).expect("parse"), "agent").map(|o| o.to_json())
        };
        let listed = call("list_directory", json!({"path": "a", "recursive": true, "limit": 5000})).expect("list");
        assert_eq!(listed["entries"].as_array().expect("entries").len(), 1200);
        let deleted = call("delete_file", json!({"path": "a"})).expect("delete");
        assert!(!ws.join("a").exists());
        let id = deleted["trashId"].as_str().expect("trash id").to_string();
        call("restore_file", json!({"trashId": id})).expect("restore");
        assert_eq!(read_leaf(&ws, "a", 1200), b"deep\n");
    });
}

#[test]
fn a_tree_deeper_than_the_limit_is_left_out_with_a_warning() {
    on_small_stack(|dir| {
        let ws = dir.join("ws");
        deep_chain(&ws.join("deep"), "x", trove::path::MAX_DEPTH + 10, b"too deep\n");
        fs::write(ws.join("kept.txt"), "kept\n").expect("write");
        let repo = Repo::init(&dir.join("repo"), "test").expect("init");
        let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot completes");
        assert_eq!(snap.counts.files, 1, "the leaf below the limit is not kept");
        let warning = snap.warnings.iter().find(|w| w.message.starts_with("too_deep")).expect("a too_deep warning");
        assert_eq!(warning.path.split('/').count(), trove::path::MAX_DEPTH);
        assert_eq!(repo.lookup(&snap, b"kept.txt").expect("kept").kind, EntryKind::File);
        let too_deep = vec!["x"; trove::path::MAX_DEPTH + 1].join("/");
        let e = repo.lookup(&snap, too_deep.as_bytes()).expect_err("deeper than any path may be");
        assert_eq!(e.kind(), trove::ErrorKind::TooDeep);
    });
}

#[test]
fn the_server_lists_snapshots_and_ends_a_session_on_a_deep_tree() {
    let server = common::http::start(Some(common::http::TOKEN), &[]);
    let id = server.session(r#"{"workspace": "deep"}"#);
    deep_chain(&server.workspace("deep"), "a", 1500, b"bottom\n");
    let listed = server.get(&format!("/api/sessions/{id}/files"));
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert_eq!(listed.json()["files"].as_array().expect("files").len(), 1);
    let deep = String::from_utf8(chain_path("a", 1500)).expect("utf-8");
    let read = server.get(&format!("/api/sessions/{id}/files/{deep}"));
    assert_eq!((read.status, read.json()["content"].as_str()), (200, Some("bottom\n")));
    let snap = server.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
    assert_eq!(snap.status, 201, "{}", snap.text());
    let ended = server.call("DELETE", &format!("/v1/sessions/{id}"), "");
    assert_eq!(ended.status, 204, "{}", ended.text());
    // Ended: served from its final snapshot, by the same iterative lookups.
    let read = server.get(&format!("/api/sessions/{id}/files/{deep}"));
    assert_eq!((read.status, read.json()["source"].as_str()), (200, Some("snapshot")));
    assert_eq!(server.get("/healthz").status, 200, "the server is still up");
}
