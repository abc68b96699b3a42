//! A repository in a directory that keeps its manifest as a record log (`trove init --layout
//! log`): everything a directory does, with the SQLite manifest a replica in the cache
//! directory that can be deleted; several processes (each with a cache of its own) writing one
//! log; a kill between a segment and its commit; a server; and the size it exists for.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::http::{self, TOKEN};
use serde_json::{json, Value};
use sha2::Digest;

/// `trove --repo REPO --cache-dir CACHE ARGS...`: `cache` stands for a host.
fn trove_cmd(repo: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(common::trove_bin());
    c.arg("--repo").arg(repo).arg("--cache-dir").arg(cache).args(args);
    c.env_remove("TROVE_REPO").env_remove("TROVE_LOG").env_remove("TROVE_CACHE_DIR").env_remove("TROVE_LOG_COPY_EVERY");
    c
}

fn trove(repo: &Path, cache: &Path, args: &[&str]) -> Output {
    trove_cmd(repo, cache, args).output().expect("run trove")
}

fn ok(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {}", common::stderr(&o));
    common::stdout(&o)
}

fn json_of(repo: &Path, cache: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(trove(repo, cache, &all), &args.join(" "))).expect("json")
}

/// The bytes of every file under `dir`.
fn du(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A session on `ws` (workspace `name`), made through the command line: its id.
fn session(repo: &Path, cache: &Path, ws: &Path, name: &str) -> String {
    let v = json_of(
        repo,
        cache,
        &["session", "create", "--dir", ws.to_str().expect("utf-8"), "--workspace", name, "--persistent"],
    );
    v["id"].as_str().expect("id").to_owned()
}

/// The one replica under cache directory `cache`: `<cache>/<id>/manifest-<hash>.db`.
fn replica_of(cache: &Path) -> PathBuf {
    let found: Vec<PathBuf> = walkdir::WalkDir::new(cache)
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("manifest-") && n.ends_with(".db"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

/// `edits` edits of `notes.txt` through `edit_file`, each inserting a line, with a snapshot
/// every 5: the notes' final text.
fn edit_many(repo: &Path, cache: &Path, ws: &Path, id: &str, edits: usize) -> String {
    let mut text = std::fs::read_to_string(ws.join("notes.txt")).expect("read");
    for k in 0..edits {
        let new = text.replacen("end\n", &format!("edit {k}: a line the agent added\nend\n"), 1);
        let call = json!({
            "path": "notes.txt",
            "expectedSha256": sha(text.as_bytes()),
            "edits": [{"oldText": "end\n", "newText": format!("edit {k}: a line the agent added\nend\n")}],
        });
        ok(trove(repo, cache, &["tool", "edit_file", "--session", id, &call.to_string()]), "edit_file");
        text = new;
        if (k + 1) % 5 == 0 {
            ok(trove(repo, cache, &["snapshot", "--workspace", "w", ws.to_str().expect("utf-8")]), "snapshot");
        }
    }
    text
}

/// The same agent's work in a repository of each layout: the log's grows less, holds no
/// `manifest.db`, and reads the same with its cache directory (its replica) deleted; the
/// trash, restores, history, checkpoints, `check --read-data` and `gc` all work on it.
#[test]
fn a_directory_keeping_its_manifest_as_a_log_reads_the_same_with_its_cache_gone() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut grown = Vec::new();
    for layout in ["sqlite", "log"] {
        let (repo, cache) = (tmp.path().join(format!("repo-{layout}")), tmp.path().join(format!("cache-{layout}")));
        let ws = tmp.path().join(format!("ws-{layout}"));
        common::rich_workspace(&ws);
        std::fs::write(ws.join("notes.txt"), "start\nend\n").expect("write");
        ok(trove(&repo, &cache, &["init", "--layout", layout]), "init");
        let id = session(&repo, &cache, &ws, "w");
        ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", ws.to_str().expect("utf-8")]), "snapshot");
        let before = du(&repo);
        let text = edit_many(&repo, &cache, &ws, &id, 60);
        assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), text);
        grown.push(du(&repo) - before);
        assert_eq!(repo.join("manifest.db").exists(), layout == "sqlite", "{layout}");
        assert_eq!(repo.join("log").is_dir(), layout == "log", "{layout}");
        if layout == "sqlite" {
            continue;
        }

        // The trash and a restore from it.
        let del = json!({"path": "notes.txt", "expectedSha256": sha(text.as_bytes())}).to_string();
        ok(trove(&repo, &cache, &["tool", "delete_file", "--session", &id, &del]), "delete_file");
        assert!(!ws.join("notes.txt").exists());
        ok(trove(&repo, &cache, &["audit", "checkpoint"]), "checkpoint");
        let snapshots = json_of(&repo, &cache, &["snapshots"]);
        let trash = json_of(&repo, &cache, &["trash", "ls"]);
        let audit = json_of(&repo, &cache, &["audit", "log", "--limit", "1000"]);
        let history = json_of(&repo, &cache, &["audit", "history", "--workspace", "w", "notes.txt"]);

        // Another host, or this one with its cache directory deleted: the same answers, from
        // the log alone.
        std::fs::remove_dir_all(&cache).expect("the cache goes");
        let other = tmp.path().join("other-host");
        for host in [&cache, &other] {
            assert_eq!(json_of(&repo, host, &["snapshots"]), snapshots);
            assert_eq!(json_of(&repo, host, &["trash", "ls"]), trash);
            assert_eq!(json_of(&repo, host, &["audit", "log", "--limit", "1000"]), audit);
            assert_eq!(json_of(&repo, host, &["audit", "history", "--workspace", "w", "notes.txt"]), history);
        }
        let verified = ok(trove(&repo, &other, &["audit", "verify"]), "audit verify");
        assert!(verified.contains("verified"), "{verified}");
        let item = trash["items"].as_array().and_then(|a| a.first()).expect("a trash item")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        ok(trove(&repo, &other, &["trash", "restore", &item]), "trash restore");
        assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("restored"), text);
        // Restored on one host, seen on the other.
        let left = json_of(&repo, &cache, &["trash", "ls"]);
        assert_eq!(left["items"].as_array().map(Vec::len), Some(0), "{left}");
        let out = tmp.path().join("restored");
        ok(trove(&repo, &cache, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore");
        assert_eq!(std::fs::read_to_string(out.join("notes.txt")).expect("restored file"), text);
        ok(trove(&repo, &other, &["gc"]), "gc");
        let checked = ok(trove(&repo, &cache, &["check", "--read-data"]), "check --read-data");
        assert!(checked.contains("no problems found"), "{checked}");
    }
    // 60 edits of one file: each is a segment of a few hundred bytes in the log, where the
    // SQLite file grows by pages.
    let (sqlite, log) = (grown[0], grown[1]);
    assert!(log * 3 < sqlite * 2, "the log layout grew {log} B, the SQLite one {sqlite} B");
}

/// Two processes with caches of their own (two hosts) write one directory's log at once: the
/// log's creates order them, nothing is lost, and every host sees every record in one order.
#[test]
fn processes_with_caches_of_their_own_write_one_log_and_lose_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = tmp.path().join("repo");
    let (a, b) = (tmp.path().join("host-a"), tmp.path().join("host-b"));
    ok(trove(&repo, &a, &["init", "--layout", "log"]), "init");
    let writers: Vec<_> = [(&a, "one"), (&b, "two")]
        .into_iter()
        .map(|(host, name)| {
            let ws = tmp.path().join(name);
            std::fs::create_dir_all(&ws).expect("ws");
            let id = session(&repo, host, &ws, name);
            let (repo, host, name) = (repo.clone(), host.clone(), name.to_owned());
            std::thread::spawn(move || {
                for k in 0..12 {
                    let call = json!({"path": format!("f{k}.txt"), "content": format!("{name} {k}\n")}).to_string();
                    ok(trove(&repo, &host, &["tool", "create_file", "--session", &id, &call]), "create_file");
                }
                ok(trove(&repo, &host, &["snapshot", "--workspace", &name, ws.to_str().expect("utf-8")]), "snapshot");
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a writer");
    }
    let c = tmp.path().join("host-c");
    let records = json_of(&repo, &c, &["audit", "log", "--limit", "1000"]);
    let records = records.as_array().expect("records");
    let mut seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().expect("seq")).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "contiguous");
    let created = records.iter().filter(|r| r["operation"] == "create_file").count();
    assert_eq!(created, 24, "every create recorded once");
    for host in [&a, &b] {
        assert_eq!(json_of(&repo, host, &["audit", "log", "--limit", "1000"]).as_array(), Some(records));
    }
    for name in ["one", "two"] {
        let listed = json_of(&repo, &c, &["ls", "--workspace", name, "latest"]);
        assert_eq!(listed.as_array().map(Vec::len), Some(12), "{name}: {listed}");
    }
    ok(trove(&repo, &c, &["check", "--read-data"]), "check --read-data");
}

/// A tool change killed after its segment is in the log, before the replica committed: the
/// next command applies the segment and closes the plan, so the change is recorded once.
#[test]
fn a_change_killed_between_its_segment_and_its_commit_is_recorded_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, cache, ws) = (tmp.path().join("repo"), tmp.path().join("cache"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(ws.join("notes.txt"), "one\ntwo\n").expect("write");
    ok(trove(&repo, &cache, &["init", "--layout", "log"]), "init");
    let id = session(&repo, &cache, &ws, "w");
    common::kill_edit_after_its_segment(
        &ws,
        |read| {
            ok(trove(&repo, &cache, &["tool", "read_file", "--session", &id, read]), "read");
        },
        |call| trove_cmd(&repo, &cache, &["tool", "edit_file", "--session", &id, call]),
    );
    let edits = |host: &Path| {
        let log = json_of(&repo, host, &["audit", "log"]);
        log.as_array().expect("records").iter().filter(|r| r["operation"] == "edit_file").count()
    };
    assert_eq!(edits(&cache), 1, "recorded once on the host that was killed");
    assert_eq!(edits(&tmp.path().join("fresh")), 1, "and once in the log");
    ok(trove(&repo, &cache, &["check"]), "check: no plan left open");
}

/// `trove serve` over such a repository: its pooled handles open replicas in the cache
/// directory; what the server writes is in the log, read by a host with no cache.
#[test]
fn a_server_writes_the_log_that_a_host_with_no_cache_reads() {
    let dir = tempfile::tempdir().expect("tmp");
    let (repo, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    ok(trove(&repo, &cache, &["init", "--layout", "log"]), "init");
    // The server's handles open their replicas where --cache-dir says, never in the default.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let (cache_dir, home_dir) = (cache.to_str().expect("utf-8").to_owned(), home.to_str().expect("utf-8").to_owned());
    let s = http::start_env(
        dir,
        Some(TOKEN),
        &["--cache-dir", &cache_dir],
        &[("HOME", &home_dir), ("XDG_CACHE_HOME", &home_dir)],
    );
    let r = s.call("POST", "/v1/sessions", r#"{"workspace": "w", "persistent": true}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let (id, token) =
        (v["id"].as_str().expect("id").to_owned(), v["session_token"].as_str().expect("token").to_owned());
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    for k in 0..5 {
        let body = json!({"file": format!("f{k}.txt"), "content": format!("file {k}\n")}).to_string();
        let r = http::request(s.addr, "POST", "/v1/file/write", &headers, body.as_bytes());
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["success"], true, "{}", r.text());
    }
    let r = s.call("POST", &format!("/v1/sessions/{id}/snapshots"), "{}");
    assert!(r.status == 200 || r.status == 201, "{}", r.text());
    let snap = r.json()["id"].as_str().expect("snapshot id").to_owned();
    let audited = s.get("/v1/audit?limit=1000").json();
    let count = audited["records"].as_array().or_else(|| audited.as_array()).map_or(0, Vec::len);
    assert!(count >= 7, "{audited}");

    let fresh = PathBuf::from(s.dir.path()).join("fresh-host");
    let repo = s.repo.clone();
    let listed = json_of(&repo, &fresh, &["snapshots"]);
    assert!(listed.to_string().contains(&snap), "{listed}");
    assert_eq!(ok(trove(&repo, &fresh, &["cat", &snap, "f3.txt"]), "cat"), "file 3\n");
    let records = json_of(&repo, &fresh, &["audit", "log", "--limit", "1000"]);
    assert_eq!(records.as_array().map(Vec::len), Some(count), "{records}");
    assert!(!repo.join("manifest.db").exists());
    let stray: Vec<_> = walkdir::WalkDir::new(&home).min_depth(1).into_iter().filter_map(|e| e.ok()).collect();
    assert!(stray.is_empty(), "the default cache directory was used: {stray:?}");
}

/// A copied directory keeps the repository's id, but not its replica: each copy's writes go
/// to its own log; and a directory restored from an older backup, whose log lacks what this
/// host's replica applied, is read again from the log as it is.
#[test]
fn a_copied_or_restored_directory_is_read_from_its_own_log() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, cache, ws) = (tmp.path().join("repo"), tmp.path().join("cache"), tmp.path().join("ws"));
    common::rich_workspace(&ws);
    let w = ws.to_str().expect("utf-8");
    ok(trove(&repo, &cache, &["init", "--layout", "log"]), "init");
    ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", w]), "snapshot");
    let backup = tmp.path().join("backup");
    common::copy_tree(&repo, &backup);
    let copy = tmp.path().join("copy");
    common::copy_tree(&repo, &copy);
    let count = |repo: &Path| json_of(repo, &cache, &["snapshots"]).as_array().map_or(0, Vec::len);

    // Each copy written in turn through one cache directory.
    std::fs::write(ws.join("one.txt"), "1\n").expect("write");
    ok(trove(&copy, &cache, &["snapshot", "--workspace", "w", w]), "snapshot of the copy");
    std::fs::write(ws.join("two.txt"), "2\n").expect("write");
    ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", w]), "snapshot of the original");
    ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", w]), "and another");
    assert_eq!((count(&repo), count(&copy)), (3, 2));
    for dir in [&repo, &copy] {
        let fresh = tmp.path().join(format!("fresh-{}", dir.file_name().and_then(|n| n.to_str()).expect("name")));
        assert_eq!(json_of(dir, &fresh, &["snapshots"]), json_of(dir, &cache, &["snapshots"]));
        ok(trove(dir, &cache, &["check"]), "check");
    }

    // The original put back as the backup had it: one snapshot, whatever this host applied.
    std::fs::remove_dir_all(&repo).expect("remove");
    common::copy_tree(&backup, &repo);
    assert_eq!(count(&repo), 1);
    ok(trove(&repo, &cache, &["check"]), "check after the restore");
    ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", w]), "a write after it");
    assert_eq!(count(&repo), 2);
}

/// What opening refuses: a directory whose log is gone, and a format newer than this build's.
#[test]
fn a_log_directory_without_its_log_or_of_a_newer_format_is_refused_with_advice() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, cache) = (tmp.path().join("repo"), tmp.path().join("cache"));
    ok(trove(&repo, &cache, &["init", "--layout", "log"]), "init");
    let config: Value =
        serde_json::from_slice(&std::fs::read(repo.join("config.json")).expect("config")).expect("json");
    assert_eq!(config["format"], 2);

    let saved = std::fs::read(repo.join("config.json")).expect("config");
    let mut newer = config.clone();
    newer["format"] = json!(4);
    std::fs::write(repo.join("config.json"), newer.to_string()).expect("write");
    let o = trove(&repo, &cache, &["snapshots"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("upgrade trove"), "{}", common::stderr(&o));
    // Format 3 is a bucket's (a log per node): in a directory, damage.
    newer["format"] = json!(3);
    std::fs::write(repo.join("config.json"), newer.to_string()).expect("write");
    let o = trove(&repo, &cache, &["snapshots"]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("only a bucket has"), "{}", common::stderr(&o));
    std::fs::write(repo.join("config.json"), &saved).expect("write");

    std::fs::rename(repo.join("log"), tmp.path().join("log-aside")).expect("rename");
    let o = trove(&repo, &tmp.path().join("new-host"), &["snapshots"]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("record log"), "{}", common::stderr(&o));
    std::fs::rename(tmp.path().join("log-aside"), repo.join("log")).expect("rename back");
    ok(trove(&repo, &tmp.path().join("new-host"), &["snapshots"]), "opens again");
}

/// `trove check` replays the whole log beside the replica: a sound one is clean; a damaged
/// segment or a replica whose rows the log does not hold is damage (exit 3) naming the segment
/// or table; a replica ahead of its log (a segment gone from its end) is set aside on open.
#[test]
fn check_replays_the_log_and_names_a_damaged_or_missing_segment_or_a_diverged_replica() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, cache, ws) = (tmp.path().join("repo"), tmp.path().join("cache"), tmp.path().join("ws"));
    common::rich_workspace(&ws);
    ok(trove(&repo, &cache, &["init", "--layout", "log"]), "init");
    for k in 0..3 {
        std::fs::write(ws.join(format!("n{k}.txt")), format!("{k}\n")).expect("write");
        ok(trove(&repo, &cache, &["snapshot", "--workspace", "w", ws.to_str().expect("utf-8")]), "snapshot");
    }
    let report = json_of(&repo, &cache, &["check"]);
    assert_eq!(report["logSegments"], 4, "{report}");
    assert_eq!(report["problems"].as_array().map(Vec::len), Some(0), "{report}");
    let problems = |cache: &Path| -> Vec<Value> {
        let o = trove(&repo, cache, &["--json", "check"]);
        assert_eq!(o.status.code(), Some(3), "damage found: {}", common::stderr(&o));
        let v: Value = serde_json::from_str(&common::stdout(&o)).expect("json");
        v["problems"].as_array().expect("problems").clone()
    };
    let segment = |seq: u64| repo.join("log").join(format!("{seq:020}"));

    // A bit flipped in segment 3.
    let saved = std::fs::read(segment(3)).expect("segment");
    let mut bad = saved.clone();
    let last = bad.len() - 3;
    bad[last] ^= 0x40;
    std::fs::write(segment(3), &bad).expect("write");
    let found = problems(&cache);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["kind"], "record_log");
    assert!(found[0]["message"].as_str().expect("message").contains("00000000000000000003"), "{found:?}");
    std::fs::write(segment(3), &saved).expect("write back");

    // Segment 4 gone from the log, which this host's replica applied: the replica is set
    // aside, kept, and the log read as it is.
    std::fs::rename(segment(4), tmp.path().join("aside")).expect("rename");
    let replica = replica_of(&cache);
    let o = trove(&repo, &cache, &["--json", "check"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("the log does not hold"), "{}", common::stderr(&o));
    let v: Value = serde_json::from_str(&common::stdout(&o)).expect("json");
    assert_eq!(v["logSegments"], 3, "{v}");
    let name = replica.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
    let kept = std::fs::read_dir(replica.parent().expect("dir"))
        .expect("list")
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with(&format!("{name}.ahead-4-")));
    assert!(kept, "the old replica is kept");
    std::fs::rename(tmp.path().join("aside"), segment(4)).expect("rename back");
    let report = json_of(&repo, &cache, &["check"]);
    assert_eq!(report["logSegments"], 4, "sound again: {report}");

    // A row changed in the replica behind the log's back.
    let db = rusqlite::Connection::open(replica_of(&cache)).expect("open the replica");
    db.execute("UPDATE workspaces SET name = 'renamed'", []).expect("update");
    drop(db);
    let found = problems(&cache);
    let message = found[0]["message"].as_str().expect("message");
    assert!(message.starts_with("table workspaces: 1 rows"), "{message}");
    // A host with no cache reads the log as it is: sound.
    ok(trove(&repo, &tmp.path().join("new-host"), &["check"]), "a new host's check");
}

/// `trove check` while another process writes the log, through the checker's replica or a
/// replica of its own: every check compares one state of the replica with the log and finds
/// nothing wrong.
#[test]
fn checks_while_another_process_writes_find_nothing_wrong() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, a, b, ws) =
        (tmp.path().join("repo"), tmp.path().join("host-a"), tmp.path().join("host-b"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).expect("ws");
    ok(trove(&repo, &a, &["init", "--layout", "log"]), "init");
    let id = session(&repo, &a, &ws, "w");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (repo, a, done) = (repo.clone(), a.clone(), done.clone());
        std::thread::spawn(move || {
            let mut k = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && k < 400 {
                let call = json!({"path": format!("f{k}.txt"), "content": format!("{k}\n")}).to_string();
                ok(trove(&repo, &a, &["tool", "create_file", "--session", &id, &call]), "create_file");
                k += 1;
            }
            k
        })
    };
    let mut compared = 0;
    for round in 0..12 {
        let host = if round % 2 == 0 { &a } else { &b };
        let report = json_of(&repo, host, &["check"]);
        assert_eq!(report["problems"].as_array().map(Vec::len), Some(0), "round {round}: {report}");
        if report.get("logNote").is_none() {
            compared += 1;
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().expect("the writer");
    assert!(written > 0 && compared > 0, "{written} writes, {compared} checks compared");
    ok(trove(&repo, &tmp.path().join("host-c"), &["check"]), "a check after");
}
