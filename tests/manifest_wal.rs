//! The manifest's write-ahead log between processes: kept while small, emptied once past 1 MiB,
//! and nothing committed lost either way.

use trove::{Repo, SnapshotOptions};

const MIB: u64 = 1 << 20;

#[test]
fn the_wal_is_left_for_the_next_opener_while_small_and_emptied_once_past_a_mebibyte() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).expect("ws");
    drop(Repo::init(&root, "test").expect("init"));
    let wal = root.join("manifest.db-wal");
    let wal_size = || std::fs::metadata(&wal).map_or(0, |m| m.len());

    // Each round is one "process": open, snapshot a changed file, close.
    let rounds = 80;
    let (mut kept, mut emptied) = (0, 0);
    for i in 0..rounds {
        std::fs::write(ws.join("f.txt"), format!("round {i}\n").repeat(64)).expect("write");
        let repo = Repo::open(&root).expect("open");
        repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
        let open = wal_size();
        drop(repo);
        let closed = wal_size();
        if open > MIB {
            assert_eq!(closed, 0, "round {i}: a WAL of {open} bytes was not emptied at the close");
            emptied += 1;
        } else {
            assert_eq!(closed, open, "round {i}: a WAL of {open} bytes was not left as it was");
            kept += 1;
        }
    }
    assert!(emptied > 0 && kept > emptied, "{emptied} closes emptied the WAL, {kept} kept it: change the rounds");

    // Nothing committed is lost, whichever way each close went.
    let repo = Repo::open(&root).expect("open");
    let snaps = repo.snapshots(Some("ws")).expect("snapshots");
    assert_eq!(snaps.len(), rounds);
    let last = snaps.last().expect("a snapshot");
    let entry = repo.lookup(last, b"f.txt").expect("lookup");
    assert_eq!(repo.read_content(&entry).expect("read"), format!("round {}\n", rounds - 1).repeat(64).into_bytes());
}
