//! Crash consistency: `kill -9` of `trove snapshot` at many moments loses nothing acknowledged.
//!
//! Each round changes the workspace, starts a snapshot and kills it after a growing delay, so
//! the kills land during the walk, while packs are written, around the manifest commit, and
//! after completion. After every kill the repository must open, pass `check`, and restore the
//! baseline snapshot byte-identically; at the end a new snapshot must succeed.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use trove::RestoreOptions;
use trove::{Repo, SnapshotOptions};

#[test]
fn kill_9_at_any_moment_of_a_snapshot_keeps_the_repository_sound() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, root) = (tmp.path().join("ws"), tmp.path().join("repo"));
    trove::sample::generate(&ws, 1500, 21).expect("generate");
    let baseline = {
        let repo = Repo::init(&root, "test").expect("init");
        repo.snapshot(&ws, &SnapshotOptions::default()).expect("baseline")
    };
    let expected = {
        let out = tmp.path().join("expected");
        Repo::open(&root).expect("open").restore(&baseline, &out, &RestoreOptions::default()).expect("restore");
        tree_state(&out)
    };

    let mut rng = trove::sample::Rng::new(77);
    let mut completed = 0;
    for (round, delay_ms) in [0u64, 3, 8, 15, 30, 50, 80, 120, 200, 350, 600, 1000].into_iter().enumerate() {
        // New content each round, so every snapshot has packs to write.
        fs::write(ws.join(format!("round-{round}.bin")), rng.bytes(4 << 20)).expect("write");
        fs::write(ws.join(format!("round-{round}.txt")), trove::sample::text(&mut rng, 200_000)).expect("write");
        let mut child = Command::new(trove_bin())
            .arg("--repo")
            .arg(&root)
            .arg("snapshot")
            .arg(&ws)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().expect("wait");
        if status.success() {
            completed += 1;
        }

        let repo = Repo::open(&root).unwrap_or_else(|e| panic!("round {round}: repository does not open: {e}"));
        let report = repo.check().expect("check");
        assert!(report.problems.is_empty(), "round {round} (kill after {delay_ms} ms): {:?}", report.problems);
        let out = tmp.path().join(format!("restore-{round}"));
        repo.restore(&baseline, &out, &RestoreOptions::default()).expect("restore baseline");
        assert_eq!(tree_state(&out), expected, "round {round}: baseline changed");
        // Every snapshot the repository lists (acknowledged ones included) reads back whole.
        for snap in repo.snapshots(None).expect("list") {
            let mut files = 0;
            repo.list(&snap, b"", true, &mut |_, e| {
                if e.kind == trove::EntryKind::File {
                    files += 1;
                }
                Ok(())
            })
            .expect("list snapshot");
            assert_eq!(files, snap.counts.files, "snapshot {} lists whole", snap.id);
        }
    }
    assert!(completed < 12, "some kills must land before the snapshot finished");

    let repo = Repo::open(&root).expect("open");
    let last = repo.snapshot(&ws, &SnapshotOptions::default()).expect("the next snapshot succeeds");
    let out = tmp.path().join("final");
    repo.restore(&last, &out, &RestoreOptions::default()).expect("restore final");
    assert_eq!(tree_state(&out), tree_state(&ws));
}

/// A later snapshot of a small edit stores its files loose inside its own transaction: killed
/// just before that transaction, it leaves nothing (no loose row, no snapshot); the next one
/// stores them whole.
#[test]
fn a_small_edits_snapshot_killed_before_its_commit_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, root) = (tmp.path().join("ws"), tmp.path().join("repo"));
    fs::create_dir_all(&ws).expect("mkdir");
    for i in 0..30 {
        fs::write(ws.join(format!("f{i}.txt")), format!("file {i}\n").repeat(20)).expect("write");
    }
    let repo = Repo::init(&root, "test").expect("init");
    repo.snapshot(&ws, &SnapshotOptions::default()).expect("first");
    // Past the racy window, a second snapshot records every file as settled: after it only the
    // edited files are read again.
    std::thread::sleep(Duration::from_millis(2100));
    let baseline = repo.snapshot(&ws, &SnapshotOptions::default()).expect("baseline");
    drop(repo);
    fs::write(ws.join("f3.txt"), "edited\n").expect("edit");
    fs::write(ws.join("new.txt"), "added\n").expect("add");
    let loose = |repo: &Repo| -> i64 {
        trove::testing::conn(repo).query_row("SELECT COUNT(*) FROM loose_objects", [], |r| r.get(0)).expect("count")
    };

    let killed = trove_at_failpoint(&root, &["snapshot", ws.to_str().expect("utf8")], "snapshot:packed");
    assert!(!killed.status.success(), "the failpoint stops the snapshot");
    let repo = Repo::open(&root).expect("open");
    assert_eq!(repo.snapshots(None).expect("list").len(), 2);
    assert_eq!(loose(&repo), 0, "nothing of the killed snapshot is stored");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(repo);

    let done = trove(&root, &["snapshot", ws.to_str().expect("utf8")]);
    assert!(done.status.success(), "{}", stderr(&done));
    let repo = Repo::open(&root).expect("open");
    assert_eq!(loose(&repo), 2, "the edit went loose");
    let snaps = repo.snapshots(None).expect("list");
    let out = tmp.path().join("out");
    repo.restore(snaps.last().expect("latest"), &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&ws));
    let first = tmp.path().join("first");
    repo.restore(&baseline, &first, &RestoreOptions::default()).expect("restore baseline");
    assert_eq!(fs::read(first.join("f3.txt")).expect("read"), "file 3\n".repeat(20).into_bytes());
}
