//! Getting deleted work back (issue 13): restores by id, path (and `--before`) and prefix with
//! every conflict policy, into a parent that was itself deleted, in bulk with mixed outcomes;
//! operators deleting with `trove rm`; purges that take exactly what they listed; expiry by age
//! and quota; exports the system `tar` extracts byte for byte; all audited.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{stderr, stdout, trove};
use serde_json::{json, Value};
use trove::{
    BulkRestore, ErrorKind, OnConflict, PurgeReason, Repo, RestoreRequest, Restorer, TrashFilter, TrashSelection,
    TrashSet,
};

/// A repository with workspace `w` at `ws` (known through a session) and the session.
struct Fixture {
    _dir: tempfile::TempDir,
    repo_path: PathBuf,
    repo: Repo,
    ws: PathBuf,
    session: trove::Session,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_path = dir.path().join("repo");
    let ws = dir.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    let repo = Repo::init(&repo_path, "t").expect("init");
    let r = ws.clone();
    let spec = trove::SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let session = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    Fixture { _dir: dir, repo_path, repo, ws, session }
}

impl Fixture {
    fn write(&self, rel: &str, text: &str) {
        let p = self.ws.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    /// Deletes `paths` as an operator; their trash ids, in order.
    fn rm(&self, paths: &[&str]) -> Vec<trove::TrashId> {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        self.repo.remove_into_trash("w", &self.ws, &paths, "operator").expect("rm").into_iter().map(|t| t.id).collect()
    }

    fn restore(
        &self,
        selection: TrashSelection,
        to: Option<&str>,
        on_conflict: OnConflict,
        sha: Option<&str>,
    ) -> BulkRestore {
        let req = RestoreRequest {
            workspace: Some("w".into()),
            selection,
            to: to.map(str::to_string),
            on_conflict,
            expected_sha256: sha.map(str::to_string),
        };
        let ws = self.ws.clone();
        let live_dir = move |_: &str| Ok(ws.clone());
        self.repo.restore_trash(&req, &Restorer::Operator { actor: "operator", live_dir: &live_dir }).expect("restore")
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.ws.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn audit_ops(&self) -> Vec<(String, String, String)> {
        let log = self.repo.audit_log(None, 10_000).expect("log");
        log.iter()
            .map(|r| {
                let path =
                    r.record.path.as_deref().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default();
                (r.record.operation.clone(), r.record.outcome.clone(), path)
            })
            .collect()
    }
}

fn sha(text: &str) -> String {
    trove::testing::sha256_hex(text.as_bytes())
}

fn ids(v: &[trove::TrashId]) -> TrashSelection {
    TrashSelection::Ids(v.to_vec())
}

#[test]
fn every_conflict_policy_does_what_it_says() {
    let f = fixture();
    f.write("notes.md", "old\n");
    let item = f.rm(&["notes.md"]);
    f.write("notes.md", "new\n");

    // fail: refused, nothing changed, the refusal audited.
    let done = f.restore(ids(&item), None, OnConflict::Fail, None);
    assert_eq!((done.restored, done.failed), (0, 1));
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::AlreadyExists));
    assert_eq!(f.read("notes.md"), "new\n");
    assert!(f.audit_ops().contains(&("trash_restore".into(), "already_exists".into(), "notes.md".into())));

    // rename: beside it, under the documented suffix, then the next one.
    let done = f.restore(ids(&item), None, OnConflict::Rename, None);
    assert_eq!(done.items[0].restored.as_ref().map(|r| r.path.as_str()), Some("notes (restored).md"));
    let done = f.restore(ids(&item), None, OnConflict::Rename, None);
    assert_eq!(done.items[0].restored.as_ref().map(|r| r.path.as_str()), Some("notes (restored 2).md"));
    assert_eq!((f.read("notes (restored).md"), f.read("notes.md")), ("old\n".into(), "new\n".into()));

    // overwrite: needs the target's sha256; a wrong one is stale; the replaced file goes to the trash.
    let done = f.restore(ids(&item), None, OnConflict::Overwrite, None);
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::StaleFile));
    let done = f.restore(ids(&item), None, OnConflict::Overwrite, Some(&sha("other\n")));
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::StaleFile));
    assert_eq!(f.read("notes.md"), "new\n");
    let done = f.restore(ids(&item), None, OnConflict::Overwrite, Some(&sha("new\n")));
    let r = done.items[0].restored.clone().expect("restored");
    assert_eq!(f.read("notes.md"), "old\n");
    let replaced = f.repo.trash_item(&r.replaced_trash_id.expect("replaced")).expect("item");
    assert_eq!((replaced.reason.as_str(), replaced.sha256.map(|s| s.to_hex())), ("trash_restore", Some(sha("new\n"))));

    // merge: a directory into a directory, every collision reported, the rest restored.
    f.write("dir/a.txt", "a\n");
    f.write("dir/sub/b.txt", "b\n");
    f.write("dir/c.txt", "c\n");
    let dir = f.rm(&["dir"]);
    f.write("dir/a.txt", "A, changed since\n");
    let done = f.restore(ids(&dir), None, OnConflict::Fail, None);
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::AlreadyExists));
    let done = f.restore(ids(&dir), None, OnConflict::Merge, None);
    let r = done.items[0].restored.clone().expect("merged");
    assert_eq!(r.collisions, ["dir/a.txt"]);
    assert_eq!(
        (f.read("dir/a.txt"), f.read("dir/sub/b.txt"), f.read("dir/c.txt")),
        ("A, changed since\n".into(), "b\n".into(), "c\n".into())
    );
    // Merging again: everything is there, so nothing to do, said so.
    let done = f.restore(ids(&dir), None, OnConflict::Merge, None);
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::AlreadyExists));
    // Merge is for directories; overwrite for files.
    let done = f.restore(ids(&item), None, OnConflict::Merge, None);
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::AlreadyExists));
    let done = f.restore(ids(&dir), None, OnConflict::Overwrite, Some(&sha("x")));
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::InvalidArgument));
}

#[test]
fn a_file_comes_back_into_a_parent_that_was_itself_deleted() {
    let f = fixture();
    f.write("a/b.txt", "b\n");
    f.write("a/keep.txt", "k\n");
    fs::set_permissions(f.ws.join("a"), fs::Permissions::from_mode(0o750)).expect("chmod");
    let file = f.rm(&["a/b.txt"]);
    let parent = f.rm(&["a"]);
    assert!(!f.ws.join("a").exists());
    let done = f.restore(ids(&file), None, OnConflict::Fail, None);
    let r = done.items[0].restored.clone().expect("restored");
    assert_eq!(r.made_parents, ["a"]);
    assert_eq!(f.read("a/b.txt"), "b\n");
    let mode = fs::metadata(f.ws.join("a")).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o750, "the parent takes the mode it had when it was deleted");
    assert!(
        f.audit_ops().iter().any(|(op, out, p)| op == "trash_restore" && out == "ok" && p == "a"),
        "the mkdir is audited"
    );
    // The parent's item is still in the trash, and merges back around the restored file.
    let done = f.restore(ids(&parent), None, OnConflict::Merge, None);
    assert!(done.items[0].ok, "{done:?}");
    assert_eq!(f.read("a/keep.txt"), "k\n");
    // A deeper target: every missing level is made, outermost first.
    f.write("x/y/z.txt", "z\n");
    let deep = f.rm(&["x"]);
    let done = f.restore(ids(&deep), Some("p/q/x"), OnConflict::Fail, None);
    assert_eq!(done.items[0].restored.as_ref().map(|r| r.made_parents.clone()), Some(vec!["p".into(), "p/q".into()]));
    assert_eq!(f.read("p/q/x/y/z.txt"), "z\n");
}

#[test]
fn every_version_of_a_path_can_be_picked() {
    let f = fixture();
    let mut times = Vec::new();
    for v in ["one\n", "two\n", "three\n"] {
        f.write("v.txt", v);
        f.rm(&["v.txt"]);
        times.push(f.repo.trash("w", Some(b"v.txt")).expect("list")[0].deleted_ns);
    }
    let path = |before: Option<i64>| TrashSelection::Path { path: b"v.txt".to_vec(), before_ns: before };
    // The newest by path; with --before, the newest before then.
    assert!(f.restore(path(Some(times[1])), None, OnConflict::Fail, None).items[0].ok);
    assert_eq!(f.read("v.txt"), "one\n");
    let done = f.restore(path(None), None, OnConflict::Rename, None);
    assert_eq!(done.items[0].restored.as_ref().map(|r| r.path.as_str()), Some("v (restored).txt"));
    assert_eq!(f.read("v (restored).txt"), "three\n");
    // Any version by its id.
    let all = f.repo.trash("w", Some(b"v.txt")).expect("list");
    let two = all.iter().find(|t| t.deleted_ns == times[1]).expect("two");
    assert!(f.restore(ids(std::slice::from_ref(&two.id)), Some("two.txt"), OnConflict::Fail, None).items[0].ok);
    assert_eq!(f.read("two.txt"), "two\n");
    // Nothing before the first deletion.
    let req = RestoreRequest {
        workspace: Some("w".into()),
        selection: path(Some(times[0])),
        to: None,
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    let ws = f.ws.clone();
    let live_dir = move |_: &str| Ok(ws.clone());
    let e = f.repo.restore_trash(&req, &Restorer::Operator { actor: "o", live_dir: &live_dir }).expect_err("none");
    assert_eq!(e.kind(), ErrorKind::NotFound);
}

#[test]
fn a_bulk_restore_reports_every_outcome_and_never_stops_at_the_first() {
    let f = fixture();
    for p in ["src/a.rs", "src/b.rs", "src/c.rs", "docs/x.md"] {
        f.write(p, p);
    }
    let items = f.rm(&["src/a.rs", "src/b.rs", "src/c.rs", "docs/x.md"]);
    f.write("src/b.rs", "taken");
    let unknown: trove::TrashId = "trash_000000000000".parse().expect("id");
    let mut asked = items.clone();
    asked.insert(1, unknown.clone());
    let done = f.restore(ids(&asked), None, OnConflict::Fail, None);
    assert_eq!((done.restored, done.failed, done.items.len()), (3, 2, 5));
    let kinds: Vec<_> = done.items.iter().map(|o| (o.path.clone(), o.error.as_ref().map(|e| e.kind))).collect();
    assert!(kinds.contains(&(Some("src/b.rs".into()), Some(ErrorKind::AlreadyExists))), "{kinds:?}");
    assert!(kinds.contains(&(None, Some(ErrorKind::NotFound))), "{kinds:?}");
    assert_eq!(
        (f.read("src/a.rs"), f.read("src/c.rs"), f.read("docs/x.md")),
        ("src/a.rs".into(), "src/c.rs".into(), "docs/x.md".into())
    );
    // By prefix, re-rooted with `to`: the newest of each path under it.
    let again = f.rm(&["src"]);
    assert_eq!(again.len(), 1);
    fs::remove_file(f.ws.join("docs/x.md")).expect("rm");
    let done = f.restore(TrashSelection::Prefix(b"src".to_vec()), Some("old-src"), OnConflict::Fail, None);
    let paths: Vec<_> = done.items.iter().filter_map(|o| o.restored.as_ref().map(|r| r.path.clone())).collect();
    assert!(paths.contains(&"old-src".to_string()), "{done:?}");
    assert_eq!(f.read("old-src/b.rs"), "taken");
    // `to` with several ids is refused whole, changing nothing.
    let req = RestoreRequest {
        workspace: Some("w".into()),
        selection: ids(&items),
        to: Some("x".into()),
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    let ws = f.ws.clone();
    let live_dir = move |_: &str| Ok(ws.clone());
    let e = f.repo.restore_trash(&req, &Restorer::Operator { actor: "o", live_dir: &live_dir }).expect_err("to");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_session_restores_only_what_its_scope_reaches() {
    let f = fixture();
    f.write("src/a.rs", "a");
    f.write("secret/key", "k");
    let items = f.rm(&["src/a.rs", "secret/key"]);
    let spec: trove::SessionSpec =
        serde_json::from_value(json!({"workspace": "w", "file_access": {"read": ["src"], "write": ["src"]}}))
            .expect("spec");
    let ws = f.ws.clone();
    let narrow = f.repo.create_session(&spec, move |_| Ok(ws), "t").expect("session");
    let req = RestoreRequest {
        workspace: None,
        selection: ids(&items),
        to: None,
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    let done = f.repo.restore_trash(&req, &Restorer::Session { session: &narrow, actor: "agent" }).expect("restore");
    assert_eq!((done.restored, done.failed), (1, 1));
    let denied = done.items.iter().find(|o| !o.ok).expect("denied");
    assert_eq!(denied.error.as_ref().map(|e| e.kind), Some(ErrorKind::PermissionDenied));
    assert!(!f.ws.join("secret/key").exists());
    // An ended session restores nothing: its files are read-only.
    f.repo.end_session(&f.session.id, trove::EndReason::Deleted, "t").expect("end");
    let s = f.repo.session(&f.session.id).expect("s");
    let req = RestoreRequest {
        workspace: None,
        selection: ids(&items[1..]),
        to: None,
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    let done = f.repo.restore_trash(&req, &Restorer::Session { session: &s, actor: "agent" }).expect("restore");
    assert_eq!(done.items[0].error.as_ref().map(|e| e.kind), Some(ErrorKind::ReadOnly));
}

#[test]
fn an_operator_deletes_with_rm_all_or_nothing_and_audited() {
    let f = fixture();
    f.write("a.txt", "a");
    f.write("d/one", "1");
    f.write("d/two/three", "3");
    // One missing path: nothing is deleted.
    let paths = vec!["a.txt".to_string(), "missing".to_string()];
    let e = f.repo.remove_into_trash("w", &f.ws, &paths, "operator").expect_err("missing");
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(f.ws.join("a.txt").exists());
    // Overlapping paths are refused.
    let paths = vec!["d".to_string(), "d/one".to_string()];
    assert_eq!(
        f.repo.remove_into_trash("w", &f.ws, &paths, "operator").expect_err("overlap").kind(),
        ErrorKind::InvalidArgument
    );
    // From the command line: the OS user as actor, `rm` as the reason, a directory's file count.
    let out = trove(&f.repo_path, &["--json", "rm", "--workspace", "w", "a.txt", "d"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let items: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(items.as_array().map(Vec::len), Some(2));
    assert_eq!(items[1]["files"], json!(2));
    assert_eq!(items[0]["reason"], json!("rm"));
    assert!(items[0]["deletedBy"].as_str().is_some_and(|a| a.starts_with("cli:")), "{items}");
    assert!(items[0]["session"].is_null());
    assert!(!f.ws.join("a.txt").exists() && !f.ws.join("d").exists());
    let log = f.repo.audit_log(None, 100).expect("log");
    let rm: Vec<_> = log.iter().filter(|r| r.record.operation == "rm").collect();
    assert_eq!(rm.len(), 2);
    assert!(rm.iter().all(|r| r.record.actor.starts_with("cli:") && r.record.session.is_none()));
    // The content was in the store before the path went: it comes back whole.
    let restored = trove(&f.repo_path, &["trash", "restore", "--workspace", "w", "--prefix", "d"]);
    assert!(restored.status.success(), "{}", stdout(&restored));
    assert_eq!(f.read("d/two/three"), "3");
    // A workspace without a known directory is refused by name.
    let out = trove(&f.repo_path, &["rm", "--workspace", "nowhere", "x"]);
    assert!(!out.status.success() && stderr(&out).contains("nowhere"), "{}", stderr(&out));
}

#[test]
fn a_purge_takes_exactly_what_it_listed_when_it_started() {
    let f = fixture();
    for i in 0..5 {
        f.write(&format!("p/{i}.txt"), "x");
    }
    f.rm(&["p/0.txt", "p/1.txt", "p/2.txt"]);
    let all = TrashSet::Filter(TrashFilter {
        workspace: Some("w".into()),
        restored: trove::RestoredFilter::All,
        ..Default::default()
    });
    // The purge lists its items first...
    let listed: Vec<_> =
        f.repo.trash_set(&all).expect("list").into_iter().map(|t| (t, PurgeReason::Operator)).collect();
    assert_eq!(listed.len(), 3);
    // ... a deletion lands while it runs ...
    let late = f.rm(&["p/3.txt"]);
    // ... and only what it listed goes.
    let report = f.repo.purge_trash(&listed, false, "operator").expect("purge");
    assert_eq!(report.purged, 3);
    let left = f.repo.trash_set(&all).expect("left");
    assert_eq!(left.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), late);
    // Purged again (another purge got there first): nothing, no error.
    assert_eq!(f.repo.purge_trash(&listed, false, "operator").expect("again").purged, 0);
    // Every purge is audited with what the item was.
    let purges: Vec<_> =
        f.repo.audit_log(None, 100).expect("log").into_iter().filter(|r| r.record.operation == "trash_purge").collect();
    assert_eq!(purges.len(), 3);
    assert!(purges.iter().all(|r| r.record.before_sha256.is_some() && r.record.details["trashId"].is_string()));
    // The objects stay for garbage collection: the store still verifies, a snapshot still reads.
    let check = trove(&f.repo_path, &["check"]);
    assert!(check.status.success(), "{}", stdout(&check));
    // From the command line: a dry run changes nothing; --all needs a workspace.
    let out = trove(&f.repo_path, &["--json", "trash", "purge", "--all", "--workspace", "w", "--dry-run"]);
    let report: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!((report["dryRun"].clone(), report["purged"].clone()), (json!(true), json!(1)));
    assert_eq!(f.repo.trash_set(&all).expect("left").len(), 1);
    assert!(!trove(&f.repo_path, &["trash", "purge", "--all"]).status.success());
    let out = trove(&f.repo_path, &["trash", "purge", "--older-than", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(f.repo.trash_set(&all).expect("left").is_empty());
}

#[test]
fn retention_expires_by_age_and_by_quota_oldest_first() {
    let f = fixture();
    for (i, size) in [(0, 100), (1, 200), (2, 300)] {
        f.write(&format!("q{i}.bin"), &"x".repeat(size));
        f.rm(&[&format!("q{i}.bin")]);
    }
    let r = f.repo.trash_retention("w", None, None, "t").expect("show");
    assert_eq!((r.trash_age_seconds, r.default_age, r.trash_quota), (30 * 86_400, true, None));
    assert!(f.repo.expired_trash(None).expect("expired").is_empty());
    // A quota of 550 bytes keeps the two newest (500 bytes).
    let out = trove(&f.repo_path, &["--json", "workspace", "retention", "w", "--trash-quota", "550"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expired = f.repo.expired_trash(Some("w")).expect("expired");
    let which: Vec<_> = expired.iter().map(|(t, why)| (String::from_utf8_lossy(&t.path).into_owned(), *why)).collect();
    assert_eq!(which, [("q0.bin".to_string(), PurgeReason::Quota)]);
    let out = trove(&f.repo_path, &["--json", "trash", "expire"]);
    let report: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(report["items"][0]["reason"], json!("quota"));
    // An age of one second expires the rest once they are older.
    let out = trove(&f.repo_path, &["workspace", "retention", "w", "--trash-age", "1s", "--trash-quota", "none"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let report = f.repo.purge_trash(&f.repo.expired_trash(None).expect("expired"), false, "t").expect("purge");
    assert_eq!((report.purged, report.items.iter().all(|p| p.reason == "age")), (2, true));
    let log = f.repo.audit_log(None, 100).expect("log");
    assert_eq!(log.iter().filter(|r| r.record.operation == "trash_expire").count(), 3);
    assert!(log.iter().any(|r| r.record.operation == "workspace_retention"));
    for bad in [&["--trash-age", "soon"][..], &["--trash-age", "0s"], &["--trash-quota", "-1"]] {
        let mut args = vec!["workspace", "retention", "w"];
        args.extend_from_slice(bad);
        assert_eq!(trove(&f.repo_path, &args).status.code(), Some(2), "{bad:?}");
    }
}

/// Every entry under `dir`: (path, kind, mode, bytes).
fn listing(dir: &Path) -> Vec<(String, char, u32, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.expect("walk");
        let rel = e.path().strip_prefix(dir).expect("rel").to_string_lossy().into_owned();
        let m = fs::symlink_metadata(e.path()).expect("lstat");
        let (kind, body) = if m.file_type().is_symlink() {
            ('l', fs::read_link(e.path()).expect("link").to_string_lossy().into_owned().into_bytes())
        } else if m.is_dir() {
            ('d', Vec::new())
        } else {
            ('f', fs::read(e.path()).expect("read"))
        };
        out.push((rel, kind, m.permissions().mode() & 0o777, body));
    }
    out
}

#[test]
fn an_export_extracts_with_the_system_tar_byte_for_byte() {
    let f = fixture();
    f.write("keep/a.txt", "alpha\n");
    f.write("keep/sub/b.bin", &"b".repeat(3 << 20));
    fs::set_permissions(f.ws.join("keep/a.txt"), fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink("a.txt", f.ws.join("keep/link")).expect("symlink");
    f.write("solo.sh", "#!/bin/sh\n");
    fs::set_permissions(f.ws.join("solo.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    let mtime = fs::metadata(f.ws.join("solo.sh")).expect("stat").modified().expect("mtime");
    let before = listing(&f.ws);
    f.rm(&["keep", "solo.sh"]);
    let out_dir = f._dir.path().join("out");
    for (name, zstd) in [("trash.tar", false), ("trash.tar.zst", true)] {
        let file = f._dir.path().join(name);
        let out =
            trove(&f.repo_path, &["--json", "trash", "export", "--workspace", "w", "-o", file.to_str().expect("utf8")]);
        assert!(out.status.success(), "{}", stderr(&out));
        let shown: Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!((shown["items"].clone(), shown["zstd"].clone()), (json!(2), json!(zstd)));
        let _ = fs::remove_dir_all(&out_dir);
        fs::create_dir_all(&out_dir).expect("mkdir");
        let mut tar = Command::new("tar");
        tar.arg("-x").arg("-p").arg("-C").arg(&out_dir);
        if zstd {
            tar.arg("--zstd");
        }
        let status = tar.arg("-f").arg(&file).status().expect("run tar");
        assert!(status.success(), "tar -x {name}");
        assert_eq!(listing(&out_dir), before, "{name}");
        let got = fs::metadata(out_dir.join("solo.sh")).expect("stat").modified().expect("mtime");
        let secs = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).expect("epoch").as_secs();
        assert_eq!(secs(got), secs(mtime), "{name}: the mtime is kept");
    }
    // Ids select single items; to stdout when it is not a terminal.
    let id = f.repo.trash("w", Some(b"solo.sh")).expect("list")[0].id.to_string();
    let out = trove(&f.repo_path, &["trash", "export", &id]);
    assert!(out.status.success());
    let mut archive = tar::Archive::new(&out.stdout[..]);
    let names: Vec<String> = archive
        .entries()
        .expect("entries")
        .map(|e| e.expect("entry").path().expect("path").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["solo.sh"]);
}

#[test]
fn the_cli_restores_by_id_path_and_prefix_and_exits_1_on_a_refusal() {
    let f = fixture();
    f.write("x.txt", "x\n");
    f.rm(&["x.txt"]);
    let out = trove(&f.repo_path, &["--json", "trash", "restore", "--workspace", "w", "--path", "x.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(done["restored"], json!(1));
    // The same again: the item is restored, a path restore takes only unrestored deletions.
    let out = trove(&f.repo_path, &["trash", "restore", "--workspace", "w", "--path", "x.txt"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    // By id, onto the file that is there: refused, exit 1, the refusal printed.
    let id = f.repo.trash("w", Some(b"x.txt")).expect("list")[0].id.to_string();
    let out = trove(&f.repo_path, &["trash", "restore", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("refused") && stdout(&out).contains("already exists"), "{}", stdout(&out));
    // The advice names the command line's flags, not the HTTP API's parameters.
    assert!(stdout(&out).contains("--on-conflict rename") && !stdout(&out).contains("onConflict"), "{}", stdout(&out));
    let out = trove(&f.repo_path, &["--json", "trash", "restore", &id]);
    assert!(stdout(&out).contains("--on-conflict") && !stdout(&out).contains("onConflict"), "{}", stdout(&out));
    let out = trove(&f.repo_path, &["trash", "restore", &id, "--on-conflict", "rename"]);
    assert!(out.status.success() && stdout(&out).contains("x (restored).txt"), "{}", stdout(&out));
    // A path or prefix without its workspace is a usage error naming what to add.
    let out = trove(&f.repo_path, &["trash", "restore", "--path", "x.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("workspace"), "{}", stderr(&out));
}

#[test]
fn a_prefix_restore_re_roots_byte_for_byte_even_from_the_root() {
    use std::os::unix::ffi::OsStrExt;
    let f = fixture();
    f.write("top.txt", "t");
    f.write("d/e.txt", "e");
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(f.ws.join("d").join(odd), "latin-1").expect("write");
    f.rm(&["top.txt", "d"]);
    // The whole workspace (an empty prefix) under `back/`.
    let done = f.restore(TrashSelection::Prefix(Vec::new()), Some("back"), OnConflict::Fail, None);
    assert_eq!((done.restored, done.failed), (2, 0), "{done:?}");
    assert_eq!((f.read("back/top.txt"), f.read("back/d/e.txt")), ("t".into(), "e".into()));
    assert_eq!(fs::read(f.ws.join("back/d").join(odd)).expect("the name's bytes are kept"), b"latin-1");
    // `to` follows the request path rules: no backslash, not the root.
    let item = f.repo.trash("w", Some(b"top.txt")).expect("list")[0].id.clone();
    for bad in ["a\\b", ".", "../x"] {
        let req = RestoreRequest {
            workspace: Some("w".into()),
            selection: ids(std::slice::from_ref(&item)),
            to: Some(bad.into()),
            on_conflict: OnConflict::Fail,
            expected_sha256: None,
        };
        let ws = f.ws.clone();
        let live_dir = move |_: &str| Ok(ws.clone());
        let e = f.repo.restore_trash(&req, &Restorer::Operator { actor: "o", live_dir: &live_dir }).expect_err(bad);
        assert!(matches!(e.kind(), ErrorKind::InvalidPath | ErrorKind::InvalidArgument), "{bad}: {e}");
    }
}

#[test]
fn a_merge_that_left_members_out_keeps_the_item_in_the_trash() {
    let f = fixture();
    f.write("m/a.txt", "a");
    f.write("m/b.txt", "b");
    let item = f.rm(&["m"]);
    f.write("m/a.txt", "mine");
    let done = f.restore(ids(&item), None, OnConflict::Merge, None);
    assert_eq!(done.items[0].restored.as_ref().map(|r| r.collisions.clone()), Some(vec!["m/a.txt".into()]));
    // Not marked restored: the default listing still shows it, ready for another restore.
    let listed = f.repo.trash_page(&TrashFilter::default(), |_| true).expect("list");
    assert_eq!(listed.items.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), item);
    assert!(!listed.items[0].restored);
    let done = f.restore(ids(&item), Some("elsewhere"), OnConflict::Fail, None);
    assert!(done.items[0].ok, "{done:?}");
    assert_eq!(f.read("elsewhere/a.txt"), "a");
}

#[test]
fn a_session_is_not_told_where_an_item_it_cannot_read_was() {
    let f = fixture();
    f.write("secret/plan.md", "s");
    let item = f.rm(&["secret/plan.md"]);
    let spec: trove::SessionSpec =
        serde_json::from_value(json!({"workspace": "w", "file_access": {"read": ["src"], "write": ["src"]}}))
            .expect("spec");
    let ws = f.ws.clone();
    let narrow = f.repo.create_session(&spec, move |_| Ok(ws), "t").expect("session");
    let req = RestoreRequest {
        workspace: None,
        selection: ids(&item),
        to: None,
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    let done = f.repo.restore_trash(&req, &Restorer::Session { session: &narrow, actor: "agent" }).expect("restore");
    let o = &done.items[0];
    assert_eq!((o.path.as_deref(), o.error.as_ref().map(|e| e.kind)), (None, Some(ErrorKind::PermissionDenied)));
    let text = serde_json::to_string(&done).expect("json");
    assert!(!text.contains("secret"), "{text}");
}

#[test]
fn reverting_a_deletion_names_the_record_it_reverts() {
    let f = fixture();
    f.write("r.txt", "r");
    let s = f.repo.session(&f.session.id).expect("s");
    let call = trove::tools::ToolCall::parse("delete_file", json!({"path": "r.txt"})).expect("parse");
    let out = trove::tools::run(&f.repo, &s, call, "agent").expect("delete").to_json();
    let seq = out["auditSeq"].as_i64().expect("seq");
    let r = f.repo.revert(seq, "operator").expect("revert");
    assert_eq!(
        (r.path.as_str(), r.restored_trash_id.as_ref().map(|t| t.to_string())),
        ("r.txt", out["trashId"].as_str().map(str::to_string))
    );
    let rec = f.repo.audit_record(r.audit_seq.expect("seq")).expect("read").expect("record").record;
    assert_eq!((rec.operation.as_str(), rec.details["reverts"].as_i64()), ("revert", Some(seq)));
    assert_eq!(f.read("r.txt"), "r");
}

#[test]
fn the_quota_counts_what_is_still_in_the_trash_and_a_purge_needs_a_real_prefix() {
    let f = fixture();
    for (i, size) in [(0, 300), (1, 300)] {
        f.write(&format!("z{i}.bin"), &"z".repeat(size));
        f.rm(&[&format!("z{i}.bin")]);
    }
    let newest = f.repo.trash("w", Some(b"z1.bin")).expect("list")[0].id.clone();
    assert!(f.restore(ids(&[newest]), None, OnConflict::Fail, None).items[0].ok);
    // 300 bytes still in the trash under a 400-byte quota: nothing expires.
    f.repo.trash_retention("w", None, Some(Some(400)), "t").expect("quota");
    assert!(f.repo.expired_trash(Some("w")).expect("expired").is_empty());
    assert_eq!(
        f.repo.trash_retention("w", None, Some(Some(0)), "t").expect_err("0").kind(),
        ErrorKind::InvalidArgument
    );
    for prefix in [".", ""] {
        let out = trove(&f.repo_path, &["trash", "purge", "--prefix", prefix]);
        assert_eq!(out.status.code(), Some(2), "{prefix:?}: {}", stderr(&out));
    }
    assert_eq!(
        f.repo
            .trash_set(&TrashSet::Filter(TrashFilter { restored: trove::RestoredFilter::All, ..Default::default() }))
            .expect("left")
            .len(),
        2
    );
}
