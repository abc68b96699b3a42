//! The agent file tools through the library: the stale-file protocol, the caps of read_file,
//! search, trash and restore, audit records with pre-images, revert, racing writers, read-only
//! sessions, and apply_patch's all-or-nothing cases across files.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use trove::tools::{envelope, ToolCall};
use trove::{ErrorKind, Repo};
use trove::{Session, SessionSpec};

/// seq, operation, outcome, before sha256, after sha256, before object.
type AuditRow = (i64, String, String, Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);

struct Ws {
    _dir: tempfile::TempDir,
    repo_path: PathBuf,
    repo: Repo,
    s: Session,
    root: PathBuf,
}

fn ws() -> Ws {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_path = dir.path().join("repo");
    let root = dir.path().join("ws");
    fs::create_dir_all(root.join("src")).expect("mkdir");
    fs::write(root.join("src/main.rs"), "fn main() {\n    println!(\"hi\");\n}\n").expect("write");
    fs::write(root.join("README.md"), "# demo\n\nPORT = 3000\n").expect("write");
    let repo = Repo::init(&repo_path, "test").expect("init");
    let r = root.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(r), "test").expect("session");
    Ws { _dir: dir, repo_path, repo, s, root }
}

impl Ws {
    fn call(&self, tool: &str, params: Value) -> trove::Result<Value> {
        let s = self.repo.session(&self.s.id).expect("session");
        trove::tools::run(&self.repo, &s, ToolCall::parse(tool, params)?, "agent").map(|o| o.to_json())
    }

    fn ok(&self, tool: &str, params: Value) -> Value {
        match self.call(tool, params.clone()) {
            Ok(v) => v,
            Err(e) => panic!("{tool} {params}: {e} {:?}", e.details()),
        }
    }

    fn err(&self, tool: &str, params: Value, kind: ErrorKind) -> trove::Error {
        let e = self.call(tool, params.clone()).expect_err(tool);
        assert_eq!(e.kind(), kind, "{tool} {params}: {e}");
        e
    }

    fn sha(&self, path: &str) -> String {
        self.ok("read_file", json!({"path": path}))["sha256"].as_str().expect("sha").to_string()
    }

    fn text(&self, path: &str) -> String {
        fs::read_to_string(self.root.join(path)).expect("read")
    }

    /// Every file under the root with its bytes: what "nothing changed" compares.
    fn state(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        collect(&self.root, &self.root, &mut out);
        out.sort();
        out
    }

    fn audit(&self) -> Vec<AuditRow> {
        let conn = rusqlite::Connection::open(self.repo_path.join("manifest.db")).expect("db");
        let mut st = conn
            .prepare(
                "SELECT seq, operation, outcome, before_sha256, after_sha256, before_object FROM audit ORDER BY seq",
            )
            .expect("prepare");
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        let rel = p.strip_prefix(root).expect("inside").to_string_lossy().into_owned();
        if e.file_type().expect("type").is_dir() {
            out.push((format!("{rel}/"), Vec::new()));
            collect(root, &p, out);
        } else {
            out.push((rel, fs::read(&p).expect("read")));
        }
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn write_file_follows_the_stale_file_protocol() {
    let w = ws();
    let before = w.state();
    // No expected hash, a wrong one, "" over an existing file: all stale_file, nothing written.
    for expected in [None, Some("00".repeat(32)), Some(String::new())] {
        let mut p = json!({"path": "README.md", "content": "new\n"});
        if let Some(e) = expected {
            p["expectedSha256"] = json!(e);
        }
        let e = w.err("write_file", p, ErrorKind::StaleFile);
        let d = e.details().expect("details");
        assert_eq!(d["currentSha256"], json!(sha256(b"# demo\n\nPORT = 3000\n")));
        let env = serde_json::to_value(envelope::<trove::tools::ToolOutput>(Err(e))).expect("json");
        assert_eq!(env["ok"], json!(false));
        assert!(env["error"]["suggestedAction"].as_str().expect("action").contains("Re-read"));
    }
    assert_eq!(w.state(), before, "refused writes change nothing");
    let sha = w.sha("README.md");
    let out = w.ok("write_file", json!({"path": "README.md", "content": "new\n", "expectedSha256": sha}));
    assert_eq!(out["sha256"], json!(sha256(b"new\n")));
    assert_eq!(w.text("README.md"), "new\n");
    // The old hash is now stale.
    w.err("write_file", json!({"path": "README.md", "content": "x", "expectedSha256": sha}), ErrorKind::StaleFile);
    // "" creates a file that does not exist; base64 content is decoded.
    w.ok("write_file", json!({"path": "bin/x.dat", "content": "AAEC/w==", "encoding": "base64", "expectedSha256": ""}));
    assert_eq!(fs::read(w.root.join("bin/x.dat")).expect("read"), vec![0, 1, 2, 255]);
    // No temporaries are left beside the files.
    assert!(w.state().iter().all(|(p, _)| !p.contains(".trove-")), "{:?}", w.state());
}

#[test]
fn create_and_move_never_overwrite() {
    let w = ws();
    let before = w.state();
    w.err("create_file", json!({"path": "README.md", "content": "x"}), ErrorKind::AlreadyExists);
    w.err("create_file", json!({"path": "src", "content": "x"}), ErrorKind::AlreadyExists);
    w.err("move_file", json!({"from": "src/main.rs", "to": "README.md"}), ErrorKind::AlreadyExists);
    w.err("move_file", json!({"from": "nope.rs", "to": "x.rs"}), ErrorKind::NotFound);
    w.err("move_file", json!({"from": "src", "to": "src/inner"}), ErrorKind::InvalidArgument);
    assert_eq!(w.state(), before);
    let out = w.ok("create_file", json!({"path": "a/b/c.txt", "content": "c\n"}));
    assert_eq!(out["sha256"], json!(sha256(b"c\n")));
    let sha = w.sha("a/b/c.txt");
    w.err("move_file", json!({"from": "a/b/c.txt", "to": "d.txt", "expectedSha256": "ab"}), ErrorKind::StaleFile);
    w.ok("move_file", json!({"from": "a/b/c.txt", "to": "moved/d.txt", "expectedSha256": sha}));
    assert_eq!(w.text("moved/d.txt"), "c\n");
    assert!(!w.root.join("a/b/c.txt").exists());
    w.ok("move_file", json!({"from": "src", "to": "lib"}));
    assert!(w.root.join("lib/main.rs").exists());
}

#[test]
fn edit_file_needs_unique_matches_and_applies_all_or_none() {
    let w = ws();
    let sha = w.sha("src/main.rs");
    let e = w.err(
        "edit_file",
        json!({"path": "src/main.rs", "expectedSha256": sha, "edits": [{"oldText": "hi", "newText": "yo"}, {"oldText": "absent", "newText": "x"}]}),
        ErrorKind::PatchFailed,
    );
    assert!(e.message().contains("edit 2") && e.message().contains("matches nothing"), "{e}");
    fs::write(w.root.join("dup.txt"), "a\na\n").expect("write");
    let dsha = w.sha("dup.txt");
    let e = w.err(
        "edit_file",
        json!({"path": "dup.txt", "expectedSha256": dsha, "edits": [{"oldText": "a", "newText": "b"}]}),
        ErrorKind::PatchFailed,
    );
    assert!(e.message().contains("matches 2 times"), "{e}");
    assert_eq!(e.details().expect("details")["matches"], json!(2));
    assert_eq!(w.text("src/main.rs"), "fn main() {\n    println!(\"hi\");\n}\n", "the first edit did not land alone");
    let out = w.ok(
        "edit_file",
        json!({"path": "dup.txt", "expectedSha256": dsha, "edits": [{"oldText": "a", "newText": "b", "replaceAll": true}]}),
    );
    assert_eq!(out["replacements"], json!(2));
    assert_eq!(w.text("dup.txt"), "b\nb\n");
    w.err("edit_file", json!({"path": "dup.txt", "edits": [{"oldText": "b", "newText": "c"}]}), ErrorKind::StaleFile);
}

#[test]
fn read_file_slices_caps_and_hashes_the_whole_file() {
    let w = ws();
    let long_line = "x".repeat(2500);
    let mut body = String::new();
    for i in 1..=2500 {
        body.push_str(&format!("line {i}\n"));
    }
    body.push_str(&long_line);
    body.push('\n');
    fs::write(w.root.join("big.txt"), &body).expect("write");
    let whole = sha256(body.as_bytes());
    let r = w.ok("read_file", json!({"path": "big.txt"}));
    assert_eq!(r["sha256"], json!(whole));
    assert_eq!(r["totalLines"], json!(2501));
    assert_eq!(r["endLine"], json!(2000));
    assert_eq!(r["truncated"], json!(true));
    assert_eq!(r["nextStartLine"], json!(2001));
    let content = r["content"].as_str().expect("content");
    assert!(content.starts_with("line 1\n") && content.contains("line 2000\n") && !content.contains("line 2001\n"));
    assert!(content.ends_with("call read_file with startLine=2001 to continue]"), "explicit marker");
    let r = w.ok("read_file", json!({"path": "big.txt", "startLine": 2500, "endLine": 2501}));
    assert_eq!(r["sha256"], json!(whole), "a slice reports the whole file's hash");
    let c = r["content"].as_str().expect("content");
    assert!(c.starts_with("line 2500\n") && c.contains("… [line truncated: 500 more characters]"), "{c}");
    let r = w.ok("read_file", json!({"path": "big.txt", "maxBytes": 20}));
    assert_eq!(r["truncated"], json!(true));
    assert!(r["content"].as_str().expect("c").starts_with("line 1\nline 2\n"));
    // The hash from a sliced read is good for a write.
    w.ok("write_file", json!({"path": "big.txt", "content": "short\n", "expectedSha256": whole}));
    w.err("read_file", json!({"path": "big.txt", "startLine": 9}), ErrorKind::InvalidArgument);
    // Binary: not_text unless base64.
    fs::write(w.root.join("blob.bin"), [0u8, 159, 146, 150]).expect("write");
    w.err("read_file", json!({"path": "blob.bin"}), ErrorKind::NotText);
    let r = w.ok("read_file", json!({"path": "blob.bin", "encoding": "base64"}));
    assert_eq!(r["content"], json!("AJ+Slg=="));
    w.err("read_file", json!({"path": "missing.txt"}), ErrorKind::NotFound);
    w.err("read_file", json!({"path": "../etc/passwd"}), ErrorKind::InvalidPath);
    w.err("read_file", json!({"path": "src"}), ErrorKind::IsDirectory);
}

#[test]
fn search_glob_and_list() {
    let w = ws();
    fs::create_dir_all(w.root.join("node_modules/x")).expect("mkdir");
    fs::write(w.root.join("node_modules/x/i.js"), "TODO hidden").expect("write");
    fs::write(w.root.join("src/lib.rs"), "// TODO one\n// todo two\nfn x() {}\n").expect("write");
    fs::write(w.root.join("notes.txt"), "TODO three\n").expect("write");
    let r = w.ok("search_files", json!({"pattern": "TODO"}));
    let m = r["matches"].as_array().expect("matches");
    assert_eq!(m.len(), 2, "{r}");
    assert_eq!(m[0]["path"], json!("notes.txt"));
    assert_eq!((m[1]["line"].clone(), m[1]["column"].clone()), (json!(1), json!(4)));
    let r = w.ok("search_files", json!({"pattern": "todo", "caseInsensitive": true, "include": ["*.rs"]}));
    assert_eq!(r["matches"].as_array().expect("m").len(), 2);
    let r = w.ok(
        "search_files",
        json!({"pattern": "t[wh]", "mode": "regex", "exclude": ["*.txt"], "caseInsensitive": true}),
    );
    assert_eq!(r["matches"].as_array().expect("m").len(), 1);
    let r = w.ok("search_files", json!({"pattern": "TODO", "maxResults": 1}));
    assert_eq!((r["matches"].as_array().expect("m").len(), r["truncated"].clone()), (1, json!(true)));
    w.err("search_files", json!({"pattern": "(", "mode": "regex"}), ErrorKind::InvalidArgument);
    // A path that is a file searches that file.
    let r = w.ok("search_files", json!({"pattern": "todo", "caseInsensitive": true, "path": "src/lib.rs"}));
    assert_eq!((r["matches"].as_array().map(Vec::len), r["filesSearched"].as_u64()), (Some(2), Some(1)), "{r}");
    let r = w.ok("glob", json!({"pattern": "**/*.rs"}));
    let files: Vec<_> = r["files"].as_array().expect("files").iter().map(|f| f["path"].clone()).collect();
    assert_eq!(files, vec![json!("src/lib.rs"), json!("src/main.rs")]);
    let r = w.ok("list_directory", json!({}));
    let names: Vec<_> =
        r["entries"].as_array().expect("e").iter().map(|e| e["path"].as_str().expect("p").to_string()).collect();
    assert_eq!(names, vec!["README.md", "node_modules", "notes.txt", "src"]);
    let r = w.ok("list_directory", json!({"recursive": true}));
    let names: Vec<_> =
        r["entries"].as_array().expect("e").iter().map(|e| e["path"].as_str().expect("p").to_string()).collect();
    assert!(names.contains(&"src/lib.rs".to_string()) && !names.contains(&"node_modules/x".to_string()), "{names:?}");
    let r = w.ok("list_directory", json!({"recursive": true, "limit": 2}));
    assert_eq!(r["truncated"], json!(true));
    w.err("list_directory", json!({"path": "nope"}), ErrorKind::NotFound);
}

#[test]
fn delete_goes_to_trash_and_restores_with_conflict_rules() {
    let w = ws();
    let sha = w.sha("README.md");
    w.err("delete_file", json!({"path": "README.md", "expectedSha256": "ff"}), ErrorKind::StaleFile);
    let d = w.ok("delete_file", json!({"path": "README.md", "expectedSha256": sha}));
    let trash = d["trashId"].as_str().expect("trash id").to_string();
    assert!(!w.root.join("README.md").exists());
    // A second version of the same path is kept too.
    w.ok("create_file", json!({"path": "README.md", "content": "second\n"}));
    let d2 = w.ok("delete_file", json!({"path": "README.md"}));
    assert_ne!(d2["trashId"], json!(trash));
    // By path: the newest.
    w.ok("restore_file", json!({"path": "README.md"}));
    assert_eq!(w.text("README.md"), "second\n");
    // By id onto an existing file: fail, rename, or overwrite with the target's hash.
    w.err("restore_file", json!({"trashId": trash}), ErrorKind::AlreadyExists);
    let r = w.ok("restore_file", json!({"trashId": trash, "onConflict": "rename"}));
    assert_eq!(r["path"], json!("README (restored).md"));
    assert_eq!(w.text("README (restored).md"), "# demo\n\nPORT = 3000\n");
    w.err("restore_file", json!({"trashId": trash, "onConflict": "overwrite"}), ErrorKind::StaleFile);
    let target = w.sha("README.md");
    let r = w.ok("restore_file", json!({"trashId": trash, "onConflict": "overwrite", "expectedSha256": target}));
    assert!(r["replacedTrashId"].is_string(), "the overwritten file went to the trash");
    assert_eq!(w.text("README.md"), "# demo\n\nPORT = 3000\n");
    // A directory, recursively, and back.
    fs::create_dir_all(w.root.join("src/empty")).expect("mkdir");
    std::os::unix::fs::symlink("main.rs", w.root.join("src/link")).expect("symlink");
    let before = w.state();
    let d = w.ok("delete_file", json!({"path": "src"}));
    assert_eq!(d["kind"], json!("dir"));
    assert!(!w.root.join("src").exists());
    w.ok("restore_file", json!({"trashId": d["trashId"]}));
    assert_eq!(w.state(), before);
    assert_eq!(fs::read_link(w.root.join("src/link")).expect("link"), PathBuf::from("main.rs"));
    w.err("restore_file", json!({"trashId": "trash_000000000000"}), ErrorKind::NotFound);
}

#[test]
fn every_change_and_refusal_is_audited_with_pre_images_and_can_be_reverted() {
    let w = ws();
    let old = "# demo\n\nPORT = 3000\n";
    let sha = w.sha("README.md");
    w.err("write_file", json!({"path": "README.md", "content": "x"}), ErrorKind::StaleFile);
    let out = w.ok(
        "edit_file",
        json!({"path": "README.md", "expectedSha256": sha, "edits": [{"oldText": "3000", "newText": "4000"}]}),
    );
    let seq = out["auditSeq"].as_i64().expect("seq");
    let log = w.audit();
    let refusal = log.iter().find(|r| r.2 == "stale_file").expect("the refusal is recorded");
    assert_eq!(refusal.1, "write_file");
    assert_eq!(refusal.3.as_deref(), Some(&hex::decode(&sha).expect("hex")[..]), "with the current hash");
    let rec = log.iter().find(|r| r.0 == seq).expect("the edit");
    assert_eq!(rec.3.as_deref(), Some(&hex::decode(&sha).expect("hex")[..]));
    assert_eq!(rec.4.as_deref(), Some(&hex::decode(sha256(b"# demo\n\nPORT = 4000\n")).expect("hex")[..]));
    let pre = trove::object::ObjectId::from_slice(rec.5.as_deref().expect("pre-image")).expect("id");
    assert_eq!(w.repo.read_object(&pre).expect("stored"), old.as_bytes());
    // Revert through the protocol: refused once the file changed again, then done.
    let now = w.sha("README.md");
    w.ok("write_file", json!({"path": "README.md", "content": "changed\n", "expectedSha256": now}));
    let e = w.repo.revert(seq, "operator").expect_err("changed since");
    assert_eq!(e.kind(), ErrorKind::StaleFile);
    let last = w.audit().last().cloned().expect("record");
    assert_eq!((last.1.as_str(), last.2.as_str()), ("revert", "stale_file"));
    let undo_write = w.audit().iter().rev().find(|r| r.1 == "write_file" && r.2 == "ok").expect("write").0;
    w.repo.revert(undo_write, "operator").expect("revert the last write");
    w.repo.revert(seq, "operator").expect("then the edit");
    assert_eq!(w.text("README.md"), old);
    // A create reverts to a deletion (into the trash), a delete to a restore, a move back.
    let c = w.ok("create_file", json!({"path": "new.txt", "content": "n"}))["auditSeq"].as_i64().expect("seq");
    w.repo.revert(c, "operator").expect("revert create");
    assert!(!w.root.join("new.txt").exists());
    let d = w.ok("delete_file", json!({"path": "src/main.rs"}))["auditSeq"].as_i64().expect("seq");
    w.repo.revert(d, "operator").expect("revert delete");
    assert!(w.root.join("src/main.rs").exists());
    let m = w.ok("move_file", json!({"from": "src/main.rs", "to": "main2.rs"}))["auditSeq"].as_i64().expect("seq");
    w.repo.revert(m, "operator").expect("revert move");
    assert!(w.root.join("src/main.rs").exists() && !w.root.join("main2.rs").exists());
    let e = w.repo.revert(1, "operator").expect_err("init is not a file change");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn sessions_that_are_not_active_are_read_only_and_read_their_snapshot() {
    let w = ws();
    w.repo.pause_session(&w.s.id, "test").expect("pause");
    let before = w.state();
    let e =
        w.err("write_file", json!({"path": "README.md", "content": "x", "expectedSha256": ""}), ErrorKind::ReadOnly);
    assert!(serde_json::to_value(envelope::<trove::tools::ToolOutput>(Err(e))).expect("json")["error"]
        ["suggestedAction"]
        .as_str()
        .expect("a")
        .contains("resume"));
    w.err("create_file", json!({"path": "n.txt", "content": "x"}), ErrorKind::ReadOnly);
    w.err(
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Delete File: README.md\n*** End Patch"}),
        ErrorKind::ReadOnly,
    );
    assert_eq!(w.state(), before);
    let r = w.ok("read_file", json!({"path": "README.md"}));
    assert_eq!(r["source"], json!("snapshot"));
    assert_eq!(r["sha256"], json!(sha256(b"# demo\n\nPORT = 3000\n")));
    let r = w.ok("list_directory", json!({"recursive": true}));
    assert_eq!(r["source"], json!("snapshot"));
    w.repo.end_session(&w.s.id, trove::EndReason::Deleted, "test").expect("end");
    w.err("delete_file", json!({"path": "README.md"}), ErrorKind::ReadOnly);
    assert_eq!(w.ok("search_files", json!({"pattern": "PORT"}))["matches"].as_array().expect("m").len(), 1);
}

#[test]
fn writes_outside_the_scope_or_through_symlinks_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    fs::create_dir_all(root.join("out")).expect("mkdir");
    fs::create_dir_all(dir.path().join("outside")).expect("mkdir");
    std::os::unix::fs::symlink(dir.path().join("outside"), root.join("out/escape")).expect("symlink");
    let repo = Repo::init(&dir.path().join("repo"), "t").expect("init");
    let spec: SessionSpec =
        serde_json::from_value(json!({"file_access": {"read": [""], "write": ["out"]}})).expect("spec");
    let r = root.clone();
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    let call = |tool: &str, p: Value| trove::tools::run(&repo, &s, ToolCall::parse(tool, p).expect("parse"), "a");
    let e = call("create_file", json!({"path": "top.txt", "content": "x"})).expect_err("scope");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    call("create_file", json!({"path": "out/ok.txt", "content": "x"})).expect("in scope");
    let e = call("create_file", json!({"path": "out/escape/pwn.txt", "content": "x"})).expect_err("symlink");
    assert_eq!(e.kind(), ErrorKind::InvalidPath, "{e}");
    assert!(!dir.path().join("outside/pwn.txt").exists());
    let e = call(
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Add File: out/a.txt\n+a\n*** Add File: top.txt\n+t\n*** End Patch"}),
    )
    .expect_err("one path out of scope");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert!(!root.join("out/a.txt").exists(), "nothing of the patch landed");
}

#[test]
fn of_two_racing_writes_with_the_same_expected_hash_exactly_one_wins() {
    let w = ws();
    for round in 0..8 {
        let sha = w.sha("README.md");
        let outcomes: Vec<Result<Value, ErrorKind>> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let repo_path = w.repo_path.clone();
                    let id = w.s.id.clone();
                    let sha = sha.clone();
                    sc.spawn(move || {
                        let repo = Repo::open(&repo_path).expect("open");
                        let s = repo.session(&id).expect("session");
                        let p = json!({"path": "README.md", "content": format!("round {round} writer {i}\n"), "expectedSha256": sha});
                        trove::tools::run(&repo, &s, ToolCall::parse("write_file", p).expect("parse"), "agent").map(|o| o.to_json()).map_err(|e| e.kind())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).collect()
        });
        let wins: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(wins.len(), 1, "round {round}: {outcomes:?}");
        assert!(outcomes.iter().any(|o| o == &Err(ErrorKind::StaleFile)), "{outcomes:?}");
        assert_eq!(sha256(w.text("README.md").as_bytes()), wins[0]["sha256"].as_str().expect("sha"));
    }
}

/// apply_patch across files: each case starts from the same tree, and a failing case must
/// leave it byte for byte as it was.
#[test]
fn apply_patch_multi_file_conformance() {
    struct Case {
        name: &'static str,
        patch: &'static str,
        expected: Value,
        outcome: Result<&'static [(&'static str, Option<&'static str>)], ErrorKind>,
    }
    let tree: &[(&str, &[u8])] = &[
        ("a.txt", b"one\ntwo\nthree\n"),
        ("b.txt", b"alpha\nbeta\n"),
        ("crlf.txt", b"x\r\ny\r\nz\r\n"),
        ("bom.txt", b"\xEF\xBB\xBFfirst\nsecond\n"),
        ("nonl.txt", b"last line"),
        ("dir/c.txt", b"c\n"),
    ];
    let cases = [
        Case {
            name: "two files update together",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+TWO\n*** Update File: b.txt\n@@\n-beta\n+BETA\n*** End Patch",
            expected: json!({}),
            outcome: Ok(&[("a.txt", Some("one\nTWO\nthree\n")), ("b.txt", Some("alpha\nBETA\n"))]),
        },
        Case {
            name: "the second file's chunk fails: nothing changes",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+TWO\n*** Update File: b.txt\n@@\n-gamma\n+GAMMA\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::PatchFailed),
        },
        Case {
            name: "add, delete and move in one patch",
            patch: "*** Begin Patch\n*** Add File: new/n.txt\n+n1\n+n2\n*** Delete File: b.txt\n*** Update File: dir/c.txt\n*** Move to: moved/c2.txt\n@@\n-c\n+C\n*** End Patch",
            expected: json!({}),
            outcome: Ok(&[("new/n.txt", Some("n1\nn2\n")), ("b.txt", None), ("dir/c.txt", None), ("moved/c2.txt", Some("C\n"))]),
        },
        Case {
            name: "add over an existing file is already_exists",
            patch: "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Add File: a.txt\n+x\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::AlreadyExists),
        },
        Case {
            name: "move onto an existing path is already_exists",
            patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-one\n+ONE\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::AlreadyExists),
        },
        Case {
            name: "a pure rename",
            patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: renamed.txt\n*** End Patch",
            expected: json!({}),
            outcome: Ok(&[("a.txt", None), ("renamed.txt", Some("one\ntwo\nthree\n"))]),
        },
        Case {
            name: "expected \"\" for an add that exists is stale",
            patch: "*** Begin Patch\n*** Add File: z.txt\n+z\n*** End Patch",
            expected: json!({"a.txt": ""}),
            outcome: Err(ErrorKind::StaleFile),
        },
        Case {
            name: "a wrong expected sha256 is stale, the others fine",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch",
            expected: json!({"a.txt": "0000000000000000000000000000000000000000000000000000000000000000"}),
            outcome: Err(ErrorKind::StaleFile),
        },
        Case {
            name: "the right expected sha256s, and \"\" for an add",
            patch: "*** Begin Patch\n*** Update File: b.txt\n@@\n alpha\n-beta\n+beta2\n*** Add File: fresh.txt\n+f\n*** End Patch",
            expected: json!({"b.txt": "SHA:b.txt", "fresh.txt": ""}),
            outcome: Ok(&[("b.txt", Some("alpha\nbeta2\n")), ("fresh.txt", Some("f\n"))]),
        },
        Case {
            name: "updating a missing file is not_found",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n*** Update File: ghost.txt\n@@\n-x\n+y\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::NotFound),
        },
        Case {
            name: "deleting a missing file is not_found",
            patch: "*** Begin Patch\n*** Delete File: ghost.txt\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::NotFound),
        },
        Case {
            name: "one path in two operations is refused",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n*** Delete File: a.txt\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::InvalidArgument),
        },
        Case {
            name: "CRLF, BOM and a missing final newline are kept",
            patch: "*** Begin Patch\n*** Update File: crlf.txt\n@@\n-y\n+Y\n*** Update File: bom.txt\n@@\n-second\n+SECOND\n*** Update File: nonl.txt\n@@\n-last line\n+final line\n*** End Patch",
            expected: json!({}),
            outcome: Ok(&[
                ("crlf.txt", Some("x\r\nY\r\nz\r\n")),
                ("bom.txt", Some("\u{feff}first\nSECOND\n")),
                ("nonl.txt", Some("final line")),
            ]),
        },
        Case {
            name: "a parse error changes nothing",
            patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n",
            expected: json!({}),
            outcome: Err(ErrorKind::InvalidArgument),
        },
        Case {
            name: "a path escaping the workspace",
            patch: "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch",
            expected: json!({}),
            outcome: Err(ErrorKind::InvalidArgument),
        },
    ];
    let mut failures = Vec::new();
    for case in &cases {
        let w = ws();
        for (p, bytes) in tree {
            let full = w.root.join(p);
            fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            fs::write(full, bytes).expect("write");
        }
        let mut expected = case.expected.clone();
        for v in expected.as_object_mut().expect("map").values_mut() {
            if let Some(p) = v.as_str().and_then(|s| s.strip_prefix("SHA:")) {
                *v = json!(sha256(&fs::read(w.root.join(p)).expect("read")));
            }
        }
        let before = w.state();
        let result = w.call("apply_patch", json!({"patch": case.patch, "expectedSha256ByPath": expected}));
        match (&case.outcome, result) {
            (Ok(files), Ok(out)) => {
                for (p, want) in files.iter() {
                    let got = fs::read(w.root.join(p)).ok();
                    if got.as_deref() != want.map(str::as_bytes) {
                        failures.push(format!(
                            "{}: {p} is {:?}",
                            case.name,
                            got.map(|g| String::from_utf8_lossy(&g).into_owned())
                        ));
                    }
                    if let Some(want) = want {
                        let listed = out["files"]
                            .as_array()
                            .expect("files")
                            .iter()
                            .any(|f| f["sha256"] == json!(sha256(want.as_bytes())));
                        if !listed {
                            failures.push(format!("{}: no sha256 for {p} in {out}", case.name));
                        }
                    }
                }
            }
            (Err(kind), Err(e)) => {
                if e.kind() != *kind {
                    failures.push(format!("{}: {} instead of {kind}: {e}", case.name, e.kind()));
                }
                if w.state() != before {
                    failures.push(format!("{}: the tree changed", case.name));
                }
            }
            (want, got) => failures.push(format!("{}: wanted {want:?}, got {got:?}", case.name)),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_failed_patch_names_file_chunk_line_and_candidates() {
    let w = ws();
    let e = w.err(
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-    println!(\"hello\");\n+    println!(\"bye\");\n*** End Patch"}),
        ErrorKind::PatchFailed,
    );
    let d = e.details().expect("details");
    assert_eq!(d["path"], json!("src/main.rs"));
    assert_eq!(d["chunk"], json!(1));
    assert_eq!(d["patchLine"], json!(3));
    let closest = d["closest"].to_string();
    assert!(closest.contains("println!(\\\"hi\\\")"), "{closest}");
    assert!(e.message().contains("src/main.rs"), "{e}");
}

#[test]
fn deleted_files_keep_their_content_after_the_patch() {
    let w = ws();
    let out = w.ok("apply_patch", json!({"patch": "*** Begin Patch\n*** Delete File: README.md\n*** End Patch"}));
    let trash = out["files"][0]["trashId"].as_str().expect("trash id").to_string();
    let item = w.repo.trash_item(&trove::TrashId::parse(&trash).expect("id")).expect("item");
    assert_eq!(item.reason, "apply_patch");
    assert_eq!(item.sha256.map(|s| s.to_hex()), Some(sha256(b"# demo\n\nPORT = 3000\n")));
    w.ok("restore_file", json!({"trashId": trash}));
    assert_eq!(w.text("README.md"), "# demo\n\nPORT = 3000\n");
}

/// A journal row as a crash would leave it: `steps` over the workspace of `w`.
fn journal_row(w: &Ws, steps: Vec<trove::testing::Step>) -> trove::PlanId {
    use trove::testing::Plan;
    let plan = Plan {
        id: trove::PlanId::parse("op_0123456789ab").expect("id"),
        tool: "apply_patch".into(),
        actor: "agent".into(),
        workspace: w.s.workspace.clone(),
        session: Some(w.s.id.clone()),
        root: w.s.live_dir.clone(),
        created_ns: 1,
        steps,
        details: json!({}),
        new_dirs: Vec::new(),
    };
    let conn = trove::testing::conn(&w.repo);
    trove::testing::journal::insert(conn, &plan.id, 1, &serde_json::to_string(&plan).expect("plan")).expect("row");
    plan.id
}

fn write_step(w: &Ws, path: &str, before: &[u8], after: &[u8]) -> trove::testing::Step {
    let conn = trove::testing::conn(&w.repo);
    let chunking = w.repo.config().chunking;
    let b = trove::testing::loose::store(conn, before, 3, &chunking).expect("store");
    let a = trove::testing::loose::store(conn, after, 3, &chunking).expect("store");
    trove::testing::Step::Write {
        path: path.as_bytes().to_vec(),
        tmp: format!(".trove-op_0123456789ab-{path}.tmp").into_bytes(),
        before: Some(sha256(before)),
        after: sha256(after),
        before_object: Some(b.to_hex()),
        after_object: Some(a.to_hex()),
        mode: 0o644,
        staged: None,
    }
}

fn pending(w: &Ws) -> usize {
    trove::testing::journal::pending(trove::testing::conn(&w.repo)).expect("journal").len()
}

#[test]
fn recovery_leaves_a_live_writer_alone_and_rolls_forward_once_it_is_gone() {
    let w = ws();
    fs::write(w.root.join("a.txt"), "one\n").expect("write");
    let step = write_step(&w, "a.txt", b"one\n", b"two\n");
    journal_row(&w, vec![step]);
    {
        // A writer holds the workspace lock: its plan is running, not interrupted.
        let _held = trove::testing::lock(&w.repo, &w.root).expect("lock");
        Repo::open(&w.repo_path).expect("open");
        assert_eq!(pending(&w), 1, "a live plan is not recovered");
        assert_eq!(w.text("a.txt"), "one\n");
    }
    Repo::open(&w.repo_path).expect("open");
    assert_eq!(pending(&w), 0);
    assert_eq!(w.text("a.txt"), "two\n", "rolled forward from the stored content");
    let last = w.audit().last().cloned().expect("record");
    assert_eq!((last.1.as_str(), last.2.as_str()), ("apply_patch", "ok"));
}

#[test]
fn recovery_rolls_back_when_a_step_was_changed_by_someone_else() {
    let w = ws();
    // Step 0 landed before the crash; step 1's file was then edited from a shell.
    fs::write(w.root.join("a.txt"), "ONE\n").expect("write");
    fs::write(w.root.join("b.txt"), "shell edit\n").expect("write");
    let steps = vec![write_step(&w, "a.txt", b"one\n", b"ONE\n"), write_step(&w, "b.txt", b"bee\n", b"BEE\n")];
    journal_row(&w, steps);
    Repo::open(&w.repo_path).expect("open never fails on recovery");
    assert_eq!(pending(&w), 0);
    assert_eq!(w.text("a.txt"), "one\n", "the step that landed is undone from its pre-image");
    assert_eq!(w.text("b.txt"), "shell edit\n", "someone else's change is kept");
    let last = w.audit().last().cloned().expect("record");
    assert_eq!((last.1.as_str(), last.2.as_str()), ("apply_patch", "conflict"));
    assert!(w.state().iter().all(|(p, _)| !p.contains(".trove-")));
}

#[test]
fn a_deleted_directory_that_changed_meanwhile_is_not_thrown_away() {
    let w = ws();
    fs::create_dir_all(w.root.join("q")).expect("mkdir");
    fs::write(w.root.join("q/f"), "f\n").expect("write");
    let d = w.ok("delete_file", json!({"path": "q"}));
    let item =
        w.repo.trash_item(&trove::TrashId::parse(d["trashId"].as_str().expect("id")).expect("id")).expect("item");
    // Replay the same removal as an interrupted plan over a directory that gained a file.
    fs::create_dir_all(w.root.join("q")).expect("mkdir");
    fs::write(w.root.join("q/f"), "f\n").expect("write");
    fs::write(w.root.join("q/new.txt"), "not in the trash\n").expect("write");
    let step = trove::testing::Step::Remove {
        path: b"q".to_vec(),
        grave: b".trove-op_0123456789ab-0.del".to_vec(),
        before: None,
        trash: Box::new(trove::TrashItem { id: trove::TrashId::parse("trash_aaaaaaaaaaaa").expect("id"), ..item }),
    };
    journal_row(&w, vec![step]);
    Repo::open(&w.repo_path).expect("open");
    assert_eq!(w.text("q/new.txt"), "not in the trash\n");
    assert_eq!(w.audit().last().expect("record").2, "conflict");
}

#[test]
fn hostile_parameters_are_refused_not_panicked_on() {
    let w = ws();
    fs::create_dir_all(w.root.join("src/deep")).expect("mkdir");
    fs::write(w.root.join("a"), "x").expect("write");
    fs::write(w.root.join("src/deep/é.txt"), "x marks\n").expect("write");
    let r = w.ok("search_files", json!({"pattern": "x", "path": "src/deep", "include": ["*.txt"]}));
    assert_eq!(r["matches"].as_array().expect("m").len(), 1);
    let r = w.ok("read_file", json!({"path": "src/main.rs", "startLine": 2, "maxLines": usize::MAX}));
    assert_eq!(r["startLine"], json!(2));
    assert_eq!(r["endLine"], json!(3));
    w.err("read_file", json!({"path": "src/main.rs", "startLine": 2, "endLine": 1}), ErrorKind::InvalidArgument);
    w.err("read_file", json!({"path": "src/main.rs", "maxBytes": 3}), ErrorKind::TooLarge);
    // The largest counts JSON Schema allows overflow nothing (found by the API conformance run).
    let r = w.ok("read_file", json!({"path": "src/main.rs", "maxLineLength": u64::MAX, "maxLines": 1.8e19}));
    assert_eq!(r["startLine"], json!(1));
    // Parameters are an object: serde would also take the fields as an array, in order.
    w.err("read_file", json!(["src/main.rs"]), ErrorKind::InvalidArgument);
    w.err("read_file", json!(null), ErrorKind::InvalidArgument);
    // A setuid bit does not survive a rewrite onto trove's own inode.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(w.root.join("a"), fs::Permissions::from_mode(0o4755)).expect("chmod");
    let sha = w.sha("a");
    w.ok("write_file", json!({"path": "a", "content": "y", "expectedSha256": sha}));
    assert_eq!(fs::metadata(w.root.join("a")).expect("meta").permissions().mode() & 0o7777, 0o755);
}

#[test]
fn a_session_ttl_is_a_whole_number_of_seconds_up_to_a_century() {
    let spec: SessionSpec = serde_json::from_value(json!({"ttl": 3600.0})).expect("an integral number");
    assert_eq!(spec.ttl, Some(3600));
    for bad in [json!(1.5), json!(-1), json!("60")] {
        assert!(serde_json::from_value::<SessionSpec>(json!({ "ttl": bad })).is_err(), "{bad}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = Repo::init(&dir.path().join("repo"), "t").expect("init");
    let century = 100 * 365 * 86_400;
    for (ttl, ok) in [(0, false), (century + 1, false), (century, true)] {
        let spec = SessionSpec { ttl: Some(ttl), ..Default::default() };
        let ws = dir.path().join(format!("ws{ttl}"));
        let made = repo.create_session(&spec, move |_| Ok(ws), "t");
        assert_eq!(made.is_ok(), ok, "ttl {ttl}");
        if let Err(e) = made {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
    }
}

#[test]
fn restoring_elsewhere_needs_read_access_to_what_was_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    fs::create_dir_all(root.join("secrets")).expect("mkdir");
    fs::create_dir_all(root.join("src")).expect("mkdir");
    fs::write(root.join("secrets/key"), "TOPSECRET").expect("write");
    let repo = Repo::init(&dir.path().join("repo"), "t").expect("init");
    let r = root.clone();
    let a = repo
        .create_session(&SessionSpec { workspace: Some("w".into()), ..Default::default() }, move |_| Ok(r), "t")
        .expect("a");
    let d =
        trove::tools::run(&repo, &a, ToolCall::parse("delete_file", json!({"path": "secrets/key"})).expect("p"), "a")
            .expect("del")
            .to_json();
    repo.end_session(&a.id, trove::EndReason::Deleted, "t").expect("end");
    let spec: SessionSpec =
        serde_json::from_value(json!({"workspace": "w", "file_access": {"read": [], "write": ["src"]}})).expect("spec");
    let r = root.clone();
    let b = repo.create_session(&spec, move |_| Ok(r), "t").expect("b");
    for p in [json!({"trashId": d["trashId"], "to": "src/leak"}), json!({"path": "secrets/key", "to": "src/leak"})] {
        let e = trove::tools::run(&repo, &b, ToolCall::parse("restore_file", p).expect("p"), "b").expect_err("leak");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    }
    let e = trove::tools::run(
            &repo,
            &b,
            ToolCall::parse(
                "apply_patch",
                json!({"patch": "*** Begin Patch\n*** Add File: src/x\n+x\n*** End Patch", "expectedSha256ByPath": {"secrets/other": ""}}),
            )
            .expect("p"),
            "b",
        )
        .expect_err("probe");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert!(!root.join("src/leak").exists() && !root.join("src/x").exists());
}

/// `Repo::restore_version` (the review pages' "restore this version"): an earlier version comes
/// back only over the file the caller saw, which goes to the trash; anything else is refused
/// with nothing changed.
#[test]
fn an_earlier_version_comes_back_only_over_the_file_it_was_shown() {
    use trove::object::{ObjectId, Sha256};
    let w = ws();
    let first = b"# demo\n\nPORT = 3000\n";
    // The session's start snapshot holds the first version; the agent then rewrites it.
    let version = (ObjectId::of(first), Sha256::of(first), 0o644);
    let sha = w.sha("README.md");
    w.ok("write_file", json!({"path": "README.md", "content": "changed\n", "expectedSha256": sha}));
    let now = w.sha("README.md");
    let before = w.state();
    let s = w.repo.session(&w.s.id).expect("session");
    let refused = |rel: &[u8], expected: Option<&str>, kind: ErrorKind| {
        let e = w.repo.restore_version(&s, rel, version, expected, "reviewer").expect_err("refused");
        assert_eq!(e.kind(), kind, "{}: {e}", String::from_utf8_lossy(rel));
        assert_eq!(w.state(), before, "nothing changed");
    };
    refused(b"README.md", Some(&sha), ErrorKind::StaleFile); // the file changed since it was shown
    refused(b"README.md", None, ErrorKind::StaleFile); // a file is there, and none was named
    refused(b"gone.txt", Some(&now), ErrorKind::StaleFile); // nothing there, yet a file was named
    refused(b"../outside", None, ErrorKind::InvalidPath);
    refused(b"src", Some(&now), ErrorKind::IsDirectory); // a directory is no file
    let done = w.repo.restore_version(&s, b"./README.md", version, Some(&now), "reviewer").expect("restored");
    assert_eq!(w.text("README.md"), String::from_utf8_lossy(first));
    assert_eq!(done.path, "README.md");
    let kept = w.repo.trash_item(done.trash_id.as_ref().expect("the replaced file's trash item")).expect("item");
    assert_eq!(kept.reason, "restore_version");
    assert_eq!(kept.sha256.map(|s| s.to_string()), Some(now));
    // Nothing at the path: the version is written there.
    w.repo.restore_version(&s, b"back.md", version, None, "reviewer").expect("restored anew");
    assert_eq!(w.text("back.md"), String::from_utf8_lossy(first));
}
