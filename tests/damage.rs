//! A damaged repository is reported, never crashed on (issue 11, items 4 and 8): index rows
//! claiming absurd lengths, values of the wrong type, blob headers claiming absurd sizes; and
//! `check` reads loose objects and verifies that every chunk list reassembles to its content.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use rusqlite::Connection;
use serde_json::json;
use trove::object::Backend;
use trove::tools::ToolCall;
use trove::SessionSpec;
use trove::{ErrorKind, Repo, SnapshotOptions};

fn sql(repo: &Path, statement: &str) {
    let conn = Connection::open(repo.join("manifest.db")).expect("open manifest");
    conn.execute_batch(statement).unwrap_or_else(|e| panic!("{statement}: {e}"));
}

fn problems(repo: &Path) -> Vec<String> {
    Repo::open(repo)
        .expect("open")
        .check()
        .expect("check runs to the end")
        .problems
        .into_iter()
        .map(|p| p.message)
        .collect()
}

/// A repository with one snapshot of two small files; returns (repo, a.txt's content id).
fn small_repo(dir: &Path) -> (std::path::PathBuf, String) {
    let (ws, repo) = (dir.join("ws"), dir.join("repo"));
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "alpha ".repeat(50_000)).expect("write");
    fs::write(ws.join("b.txt"), "beta\n").expect("write");
    let r = Repo::init(&repo, "test").expect("init");
    let snap = r.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let id = r.lookup(&snap, b"a.txt").expect("a").content.expect("content").to_hex();
    (repo, id)
}

#[test]
fn index_rows_with_absurd_lengths_or_wrong_types_are_findings_not_crashes() {
    let damages = [
        ("stored_len = 4611686018427387904", "claims"),
        ("offset = 9223372036854775000", "at offset 9223372036854775000"),
        ("raw_len = -5", "out of range"),
        ("offset = 'not a number'", "Invalid column type"),
        ("inner_offset = 4611686018427387904", ""),
    ];
    for (set, said) in damages {
        let tmp = tempfile::tempdir().expect("tmp");
        let (repo, id) = small_repo(tmp.path());
        sql(&repo, &format!("UPDATE objects SET {set} WHERE id = x'{id}'"));
        let found = problems(&repo);
        assert_eq!(found.len(), 1, "{set}: {found:?}");
        assert!(found[0].contains(said), "{set}: {found:?}");
        // Reading the file says `corrupt` (exit 3); nothing aborts.
        let out = trove(&repo, &["cat", "latest", "a.txt"]);
        assert_eq!(out.status.code(), Some(3), "{set}: {}", stderr(&out));
        let other = trove(&repo, &["cat", "latest", "b.txt"]);
        assert!(other.status.success() || set.contains("inner_offset"), "{set}: {}", stderr(&other));
    }
}

#[test]
fn a_blob_header_claiming_an_absurd_size_is_corrupt() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, _) = small_repo(tmp.path());
    let pack = trove::object::LocalBackend::new(&repo).list("packs/").expect("list").pop().expect("a pack");
    let path = repo.join(&pack);
    let mut bytes = fs::read(&path).expect("read");
    // The first blob's header starts after the 8-byte pack header; raw length at +8, payload
    // length at +16.
    bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    bytes[24..32].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    set_mode(&path, 0o644);
    fs::write(&path, &bytes).expect("damage");
    let found = problems(&repo);
    assert!(!found.is_empty() && found.iter().all(|p| p.contains("its blob")), "{found:?}");
}

#[test]
fn the_server_answers_corrupt_for_a_damaged_row_and_stays_up() {
    let server = common::http::start(Some(common::http::TOKEN), &[]);
    let id = server.session(r#"{"workspace": "w"}"#);
    fs::write(server.workspace("w").join("a.txt"), "alpha ".repeat(50_000)).expect("write");
    let snap = server.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
    assert_eq!(snap.status, 201, "{}", snap.text());
    sql(&server.repo, "UPDATE objects SET stored_len = 4611686018427387904");
    let read = server.get("/v1/snapshots/latest/files/a.txt");
    assert_eq!((read.status, read.json()["kind"].as_str()), (500, Some("corrupt")), "{}", read.text());
    assert_eq!(server.get("/healthz").status, 200, "the server is still up");
}

/// A repository where the file tools wrote two files over the chunking threshold (so their
/// contents are loose objects with chunk lists); returns (repo, content ids of the two).
fn tool_written(dir: &Path) -> (std::path::PathBuf, Repo, [String; 2]) {
    let (ws, root) = (dir.join("ws"), dir.join("repo"));
    fs::create_dir_all(&ws).expect("mkdir");
    let repo = Repo::init(&root, "test").expect("init");
    let w = ws.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(w), "test").expect("session");
    let mut rng = trove::sample::Rng::new(11);
    let mut ids = Vec::new();
    for name in ["one.bin", "two.bin"] {
        let bytes = rng.bytes(3 << 20);
        ids.push(blake3::hash(&bytes).to_hex().to_string());
        use base64::Engine;
        let content = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let call = ToolCall::parse("create_file", json!({"path": name, "content": content, "encoding": "base64"}))
            .expect("parse");
        trove::tools::run(&repo, &s, call, "agent").expect("create a 3 MiB file");
    }
    // An edit of a file over 1 MiB stores its pre-image loose too.
    let sha = common::http::sha256_hex(&fs::read(ws.join("one.bin")).expect("read"));
    let call = ToolCall::parse("write_file", json!({"path": "one.bin", "content": "small now", "expectedSha256": sha}))
        .expect("parse");
    trove::tools::run(&repo, &s, call, "agent").expect("overwrite");
    (root, repo, [ids[0].clone(), ids[1].clone()])
}

#[test]
fn check_reads_loose_objects_and_reassembles_their_chunk_lists() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, _) = tool_written(tmp.path());
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "a tool write over 1 MiB is not damage: {:?}", report.problems);
    assert!(report.loose >= 3 && report.chunked == 2, "{report:?}");
    drop(repo);

    // A flipped byte in a loose object is found and named.
    let conn = Connection::open(root.join("manifest.db")).expect("open");
    let (id, mut blob): (Vec<u8>, Vec<u8>) = conn
        .query_row("SELECT id, encoded FROM loose_objects ORDER BY id LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("a loose object");
    let last = blob.len() - 1;
    blob[last] ^= 1;
    conn.execute("UPDATE loose_objects SET encoded = ?1 WHERE id = ?2", rusqlite::params![blob, id]).expect("damage");
    drop(conn);
    let found = problems(&root);
    assert!(!found.is_empty() && found.iter().all(|p| p.contains(&hex::encode(&id))), "{found:?}");
}

#[test]
fn a_chunk_list_that_does_not_reassemble_to_its_content_is_found() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, [one, two]) = tool_written(tmp.path());
    drop(repo);
    // one.bin's list now names two.bin's chunks: every chunk is stored and the offsets add up,
    // but the bytes are another file's.
    sql(
        &root,
        &format!(
            "DELETE FROM chunk_lists WHERE content = x'{one}';
             INSERT INTO chunk_lists (content, seq, chunk, offset)
                 SELECT x'{one}', seq, chunk, offset FROM chunk_lists WHERE content = x'{two}';"
        ),
    );
    let found = problems(&root);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&one) && found[0].contains("reassemble"), "{found:?}");
    let e = Repo::open(&root).expect("open").content_bytes(&one).expect_err("a wrong list is not the file");
    assert_eq!(e.kind(), ErrorKind::Corrupt);
}

/// Ids are parsed where they enter (issue 12, item 4): a malformed one in a row is `corrupt`,
/// naming what is wrong, never a value silently dropped or passed on.
#[test]
fn a_malformed_id_or_kind_in_a_row_is_corrupt() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, _) = tool_written(tmp.path());
    let s = &repo.sessions(true).expect("sessions")[0];
    let sha = common::http::sha256_hex(&fs::read(s.live_dir.join("two.bin")).expect("read"));
    let call = ToolCall::parse("delete_file", json!({"path": "two.bin", "expectedSha256": sha})).expect("parse");
    let data = trove::tools::run(&repo, s, call, "agent").expect("delete").to_json();
    let trash_id = trove::TrashId::parse(data["trashId"].as_str().expect("trash id")).expect("id");
    drop(repo);

    sql(&root, &format!("UPDATE trash SET kind = 'socket' WHERE id = '{trash_id}'"));
    let e = Repo::open(&root).expect("open").trash_item(&trash_id).expect_err("a bad kind");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("'socket' is not a kind"), "{e}");

    sql(&root, "UPDATE sessions SET final_snapshot = '../../etc'");
    let e = Repo::open(&root).expect("open").sessions(true).expect_err("a bad snapshot id");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("is not a snapshot id"), "{e}");
}

#[test]
fn the_server_refuses_a_malformed_session_id_in_the_url_by_name() {
    let server = common::http::start(Some(common::http::TOKEN), &[]);
    for target in ["/v1/sessions/a%20b", "/v1/sessions/a%2F..%2Fb/files", "/v1/sessions/x%00y/files/a.txt"] {
        let r = server.get(target);
        assert_eq!(r.status, 400, "{target}: {}", r.text());
        assert!(r.text().contains("is not a session id"), "{target}: {}", r.text());
    }
    let unknown = server.get("/v1/sessions/sess_000000000000");
    assert_eq!(unknown.status, 404, "a well-formed unknown id is not found: {}", unknown.text());
}
