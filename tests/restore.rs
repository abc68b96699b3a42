//! Restore under attack and under `kill -9` (issue 11, items 6 and 7): a symlink swapped in on
//! the way never makes trove write or delete outside the target; a killed restore never leaves
//! a torn file, the next open cleans up its staging directory, and running it again completes.

mod common;

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use trove::RestoreOptions;
use trove::{ErrorKind, Repo, SnapshotOptions};

#[test]
fn a_directory_swapped_for_a_symlink_mid_restore_is_never_written_or_deleted_through() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, target, outside) = (tmp.path().join("ws"), tmp.path().join("target"), tmp.path().join("outside"));
    for d in [&ws.join("src/deep"), &target.join("src/deep"), &outside.join("deep")] {
        fs::create_dir_all(d).expect("mkdir");
    }
    fs::write(ws.join("src/a.rs"), "new a\n").expect("write");
    fs::write(ws.join("src/deep/b.rs"), "new b\n").expect("write");
    fs::write(target.join("src/a.rs"), "old a\n").expect("write");
    fs::write(outside.join("a.rs"), "precious\n").expect("write");
    fs::write(outside.join("deep/b.rs"), "precious too\n").expect("write");

    // Armed after the snapshot, the tripwire fires at the restore's first read: the moment it
    // has made its directories and starts fetching contents.
    let armed = Arc::new(AtomicBool::new(false));
    let (t, o) = (target.clone(), outside.clone());
    let on_first_read = Mutex::new(Some(move || {
        fs::rename(t.join("src"), t.join("src.moved")).expect("move the real directory away");
        symlink(&o, t.join("src")).expect("plant the symlink");
    }));
    let wire = armed.clone();
    let backend = backend::Hooked::default().on_read(move |_, _| {
        if wire.swap(false, Ordering::SeqCst) {
            if let Some(f) = on_first_read.lock().expect("lock").take() {
                f();
            }
        }
        Ok(())
    });
    let repo = Repo::with_backend(Box::new(backend)).expect("repo");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    armed.store(true, Ordering::SeqCst);

    let opts = RestoreOptions { overwrite: true, ..RestoreOptions::default() };
    let e = repo.restore(&snap, &target, &opts).expect_err("a symlink on the way stops the restore");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(fs::read_to_string(outside.join("a.rs")).expect("a"), "precious\n");
    assert_eq!(fs::read_to_string(outside.join("deep/b.rs")).expect("b"), "precious too\n");
    assert_eq!(fs::read_dir(&outside).expect("list").count(), 2, "nothing new outside the target");
    assert!(fs::symlink_metadata(target.join("src")).expect("link").file_type().is_symlink(), "left as found");
    assert!(!staging_left(&target), "no temporary file left");
}

/// Each file of the test workspace: its name, its old content and its new one.
type Versions = Vec<(String, Vec<u8>, Vec<u8>)>;

/// Old and new versions of a workspace of big files, and the snapshot of the new one.
fn old_and_new(dir: &Path) -> (std::path::PathBuf, String, Versions) {
    let (ws, repo) = (dir.join("ws"), dir.join("repo"));
    let mut rng = trove::sample::Rng::new(5);
    let mut files = Vec::new();
    for i in 0..24 {
        let name = format!("d{}/f{i}.bin", i % 4);
        files.push((name, rng.bytes(1 << 20), rng.bytes(1 << 20)));
    }
    for (name, _, new) in &files {
        common::http::write(&ws.join(name), new);
    }
    assert!(trove(&repo, &["init"]).status.success());
    let out = trove(&repo, &["--json", "snapshot", ws.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id =
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).expect("json")["id"].as_str().expect("id").to_string();
    (repo, id, files)
}

fn put_old(target: &Path, files: &Versions) {
    for (name, old, _) in files {
        common::http::write(&target.join(name), old);
    }
}

/// Every file is whole: the old version or the new one, never a mix or a cut.
fn assert_whole(target: &Path, files: &Versions, when: &str) -> usize {
    let mut new = 0;
    for (name, old, fresh) in files {
        let now = fs::read(target.join(name)).unwrap_or_else(|e| panic!("{when}: {name} is gone: {e}"));
        assert!(now == *old || now == *fresh, "{when}: {name} is torn ({} bytes)", now.len());
        new += usize::from(now == *fresh);
    }
    new
}

/// Whether a restore's temporary file is left anywhere under `target`.
fn staging_left(target: &Path) -> bool {
    walkdir::WalkDir::new(target)
        .into_iter()
        .any(|e| e.expect("walk").file_name().to_string_lossy().starts_with(".trove-"))
}

#[test]
fn kill_9_at_each_step_of_a_restore_leaves_whole_files_and_a_rerun_completes_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, id, files) = old_and_new(tmp.path());
    for point in ["restore:staged", "restore:synced", "restore:rename:first", "restore:renamed"] {
        let target = tmp.path().join(point.replace(':', "-"));
        put_old(&target, &files);
        let out = Command::new(trove_bin())
            .args(["--repo", repo.to_str().expect("utf-8"), "restore", &id, "--overwrite", "--to"])
            .arg(&target)
            .env("TROVE_FAILPOINT", point)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{point}: the failpoint must stop the restore");
        let replaced = assert_whole(&target, &files, point);
        match point {
            "restore:staged" | "restore:synced" => assert_eq!(replaced, 0, "{point}: nothing in place yet"),
            "restore:rename:first" => assert_eq!(replaced, 1, "{point}: exactly one file in place"),
            _ => assert_eq!(replaced, files.len(), "{point}: everything in place"),
        }
        // The next command's open cleans up, and says so in the audit log.
        let log = trove(&repo, &["--json", "audit", "log", "--limit", "5"]);
        assert!(log.status.success(), "{}", stderr(&log));
        assert!(!staging_left(&target), "{point}: the temporary files are removed on open");
        assert!(stdout(&log).contains("\"interrupted\""), "{point}: the interruption is audited: {}", stdout(&log));
        let again = trove(&repo, &["restore", &id, "--overwrite", "--to", target.to_str().expect("utf-8")]);
        assert!(again.status.success(), "{point}: {}", stderr(&again));
        assert_eq!(assert_whole(&target, &files, point), files.len(), "{point}: the rerun completes it");
    }
}

#[test]
fn kill_9_at_random_moments_of_a_restore_never_tears_a_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, id, files) = old_and_new(tmp.path());
    let target = tmp.path().join("target");
    put_old(&target, &files);
    let mut killed = 0;
    for delay_ms in [1u64, 5, 10, 20, 30, 45, 60, 80, 110, 150, 200, 300] {
        let mut child = Command::new(trove_bin())
            .args(["--repo", repo.to_str().expect("utf-8"), "restore", &id, "--overwrite", "--to"])
            .arg(&target)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        if !child.wait().expect("wait").success() {
            killed += 1;
        }
        assert_whole(&target, &files, &format!("kill after {delay_ms} ms"));
        put_old(&target, &files);
        // Opening cleans up whatever the kill left.
        assert!(trove(&repo, &["snapshots"]).status.success());
        assert!(!staging_left(&target), "kill after {delay_ms} ms: staging left after the next open");
    }
    assert!(killed > 0, "some kills must land before the restore finished");
}

/// A restore decodes each bundle about once, however its members are spread over the tree:
/// here every directory also holds a copy of another directory's file (as `node_modules` holds
/// the same files many times), whose only stored copy sits in a bundle far away in listing
/// order. Visiting files in listing order decoded such bundles again and again.
#[test]
fn a_restore_decodes_each_bundle_about_once_even_when_duplicates_scatter_its_members() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, target) = (tmp.path().join("ws"), tmp.path().join("target"));
    let mut rng = trove::sample::Rng::new(18);
    let dirs = 120;
    let mut own: Vec<Vec<u8>> = Vec::new();
    for d in 0..dirs {
        for f in 0..5 {
            // 38 MB in all: about ten 4 MiB bundles.
            let bytes = rng.bytes(64_000);
            if f == 0 {
                own.push(bytes.clone());
            }
            common::http::write(&ws.join(format!("p{d:03}/f{f}.js")), &bytes);
        }
    }
    for d in 0..dirs {
        common::http::write(&ws.join(format!("p{d:03}/copy.js")), &own[(d * 37 + 11) % dirs]);
    }
    // Reads of each (pack, offset): one per blob or bundle decoded.
    let reads: Arc<Mutex<HashMap<(String, u64), usize>>> = Arc::default();
    let counts = reads.clone();
    let backend = backend::Hooked::default().on_read(move |key, offset| {
        *counts.lock().expect("lock").entry((key.to_string(), offset)).or_default() += 1;
        Ok(())
    });
    let repo = Repo::with_backend(Box::new(backend)).expect("repo");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    reads.lock().expect("lock").clear();

    repo.restore(&snap, &target, &RestoreOptions::default()).expect("restore");
    for d in 0..dirs {
        assert_eq!(fs::read(target.join(format!("p{d:03}/copy.js"))).expect("copy"), own[(d * 37 + 11) % dirs]);
    }
    let reads = reads.lock().expect("lock");
    let (distinct, total) = (reads.len(), reads.values().sum::<usize>());
    assert!(distinct >= 8, "the workspace fills several bundles ({distinct} read)");
    // A bundle is read twice at most: the start of it for its first member (a lone read
    // decodes no more), then whole for the others; and each worker may start a run inside a
    // bundle the other one decodes too.
    assert!(total <= 2 * distinct + 4, "{total} reads of {distinct} stored blobs and bundles");
}
