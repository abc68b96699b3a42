//! Repositories written before a format or layout change still open, check clean and read
//! (issue 18, item 3; issue 38, item 6). `fixtures/repo_before_issue18` was written by main before issue 18's
//! second stop (bundles of objects under 16 KiB in about 256 KiB; a file over 256 KiB alone):
//! two snapshots of workspace `fixture`, the second with `src/f01.rs` appended to and
//! `src/f02.rs` removed. `repo_before_issue18.sha256` holds the second one's files
//! (`sha256sum` format, paths from the workspace root). Today's writer bundles every
//! compressible object up to 4 MiB into bundles of up to 4 MiB: a snapshot taken into the old
//! repository mixes both sizes.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use trove::{Repo, RestoreOptions, SnapshotOptions};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/repo_before_issue18");
/// Written by main before the node-local cache (`203d701`, manifest schema 15): a snapshot of
/// workspace `fixture15`; a session whose twelve `edit_file` calls on `src/lib.rs` are stored as
/// deltas (depths 1 to 12), whose `delete_file` put `README.md` in the trash, and whose end
/// snapshotted it after `docs/notes.md` was appended to outside the tools; the directory cache
/// in the manifest. `repo_schema15.sha256` holds the last snapshot's files.
const FIXTURE15: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/repo_schema15");

/// Every regular file under `dir` with its SHA-256, sorted by path, `sha256sum`'s way.
fn digests(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read") {
            let entry = entry.expect("entry");
            let kind = entry.file_type().expect("type");
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let rel = entry.path().strip_prefix(dir).expect("rel").to_string_lossy().into_owned();
                let sum = hex::encode(Sha256::digest(fs::read(entry.path()).expect("read")));
                out.push((format!("./{rel}"), sum));
            }
        }
    }
    out.sort();
    out
}

fn expected() -> Vec<(String, String)> {
    expected_of(FIXTURE)
}

fn expected_of(fixture: &str) -> Vec<(String, String)> {
    let text = fs::read_to_string(format!("{fixture}.sha256")).expect("expected digests");
    let mut out: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let (sum, path) = l.split_once("  ").expect("sha256sum line");
            (path.to_string(), sum.to_string())
        })
        .collect();
    out.sort();
    out
}

fn restore_latest(repo: &Repo, to: &Path) -> PathBuf {
    let latest = repo.snapshots(Some("fixture")).expect("snapshots").pop().expect("a snapshot");
    repo.restore(&latest, to, &RestoreOptions::default()).expect("restore");
    to.to_path_buf()
}

#[test]
fn a_repository_written_before_issue_18_opens_checks_clean_reads_and_takes_new_snapshots() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    common::copy_tree(Path::new(FIXTURE), &root);
    let repo = Repo::open(&root).expect("the old repository opens");
    let report = repo.check().expect("check runs");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // Both snapshots read back: the latest file by file against the recorded digests.
    let snaps = repo.snapshots(Some("fixture")).expect("snapshots");
    assert_eq!(snaps.len(), 2);
    let first = tmp.path().join("first");
    repo.restore(&snaps[0], &first, &RestoreOptions::default()).expect("restore the first");
    assert!(first.join("src/f02.rs").is_file(), "the first snapshot still holds the removed file");
    let latest = restore_latest(&repo, &tmp.path().join("latest"));
    assert_eq!(digests(&latest), expected());
    assert_eq!(fs::read_link(latest.join("link")).expect("symlink"), Path::new("src/f00.rs"));

    // Today's writer adds to it: new files of every bundling class, old ones deduplicated.
    let ws = tmp.path().join("ws");
    common::copy_tree(&latest, &ws);
    let line = "let mut value = match self { Some(x) => x, None => return Err(e) };\n";
    fs::write(ws.join("docs/new_mid.md"), line.repeat(1500)).expect("write"); // ~100 KiB: now bundled
    fs::write(ws.join("src/new_small.rs"), "pub fn added() {}\n").expect("write");
    let snap = repo.snapshot(&ws, &SnapshotOptions { workspace: Some("fixture".into()), ..Default::default() });
    snap.expect("a new snapshot into the old repository");
    let again = restore_latest(&repo, &tmp.path().join("again"));
    assert_eq!(digests(&again), digests(&ws));
    let report = repo.check().expect("check runs");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(repo);

    // And it opens again, all three snapshots readable.
    let repo = Repo::open(&root).expect("reopen");
    assert_eq!(repo.snapshots(Some("fixture")).expect("snapshots").len(), 3);
    let old = tmp.path().join("old_again");
    repo.restore(&repo.snapshots(Some("fixture")).expect("snapshots")[1], &old, &RestoreOptions::default())
        .expect("restore");
    assert_eq!(digests(&old), expected());
}

#[test]
fn a_repository_written_before_the_node_local_cache_migrates_reads_its_deltas_and_snapshots_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    common::copy_tree(Path::new(FIXTURE15), &root);
    let mut repo = Repo::open(&root).expect("the schema-15 repository opens");
    repo.set_cache_dir(&tmp.path().join("cache"));
    let report = repo.check_with(&trove::CheckOptions { read_data: trove::ReadData::All }).expect("check runs");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // Migrated (to the newest schema, 20): the directory records left the manifest; the cache
    // generation is there (with the key that logs it, schema 19).
    {
        let conn = trove::testing::conn(&repo);
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, 20);
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%cache%'")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("names");
        assert_eq!(tables, vec!["cache_generation".to_string()]);

        // Every version the session's edits wrote reads back through its delta chain, and
        // hashes to what the audit record says it wrote.
        let mut st = conn
            .prepare("SELECT after_object, after_sha256 FROM audit WHERE operation = 'edit_file' ORDER BY seq")
            .expect("prepare");
        let versions: Vec<(Vec<u8>, Vec<u8>)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).expect("query").collect::<Result<_, _>>().expect("rows");
        assert_eq!(versions.len(), 12);
        for (object, sha) in &versions {
            let bytes = repo.content_bytes(&hex::encode(object)).expect("a version reads back");
            assert_eq!(Sha256::digest(&bytes).to_vec(), *sha);
        }
    }

    // The last snapshot restores file by file; the deleted README is in the trash and reads.
    let latest = repo.snapshots(Some("fixture15")).expect("snapshots").pop().expect("a snapshot");
    let out = tmp.path().join("latest");
    repo.restore(&latest, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(digests(&out), expected_of(FIXTURE15));
    let trash = repo.trash("fixture15", Some(b"README.md")).expect("trash");
    assert_eq!(trash.len(), 1);
    let readme = repo.content_bytes(&trash[0].object.expect("content").to_hex()).expect("read");
    assert!(String::from_utf8_lossy(&readme).starts_with("# fixture"));

    // Today's snapshots go on: the first reads every file (the records stayed behind), the next
    // one none; a changed file is a delta against the old version.
    let ws = tmp.path().join("ws");
    common::copy_tree(&out, &ws);
    let opts = SnapshotOptions { workspace: Some("fixture15".into()), ..Default::default() };
    repo.snapshot(&ws, &opts).expect("a new snapshot into the migrated repository");
    let mut text = fs::read_to_string(ws.join("src/lib.rs")).expect("read");
    text.push_str("// one more line\n");
    fs::write(ws.join("src/lib.rs"), &text).expect("write");
    let snap = repo.snapshot(&ws, &opts).expect("and another");
    let entry = repo.lookup(&snap, b"src/lib.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), text.into_bytes());
    let report = repo.check_with(&trove::CheckOptions { read_data: trove::ReadData::All }).expect("check runs");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // The audit log mixes both forms and verifies whole: the fixture's records keep their
    // encodings, today's (schema 17) keep an empty one, computed from their columns.
    let (old, new): (i64, i64) = trove::testing::conn(&repo)
        .query_row("SELECT SUM(length(encoded) > 0), SUM(length(encoded) = 0) FROM audit", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("count");
    assert!(old >= 14 && new >= 2, "{old} records with their encoding, {new} without");
    let audit = repo.verify_audit(&[]).expect("verify");
    assert!(audit.ok(), "{audit:?}");
    assert_eq!(audit.records, (old + new) as u64);
}
