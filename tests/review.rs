//! Post-session review (issue 15): diffs between snapshots and against the live tree (renames,
//! modes, types, binary files, symlinks, non-UTF-8 names, deep trees), what a session changed
//! with its audit records and trash ids, a path's history across renames, search inside a
//! snapshot, and find across snapshots; from the library, the CLI and HTTP.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::http::{self, TOKEN};
use common::{set_mode, stdout, trove};
use serde_json::{json, Value};
use trove::{
    ChangeStatus, DiffOptions, DiffTarget, Matcher, Repo, Scope, SearchMode, SearchSpec, SessionSpec, SnapshotInfo,
    SnapshotOptions, VersionOrigin,
};

fn snap(repo: &Repo, dir: &Path) -> SnapshotInfo {
    let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    repo.snapshot(dir, &opts).expect("snapshot")
}

fn write(dir: &Path, rel: &str, bytes: &[u8]) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, bytes).expect("write");
}

/// (status, path, old path) of each entry.
fn shape(r: &trove::DiffReport) -> Vec<(ChangeStatus, String, Option<String>)> {
    r.entries.iter().map(|e| (e.status, e.path.clone(), e.old_path.clone())).collect()
}

const POEM: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n";

#[test]
fn a_diff_names_every_kind_of_change_and_skips_what_it_is_not_asked() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    write(&w, "src/lib.rs", b"fn a() {}\nfn b() {}\n");
    write(&w, "src/same.txt", b"unchanged\n");
    write(&w, "docs/poem.txt", POEM.as_bytes());
    write(&w, "docs/exact.md", b"moved whole\n");
    write(&w, "bin/tool", b"\x00\x01\x02binary");
    write(&w, "run.sh", b"#!/bin/sh\n");
    write(&w, "becomes-link", b"text\n");
    write(&w, "gone.txt", b"bye\n");
    std::os::unix::fs::symlink("src/lib.rs", w.join("link")).expect("symlink");
    let name = OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(w.join(name), b"latin-1 name\n").expect("write");
    let a = snap(&repo, &w);

    write(&w, "src/lib.rs", b"fn a() {}\nfn b2() {}\nfn c() {}\n");
    fs::rename(w.join("docs/poem.txt"), w.join("poem2.txt")).expect("mv");
    write(&w, "poem2.txt", POEM.replace("ten", "TEN").as_bytes());
    fs::create_dir_all(w.join("archive")).expect("mkdir");
    fs::rename(w.join("docs/exact.md"), w.join("archive/exact.md")).expect("mv");
    write(&w, "bin/tool", b"\x00\x01\x03binary!");
    set_mode(&w.join("run.sh"), 0o755);
    fs::remove_file(w.join("becomes-link")).expect("rm");
    std::os::unix::fs::symlink("run.sh", w.join("becomes-link")).expect("symlink");
    fs::remove_file(w.join("link")).expect("rm");
    std::os::unix::fs::symlink("src/same.txt", w.join("link")).expect("symlink");
    fs::remove_file(w.join("gone.txt")).expect("rm");
    write(&w, "new/deep.txt", b"new\n");
    fs::write(w.join(name), b"latin-1 name, changed\n").expect("write");
    let b = snap(&repo, &w);

    let opts = DiffOptions { patch: true, ..DiffOptions::default() };
    let r = repo
        .diff(&DiffTarget::Snapshot(Box::new(a.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &opts)
        .expect("diff");
    use ChangeStatus::*;
    let want = vec![
        (Renamed, "archive/exact.md".to_string(), Some("docs/exact.md".to_string())),
        (TypeChanged, "becomes-link".into(), None),
        (Modified, "bin/tool".into(), None),
        (Modified, "caf\u{fffd}.txt".into(), None),
        (Deleted, "gone.txt".into(), None),
        (Modified, "link".into(), None),
        (Added, "new/deep.txt".into(), None),
        (Renamed, "poem2.txt".into(), Some("docs/poem.txt".into())),
        (ModeChanged, "run.sh".into(), None),
        (Modified, "src/lib.rs".into(), None),
    ];
    assert_eq!(shape(&r), want);
    let entry = |p: &str| r.entries.iter().find(|e| e.path == p).expect(p);
    assert_eq!(entry("archive/exact.md").similarity, Some(100));
    assert_eq!(entry("poem2.txt").similarity, Some(91), "the bytes of shared lines over the larger size");
    assert!(entry("bin/tool").binary);
    assert!(entry("bin/tool")
        .patch
        .as_deref()
        .expect("patch")
        .contains("Binary files a/bin/tool and b/bin/tool differ"));
    assert_eq!(entry("caf\u{fffd}.txt").path_base64.as_deref(), Some("Y2Fm6S50eHQ="), "exact bytes kept");
    let lib = entry("src/lib.rs");
    assert_eq!((lib.lines_added, lib.lines_removed), (Some(2), Some(1)));
    let patch = lib.patch.as_deref().expect("patch");
    assert!(patch.starts_with("diff --git a/src/lib.rs b/src/lib.rs\nindex "), "{patch}");
    assert!(patch.contains(
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn b2() {}\n+fn c() {}\n"
    ));
    assert!(entry("run.sh").patch.as_deref().expect("patch").contains("old mode 100644\nnew mode 100755\n"));
    assert_eq!(entry("link").new.as_ref().and_then(|v| v.target.as_deref()), Some("src/same.txt"));
    assert_eq!(r.stats.changed, 10);
    assert_eq!((r.stats.renamed, r.stats.added, r.stats.deleted), (2, 1, 1));

    // Without rename detection a rename is a deletion and an addition.
    let plain = DiffOptions { renames: None, ..DiffOptions::default() };
    let r2 = repo
        .diff(&DiffTarget::Snapshot(Box::new(a.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &plain)
        .expect("diff");
    assert_eq!(r2.stats.renamed, 0);
    assert_eq!(r2.stats.changed, 12);
    // Only identical content at 100%.
    let exact = DiffOptions { renames: Some(100), ..DiffOptions::default() };
    let r3 = repo
        .diff(&DiffTarget::Snapshot(Box::new(a.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &exact)
        .expect("diff");
    assert_eq!(r3.stats.renamed, 1);

    // A path filter and a scope: only what both select.
    let scoped = DiffOptions {
        paths: vec![b"src".to_vec(), b"docs".to_vec()],
        scope: Scope::new("sess_000000000001", &trove::FileAccess { read: vec!["src".into()], write: vec![] })
            .expect("scope"),
        ..DiffOptions::default()
    };
    let r4 = repo
        .diff(&DiffTarget::Snapshot(Box::new(a.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &scoped)
        .expect("diff");
    assert_eq!(shape(&r4), vec![(Modified, "src/lib.rs".to_string(), None)]);

    // A limit keeps the totals whole.
    let few = DiffOptions { limit: Some(3), ..DiffOptions::default() };
    let r5 = repo
        .diff(&DiffTarget::Snapshot(Box::new(a.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &few)
        .expect("diff");
    assert_eq!((r5.entries.len(), r5.truncated, r5.stats.changed), (3, true, 10));

    // A snapshot against itself, and the reverse direction.
    let same = repo
        .diff(&DiffTarget::Snapshot(Box::new(b.clone())), &DiffTarget::Snapshot(Box::new(b.clone())), &opts)
        .expect("diff");
    assert!(same.entries.is_empty());
    let back = repo
        .diff(&DiffTarget::Snapshot(Box::new(b.clone())), &DiffTarget::Snapshot(Box::new(a.clone())), &opts)
        .expect("diff");
    assert_eq!((back.stats.added, back.stats.deleted, back.stats.renamed), (1, 1, 2));

    // The live tree: a change not yet snapshotted, nothing stored by looking.
    write(&w, "src/same.txt", b"changed live\n");
    let live = DiffTarget::Live { dir: w.clone(), workspace: "w".into() };
    let before = repo.snapshots(None).expect("list").len();
    let r6 = repo.diff(&DiffTarget::Snapshot(Box::new(b.clone())), &live, &DiffOptions::default()).expect("diff live");
    assert_eq!(shape(&r6), vec![(Modified, "src/same.txt".to_string(), None)]);
    assert_eq!(repo.snapshots(None).expect("list").len(), before);
}

#[test]
fn a_directory_replacing_a_file_and_a_deep_tree_diff_without_recursion() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    write(&w, "x", b"file\n");
    let deep: String = (0..300).map(|i| format!("d{i}/")).collect();
    write(&w, &format!("{deep}leaf.txt"), b"one\n");
    let a = snap(&repo, &w);
    fs::remove_file(w.join("x")).expect("rm");
    write(&w, "x/inside.txt", b"now a directory\n");
    write(&w, &format!("{deep}leaf.txt"), b"two\n");
    let b = snap(&repo, &w);
    let r = repo
        .diff(&DiffTarget::Snapshot(Box::new(a)), &DiffTarget::Snapshot(Box::new(b)), &DiffOptions::default())
        .expect("diff");
    use ChangeStatus::*;
    assert_eq!(
        shape(&r),
        vec![
            (Modified, format!("{deep}leaf.txt"), None),
            (Deleted, "x".to_string(), None),
            (Added, "x/inside.txt".to_string(), None),
        ]
    );
}

fn tool(repo: &Repo, id: &trove::SessionId, name: &str, p: Value) -> Value {
    let call = trove::tools::ToolCall::parse(name, p).expect("parse");
    trove::tools::run(repo, &repo.session(id).expect("session"), call, "agent").expect(name).to_json()
}

/// A session's changes asked while a tool's write is staged (its temporary in the tree, its
/// plan journaled): trove's own temporary is not one of the workspace's changes. With nothing
/// of trove's in flight, a file or a directory an agent names like one is its own, and listed.
#[test]
fn a_live_diff_leaves_out_a_change_in_flight_but_not_an_agents_lookalike() {
    let tmp = tempfile::tempdir().expect("tmp");
    let at = tmp.path().join("repo");
    let repo = Repo::init(&at, "t").expect("init");
    let w = tmp.path().join("w");
    write(&w, "edit.txt", b"old\n");
    let r = w.clone();
    let spec = SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    tool(&repo, &s.id, "create_file", json!({"path": "made.txt", "content": "made\n"}));

    let seen = std::rc::Rc::new(std::cell::RefCell::new(None));
    let (id, got) = (s.id.clone(), seen.clone());
    trove::testing::set_hook("write_file:staged", move || {
        let temps = fs::read_dir(&w)
            .expect("ls")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".trove-op_"))
            .count();
        let other = Repo::open(&at).expect("open");
        let s = other.session(&id).expect("session");
        let c = other.session_changes(&s, &DiffOptions::default()).expect("changes in flight");
        *got.borrow_mut() = Some((temps, c.entries.iter().map(|e| e.change.path.clone()).collect::<Vec<_>>()));
    });
    let sha = tool(&repo, &s.id, "read_file", json!({"path": "edit.txt"}))["sha256"].as_str().expect("sha").to_string();
    tool(&repo, &s.id, "write_file", json!({"path": "edit.txt", "content": "new\n", "expectedSha256": sha}));
    trove::testing::clear_hooks();
    let (temps, in_flight) = seen.borrow_mut().take().expect("the hook ran");
    assert_eq!(temps, 1, "the write's temporary was in the tree");
    assert_eq!(in_flight, ["made.txt"], "and not listed");

    let w = tmp.path().join("w");
    write(&w, ".trove-op_0123456789ab-0.tmp", b"the agent's\n");
    write(&w, "sub/.trove-op_0123456789ab-1.del/x", b"the agent's\n");
    let named = repo.session_changes(&s, &DiffOptions::default()).expect("changes");
    let paths: Vec<&str> = named.entries.iter().map(|e| e.change.path.as_str()).collect();
    assert_eq!(paths, [".trove-op_0123456789ab-0.tmp", "edit.txt", "made.txt", "sub/.trove-op_0123456789ab-1.del/x"]);
}

#[test]
fn session_changes_name_the_records_and_the_trash_ids_of_each_path() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    write(&w, "keep.txt", b"keep\n");
    write(&w, "edit.txt", b"old\n");
    write(&w, "doomed.txt", b"doomed\n");
    let r = w.clone();
    let spec = SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    let start = repo.session_start(&s).expect("start");
    assert!(matches!(&start, DiffTarget::Snapshot(x) if x.reason == "session_start"), "a baseline was taken");

    let sha = tool(&repo, &s.id, "read_file", json!({"path": "edit.txt"}))["sha256"].as_str().expect("sha").to_string();
    tool(&repo, &s.id, "write_file", json!({"path": "edit.txt", "content": "new\n", "expectedSha256": sha}));
    tool(&repo, &s.id, "create_file", json!({"path": "made.txt", "content": "made\n"}));
    tool(&repo, &s.id, "delete_file", json!({"path": "doomed.txt"}));
    tool(&repo, &s.id, "create_file", json!({"path": "brief.txt", "content": "x\n"}));
    tool(&repo, &s.id, "delete_file", json!({"path": "brief.txt"}));
    let check = |c: &trove::SessionChanges| {
        let paths: Vec<(ChangeStatus, &str)> =
            c.entries.iter().map(|e| (e.change.status, e.change.path.as_str())).collect();
        assert_eq!(
            paths,
            vec![
                (ChangeStatus::Deleted, "doomed.txt"),
                (ChangeStatus::Modified, "edit.txt"),
                (ChangeStatus::Added, "made.txt")
            ]
        );
        let doomed = &c.entries[0];
        assert_eq!(doomed.records.iter().map(|r| r.operation.as_str()).collect::<Vec<_>>(), ["delete_file"]);
        assert_eq!(doomed.trash.len(), 1, "restorable from the same answer");
        assert_eq!(c.entries[1].records.iter().map(|r| r.operation.as_str()).collect::<Vec<_>>(), ["write_file"]);
        assert_eq!(c.entries[1].records[0].actor, "agent");
        assert_eq!(c.trash.len(), 2, "brief.txt too, though the diff cannot show it");
    };
    let live = repo.session_changes(&s, &DiffOptions::default()).expect("changes");
    assert!(live.active);
    assert_eq!(live.to.kind, trove::EndpointKind::Live);
    check(&live);

    // The restore the answer points at works.
    let id = live.entries[0].trash[0].id.clone();
    let out = trove(&tmp.path().join("repo"), &["trash", "restore", id.as_str()]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(fs::read(w.join("doomed.txt")).expect("restored"), b"doomed\n");
    fs::remove_file(w.join("doomed.txt")).expect("rm");

    let ended = repo.end_session(&s.id, trove::EndReason::Deleted, "t").expect("end");
    let after = repo.session_changes(&ended, &DiffOptions::default()).expect("changes");
    assert!(!after.active);
    assert_eq!(after.to.kind, trove::EndpointKind::Snapshot);
    check(&after);

    // The CLI shows the same, and git's --name-status.
    let repo_path = tmp.path().join("repo");
    let out = trove(&repo_path, &["session", "changes", s.id.as_str(), "--name-status"]);
    assert_eq!(stdout(&out), "D\tdoomed.txt\nM\tedit.txt\nA\tmade.txt\n");
    let out = trove(&repo_path, &["--json", "session", "changes", s.id.as_str()]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["entries"][1]["records"][0]["operation"], "write_file");
}

#[test]
fn log_follows_a_path_across_renames_and_names_the_change_behind_each_version() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    let r = w.clone();
    write(&w, "seed.txt", b"seed\n");
    let spec = SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    tool(&repo, &s.id, "create_file", json!({"path": "a.txt", "content": POEM}));
    repo.snapshot_session(&s, "manual", "t").expect("snap");
    let sha = trove::tools::read::sha256_hex(POEM.as_bytes());
    tool(
        &repo,
        &s.id,
        "write_file",
        json!({"path": "a.txt", "content": format!("{POEM}eleven\n"), "expectedSha256": sha}),
    );
    repo.snapshot_session(&s, "manual", "t").expect("snap");
    tool(&repo, &s.id, "move_file", json!({"from": "a.txt", "to": "b.txt"}));
    repo.snapshot_session(&s, "manual", "t").expect("snap");
    repo.snapshot_session(&s, "manual", "t").expect("snap (unchanged)");

    let log = repo.path_log("w", b"b.txt", false, &Scope::whole()).expect("log");
    assert_eq!(log.versions.len(), 1);
    assert_eq!(log.versions[0].version.snapshots, 2, "one version held by two snapshots");
    assert!(log.versions[0].version.current);

    let log = repo.path_log("w", b"b.txt", true, &Scope::whole()).expect("log --follow");
    let seen: Vec<(&str, VersionOrigin)> = log.versions.iter().map(|v| (v.version.path.as_str(), v.origin)).collect();
    assert_eq!(
        seen,
        vec![("b.txt", VersionOrigin::Renamed), ("a.txt", VersionOrigin::Modified), ("a.txt", VersionOrigin::Added)]
    );
    assert_eq!(log.versions[0].renamed_from.as_deref(), Some("a.txt"));
    assert!(log.versions[2].gone_in.is_none() && log.versions[1].gone_in.is_some());
    let ops: Vec<Option<&str>> = log.versions.iter().map(|v| v.change.as_ref().map(|c| c.operation.as_str())).collect();
    assert_eq!(ops, vec![Some("move_file"), Some("write_file"), Some("create_file")]);

    let e = repo.path_log("w", b"never.txt", false, &Scope::whole()).expect_err("unknown path");
    assert_eq!(e.kind(), trove::ErrorKind::NotFound);

    // find: by name, by glob over names, by a path glob; incremental after a new snapshot.
    let found = repo.find_paths("a.txt", None, false, 100).expect("find");
    assert_eq!(found.matches.len(), 2, "two versions of a.txt");
    assert!(found.matches.iter().all(|m| m.path == "a.txt" && !m.current));
    let found = repo.find_paths("*.TXT", Some("w"), true, 100).expect("find");
    assert_eq!(found.paths, 3, "a.txt, b.txt, seed.txt");
    write(&w, "sub/c.txt", b"c\n");
    repo.snapshot_session(&s, "manual", "t").expect("snap");
    let found = repo.find_paths("sub/*.txt", Some("w"), false, 100).expect("find");
    assert_eq!(found.matches.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), ["sub/c.txt"]);
    let found = repo.find_paths("*.txt", Some("w"), false, 1).expect("find");
    assert!(found.truncated && found.matches.len() == 1);

    let out = trove(&tmp.path().join("repo"), &["log", "--workspace", "w", "b.txt", "--follow"]);
    assert!(stdout(&out).contains("renamed from a.txt"), "{}", stdout(&out));
    let out = trove(&tmp.path().join("repo"), &["find", "nothing-like-it"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn grep_searches_a_snapshot_in_path_order_with_context_filters_and_a_cap() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    for i in 0..40 {
        write(&w, &format!("src/f{i:02}.rs"), format!("// file {i}\nfn main() {{}}\nlet x = {i};\n").as_bytes());
    }
    write(&w, "docs/readme.md", b"fn is not code here\nFN upper\n");
    write(&w, "bin/blob", b"fn\x00binary fn\n");
    let big = "fn big\n".repeat(300_000);
    write(&w, "big.txt", big.as_bytes());
    let s = snap(&repo, &w);
    let search = |spec: SearchSpec, max: usize| {
        repo.search_snapshot(&s, &Scope::whole(), &Matcher::new(&spec).expect("matcher"), max).expect("search")
    };
    let regex = |p: &str| SearchSpec { pattern: p.into(), mode: SearchMode::Regex, ..SearchSpec::default() };

    let r = search(SearchSpec { include: vec!["*.rs".into()], ..regex(r"^fn \w+") }, 1000);
    assert_eq!(r.matches.len(), 40);
    let paths: Vec<&str> = r.matches.iter().map(|m| m.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "path order");
    assert_eq!((r.matches[0].line, r.matches[0].column), (2, 1));

    // The cap stops at exactly the same place a file-by-file search would.
    let r = search(SearchSpec { include: vec!["*.rs".into()], ..regex("fn") }, 7);
    assert_eq!((r.matches.len(), r.truncated), (7, true));
    assert_eq!(r.matches[6].path, "src/f06.rs");

    // Context lines, case, exclude, a directory; binary files are not searched.
    let r = search(SearchSpec { context: 1, path: "src".into(), ..regex("main") }, 1);
    assert_eq!(r.matches[0].context_before, ["// file 0"]);
    assert_eq!(r.matches[0].context_after, ["let x = 0;"]);
    let r = search(
        SearchSpec { case_insensitive: true, exclude: vec!["src/**".into(), "big.txt".into()], ..regex("^fn") },
        100,
    );
    assert_eq!(r.matches.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["fn is not code here", "FN upper"]);
    let r = search(SearchSpec { pattern: "x = 1;".into(), mode: SearchMode::Literal, ..SearchSpec::default() }, 100);
    assert_eq!(r.matches.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), ["src/f01.rs"]);
    let r = search(SearchSpec { pattern: "**/*.md".into(), mode: SearchMode::Glob, ..SearchSpec::default() }, 100);
    assert_eq!(r.paths, ["docs/readme.md"]);
    let r = search(regex("binary"), 100);
    assert!(r.matches.is_empty());
    let r = search(regex("big"), 10);
    assert_eq!((r.matches.len(), r.truncated), (10, true), "a chunked big file is searched too");

    // Hostile patterns are refused, not panicked on.
    assert!(Matcher::new(&regex(&"(".repeat(10_000))).is_err());
    assert!(Matcher::new(&SearchSpec { context: 1_000_000, ..regex("x") }).is_err());

    let out = trove(&tmp.path().join("repo"), &["grep", "latest", "--workspace", "w", "-C", "1", "let x = 3;"]);
    assert_eq!(stdout(&out), "src/f03.rs-2-fn main() {}\nsrc/f03.rs:3:let x = 3;\n");
    let out = trove(&tmp.path().join("repo"), &["grep", "latest", "--workspace", "w", "no such text"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn over_http_diffs_changes_log_search_and_find_answer_within_scope() {
    let s = http::start(Some(TOKEN), &[]);
    let ws = s.workspace("shared");
    http::write(&ws.join("src/a.rs"), b"fn a() {}\n");
    http::write(&ws.join("secret/key"), b"k1\n");
    let wide = s.session(r#"{"workspace": "shared"}"#);
    let narrow = s.session(r#"{"workspace": "shared", "file_access": {"read": ["src"], "write": []}}"#);
    let sha = http::sha256_hex(b"fn a() {}\n");
    let r = s.call(
        "POST",
        &format!("/v1/sessions/{wide}/tools/write_file"),
        &json!({"path": "src/a.rs", "content": "fn a2() {}\n", "expectedSha256": sha}).to_string(),
    );
    assert_eq!(r.json()["ok"], json!(true), "{}", r.text());
    let r =
        s.call("POST", &format!("/v1/sessions/{wide}/tools/delete_file"), &json!({"path": "secret/key"}).to_string());
    assert_eq!(r.json()["ok"], json!(true), "{}", r.text());

    let paths = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["path"].as_str().expect("path").to_string())
            .collect()
    };
    let r = s.get(&format!("/v1/sessions/{wide}/changes"));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(paths(&v), ["secret/key", "src/a.rs"]);
    assert_eq!(v["entries"][0]["status"], "deleted");
    assert!(v["entries"][0]["trash"][0]["id"].is_string());
    assert_eq!(v["entries"][1]["linesAdded"], 1);
    let r = s.get(&format!("/v1/sessions/{narrow}/changes"));
    assert_eq!(paths(&r.json()), ["src/a.rs"], "the scope hides secret/");

    let r = s.get(&format!("/v1/sessions/{wide}/diff?patch=true&path=src"));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(v["entries"][0]["patch"].as_str().expect("patch").contains("-fn a() {}\n+fn a2() {}\n"));

    let r = s.call("POST", &format!("/v1/sessions/{wide}/snapshots"), "");
    assert_eq!(r.status, 201, "{}", r.text());
    let later = r.json()["id"].as_str().expect("id").to_string();
    let list = s.get("/v1/snapshots?workspace=shared").json();
    let first = list[0]["id"].as_str().expect("id").to_string();
    let r = s.get(&format!("/v1/snapshots/{first}/diff/{later}?lines=false"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(paths(&r.json()), ["secret/key", "src/a.rs"]);
    let r = s.get(&format!("/v1/sessions/{wide}/diff?from={first}&to={later}"));
    assert_eq!(paths(&r.json()), ["secret/key", "src/a.rs"]);
    // The live tree against itself: nothing differs (as `git diff HEAD HEAD`), not a refusal.
    let r = s.get(&format!("/v1/sessions/{wide}/diff?from=now&to=now"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(paths(&r.json()).is_empty(), "{}", r.text());

    let r = s.get(&format!("/v1/snapshots/{later}/search?pattern=a2&context=1"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["matches"][0]["path"], "src/a.rs");
    // The command line answers the same questions with the same documents.
    let cli = |args: &[&str]| -> Value {
        let out = common::trove(&s.repo, args);
        assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    assert_eq!(cli(&["--json", "grep", &later, "a2", "-C", "1"]), r.json());
    // (A live tree's side says when it was read: the one field two askings differ in.)
    let unread = |mut v: Value| {
        v["to"].as_object_mut().map(|to| to.remove("at"));
        v
    };
    assert_eq!(
        unread(cli(&["--json", "session", "changes", &narrow])),
        unread(s.get(&format!("/v1/sessions/{narrow}/changes")).json())
    );
    // A search whose path is a file searches that file.
    let r = s.get(&format!("/v1/snapshots/{later}/search?pattern=a2&path=src/a.rs"));
    assert_eq!(
        (r.json()["matches"][0]["path"].as_str(), r.json()["filesSearched"].as_u64()),
        (Some("src/a.rs"), Some(1))
    );
    assert_eq!(cli(&["--json", "grep", &later, "a2", "--path", "src/a.rs"]), r.json());
    let r = s.get("/v1/log?workspace=shared&path=src/a.rs");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["versions"][0]["change"]["operation"], "write_file");
    let r = s.get("/v1/find?pattern=key");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["matches"][0]["path"], "secret/key");

    for bad in [
        format!("/v1/snapshots/{later}/search?pattern=%28%28&mode=regex"),
        format!("/v1/snapshots/{later}/search?pattern=x&context=1000"),
        format!("/v1/snapshots/{first}/diff/{later}?limit=0"),
        format!("/v1/snapshots/{first}/diff/{later}?from=start"),
        "/v1/find?pattern=".to_string(),
        "/v1/log?workspace=shared&path=..%2Fx".to_string(),
    ] {
        assert_eq!(s.get(&bad).status, 400, "{bad}");
    }
    assert_eq!(s.get("/v1/log?workspace=nope&path=a").status, 404);
}
