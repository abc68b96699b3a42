//! Serving a workspace's files from the live tree, or from its latest snapshot once the live
//! directory is gone; scope and path rules on both.

mod common;

use std::fs;

use trove::ChangePolicy;
use trove::Excludes;
use trove::FILES_READ_LIMIT as READ_LIMIT;
use trove::{ErrorKind, Repo, SnapshotOptions};
use trove::{FileAccess, Scope};
use trove::{Origin, Source, WorkspaceView};

#[test]
fn live_while_the_directory_exists_then_the_latest_snapshot() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    common::rich_workspace(&ws);
    let repo = Repo::in_memory().expect("repo");
    let ex = Excludes::effective(None, &[]).expect("excludes");
    let view = WorkspaceView { name: "ws", session: None, live_dir: Some(&ws), excludes: &ex, scope: None };

    let err = repo.list_files(&WorkspaceView { live_dir: None, ..view }, &Source::Auto).expect_err("nothing yet");
    assert_eq!(err.message(), "No workspace available for this session");

    let (live, origin) = repo.list_files(&view, &Source::Auto).expect("live listing");
    assert_eq!(origin, Origin::Sandbox);
    assert!(live.iter().any(|f| f.path == b"src/main.rs") && !live.iter().any(|f| f.path.starts_with(b"node_modules")));

    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let moved = tmp.path().join("gone");
    fs::rename(&ws, &moved).expect("the sandbox goes away");
    let (from_snap, origin) = repo.list_files(&view, &Source::Auto).expect("snapshot listing");
    assert_eq!(origin, Origin::Snapshot(snap.id.clone()));
    let paths = |v: &[trove::LiveFile]| v.iter().map(|f| (f.path.clone(), f.size)).collect::<Vec<_>>();
    assert_eq!(paths(&from_snap), paths(&live), "the same files, from either source");

    let (read, origin) =
        repo.read_file_from(&view, &Source::Auto, b"src/main.rs", READ_LIMIT, ChangePolicy::Retry).expect("read");
    assert_eq!((read.bytes.as_slice(), origin.as_str()), (&b"fn main() {}\n"[..], "snapshot"));
    assert_eq!(
        repo.read_file_from(&view, &Source::Live, b"src/main.rs", READ_LIMIT, ChangePolicy::Retry)
            .expect_err("no live")
            .kind(),
        ErrorKind::NotFound
    );
    // A link inside the workspace reads as its target, as it does live; one leading out does not.
    let (read, _) = repo.read_file_from(&view, &Source::Auto, b"link", READ_LIMIT, ChangePolicy::Retry).expect("link");
    assert_eq!(read.bytes, b"fn main() {}\n");
    for (path, kind) in [
        (&b"src"[..], ErrorKind::IsDirectory),
        (b"big.bin", ErrorKind::TooLarge),
        (b"abs-link", ErrorKind::NotFound),
        (b"../x", ErrorKind::InvalidPath),
    ] {
        let err = repo.read_file_from(&view, &Source::Auto, path, 1 << 20, ChangePolicy::Retry).expect_err("refused");
        assert_eq!(err.kind(), kind, "{}", String::from_utf8_lossy(path));
    }

    fs::rename(&moved, &ws).expect("back");
    let by_id = Source::parse(&snap.id.as_str()[..10]);
    let (_, origin) = repo.list_files(&view, &by_id).expect("explicit snapshot");
    assert_eq!(origin.snapshot_id(), Some(&snap.id));
}

#[test]
fn scope_hides_and_refuses_on_both_sources() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    common::rich_workspace(&ws);
    let repo = Repo::in_memory().expect("repo");
    repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let ex = Excludes::effective(None, &[]).expect("excludes");
    let scope = Scope::new("sess_1", &FileAccess { read: vec!["src/deep".into()], write: vec![] }).expect("scope");
    let view = WorkspaceView { name: "ws", session: None, live_dir: Some(&ws), excludes: &ex, scope: Some(&scope) };
    for want in [Source::Live, Source::Latest] {
        let (files, _) = repo.list_files(&view, &want).expect("list");
        let paths: Vec<&[u8]> = files.iter().map(|f| f.path.as_slice()).collect();
        assert_eq!(paths, vec![&b"src/deep/er/notes.txt"[..]], "{want:?}");
        let err = repo
            .read_file_from(&view, &want, b"src/main.rs", READ_LIMIT, ChangePolicy::Retry)
            .expect_err("out of scope");
        assert_eq!((err.kind(), err.message()), (ErrorKind::PermissionDenied, "'src/main.rs' not in session scope"));
    }
}
