//! Retention and garbage collection (issue 16): policies decide which snapshots stay and say
//! why; forgetting is audited; collection reclaims what only forgotten snapshots held, rewrites
//! mostly dead packs, reclaims a crashed snapshot's pack, waits for its grace period and for
//! operations in flight, never reuses what it condemned, survives kill -9 at every stage, and
//! running in a loop beside snapshots, tool writes and trash restores costs none of them.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use trove::{GcOptions, Repo, RestoreOptions, RetentionPolicy, SessionSpec, SnapshotInfo, SnapshotOptions};

fn snap(repo: &Repo, dir: &Path, ws: &str) -> SnapshotInfo {
    repo.snapshot(dir, &SnapshotOptions { workspace: Some(ws.into()), ..SnapshotOptions::default() }).expect("snapshot")
}

fn now_gc() -> GcOptions {
    GcOptions { grace: Duration::ZERO, ..GcOptions::default() }
}

fn restored(repo: &Repo, s: &SnapshotInfo, at: &Path) -> Vec<EntryState> {
    repo.restore(s, at, &RestoreOptions::default()).expect("restore");
    tree_state(at)
}

fn count(repo: &Repo, sql: &str) -> i64 {
    trove::testing::conn(repo).query_row(sql, [], |r| r.get(0)).expect(sql)
}

fn clean(repo: &Repo) {
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn forget_keeps_by_policy_pins_and_running_sessions_and_audits_each() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let ws = tmp.path().join("w");
    fs::create_dir_all(&ws).expect("mkdir");
    let mut snaps = Vec::new();
    for i in 0..6 {
        fs::write(ws.join("f.txt"), format!("version {i}\n")).expect("write");
        snaps.push(snap(&repo, &ws, "w"));
    }
    let pinned = repo.pin(snaps[1].id.as_ref(), Some("w"), true, "op").expect("pin");
    assert!(pinned.pinned && pinned.changed);
    // A running session's snapshots stay whatever the policy says.
    let w = ws.clone();
    let spec = SessionSpec { workspace: Some("w".into()), ..SessionSpec::default() };
    let session = repo.create_session(&spec, move |_| Ok(w), "agent").expect("session");
    let running = repo.snapshot_session(&session, "manual", "agent").expect("session snapshot").expect("taken");
    fs::write(ws.join("f.txt"), "last\n").expect("write");
    let newest = snap(&repo, &ws, "w");

    // No policy: nothing goes.
    let r = repo.forget(Some("w"), false, "op").expect("forget");
    assert!(r.workspaces[0].policy.is_none() && r.workspaces[0].forgotten.is_empty());
    repo.set_snapshot_retention("w", Some(RetentionPolicy { keep_last: Some(2), ..Default::default() }), "op")
        .expect("policy");
    let dry = repo.forget(Some("w"), true, "op").expect("dry run");
    let total = repo.snapshots(Some("w")).expect("list").len();
    assert_eq!(repo.snapshots(Some("w")).expect("list").len(), total, "a dry run changes nothing");
    let w = &dry.workspaces[0];
    let kept: BTreeMap<String, Vec<String>> = w.kept.iter().map(|k| (k.id.to_string(), k.kept_by.clone())).collect();
    assert_eq!(kept[&newest.id.to_string()], ["latest", "last 1"]);
    assert_eq!(kept[&snaps[1].id.to_string()], ["pinned"]);
    assert!(kept[&running.id.to_string()].contains(&"session still running".to_string()));
    assert_eq!(w.kept.len() + w.forgotten.len(), total);
    let doomed: Vec<String> = w.forgotten.iter().map(|f| f.id.to_string()).collect();
    assert!(doomed.contains(&snaps[0].id.to_string()) && doomed.contains(&snaps[4].id.to_string()));

    let audit_before = count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'forget'");
    let done = repo.forget(Some("w"), false, "op").expect("forget");
    assert_eq!(done.workspaces[0].forgotten.len(), doomed.len());
    let left: Vec<String> = repo.snapshots(Some("w")).expect("list").iter().map(|s| s.id.to_string()).collect();
    assert!(doomed.iter().all(|d| !left.contains(d)));
    assert_eq!(
        count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'forget'") - audit_before,
        doomed.len() as i64
    );
    // Parents point past what was forgotten; everything left still reads and checks clean.
    for s in repo.snapshots(Some("w")).expect("list") {
        if let Some(p) = &s.parent {
            assert!(left.contains(&p.to_string()), "{} names a forgotten parent", s.id);
        }
    }
    clean(&repo);
    // Unpinned, the pinned one goes at the next forget.
    repo.pin(snaps[1].id.as_ref(), Some("w"), false, "op").expect("unpin");
    repo.end_session(&session.id, trove::EndReason::Deleted, "agent").expect("end");
    let again = repo.forget(Some("w"), false, "op").expect("forget");
    assert!(again.workspaces[0].forgotten.iter().any(|f| f.id == snaps[1].id));
    // The command line says what goes and which rule keeps each survivor.
    let out = trove(&tmp.path().join("repo"), &["forget", "--dry-run", "--workspace", "w"]);
    assert!(out.status.success() && stdout(&out).contains("kept: latest, last 1"), "{}", stdout(&out));
    let out =
        trove(&tmp.path().join("repo"), &["workspace", "retention", "w", "--keep-daily", "7", "--keep-within", "2d"]);
    assert!(stdout(&out).contains("keepDaily") && stdout(&out).contains("keepWithinS"), "{}", stdout(&out));
}

/// A workspace of two 300 KB random files that share a pack (each a blob of its own: over the
/// 256 KiB bundling limit), snapshotted, then one of them deleted and snapshotted again; with
/// keep-last 1 the first snapshot is forgotten, leaving its pack half dead.
fn half_dead_pack(dir: &Path) -> (PathBuf, Repo, PathBuf) {
    let (root, ws) = (dir.join("repo"), dir.join("w"));
    let repo = Repo::init(&root, "t").expect("init");
    fs::create_dir_all(&ws).expect("mkdir");
    let mut rng = trove::sample::Rng::new(5);
    fs::write(ws.join("x.bin"), rng.bytes(300_000)).expect("write");
    fs::write(ws.join("y.bin"), rng.bytes(300_000)).expect("write");
    fs::write(ws.join("notes.txt"), "kept\n").expect("write");
    snap(&repo, &ws, "w");
    // A pack entirely dead once its snapshot goes.
    fs::write(ws.join("z.bin"), rng.bytes(150_000)).expect("write");
    snap(&repo, &ws, "w");
    fs::remove_file(ws.join("x.bin")).expect("rm");
    fs::remove_file(ws.join("z.bin")).expect("rm");
    snap(&repo, &ws, "w");
    repo.set_snapshot_retention("w", Some(RetentionPolicy { keep_last: Some(1), ..Default::default() }), "op")
        .expect("policy");
    repo.forget(None, false, "op").expect("forget");
    (root, repo, ws)
}

#[test]
fn gc_reclaims_what_forgotten_snapshots_held_and_rewrites_mostly_dead_packs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, ws) = half_dead_pack(tmp.path());
    let kept = repo.resolve_snapshot("latest", Some("w")).expect("latest");
    let before = restored(&repo, &kept, &tmp.path().join("before"));
    // An operator's delete keeps its content in the trash, which is a root too.
    let out = trove(&root, &["rm", "--workspace", "w", "notes.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = count(&repo, "SELECT COUNT(*) FROM objects");
    let dry = repo.gc(&GcOptions { dry_run: true, ..now_gc() }).expect("dry run");
    assert!(dry.unreachable.objects >= 2 && dry.deleted.objects >= 2, "{dry:?}");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM objects"), rows, "a dry run deletes nothing");

    let out = trove(&root, &["gc", "--grace", "0s", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(r["deleted"]["objects"].as_u64() >= Some(2), "{r}");
    assert!(r["packsRewritten"].as_u64() >= Some(1), "the half-dead pack is rewritten: {r}");
    assert!(r["packsDeleted"].as_u64() >= Some(2), "the dead pack and the rewritten one go: {r}");
    assert!(r["bytesReclaimed"].as_u64() > Some(300_000), "{r}");
    assert_eq!(r["waiting"], 0);

    let repo = Repo::open(&root).expect("open");
    assert_eq!(restored(&repo, &kept, &tmp.path().join("after")), before, "what stays is byte for byte");
    let trashed = repo.trash("w", None).expect("trash");
    let item = trashed.first().expect("the deleted notes");
    let restored_item = trove(&root, &["trash", "restore", item.id.as_ref()]);
    assert!(restored_item.status.success(), "{}", stderr(&restored_item));
    assert_eq!(fs::read(ws.join("notes.txt")).expect("read"), b"kept\n");
    clean(&repo);
    // A second collection finds nothing left to do.
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!((r.deleted.objects, r.packs_rewritten, r.packs_deleted), (0, 0, 0), "{r:?}");
    assert!(count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'gc'") >= 2);
}

/// The pack files of the repository at `root`, with their sizes.
fn pack_files(root: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.join("packs")];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).expect("read packs").flatten() {
            let meta = e.metadata().expect("stat");
            if meta.is_dir() {
                dirs.push(e.path());
            } else {
                out.insert(e.path(), meta.len());
            }
        }
    }
    out
}

/// Issue 36, item 17: `gc --dry-run` reported 0 bytes it would reclaim. It now runs the
/// collection on a copy of the manifest over a store that writes nothing: its figures are the
/// ones the collection then reports on the same repository, and it changes nothing.
#[test]
fn a_dry_run_reports_what_the_collection_then_does_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, _) = half_dead_pack(tmp.path());
    drop(repo);
    let gc_json = |args: &[&str]| -> Value {
        let out = trove(&root, &[&["--json", "gc"][..], args].concat());
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_str(&stdout(&out)).expect("json")
    };
    let compared = ["bytesReclaimed", "deleted", "condemned", "packsRewritten", "packBytesWritten", "packsDeleted"];
    // The default grace period: this run would only condemn, so it would reclaim nothing yet.
    let (dry, real) = (gc_json(&["--dry-run"]), gc_json(&[]));
    for key in compared {
        assert_eq!(dry[key], real[key], "{key}: dry run {dry} against {real}");
    }
    assert_eq!(real["bytesReclaimed"], 0, "{real}");

    let files = pack_files(&root);
    let repo = Repo::open(&root).expect("open");
    let state = |repo: &Repo| {
        [
            "SELECT COUNT(*) FROM objects",
            "SELECT COUNT(*) FROM objects WHERE condemned IS NOT NULL",
            "SELECT COUNT(*) FROM packs",
            "SELECT COUNT(*) FROM audit",
            "SELECT COUNT(*) FROM gc_epochs",
        ]
        .map(|sql| count(repo, sql))
    };
    let before = state(&repo);
    let dry = gc_json(&["--dry-run", "--grace", "0s"]);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(state(&repo), before, "a dry run writes nothing to the manifest");
    assert_eq!(pack_files(&root), files, "a dry run writes and deletes no pack");
    let out = trove(&root, &["gc", "--dry-run", "--grace", "0s"]);
    assert!(stdout(&out).contains("would delete"), "{}", stdout(&out));

    let real = gc_json(&["--grace", "0s"]);
    assert!(real["bytesReclaimed"].as_u64() > Some(300_000) && real["packsRewritten"].as_u64() >= Some(1), "{real}");
    for key in compared {
        assert_eq!(dry[key], real[key], "{key}: dry run {dry} against {real}");
    }
    clean(&repo);
}

#[test]
fn gc_waits_for_its_grace_period_and_for_operations_in_flight() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, repo, _) = half_dead_pack(tmp.path());
    // The default hour: condemned, not deleted.
    let r = repo.gc(&GcOptions::default()).expect("gc");
    assert!(r.condemned.objects >= 2 && r.deleted.objects == 0 && r.waiting >= 2, "{r:?}");
    assert!(count(&repo, "SELECT COUNT(*) FROM objects WHERE condemned IS NOT NULL") >= 2);

    // An operation that began before a condemnation holds it back, even with no grace.
    fs::write(tmp.path().join("w/new.txt"), "new\n").expect("write");
    snap(&repo, &tmp.path().join("w"), "w");
    repo.forget(None, false, "op").expect("forget");
    let lease = trove::testing::lease(&repo, "test").expect("lease");
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!(r.in_flight, 1);
    assert!(r.deleted.objects >= 2, "what was condemned before the lease goes: {r:?}");
    assert!(r.waiting >= 1, "what was condemned after it waits: {r:?}");
    drop(lease);
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!((r.waiting, r.in_flight), (0, 0), "{r:?}");

    // A lease left by a process that is gone is removed, and holds nothing back.
    let mut child = Command::new("true").spawn().expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    trove::testing::conn(&repo)
        .execute(
            "INSERT INTO gc_leases (pid, pid_start, epoch, started_ns, what) VALUES (?1, 1, 0, 0, 'crashed')",
            [pid],
        )
        .expect("stale lease");
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!((r.stale_leases, r.in_flight), (1, 0), "{r:?}");
    clean(&repo);
}

#[test]
fn a_condemned_object_is_stored_anew_never_relied_on() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, repo, ws) = half_dead_pack(tmp.path());
    let r = repo.gc(&GcOptions::default()).expect("condemn, grace of an hour");
    assert!(r.condemned.objects >= 2, "{r:?}");
    // x.bin's bytes come back: the next snapshot must store its own copy, not the condemned one.
    let mut rng = trove::sample::Rng::new(5);
    fs::write(ws.join("x.bin"), rng.bytes(200_000)).expect("same bytes as before");
    let s = snap(&repo, &ws, "w");
    let x = repo.lookup(&s, b"x.bin").expect("x").content.expect("content");
    let condemned: Option<i64> = trove::testing::conn(&repo)
        .query_row("SELECT condemned FROM objects WHERE id = ?1", [&x.as_bytes()[..]], |r| r.get(0))
        .expect("row");
    assert_eq!(condemned, None, "storing it again cleared the mark");
    let r = repo.gc(&now_gc()).expect("gc");
    assert!(r.deleted.objects >= 1, "{r:?}");
    assert_eq!(repo.read_object(&x).expect("x reads").len(), 200_000);
    clean(&repo);
}

#[test]
fn gc_reclaims_the_pack_of_a_snapshot_killed_before_its_commit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, ws) = (tmp.path().join("repo"), tmp.path().join("w"));
    let repo = Repo::init(&root, "t").expect("init");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "a\n").expect("write");
    snap(&repo, &ws, "w");
    fs::write(ws.join("big.bin"), trove::sample::Rng::new(9).bytes(500_000)).expect("write");
    let out =
        trove_at_failpoint(&root, &["snapshot", ws.to_str().expect("utf8"), "--workspace", "w"], "snapshot:packed");
    assert!(!out.status.success(), "the failpoint stops it");
    let report = repo.check_with(&trove::CheckOptions::default()).expect("check");
    assert!(report.problems.is_empty() && report.orphan_packs == 1, "{report:?}");
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!(r.orphans_deleted, 1, "{r:?}");
    assert!(r.bytes_reclaimed >= 400_000, "{r:?}");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty() && report.orphan_packs == 0, "{report:?}");
}

#[test]
fn kill_9_during_gc_at_every_stage_leaves_a_repository_that_checks_clean() {
    let stages = [
        "gc:marked",
        "gc:condemned",
        "gc:swept",
        "gc:gathered-written",
        "gc:gathered",
        "gc:repack-written",
        "gc:repacked",
        "gc:pack-row-deleted",
        "gc:pack-file-deleted",
    ];
    for stage in stages {
        killed_gc_leaves_a_clean_repository(stage, None);
    }
    // A recompression killed at each stage of its rewrite: the same.
    for stage in ["gc:repack-written", "gc:repacked", "gc:pack-row-deleted", "gc:pack-file-deleted"] {
        killed_gc_leaves_a_clean_repository(stage, Some(9));
    }
}

/// A collection (recompressing at `recompress`) killed at `stage` leaves a repository that
/// opens, checks clean and restores what it held; the next one finishes the work.
fn killed_gc_leaves_a_clean_repository(stage: &str, recompress: Option<i32>) {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, repo, ws) = half_dead_pack(tmp.path());
    if recompress.is_some() {
        // Text, which the rewrite makes smaller (the half-dead pack holds random bytes).
        fs::write(ws.join("text.rs"), fs::read(file!()).expect("read this test").repeat(8)).expect("write");
        snap(&repo, &ws, "w");
    }
    // A few small files changed: a small snapshot stores them loose, for the collection to
    // gather into a pack. (Files written a moment ago are read again by every snapshot while
    // their mtime is that recent, which would make it large: the window is closed for these,
    // and the first settles the files written before.)
    let opts = SnapshotOptions { workspace: Some("w".into()), racy_window_ns: 0, ..SnapshotOptions::default() };
    repo.snapshot(&ws, &opts).expect("snapshot");
    for i in 0..3 {
        fs::write(ws.join(format!("small{i}.txt")), format!("small file {i}\n")).expect("write");
    }
    repo.snapshot(&ws, &opts).expect("snapshot");
    assert!(count(&repo, "SELECT COUNT(*) FROM loose_objects") > 0, "{stage}: loose objects to gather");
    let kept = repo.resolve_snapshot("latest", Some("w")).expect("latest");
    let expected = restored(&repo, &kept, &tmp.path().join("expected"));
    drop(repo);
    let level = recompress.map(|l| l.to_string());
    let mut args = vec!["gc", "--grace", "0s"];
    args.extend(level.iter().flat_map(|l| ["--recompress", l.as_str()]));
    let out = trove_at_failpoint(&root, &args, stage);
    assert!(!out.status.success(), "{stage}: the failpoint stops the collection");
    let repo = Repo::open(&root).unwrap_or_else(|e| panic!("{stage}: does not open: {e}"));
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{stage}: {:?}", report.problems);
    assert_eq!(restored(&repo, &kept, &tmp.path().join("after")), expected, "{stage}");
    // The next collection finishes the work.
    let r = repo.gc(&GcOptions { recompress, ..now_gc() }).unwrap_or_else(|e| panic!("{stage}: the next gc: {e}"));
    assert_eq!(r.waiting, 0, "{stage}: {r:?}");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM loose_objects"), 0, "{stage}: every loose object gathered");
    if let Some(l) = recompress {
        assert_eq!(count(&repo, &format!("SELECT COUNT(*) FROM packs WHERE level IS NOT {l}")), 0, "{stage}");
    }
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty() && report.orphan_packs == 0, "{stage}: {report:?}");
    assert_eq!(restored(&repo, &kept, &tmp.path().join("last")), expected, "{stage}");
}

/// A tool call on a session that must succeed; returns its result.
#[test]
fn gc_in_a_loop_costs_no_snapshot_tool_write_or_trash_restore_anything() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    Repo::init(&root, "t").expect("init");
    let open = move |_: &str| Repo::open(&root).expect("open");
    let how = common::stress::Stress {
        grace: Duration::ZERO,
        pause: Duration::ZERO,
        run_for: Duration::from_secs(60),
        retry_conflicts: false,
        collects: true,
    };
    common::stress::gc_in_a_loop(tmp.path(), open, how);
}

#[test]
fn the_server_forgets_and_collects_on_its_schedule() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let ws = tmp.path().join("w");
    {
        let repo = Repo::init(&root, "t").expect("init");
        fs::create_dir_all(&ws).expect("mkdir");
        for i in 0..4 {
            fs::write(ws.join("f.bin"), trove::sample::Rng::new(i).bytes(100_000)).expect("write");
            snap(&repo, &ws, "w");
        }
        repo.set_snapshot_retention("w", Some(RetentionPolicy { keep_last: Some(1), ..Default::default() }), "op")
            .expect("policy");
    }
    let server = common::http::start_on(
        tmp,
        Some(common::http::TOKEN),
        // Recompressing at 9 is the default.
        &["--maintenance-interval", "1s", "--gc-grace", "0s"],
    );
    let repo = Repo::open(&server.repo).expect("open");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let gone = repo.snapshots(Some("w")).expect("list").len() == 1;
        let collected = count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'gc'") > 0;
        let recompressed = count(&repo, "SELECT COUNT(*) FROM packs WHERE level IS NOT 9") == 0;
        if gone && collected && recompressed && count(&repo, "SELECT COUNT(*) FROM packs") <= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not forget, collect and recompress within 30 s: {gone} {collected} {recompressed} {:?}",
            common::pairs::<i64, Option<i64>>(trove::testing::conn(&repo), "SELECT id, level FROM packs")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    clean(&repo);
}

/// `--maintenance-recompress 0` keeps the scheduled collection from recompressing.
#[test]
fn the_servers_collection_leaves_packs_as_written_with_recompression_off() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let ws = tmp.path().join("w");
    {
        let repo = Repo::init(&root, "t").expect("init");
        fs::create_dir_all(&ws).expect("mkdir");
        fs::write(ws.join("a.txt"), "text that level 9 would compress again\n".repeat(2000)).expect("write");
        snap(&repo, &ws, "w");
    }
    let server = common::http::start_on(
        tmp,
        Some(common::http::TOKEN),
        &["--maintenance-interval", "1s", "--gc-grace", "0s", "--maintenance-recompress", "0"],
    );
    let repo = Repo::open(&server.repo).expect("open");
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'gc'") < 2 {
        assert!(Instant::now() < deadline, "the server did not collect twice within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE level IS NOT NULL"), 0, "no pack was recompressed");
    assert!(count(&repo, "SELECT COUNT(*) FROM packs") > 0);
}

/// `gc --recompress` rewrites the packs snapshots compressed fast, at a higher level: the
/// repository gets smaller, every file restores byte for byte, `check` reading every byte finds
/// nothing, the packs carry the level so a second run rewrites nothing, and a higher level
/// rewrites them again. A level zstd does not have is refused, changing nothing.
#[test]
fn gc_recompress_rewrites_fast_compressed_packs_smaller_and_everything_reads_back() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let repo = Repo::init(&root, "t").expect("init");
    let ws = tmp.path().join("w");
    // Real text (this crate's sources: small files in bundles), one big file of it (chunked),
    // and random bytes (stored raw, which no level makes smaller).
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &ws.join("src"));
    let mut big = Vec::new();
    for f in ["src/ops/snapshot/mod.rs", "src/ops/restore.rs", "src/ops/scan.rs", "src/repo.rs"] {
        big.extend(fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(f)).expect("read source"));
    }
    let big = big.repeat((3 << 20) / big.len() + 1);
    fs::write(ws.join("all.rs"), &big).expect("write");
    fs::write(ws.join("noise.bin"), trove::sample::Rng::new(5).bytes(300_000)).expect("write");
    let s = snap(&repo, &ws, "w");
    let expected = restored(&repo, &s, &tmp.path().join("before"));
    let live_bytes = |repo: &Repo| count(repo, "SELECT SUM(size) FROM packs WHERE retired IS NULL");
    let before = live_bytes(&repo);
    let packs_before = count(&repo, "SELECT COUNT(*) FROM packs");

    let refused = trove(&root, &["gc", "--grace", "0s", "--recompress", "23"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("not a zstd level from 1 to 19"), "{}", stderr(&refused));
    assert_eq!((live_bytes(&repo), count(&repo, "SELECT COUNT(*) FROM packs")), (before, packs_before));

    let out = trove(&root, &["gc", "--grace", "0s", "--recompress", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(r["packsRecompressed"].as_i64(), Some(packs_before), "{r}");
    assert_eq!(r["packsDeleted"].as_i64(), Some(packs_before), "the old packs go at once with no grace: {r}");
    let repo = Repo::open(&root).expect("open");
    let after = live_bytes(&repo);
    assert!(after < before, "level 9 makes {before} bytes of packs smaller: {after}");
    assert_eq!(r["packBytesWritten"].as_i64(), Some(after), "{r}");
    assert_eq!(r["bytesReclaimed"].as_i64(), Some(before - after), "net of the copies: {r}");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE level IS NOT 9"), 0);
    assert_eq!(restored(&repo, &s, &tmp.path().join("after")), expected, "byte for byte");
    clean(&repo);
    let details =
        count(&repo, "SELECT COUNT(*) FROM audit WHERE operation = 'gc' AND details LIKE '%\"recompressLevel\":9%'");
    assert_eq!(details, 1, "the audit record names the level");

    // Done once: nothing below level 9 is left to rewrite.
    let again = repo.gc(&GcOptions { recompress: Some(9), ..now_gc() }).expect("gc");
    assert_eq!((again.packs_rewritten, again.packs_recompressed), (0, 0), "{again:?}");
    // A higher level rewrites them again.
    let higher = repo.gc(&GcOptions { recompress: Some(12), ..now_gc() }).expect("gc");
    assert!(higher.packs_recompressed >= 1, "{higher:?}");
    assert!(live_bytes(&repo) <= after);
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE level IS NOT 12"), 0);
    assert_eq!(restored(&repo, &s, &tmp.path().join("last")), expected);
    clean(&repo);
    // A snapshot after it packs at the repository's level again, beside the recompressed packs.
    fs::write(ws.join("new.rs"), "fn later() {}\n".repeat(2000)).expect("write");
    let later = snap(&repo, &ws, "w");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE level IS NULL"), 1);
    let entry = repo.lookup(&later, b"new.rs").expect("lookup");
    assert_eq!(
        repo.read_object(&entry.content.expect("content")).expect("read"),
        "fn later() {}\n".repeat(2000).as_bytes()
    );
}

/// A pack is named by its bytes. A snapshot that writes again the very bytes of a pack garbage
/// collection retired (the same new objects, in the same order) takes that pack back: the
/// collection does not delete what the snapshot now points into, and everything still reads.
#[test]
fn a_snapshot_writing_a_retired_packs_bytes_again_takes_it_back() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    for ws in [&one, &two] {
        fs::create_dir_all(ws).expect("mkdir");
        fs::write(ws.join("a.txt"), "the same bytes in both workspaces\n".repeat(50)).expect("write");
    }
    snap(&repo, &one, "one");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs"), 1);
    // What a collection leaves while an operation in flight holds back the pack's deletion:
    // nothing points into it any more, and it is retired.
    let conn = trove::testing::conn(&repo);
    conn.execute_batch(
        "DELETE FROM objects; INSERT INTO gc_epochs (epoch, time_ns) VALUES (1, 0); UPDATE packs SET retired = 1;",
    )
    .expect("retire");
    let s = snap(&repo, &two, "two");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs"), 1, "the same bytes, the same pack");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE retired IS NULL"), 1, "taken back");
    let r = repo.gc(&now_gc()).expect("gc");
    assert_eq!(r.packs_deleted, 0, "{r:?}");
    let entry = repo.lookup(&s, b"a.txt").expect("lookup");
    assert_eq!(
        repo.read_object(&entry.content.expect("content")).expect("read"),
        "the same bytes in both workspaces\n".repeat(50).as_bytes()
    );
    clean(&repo);
}

/// A blob that does not decode is not copied by a recompression: it stays in its pack (which
/// stays), counted and logged, `check` still reports it, and every other pack is recompressed.
#[test]
fn a_damaged_blob_is_left_in_its_pack_by_a_recompression() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let repo = Repo::init(&root, "t").expect("init");
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    for (ws, text) in [(&one, "first workspace, line "), (&two, "second workspace, line ")] {
        fs::create_dir_all(ws).expect("mkdir");
        let body: String = (0..4000).map(|i| format!("{text}{}\n", i % 97)).collect();
        fs::write(ws.join("a.txt"), body).expect("write");
    }
    let s1 = snap(&repo, &one, "one");
    let s2 = snap(&repo, &two, "two");
    let packs: Vec<(i64, String)> =
        common::pairs(trove::testing::conn(&repo), "SELECT id, name FROM packs ORDER BY id");
    assert_eq!(packs.len(), 2);
    // Flip a byte in the middle of the first pack's only blob.
    let damaged = root.join(&packs[0].1);
    let mut bytes = fs::read(&damaged).expect("read pack");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&damaged, &bytes).expect("damage");
    let problems_before = repo.check().expect("check").problems.len();
    assert!(problems_before > 0);

    let r = repo.gc(&GcOptions { recompress: Some(9), ..now_gc() }).expect("gc");
    assert_eq!(r.blobs_left, 1, "{r:?}");
    assert_eq!(count(&repo, &format!("SELECT COUNT(*) FROM packs WHERE id = {} AND retired IS NULL", packs[0].0)), 1);
    assert_eq!(fs::read(&damaged).expect("still there"), bytes, "left as it was");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM packs WHERE level = 9"), 1, "the healthy pack is recompressed");
    let report = repo.check().expect("check");
    assert_eq!(report.problems.len(), problems_before, "{:?}", report.problems);
    let entry = repo.lookup(&s2, b"a.txt").expect("lookup");
    assert!(repo.read_object(&entry.content.expect("content")).expect("read").starts_with(b"second workspace"));
    let entry = repo.lookup(&s1, b"a.txt").expect("lookup");
    assert!(repo.read_object(&entry.content.expect("content")).is_err(), "still damaged, not hidden");
}

/// Text of about 14 KB that differs per `seed`: compressible, so it joins a bundle.
fn text(seed: usize) -> String {
    (0..700).map(|i| format!("line {} of file {seed}\n", i * 7919 % 1000)).collect()
}

fn pack_bytes(repo: &Repo) -> i64 {
    count(repo, "SELECT SUM(size) FROM packs WHERE retired IS NULL")
}

/// Writes `names` with text of `seed`, `seed + 1`...
fn write_texts(ws: &Path, names: impl IntoIterator<Item = String>, seed: usize) {
    for (i, name) in names.into_iter().enumerate() {
        fs::write(ws.join(name), text(seed + i)).expect("write");
    }
}

fn keep_last_one(repo: &Repo) {
    repo.set_snapshot_retention("w", Some(RetentionPolicy { keep_last: Some(1), ..Default::default() }), "op")
        .expect("policy");
    repo.forget(None, false, "op").expect("forget");
}

#[test]
fn gc_rebuilds_bundles_whose_members_died_and_keeps_every_live_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (root, ws) = (tmp.path().join("repo"), tmp.path().join("w"));
    let repo = Repo::init(&root, "t").expect("init");
    fs::create_dir_all(&ws).expect("mkdir");
    let name = |i: usize| format!("f{i:03}.txt");
    // f000 is empty: a member with no bytes, whose bundle must still count as in use.
    fs::write(ws.join(name(0)), "").expect("write");
    write_texts(&ws, (1..300).map(name), 1);
    snap(&repo, &ws, "w");
    let bundled = count(&repo, "SELECT COUNT(*) FROM objects WHERE inner_offset IS NOT NULL");
    assert_eq!(bundled, 300, "the files share bundles");
    // An agent changes all but ten of them; the first snapshot is forgotten.
    write_texts(&ws, (10..300).map(name), 1000);
    snap(&repo, &ws, "w");
    keep_last_one(&repo);
    let kept = repo.resolve_snapshot("latest", Some("w")).expect("latest");
    let expected = restored(&repo, &kept, &tmp.path().join("expected"));
    let before = pack_bytes(&repo);

    // Killed after writing the rebuilt bundles, before pointing the index at them: the
    // repository checks clean (the new pack an orphan) and restores the same.
    drop(repo);
    let out = trove_at_failpoint(&root, &["gc", "--grace", "0s"], "gc:repack-written");
    assert!(!out.status.success(), "the failpoint stops the collection");
    let repo = Repo::open(&root).expect("open");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty() && report.orphan_packs >= 1, "{report:?}");
    assert_eq!(restored(&repo, &kept, &tmp.path().join("killed")), expected);

    let r = repo.gc(&now_gc()).expect("gc");
    assert!(r.bundles_rebuilt >= 1, "{r:?}");
    let after = pack_bytes(&repo);
    // The 290 dead first versions were more than half of the packs: they are gone, not copied.
    assert!(after * 10 < before * 6, "packs {before} -> {after} bytes: {r:?}");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM bundle_dead"), 0, "the rewritten packs' counts went with them");
    clean(&repo);
    assert_eq!(restored(&repo, &kept, &tmp.path().join("after")), expected, "what stays is byte for byte");
    let again = repo.gc(&now_gc()).expect("gc");
    assert_eq!((again.packs_rewritten, again.bundles_rebuilt), (0, 0), "{again:?}");

    // The other nine that were kept change too: the empty file, the one left of their bundle,
    // is stored alone (a live share of no bytes still makes its pack a candidate).
    let alone = count(&repo, "SELECT COUNT(*) FROM objects WHERE inner_offset IS NULL");
    write_texts(&ws, (1..10).map(name), 2000);
    snap(&repo, &ws, "w");
    repo.forget(None, false, "op").expect("forget");
    let r = repo.gc(&now_gc()).expect("gc");
    assert!(r.bundles_rebuilt >= 1, "{r:?}");
    assert_eq!(count(&repo, "SELECT COUNT(*) FROM objects WHERE inner_offset IS NULL"), alone + 1);
    clean(&repo);

    // Members dead but no pack rewritten, then their counts lost, as in a repository from
    // before them: a recompression, which rewrites every pack, still finds the bundle's dead
    // members by its header.
    write_texts(&ws, (300..320).map(name), 3000);
    snap(&repo, &ws, "w");
    write_texts(&ws, (300..315).map(name), 4000);
    let last = snap(&repo, &ws, "w");
    repo.forget(None, false, "op").expect("forget");
    let r = repo.gc(&GcOptions { repack_threshold: 1.0, ..now_gc() }).expect("gc");
    assert_eq!((r.deleted.objects, r.packs_rewritten), (15, 0), "{r:?}");
    assert!(trove::testing::conn(&repo).execute("DELETE FROM bundle_dead", []).expect("forget the counts") >= 1);
    let r = repo.gc(&GcOptions { recompress: Some(9), ..now_gc() }).expect("gc");
    assert!(r.bundles_rebuilt >= 1, "{r:?}");
    clean(&repo);
    let expected = tree_state(&ws);
    assert_eq!(restored(&repo, &last, &tmp.path().join("last")), expected);
}

/// The pack files of this repository that process `pid` holds open though they were deleted.
fn deleted_files_held(pid: i32, root: &Path) -> Vec<String> {
    let root = fs::canonicalize(root).expect("canonical root");
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd table")
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with(&*root.to_string_lossy()) && target.ends_with(" (deleted)"))
        .collect()
}

/// A running server lets go of the pack files a collection in another process deleted: a
/// file it held open for reads is closed at its next open of another, so the disk space comes
/// back (a soak's server held 219 deleted packs open, their space with them).
#[test]
fn a_server_lets_go_of_pack_files_another_process_collected() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("repo");
    let ws = tmp.path().join("w");
    let mut snaps = Vec::new();
    {
        let repo = Repo::init(&root, "t").expect("init");
        fs::create_dir_all(&ws).expect("mkdir");
        for i in 0..4 {
            fs::write(ws.join("f.bin"), trove::sample::Rng::new(i).bytes(100_000)).expect("write");
            snaps.push(snap(&repo, &ws, "w").id.to_string());
        }
        repo.set_snapshot_retention("w", Some(RetentionPolicy { keep_last: Some(1), ..Default::default() }), "op")
            .expect("policy");
    }
    let server = common::http::start_on(tmp, Some(common::http::TOKEN), &[]);
    for s in &snaps {
        let r = server.get(&format!("/v1/snapshots/{s}/files/f.bin?download=1"));
        assert_eq!((r.status, r.body.len()), (200, 100_000), "{}", r.text());
    }
    for args in [&["forget", "--workspace", "w"][..], &["gc", "--grace", "0s"]] {
        let out = trove(&server.repo, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let held = deleted_files_held(server.pid(), &server.repo);
    assert!(held.len() >= 3, "the server held the three forgotten snapshots' packs: {held:?}");

    // A new snapshot, written by another process, read through the server: a pack it does not hold.
    let ws = server.dir.path().join("w");
    fs::write(ws.join("f.bin"), trove::sample::Rng::new(9).bytes(100_000)).expect("write");
    let new = snap(&Repo::open(&server.repo).expect("open"), &ws, "w");
    let r = server.get(&format!("/v1/snapshots/{}/files/f.bin?download=1", new.id));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(deleted_files_held(server.pid(), &server.repo), Vec::<String>::new());
}
