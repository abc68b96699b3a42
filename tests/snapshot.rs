//! Library tests of snapshots: round trips, sharing, the stat cache, warnings, corruption.

mod common;

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use trove::object::{Backend, LocalBackend};
use trove::RestoreOptions;
use trove::{ErrorKind, Progress, Repo, SnapshotOptions};

fn count(repo: &Repo, table: &str) -> i64 {
    trove::testing::conn(repo).query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)).expect("count")
}

#[test]
fn snapshot_restores_byte_identical_with_modes_mtimes_links_and_odd_names() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    assert_eq!(snap.workspace, "ws");
    assert_eq!(snap.counts.files, 5, "node_modules and *.lock are excluded by default");
    assert_eq!(snap.counts.symlinks, 2);
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);

    let out = tmp.path().join("out");
    repo.restore(&snap, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&ws));

    // The restored tree, snapshotted again, has the same root: every field round-tripped.
    let again = repo
        .snapshot(&out, &SnapshotOptions { workspace: Some("copy".into()), ..SnapshotOptions::default() })
        .expect("snapshot copy");
    assert_eq!(again.root, snap.root);
}

#[test]
fn restore_refuses_a_non_empty_target_and_can_restore_one_path() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let out = tmp.path().join("out");
    fs::create_dir_all(&out).expect("mkdir");
    fs::write(out.join("keep"), "mine").expect("write");
    let err = repo.restore(&snap, &out, &RestoreOptions::default()).expect_err("non-empty");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert_eq!(fs::read_dir(&out).expect("ls").count(), 1, "a refused restore writes nothing");

    let opts = RestoreOptions { paths: vec![b"src/deep".to_vec()], overwrite: true, ..RestoreOptions::default() };
    let report = repo.restore(&snap, &out, &opts).expect("partial restore");
    assert_eq!(report.files, 1);
    assert_eq!(
        fs::read(out.join("src/deep/er/notes.txt")).expect("read"),
        fs::read(ws.join("src/deep/er/notes.txt")).expect("read")
    );
    assert_eq!(fs::read(out.join("keep")).expect("kept"), b"mine");
    assert!(!out.join("src/main.rs").exists());

    // Overwrite replaces a symlink planted at a snapshot path instead of writing through it.
    let victim = tmp.path().join("victim");
    fs::write(&victim, "untouched").expect("write");
    std::os::unix::fs::symlink(&victim, out.join("run.sh")).expect("symlink");
    let opts = RestoreOptions { paths: vec![b"run.sh".to_vec()], overwrite: true, ..RestoreOptions::default() };
    repo.restore(&snap, &out, &opts).expect("restore over a symlink");
    assert_eq!(fs::read(&victim).expect("read"), b"untouched");
    assert!(fs::symlink_metadata(out.join("run.sh")).expect("lstat").is_file());
}

/// Paths given twice, or one inside another, are restored once (a whole restore plans without
/// that check: its listing names each path once).
#[test]
fn overlapping_restore_paths_restore_each_entry_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let (one, many) = (tmp.path().join("one"), tmp.path().join("many"));
    let alone = repo
        .restore(&snap, &one, &RestoreOptions { paths: vec![b"src".to_vec()], ..RestoreOptions::default() })
        .expect("restore src");
    let paths = vec![b"src/deep".to_vec(), b"src".to_vec(), b"src".to_vec(), b"src/main.rs".to_vec()];
    let overlapping =
        repo.restore(&snap, &many, &RestoreOptions { paths, ..RestoreOptions::default() }).expect("restore");
    assert_eq!((overlapping.files, overlapping.dirs), (alone.files, alone.dirs));
    assert_eq!(tree_state(&many), tree_state(&one));
}

/// A conflict `--overwrite` cannot settle (a directory where the snapshot has a file) is found
/// before anything changes: a file where the snapshot has a directory, which the restore would
/// replace, is still there after the refusal, and so is everything else.
#[test]
fn a_refused_overwrite_restore_changes_nothing_in_the_target() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(ws.join("a")).expect("mkdir");
    fs::write(ws.join("a/x.txt"), "x").expect("write");
    fs::write(ws.join("b"), "b").expect("write");
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let out = tmp.path().join("out");
    fs::create_dir_all(out.join("b")).expect("mkdir");
    fs::write(out.join("b/mine.txt"), "mine").expect("write");
    fs::write(out.join("a"), "a file where the snapshot has a directory").expect("write");
    let before = tree_state(&out);
    let err = repo
        .restore(&snap, &out, &RestoreOptions { overwrite: true, ..RestoreOptions::default() })
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("'b'"), "{err}");
    assert_eq!(tree_state(&out), before, "the refusal changed nothing");
}

/// A deep path given before its ancestor: the directories are planned in pre-order again (the
/// ancestor's listing comes after the path's own directories), so every directory exists
/// before its children are made and gets its mode and mtime after them.
#[test]
fn a_deep_path_given_before_its_ancestor_restores_every_directory_whole() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    for (f, body) in
        [("src/bin/x/f.rs", "f"), ("src/lib/foo.rs", "foo"), ("src/lib/sub/g.rs", "g"), ("src/lib/sub/h/i.rs", "i")]
    {
        fs::create_dir_all(ws.join(f).parent().expect("parent")).expect("mkdir");
        fs::write(ws.join(f), body).expect("write");
    }
    fs::set_permissions(ws.join("src/lib/sub"), fs::Permissions::from_mode(0o750)).expect("chmod");
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let out = tmp.path().join("out");
    let paths = vec![b"src/lib/sub/h".to_vec(), b"src/lib/foo.rs".to_vec(), b"src".to_vec()];
    repo.restore(&snap, &out, &RestoreOptions { paths, ..RestoreOptions::default() }).expect("restore");
    assert_eq!(tree_state(&out.join("src")), tree_state(&ws.join("src")));
}

#[test]
fn unchanged_directories_share_trees_and_a_large_file_edit_stores_only_new_chunks() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    trove::sample::generate(&ws, 300, 11).expect("generate");
    let mut rng = trove::sample::Rng::new(5);
    fs::write(ws.join("large.bin"), rng.bytes(16 << 20)).expect("write");
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let first = repo.snapshot(&ws, &SnapshotOptions::default()).expect("first");
    let (trees0, objects0) = (count(&repo, "trees"), count(&repo, "objects"));

    let same = repo.snapshot(&ws, &SnapshotOptions::default()).expect("no change");
    assert_eq!(same.root, first.root);
    assert_eq!((count(&repo, "trees"), count(&repo, "objects")), (trees0, objects0));
    assert_eq!((same.counts.added, same.counts.changed, same.counts.removed), (0, 0, 0));

    // Append to the large file: one or two new chunks, not the whole 16 MiB again.
    let mut big = fs::read(ws.join("large.bin")).expect("read");
    big.extend_from_slice(&rng.bytes(10_000));
    fs::write(ws.join("large.bin"), &big).expect("write");
    let edited = repo.snapshot(&ws, &SnapshotOptions::default()).expect("edited");
    let new_objects = count(&repo, "objects") - objects0;
    assert!((1..=2).contains(&new_objects), "{new_objects} new objects for an append");
    assert_eq!((edited.counts.added, edited.counts.changed, edited.counts.removed), (0, 1, 0));
    // Only the root's tree changed (large.bin sits at the top).
    assert_eq!(count(&repo, "trees") - trees0, 1);
    let entry = repo.lookup(&edited, b"large.bin").expect("lookup");
    assert_eq!(repo.read_content(&entry).expect("read"), big);
    let sha: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&big).into();
    assert_eq!(entry.sha256, Some(trove::object::Sha256(sha)), "each entry carries the file's SHA-256");

    // Delete a file deep down and add one: counted, and the earlier snapshot still reads.
    let victim = walkdir::WalkDir::new(&ws)
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_type().is_file() && e.depth() > 2)
        .expect("a deep file");
    let victim_rel = victim.path().strip_prefix(&ws).expect("rel").to_path_buf();
    let old_bytes = fs::read(victim.path()).expect("read");
    fs::remove_file(victim.path()).expect("rm");
    fs::write(ws.join("new.txt"), "new").expect("write");
    let later = repo.snapshot(&ws, &SnapshotOptions::default()).expect("later");
    assert_eq!((later.counts.added, later.counts.changed, later.counts.removed), (1, 0, 1));
    let rel = victim_rel.to_str().expect("utf8").as_bytes().to_vec();
    assert_eq!(repo.lookup(&later, &rel).expect_err("gone").kind(), ErrorKind::NotFound);
    let old = repo.lookup(&first, &rel).expect("in the first snapshot");
    assert_eq!(repo.read_content(&old).expect("read"), old_bytes);
}

#[test]
fn exclusions_are_replaceable_and_extendable_per_workspace_and_per_call() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let has = |snap: &trove::SnapshotInfo, p: &[u8]| repo.lookup(snap, p).is_ok();

    let per_call = SnapshotOptions { extra_excludes: vec!["*.sh".into()], ..SnapshotOptions::default() };
    let s = repo.snapshot(&ws, &per_call).expect("snapshot");
    assert!(!has(&s, b"run.sh") && !has(&s, b"node_modules"));

    let replaced = SnapshotOptions { replace_excludes: Some(vec![]), ..SnapshotOptions::default() };
    let s = repo.snapshot(&ws, &replaced).expect("snapshot");
    assert!(has(&s, b"node_modules/pkg/index.js") && has(&s, b"yarn.lock"));

    let list =
        repo.set_workspace_excludes("ws", &["src/deep".into()], &["*.lock".into()], false, false, "test").expect("set");
    assert!(list.contains(&"src/deep".to_string()) && !list.contains(&"*.lock".to_string()));
    let s = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    assert!(!has(&s, b"src/deep") && has(&s, b"yarn.lock") && !has(&s, b"node_modules"));
    assert!(repo.set_workspace_excludes("ws", &["a[".into()], &[], false, false, "test").is_err());
}

/// Changes the workspace the moment reading starts: the walk saw files that then vanish, turn
/// into symlinks, or keep growing while they are read.
struct Saboteur {
    ws: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    fired: AtomicBool,
}

impl Progress for Saboteur {
    fn start(&self, phase: &str, _: u64) {
        if phase != "reading" || self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        fs::remove_file(self.ws.join("vanishes.txt")).expect("rm");
        fs::remove_file(self.ws.join("becomes-link.txt")).expect("rm");
        std::os::unix::fs::symlink("/etc/hostname", self.ws.join("becomes-link.txt")).expect("symlink");
        let touched = fs::File::options().write(true).open(self.ws.join("touched.txt")).expect("open");
        touched.set_modified(std::time::UNIX_EPOCH + TOUCHED_AT).expect("set mtime");
        let (path, stop) = (self.ws.join("grows.bin"), self.stop.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = fs::OpenOptions::new().append(true).open(path).expect("open");
            // Bounded: at most 64 MiB more, whatever happens to the snapshot.
            for _ in 0..16_384 {
                if stop.load(Ordering::SeqCst) || f.write_all(&[7u8; 4096]).is_err() {
                    break;
                }
            }
        });
    }
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// The mtime the saboteur gives `touched.txt` between the walk and the reading.
const TOUCHED_AT: std::time::Duration = std::time::Duration::from_secs(1_000_000_000);

#[test]
fn files_that_vanish_change_or_turn_into_links_become_warnings() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("vanishes.txt"), "here").expect("write");
    fs::write(ws.join("becomes-link.txt"), "here").expect("write");
    fs::write(ws.join("stays.txt"), "stays").expect("write");
    fs::write(ws.join("touched.txt"), "touched").expect("write");
    fs::write(ws.join("grows.bin"), trove::sample::Rng::new(1).bytes(64 << 20)).expect("write");
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    let stop = Arc::new(AtomicBool::new(false));
    let sab = Saboteur { ws: ws.clone(), stop: stop.clone(), fired: AtomicBool::new(false) };
    let snap = repo.snapshot(&ws, &SnapshotOptions { progress: &sab, ..SnapshotOptions::default() });
    stop.store(true, Ordering::SeqCst);
    let snap = snap.expect("the snapshot completes despite the changes");
    let warned = |p: &str, what: &str| snap.warnings.iter().any(|w| w.path == p && w.message.contains(what));
    assert!(warned("vanishes.txt", "vanished"), "{:?}", snap.warnings);
    assert!(warned("becomes-link.txt", "cannot be read"), "{:?}", snap.warnings);
    assert!(warned("grows.bin", "changed while being read"), "{:?}", snap.warnings);
    assert!(repo.lookup(&snap, b"vanishes.txt").is_err());
    assert_eq!(repo.read_content(&repo.lookup(&snap, b"stays.txt").expect("kept")).expect("read"), b"stays");
    // An entry holds the status the file had once read, not the walk's.
    assert!(warned("touched.txt", "changed while being read"), "{:?}", snap.warnings);
    let touched = repo.lookup(&snap, b"touched.txt").expect("kept");
    assert_eq!(touched.mtime_ns, TOUCHED_AT.as_nanos() as i64);
}

#[test]
fn a_flipped_pack_byte_is_a_corrupt_error_naming_the_object() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "precious data ".repeat(100)).expect("write");
    let root = tmp.path().join("repo");
    let repo = Repo::init(&root, "test").expect("init");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let entry = repo.lookup(&snap, b"a.txt").expect("lookup");
    let backend = LocalBackend::new(&root);
    let pack = backend.list("packs/").expect("list").pop().expect("a pack");
    let path = root.join(&pack);
    let mut bytes = fs::read(&path).expect("read pack");
    let last = bytes.len() - 3;
    bytes[last] ^= 0x10;
    common::set_mode(&path, 0o644);
    fs::write(&path, &bytes).expect("damage pack");
    drop(repo);
    let repo = Repo::open(&root).expect("reopen");
    let err = repo.read_content(&entry).expect_err("damaged");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.message().contains(&entry.content.expect("id").to_hex()), "{err}");
    let report = repo.check().expect("check runs");
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
}

#[test]
fn a_failed_pack_write_leaves_earlier_snapshots_intact_and_nothing_half_recorded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    trove::sample::generate(&ws, 200, 2).expect("generate");
    // Every put after the first fails: a disk that fills up mid-snapshot.
    let ok = std::sync::atomic::AtomicUsize::new(1);
    let backend = common::backend::Hooked::default().on_put(move |_, _| {
        match ok.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
            Ok(_) => Ok(()),
            Err(_) => Err(trove::Error::new(ErrorKind::Io, "disk full (simulated)")),
        }
    });
    let repo = Repo::with_backend(Box::new(backend)).expect("repo");
    let first = repo.snapshot(&ws, &SnapshotOptions::default()).expect("first fits in one pack");
    fs::write(ws.join("more.bin"), trove::sample::Rng::new(9).bytes(1 << 20)).expect("write");
    let (snaps, audit) = (count(&repo, "snapshots"), count(&repo, "audit"));
    let err = repo.snapshot(&ws, &SnapshotOptions::default()).expect_err("disk full");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!((count(&repo, "snapshots"), count(&repo, "audit")), (snaps, audit));
    let out = tmp.path().join("out");
    repo.restore(&first, &out, &RestoreOptions::default()).expect("restore the first");
    let problems = repo.check().expect("check").problems;
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn in_memory_repository_round_trips() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::in_memory().expect("repo");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let out = tmp.path().join("out");
    repo.restore(&snap, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&ws));
}

#[test]
fn every_change_is_audited_with_contiguous_sequence_numbers() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::init(&tmp.path().join("repo"), "cli:tester").expect("init");
    let snap = repo
        .snapshot(&ws, &SnapshotOptions { actor: "cli:tester".into(), ..SnapshotOptions::default() })
        .expect("snapshot");
    repo.restore(&snap, &tmp.path().join("out"), &RestoreOptions::default()).expect("restore");
    let rows = repo.audit_log(None, 10).expect("audit");
    let ops: Vec<&str> = rows.iter().map(|r| r.record.operation.as_str()).collect();
    assert_eq!(ops, ["init", "snapshot", "restore"]);
    let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(rows[1].record.actor, "cli:tester");
    let encoded: Vec<u8> = trove::testing::conn(&repo)
        .query_row("SELECT encoded FROM audit WHERE seq = 2", [], |r| r.get(0))
        .expect("encoded");
    // Stored once (schema 17): the columns are the record, its encoding is computed from them.
    assert!(encoded.is_empty());
    assert!(rows[1].record.encode(2).starts_with(b"trove-audit-v1"));
    assert!(trove::testing::conn(&repo).execute("DELETE FROM audit WHERE seq = 1", []).is_err());
}

#[test]
fn scanning_the_packs_alone_rebuilds_the_object_index() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    trove::sample::generate(&ws, 400, 8).expect("generate");
    let repo = Repo::in_memory().expect("repo");
    repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let mut from_packs = Vec::new();
    let conn = trove::testing::conn(&repo);
    let packs: Vec<(String, i64)> = pairs(conn, "SELECT name, size FROM packs");
    for (name, size) in packs {
        for o in trove::object::pack::scan(repo.backend(), &name, size as u64).expect("scan") {
            from_packs.push((o.id, name.clone(), o.offset, o.stored_len, o.raw_len, o.inner_offset));
        }
    }
    let mut indexed = Vec::new();
    trove::testing::objects::for_each_location(conn, |id, l| {
        let l = l?;
        let id = trove::object::ObjectId::from_slice(&id)?;
        indexed.push((id, l.pack, l.offset, l.stored_len, l.raw_len, l.inner_offset));
        Ok(())
    })
    .expect("index");
    from_packs.sort();
    indexed.sort();
    assert!(indexed.iter().any(|o| o.5.is_some()), "small files are bundled");
    assert!(indexed.iter().any(|o| o.5.is_none()), "large ones are not");
    assert_eq!(from_packs, indexed);
}

/// Swaps directory `sub` for a symlink to a directory outside the workspace once the walk is
/// done: the files the walk saw under `sub/` must not be read through the link.
struct DirSwapper {
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

impl Progress for DirSwapper {
    fn start(&self, phase: &str, _: u64) {
        if phase == "reading" && self.ws.join("sub").is_dir() {
            fs::rename(self.ws.join("sub"), self.ws.join("sub-moved")).expect("move");
            std::os::unix::fs::symlink(&self.outside, self.ws.join("sub")).expect("symlink");
        }
    }
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

#[test]
fn a_directory_swapped_for_a_symlink_mid_snapshot_is_never_read_through() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ws, outside) = (tmp.path().join("ws"), tmp.path().join("outside"));
    fs::create_dir_all(ws.join("sub")).expect("mkdir");
    fs::create_dir_all(&outside).expect("mkdir");
    fs::write(ws.join("sub/secret.txt"), "workspace copy").expect("write");
    fs::write(outside.join("secret.txt"), "OUTSIDE THE WORKSPACE").expect("write");
    let repo = Repo::in_memory().expect("repo");
    let swap = DirSwapper { ws: ws.clone(), outside };
    let snap =
        repo.snapshot(&ws, &SnapshotOptions { progress: &swap, ..SnapshotOptions::default() }).expect("snapshot");
    assert!(snap.warnings.iter().any(|w| w.path == "sub/secret.txt"), "{:?}", snap.warnings);
    if let Ok(e) = repo.lookup(&snap, b"sub/secret.txt") {
        assert_ne!(repo.read_content(&e).expect("read"), b"OUTSIDE THE WORKSPACE");
    }
}

#[test]
fn restore_with_overwrite_never_writes_through_a_symlinked_parent() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    rich_workspace(&ws);
    let repo = Repo::in_memory().expect("repo");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let (target, elsewhere) = (tmp.path().join("target"), tmp.path().join("elsewhere"));
    fs::create_dir_all(&target).expect("mkdir");
    fs::create_dir_all(&elsewhere).expect("mkdir");
    fs::write(elsewhere.join("main.rs"), "not yours").expect("write");
    std::os::unix::fs::symlink(&elsewhere, target.join("src")).expect("symlink");
    let opts = RestoreOptions { paths: vec![b"src/main.rs".to_vec()], overwrite: true, ..RestoreOptions::default() };
    repo.restore(&snap, &target, &opts).expect("restore");
    assert_eq!(fs::read(elsewhere.join("main.rs")).expect("read"), b"not yours");
    assert!(fs::symlink_metadata(target.join("src")).expect("lstat").is_dir());
    assert_eq!(fs::read(target.join("src/main.rs")).expect("read"), fs::read(ws.join("src/main.rs")).expect("read"));
}

#[test]
fn a_chunk_list_that_reassembles_other_bytes_is_corrupt() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("big.bin"), trove::sample::Rng::new(4).bytes(12 << 20)).expect("write");
    let repo = Repo::in_memory().expect("repo");
    let snap = repo.snapshot(&ws, &SnapshotOptions::default()).expect("snapshot");
    let entry = repo.lookup(&snap, b"big.bin").expect("lookup");
    // Swap the first two chunks' places: every chunk still verifies, the file does not.
    let conn = trove::testing::conn(&repo);
    let chunks: Vec<(i64, Vec<u8>)> = pairs(conn, "SELECT seq, chunk FROM chunk_lists ORDER BY seq LIMIT 2");
    assert_eq!(chunks.len(), 2);
    conn.execute("UPDATE chunk_lists SET chunk = ?1 WHERE seq = ?2", rusqlite::params![chunks[1].1, chunks[0].0])
        .expect("tamper");
    conn.execute("UPDATE chunk_lists SET chunk = ?1 WHERE seq = ?2", rusqlite::params![chunks[0].1, chunks[1].0])
        .expect("tamper");
    let err = repo.read_content(&entry).expect_err("reassembled bytes differ");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    let out = tmp.path().join("out");
    let err = repo.restore(&snap, &out, &RestoreOptions::default()).expect_err("restore must refuse");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(!out.join("big.bin").exists(), "no wrong file left behind");
}

#[test]
fn a_few_small_changed_files_are_stored_loose_in_the_snapshot_and_read_back_everywhere() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ws = tmp.path().join("ws");
    fs::create_dir_all(ws.join("d")).expect("mkdir");
    // Past the loose limits: 40 files, so the first snapshot writes a pack.
    for i in 0..40 {
        fs::write(ws.join("d").join(format!("f{i}.txt")), format!("file {i}\n").repeat(50)).expect("write");
    }
    let repo = Repo::init(&tmp.path().join("repo"), "test").expect("init");
    // Files written a moment ago are "racy" and read again; the test wants only its edits read.
    let opts = SnapshotOptions { racy_window_ns: 0, ..SnapshotOptions::default() };
    let first = repo.snapshot(&ws, &opts).expect("snapshot");
    let packs = count(&repo, "packs");
    assert!(packs >= 1);
    assert_eq!(count(&repo, "loose_objects"), 0);
    let conn = trove::testing::conn(&repo);
    let last_details = || -> serde_json::Value {
        let text: String = conn
            .query_row("SELECT details FROM audit WHERE operation = 'snapshot' ORDER BY seq DESC LIMIT 1", [], |r| {
                r.get(0)
            })
            .expect("audit");
        serde_json::from_str(&text).expect("json")
    };
    let rows_of = |table: &str, content: &[u8]| -> i64 {
        let id = trove::object::ObjectId::of(content);
        conn.query_row(&format!("SELECT COUNT(*) FROM {table} WHERE id = ?1"), [id.as_bytes().to_vec()], |r| r.get(0))
            .expect("count")
    };

    // Two small files changed, one added, one a copy of a packed file: three loose objects
    // (the copy's content is stored already), no pack.
    fs::write(ws.join("d/f3.txt"), "three, edited\n").expect("edit");
    fs::write(ws.join("d/f7.txt"), "seven, edited\n").expect("edit");
    fs::write(ws.join("new.txt"), "new\n").expect("add");
    fs::write(ws.join("d/f5 copy.txt"), "file 5\n".repeat(50)).expect("copy");
    let second = repo.snapshot(&ws, &opts).expect("snapshot");
    assert_eq!((second.counts.changed, second.counts.added), (2, 2));
    assert_eq!(count(&repo, "packs"), packs, "a small change writes no pack");
    assert_eq!(count(&repo, "loose_objects"), 3);
    assert_eq!((last_details()["packs"].as_u64(), last_details()["loose"].as_u64()), (Some(0), Some(3)));

    // Read, restored and checked like packed content.
    let entry = repo.lookup(&second, b"d/f3.txt").expect("lookup");
    assert_eq!(repo.read_content(&entry).expect("read"), b"three, edited\n");
    let out = tmp.path().join("out");
    repo.restore(&second, &out, &RestoreOptions::default()).expect("restore");
    assert_eq!(tree_state(&out), tree_state(&ws));
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.loose, 3);

    // Another workspace's first snapshot always packs, even a small one, and does not pack
    // again what is stored loose.
    let other = tmp.path().join("other");
    fs::create_dir_all(&other).expect("mkdir");
    fs::write(other.join("a.txt"), "three, edited\n").expect("write");
    fs::write(other.join("b.txt"), "only here\n").expect("write");
    repo.snapshot(&other, &opts).expect("snapshot other");
    assert_eq!(count(&repo, "packs"), packs + 1);
    assert_eq!(count(&repo, "loose_objects"), 3);
    assert_eq!(rows_of("objects", b"three, edited\n"), 0, "loose content was packed again");
    assert_eq!(rows_of("objects", b"only here\n"), 1);

    // Past the limits, a later snapshot packs: 17 new files, one new file over 64 KiB, 256 KiB
    // and a byte in all. (New versions of the parent's paths count apart: `tests/history.rs`.)
    for i in 0..17 {
        fs::write(ws.join("d").join(format!("n{i}.txt")), format!("again {i}\n")).expect("write");
    }
    repo.snapshot(&ws, &opts).expect("snapshot 17");
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 2, 3));
    fs::write(ws.join("big.bin"), vec![7u8; (64 << 10) + 1]).expect("write");
    repo.snapshot(&ws, &opts).expect("snapshot big");
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 3, 3));
    for i in 0..4u8 {
        fs::write(ws.join(format!("m{i}.bin")), vec![i; 64 << 10]).expect("write");
    }
    fs::write(ws.join("one.bin"), b"1").expect("write");
    repo.snapshot(&ws, &opts).expect("snapshot 256 KiB and a byte");
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 4, 3));
    fs::write(ws.join("edge.bin"), vec![8u8; 64 << 10]).expect("write");
    repo.snapshot(&ws, &opts).expect("snapshot edge");
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 4, 4), "64 KiB itself goes loose");
    // Four files of 64 KiB, 256 KiB in all, go loose too.
    for i in 0..4u8 {
        fs::write(ws.join(format!("m{i}.bin")), vec![i + 100; 64 << 10]).expect("write");
    }
    repo.snapshot(&ws, &opts).expect("snapshot 256 KiB");
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 4, 8), "256 KiB in all goes loose");

    // A new version of a path the parent holds is stored as a delta against that version:
    // here the four rewritten m*.bin, each one byte repeated, against the ones before.
    let depths: Vec<u8> = {
        let conn = trove::testing::conn(&repo);
        let mut st = conn.prepare("SELECT encoded FROM loose_objects").expect("prepare");
        let rows = st.query_map([], |r| r.get::<_, Vec<u8>>(0)).expect("query");
        rows.map(|r| trove::object::blob::depth_in(&r.expect("row"))).collect()
    };
    let deltas = depths.iter().filter(|d| **d > 0).count() as i64;
    assert!(deltas >= 4, "{depths:?}");

    // Collection keeps what the snapshots refer to: the whole loose objects gathered into a
    // pack, the deltas left loose.
    let gc = repo.gc(&trove::GcOptions { grace: std::time::Duration::ZERO, ..trove::GcOptions::default() });
    assert_eq!(gc.expect("gc").loose_gathered, 8 - deltas as u64);
    assert_eq!((count(&repo, "packs"), count(&repo, "loose_objects")), (packs + 5, deltas));
    let again = tmp.path().join("again");
    repo.restore(&first, &again, &RestoreOptions::default()).expect("restore first");
    assert_eq!(fs::read(again.join("d/f3.txt")).expect("read"), "file 3\n".repeat(50).into_bytes());
    let last = tmp.path().join("last");
    repo.restore(&repo.resolve_snapshot("latest", None).expect("latest"), &last, &RestoreOptions::default())
        .expect("restore last");
    assert_eq!(tree_state(&last), tree_state(&ws));
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
