//! The change feed a server keeps of a running session's live tree: after every kind of change
//! (writes keeping size and mtime, creations, removals, renames of files and directories, moves
//! in and out of the tree, mode changes, symlinks, a file replaced by a directory and back,
//! excluded directories, non-UTF-8 names), a live diff patched from the feed says exactly what
//! a whole read says.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::http::{self, TOKEN};
use trove::{DiffOptions, DiffReport, DiffTarget, LiveFeeds, Repo, SnapshotOptions};

/// A small deterministic generator (xorshift64*), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every directory and file below `root` (relative), excluded ones too, in a stable order.
fn listing(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut dirs, mut files) = (vec![PathBuf::new()], Vec::new());
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut names: Vec<_> = fs::read_dir(root.join(&rel)).expect("read_dir").map(|e| e.expect("entry")).collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let r = rel.join(e.file_name());
            let t = e.file_type().expect("type");
            if t.is_dir() {
                dirs.push(r.clone());
                todo.push(r);
            } else {
                files.push(r);
            }
        }
    }
    (dirs, files)
}

fn name(rng: &mut Rng) -> PathBuf {
    const NAMES: [&[u8]; 8] = [b"a", b"b", b"src", b"lib.rs", b"x.txt", b"node_modules", b"caf\xe9", b"deep"];
    PathBuf::from(OsStr::from_bytes(NAMES[rng.below(NAMES.len())]))
}

/// One random change to the tree at `w`, using `out` (beside it, outside the tree) for moves
/// in and out. Returns what it did, for the failure message.
fn change(rng: &mut Rng, w: &Path, out: &Path) -> String {
    let (dirs, files) = listing(w);
    let dir = w.join(&dirs[rng.below(dirs.len())]);
    let file = (!files.is_empty()).then(|| w.join(&files[rng.below(files.len())]));
    let op = rng.below(15);
    let r = match (op, &file) {
        (0, _) => {
            let p = dir.join(name(rng));
            fs::write(&p, format!("new {}\n", rng.next())).map(|_| format!("write {}", p.display()))
        }
        (1, Some(f)) if f.symlink_metadata().is_ok_and(|m| m.is_file()) => {
            // The same size and mtime, other bytes: only the feed's notice can tell.
            let meta = fs::metadata(f).expect("meta");
            let mut bytes = fs::read(f).expect("read");
            if let Some(b) = bytes.first_mut() {
                *b = b.wrapping_add(1);
            }
            fs::write(f, &bytes).expect("rewrite");
            let t = fs::File::options().write(true).open(f).expect("open");
            t.set_modified(meta.modified().expect("mtime")).expect("set mtime");
            Ok(format!("rewrite same size and mtime {}", f.display()))
        }
        (2, Some(f)) => fs::remove_file(f).map(|_| format!("rm {}", f.display())),
        (3, _) => {
            let p = dir.join(name(rng)).join(name(rng));
            fs::create_dir_all(&p)
                .and_then(|_| fs::write(p.join("f"), b"in a new directory\n"))
                .map(|_| format!("mkdir -p {}", p.display()))
        }
        (4, Some(f)) => {
            let to = dir.join(name(rng));
            fs::rename(f, &to).map(|_| format!("mv {} {}", f.display(), to.display()))
        }
        (5, _) if dir != w => {
            let to = w.join(name(rng));
            fs::rename(&dir, &to).map(|_| format!("mv dir {} {}", dir.display(), to.display()))
        }
        (6, _) if dir != w => fs::remove_dir_all(&dir).map(|_| format!("rm -r {}", dir.display())),
        (7, Some(f)) => {
            let mode = if rng.below(2) == 0 { 0o755 } else { 0o600 };
            fs::set_permissions(f, fs::Permissions::from_mode(mode)).map(|_| format!("chmod {mode:o} {}", f.display()))
        }
        (8, _) => {
            let p = dir.join(name(rng));
            let _ = fs::remove_file(&p);
            std::os::unix::fs::symlink(format!("target-{}", rng.below(3)), &p).map(|_| format!("ln -s {}", p.display()))
        }
        (9, _) if dir != w => {
            // Out of the tree and, under another name, back in.
            let away = out.join(format!("away-{}", rng.next()));
            fs::rename(&dir, &away)
                .and_then(|_| fs::write(away.join("while-away"), b"x"))
                .and_then(|_| fs::rename(&away, w.join(name(rng))))
                .map(|_| format!("mv out and back {}", dir.display()))
        }
        (10, Some(f)) => {
            // A file replaced by a directory of the same name.
            fs::remove_file(f)
                .and_then(|_| fs::create_dir(f))
                .and_then(|_| fs::write(f.join("inside"), b"now a dir\n"))
                .map(|_| format!("file to dir {}", f.display()))
        }
        (11, _) if dir != w => {
            let mode = if rng.below(2) == 0 { 0o700 } else { 0o755 };
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode))
                .map(|_| format!("chmod dir {mode:o} {}", dir.display()))
        }
        (12, Some(f)) if f.symlink_metadata().is_ok_and(|m| m.is_file()) => {
            // An edit that grows the file (an agent appending).
            use std::io::Write;
            fs::OpenOptions::new()
                .append(true)
                .open(f)
                .and_then(|mut h| h.write_all(format!("more {}\n", rng.next()).as_bytes()))
                .map(|_| format!("append {}", f.display()))
        }
        (13, _) => {
            // A file over the chunking threshold (1 MiB): stored as chunks and a chunk list.
            let p = dir.join(name(rng));
            let line = format!("{}\n", rng.next());
            let _ = fs::remove_dir_all(&p);
            fs::write(&p, line.repeat((1 << 20) / line.len() + 1 + rng.below(4096)))
                .map(|_| format!("big {}", p.display()))
        }
        (14, _) => {
            // A socket (a language server's, say): counted by a snapshot, kept in no tree.
            let p = dir.join(format!("s{}.sock", rng.below(3)));
            std::os::unix::net::UnixListener::bind(&p).map(|_| format!("socket {}", p.display()))
        }
        _ => Ok("nothing".to_string()),
    };
    r.unwrap_or_else(|e| format!("failed harmlessly: {e}"))
}

fn live_diff(repo: &Repo, from: &DiffTarget, w: &Path) -> DiffReport {
    let to = DiffTarget::Live { dir: w.to_path_buf(), workspace: "w".into() };
    repo.diff(from, &to, &DiffOptions::default()).expect("diff")
}

/// What a reviewer sees of a diff (its entries and totals; not when it was read).
fn seen(r: &DiffReport) -> String {
    let mut v = serde_json::to_value(r).expect("json");
    v.as_object_mut().expect("object").remove("to");
    v.to_string()
}

/// Two handles on one repository holding a snapshot of `w`: one reading live trees whole, one
/// through a change feed.
struct Handles {
    plain: Repo,
    base: DiffTarget,
    served: Repo,
    feeds: Arc<LiveFeeds>,
}

fn handles(repo_dir: &Path, w: &Path) -> Handles {
    let plain = Repo::init(repo_dir, "t").expect("init");
    let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    let base = DiffTarget::Snapshot(Box::new(plain.snapshot(w, &opts).expect("snapshot")));
    let mut served = Repo::open(repo_dir).expect("open");
    let feeds = Arc::new(LiveFeeds::new());
    served.set_live_feeds(feeds.clone());
    Handles { plain, base, served, feeds }
}

/// A few directories of one file each, older than the racy window (so the directory cache
/// vouches for them): the tree `w`, and `out` beside it for moves out of the tree.
fn seeded_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().expect("tmp");
    let (w, out) = (tmp.path().join("w"), tmp.path().join("out"));
    fs::create_dir_all(&out).expect("out");
    for (i, d) in ["a", "a/b", "src", "src/deep/er"].iter().enumerate() {
        fs::create_dir_all(w.join(d)).expect("dir");
        fs::write(w.join(d).join("f.txt"), format!("file {i}\n")).expect("file");
    }
    let old = SystemTime::now() - Duration::from_secs(60);
    for f in listing(&w).1 {
        fs::File::options().write(true).open(w.join(f)).expect("open").set_modified(old).expect("mtime");
    }
    (tmp, w, out)
}

#[test]
fn a_live_diff_patched_from_the_feed_says_what_a_whole_read_says_after_every_change() {
    let (tmp, w, out) = seeded_tree();
    let Handles { plain, base, served, feeds } = handles(&tmp.path().join("repo"), &w);

    for seed in 1..=4u64 {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut done = Vec::new();
        for step in 0..60 {
            // Sometimes several changes between two reads.
            for _ in 0..=rng.below(3) {
                done.push(change(&mut rng, &w, &out));
            }
            let (whole, patched) = (live_diff(&plain, &base, &w), live_diff(&served, &base, &w));
            assert_eq!(seen(&patched), seen(&whole), "seed {seed} step {step} after: {done:#?}");
        }
    }
    assert_eq!(feeds.len(), 1);
    // Read whole once, then patched (a lost feed would read whole again).
    let (whole, patched) = feeds.reads();
    assert!(whole <= 2 && patched >= 238, "{whole} whole, {patched} patched");
}

#[test]
fn a_feed_whose_tree_is_replaced_reads_it_whole_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let w = tmp.path().join("w");
    fs::create_dir_all(w.join("d")).expect("dir");
    fs::write(w.join("d/f"), b"one\n").expect("file");
    let Handles { plain, base, served, feeds } = handles(&tmp.path().join("repo"), &w);
    assert_eq!(live_diff(&served, &base, &w).stats.changed, 0);
    // The whole workspace swapped for another directory at the same path.
    fs::rename(&w, tmp.path().join("old")).expect("move away");
    fs::create_dir_all(w.join("d")).expect("dir");
    fs::write(w.join("d/f"), b"two\n").expect("file");
    fs::write(w.join("g"), b"new\n").expect("file");
    let r = live_diff(&served, &base, &w);
    assert_eq!(seen(&r), seen(&live_diff(&plain, &base, &w)));
    assert_eq!(r.stats.changed, 2, "{:?}", r.entries);
    assert_eq!(feeds.reads(), (2, 0));
}

#[test]
fn a_server_answers_each_change_made_before_the_request_at_once() {
    let s = http::start(Some(TOKEN), &[]);
    let ws = s.workspace("fed");
    http::write(&ws.join("src/a.rs"), b"fn a() {}\n");
    let id = s.session(r#"{"workspace": "fed"}"#);
    let changed = |s: &http::Server| -> Vec<String> {
        let r = s.get(&format!("/v1/sessions/{id}/changes?lines=false"));
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["path"].as_str().expect("path").to_string())
            .collect()
    };
    assert!(changed(&s).is_empty());
    // No waiting between a change on disk and the request that must see it.
    let mut want = Vec::new();
    for i in 0..20 {
        let rel = format!("src/d{}/f{i}.rs", i % 3);
        http::write(&ws.join(&rel), format!("fn f{i}() {{}}\n").as_bytes());
        want.push(rel);
        want.sort();
        assert_eq!(changed(&s), want, "after writing {i}");
    }
    fs::remove_dir_all(ws.join("src/d1")).expect("rm");
    want.retain(|p| !p.starts_with("src/d1/"));
    assert_eq!(changed(&s), want);
}

/// A served workspace's snapshots are taken from its change feed, listing and hashing only what
/// changed: after every kind of change, each is the snapshot a whole read of the same state
/// makes (the same root tree, the same counts), and none had to walk the tree after all.
#[test]
fn a_snapshot_from_the_feed_is_the_snapshot_a_whole_read_takes_after_every_change() {
    let (tmp, w, out) = seeded_tree();
    let Handles { plain, served, feeds, .. } = handles(&tmp.path().join("repo"), &w);
    let watched = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    // Another workspace of the same directory, every file read: its own chain of parents, so
    // even the added, changed and removed counts must agree.
    let whole =
        SnapshotOptions { workspace: Some("w-whole".into()), use_stat_cache: false, ..SnapshotOptions::default() };
    plain.snapshot(&w, &whole).expect("first whole snapshot");
    let mut taken = 0;
    for seed in 1..=3u64 {
        let mut rng = Rng(0x5851_f42d_4c95_7f2d ^ seed);
        let mut done = Vec::new();
        for step in 0..40 {
            for _ in 0..=rng.below(3) {
                done.push(change(&mut rng, &w, &out));
            }
            let a = served.snapshot(&w, &watched).expect("watched snapshot");
            let b = plain.snapshot(&w, &whole).expect("whole snapshot");
            taken += 1;
            assert_eq!(a.root, b.root, "seed {seed} step {step} after: {done:#?}");
            assert_eq!(a.counts, b.counts, "seed {seed} step {step} after: {done:#?}");
            assert!(a.warnings.is_empty() && b.warnings.is_empty(), "{:?} {:?}", a.warnings, b.warnings);
        }
    }
    // The server's first snapshot walks the tree (the feed relies on one); every later one came
    // from the feed, whose first read is whole.
    assert_eq!(feeds.snapshots(), (taken - 1, 1));
    let (whole_reads, patched) = feeds.reads();
    assert!(whole_reads <= 2 && patched + whole_reads == taken - 1, "{whole_reads} whole, {patched} patched");
    let report = plain.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Over HTTP, a running session's snapshots come from the server's change feed (its log says
/// so), each the snapshot a whole read of the same state takes.
#[test]
fn a_session_snapshot_over_http_comes_from_the_feed() {
    let (s, log) = http::start_logging(&["--log-level", "debug"]);
    let ws = s.workspace("fed");
    for i in 0..30 {
        http::write(&ws.join(format!("src/d{}/f{i}.rs", i % 4)), format!("fn f{i}() {{}}\n").as_bytes());
    }
    let id = s.session(r#"{"workspace": "fed"}"#);
    let plain = Repo::open(&s.repo).expect("open the served repository");
    let whole =
        SnapshotOptions { workspace: Some("fed-whole".into()), use_stat_cache: false, ..SnapshotOptions::default() };
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let out = s.workspaces.join("../outside");
    fs::create_dir_all(&out).expect("outside");
    for step in 0..12 {
        let done = change(&mut rng, &ws, &out);
        let r = s.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
        assert_eq!(r.status, 201, "{}", r.text());
        let b = plain.snapshot(&ws, &whole).expect("whole snapshot");
        assert_eq!(r.json()["root"].as_str(), Some(b.root.to_string().as_str()), "step {step} after {done}");
        assert_eq!(r.json()["counts"]["files"], b.counts.files, "step {step} after {done}");
    }
    let logged = fs::read_to_string(&log).expect("log");
    let from_feed = logged.matches("snapshot taken from the change feed").count();
    assert!(from_feed >= 11, "{from_feed} of 12 snapshots came from the feed:\n{logged}");
}

/// A write the feed cannot see (through a hard link from outside the tree) is caught by the next
/// whole walk (a session's end walks), and the snapshots from the feed after that walk keep it:
/// the walk drops what the feed had kept, so the feed never patches the old content back.
#[test]
fn a_change_only_a_walk_sees_is_kept_by_the_snapshots_from_the_feed_after_it() {
    let (tmp, w, out) = seeded_tree();
    let outside = out.join("link");
    fs::hard_link(w.join("a/f.txt"), &outside).expect("hard link");
    let Handles { served, feeds, .. } = handles(&tmp.path().join("repo"), &w);
    let opts = |reason: &str| SnapshotOptions {
        workspace: Some("w".into()),
        reason: reason.into(),
        ..SnapshotOptions::default()
    };
    let content = |s: &trove::SnapshotInfo| served.lookup(s, b"a/f.txt").expect("entry").content;
    served.snapshot(&w, &opts("manual")).expect("walk");
    let before = served.snapshot(&w, &opts("manual")).expect("from the feed");
    fs::write(&outside, b"written through the link, unseen by inotify\n").expect("write through the link");
    let missed = served.snapshot(&w, &opts("manual")).expect("from the feed, which missed it");
    assert_eq!(content(&missed), content(&before), "inotify reports nothing for the other link");
    let walked = served.snapshot(&w, &opts("session_end")).expect("a session's end walks");
    assert_ne!(content(&walked), content(&before), "the walk saw the write");
    let after = served.snapshot(&w, &opts("manual")).expect("from the feed again");
    assert_eq!(content(&after), content(&walked), "the feed did not put the old content back");
    assert_eq!(feeds.snapshots(), (3, 2));
}

/// Hostile: while a served workspace's snapshots are taken from its feed, a directory of the
/// tree is swapped again and again for a symlink to a directory outside it (holding a file of
/// the same name), and a file for a symlink to a file outside it. No snapshot ever holds what
/// is outside: each has the directory or a symlink where the directory was, never the outside
/// file under it, and the outside content is never stored.
#[test]
fn swapping_directories_and_files_for_symlinks_out_of_the_tree_never_brings_outside_content_in() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (tmp, w, out) = seeded_tree();
    let secret = b"outside the tree: never to be stored\n";
    fs::write(out.join("f.txt"), secret).expect("outside file");
    let Handles { served, feeds, .. } = handles(&tmp.path().join("repo"), &w);
    let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    served.snapshot(&w, &opts).expect("the walk the feed starts from");
    let first = served.snapshot(&w, &opts).expect("the first from the feed");
    let original = served.lookup(&first, b"a/f.txt").expect("a/f.txt").content;

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, w, out) = (stop.clone(), w.clone(), out.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            // Each state held a different while (0 to 2 ms), so snapshots meet either, and
            // the moments between.
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            while !stop.load(Ordering::Relaxed) {
                fs::rename(w.join("a"), w.join("a.real")).expect("move a aside");
                std::os::unix::fs::symlink(&out, w.join("a")).expect("a -> outside");
                fs::rename(w.join("src/f.txt"), w.join("src/f.real")).expect("move f aside");
                std::os::unix::fs::symlink(out.join("f.txt"), w.join("src/f.txt")).expect("f -> outside");
                std::thread::sleep(Duration::from_micros(rng.below(2000) as u64));
                fs::remove_file(w.join("a")).expect("drop the link");
                fs::rename(w.join("a.real"), w.join("a")).expect("a back");
                fs::remove_file(w.join("src/f.txt")).expect("drop the link");
                fs::rename(w.join("src/f.real"), w.join("src/f.txt")).expect("f back");
                std::thread::sleep(Duration::from_micros(rng.below(2000) as u64));
                swaps += 1;
            }
            swaps
        })
    };
    let secret_id = trove::object::ObjectId::of(secret);
    for round in 0..60 {
        assert!(!swapper.is_finished(), "round {round}: the swapper stopped (it panicked?)");
        let snap = served.snapshot(&w, &opts).expect("a snapshot while the tree is swapped");
        for path in ["a/f.txt", "src/f.txt"] {
            if let Ok(e) = served.lookup(&snap, path.as_bytes()) {
                assert_ne!(e.content, Some(secret_id), "round {round}: {path} holds the outside file");
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 10, "only {swaps} swaps");
    // Back as it was: the tree's own files, and the outside content nowhere in the repository.
    let last = served.snapshot(&w, &opts).expect("snapshot");
    assert_eq!(served.lookup(&last, b"a/f.txt").expect("a/f.txt").content, original);
    assert!(served.content_bytes(&secret_id.to_hex()).is_err(), "the outside content was stored");
    assert!(feeds.snapshots().0 >= 30, "{:?}: the feed's path was not the one tested", feeds.snapshots());
    let report = served.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
