//! A long history of one file through the tools: each version stored as a delta against the
//! one before, chains bounded, every version read back byte-exact, garbage collection keeping
//! exactly the bases live versions need, and `check` reading every chain.

use std::fs;
use std::time::Duration;

use serde_json::json;
use trove::tools::ToolCall;
use trove::{GcOptions, Repo, SessionSpec};

const EDITS: usize = 120;
const MAX_DEPTH: u8 = 48;

/// The file's text after `k` edits: a 60 KB source file with `k` comment lines inserted.
fn version(k: usize) -> String {
    let mut lines: Vec<String> =
        (0..1500).map(|i| format!("    let value_{i} = compute({i}, \"{}\");", i * 7919 % 1000)).collect();
    for e in 0..k {
        let at = (e * 613) % lines.len();
        lines.insert(at, format!("    // edit {e}: keep the value in range"));
    }
    lines.join("\n") + "\n"
}

fn sha256(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// (object id, depth, stored bytes) of every loose object.
fn loose(repo: &std::path::Path) -> Vec<(Vec<u8>, u8, usize)> {
    let conn = rusqlite::Connection::open(repo.join("manifest.db")).expect("db");
    let mut st = conn.prepare("SELECT id, encoded FROM loose_objects").expect("prepare");
    let rows = st
        .query_map([], |r| {
            let encoded: Vec<u8> = r.get(1)?;
            let depth = trove::object::blob::depth_in(&encoded);
            Ok((r.get(0)?, depth, encoded.len()))
        })
        .expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The one number `sql` answers in the manifest of the repository at `repo`.
fn count_in(repo: &std::path::Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(repo.join("manifest.db")).expect("db");
    conn.query_row(sql, [], |r| r.get(0)).expect(sql)
}

/// A repository whose session made `edits` edits of one file through `edit_file`.
fn edited(edits: usize) -> (tempfile::TempDir, std::path::PathBuf, Repo, trove::SessionId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(&root).expect("mkdir");
    fs::write(root.join("big.rs"), version(0)).expect("write");
    let repo = Repo::init(&repo_path, "test").expect("init");
    let r = root.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(r), "test").expect("session");
    for e in 0..edits {
        let s = repo.session(&s.id).expect("session");
        let (old, new) = (version(e), version(e + 1));
        // The one line this edit inserts, before the line it pushes down (every line is
        // unique and ends with a newline).
        let at = (e * 613) % (1500 + e);
        let anchor = old.lines().nth(at).expect("line").to_string();
        let inserted = new.lines().nth(at).expect("line").to_string();
        let call = ToolCall::parse(
            "edit_file",
            json!({"path": "big.rs", "expectedSha256": sha256(&old), "edits": [{"oldText": format!("{anchor}\n"), "newText": format!("{inserted}\n{anchor}\n")}]}),
        )
        .expect("call");
        if let Err(err) = trove::tools::run(&repo, &s, call, "agent") {
            panic!("edit {e}: {err}");
        }
        assert_eq!(fs::read_to_string(root.join("big.rs")).expect("read"), new, "edit {e}");
    }

    (dir, repo_path, repo, s.id)
}

#[test]
fn a_hundred_edits_are_stored_as_bounded_deltas_and_every_version_reads_back() {
    let (dir, repo_path, repo, sid) = edited(EDITS);
    let objects = loose(&repo_path);
    let deltas = objects.iter().filter(|o| o.1 > 0).count();
    let max = objects.iter().map(|o| o.1).max().unwrap_or(0);
    let stored: usize = objects.iter().map(|o| o.2).sum();
    assert!(deltas >= EDITS - 2, "{deltas} of {EDITS} versions are deltas");
    assert!(max <= MAX_DEPTH && max > MAX_DEPTH / 2, "chains are bounded: deepest {max}");
    // Whole, each version would take about 15 KB compressed; as deltas, about 200 bytes.
    assert!(stored < EDITS * 300, "{EDITS} versions of {} bytes take {stored} bytes", version(0).len());

    // Every version the audit log names reads back exact, through its chain.
    let conn = rusqlite::Connection::open(repo_path.join("manifest.db")).expect("db");
    let mut st = conn
        .prepare("SELECT after_object FROM audit WHERE operation = 'edit_file' AND outcome = 'ok' ORDER BY seq")
        .expect("prepare");
    let afters: Vec<Vec<u8>> = st.query_map([], |r| r.get(0)).expect("query").map(|r| r.expect("row")).collect();
    assert_eq!(afters.len(), EDITS);
    for (e, after) in afters.iter().enumerate() {
        let hex: String = after.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(repo.content_bytes(&hex).expect("read"), version(e + 1).into_bytes(), "version {}", e + 1);
    }
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // Only the last version stays a root: the session's one snapshot, the audit log's
    // pre-images aged out of the trash window. Collection keeps its chain and nothing else.
    repo.snapshot_session(&repo.session(&sid).expect("session"), "test", "test").expect("snapshot");
    conn.execute("UPDATE workspaces SET trash_age_s = 0", []).expect("age");
    let gc = GcOptions { grace: Duration::ZERO, ..GcOptions::default() };
    repo.gc(&gc).expect("gc");
    // What is left is one chain of deltas (they stay loose), down to the packed first version.
    let left = loose(&repo_path);
    assert!(left.len() < objects.len() / 2, "{} of {} objects left", left.len(), objects.len());
    let depths: std::collections::BTreeSet<u8> = left.iter().map(|o| o.1).collect();
    assert_eq!(depths.len(), left.len(), "one object per depth: a single chain, {depths:?}");
    let deepest = depths.last().copied().unwrap_or(0);
    assert_eq!(depths, (1..=deepest).collect(), "the chain runs from the packed first version");
    let chain = left.len() as i64;
    let repo = Repo::open(&repo_path).expect("open");
    let latest = repo.resolve_snapshot("latest", None).expect("snapshot");
    let entry = repo.lookup(&latest, b"big.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), version(EDITS).into_bytes());
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // A restore's workers and a search's get the delta through the manifest.
    let target = dir.path().join("restored");
    repo.restore(&latest, &target, &trove::RestoreOptions::default()).expect("restore");
    assert_eq!(fs::read_to_string(target.join("big.rs")).expect("read"), version(EDITS));
    let spec = trove::SearchSpec { pattern: format!("// edit {}:", EDITS - 1), ..trove::SearchSpec::default() };
    let found = repo
        .search_snapshot(&latest, &trove::Scope::whole(), &trove::Matcher::new(&spec).expect("matcher"), 10)
        .expect("search");
    assert_eq!(found.matches.len(), 1, "{:?}", found.matches);
    // The record of the bases, rebuilt from the deltas' own headers, is the chain again.
    conn.execute("DELETE FROM object_bases", []).expect("forget the bases");
    repo.repair_index("test").expect("repair");
    let again: i64 = conn.query_row("SELECT COUNT(*) FROM object_bases", [], |r| r.get(0)).expect("count");
    assert_eq!(again, chain);
    assert!(repo.check().expect("check").problems.is_empty());
    // Edits after the collection go on from the chain it kept, and read back.
    let s = repo.session(&sid).expect("session");
    drop(s);
    let ws = dir.path().join("ws");
    let mut text = version(EDITS);
    for k in 0..3 {
        let s = repo.session(&sid).expect("session");
        let new = text.replacen("    let value_7 ", &format!("    // after gc {k}\n    let value_7 "), 1);
        let call =
            ToolCall::parse("write_file", json!({"path": "big.rs", "content": new, "expectedSha256": sha256(&text)}))
                .expect("call");
        trove::tools::run(&repo, &s, call, "agent").unwrap_or_else(|e| panic!("write {k} after gc: {e}"));
        text = new;
    }
    assert_eq!(fs::read_to_string(ws.join("big.rs")).expect("read"), text);
    let last: Vec<u8> = conn
        .query_row("SELECT after_object FROM audit WHERE operation = 'write_file' ORDER BY seq DESC LIMIT 1", [], |r| {
            r.get(0)
        })
        .expect("last write");
    let hex: String = last.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(repo.content_bytes(&hex).expect("read"), text.into_bytes());
    assert!(loose(&repo_path).iter().all(|o| o.1 <= MAX_DEPTH));
    assert!(repo.check().expect("check").problems.is_empty());
}

#[test]
fn a_delta_whose_base_is_not_recorded_is_found_by_check_and_mended_by_repair() {
    let (_dir, repo_path, repo, _) = edited(3);
    let conn = rusqlite::Connection::open(repo_path.join("manifest.db")).expect("db");
    // Without its row, collection would not know the delta needs its base.
    let n = conn.execute("DELETE FROM object_bases WHERE id = (SELECT MIN(id) FROM object_bases)", []).expect("delete");
    assert_eq!(n, 1);
    // A row for an object stored nowhere.
    conn.execute("INSERT INTO object_bases (id, base) VALUES (zeroblob(32), zeroblob(32))", []).expect("insert");
    let report = repo.check().expect("check");
    let rows: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().any(|m| m.contains("which object_bases does not record")), "{rows:?}");
    assert!(rows.iter().any(|m| m.contains("which is not stored")), "{rows:?}");
    repo.repair_index("test").expect("repair");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let deltas: i64 = conn.query_row("SELECT COUNT(*) FROM object_bases", [], |r| r.get(0)).expect("count");
    assert_eq!(deltas, 3);
}

#[test]
fn readers_find_every_version_while_a_collection_gathers_them_into_packs() {
    let (_dir, repo_path, repo, sid) = edited(60);
    // Twenty new files, stored whole (loose): what the collection gathers while they are read.
    let s = repo.session(&sid).expect("session");
    for i in 0..20 {
        let call = ToolCall::parse(
            "create_file",
            json!({"path": format!("new{i}.txt"), "content": format!("new file {i}\n").repeat(50)}),
        )
        .expect("call");
        trove::tools::run(&repo, &s, call, "agent").expect("write");
    }
    let conn = rusqlite::Connection::open(repo_path.join("manifest.db")).expect("db");
    let mut st =
        conn.prepare("SELECT after_object FROM audit WHERE after_object IS NOT NULL ORDER BY seq").expect("prepare");
    let ids: Vec<String> = st
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .expect("query")
        .map(|r| r.expect("row").iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    assert_eq!(ids.len(), 80);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (path, ids, stop) = (repo_path.clone(), ids.clone(), stop.clone());
            std::thread::spawn(move || {
                let repo = Repo::open(&path).expect("open");
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for id in &ids {
                        repo.content_bytes(id).unwrap_or_else(|e| panic!("{id} during the collection: {e}"));
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    let report = repo.gc(&GcOptions { grace: Duration::ZERO, ..GcOptions::default() }).expect("gc");
    assert!(report.loose_gathered > 0);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("a reader failed") > 0);
    }
    assert!(loose(&repo_path).iter().all(|o| o.1 > 0), "only deltas stay loose");
    for (e, id) in ids.iter().enumerate() {
        let expected = if e < 60 { version(e + 1) } else { format!("new file {}\n", e - 60).repeat(50) };
        assert_eq!(repo.content_bytes(id).expect("read"), expected.into_bytes());
    }
}

/// A file edited outside the tools (an agent's shell command) is stored by the next snapshot as a
/// delta against the version the snapshot before holds: chains stay bounded however many
/// snapshots there are, every snapshot's version reads back, `check` is clean, and a
/// collection that forgets the early snapshots keeps what the later ones need.
#[test]
fn a_snapshots_changed_file_is_stored_against_the_version_before() {
    const SNAPSHOTS: usize = 70;
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(&root).expect("mkdir");
    // Two versioned files: one a loose object would hold anyway, one over the 64 KiB a loose
    // object holds whole, which goes loose only as a new version of a path the parent holds.
    let big = |k: usize| version(k) + &version(0) + &version(0);
    fs::write(root.join("small.rs"), version(0)).expect("write");
    fs::write(root.join("big.rs"), big(0)).expect("write");
    fs::write(root.join("other.txt"), "unchanged\n").expect("write");
    let repo = Repo::init(&repo_path, "test").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..trove::SnapshotOptions::default() };
    let mut snaps = vec![repo.snapshot(&root, &opts).expect("first")];
    for k in 1..=SNAPSHOTS {
        fs::write(root.join("small.rs"), version(k)).expect("write");
        fs::write(root.join("big.rs"), big(k)).expect("write");
        snaps.push(repo.snapshot(&root, &opts).expect("snapshot"));
    }
    let objects = loose(&repo_path);
    let deltas = objects.iter().filter(|o| o.1 > 0).count();
    let max = objects.iter().map(|o| o.1).max().unwrap_or(0);
    assert!(deltas >= 2 * (SNAPSHOTS - 2), "{deltas} of {} versions are deltas: {objects:?}", 2 * SNAPSHOTS);
    assert!(max <= MAX_DEPTH && max > MAX_DEPTH / 2, "chains are bounded: deepest {max}");
    let stored: usize = objects.iter().map(|o| o.2).sum();
    assert!(stored < 2 * SNAPSHOTS * 300, "{} versions take {stored} bytes", 2 * SNAPSHOTS);
    for (k, snap) in snaps.iter().enumerate() {
        let entry = repo.lookup(snap, b"small.rs").expect("entry");
        assert_eq!(repo.read_content(&entry).expect("read"), version(k).into_bytes(), "snapshot {k}");
        let entry = repo.lookup(snap, b"big.rs").expect("entry");
        assert_eq!(repo.read_content(&entry).expect("read"), big(k).into_bytes(), "snapshot {k}");
    }
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // Forget all but the last snapshot: the collection keeps its version's chain, and the
    // version reads back after it.
    let keep_last = trove::RetentionPolicy { keep_last: Some(1), ..Default::default() };
    repo.set_snapshot_retention("w", Some(keep_last), "test").expect("policy");
    repo.forget(Some("w"), false, "test").expect("forget");
    repo.gc(&GcOptions { grace: Duration::ZERO, ..GcOptions::default() }).expect("gc");
    repo.gc(&GcOptions { grace: Duration::ZERO, ..GcOptions::default() }).expect("gc again");
    let repo = Repo::open(&repo_path).expect("open");
    let latest = repo.resolve_snapshot("latest", None).expect("snapshot");
    let entry = repo.lookup(&latest, b"small.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), version(SNAPSHOTS).into_bytes());
    let entry = repo.lookup(&latest, b"big.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), big(SNAPSHOTS).into_bytes());
    assert!(loose(&repo_path).len() < objects.len(), "the chain's unreached tail went");
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// A file over 64 KiB that a snapshot reads again without a new version to store (touched, or
/// put back as an earlier version) is not stored again: no pack, no loose object.
#[test]
fn a_touched_or_reverted_big_file_is_not_stored_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(&root).expect("mkdir");
    let big = |k: usize| version(k) + &version(0) + &version(0);
    fs::write(root.join("big.rs"), big(0)).expect("write");
    let repo = Repo::init(&repo_path, "test").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..trove::SnapshotOptions::default() };
    let stored = || {
        let count = |t: &str| count_in(&repo_path, &format!("SELECT COUNT(*) FROM {t}"));
        (count("packs"), count("loose_objects"))
    };
    repo.snapshot(&root, &opts).expect("first");
    let (packs, loose0) = stored();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(root.join("big.rs"), big(0)).expect("touch: the same bytes again");
    repo.snapshot(&root, &opts).expect("touched");
    assert_eq!(stored(), (packs, loose0), "a touched file is not stored again");
    fs::write(root.join("big.rs"), big(1)).expect("edit");
    repo.snapshot(&root, &opts).expect("edited");
    assert_eq!(stored(), (packs, loose0 + 1), "the edit is one delta");
    fs::write(root.join("big.rs"), big(0)).expect("revert");
    let reverted = repo.snapshot(&root, &opts).expect("reverted");
    assert_eq!(stored(), (packs, loose0 + 1), "the earlier version is stored already");
    let entry = repo.lookup(&reverted, b"big.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), big(0).into_bytes());
}

/// Files a snapshot reads again only because they were written within its racy window of the
/// snapshot before (an agent's edits a moment earlier) do not count as changes: a one-file
/// edit is still stored as a delta in the manifest, not whole in a pack.
#[test]
fn files_read_again_for_the_racy_window_do_not_push_an_edit_into_a_pack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(root.join("src")).expect("mkdir");
    for i in 0..40 {
        fs::write(root.join(format!("src/m{i:02}.rs")), format!("pub fn f{i}() -> u32 {{ {i} }}\n").repeat(30))
            .expect("write");
    }
    fs::write(root.join("lib.rs"), version(0)).expect("write");
    let repo = Repo::init(&repo_path, "test").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..trove::SnapshotOptions::default() };
    let stored = || {
        let count = |sql: &str| count_in(&repo_path, sql);
        (count("SELECT COUNT(*) FROM packs"), count("SELECT COUNT(*) FROM object_bases"))
    };
    // Every file is new within the default 2 s window, so its record is racy.
    repo.snapshot(&root, &opts).expect("first");
    let (packs, deltas) = stored();
    fs::write(root.join("lib.rs"), version(1)).expect("edit");
    let snap = repo.snapshot(&root, &opts).expect("second, 41 files read, one changed");
    assert_eq!(stored(), (packs, deltas + 1), "the edit is a delta, and no pack was written");
    let entry = repo.lookup(&snap, b"lib.rs").expect("entry");
    assert_eq!(repo.read_content(&entry).expect("read"), version(1).into_bytes());
}

/// A snapshot of many edited files (more than the 16 new files a small change may hold) keeps
/// each edit as a delta in the manifest: new versions of the parent's paths count apart.
#[test]
fn many_edited_files_in_one_snapshot_are_each_a_delta() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(root.join("src")).expect("mkdir");
    let text = |i: usize, k: usize| version(k).lines().skip(i * 40).take(300).collect::<Vec<_>>().join("\n");
    for i in 0..30 {
        fs::write(root.join(format!("src/m{i:02}.rs")), text(i, 0)).expect("write");
    }
    let repo = Repo::init(&repo_path, "test").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), racy_window_ns: 0, ..Default::default() };
    repo.snapshot(&root, &opts).expect("first");
    let stored = || {
        let count = |sql: &str| count_in(&repo_path, sql);
        (count("SELECT COUNT(*) FROM packs"), count("SELECT COUNT(*) FROM object_bases"))
    };
    let (packs, _) = stored();
    for i in 0..30 {
        fs::write(root.join(format!("src/m{i:02}.rs")), format!("// edited\n{}", text(i, 0))).expect("edit");
    }
    let snap = repo.snapshot(&root, &opts).expect("thirty edits");
    assert_eq!(stored(), (packs, 30), "thirty deltas, no pack");
    for i in 0..30 {
        let entry = repo.lookup(&snap, format!("src/m{i:02}.rs").as_bytes()).expect("entry");
        assert_eq!(repo.read_content(&entry).expect("read"), format!("// edited\n{}", text(i, 0)).into_bytes());
    }
}

/// New versions that are rewrites (their deltas not worth keeping) are stored whole, and only as
/// many whole blobs stay in the manifest as a small change's new files may: the rest go to a
/// pack, as they would have without an earlier version.
#[test]
fn rewritten_files_beyond_a_small_changes_limits_go_to_a_pack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (repo_path, root) = (dir.path().join("repo"), dir.path().join("ws"));
    fs::create_dir_all(root.join("bin")).expect("mkdir");
    let bytes = |i: u64, k: u64| trove::sample::Rng::new(i * 1000 + k).bytes(30 << 10);
    for i in 0..40 {
        fs::write(root.join(format!("bin/b{i:02}")), bytes(i, 0)).expect("write");
    }
    let repo = Repo::init(&repo_path, "test").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), racy_window_ns: 0, ..Default::default() };
    repo.snapshot(&root, &opts).expect("first");
    let stored = || {
        let count = |sql: &str| count_in(&repo_path, sql);
        (
            count("SELECT COUNT(*) FROM packs"),
            count("SELECT COUNT(*) FROM loose_objects"),
            count("SELECT COALESCE(SUM(raw_len), 0) FROM loose_objects"),
        )
    };
    let (packs, _, _) = stored();
    for i in 0..40 {
        fs::write(root.join(format!("bin/b{i:02}")), bytes(i, 1)).expect("rewrite");
    }
    let snap = repo.snapshot(&root, &opts).expect("forty rewrites");
    let (after, loose, loose_bytes) = stored();
    assert_eq!(after, packs + 1, "the rewrites past the limits went to a pack");
    assert!(loose <= 16 && loose_bytes <= 256 << 10, "{loose} whole blobs, {loose_bytes} bytes, stayed loose");
    for i in 0..40 {
        let entry = repo.lookup(&snap, format!("bin/b{i:02}").as_bytes()).expect("entry");
        assert_eq!(repo.read_content(&entry).expect("read"), bytes(i, 1));
    }
}
