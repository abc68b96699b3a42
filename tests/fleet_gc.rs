//! A fleet's collection against a real S3 server (moto's, started by the test): a node that
//! writes nothing collects every node's log, one collector at a time across the bucket; a
//! writer's lease in the bucket holds it back; a writer paused past its lease (SIGSTOP) is
//! refused by its fence when it resumes, instead of naming what the collector deleted, and
//! succeeds when run again. (The minute under load is `fleet_gc_stress.rs`.)

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::s3::{fresh_bucket, ok, server, trove_cmd};
use serde_json::Value;

/// How long a lease holds in these tests (`TROVE_FLEET_LEASE_SECS`).
const LEASE_SECS: u64 = 6;

fn json(out: String) -> Value {
    serde_json::from_str(&out).expect("json")
}

/// `trove --node NODE ARGS` on the fleet `repo`, with the tests' lease time.
fn node_cmd(s3: std::net::SocketAddr, repo: &str, node: &str, cache: &Path, args: &[&str]) -> Command {
    let mut all = vec!["--node", node];
    all.extend_from_slice(args);
    let mut c = trove_cmd(s3, repo, cache, &all);
    c.env("TROVE_FLEET_LEASE_SECS", LEASE_SECS.to_string());
    c
}

fn run(s3: std::net::SocketAddr, repo: &str, node: &str, cache: &Path, args: &[&str]) -> String {
    let out = node_cmd(s3, repo, node, cache, args).output().expect("run trove");
    ok(out, &format!("{node}: {args:?}"))
}

/// Starts `cmd` stopping itself (SIGSTOP) at failpoint `point`; returns once it has stopped.
#[allow(clippy::zombie_processes)] // the child is returned, and its caller waits for it
fn stopped_at(mut cmd: Command, point: &str) -> Child {
    cmd.env("TROVE_FAILPOINT_STOP", point).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let stat = format!("/proc/{}/stat", child.id());
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        // The state is the field after the command's name, which ends with the last ')'.
        let state =
            std::fs::read_to_string(&stat).ok().and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_owned()));
        if state.as_deref().is_some_and(|s| s.starts_with('T')) {
            return child;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!("{point} was never reached: {}", common::stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn resume(child: Child) -> std::process::Output {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).expect("SIGCONT");
    child.wait_with_output().expect("wait")
}

/// A node's collection in the report of a fleet's.
fn node_report<'a>(report: &'a Value, node: &str) -> &'a Value {
    let nodes = report["nodes"].as_array().expect("nodes");
    &nodes.iter().find(|n| n["node"] == node).unwrap_or_else(|| panic!("{node} collected: {report}"))["report"]
}

fn deleted(r: &Value) -> u64 {
    ["objects", "loose", "trees", "chunkLists"].iter().map(|k| r["deleted"][k].as_u64().unwrap_or(0)).sum()
}

/// Gives workspace `w` of `node` a snapshot that nothing keeps: two snapshots under a policy
/// of one, then `forget`.
fn garbage(s3: std::net::SocketAddr, repo: &str, node: &str, cache: &Path, ws: &Path, seed: u64) {
    let w = ws.to_str().expect("utf-8");
    let mut rng = trove::sample::Rng::new(seed);
    std::fs::create_dir_all(ws).expect("ws");
    std::fs::write(ws.join("big.bin"), rng.bytes(300_000)).expect("write");
    run(s3, repo, node, cache, &["snapshot", w, "--workspace", "w"]);
    run(s3, repo, node, cache, &["workspace", "retention", "w", "--keep-last", "1"]);
    std::fs::write(ws.join("big.bin"), rng.bytes(300_000)).expect("write");
    run(s3, repo, node, cache, &["snapshot", w, "--workspace", "w"]);
    run(s3, repo, node, cache, &["forget"]);
}

/// n1 and n2 each forget a snapshot; n3, which writes nothing of its own, collects them both.
/// While its collection is stopped, a collection from n2 is refused, naming n3; resumed, n3's
/// deletes what each node forgot, its segments in their logs, and records it in its own log.
/// n1 and n2 then write on (a collector's segment is no rival), and read every byte clean; an
/// index repair on n1 takes the fleet's run and gives it back.
#[test]
fn a_node_that_writes_nothing_collects_every_node_one_collector_at_a_time() {
    let s3 = server();
    let repo = format!("s3://{}/fleet", fresh_bucket(s3.addr));
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    run(s3.addr, &repo, "n1", &cache("n1"), &["init", "--layout", "nodes"]);
    for (k, node) in ["n1", "n2"].into_iter().enumerate() {
        garbage(s3.addr, &repo, node, &cache(node), &tmp.path().join(format!("ws-{node}")), k as u64);
    }

    let n3 = stopped_at(node_cmd(s3.addr, &repo, "n3", &cache("n3"), &["--json", "gc", "--grace", "0s"]), "gc:marked");
    let refused = node_cmd(s3.addr, &repo, "n2", &cache("n2"), &["gc", "--grace", "0s"]).output().expect("run");
    assert_eq!(refused.status.code(), Some(1), "conflict: {}", common::stderr(&refused));
    assert!(common::stderr(&refused).contains("node n3 began collecting the fleet"), "{}", common::stderr(&refused));
    let report = json(ok(resume(n3), "n3's collection"));
    for node in ["n1", "n2"] {
        let r = node_report(&report, node);
        assert!(deleted(r) > 0, "{node}: {r}");
        assert!(r["packsDeleted"].as_u64() > Some(0), "{node}: {r}");
    }
    assert_eq!(report["waiting"], 0, "{report}");

    // The writers write on, restore, and read every byte clean.
    for node in ["n1", "n2"] {
        let ws = tmp.path().join(format!("ws-{node}"));
        std::fs::write(ws.join("more.txt"), "after the collection\n").expect("write");
        run(s3.addr, &repo, node, &cache(node), &["snapshot", ws.to_str().expect("utf-8"), "--workspace", "w"]);
        let out = tmp.path().join(format!("restored-{node}"));
        run(
            s3.addr,
            &repo,
            node,
            &cache(node),
            &["restore", "latest", "--to", out.to_str().expect("utf-8"), "--workspace", "w"],
        );
        assert_eq!(std::fs::read(out.join("big.bin")).expect("read"), std::fs::read(ws.join("big.bin")).expect("read"));
        run(s3.addr, &repo, node, &cache(node), &["check", "--read-data"]);
    }
    // What n3 did is in n3's log, naming each node; n1's own log has no collection of n3's.
    let log = json(run(s3.addr, &repo, "n3", &cache("n3"), &["--json", "audit", "log", "--of", "n3"]));
    let named: Vec<&str> = log
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["operation"] == "gc")
        .filter_map(|r| r["details"]["node"].as_str())
        .collect();
    assert!(named.contains(&"n1") && named.contains(&"n2"), "{log}");
    let n1_log = json(run(s3.addr, &repo, "n1", &cache("n1"), &["--json", "audit", "log", "--of", "n1"]));
    assert!(!n1_log.as_array().expect("records").iter().any(|r| r["operation"] == "gc"), "{n1_log}");
    // An index repair on a node holds the fleet's run while it works, and lets it go after.
    let bucket = repo.trim_start_matches("s3://").trim_end_matches("/fleet");
    let n1 = trove::Repo::open_bucket(bucket, "fleet", &common::s3::node_access(s3.addr, &cache("n1"), "n1"))
        .expect("open n1");
    n1.repair_index("test").expect("an index repair");
    drop(n1);
    run(s3.addr, &repo, "n3", &cache("n3"), &["gc", "--grace", "0s"]);
    run(s3.addr, &repo, "n1", &cache("n1"), &["check", "--read-data"]);
}

/// A snapshot on n1 stopped (SIGSTOP) after it found a forgotten file's content stored: while
/// its lease holds, n3's collection keeps that content (condemned, waiting); once the lease is
/// past its time, n3's next collection deletes it. Resumed, the snapshot is refused by its
/// fence (nothing recorded naming the deleted pack); run again, it stores the content anew, and
/// it restores byte for byte.
#[test]
fn a_writer_paused_past_its_lease_is_refused_and_succeeds_when_run_again() {
    let s3 = server();
    let repo = format!("s3://{}/fleet", fresh_bucket(s3.addr));
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    let ws = tmp.path().join("ws");
    let w = ws.to_str().expect("utf-8");
    run(s3.addr, &repo, "n1", &cache("n1"), &["init", "--layout", "nodes"]);
    garbage(s3.addr, &repo, "n1", &cache("n1"), &ws, 7);
    // The forgotten snapshot's content, back in the tree.
    let first = trove::sample::Rng::new(7).bytes(300_000);
    std::fs::write(ws.join("big.bin"), &first).expect("write");

    let snap = stopped_at(
        node_cmd(s3.addr, &repo, "n1", &cache("n1"), &["snapshot", w, "--workspace", "w"]),
        "snapshot:packed",
    );
    let held = json(run(s3.addr, &repo, "n3", &cache("n3"), &["--json", "gc", "--grace", "0s"]));
    let n1 = node_report(&held, "n1");
    assert!(n1["inFlight"].as_u64() >= Some(1), "the paused snapshot's lease: {n1}");
    assert!(n1["waiting"].as_u64() > Some(0), "kept for it: {n1}");

    std::thread::sleep(Duration::from_secs(LEASE_SECS + 2));
    let swept = json(run(s3.addr, &repo, "n3", &cache("n3"), &["--json", "gc", "--grace", "0s"]));
    let n1 = node_report(&swept, "n1");
    assert_eq!(n1["inFlight"], 0, "{n1}");
    assert!(n1["packsDeleted"].as_u64() > Some(0), "{n1}");

    let resumed = resume(snap);
    assert_eq!(resumed.status.code(), Some(1), "refused: {}", common::stderr(&resumed));
    assert!(common::stderr(&resumed).contains("recorded a sweep"), "{}", common::stderr(&resumed));
    run(s3.addr, &repo, "n1", &cache("n1"), &["snapshot", w, "--workspace", "w"]);
    let out = tmp.path().join("restored");
    run(
        s3.addr,
        &repo,
        "n1",
        &cache("n1"),
        &["restore", "latest", "--to", out.to_str().expect("utf-8"), "--workspace", "w"],
    );
    assert_eq!(std::fs::read(out.join("big.bin")).expect("read"), first);
    run(s3.addr, &repo, "n1", &cache("n1"), &["check", "--read-data"]);
}
