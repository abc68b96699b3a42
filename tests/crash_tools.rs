//! Crash safety of the file tools: a multi-file apply_patch killed at each step of its journal
//! leaves the tree fully old (before the journal commit) or, once the next command opens the
//! repository and rolls the journal forward, fully new; never half-applied, never with
//! temporaries or graves left behind, and always with every change audited.

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::*;

const PATCH: &str = "*** Begin Patch
*** Update File: a.txt
@@
-one
+ONE
*** Add File: new/n.txt
+fresh
*** Delete File: b.txt
*** Update File: dir/c.txt
*** Move to: moved/c.txt
@@
-c
+C
*** End Patch";

fn setup(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let (repo, ws) = (dir.join("repo"), dir.join("ws"));
    fs::create_dir_all(ws.join("dir")).expect("mkdir");
    fs::write(ws.join("a.txt"), "one\ntwo\n").expect("write");
    fs::write(ws.join("b.txt"), "bee\n").expect("write");
    fs::write(ws.join("dir/c.txt"), "c\n").expect("write");
    assert!(trove(&repo, &["init"]).status.success());
    let out = trove(&repo, &["--json", "session", "create", "--dir", ws.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    (repo, ws, v["id"].as_str().expect("id").to_string())
}

/// The tree as (relative path, bytes), directories as `path/`.
fn files(ws: &Path) -> Vec<(String, Vec<u8>)> {
    walkdir::WalkDir::new(ws)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .map(|e| {
            let e = e.expect("walk");
            let rel = e.path().strip_prefix(ws).expect("rel").to_string_lossy().into_owned();
            if e.file_type().is_dir() {
                (format!("{rel}/"), Vec::new())
            } else {
                (rel, fs::read(e.path()).expect("read"))
            }
        })
        .collect()
}

#[test]
fn apply_patch_killed_at_each_step_is_fully_old_or_fully_new() {
    let tmp = tempfile::tempdir().expect("tmp");
    // The two acceptable states, taken from runs without a crash.
    let old = {
        let (_, ws, _) = setup(&tmp.path().join("old"));
        files(&ws)
    };
    let new = {
        let (repo, ws, id) = setup(&tmp.path().join("new"));
        let params = serde_json::json!({"patch": PATCH}).to_string();
        let out = trove(&repo, &["tool", "apply_patch", "--session", &id, &params]);
        assert!(out.status.success(), "{}", stdout(&out));
        files(&ws)
    };
    assert_ne!(old, new);
    // The plan's steps: write a.txt, write new/n.txt, remove b.txt, move dir/c.txt, write moved/c.txt.
    let points =
        ["drafted", "journaled", "temp-written", "staged", "step:0", "step:1", "step:2", "step:3", "step:4", "buried"];
    for (i, point) in points.iter().enumerate() {
        let (repo, ws, id) = setup(&tmp.path().join(format!("crash{i}")));
        let params = serde_json::json!({"patch": PATCH}).to_string();
        let out = trove_at_failpoint(
            &repo,
            &["tool", "apply_patch", "--session", &id, &params],
            &format!("apply_patch:{point}"),
        );
        assert_eq!(out.status.signal(), Some(libc_sigabrt()), "{point}: the process must die there: {}", stderr(&out));
        // The next command opens the repository, which finishes what the journal decided.
        let out = trove(&repo, &["tool", "read_file", "--session", &id, r#"{"path":"a.txt"}"#]);
        assert!(out.status.success(), "{point}: {}", stdout(&out));
        let now = files(&ws);
        // Until every new content is staged (synced beside its target) the plan can only go
        // back: the contents are stored with the plan's records, so before that they are
        // nowhere else. From there it goes forward.
        let expected = if ["drafted", "journaled", "temp-written"].contains(point) { &old } else { &new };
        assert_eq!(&now, expected, "{point}: the tree is neither fully old nor fully new");
        let became_new = now == new;
        // Every change is in the audit log exactly once.
        let log = trove(&repo, &["--json", "audit", "log"]);
        let text = stdout(&log);
        let changes = text.matches("\"operation\": \"apply_patch\"").count();
        // Rolled back after it was journaled, the plan leaves one record saying so.
        let rolled_back = !became_new && *point != "drafted";
        assert_eq!(changes, if became_new { 5 } else { usize::from(rolled_back) }, "{point}: {text}");
        assert_eq!(text.contains("\"rolledBack\": true"), rolled_back, "{point}: {text}");
        // Every record names contents the store holds: the new versions a recovery finished
        // were stored from the tree.
        let check = trove(&repo, &["check"]);
        assert!(check.status.success(), "{point}: {}", stdout(&check));
        if became_new {
            let stored = text.matches("\"afterObject\": \"").count();
            assert!(stored >= 3, "{point}: the three writes name their contents: {text}");
        }
        // The next mutation works on the recovered tree, and no temporary or grave is left.
        let later =
            serde_json::json!({"patch": "*** Begin Patch\n*** Add File: later.txt\n+l\n*** End Patch"}).to_string();
        let out = trove(&repo, &["tool", "apply_patch", "--session", &id, &later]);
        assert!(out.status.success(), "{point}: {}", stdout(&out));
        let after = files(&ws);
        assert!(after.iter().all(|(p, _)| !p.contains(".trove-")), "{point}: leftovers {after:?}");
        assert_eq!(after.len(), now.len() + 1, "{point}: {after:?}");
    }
}

/// A patch whose first new content goes into directories that do not exist yet, killed once
/// that temporary is written (the second is not): the plan rolls back, and the directories
/// staging made go with it.
#[test]
fn a_patch_rolled_back_before_staging_ended_leaves_no_directory_it_made() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, ws, id) = setup(tmp.path());
    let old = files(&ws);
    let patch = "*** Begin Patch\n*** Add File: new/deeper/n.txt\n+fresh\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch";
    let params = serde_json::json!({"patch": patch}).to_string();
    let out =
        trove_at_failpoint(&repo, &["tool", "apply_patch", "--session", &id, &params], "apply_patch:temp-written");
    assert_eq!(out.status.signal(), Some(libc_sigabrt()), "the process must die there: {}", stderr(&out));
    assert!(ws.join("new/deeper").is_dir(), "staging made the directories before the crash");
    let out = trove(&repo, &["tool", "read_file", "--session", &id, r#"{"path":"a.txt"}"#]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(files(&ws), old, "rolled back, nothing of the patch is left");
    let log = stdout(&trove(&repo, &["--json", "audit", "log"]));
    assert!(log.contains("\"rolledBack\": true") && log.contains("\"outcome\": \"io\""), "{log}");
}

/// A write of a content over 1 MiB (stored as a chunk list before the plan) killed after its
/// rename: recovery finishes it, and its record names the stored content.
#[test]
fn a_big_write_killed_after_its_rename_is_recorded_with_its_content() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, ws, id) = setup(tmp.path());
    let content: String = (0..60_000).map(|i| format!("line {i} of a big file\n")).collect();
    assert!(content.len() > 1 << 20);
    let params = serde_json::json!({"path": "big.txt", "content": content}).to_string();
    // Too long for an argument: the parameters come on stdin.
    let mut child = std::process::Command::new(common::trove_bin())
        .arg("--repo")
        .arg(&repo)
        .args(["tool", "create_file", "--session", &id, "-"])
        .env_remove("TROVE_REPO")
        .env_remove("TROVE_LOG")
        .env("TROVE_FAILPOINT", "create_file:step:0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), params.as_bytes()).expect("parameters");
    let out = child.wait_with_output().expect("run");
    assert_eq!(
        out.status.signal(),
        Some(libc_sigabrt()),
        "the process must die there: {} {}",
        stderr(&out),
        stdout(&out)
    );
    let out = trove(&repo, &["tool", "read_file", "--session", &id, r#"{"path":"a.txt"}"#]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(fs::read_to_string(ws.join("big.txt")).expect("written"), content);
    let log = stdout(&trove(&repo, &["--json", "audit", "log"]));
    let v: serde_json::Value = serde_json::from_str(&log).expect("json");
    let write = v.as_array().expect("records").iter().find(|r| r["operation"] == "create_file").expect("recorded");
    assert!(write["afterObject"].is_string(), "{write}");
    let check = trove(&repo, &["check"]);
    assert!(check.status.success(), "{}", stdout(&check));
}

fn libc_sigabrt() -> i32 {
    6
}

/// A directory of three files in the trash, restored with `restore_file`: its plan is a mkdir,
/// two subdirectory mkdirs... and one write per file.
fn deleted_dir(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String, String) {
    let (repo, ws, id) = setup(dir);
    fs::create_dir_all(ws.join("gone/sub")).expect("mkdir");
    fs::write(ws.join("gone/one.txt"), "one\n").expect("write");
    fs::write(ws.join("gone/sub/two.txt"), "two\n").expect("write");
    fs::write(ws.join("gone/sub/three.bin"), vec![7u8; 300_000]).expect("write");
    let out = trove(&repo, &["tool", "delete_file", "--session", &id, r#"{"path":"gone"}"#]);
    assert!(out.status.success(), "{}", stdout(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let trash = v["data"]["trashId"].as_str().expect("trash id").to_string();
    (repo, ws, id, trash)
}

#[test]
fn trash_restore_of_a_directory_killed_at_each_step_is_all_or_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (old, new) = {
        let (repo, ws, id, trash) = deleted_dir(&tmp.path().join("clean"));
        let old = files(&ws);
        let params = serde_json::json!({"trashId": trash}).to_string();
        let out = trove(&repo, &["tool", "restore_file", "--session", &id, &params]);
        assert!(out.status.success(), "{}", stdout(&out));
        (old, files(&ws))
    };
    assert_ne!(old, new);
    // Steps: mkdir gone, mkdir gone/sub, then the three files.
    let points =
        ["drafted", "journaled", "temp-written", "staged", "step:0", "step:1", "step:2", "step:3", "step:4", "buried"];
    for (i, point) in points.iter().enumerate() {
        let (repo, ws, id, trash) = deleted_dir(&tmp.path().join(format!("crash{i}")));
        let params = serde_json::json!({"trashId": trash}).to_string();
        let out = trove_at_failpoint(
            &repo,
            &["tool", "restore_file", "--session", &id, &params],
            &format!("restore_file:{point}"),
        );
        assert_eq!(out.status.signal(), Some(libc_sigabrt()), "{point}: the process must die there: {}", stderr(&out));
        let out = trove(&repo, &["tool", "list_directory", "--session", &id, "{}"]);
        assert!(out.status.success(), "{point}: {}", stdout(&out));
        let now = files(&ws);
        let expected = if *point == "drafted" { &old } else { &new };
        assert_eq!(&now, expected, "{point}: half a directory came back");
        assert!(now.iter().all(|(p, _)| !p.contains(".trove-")), "{point}: leftovers {now:?}");
        // The item is marked restored exactly when the directory is back.
        let item = trove(&repo, &["--json", "audit", "log"]);
        let restores = stdout(&item).matches("\"operation\": \"restore_file\"").count();
        assert_eq!(restores > 0, *point != "drafted", "{point}: {}", stdout(&item));
    }
}

/// A directory of 24 files (a plan of more than 16 steps, synced as a whole) deleted with
/// `trove rm`, for `trove trash restore`.
fn deleted_big_dir(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    // The session's workspace is named after it.
    let (repo, ws, workspace) = setup(dir);
    for i in 0..24 {
        let sub = ws.join(format!("big/d{}", i % 3));
        fs::create_dir_all(&sub).expect("mkdir");
        fs::write(sub.join(format!("f{i}.txt")), format!("file {i}\n")).expect("write");
    }
    let out = trove(&repo, &["--json", "rm", "--workspace", &workspace, "big"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    (repo, ws, v[0]["id"].as_str().expect("trash id").to_string())
}

#[test]
fn trash_restore_of_a_big_directory_killed_at_each_step_is_all_or_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (old, new) = {
        let (repo, ws, trash) = deleted_big_dir(&tmp.path().join("clean"));
        let old = files(&ws);
        let out = trove(&repo, &["trash", "restore", &trash]);
        assert!(out.status.success(), "{}", stdout(&out));
        (old, files(&ws))
    };
    assert_ne!(old, new);
    // Steps: mkdir big, three subdirectories, then 24 files: 28 in all.
    let points = ["drafted", "journaled", "temp-written", "staged", "step:0", "step:3", "step:10", "step:27", "buried"];
    for (i, point) in points.iter().enumerate() {
        let (repo, ws, trash) = deleted_big_dir(&tmp.path().join(format!("crash{i}")));
        let out = trove_at_failpoint(&repo, &["trash", "restore", &trash], &format!("trash_restore:{point}"));
        assert_eq!(out.status.signal(), Some(libc_sigabrt()), "{point}: the process must die there: {}", stderr(&out));
        // Opening the repository settles the journal.
        let out = trove(&repo, &["--json", "trash", "ls", "--all"]);
        assert!(out.status.success(), "{point}: {}", stderr(&out));
        let now = files(&ws);
        let expected = if *point == "drafted" { &old } else { &new };
        assert_eq!(&now, expected, "{point}: half a directory came back");
        assert!(now.iter().all(|(p, _)| !p.contains(".trove-")), "{point}: leftovers {now:?}");
        let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(listed["items"][0]["restored"], serde_json::json!(*point != "drafted"), "{point}");
    }
}
