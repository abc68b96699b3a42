//! End-to-end tests of the `trove` binary: wiring, output shapes, exit codes, bad input.

mod common;

use std::fs;
use std::process::Command;

use common::*;

fn listing(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().display().to_string(), e.metadata().expect("meta").len()))
        .collect();
    v.sort();
    v
}

#[test]
fn snapshot_list_read_restore_export_round_trip() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo) = (tmp.path().join("ws"), tmp.path().join("repo"));
    rich_workspace(&ws);
    assert!(trove(&repo, &["init"]).status.success());
    let o = trove(&repo, &["--json", "snapshot", ws.to_str().expect("utf8"), "--workspace", "demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let id = snap["id"].as_str().expect("id").to_string();
    assert_eq!(snap["workspace"], "demo");
    assert_eq!(snap["counts"]["files"], 5);

    // trove's own shape: camelCase, times in RFC 3339 UTC, no raw nanoseconds.
    let created = snap["createdAt"].as_str().expect("createdAt");
    assert!(created.ends_with('Z') && created.len() == 24, "{created}");
    assert!(snap.get("created_ns").is_none() && snap.get("source_dir").is_none(), "{snap}");

    let o = trove(&repo, &["--json", "snapshots"]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(list.as_array().expect("array").len(), 1);
    assert_eq!(list[0], snap, "the CLI shows one snapshot one way");

    let o = trove(&repo, &["--json", "ls", &id[..10], "--recursive"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let entries: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let paths: Vec<&str> =
        entries.as_array().expect("array").iter().map(|e| e["path"].as_str().expect("path")).collect();
    assert!(paths.contains(&"src/deep/er/notes.txt") && paths.contains(&"empty") && !paths.contains(&"yarn.lock"));
    let odd = entries.as_array().expect("array").iter().find(|e| e.get("pathBase64").is_some()).expect("odd name");
    assert_eq!(odd["pathBase64"], "Y2Fm6S50eHQ=", "the exact bytes of caf\\xe9.txt");

    let o = trove(&repo, &["cat", "latest", "big.bin"]);
    assert!(o.status.success());
    assert_eq!(o.stdout, fs::read(ws.join("big.bin")).expect("read"));
    let o = trove(&repo, &["ls", "latest"]);
    assert!(stdout(&o).contains("link -> src/main.rs"), "{}", stdout(&o));

    let out = tmp.path().join("out");
    let o = trove(&repo, &["restore", "latest", "--to", out.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree_state(&out), tree_state(&ws));

    let tarball = tmp.path().join("x.tar.zst");
    let o = trove(&repo, &["export", "latest", "-o", tarball.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let untar = tmp.path().join("untar");
    fs::create_dir_all(&untar).expect("mkdir");
    let dec = zstd::stream::Decoder::new(fs::File::open(&tarball).expect("open")).expect("zstd");
    tar::Archive::new(dec).unpack(&untar).expect("unpack");
    assert_eq!(
        fs::read(untar.join("src/deep/er/notes.txt")).expect("read"),
        fs::read(ws.join("src/deep/er/notes.txt")).expect("read")
    );
    assert_eq!(fs::read_link(untar.join("link")).expect("link").to_str(), Some("src/main.rs"));

    let o = trove(&repo, &["export", "latest", "src"]);
    let mut names: Vec<String> = tar::Archive::new(&o.stdout[..])
        .entries()
        .expect("tar")
        .map(|e| e.expect("entry").path().expect("path").display().to_string().trim_end_matches('/').to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["src", "src/deep", "src/deep/er", "src/deep/er/notes.txt", "src/main.rs"]);

    let o = trove(&repo, &["check"]);
    assert!(o.status.success() && stdout(&o).contains("no problems"), "{}", stdout(&o));
}

#[test]
fn bad_input_gets_a_clear_error_the_right_exit_code_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo) = (tmp.path().join("ws"), tmp.path().join("repo"));
    rich_workspace(&ws);
    assert!(trove(&repo, &["init"]).status.success());
    assert!(trove(&repo, &["snapshot", ws.to_str().expect("utf8")]).status.success());
    let before = listing(&repo);
    let audit_before = stdout(&trove(&repo, &["--json", "snapshots"]));

    let cases: &[(&[&str], i32, &str)] = &[
        (&["snapshot", "/definitely/not/here"], 1, "/definitely/not/here does not exist"),
        (&["cat", "deadbeef", "x"], 1, "snapshot 'deadbeef' not found"),
        (&["cat", "latest", "nope.txt"], 1, "'nope.txt' is not in snapshot"),
        (&["cat", "latest", "../etc/passwd"], 2, "invalid path '../etc/passwd'"),
        (&["cat", "latest", "/etc/passwd"], 2, "starts with '/'"),
        (&["cat", "latest", "src"], 1, "is a directory"),
        (&["ls", "zz-not-hex"], 2, "is not a snapshot id"),
        (&["restore", "latest", "--to", ws.to_str().expect("utf8")], 1, "is not empty"),
        (&["snapshot", ws.to_str().expect("utf8"), "--exclude", "a["], 2, "not a valid glob"),
        (&["init"], 1, "already a trove repository"),
        (&["frobnicate"], 2, "unrecognized subcommand"),
    ];
    for (args, code, needle) in cases {
        let o = trove(&repo, args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        if *code != 2 || !needle.contains("subcommand") {
            // clap's own usage errors add a usage hint; trove's errors are one line.
            assert_eq!(stderr(&o).lines().count(), 1, "one-line error for {args:?}: {}", stderr(&o));
        }
    }
    assert_eq!(listing(&repo).len(), before.len(), "no file was added to the repository");
    assert_eq!(stdout(&trove(&repo, &["--json", "snapshots"])), audit_before);

    let nowhere = tmp.path().join("nowhere");
    let o = trove(&nowhere, &["snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not a trove repository"), "{}", stderr(&o));
    assert!(!nowhere.exists(), "a failed open creates nothing");

    // A bucket is not a directory to make (it once made `s3:` in the working directory): one
    // needs its passphrase, asked for before any request; another scheme is refused.
    for (url, code, needle) in
        [("s3://bucket/prefix", 1, "set TROVE_PASSWORD"), ("gs://bucket/x", 2, "is not a store trove writes to")]
    {
        let o = Command::new(common::trove_bin())
            .current_dir(tmp.path())
            .args(["--repo", url, "init"])
            .env_remove("TROVE_PASSWORD")
            .env_remove("TROVE_PASSWORD_FILE")
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(code), "{url}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{url}: {}", stderr(&o));
    }
    assert!(
        !tmp.path().join("s3:").exists() && !tmp.path().join("gs:").exists(),
        "no directory named after the scheme"
    );
}

#[test]
fn corruption_exits_3_and_trove_repo_env_selects_the_repository() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo) = (tmp.path().join("ws"), tmp.path().join("repo"));
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "some text that will be damaged ".repeat(50)).expect("write");
    let env_run = |args: &[&str]| Command::new(trove_bin()).args(args).env("TROVE_REPO", &repo).output().expect("run");
    assert!(env_run(&["init"]).status.success());
    assert!(env_run(&["snapshot", ws.to_str().expect("utf8")]).status.success());
    let pack = walkdir::WalkDir::new(repo.join("packs"))
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .expect("a pack");
    let mut bytes = fs::read(pack.path()).expect("read");
    let at = bytes.len() - 5;
    bytes[at] ^= 0xff;
    fs::write(pack.path(), bytes).expect("write");
    let o = env_run(&["cat", "latest", "a.txt"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("is corrupt"), "{}", stderr(&o));
    // Plain `check` reads metadata only: a flipped payload byte needs the data read.
    let o = env_run(&["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = env_run(&["check", "--read-data"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("DAMAGE FOUND") && stdout(&o).contains("affects "), "{}", stdout(&o));
}

#[test]
fn demo_runs_on_its_built_in_sample() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = tmp.path().join("data/repo");
    let o = trove(&repo, &["demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("generated a sample workspace of 500 files"), "{text}");
    assert!(text.contains("(added 1, changed 0, removed 0)"), "{text}");
    assert!(text.contains("2 snapshots"), "{text}");
}

#[test]
fn sessions_from_the_command_line_keep_their_files_after_they_end() {
    let t = tempfile::tempdir().expect("tmp");
    let repo = t.path().join("repo");
    let ws = t.path().join("ws");
    assert!(trove(&repo, &["init"]).status.success());
    let out = trove(&repo, &["--json", "session", "create", "--dir", ws.to_str().expect("utf-8"), "--read", "src"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = rec["id"].as_str().expect("id").to_string();
    fs::create_dir_all(ws.join("src")).expect("mkdir");
    fs::write(ws.join("src/a.txt"), "alpha").expect("write");
    fs::write(ws.join("secret.txt"), "no").expect("write");
    let files = trove(&repo, &["--json", "session", "files", &id]);
    let files: serde_json::Value = serde_json::from_slice(&files.stdout).expect("json");
    assert_eq!((files["source"].as_str(), files["files"].as_array().map(Vec::len)), (Some("sandbox"), Some(1)));
    let denied = trove(&repo, &["session", "cat", &id, "secret.txt"]);
    assert!(!denied.status.success() && stderr(&denied).contains("not in session scope"));
    assert!(trove(&repo, &["session", "end", &id]).status.success());
    assert_eq!(trove(&repo, &["session", "end", &id]).status.code(), Some(1), "already ended: not found");
    // The record keeps the seed's names; the end is shown once there is one.
    assert!(rec.get("ended_at").is_none() && rec["status"] == "ready", "{rec}");
    let shown = trove(&repo, &["--json", "session", "show", &id]);
    let ended: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!((ended["status"].as_str(), ended["end_reason"].as_str()), (Some("ended"), Some("deleted")), "{ended}");
    assert!(ended["ended_at"].as_f64().is_some() && ended["final_snapshot"].as_str().is_some(), "{ended}");
    fs::remove_dir_all(&ws).expect("rm");
    let cat = trove(&repo, &["session", "cat", &id, "src/a.txt"]);
    assert_eq!(stdout(&cat), "alpha", "{}", stderr(&cat));
    let listed = stdout(&trove(&repo, &["session", "list", "--all"]));
    assert!(listed.contains(&id) && listed.contains("ended"), "{listed}");
}

#[test]
fn tool_audit_and_revert_from_the_command_line() {
    let t = tempfile::tempdir().expect("tmp");
    let (repo, ws) = (t.path().join("repo"), t.path().join("ws"));
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "one\n").expect("write");
    assert!(trove(&repo, &["init"]).status.success());
    let out = trove(&repo, &["--json", "session", "create", "--dir", ws.to_str().expect("utf8")]);
    let id =
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).expect("json")["id"].as_str().expect("id").to_string();
    let before = listing(&ws);
    // Bad input: parameters that are not JSON, an unknown tool, bad parameters; nothing changes.
    let bad = trove(&repo, &["tool", "write_file", "--session", &id, "{not json"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("not JSON"), "{}", stderr(&bad));
    let unknown = trove(&repo, &["tool", "rm_rf", "--session", &id, "{}"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no tool 'rm_rf'"), "{}", stderr(&unknown));
    let params = trove(&repo, &["tool", "read_file", "--session", &id, r#"{"file": "a.txt"}"#]);
    assert_eq!(params.status.code(), Some(2));
    // A refusal prints the envelope and exits by its kind.
    let stale = trove(&repo, &["tool", "write_file", "--session", &id, r#"{"path": "a.txt", "content": "x"}"#]);
    assert_eq!(stale.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&stale)).expect("envelope");
    assert_eq!(v["error"]["kind"], "stale_file");
    let sha = v["error"]["currentSha256"].as_str().expect("sha").to_string();
    assert_eq!(listing(&ws), before);
    // Parameters from stdin.
    let mut child = Command::new(trove_bin())
        .args(["--repo", repo.to_str().expect("utf8"), "tool", "write_file", "--session", &id, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let body = serde_json::json!({"path": "a.txt", "content": "two\n", "expectedSha256": sha}).to_string();
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), body.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(fs::read_to_string(ws.join("a.txt")).expect("read"), "two\n");
    // The audit log shows the refusal and the write; revert undoes the write.
    let log = stdout(&trove(&repo, &["audit", "log", "--session", &id]));
    assert!(log.contains("stale_file") && log.contains("write_file"), "{log}");
    let rows: serde_json::Value =
        serde_json::from_str(&stdout(&trove(&repo, &["--json", "audit", "log"]))).expect("json");
    let seq = rows
        .as_array()
        .expect("rows")
        .iter()
        .rev()
        .find(|r| r["outcome"] == "ok" && r["operation"] == "write_file")
        .expect("the write")["seq"]
        .as_i64()
        .expect("seq");
    let out = trove(&repo, &["revert", &seq.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(ws.join("a.txt")).expect("read"), "one\n");
    let again = trove(&repo, &["revert", &seq.to_string()]);
    assert_eq!(again.status.code(), Some(1), "the file changed since: stale");
    assert!(stderr(&again).contains("changed since"), "{}", stderr(&again));
    assert_eq!(trove(&repo, &["revert", "9999"]).status.code(), Some(1));
}

/// What a command skips it says on stderr: the library logs through `tracing`, and every
/// one-shot command shows warnings (`TROVE_LOG` filters them).
#[test]
fn a_snapshots_warnings_reach_stderr() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo) = (tmp.path().join("ws"), tmp.path().join("repo"));
    for dir in ["x", "y"] {
        fs::create_dir_all(ws.join(dir)).expect("mkdir");
        fs::write(ws.join(dir).join("b.txt"), "b\n").expect("write");
    }
    fs::write(ws.join("a.txt"), "a\n").expect("write");
    assert!(trove(&repo, &["init"]).status.success());
    let cache = tmp.path().join("cache");
    let snap = |log: &str| {
        Command::new(trove_bin())
            .args(["--repo", repo.to_str().expect("utf8"), "snapshot", ws.to_str().expect("utf8"), "--workspace", "w"])
            .env("TROVE_LOG", log)
            .env("TROVE_CACHE_DIR", &cache)
            .output()
            .expect("run")
    };
    assert!(snap("warn").status.success());
    // Directory records that do not parse: the snapshot reads the directories again, and says
    // so once, with how many.
    let damage = || {
        let conn = rusqlite::Connection::open(common::cache_db(&repo, &cache)).expect("open");
        assert_eq!(conn.execute("UPDATE dir_cache SET data = x'ff'", []).expect("damage"), 3);
    };
    damage();
    let quiet = snap("error");
    assert!(quiet.status.success() && stderr(&quiet).is_empty(), "{}", stderr(&quiet));
    damage();
    let o = snap("warn");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches("a directory cache record does not parse").count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("count=3"), "{}", stderr(&o));
}
