//! A fleet's failures against a real S3 server (moto's, started by the test), with a proxy
//! between a node and the server where a failure needs one: a node killed in the middle of
//! publishing a change, a node paused (SIGSTOP) and resumed while the others work, the store
//! unreachable in the middle of a run while changes wait, and listings that lag behind writes.
//! (Two processes claiming one node is in `fleet.rs`.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::s3::{as_node, fresh_bucket, ok, proxy, serve_on, server, trove_cmd, Action};
use serde_json::Value;

fn json(out: String) -> Value {
    serde_json::from_str(&out).expect("json")
}

/// The `edit_file` records in node `node`'s own audit log, read on that node.
fn edits(s3: std::net::SocketAddr, repo: &str, node: &str, cache: &std::path::Path) -> usize {
    let log = json(ok(as_node(s3, repo, node, cache, &["--json", "audit", "log", "--limit", "1000"]), "audit log"));
    log.as_array().expect("records").iter().filter(|r| r["operation"] == "edit_file").count()
}

/// A node killed after its change's segment reached the bucket, before it committed it: on its
/// next run it finds the change recorded, once; a review host that never opened the bucket sees
/// the change in the session's changes, and the node's published log verifies.
#[test]
fn a_node_killed_mid_publish_loses_nothing_and_records_its_change_once() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let (cache, review) = (tmp.path().join("cache-n1"), tmp.path().join("cache-review"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(ws.join("notes.txt"), "one\ntwo\n").expect("write");
    let w = ws.to_str().expect("utf-8");
    ok(as_node(s3.addr, &repo, "n1", &cache, &["init", "--layout", "nodes"]), "init");
    let made = ok(
        as_node(s3.addr, &repo, "n1", &cache, &["--json", "session", "create", "--dir", w, "--workspace", "w"]),
        "session",
    );
    let id = json(made)["id"].as_str().expect("id").to_owned();
    common::kill_edit_after_its_segment(
        &ws,
        |read| {
            ok(as_node(s3.addr, &repo, "n1", &cache, &["tool", "read_file", "--session", &id, read]), "read");
        },
        |call| trove_cmd(s3.addr, &repo, &cache, &["--node", "n1", "tool", "edit_file", "--session", &id, call]),
    );
    assert_eq!(edits(s3.addr, &repo, "n1", &cache), 1, "recorded once on the node that was killed");
    ok(as_node(s3.addr, &repo, "n1", &cache, &["check"]), "check: no plan left open");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), "one\nTWO\n");

    // The session ends; a review host sees its change, read from n1's log and packs.
    ok(as_node(s3.addr, &repo, "n1", &cache, &["session", "end", &id]), "end");
    let changes =
        json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "session", "changes", &id]), "changes"));
    assert_eq!(changes["stats"]["modified"], 1, "{changes}");
    assert!(changes.to_string().contains("notes.txt"), "{changes}");
    // And n1's log as published verifies with its key alone, the edit in it once.
    ok(as_node(s3.addr, &repo, "n1", &cache, &["audit", "checkpoint"]), "checkpoint");
    let key = ok(as_node(s3.addr, &repo, "n1", &cache, &["audit", "pubkey"]), "pubkey");
    let bare = tmp.path().join("bare");
    let report = json(ok(
        trove_cmd(s3.addr, &repo, &bare, &["--node", "n1", "--json", "audit", "verify", "--pubkey", key.trim()])
            .env_remove("TROVE_PASSWORD")
            .output()
            .expect("run"),
        "verify n1's published log",
    ));
    assert_eq!(report["problems"].as_array().map(Vec::len), Some(0), "{report}");
}

/// A node's server stopped (SIGSTOP) for longer than a review server's refresh while another
/// node writes, then resumed: it goes on writing its own log with no conflict, and the review
/// host shows what both wrote.
#[test]
fn a_node_paused_and_resumed_goes_on_and_the_review_host_sees_both_nodes() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    ok(as_node(s3.addr, &repo, "n1", &tmp.path().join("cache-init"), &["init", "--layout", "nodes"]), "init");
    let n1 = serve_on(s3.addr, &repo, &["--node", "n1"]);
    std::fs::create_dir_all(n1.workspace("w")).expect("ws");
    let id = n1.session(r#"{"workspace": "w"}"#);
    let create = |name: &str| {
        let body = serde_json::json!({ "path": name, "content": format!("{name}\n") }).to_string();
        n1.call("POST", &format!("/v1/sessions/{id}/tools/create_file"), &body)
    };
    assert_eq!(create("before.txt").json()["ok"], true);
    // A review host reads a live session of another node as of its newest snapshot.
    let snapshot = || {
        let r = n1.call("POST", &format!("/v1/sessions/{id}/snapshots"), "{}");
        assert!(r.status < 300, "{}", r.text());
    };
    snapshot();
    let review = serve_on(s3.addr, &repo, &["--node", "review"]);
    let changed = |name: &str| {
        let r = review.get(&format!("/v1/sessions/{id}/changes"));
        r.status == 200 && r.text().contains(name)
    };
    assert!(common::http::eventually(5, || changed("before.txt")), "n1's change shows");

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(n1.pid()).expect("pid"),
        rustix::process::Signal::STOP,
    )
    .expect("SIGSTOP");
    // Meanwhile node n2 writes, and the review host goes on answering.
    let wb = tmp.path().join("ws-b");
    common::rich_workspace(&wb);
    let cache_b = tmp.path().join("cache-n2");
    ok(as_node(s3.addr, &repo, "n2", &cache_b, &["snapshot", wb.to_str().expect("utf-8"), "--workspace", "b"]), "n2");
    let from_n2 = || {
        let r = review.get("/v1/snapshots");
        r.status == 200 && r.text().contains("\"n2\"")
    };
    assert!(common::http::eventually(5, from_n2), "n2's snapshot shows while n1 is stopped");
    std::thread::sleep(Duration::from_secs(4));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(n1.pid()).expect("pid"),
        rustix::process::Signal::CONT,
    )
    .expect("SIGCONT");

    let after = create("after.txt");
    assert_eq!(after.json()["ok"], true, "n1 writes on after its pause: {}", after.text());
    snapshot();
    assert!(common::http::eventually(5, || changed("after.txt")), "n1's change after the pause shows");
    let ended = n1.call("DELETE", &format!("/v1/sessions/{id}"), "");
    assert!(ended.status < 300, "{}", ended.text());
    drop(n1);
    ok(as_node(s3.addr, &repo, "n2", &cache_b, &["check", "--read-data"]), "n2's check");
}

/// The store unreachable for seconds (a proxy answering every request 503, as a store being
/// restarted does) while a node's agent writes. A write the store's absence stopped before it
/// changed the tree fails and changes nothing; one that reached the tree stays in the node's
/// journal (the work queued locally) and is recorded once the store is back, within a reaper
/// tick: every file in the tree is recorded, once, and a host reading the bucket sees them all.
#[test]
fn writes_while_the_store_is_down_are_refused_or_published_after_and_none_is_lost() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    ok(as_node(s3.addr, &repo, "n1", &tmp.path().join("cache-init"), &["init", "--layout", "nodes"]), "init");
    let down = Arc::new(AtomicBool::new(false));
    let switch = down.clone();
    let (via, seen) = proxy(
        s3.addr,
        Arc::new(move |_, _, _| if switch.load(Ordering::SeqCst) { Action::Unavailable } else { Action::Forward }),
    );
    let n1 = serve_on(via, &repo, &["--node", "n1"]);
    let ws = n1.workspace("w");
    std::fs::create_dir_all(&ws).expect("ws");
    let id = n1.session(r#"{"workspace": "w"}"#);
    let create = |name: &str| {
        let body = serde_json::json!({ "path": name, "content": format!("{name}\n") }).to_string();
        n1.call("POST", &format!("/v1/sessions/{id}/tools/create_file"), &body)
    };
    assert!(create("first.txt").json()["ok"] == true);

    down.store(true, Ordering::SeqCst);
    let names: Vec<String> = (0..6).map(|i| format!("during-{i}.txt")).collect();
    // A tool's answer is 200 with `ok: false` when the tool failed; acknowledged is `ok: true`.
    let acknowledged = |r: &common::http::Resp| r.status == 200 && r.json()["ok"] == true;
    let answers: Vec<bool> = names.iter().map(|n| acknowledged(&create(n))).collect();
    std::thread::sleep(Duration::from_secs(3));
    down.store(false, Ordering::SeqCst);
    let refused = seen.lock().expect("seen").iter().filter(|(.., a)| *a == Action::Unavailable).count();
    assert!(refused > 0, "the writes met the outage");
    assert!(answers.iter().all(|a| !a), "no write was acknowledged while the store was down: {answers:?}");
    assert!(acknowledged(&create("last.txt")), "writes go on once the store is back");

    // Every file in the tree gets its record, once, within a few reaper ticks.
    let in_tree = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&ws)
            .expect("ws")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".txt"))
            .collect();
        names.sort();
        names
    };
    let recorded = || -> Vec<String> {
        let r = n1.get("/v1/audit?operation=create_file&outcome=ok&limit=1000");
        assert_eq!(r.status, 200, "{}", r.text());
        let mut paths: Vec<String> = r.json()["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|e| e["path"].as_str().unwrap_or_default().to_owned())
            .collect();
        paths.sort();
        paths
    };
    assert!(
        common::http::eventually(30, || recorded() == in_tree()),
        "every file in the tree is recorded once: {:?} against {:?}",
        recorded(),
        in_tree()
    );
    let tree = in_tree();
    for name in &names {
        let present = tree.contains(name);
        assert!(!present || std::fs::read_to_string(ws.join(name)).expect("read") == format!("{name}\n"));
    }
    let ended = n1.call("DELETE", &format!("/v1/sessions/{id}"), "");
    assert!(ended.status < 300, "{}", ended.text());
    drop(n1);

    // A host reading the bucket directly sees every file the tree kept.
    let review = tmp.path().join("cache-review");
    let changes = ok(as_node(s3.addr, &repo, "review", &review, &["--json", "session", "changes", &id]), "changes");
    for name in &tree {
        assert!(changes.contains(name.as_str()), "{name} in {changes}");
    }
}

/// Listings that lag behind writes (a proxy leaving out of every listing, while the lag is
/// on, each key created through it): a new host opens and reads the newest snapshot (segments
/// are read by name, not listed), `check` finds nothing missing, `gc` deletes nothing a
/// snapshot needs; a node new to the fleet shows on a review server only once the listing
/// has it, and then within 5 s.
#[test]
fn listings_that_lag_behind_writes_lose_nothing_and_only_delay_a_new_node() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let lagging_now = Arc::new(AtomicBool::new(true));
    let on = lagging_now.clone();
    let (lagging, _) = proxy(
        s3.addr,
        Arc::new(move |_, method: &str, path: &str| {
            if on.load(Ordering::SeqCst) && method == "GET" && path.contains("list-type=2") {
                Action::Lag(Duration::from_secs(3600))
            } else {
                Action::Forward
            }
        }),
    );
    let cache = tmp.path().join("cache-n1");
    let ws = tmp.path().join("ws");
    common::rich_workspace(&ws);
    let w = ws.to_str().expect("utf-8");
    // Made straight on the server: the key file and config are listed from the start.
    ok(as_node(s3.addr, &repo, "n1", &cache, &["init", "--layout", "nodes"]), "init");
    let hidden_before = common::s3::HIDDEN.load(Ordering::SeqCst);
    ok(as_node(lagging, &repo, "n1", &cache, &["snapshot", w, "--workspace", "w"]), "snapshot");
    std::fs::write(ws.join("new.txt"), "just written").expect("write");
    ok(as_node(lagging, &repo, "n1", &cache, &["snapshot", w, "--workspace", "w"]), "snapshot again");
    // No listing shows what these snapshots wrote.
    ok(as_node(lagging, &repo, "n1", &cache, &["check", "--read-data"]), "check");
    ok(as_node(lagging, &repo, "n1", &cache, &["gc", "--grace", "0s"]), "gc");
    ok(as_node(lagging, &repo, "n1", &cache, &["gc", "--grace", "0s"]), "gc again");
    let fresh = tmp.path().join("cache-fresh");
    let out = tmp.path().join("restored");
    ok(
        as_node(lagging, &repo, "n1", &fresh, &["restore", "latest", "--to", out.to_str().expect("utf-8")]),
        "a new host of n1 restores the newest snapshot",
    );
    assert_eq!(common::tree_state(&out), common::tree_state(&ws));
    assert!(common::s3::HIDDEN.load(Ordering::SeqCst) > hidden_before, "listings left keys out");

    // A review server behind the lagging listing: a node new to the fleet is not listed while
    // the lag lasts, and shows within 5 s once it is.
    let review = serve_on(lagging, &repo, &["--node", "review"]);
    let wb = tmp.path().join("ws-b");
    common::rich_workspace(&wb);
    ok(
        as_node(
            lagging,
            &repo,
            "n2",
            &tmp.path().join("cache-n2"),
            &["snapshot", wb.to_str().expect("utf-8"), "--workspace", "b"],
        ),
        "n2",
    );
    let from_n2 = || {
        let r = review.get("/v1/snapshots");
        r.status == 200 && r.text().contains("\"n2\"")
    };
    assert!(!from_n2(), "n2 is not listed under fleet/ yet");
    lagging_now.store(false, Ordering::SeqCst);
    assert!(common::http::eventually(5, from_n2), "n2 shows within 5 s once listed");
    ok(as_node(lagging, &repo, "n1", &cache, &["check", "--read-data"]), "check after");
}

/// Several handles of one node opening a cache directory that has no replica yet, all at once
/// (a server and commands started together on a new host): each opens, none finds the replica
/// half made and takes it for damage, and all of them write.
#[test]
fn handles_opening_a_new_cache_directory_at_once_all_open_and_write() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    ok(as_node(s3.addr, &repo, "n1", &tmp.path().join("cache-init"), &["init", "--layout", "nodes"]), "init");
    let cache = tmp.path().join("cache-new");
    let opened: Vec<_> = (0..6)
        .map(|i| {
            let (bucket, cache, ws) = (bucket.clone(), cache.clone(), tmp.path().join(format!("ws-{i}")));
            std::thread::spawn(move || {
                let access = common::s3::node_access(s3.addr, &cache, "n1");
                let repo = trove::Repo::open_bucket(&bucket, "fleet", &access).expect("open");
                common::rich_workspace(&ws);
                let opts = trove::SnapshotOptions { workspace: Some(format!("w{i}")), ..Default::default() };
                repo.snapshot(&ws, &opts).expect("snapshot");
            })
        })
        .collect();
    for h in opened {
        h.join().expect("a handle opened and wrote");
    }
    let listed = json(ok(as_node(s3.addr, &repo, "n1", &cache, &["--json", "snapshots"]), "snapshots"));
    assert_eq!(listed.as_array().map(Vec::len), Some(6), "{listed}");
}
