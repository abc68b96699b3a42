//! Property test: whatever happens to files and directories between snapshots, what the
//! directory cache vouches for (a file not read again, a directory keeping its tree id) never
//! yields a snapshot that differs from one reading every file again.

use std::fs;
use std::path::Path;
use std::time::Duration;

mod common;

use proptest::prelude::*;
use trove::{Repo, SnapshotOptions};

#[derive(Debug, Clone)]
enum Op {
    /// Rewrite file `i` with content `v` (several share a length, so the size stays equal).
    Write(usize, usize),
    /// Rewrite with content `v`, then put the old mtime back, as tools that preserve mtimes do.
    WriteKeepMtime(usize, usize),
    /// Replace file `i` with a copy of file `j` via rename (new inode, maybe same size/mtime).
    RenameOver(usize, usize),
    Chmod(usize, bool),
    /// Write file `i` inside subdirectory `d{j}` (made if missing).
    WriteIn(usize, usize, usize),
    /// Remove subdirectory `d{j}` and all it holds.
    RemoveDir(usize),
    /// Point the symlink `link` at file `i` (made if missing).
    Relink(usize),
    /// Let time pass beyond the racy window, so what was read becomes cacheable.
    Sleep,
    Snapshot,
}

const CONTENTS: [&str; 5] = ["aaaa", "bbbb", "cccc", "dddddd", ""];
const FILES: usize = 4;
const WINDOW_NS: i64 = 30_000_000;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..FILES, 0..CONTENTS.len()).prop_map(|(i, v)| Op::Write(i, v)),
        (0..FILES, 0..CONTENTS.len()).prop_map(|(i, v)| Op::WriteKeepMtime(i, v)),
        (0..FILES, 0..FILES).prop_map(|(i, j)| Op::RenameOver(i, j)),
        (0..FILES, any::<bool>()).prop_map(|(i, x)| Op::Chmod(i, x)),
        (0..FILES, 0..2usize, 0..CONTENTS.len()).prop_map(|(i, j, v)| Op::WriteIn(i, j, v)),
        (0..2usize).prop_map(Op::RemoveDir),
        (0..FILES).prop_map(Op::Relink),
        Just(Op::Sleep),
        Just(Op::Snapshot),
        Just(Op::Snapshot),
    ]
}

fn name(i: usize) -> String {
    format!("f{i}")
}

fn apply(ws: &Path, op: &Op) {
    use std::os::unix::fs::PermissionsExt;
    match *op {
        Op::Write(i, v) => fs::write(ws.join(name(i)), CONTENTS[v]).expect("write"),
        Op::WriteKeepMtime(i, v) => {
            let p = ws.join(name(i));
            let old = filetime::FileTime::from_last_modification_time(&fs::metadata(&p).expect("stat"));
            fs::write(&p, CONTENTS[v]).expect("write");
            filetime::set_file_mtime(&p, old).expect("set mtime");
        }
        Op::RenameOver(i, j) => {
            let tmp = ws.join("tmpcopy");
            fs::copy(ws.join(name(j)), &tmp).expect("copy");
            let src = fs::metadata(ws.join(name(j))).expect("stat");
            filetime::set_file_mtime(&tmp, filetime::FileTime::from_last_modification_time(&src)).expect("mtime");
            fs::rename(&tmp, ws.join(name(i))).expect("rename");
        }
        Op::Chmod(i, x) => {
            let mode = if x { 0o755 } else { 0o644 };
            fs::set_permissions(ws.join(name(i)), fs::Permissions::from_mode(mode)).expect("chmod");
        }
        Op::WriteIn(i, j, v) => {
            fs::create_dir_all(ws.join(format!("d{j}"))).expect("mkdir");
            fs::write(ws.join(format!("d{j}")).join(name(i)), CONTENTS[v]).expect("write");
        }
        Op::RemoveDir(j) => {
            let _ = fs::remove_dir_all(ws.join(format!("d{j}")));
        }
        Op::Relink(i) => {
            let _ = fs::remove_file(ws.join("link"));
            std::os::unix::fs::symlink(name(i), ws.join("link")).expect("symlink");
        }
        Op::Sleep => std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000)),
        Op::Snapshot => {}
    }
}

fn check(repo: &Repo, ws: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, ..SnapshotOptions::default() };
    let snap = repo.snapshot(ws, &opts).expect("snapshot");
    for i in 0..FILES {
        let bytes = fs::read(ws.join(name(i))).expect("read");
        let entry = repo.lookup(&snap, name(i).as_bytes()).expect("lookup");
        assert_eq!(entry.content, Some(trove::object::ObjectId::of(&bytes)), "content of {}", name(i));
        let sha: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&bytes).into();
        assert_eq!(entry.sha256, Some(trove::object::Sha256(sha)), "sha256 of {}", name(i));
        let mode = fs::metadata(ws.join(name(i))).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(entry.mode, mode, "mode of {}", name(i));
    }
    // The whole tree, subdirectories and links included, is the one a snapshot reading every
    // file builds (in a repository of its own, so its cache is not touched).
    let fresh = Repo::in_memory().expect("repo");
    let full = fresh
        .snapshot(ws, &SnapshotOptions { use_stat_cache: false, ..SnapshotOptions::default() })
        .expect("full snapshot");
    assert_eq!(snap.root, full.root, "the cached snapshot's tree is the full read's");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    fn skip_decision_matches_a_full_rehash(ops in prop::collection::vec(op(), 1..14)) {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).expect("mkdir");
        for i in 0..FILES {
            fs::write(ws.join(name(i)), CONTENTS[i % 3]).expect("write");
        }
        let repo = Repo::in_memory().expect("repo");
        check(&repo, &ws);
        std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
        check(&repo, &ws);
        for op in &ops {
            apply(&ws, op);
            if matches!(op, Op::Snapshot) {
                check(&repo, &ws);
            }
        }
        check(&repo, &ws);
    }
}

/// The cache is used at all: after the racy window, an unchanged file is not read again
/// (shown by replacing its bytes behind the stat's back is impossible, so count reads instead:
/// a file made unreadable would warn if it were read).
#[test]
fn unchanged_files_are_not_read_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a"), "hello").expect("write");
    let repo = Repo::in_memory().expect("repo");
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, ..SnapshotOptions::default() };
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    repo.snapshot(&ws, &opts).expect("first");
    let cached = trove::testing::dir_cache_files(&repo).expect("records");
    assert_eq!(cached, (1, 0), "an old enough file is cached");
    fs::write(ws.join("b"), "fresh").expect("write");
    repo.snapshot(&ws, &opts).expect("second");
    let cached = trove::testing::dir_cache_files(&repo).expect("records");
    assert_eq!(cached, (1, 1), "a file written just now is racy: read again next time");
}

/// A directory record names the tree its files' contents come from. Pointed at a tree that
/// lacks them (damage, or a bug), the files it vouches for are read again: no error, and no
/// content taken from the wrong tree.
#[test]
fn files_a_records_tree_lacks_are_read_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    for (path, text) in [("a/x", "x one"), ("a/y", "y stays"), ("b/p", "p"), ("b/q", "q")] {
        fs::create_dir_all(ws.join(path).parent().expect("parent")).expect("mkdir");
        fs::write(ws.join(path), text).expect("write");
    }
    let repo = Repo::in_memory().expect("repo");
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, ..SnapshotOptions::default() };
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    repo.snapshot(&ws, &opts).expect("first");

    // Point a/'s record at b/'s tree.
    let conn = trove::testing::cache_conn(&repo).expect("the node-local cache");
    let rows: Vec<(Vec<u8>, Vec<u8>)> = common::pairs(conn, "SELECT dir_key, data FROM dir_cache");
    let names = |blob: &[u8]| -> Vec<Vec<u8>> {
        let r = trove::testing::dir_cache::Record::parse(blob).expect("record");
        r.entries().map(|e| e.expect("entry").name.to_vec()).collect()
    };
    let find = |want: &[&[u8]]| rows.iter().find(|(_, blob)| names(blob) == want).expect("a record").clone();
    let (a_key, mut a_record) = find(&[b"x", b"y"]);
    let (_, b_record) = find(&[b"p", b"q"]);
    a_record[1..33].copy_from_slice(&b_record[1..33]);
    conn.execute("UPDATE dir_cache SET data = ?1 WHERE dir_key = ?2", rusqlite::params![a_record, a_key])
        .expect("update");

    fs::write(ws.join("a/x"), "x two").expect("write");
    let snap = repo.snapshot(&ws, &opts).expect("second");
    let content = |path: &str| {
        let entry = repo.lookup(&snap, path.as_bytes()).expect(path);
        repo.read_object(&entry.content.expect("content")).expect("read")
    };
    assert_eq!(content("a/x"), b"x two");
    assert_eq!(content("a/y"), b"y stays", "read again, not taken from the wrong tree");
    assert_eq!(content("b/p"), b"p");
}

/// A record whose tree garbage collection has condemned is not relied on: the directory is
/// read and its tree stored again, which clears the mark, so the snapshot never points at a
/// tree the next collection may delete.
#[test]
fn a_records_condemned_tree_is_stored_again_not_kept() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(ws.join("a")).expect("mkdir");
    fs::write(ws.join("a/x"), "x").expect("write");
    fs::write(ws.join("top"), "t").expect("write");
    let repo = Repo::in_memory().expect("repo");
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, ..SnapshotOptions::default() };
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    let first = repo.snapshot(&ws, &opts).expect("first");
    let a_tree = repo.lookup(&first, b"a").expect("a").content.expect("a's tree");

    let conn = trove::testing::conn(&repo);
    let mark = |v: Option<i64>| {
        conn.execute("UPDATE trees SET condemned = ?1 WHERE id = ?2", rusqlite::params![v, &a_tree.as_bytes()[..]])
            .expect("update")
    };
    assert_eq!(mark(Some(1)), 1, "a's tree is stored");
    let second = repo.snapshot(&ws, &opts).expect("second, nothing changed");
    assert_eq!(repo.lookup(&second, b"a").expect("a").content, Some(a_tree), "same tree");
    let condemned: Option<i64> = conn
        .query_row("SELECT condemned FROM trees WHERE id = ?1", [&a_tree.as_bytes()[..]], |r| r.get(0))
        .expect("row");
    assert_eq!(condemned, None, "stored again, not kept on the record's word");
}

/// A big directory's record is kept in parts no larger than `DIR_CACHE_PART`, numbered from 0:
/// they read back as the whole record, a record that shrinks leaves no part behind, a record
/// of one long part (as written before parts) is still used, and one with a part missing is a
/// miss: the directory is read again and its record written whole.
#[test]
fn a_big_directorys_record_is_kept_in_parts_that_read_back_whole() {
    let part = trove::testing::DIR_CACHE_PART;
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(ws.join("big")).expect("mkdir");
    let file = |i: usize| ws.join("big").join(format!("{i:04}-a-file-name-long-enough-to-fill-the-record"));
    for i in 0..200 {
        fs::write(file(i), format!("file {i}")).expect("write");
    }
    let repo = Repo::in_memory().expect("repo");
    let opts = SnapshotOptions { racy_window_ns: WINDOW_NS, ..SnapshotOptions::default() };
    std::thread::sleep(Duration::from_nanos(WINDOW_NS as u64 + 5_000_000));
    let first = repo.snapshot(&ws, &opts).expect("first");
    let conn = trove::testing::cache_conn(&repo).expect("the node-local cache");
    // The parts of big/'s record (the one with 200 entries): (part, length), in order.
    let big_key = || -> Vec<u8> {
        let rows: Vec<(Vec<u8>, i64)> =
            common::pairs(conn, "SELECT dir_key, count(*) FROM dir_cache GROUP BY dir_key ORDER BY count(*) DESC");
        rows[0].0.clone()
    };
    let parts = |key: &[u8]| -> Vec<(i64, i64)> {
        conn.prepare("SELECT part, length(data) FROM dir_cache WHERE dir_key = ?1 ORDER BY part")
            .expect("prepare")
            .query_map([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    let key = big_key();
    let written = parts(&key);
    let len: i64 = written.iter().map(|(_, l)| l).sum();
    assert!(len > 8 * part as i64, "the record is {len} bytes");
    assert_eq!(written.len() as i64, (len + part as i64 - 1) / part as i64, "{written:?}");
    assert!(written.iter().enumerate().all(|(i, (p, l))| *p == i as i64 && *l <= part as i64), "{written:?}");
    assert_eq!(trove::testing::dir_cache_files(&repo).expect("records"), (200, 0), "the parts read back whole");

    // Nothing changed: the record is used as it is, not written again.
    // (Counted by a trigger: a record written again would look the same.)
    conn.execute_batch(
        "CREATE TEMP TABLE writes (n INTEGER); INSERT INTO writes VALUES (0);
         CREATE TEMP TRIGGER count_writes AFTER INSERT ON dir_cache BEGIN UPDATE writes SET n = n + 1; END;",
    )
    .expect("trigger");
    let writes = || -> i64 { conn.query_row("SELECT n FROM temp.writes", [], |r| r.get(0)).expect("writes") };
    let second = repo.snapshot(&ws, &opts).expect("second");
    assert_eq!(second.root, first.root);
    assert_eq!(writes(), 0, "nothing changed, nothing written");

    // A record written before parts existed (one long part) is still used: not written again.
    let record: Vec<u8> = {
        let rows: Vec<(i64, Vec<u8>)> = conn
            .prepare("SELECT part, data FROM dir_cache WHERE dir_key = ?1 ORDER BY part")
            .expect("prepare")
            .query_map([&key], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        rows.into_iter().flat_map(|(_, d)| d).collect()
    };
    conn.execute("DELETE FROM dir_cache WHERE dir_key = ?1", [&key]).expect("delete");
    conn.execute(
        "INSERT INTO dir_cache (workspace, dir_key, part, data) VALUES ('ws', ?1, 0, ?2)",
        rusqlite::params![key, record],
    )
    .expect("one part");
    let before = writes();
    repo.snapshot(&ws, &opts).expect("third");
    assert_eq!(writes(), before, "a whole record in one part is used as it is");
    assert_eq!(parts(&key), vec![(0, len)]);
    assert_eq!(trove::testing::dir_cache_files(&repo).expect("records"), (200, 0));

    // A part missing: the record is a miss, and the directory's record is written whole again.
    let key_parts = written.len() as i64;
    conn.execute("DELETE FROM dir_cache WHERE dir_key = ?1", [&key]).expect("delete");
    for (i, piece) in record.chunks(part).enumerate() {
        if i != 1 {
            conn.execute(
                "INSERT INTO dir_cache (workspace, dir_key, part, data) VALUES ('ws', ?1, ?2, ?3)",
                rusqlite::params![key, i as i64, piece],
            )
            .expect("part");
        }
    }
    assert_eq!(trove::testing::dir_cache_files(&repo).expect("records"), (0, 0), "a record with a gap is not read");
    let before = writes();
    let fourth = repo.snapshot(&ws, &opts).expect("fourth");
    assert_eq!(fourth.root, first.root);
    assert_eq!(writes() - before, key_parts, "read again and written in {key_parts} parts");
    assert_eq!(parts(&key), written);

    // The record shrinks: its parts past the new end are gone.
    for i in 20..200 {
        fs::remove_file(file(i)).expect("remove");
    }
    let fifth = repo.snapshot(&ws, &opts).expect("fifth");
    assert_eq!(fifth.counts.files, 20);
    let shrunk = parts(&key);
    let new_len: i64 = shrunk.iter().map(|(_, l)| l).sum();
    assert!(new_len < len / 5, "{new_len} of {len}");
    assert_eq!(shrunk.len() as i64, (new_len + part as i64 - 1) / part as i64, "{shrunk:?}");
    assert!(shrunk.iter().enumerate().all(|(i, (p, _))| *p == i as i64), "{shrunk:?}");
    let content = repo.lookup(&fifth, b"big/0007-a-file-name-long-enough-to-fill-the-record").expect("lookup");
    assert_eq!(repo.read_object(&content.content.expect("content")).expect("read"), b"file 7");
}
