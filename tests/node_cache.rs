//! The directory cache is node-local: it lives outside the repository, under `--cache-dir` /
//! `TROVE_CACHE_DIR` or `$XDG_CACHE_HOME/trove/<repository id>/`, and deleting it costs one read
//! of the next snapshot's files and nothing else.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use trove::{Progress, Repo, SnapshotOptions};

const WINDOW_NS: i64 = 30_000_000;

/// Remembers the total of each "reading" phase: the bytes a snapshot read.
#[derive(Default)]
struct Reads(Mutex<Vec<u64>>);

impl Progress for Reads {
    fn start(&self, phase: &str, total: u64) {
        if phase == "reading" {
            self.0.lock().expect("reads").push(total);
        }
    }
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

impl Reads {
    /// Bytes read since the last call.
    fn take(&self) -> u64 {
        std::mem::take(&mut *self.0.lock().expect("reads")).iter().sum()
    }
}

fn workspace(ws: &Path) -> u64 {
    let mut bytes = 0;
    for d in 0..5 {
        fs::create_dir_all(ws.join(format!("d{d}/sub"))).expect("mkdir");
        for f in 0..20 {
            let text = format!("file {f} of directory {d}\n").repeat(f + 1);
            bytes += text.len() as u64;
            fs::write(ws.join(format!("d{d}/sub/f{f}.txt")), text).expect("write");
        }
    }
    bytes
}

#[test]
fn deleting_the_cache_costs_one_read_of_the_files_and_nothing_else() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo_dir, base) = (tmp.path().join("ws"), tmp.path().join("repo"), tmp.path().join("cache"));
    let total = workspace(&ws);
    let mut repo = Repo::init(&repo_dir, "test").expect("init");
    repo.set_cache_dir(&base);
    let cache = repo.cache_dir().expect("a cache directory").to_path_buf();
    assert_eq!(cache, base.join(&repo.config().id));
    assert!(!cache.starts_with(&repo_dir), "the cache is not in the repository");
    let reads = Reads::default();
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, progress: &reads, ..SnapshotOptions::default() };
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));

    let first = repo.snapshot(&ws, &opts).expect("first");
    assert_eq!(reads.take(), total, "a first snapshot reads every file");
    assert!(cache.join("cache.db").is_file());
    assert!(fs::read_to_string(cache.join("CACHEDIR.TAG"))
        .expect("tag")
        .starts_with("Signature: 8a477f597d28d172789f06886806bc55"));
    let second = repo.snapshot(&ws, &opts).expect("second");
    assert_eq!((reads.take(), second.root), (0, first.root), "the cache vouches for every file");

    // The repository's bytes before the cache goes, to see that rebuilding it stores nothing.
    let stored = |repo: &Repo| -> (i64, i64, i64) {
        let conn = trove::testing::conn(repo);
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get(0)).expect(sql);
        (
            count("SELECT COUNT(*) FROM packs"),
            count("SELECT COUNT(*) FROM objects"),
            count("SELECT COUNT(*) FROM loose_objects"),
        )
    };
    let before = stored(&repo);
    drop(repo);
    fs::remove_dir_all(&cache).expect("delete the cache");

    let mut repo = Repo::open(&repo_dir).expect("open");
    repo.set_cache_dir(&base);
    let third = repo.snapshot(&ws, &opts).expect("third, without a cache");
    assert_eq!(reads.take(), total, "one full read");
    assert_eq!(third.root, first.root, "the same snapshot");
    assert_eq!(stored(&repo), before, "nothing stored anew: every content was there");
    let fourth = repo.snapshot(&ws, &opts).expect("fourth");
    assert_eq!((reads.take(), fourth.root), (0, first.root), "the cache is whole again");
    let check = repo.check_with(&trove::CheckOptions::default()).expect("check");
    assert!(check.problems.is_empty(), "{:?}", check.problems);
}

/// The default place (`$XDG_CACHE_HOME/trove/<id>/`), `--cache-dir` over it, and nothing of the
/// cache in the repository: no file beside the manifest, no table in it.
#[test]
fn the_cache_lives_under_xdg_cache_home_or_cache_dir_never_in_the_repository() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo) = (tmp.path().join("ws"), tmp.path().join("repo"));
    workspace(&ws);
    let (xdg, flag) = (tmp.path().join("xdg"), tmp.path().join("flag"));
    let run = |args: &[&str]| {
        let o = Command::new(trove_bin())
            .arg("--repo")
            .arg(&repo)
            .args(args)
            .env_remove("TROVE_CACHE_DIR")
            .env("XDG_CACHE_HOME", &xdg)
            .output()
            .expect("run");
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    run(&["init"]);
    run(&["snapshot", ws.to_str().expect("utf8"), "--workspace", "w"]);
    let default_db = cache_db(&repo, &xdg.join("trove"));
    assert!(default_db.is_file(), "{} was made", default_db.display());
    assert!(default_db.with_file_name("CACHEDIR.TAG").is_file());
    run(&["--cache-dir", flag.to_str().expect("utf8"), "snapshot", ws.to_str().expect("utf8"), "--workspace", "w"]);
    assert!(cache_db(&repo, &flag).is_file(), "--cache-dir wins over the default");

    let names: Vec<String> = fs::read_dir(&repo)
        .expect("repo")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("cache")), "{names:?}");
    let conn = rusqlite::Connection::open(repo.join("manifest.db")).expect("manifest");
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE '%dir_cache%' OR name LIKE '%stat_cache%'",
            [],
            |r| r.get(0),
        )
        .expect("tables");
    assert_eq!(tables, 0, "the manifest holds no directory records (only the generation they must match)");
}

/// `repair snapshots` empties every machine's cache, not only the one of the process that ran
/// it: a cache it could not reach (another `--cache-dir`, another host) still names the lost
/// content, and must not put it back into the next snapshot.
#[test]
fn a_repair_empties_caches_it_cannot_reach_before_their_next_use() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo_dir) = (tmp.path().join("ws"), tmp.path().join("repo"));
    let total = workspace(&ws);
    let reads = Reads::default();
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, progress: &reads, ..SnapshotOptions::default() };
    let mut here = Repo::init(&repo_dir, "test").expect("init");
    here.set_cache_dir(&tmp.path().join("here"));
    let mut there = Repo::open(&repo_dir).expect("open");
    there.set_cache_dir(&tmp.path().join("there"));
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    let first = here.snapshot(&ws, &opts).expect("first");
    there.snapshot(&ws, &opts).expect("there's first");
    assert_eq!(reads.take(), 2 * total, "each cache started empty");
    there.snapshot(&ws, &opts).expect("there, cached");
    assert_eq!(reads.take(), 0, "there's cache vouches for every file");

    // One file's content is lost; `repair snapshots` runs through the other cache.
    let lost = here.lookup(&first, b"d2/sub/f7.txt").expect("entry").content.expect("content");
    let conn = trove::testing::conn(&here);
    assert_eq!(conn.execute("DELETE FROM objects WHERE id = ?1", [&lost.as_bytes()[..]]).expect("lose it"), 1);
    let report = here.repair_snapshots(trove::ReadData::Off, "test").expect("repair");
    assert_eq!(report.snapshots.len(), 3, "{report:?}");

    // The cache the repair could not reach is emptied at its next use: every file is read, and
    // the lost file's bytes come from the disk, not from a record naming the lost content.
    let after = there.snapshot(&ws, &opts).expect("there, after the repair");
    assert_eq!(reads.take(), total, "read again, not vouched for by a record of before the repair");
    let entry = there.lookup(&after, b"d2/sub/f7.txt").expect("entry");
    assert_eq!(there.read_content(&entry).expect("read"), fs::read(ws.join("d2/sub/f7.txt")).expect("file"));
    let out = tmp.path().join("restored");
    there.restore(&after, &out, &trove::RestoreOptions::default()).expect("the new snapshot restores whole");
    assert_eq!(tree_state(&out), tree_state(&ws));
}

/// A server's snapshots from its change feed never outlive a repair: content `repair snapshots`
/// found lost is still named by live trees the feed would reuse as they are, so the served
/// workspace's next snapshot walks the tree and reads every file again, as the cache's does.
#[test]
fn a_served_workspace_is_walked_whole_after_a_repair() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, repo_dir) = (tmp.path().join("ws"), tmp.path().join("repo"));
    let total = workspace(&ws);
    let reads = Reads::default();
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, progress: &reads, ..SnapshotOptions::default() };
    let mut served = Repo::init(&repo_dir, "test").expect("init");
    served.set_cache_dir(&tmp.path().join("cache"));
    let feeds = std::sync::Arc::new(trove::LiveFeeds::new());
    served.set_live_feeds(feeds.clone());
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    let first = served.snapshot(&ws, &opts).expect("first");
    served.snapshot(&ws, &opts).expect("second, from the feed");
    assert_eq!(feeds.snapshots(), (1, 0), "the first walked (none before it), the second came from the feed");
    reads.take();

    let lost = served.lookup(&first, b"d2/sub/f7.txt").expect("entry").content.expect("content");
    let conn = trove::testing::conn(&served);
    assert_eq!(conn.execute("DELETE FROM objects WHERE id = ?1", [&lost.as_bytes()[..]]).expect("lose it"), 1);
    served.repair_snapshots(trove::ReadData::Off, "test").expect("repair");

    let after = served.snapshot(&ws, &opts).expect("after the repair");
    assert_eq!(feeds.snapshots(), (1, 1), "the snapshot after the repair walked the tree");
    assert_eq!(reads.take(), total, "every file read again");
    let entry = served.lookup(&after, b"d2/sub/f7.txt").expect("entry");
    assert_eq!(served.read_content(&entry).expect("read"), fs::read(ws.join("d2/sub/f7.txt")).expect("file"));
    // And the feed is trusted again after that walk.
    served.snapshot(&ws, &opts).expect("from the feed again");
    assert_eq!(feeds.snapshots(), (2, 1));
}
