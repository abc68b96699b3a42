//! Fills a fleet's bucket for `benches/fleet_open.sh`: NODES nodes (`node-0`, ...) of the
//! repository `TROVE_REPO` (a bucket of a log per node, made by the script), each writing
//! SESSIONS sessions of SNAPSHOTS snapshots (the session's start and the rest taken after an
//! edit of its one file), the nodes in turn on threads of their own, each with its own cache
//! directory under `FLEET_CACHES`. Prints what it wrote and how long it took.
//!
//! Run by the script (`cargo bench --bench fleet`), with moto's AWS variables and
//! `TROVE_PASSWORD` set; alone it does nothing without `TROVE_REPO`.

use std::path::PathBuf;
use std::time::Instant;

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[allow(clippy::print_stdout, clippy::print_stderr)] // what it did, for the script's log
fn main() {
    let Ok(repo) = std::env::var("TROVE_REPO") else {
        eprintln!("fleet: TROVE_REPO is not set; run benches/fleet_open.sh");
        return;
    };
    let (nodes, sessions, snapshots) = (var("NODES", 10), var("SESSIONS", 100), var("SNAPSHOTS", 10));
    let caches = PathBuf::from(std::env::var("FLEET_CACHES").expect("FLEET_CACHES"));
    let started = Instant::now();
    let workers: Vec<_> = (0..nodes)
        .map(|n| {
            let (repo, caches) = (repo.clone(), caches.clone());
            std::thread::spawn(move || fill(&repo, &caches, n, sessions, snapshots))
        })
        .collect();
    for w in workers {
        w.join().expect("a node");
    }
    println!(
        "filled: {nodes} nodes x {sessions} sessions x {snapshots} snapshots in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Node `n`'s sessions and snapshots.
fn fill(repo: &str, caches: &std::path::Path, n: u64, sessions: u64, snapshots: u64) {
    let node = trove::NodeName::parse(&format!("node-{n}")).expect("a node name");
    let cache = caches.join(node.as_str());
    let r = trove::Repo::open_as(std::path::Path::new(repo), Some(&cache), None, Some(node.clone())).expect("open");
    for s in 0..sessions {
        let dir = cache.join("ws").join(format!("s{s}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("notes.txt"), format!("session {s} of {node}\n")).expect("write");
        let spec = trove::SessionSpec { workspace: Some(format!("w{s}")), persistent: true, ..Default::default() };
        let session = r.create_session(&spec, |_| Ok(dir.clone()), "bench").expect("a session");
        for k in 1..snapshots {
            std::fs::write(dir.join("notes.txt"), format!("session {s} of {node}, edit {k}\n")).expect("write");
            r.snapshot_session(&session, "manual", "bench").expect("a snapshot");
        }
    }
}
