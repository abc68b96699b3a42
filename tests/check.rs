//! `check` and the repairs (issue 16): each kind of damage (a flipped byte, a truncated pack, a
//! missing pack, a deleted loose object, a dangling tree row, a chunk list that does not
//! reassemble) is found and named with its object, its pack, and the snapshots and paths it
//! affects; every other snapshot stays readable; `check --repair-index` rebuilds the index from
//! the packs; `repair snapshots` turns what was lost into markers so the rest reads.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use rusqlite::Connection;
use serde_json::{json, Value};
use trove::{CheckOptions, ProblemKind, ReadData, Repo, RestoreOptions, SessionSpec, SnapshotInfo, SnapshotOptions};

/// Three snapshots of a workspace: the first holds `old.bin` only it has; all hold `small.txt`,
/// `big.bin` (chunked) and `dir/inner.txt`; a session's tool wrote `tool.txt` (a loose object).
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    snaps: Vec<SnapshotInfo>,
    ws: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, ws) = (tmp.path().join("repo"), tmp.path().join("w"));
    let repo = Repo::init(&root, "t").expect("init");
    fs::create_dir_all(ws.join("dir")).expect("mkdir");
    let mut rng = trove::sample::Rng::new(7);
    // Over the bundling limit (256 KiB): a blob of its own, so damaging it damages nothing else.
    fs::write(ws.join("old.bin"), rng.bytes(300_000)).expect("write");
    fs::write(ws.join("small.txt"), "small\n").expect("write");
    fs::write(ws.join("big.bin"), rng.bytes(3 << 20)).expect("write");
    fs::write(ws.join("dir/inner.txt"), "inner\n").expect("write");
    let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    let mut snaps = vec![repo.snapshot(&ws, &opts).expect("snapshot")];
    fs::remove_file(ws.join("old.bin")).expect("rm");
    fs::write(ws.join("new.bin"), rng.bytes(300_000)).expect("write");
    snaps.push(repo.snapshot(&ws, &opts).expect("snapshot"));
    let w = ws.clone();
    let spec = SessionSpec { workspace: Some("w".into()), persistent: true, ..SessionSpec::default() };
    let s = repo.create_session(&spec, move |_| Ok(w), "agent").expect("session");
    let call =
        trove::tools::ToolCall::parse("create_file", json!({"path": "tool.txt", "content": "written by a tool\n"}))
            .expect("parse");
    let sha = trove::tools::run(&repo, &s, call, "agent").expect("create").to_json()["sha256"]
        .as_str()
        .expect("sha")
        .to_string();
    // Overwritten before any snapshot saw it: its pre-image is a loose object.
    let call = trove::tools::ToolCall::parse(
        "write_file",
        json!({"path": "tool.txt", "content": "rewritten\n", "expectedSha256": sha}),
    )
    .expect("parse");
    trove::tools::run(&repo, &s, call, "agent").expect("write");
    snaps.push(repo.snapshot(&ws, &opts).expect("snapshot"));
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    Fixture { _tmp: tmp, root, snaps, ws }
}

fn sql(root: &Path, statement: &str) {
    Connection::open(root.join("manifest.db")).expect("open").execute_batch(statement).expect(statement);
}

fn content(repo: &Repo, s: &SnapshotInfo, path: &str) -> String {
    repo.lookup(s, path.as_bytes()).expect(path).content.expect("content").to_hex()
}

/// The pack holding object `id`.
fn pack_of(root: &Path, id: &str) -> String {
    Connection::open(root.join("manifest.db"))
        .expect("open")
        .query_row(
            &format!("SELECT p.name FROM objects o JOIN packs p ON p.id = o.pack WHERE o.id = x'{id}'"),
            [],
            |r| r.get(0),
        )
        .expect("a pack")
}

#[allow(clippy::print_stderr)] // why a restore failed, when a test fails on it
fn restores(repo: &Repo, s: &SnapshotInfo, at: &Path) -> bool {
    match repo.restore(s, at, &RestoreOptions::default()) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("restore of {} failed: {e}", s.id);
            false
        }
    }
}

fn check_json(root: &Path, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let out = trove(root, &all);
    (out.status.code().unwrap_or(-1), serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null))
}

#[test]
fn a_flipped_byte_is_found_reading_data_and_named_with_its_pack_snapshots_and_paths() {
    let f = fixture();
    let repo = Repo::open(&f.root).expect("open");
    let old = content(&repo, &f.snaps[0], "old.bin");
    let pack = pack_of(&f.root, &old);
    let path = f.root.join(&pack);
    let mut bytes = fs::read(&path).expect("read");
    let (offset, len): (i64, i64) = Connection::open(f.root.join("manifest.db"))
        .expect("open")
        .query_row(&format!("SELECT offset, stored_len FROM objects WHERE id = x'{old}'"), [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("old.bin's blob");
    let at = (offset + len / 2) as usize;
    bytes[at] ^= 0x20;
    set_mode(&path, 0o644);
    fs::write(&path, &bytes).expect("damage");

    let (code, meta) = check_json(&f.root, &[]);
    assert_eq!((code, meta["problems"].as_array().map(Vec::len)), (0, Some(0)), "metadata alone cannot see it: {meta}");
    let (code, r) = check_json(&f.root, &["--read-data"]);
    assert_eq!(code, 3, "{r}");
    let problems = r["problems"].as_array().expect("problems");
    let p = problems.iter().find(|p| p["object"] == old.as_str()).expect("the damaged object is named");
    assert_eq!(p["kind"], "object_damaged");
    assert_eq!(p["pack"], pack.as_str());
    assert_eq!(p["snapshots"], json!([f.snaps[0].id.to_string()]), "only the first snapshot holds it");
    assert_eq!(p["paths"], json!([format!("{}:old.bin", &f.snaps[0].id.to_string()[..8])]));
    // The other snapshots read whole; `repair snapshots` makes the first read too.
    let tmp = tempfile::tempdir().expect("tmp");
    assert!(restores(&repo, &f.snaps[2], &tmp.path().join("2")));
    assert!(!restores(&repo, &f.snaps[0], &tmp.path().join("0")));
    let out = trove(&f.root, &["repair", "snapshots", "--read-data"]);
    assert!(out.status.success() && stdout(&out).contains("old.bin"), "{}", stderr(&out));
    let repo = Repo::open(&f.root).expect("open");
    let first = repo.resolve_snapshot(f.snaps[0].id.as_ref(), None).expect("same id");
    assert!(restores(&repo, &first, &tmp.path().join("0b")));
    let marker = fs::read_to_string(tmp.path().join("0b/old.bin")).expect("marker");
    assert!(marker.contains("was lost") && marker.contains(&old), "{marker}");
    assert_eq!(fs::read(tmp.path().join("0b/big.bin")).expect("big"), fs::read(f.ws.join("big.bin")).expect("big"));
    assert!(first.warnings.iter().any(|w| w.message.contains("repaired")));
}

#[test]
fn a_truncated_pack_and_a_missing_pack_are_named_and_the_rest_stays_readable() {
    for truncate in [true, false] {
        let f = fixture();
        let repo = Repo::open(&f.root).expect("open");
        let new = content(&repo, &f.snaps[1], "new.bin");
        let pack = pack_of(&f.root, &new);
        let path = f.root.join(&pack);
        if truncate {
            let bytes = fs::read(&path).expect("read");
            set_mode(&path, 0o644);
            fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
        } else {
            fs::remove_file(&path).expect("delete");
        }
        let (code, r) = check_json(&f.root, &[]);
        assert_eq!(code, 3, "{r}");
        let p = &r["problems"][0];
        assert_eq!(p["kind"], if truncate { "pack_damaged" } else { "pack_missing" }, "{r}");
        assert_eq!(p["pack"], pack.as_str());
        let paths: Vec<&str> = p["paths"].as_array().expect("paths").iter().filter_map(|x| x.as_str()).collect();
        assert!(paths.iter().any(|x| x.ends_with(":new.bin")), "{paths:?}");
        assert!(
            paths.iter().all(|x| !x.starts_with(&f.snaps[0].id.to_string()[..8])),
            "the first snapshot is untouched: {paths:?}"
        );
        let tmp = tempfile::tempdir().expect("tmp");
        assert!(restores(&repo, &f.snaps[0], &tmp.path().join("0")), "the first snapshot reads");
        let out = trove(&f.root, &["repair", "snapshots"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let repo = Repo::open(&f.root).expect("open");
        for s in &f.snaps {
            let s = repo.resolve_snapshot(s.id.as_ref(), None).expect("same id");
            assert!(restores(&repo, &s, &tmp.path().join(format!("r{}", &s.id.to_string()[..8]))), "{}", s.id);
        }
    }
}

#[test]
fn a_deleted_loose_object_a_dangling_tree_and_a_bad_chunk_list_are_each_named() {
    // A deleted loose object: the pre-image a tool kept, referenced by its audit record.
    let f = fixture();
    let pre: String = Connection::open(f.root.join("manifest.db"))
        .expect("open")
        .query_row("SELECT lower(hex(id)) FROM loose_objects", [], |r| r.get(0))
        .expect("one loose object");
    sql(&f.root, &format!("DELETE FROM loose_objects WHERE id = x'{pre}'"));
    let (code, r) = check_json(&f.root, &[]);
    assert_eq!(code, 3, "{r}");
    let p = r["problems"].as_array().expect("problems").iter().find(|p| p["object"] == pre.as_str()).expect("named");
    assert_eq!(p["kind"], "object_missing");
    assert!(p["message"].as_str().is_some_and(|m| m.contains("audit record")), "{p}");

    // A dangling tree row: `dir` of every snapshot.
    let f = fixture();
    let repo = Repo::open(&f.root).expect("open");
    let dir = content(&repo, &f.snaps[0], "dir");
    sql(&f.root, &format!("DELETE FROM trees WHERE id = x'{dir}'"));
    let (code, r) = check_json(&f.root, &[]);
    assert_eq!(code, 3, "{r}");
    let p = &r["problems"][0];
    assert_eq!((p["kind"].as_str(), p["object"].as_str()), (Some("tree_missing"), Some(dir.as_str())), "{r}");
    let all = repo.snapshots(None).expect("list").len();
    assert_eq!(
        p["snapshots"].as_array().map(Vec::len),
        Some(all),
        "every snapshot holds dir (the session's start one too)"
    );
    let out = trove(&f.root, &["repair", "snapshots"]);
    assert!(out.status.success() && stdout(&out).contains("lost directory"), "{}", stderr(&out));
    let repo = Repo::open(&f.root).expect("open");
    let s = repo.resolve_snapshot(f.snaps[1].id.as_ref(), None).expect("snapshot");
    let tmp = tempfile::tempdir().expect("tmp");
    assert!(restores(&repo, &s, &tmp.path().join("r")));
    assert!(tmp.path().join("r/dir").join(trove::LOST_DIR_MARKER).exists());
    assert_eq!(fs::read(tmp.path().join("r/new.bin")).expect("new"), fs::read(f.ws.join("new.bin")).expect("new"));
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "repaired snapshots check clean: {:?}", report.problems);

    // A chunk list naming another content's chunks (all stored, offsets adding up).
    let f = fixture();
    let repo = Repo::open(&f.root).expect("open");
    let big = content(&repo, &f.snaps[0], "big.bin");
    let mut rng = trove::sample::Rng::new(8);
    fs::write(f.ws.join("other.bin"), rng.bytes(3 << 20)).expect("write");
    let s = repo
        .snapshot(&f.ws, &SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() })
        .expect("snapshot");
    let other = content(&repo, &s, "other.bin");
    drop(repo);
    sql(
        &f.root,
        &format!(
            "DELETE FROM chunk_lists WHERE content = x'{big}';
             INSERT INTO chunk_lists (content, seq, chunk, offset) SELECT x'{big}', seq, chunk, offset FROM chunk_lists WHERE content = x'{other}';"
        ),
    );
    let repo = Repo::open(&f.root).expect("open");
    let r = repo.check_with(&CheckOptions { read_data: ReadData::All }).expect("check");
    let p = r.problems.iter().find(|p| p.object.as_deref() == Some(big.as_str())).expect("named");
    assert_eq!(p.kind, ProblemKind::ChunkList);
    assert!(p.message.contains("reassemble") && p.paths.iter().any(|x| x.ends_with(":big.bin")), "{p:?}");
}

#[test]
fn repair_index_rebuilds_the_object_index_from_the_packs() {
    let f = fixture();
    let repo = Repo::open(&f.root).expect("open");
    let before: i64 =
        trove::testing::conn(&repo).query_row("SELECT COUNT(*) FROM objects", [], |r| r.get(0)).expect("count");
    drop(repo);
    // A dead count the rebuilt index would make stale (every member is indexed again).
    sql(&f.root, "DELETE FROM objects; INSERT INTO bundle_dead (pack, offset, dead_raw) VALUES (1, 8, 100);");
    let (code, r) = check_json(&f.root, &[]);
    assert_eq!(code, 3, "{r}");
    assert!(r["problems"].as_array().expect("problems").iter().all(|p| p["kind"] == "object_missing"), "{r}");
    let out = trove(&f.root, &["check", "--repair-index"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("index rebuilt"), "{}", stdout(&out));
    let repo = Repo::open(&f.root).expect("open");
    let after: i64 =
        trove::testing::conn(&repo).query_row("SELECT COUNT(*) FROM objects", [], |r| r.get(0)).expect("count");
    assert_eq!(after, before);
    let counts: i64 =
        trove::testing::conn(&repo).query_row("SELECT COUNT(*) FROM bundle_dead", [], |r| r.get(0)).expect("count");
    assert_eq!(counts, 0, "the dead counts go with the index they counted");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_directory_record_naming_a_lost_tree_is_read_again_not_reused() {
    let f = fixture();
    let repo = Repo::open(&f.root).expect("open");
    let dir = content(&repo, &f.snaps[2], "dir");
    drop(repo);
    // The tree goes (damage); the next snapshot must not name it, and so reads `dir` again.
    sql(&f.root, &format!("DELETE FROM trees WHERE id = x'{dir}'"));
    let repo = Repo::open(&f.root).expect("open");
    let s = repo
        .snapshot(&f.ws, &SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() })
        .expect("a snapshot despite the damage");
    assert_eq!(content(&repo, &s, "dir"), dir, "the same tree, stored again");
    let tmp = tempfile::tempdir().expect("tmp");
    assert!(restores(&repo, &s, &tmp.path().join("r")));
    assert_eq!(fs::read(tmp.path().join("r/dir/inner.txt")).expect("inner"), b"inner\n");
}
