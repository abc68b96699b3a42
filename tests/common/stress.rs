//! Issue 16's stress test, for a repository in a directory and in a bucket alike: snapshots,
//! tool writes and trash restores run beside forget and gc in a loop, each in a thread with its
//! own handle (in a bucket, its own host), and none of them loses anything.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use trove::{GcOptions, Repo, RestoreOptions, RetentionPolicy, SessionSpec, SnapshotOptions};

use super::{tree_state, EntryState};

/// How the workers run.
#[derive(Debug, Clone, Copy)]
pub struct Stress {
    /// The collections' grace period.
    pub grace: Duration,
    /// What each worker rests between its operations.
    pub pause: Duration,
    /// How long the workers run.
    pub run_for: Duration,
    /// Operations refused with `conflict` (a fence: in a bucket, an operation that outlived
    /// the grace period; nothing written) are run again, as their callers would, up to five
    /// times each; in a directory none is ever refused, and this stays false.
    pub retry_conflicts: bool,
    /// Whether the loop's fourth worker collects as well as forgets: false when another
    /// node of a fleet is the collector (forget changes a node's own records, so it stays).
    pub collects: bool,
}

/// Runs `op` again while it is refused with `conflict` and `retry` allows, up to five times.
#[allow(clippy::print_stderr)] // what was refused, in the test's output
fn again<T>(retry: bool, what: &str, mut op: impl FnMut() -> trove::Result<T>) -> T {
    let mut tries = 0;
    loop {
        match op() {
            Ok(v) => return v,
            Err(e) if retry && e.kind() == trove::ErrorKind::Conflict && !e.made_the_change() && tries < 5 => {
                eprintln!("{what} refused, run again: {e}");
                tries += 1;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn tool(retry: bool, repo: &Repo, s: &trove::Session, name: &str, params: Value) -> Value {
    again(retry, name, || {
        let call = trove::tools::ToolCall::parse(name, params.clone()).expect("parse");
        trove::tools::run(repo, s, call, "agent")
    })
    .to_json()
}

/// Runs the four workers in `tmp` as `how` says, each opening the repository with `open(its
/// name)`; then checks that every surviving snapshot restores what
/// its workspace held and every trash item left reads back. Returns (collections, rows
/// deleted).
#[allow(clippy::print_stderr)] // the figures of the run, with --nocapture
pub fn gc_in_a_loop<F>(tmp: &Path, open: F, how: Stress) -> (u64, u64)
where
    F: Fn(&str) -> Repo + Send + Sync + 'static,
{
    let Stress { grace, pause, run_for, retry_conflicts: retry, collects } = how;
    let open = Arc::new(open);
    let stop = Arc::new(AtomicBool::new(false));
    let snap = move |repo: &Repo, dir: &Path| {
        again(retry, "snapshot", || {
            repo.snapshot(dir, &SnapshotOptions { workspace: Some("a".into()), ..SnapshotOptions::default() })
        })
    };

    // Snapshots of a workspace only this thread changes, each with the state it must restore.
    let snapshotter = {
        let (open, stop, ws) = (open.clone(), stop.clone(), tmp.join("a"));
        std::thread::spawn(move || -> BTreeMap<String, Vec<EntryState>> {
            let repo = open("snapshots");
            repo.set_snapshot_retention("a", Some(RetentionPolicy { keep_last: Some(3), ..Default::default() }), "t")
                .expect("policy");
            let mut rng = trove::sample::Rng::new(1);
            let mut states = BTreeMap::new();
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pause);
                fs::create_dir_all(ws.join(format!("d{}", round % 4))).expect("mkdir");
                fs::write(
                    ws.join(format!("d{}/f{}.bin", round % 4, round % 7)),
                    rng.bytes(20_000 + (round % 5) as usize * 10_000),
                )
                .expect("write");
                fs::write(ws.join("counter.txt"), format!("{round}\n")).expect("write");
                if round % 9 == 8 {
                    let _ = fs::remove_dir_all(ws.join(format!("d{}", (round / 9) % 4)));
                }
                let s = snap(&repo, &ws);
                states.insert(s.id.to_string(), tree_state(&ws));
                round += 1;
            }
            states
        })
    };
    // Tool writes: read, then write with the sha256 just read, over and over.
    let writer = {
        let (open, stop, ws) = (open.clone(), stop.clone(), tmp.join("b"));
        std::thread::spawn(move || -> u64 {
            let repo = open("writes");
            fs::create_dir_all(&ws).expect("mkdir");
            let w = ws.clone();
            let spec = SessionSpec { workspace: Some("b".into()), persistent: true, ..SessionSpec::default() };
            let s = repo.create_session(&spec, move |_| Ok(w), "agent").expect("session");
            let mut rng = trove::sample::Rng::new(2);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pause);
                let path = format!("f{}.txt", n % 5);
                let content = String::from_utf8(trove::sample::text(&mut rng, 3_000)).expect("text");
                if ws.join(&path).exists() {
                    let sha = tool(retry, &repo, &s, "read_file", json!({"path": path}))["sha256"]
                        .as_str()
                        .expect("sha")
                        .to_string();
                    tool(
                        retry,
                        &repo,
                        &s,
                        "write_file",
                        json!({"path": path, "content": content, "expectedSha256": sha}),
                    );
                } else {
                    tool(retry, &repo, &s, "create_file", json!({"path": path, "content": content}));
                }
                assert_eq!(fs::read_to_string(ws.join(&path)).expect("read"), content);
                n += 1;
            }
            n
        })
    };
    // Delete into the trash and restore from it, checking the bytes that come back.
    let trasher = {
        let (open, stop, ws) = (open.clone(), stop.clone(), tmp.join("c"));
        std::thread::spawn(move || -> u64 {
            let repo = open("trash");
            fs::create_dir_all(&ws).expect("mkdir");
            let w = ws.clone();
            let spec = SessionSpec { workspace: Some("c".into()), persistent: true, ..SessionSpec::default() };
            let s = repo.create_session(&spec, move |_| Ok(w), "agent").expect("session");
            let mut rng = trove::sample::Rng::new(3);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pause);
                let path = format!("t{n}.bin");
                let bytes = rng.bytes(30_000);
                use base64::Engine;
                let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
                tool(retry, &repo, &s, "create_file", json!({"path": path, "content": b64, "encoding": "base64"}));
                let trash = tool(retry, &repo, &s, "delete_file", json!({"path": path}))["trashId"]
                    .as_str()
                    .expect("id")
                    .to_string();
                assert!(!ws.join(&path).exists());
                tool(retry, &repo, &s, "restore_file", json!({"trashId": trash}));
                assert_eq!(fs::read(ws.join(&path)).expect("restored"), bytes, "trash item {trash}");
                tool(retry, &repo, &s, "delete_file", json!({"path": path}));
                n += 1;
            }
            n
        })
    };
    // Forget and collect, in a loop.
    let collector = {
        let (open, stop) = (open.clone(), stop.clone());
        std::thread::spawn(move || -> (u64, u64) {
            let repo = open("gc");
            let (mut runs, mut deleted) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pause);
                again(retry, "forget", || repo.forget(None, false, "gc-loop"));
                if !collects {
                    continue;
                }
                let r = again(retry, "gc", || repo.gc(&GcOptions { grace, ..GcOptions::default() }));
                deleted += r.deleted.objects + r.deleted.trees + r.deleted.loose;
                runs += 1;
            }
            (runs, deleted)
        })
    };
    let started = Instant::now();
    while started.elapsed() < run_for {
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !snapshotter.is_finished() && !writer.is_finished() && !trasher.is_finished() && !collector.is_finished(),
            "a worker failed"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let states = snapshotter.join().expect("snapshots never failed");
    let writes = writer.join().expect("tool writes never failed");
    let restores = trasher.join().expect("trash restores never failed");
    let (runs, deleted) = collector.join().expect("gc never failed");
    eprintln!("{runs} collections deleted {deleted} rows beside {} snapshots, {writes} tool writes, {restores} trash restores", states.len());
    assert!((!collects || runs >= 5 && deleted > 0) && writes > 20 && restores > 20 && states.len() > 5);

    // Past the grace period, a last collection leaves nothing waiting. Past it by the store's
    // clock too, which a bucket reads to the second (an object's date) with an offset measured
    // the same way: two seconds more than the grace.
    let repo = open("last");
    if collects {
        std::thread::sleep(grace + Duration::from_secs(2));
        let r = repo.gc(&GcOptions { grace, ..GcOptions::default() }).expect("a last gc");
        assert_eq!(r.waiting, 0, "{r:?}");
    }
    let report = repo.check().expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // Every surviving snapshot restores exactly what its workspace held when it was taken.
    let survivors = repo.snapshots(Some("a")).expect("list");
    assert!(!survivors.is_empty());
    for (i, s) in survivors.iter().enumerate() {
        let expected = states.get(&s.id.to_string()).expect("a recorded state");
        let at = tmp.join(format!("check-{i}"));
        repo.restore(s, &at, &RestoreOptions::default()).expect("restore");
        assert_eq!(&tree_state(&at), expected, "snapshot {}", s.id);
    }
    // Every trash item left restores byte for byte (its content was checked when deleted).
    let items = repo.trash("c", None).expect("trash");
    assert!(!items.is_empty());
    for item in items.iter().take(20) {
        let bytes = repo.read_object(&item.object.expect("a file's object")).expect("reads");
        assert_eq!(bytes.len() as u64, item.size);
        assert_eq!(trove::testing::sha256_hex(&bytes), item.sha256.expect("sha").to_hex());
    }
    (runs, deleted)
}
