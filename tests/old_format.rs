//! Repositories written before a format or layout change still open, check clean and read
//! (issue 18, item 3). `fixtures/repo_before_issue18` was written by main before issue 18's
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
    let text = fs::read_to_string(format!("{FIXTURE}.sha256")).expect("expected digests");
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
