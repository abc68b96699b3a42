//! A big tree read whole is snapshotted in batches (issue 38, item 4): its subtrees of at most
//! `batch_files` entries are walked, read, built and recorded one batch at a time, then the
//! directories above them. The snapshot is the one a single walk takes, entry for entry; the
//! directory records it leaves make the next snapshot read nothing; content in several batches
//! is stored once; a snapshot killed between two batches leaves a repository that checks clean
//! (its packs orphans, for a collection), and the next snapshot succeeds.

mod common;

use std::fs;
use std::path::Path;

use common::{rich_workspace, tree_state, trove, trove_at_failpoint};
use trove::{Counts, Repo, RestoreOptions, SnapshotOptions};

/// `rich_workspace` (symlinks, an empty directory, a chunked file, excluded entries), a flat
/// directory bigger than any batch, a deep chain, and many small directories.
fn big_tree(w: &Path) {
    rich_workspace(w);
    for i in 0..40 {
        fs::write(w.join(format!("f{i:02}.txt")), format!("root file {i}\n")).expect("root file");
    }
    fs::create_dir_all(w.join("flat")).expect("flat");
    for i in 0..25 {
        fs::write(w.join(format!("flat/{i}.rs")), format!("fn f{i}() {{}}\n")).expect("flat file");
    }
    let mut deep = w.join("deep");
    for level in 0..9 {
        deep = deep.join(format!("d{level}"));
        fs::create_dir_all(&deep).expect("deep");
        fs::write(deep.join("a.txt"), format!("level {level}\n")).expect("deep file");
        fs::write(deep.join("same.txt"), "the same in every level\n").expect("deep file");
    }
    for p in 0..6 {
        for c in 0..4 {
            let d = w.join(format!("pkg{p}/mod{c}"));
            fs::create_dir_all(&d).expect("pkg");
            for f in 0..3 {
                fs::write(d.join(format!("{f}.py")), format!("# {p} {c} {f}\n")).expect("pkg file");
            }
        }
        std::os::unix::fs::symlink("../f00.txt", w.join(format!("pkg{p}/link"))).expect("link");
    }
}

fn opts(workspace: &str) -> SnapshotOptions<'static> {
    SnapshotOptions { workspace: Some(workspace.into()), ..SnapshotOptions::default() }
}

fn same_counts(a: &Counts, b: &Counts) {
    assert_eq!(
        (a.files, a.dirs, a.symlinks, a.bytes, a.skipped, a.added, a.changed, a.removed),
        (b.files, b.dirs, b.symlinks, b.bytes, b.skipped, b.added, b.changed, b.removed)
    );
}

/// Directory records the node-local cache holds for `workspace`.
fn records(repo: &Path, cache: &Path, workspace: &str) -> i64 {
    rusqlite::Connection::open(common::cache_db(repo, cache))
        .expect("cache")
        .query_row("SELECT COUNT(DISTINCT dir_key) FROM dir_cache WHERE workspace = ?1", [workspace], |r| r.get(0))
        .expect("count")
}

#[test]
fn a_snapshot_in_batches_is_the_snapshot_one_walk_takes_and_leaves_its_records() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = tmp.path().join("w");
    big_tree(&w);
    let (a_dir, b_dir, cache) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("cache"));
    Repo::init(&a_dir, "t").expect("init");
    Repo::init(&b_dir, "t").expect("init");
    let open = |dir: &Path, batch: u64| {
        let mut r = Repo::open(dir).expect("open");
        r.set_cache_dir(&cache);
        r.set_batch_files(batch);
        r
    };
    let whole = open(&b_dir, 1 << 40).snapshot(&w, &opts("w")).expect("one walk");
    for batch in [1, 7, 30, 100] {
        let a = open(&a_dir, batch);
        let name = format!("w{batch}");
        let batched = a.snapshot(&w, &opts(&name)).expect("in batches");
        assert_eq!(batched.root, whole.root, "batches of {batch}");
        same_counts(&batched.counts, &whole.counts);
        assert!(batched.warnings.is_empty(), "{:?}", batched.warnings);
        // Every directory got its record, in a cache marked with the manifest's generation (or
        // the next snapshot would drop them unread): the next snapshot reads nothing.
        let dirs = whole.counts.dirs as i64 + 1;
        assert_eq!(records(&a_dir, &cache, &name), dirs, "batches of {batch}");
        let marked: i64 = rusqlite::Connection::open(common::cache_db(&a_dir, &cache))
            .expect("cache")
            .query_row("SELECT value FROM generation", [], |r| r.get(0))
            .expect("the cache is marked");
        let current: i64 = trove::testing::conn(&a)
            .query_row("SELECT generation FROM cache_generation", [], |r| r.get(0))
            .expect("generation");
        assert_eq!(marked, current);
        let again = a.snapshot(&w, &opts(&name)).expect("no change");
        assert_eq!(again.root, whole.root);
        assert_eq!((again.counts.added, again.counts.changed, again.counts.removed), (0, 0, 0));
    }
    // It restores byte for byte and the repository checks clean.
    let a = open(&a_dir, 7);
    let latest = a.snapshots(Some("w7")).expect("list").pop().expect("a snapshot");
    let out = tmp.path().join("out");
    a.restore(&latest, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&w));
    let report = a.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // After a change, with the cache gone (every file read again, against a parent), batches
    // and one walk still agree, counts of what changed included.
    fs::write(w.join("pkg3/mod1/0.py"), "# changed\n").expect("change");
    fs::remove_dir_all(w.join("deep/d0/d1/d2/d3")).expect("remove");
    fs::write(w.join("flat/new.rs"), "fn new() {}\n").expect("add");
    fs::remove_dir_all(&cache).expect("the cache deleted");
    let whole = open(&b_dir, 1 << 40).snapshot(&w, &opts("w")).expect("one walk");
    let batched = open(&a_dir, 7).snapshot(&w, &opts("w7")).expect("in batches");
    assert_eq!(batched.root, whole.root);
    same_counts(&batched.counts, &whole.counts);
    assert!(batched.counts.changed >= 1 && batched.counts.removed >= 1 && batched.counts.added >= 1);
}

#[test]
fn a_snapshot_killed_between_batches_leaves_garbage_only_and_the_next_one_succeeds() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (w, repo, cache) = (tmp.path().join("w"), tmp.path().join("repo"), tmp.path().join("cache"));
    big_tree(&w);
    let cache_arg = cache.to_str().expect("utf8");
    assert!(trove(&repo, &["init"]).status.success());
    let args = ["--cache-dir", cache_arg, "--batch-files", "10", "snapshot", w.to_str().expect("utf8")];
    let killed = trove_at_failpoint(&repo, &args, "snapshot:batch-recorded");
    assert!(!killed.status.success(), "the failpoint stops the snapshot");
    let r = Repo::open(&repo).expect("open");
    assert!(r.snapshots(None).expect("list").is_empty(), "no snapshot was acknowledged");
    // What the first batch stored waits for the commit: its pack is a file the index does not
    // know, and no tree or chunk list names what the index lacks.
    let count = |sql: &str| -> i64 { trove::testing::conn(&r).query_row(sql, [], |x| x.get(0)).expect(sql) };
    assert_eq!(count("SELECT COUNT(*) FROM trees"), 0);
    assert_eq!(count("SELECT COUNT(*) FROM objects"), 0);
    assert_eq!(count("SELECT COUNT(*) FROM chunk_lists"), 0);
    let packs = fs::read_dir(repo.join("packs")).expect("packs").count();
    assert!(packs > 0, "the first batch's pack is on disk");
    let report = r.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(r);

    // The next snapshot succeeds and is the snapshot one walk takes.
    let done = trove(&repo, &["--cache-dir", cache_arg, "--batch-files", "10", "snapshot", w.to_str().expect("utf8")]);
    assert!(done.status.success(), "{}", common::stderr(&done));
    let mut b = Repo::init(&tmp.path().join("b"), "t").expect("init");
    b.set_cache_dir(&cache);
    let whole = b.snapshot(&w, &SnapshotOptions::default()).expect("one walk");
    let r = Repo::open(&repo).expect("open");
    let latest = r.snapshots(None).expect("list").pop().expect("a snapshot");
    assert_eq!(latest.root, whole.root);
    let report = r.check_with(&trove::CheckOptions { read_data: trove::ReadData::All }).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// The batches' objects wait for the commit to be indexed (in one ordered pass); a batch still
/// finds what one before it stored, so content in several batches is stored once, and the
/// indexed copy is the one the pack holds.
#[test]
fn content_in_several_batches_is_stored_once_and_indexed_by_the_commit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = tmp.path().join("w");
    for d in 0..6 {
        let dir = w.join(format!("d{d}"));
        fs::create_dir_all(&dir).expect("dir");
        fs::write(dir.join("shared.txt"), "the same in every directory\n").expect("file");
        fs::write(dir.join("also.txt"), "this one too\n").expect("file");
        fs::write(dir.join("own.txt"), format!("directory {d}\n")).expect("file");
    }
    // A file big enough to be chunked, in a batch of its own: its chunk list waits with the rest.
    let mut x: u64 = 38;
    let big: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect();
    fs::write(w.join("d5/own.txt"), &big).expect("big file");
    fs::write(w.join("top.txt"), "this one too\n").expect("file");
    let mut r = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    r.set_cache_dir(&tmp.path().join("cache"));
    // Four entries a directory (itself and its three files): each its own batch.
    r.set_batch_files(4);
    let taken = r.snapshot(&w, &opts("w")).expect("in batches");
    assert_eq!(taken.counts.files, 19);
    let conn = trove::testing::conn(&r);
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |x| x.get(0)).expect(sql) };
    let chunks = count("SELECT COUNT(*) FROM chunk_lists");
    assert!(chunks > 1, "the big file was chunked");
    let stored = 7 + chunks;
    assert_eq!(count("SELECT COUNT(*) FROM objects"), stored, "two shared contents, five of their own, the chunks");
    assert_eq!(count("SELECT SUM(objects) FROM packs"), stored, "no content was packed twice");
    // A pack a batch; the walk above them finds top.txt's content among what a batch staged.
    assert_eq!(count("SELECT COUNT(*) FROM packs"), 6);
    let out = tmp.path().join("out");
    r.restore(&taken, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&w));
    let report = r.check_with(&trove::CheckOptions { read_data: trove::ReadData::All }).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
