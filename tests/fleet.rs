//! A fleet on one bucket (`init --layout nodes`), against a real S3 server (moto's, started by
//! the test): nodes writing at once each into their own log and never the same key, a review
//! host with an empty cache seeing every node's snapshots, sessions and trash, a second process
//! claiming a node refused on its next create, and a node that lost its disk resuming its log.

mod common;

use common::s3::{as_node, fresh_bucket, ok, serve_on, server, settings};
use serde_json::Value;
use trove::object::{Backend, S3Backend};

fn json(out: String) -> Value {
    serde_json::from_str(&out).expect("json")
}

/// What one node does: two snapshots of its own workspace, and a session whose agent deletes a
/// file through the tools (a trash item).
fn work(s3: std::net::SocketAddr, repo: &str, node: &str, cache: &std::path::Path, dir: &std::path::Path) -> String {
    let d = dir.to_str().expect("utf-8");
    common::rich_workspace(dir);
    std::fs::write(dir.join("gone.txt"), format!("deleted on {node}")).expect("write");
    ok(as_node(s3, repo, node, cache, &["snapshot", d, "--workspace", node]), "snapshot");
    let made = ok(
        as_node(s3, repo, node, cache, &["--json", "session", "create", "--dir", d, "--workspace", node]),
        "session",
    );
    let id = json(made)["id"].as_str().expect("id").to_owned();
    let call = serde_json::json!({ "path": "gone.txt" }).to_string();
    let out = ok(as_node(s3, repo, node, cache, &["tool", "delete_file", "--session", &id, &call]), "delete_file");
    assert!(out.contains("\"ok\": true"), "{out}");
    std::fs::write(dir.join("new.txt"), node).expect("write");
    ok(as_node(s3, repo, node, cache, &["snapshot", d, "--workspace", node]), "snapshot again");
    id
}

/// Node a (`cache-node-a` under `tmp`) does [`work`] in `ws` and its agent deletes `run.sh` too;
/// returns the ids of its two trash items (`gone.txt`, `run.sh`) as node `reader` lists them.
fn two_deleted_on_a(
    s3: std::net::SocketAddr,
    repo: &str,
    tmp: &std::path::Path,
    ws: &std::path::Path,
    reader: &str,
) -> (String, String) {
    let cache = |n: &str| tmp.join(format!("cache-{n}"));
    ok(as_node(s3, repo, "node-a", &cache("node-a"), &["init", "--layout", "nodes"]), "init");
    let session = work(s3, repo, "node-a", &cache("node-a"), ws);
    let call = serde_json::json!({ "path": "run.sh" }).to_string();
    ok(as_node(s3, repo, "node-a", &cache("node-a"), &["tool", "delete_file", "--session", &session, &call]), "delete");
    let listed = json(ok(as_node(s3, repo, reader, &cache(reader), &["--json", "trash", "ls"]), "trash ls"));
    let id_of = |path: &str| {
        listed["items"].as_array().expect("items").iter().find(|t| t["path"] == path).expect("listed")["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    (id_of("gone.txt"), id_of("run.sh"))
}

/// Two nodes write one bucket at the same time, each only under `nodes/<its name>/`; a review
/// host that never opened the repository lists every node's snapshots, sessions and trash
/// items, each with its node, reads them by id, and restores another node's snapshot byte for
/// byte, recorded in its own log.
#[test]
fn nodes_write_their_own_logs_at_once_and_a_review_host_sees_every_node() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    ok(as_node(s3.addr, &repo, "node-a", &cache("a"), &["init", "--layout", "nodes"]), "init");

    let workers: Vec<_> = ["node-a", "node-b"]
        .into_iter()
        .map(|node| {
            let (repo, cache, dir) = (repo.clone(), cache(node), tmp.path().join(format!("ws-{node}")));
            std::thread::spawn(move || (node, work(s3.addr, &repo, node, &cache, &dir)))
        })
        .collect();
    let sessions: Vec<(&str, String)> = workers.into_iter().map(|w| w.join().expect("a node")).collect();

    // No two nodes wrote one key: every segment is under its node's own prefix.
    let raw = S3Backend::open(&bucket, "fleet", &settings(s3.addr)).expect("open");
    let keys = raw.list("").expect("list");
    assert!(!keys.iter().any(|k| k.starts_with("log/")), "no shared log: {keys:?}");
    assert!(!keys.iter().any(|k| k.starts_with("packs/")), "every pack is a node's own: {keys:?}");
    for node in ["node-a", "node-b"] {
        assert!(keys.iter().any(|k| k.starts_with(&format!("nodes/{node}/packs/"))), "{node}'s packs: {keys:?}");
        let own = keys.iter().filter(|k| k.starts_with(&format!("nodes/{node}/log/"))).count();
        assert!(own >= 4, "{node} wrote {own} segments: {keys:?}");
        assert!(keys.contains(&format!("fleet/{node}")), "{node} is named: {keys:?}");
    }

    // A review host with an empty cache sees both nodes.
    let review = cache("review");
    let snaps = json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "snapshots"]), "snapshots"));
    let snaps = snaps.as_array().expect("list");
    for node in ["node-a", "node-b"] {
        let theirs: Vec<_> = snaps.iter().filter(|s| s["node"] == node).collect();
        assert_eq!(theirs.len(), 3, "{node}'s snapshots (the session's start is one): {snaps:?}");
        assert!(theirs.iter().all(|s| s["workspace"] == node), "{theirs:?}");
    }
    let listed =
        json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "session", "list", "--all"]), "sessions"));
    for (node, id) in &sessions {
        let found = listed.as_array().expect("list").iter().find(|s| s["id"] == id.as_str()).expect("listed");
        assert_eq!(found["node"], *node, "{found}");
    }
    let trash = json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "trash", "ls"]), "trash ls"));
    let items = trash["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{trash}");
    for node in ["node-a", "node-b"] {
        assert!(items.iter().any(|t| t["node"] == node && t["path"] == "gone.txt"), "{node}: {trash}");
    }
    // A host that only read is no node of the fleet.
    assert!(!raw.list("").expect("list").iter().any(|k| k.contains("review")), "the review host wrote nothing");
    // The review host reads any node's snapshot, session and trash item by its id, and
    // restores another node's snapshot byte for byte: an act recorded in its own log (it is
    // a node from then on), naming the node it read.
    let b_snaps: Vec<&Value> = snaps.iter().filter(|s| s["node"] == "node-b").collect();
    let (b_first, b_last) = (b_snaps[0]["id"].as_str().expect("id"), b_snaps[2]["id"].as_str().expect("id"));
    let shown = ok(as_node(s3.addr, &repo, "review", &review, &["cat", b_last, "new.txt"]), "cat");
    assert_eq!(shown, "node-b");
    let diff = json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "diff", b_first, b_last]), "diff"));
    let changed: Vec<&str> =
        diff["entries"].as_array().expect("entries").iter().map(|e| e["path"].as_str().expect("path")).collect();
    assert!(changed.contains(&"new.txt") && changed.contains(&"gone.txt"), "{diff}");
    let (a_node, a_session) = sessions.iter().find(|(n, _)| *n == "node-a").expect("a's session");
    let changes =
        ok(as_node(s3.addr, &repo, "review", &review, &["--json", "session", "changes", a_session]), "changes");
    assert!(changes.contains("gone.txt"), "{a_node}'s session: {changes}");
    let item = items.iter().find(|t| t["node"] == "node-b").expect("b's item")["id"].as_str().expect("id").to_owned();
    let shown = json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "trash", "show", &item]), "trash show"));
    assert_eq!((&shown["path"], &shown["node"]), (&Value::from("gone.txt"), &Value::from("node-b")), "{shown}");
    let text = ok(as_node(s3.addr, &repo, "review", &review, &["trash", "show", &item]), "trash show");
    assert!(text.contains("on node node-b"), "{text}");
    let session =
        json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "session", "show", a_session]), "show"));
    assert_eq!(session["node"], "node-a", "{session}");
    // Another node's deleted file, got back from the review host as an archive.
    let tar = tmp.path().join("b-trash.tar");
    ok(
        as_node(
            s3.addr,
            &repo,
            "review",
            &review,
            &["trash", "export", &item, "--output", tar.to_str().expect("utf-8")],
        ),
        "trash export",
    );
    let archive = std::fs::read(&tar).expect("the archive");
    assert!(archive.windows(14).any(|w| w == b"deleted on nod"), "the archive holds b's deleted file");
    // Or copied out into a directory of the review host: recorded in its own log, naming the
    // node; the item stays in b's trash; a second copy over it is refused and changes nothing.
    let copied = tmp.path().join("copied-b");
    let copy = |dir: &std::path::Path| {
        as_node(
            s3.addr,
            &repo,
            "review",
            &review,
            &["--json", "trash", "restore", &item, "--into", dir.to_str().expect("utf-8")],
        )
    };
    let done = json(ok(copy(&copied), "trash restore --into"));
    assert_eq!((&done[0]["node"], &done[0]["path"]), (&Value::from("node-b"), &Value::from("gone.txt")), "{done}");
    assert_eq!(std::fs::read_to_string(copied.join("gone.txt")).expect("copied"), "deleted on node-b");
    let refused = copy(&copied);
    assert_eq!(refused.status.code(), Some(1), "{}", common::stderr(&refused));
    assert!(common::stderr(&refused).contains("already in"), "{}", common::stderr(&refused));
    assert_eq!(std::fs::read_dir(&copied).expect("dir").count(), 1, "nothing more written");
    let still =
        json(ok(as_node(s3.addr, &repo, "node-b", &cache("node-b"), &["--json", "trash", "show", &item]), "show"));
    assert!(still["restoredAt"].is_null(), "still in b's trash: {still}");
    let out = tmp.path().join("restored-b");
    ok(
        as_node(s3.addr, &repo, "review", &review, &["restore", b_last, "--to", out.to_str().expect("utf-8")]),
        "restore",
    );
    assert_eq!(common::tree_state(&out), common::tree_state(&tmp.path().join("ws-node-b")));
    let log = json(ok(
        as_node(s3.addr, &repo, "review", &review, &["--json", "audit", "log", "--limit", "1000"]),
        "audit log",
    ));
    let restore = log.as_array().expect("records").iter().find(|r| r["operation"] == "restore").expect("recorded");
    assert_eq!(restore["details"]["node"], "node-b", "{restore}");
    assert_eq!(restore["details"]["snapshot"], b_last, "{restore}");
    let copy_record =
        log.as_array().expect("records").iter().find(|r| r["operation"] == "trash_restore").expect("recorded");
    assert_eq!(
        (&copy_record["node"], &copy_record["details"]["node"]),
        (&Value::from("review"), &Value::from("node-b"))
    );
    assert!(raw.list("fleet/").expect("list").contains(&"fleet/review".to_owned()), "the review host acted: a node");
    // Audit queries span the fleet: every node's records, each naming its node, merged by time;
    // one node's alone with --of; a seq cursor is one node's, so it needs --of.
    let records = log.as_array().expect("records");
    for node in ["node-a", "node-b", "review"] {
        assert!(records.iter().any(|r| r["node"] == node), "{node}'s records: {log}");
    }
    let deletes: Vec<&Value> = records.iter().filter(|r| r["operation"] == "delete_file").collect();
    assert_eq!(deletes.len(), 2, "each node's agent deleted one file: {deletes:?}");
    let times: Vec<&str> = records.iter().map(|r| r["time"].as_str().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "merged oldest first: {times:?}");
    let of_b =
        json(ok(as_node(s3.addr, &repo, "review", &review, &["--json", "audit", "log", "--of", "node-b"]), "--of"));
    let of_b = of_b.as_array().expect("records");
    assert!(!of_b.is_empty() && of_b.iter().all(|r| r["node"] == "node-b"), "{of_b:?}");
    let table = ok(as_node(s3.addr, &repo, "review", &review, &["audit", "log", "--of", "node-b"]), "table");
    assert!(table.contains("node-b/1 "), "a seq shown with its node: {table}");
    let cursor = as_node(s3.addr, &repo, "review", &review, &["audit", "log", "--after", "1"]);
    assert_eq!(cursor.status.code(), Some(2), "{}", common::stderr(&cursor));
    assert!(common::stderr(&cursor).contains("--of NODE"), "{}", common::stderr(&cursor));
    // A collection from node a, which collects every node's log, deletes nothing any node's
    // records name: b's snapshots all still restore, its trash item still copies out, and its
    // check reads every byte clean.
    for _ in 0..2 {
        ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["gc", "--grace", "0s"]), "gc on a");
    }
    ok(as_node(s3.addr, &repo, "node-b", &cache("node-b"), &["check", "--read-data"]), "check on b");
    ok(copy(&tmp.path().join("copied-b-again")), "trash restore --into after the collections");
    ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["check", "--read-data"]), "check on a");
    let again = tmp.path().join("restored-b-again");
    ok(
        as_node(
            s3.addr,
            &repo,
            "node-b",
            &cache("node-b"),
            &["restore", b_first, "--to", again.to_str().expect("utf-8")],
        ),
        "restore on b",
    );
    // Each node still sees its own and the other's; the text table names the node.
    let table = ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["snapshots"]), "snapshots on a");
    assert!(table.contains("node-b") && table.contains("NODE"), "{table}");
}

/// A host purges another node's trash items: each purge is recorded in the acting host's own
/// log, naming the node, and the items leave that node's trash, which its own node sees and
/// writes on after. Killed between its record and the deletion, the purge is finished by the
/// acting host's next open; the content is then collected, and the node reads every byte clean.
#[test]
fn another_nodes_trash_items_are_purged_from_any_host_and_a_killed_purge_is_finished() {
    let s3 = server();
    let repo = format!("s3://{}/fleet", fresh_bucket(s3.addr));
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    let ws = tmp.path().join("ws-a");
    let (gone, run) = two_deleted_on_a(s3.addr, &repo, tmp.path(), &ws, "review");

    // Killed after its record, before the deletion: the next open finishes it.
    let killed =
        common::s3::trove_cmd(s3.addr, &repo, &cache("review"), &["--node", "review", "trash", "purge", &gone])
            .env("TROVE_FAILPOINT", "trash:purge-recorded")
            .output()
            .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(6), "aborted at the failpoint: {}", common::stderr(&killed));
    let after = ok(as_node(s3.addr, &repo, "review", &cache("review"), &["--json", "trash", "ls"]), "trash ls");
    assert!(!after.contains(&gone), "finished by the next open: {after}");
    // And a purge that runs to its end.
    let done = json(ok(
        as_node(s3.addr, &repo, "review", &cache("review"), &["--json", "trash", "purge", &run, &run]),
        "purge",
    ));
    assert_eq!(done["purged"], 1, "{done}");
    // Both recorded once, in the review host's log, naming node-a; node-a's trash has neither.
    let log = json(ok(
        as_node(s3.addr, &repo, "review", &cache("review"), &["--json", "audit", "log", "--of", "review"]),
        "audit log",
    ));
    let purges: Vec<&Value> =
        log.as_array().expect("records").iter().filter(|r| r["operation"] == "trash_purge").collect();
    assert_eq!(purges.len(), 2, "{log}");
    assert!(purges.iter().all(|r| r["details"]["node"] == "node-a"), "{log}");
    let mine = ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["--json", "trash", "ls"]), "a's trash");
    assert!(!mine.contains(&gone) && !mine.contains(&run), "{mine}");
    // node-a writes on after the purger's segments, and its content is collected clean.
    std::fs::write(ws.join("later.txt"), "after the purge").expect("write");
    let w = ws.to_str().expect("utf-8");
    ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["snapshot", w, "--workspace", "node-a"]), "snapshot");
    for _ in 0..2 {
        ok(as_node(s3.addr, &repo, "review", &cache("review"), &["gc", "--grace", "0s"]), "gc");
    }
    ok(as_node(s3.addr, &repo, "node-a", &cache("node-a"), &["check", "--read-data"]), "check");
    // The review host's own records name node-a's content only in their details.
    ok(as_node(s3.addr, &repo, "review", &cache("review"), &["check", "--read-data"]), "check on the review host");
}

/// A host restores another node's trash items into a workspace of its own: each restore is
/// recorded in the host's own log, naming the node, with the content copied into the host's
/// store, and the item is marked restored in its node's trash. Killed between its records and
/// the marking, the restore is finished by the host's next open; both nodes then collect and
/// read every byte clean.
#[test]
fn another_nodes_trash_items_are_restored_into_this_nodes_workspace_and_a_killed_restore_is_finished() {
    let s3 = server();
    let repo = format!("s3://{}/fleet", fresh_bucket(s3.addr));
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    let ws = tmp.path().join("ws-a");
    let wb = tmp.path().join("ws-b");
    std::fs::create_dir_all(&wb).expect("mkdir");
    std::fs::write(wb.join("keep.txt"), "node-b's own").expect("write");
    let b = |args: &[&str]| as_node(s3.addr, &repo, "node-b", &cache("node-b"), args);
    let (gone, run) = two_deleted_on_a(s3.addr, &repo, tmp.path(), &ws, "node-b");
    ok(b(&["snapshot", wb.to_str().expect("utf-8"), "--workspace", "node-b"]), "b's workspace");

    // Its own workspace is node-a's: node-b has none of that name, and is told what to do.
    let refused = b(&["trash", "restore", &gone]);
    assert_eq!(refused.status.code(), Some(1), "{}", common::stderr(&refused));
    let said = common::stdout(&refused);
    assert!(said.contains("node node-a's") && said.contains("--workspace W") && said.contains("--into"), "{said}");
    assert!(!wb.join("gone.txt").exists());

    // Killed after its records, before the marking: the file is back, and the next open marks it.
    let killed = common::s3::trove_cmd(
        s3.addr,
        &repo,
        &cache("node-b"),
        &["--node", "node-b", "trash", "restore", &gone, "--workspace", "node-b"],
    )
    .env("TROVE_FAILPOINT", "trash:restore-recorded")
    .output()
    .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(6), "aborted at the failpoint: {}", common::stderr(&killed));
    assert_eq!(std::fs::read_to_string(wb.join("gone.txt")).expect("restored"), "deleted on node-a");
    ok(b(&["trash", "ls"]), "an open of node-b");
    let a = |args: &[&str]| as_node(s3.addr, &repo, "node-a", &cache("node-a"), args);
    let shown = json(ok(a(&["--json", "trash", "show", &gone]), "show on a"));
    assert!(shown["restoredAt"].is_string(), "marked restored by the next open: {shown}");

    // And a restore that runs to its end, with an id no node holds reported beside it.
    let done = b(&["--json", "trash", "restore", &run, "trash_0123456789abcdef", "--workspace", "node-b"]);
    assert_eq!(done.status.code(), Some(1), "one refused: {}", common::stderr(&done));
    let done = json(common::stdout(&done));
    assert_eq!((&done["restored"], &done["failed"]), (&Value::from(1), &Value::from(1)), "{done}");
    assert_eq!(std::fs::read_to_string(wb.join("run.sh")).expect("restored"), "#!/bin/sh\necho hi\n");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(wb.join("run.sh")).expect("meta").permissions().mode() & 0o777, 0o755);
    // Recorded in node-b's log, naming node-a; node-a's trash has neither any more.
    let log = json(ok(b(&["--json", "audit", "log", "--of", "node-b"]), "audit log"));
    let restores: Vec<&Value> =
        log.as_array().expect("records").iter().filter(|r| r["operation"] == "trash_restore").collect();
    for id in [&gone, &run] {
        let r = restores.iter().find(|r| r["details"]["restoredTrashId"] == id.as_str()).expect("recorded");
        assert_eq!((&r["details"]["node"], &r["workspace"]), (&Value::from("node-a"), &Value::from("node-b")), "{r}");
    }
    let mine = ok(a(&["--json", "trash", "ls"]), "a's trash");
    assert!(!mine.contains(&gone) && !mine.contains(&run), "{mine}");
    // node-a writes on after node-b's segments; both collect and read clean.
    std::fs::write(ws.join("later.txt"), "after the restore").expect("write");
    ok(a(&["snapshot", ws.to_str().expect("utf-8"), "--workspace", "node-a"]), "snapshot on a");
    for _ in 0..2 {
        ok(b(&["gc", "--grace", "0s"]), "gc on b");
    }
    ok(a(&["check", "--read-data"]), "check on a");
    ok(b(&["check", "--read-data"]), "check on b");
    let snap = ok(b(&["snapshot", wb.to_str().expect("utf-8"), "--workspace", "node-b"]), "b's snapshot");
    assert!(!snap.is_empty());
    let back = tmp.path().join("b-back");
    ok(b(&["restore", "latest", "--workspace", "node-b", "--to", back.to_str().expect("utf-8")]), "restore b");
    assert_eq!(std::fs::read_to_string(back.join("gone.txt")).expect("in b's snapshot"), "deleted on node-a");
}

/// A second process writing as a node from another cache directory is refused on its next
/// create, loudly and for good, and replaces nothing; the node's own process goes on, and a
/// node whose cache directory is lost resumes its log from the bucket.
#[test]
fn a_second_process_writing_as_a_node_is_refused_and_a_node_that_lost_its_disk_resumes() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let (home, elsewhere) = (tmp.path().join("cache-home"), tmp.path().join("cache-elsewhere"));
    let ws = tmp.path().join("ws");
    common::rich_workspace(&ws);
    let w = ws.to_str().expect("utf-8");
    ok(as_node(s3.addr, &repo, "n1", &home, &["init", "--layout", "nodes"]), "init");
    ok(as_node(s3.addr, &repo, "n1", &home, &["snapshot", w, "--workspace", "w"]), "snapshot");

    // A process of another cache directory claims n1, and opens (caught up with n1's log).
    let access = common::s3::node_access(s3.addr, &elsewhere, "n1");
    let intruder = trove::Repo::open_bucket(&bucket, "fleet", &access).expect("open as n1 elsewhere");
    // n1 writes on; the intruder's next create finds the key taken by another writer.
    std::fs::write(ws.join("more.txt"), "more").expect("write");
    ok(as_node(s3.addr, &repo, "n1", &home, &["snapshot", w, "--workspace", "w"]), "snapshot on n1");
    let raw = S3Backend::open(&bucket, "fleet", &settings(s3.addr)).expect("open");
    let segments = || raw.list("nodes/n1/log/").expect("list");
    let before: Vec<(String, Vec<u8>)> = segments()
        .into_iter()
        .map(|k| (k.clone(), raw.get_range(&k, 0, raw.size(&k).expect("size")).expect("get")))
        .collect();
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..Default::default() };
    let refused = intruder.snapshot(&ws, &opts).expect_err("refused");
    assert_eq!(refused.kind(), trove::ErrorKind::Conflict, "{refused}");
    assert!(refused.message().contains("another process is writing as node n1"), "{refused}");
    // For good: a write that would now find the next key free is refused all the same.
    let again = intruder.snapshot(&ws, &opts).expect_err("refused again");
    assert_eq!(again.kind(), trove::ErrorKind::Conflict, "{again}");
    drop(intruder);
    let after: Vec<(String, Vec<u8>)> = segments()
        .into_iter()
        .map(|k| (k.clone(), raw.get_range(&k, 0, raw.size(&k).expect("size")).expect("get")))
        .collect();
    assert_eq!(after, before, "the intruder created or replaced no segment");

    // n1 goes on; then loses its cache directory and resumes its own log from the bucket.
    std::fs::write(ws.join("third.txt"), "third").expect("write");
    ok(as_node(s3.addr, &repo, "n1", &home, &["snapshot", w, "--workspace", "w"]), "snapshot on n1 again");
    std::fs::remove_dir_all(&home).expect("the disk is lost");
    std::fs::write(ws.join("fourth.txt"), "fourth").expect("write");
    ok(as_node(s3.addr, &repo, "n1", &home, &["snapshot", w, "--workspace", "w"]), "snapshot after the loss");
    let listed = json(ok(as_node(s3.addr, &repo, "n1", &home, &["--json", "snapshots"]), "snapshots"));
    assert_eq!(listed.as_array().expect("list").len(), 4, "{listed}");
    let n = segments().len();
    let numbers: Vec<u64> =
        segments().iter().map(|k| k.rsplit('/').next().expect("seq").parse().expect("number")).collect();
    assert_eq!(numbers, (1..=n as u64).collect::<Vec<_>>(), "one log, no gap");
    ok(as_node(s3.addr, &repo, "n1", &home, &["check", "--read-data"]), "check");
    let out = tmp.path().join("restored");
    ok(as_node(s3.addr, &repo, "n1", &home, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore");
    assert_eq!(common::tree_state(&out), common::tree_state(&ws));
}

/// A review host's server (`trove serve` with an empty cache) answers every node's snapshots,
/// sessions and trash, each with its `node`; what a node writes, and a node that writes for
/// the first time, shows there within 5 s; a snapshot, a session's changes and a trash item
/// of another node are read by their ids.
#[test]
fn a_review_server_serves_every_node_and_sees_new_records_within_five_seconds() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = |n: &str| tmp.path().join(format!("cache-{n}"));
    let ws = tmp.path().join("ws-a");
    let w = ws.to_str().expect("utf-8");
    common::rich_workspace(&ws);
    std::fs::write(ws.join("gone.txt"), "to be deleted").expect("write");
    ok(as_node(s3.addr, &repo, "node-a", &cache("a"), &["init", "--layout", "nodes"]), "init");
    ok(as_node(s3.addr, &repo, "node-a", &cache("a"), &["snapshot", w, "--workspace", "a"]), "snapshot");

    let review = serve_on(s3.addr, &repo, &["--node", "review"]);
    let listed = |target: &str| -> Vec<Value> {
        let r = review.get(target);
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        let v = r.json();
        v.as_array().or_else(|| v["items"].as_array()).cloned().expect("a list")
    };
    let first = listed("/v1/snapshots");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["node"], "node-a");

    // A node that never wrote before, and a known one writing again: both within 5 s.
    let wc = tmp.path().join("ws-c");
    common::rich_workspace(&wc);
    ok(
        as_node(s3.addr, &repo, "node-c", &cache("c"), &["snapshot", wc.to_str().expect("utf-8"), "--workspace", "c"]),
        "c",
    );
    assert!(
        common::http::eventually(5, || listed("/v1/snapshots").iter().any(|s| s["node"] == "node-c")),
        "a new node's snapshot shows within 5 s"
    );
    std::fs::write(ws.join("more.txt"), "more").expect("write");
    ok(as_node(s3.addr, &repo, "node-a", &cache("a"), &["snapshot", w, "--workspace", "a"]), "snapshot again");
    assert!(
        common::http::eventually(5, || listed("/v1/snapshots").iter().filter(|s| s["node"] == "node-a").count() == 2),
        "a known node's new snapshot shows within 5 s"
    );

    // By id, on the node that holds it.
    let snaps = listed("/v1/snapshots");
    let c_id = snaps.iter().find(|s| s["node"] == "node-c").expect("c's")["id"].as_str().expect("id").to_owned();
    let shown = review.get(&format!("/v1/snapshots/{c_id}"));
    assert_eq!((shown.status, shown.json()["node"].clone()), (200, Value::from("node-c")), "{}", shown.text());
    let files = review.get(&format!("/v1/snapshots/{c_id}/files"));
    assert_eq!(files.status, 200, "{}", files.text());
    // Another node's file, as JSON and as bytes, and its snapshot as a tar stream.
    std::fs::write(wc.join("c.txt"), "only on node-c").expect("write");
    ok(
        as_node(s3.addr, &repo, "node-c", &cache("c"), &["snapshot", wc.to_str().expect("utf-8"), "--workspace", "c"]),
        "c again",
    );
    let latest_c = || {
        let snaps = listed("/v1/snapshots");
        let c: Vec<&Value> = snaps.iter().filter(|s| s["node"] == "node-c").collect();
        (c.len() == 2).then(|| c[1]["id"].as_str().expect("id").to_owned())
    };
    assert!(common::http::eventually(5, || latest_c().is_some()), "c's second snapshot within 5 s");
    let c2 = latest_c().expect("c's second");
    let read = review.get(&format!("/v1/snapshots/{c2}/files/c.txt"));
    assert_eq!((read.status, read.json()["content"].clone()), (200, Value::from("only on node-c")), "{}", read.text());
    let raw_read = review.get(&format!("/v1/snapshots/{c2}/files/c.txt?download=1"));
    assert_eq!((raw_read.status, raw_read.text()), (200, "only on node-c".to_owned()));
    let tar = review.get(&format!("/v1/snapshots/{c2}/export?path=c.txt"));
    assert_eq!(tar.status, 200, "{}", tar.text());
    assert!(tar.text().contains("only on node-c"), "the archive holds the file");
    let a: Vec<&str> = snaps.iter().filter(|s| s["node"] == "node-a").map(|s| s["id"].as_str().expect("id")).collect();
    let diff = review.get(&format!("/v1/snapshots/{}/diff/{}", a[0], a[1]));
    assert_eq!(diff.status, 200, "{}", diff.text());
    assert!(diff.text().contains("more.txt"), "{}", diff.text());
    // Searched on the node holding the snapshot; a path's versions and a name's snapshots, and
    // a node's checkpoint and proofs, read in the log `node=` names.
    let found = review.get(&format!("/v1/snapshots/{c2}/search?pattern=only%20on"));
    assert!(found.status == 200 && found.text().contains("c.txt"), "{}", found.text());
    let log = review.get("/v1/log?workspace=a&path=more.txt&node=node-a");
    assert_eq!(log.status, 200, "{}", log.text());
    assert_eq!(log.json()["versions"].as_array().map(Vec::len), Some(1), "{}", log.text());
    let named = review.get("/v1/find?pattern=c.txt&node=node-c");
    assert!(named.status == 200 && named.text().contains(&c2), "{}", named.text());
    assert_eq!(review.get("/v1/find?pattern=c.txt&node=nobody").status, 404);
    assert_eq!(review.get("/v1/audit/consistency?from=1&to=1&node=node-a").status, 200);

    // A session of node-a whose agent deletes a file: its changes and its trash, by id.
    let made = ok(
        as_node(
            s3.addr,
            &repo,
            "node-a",
            &cache("a"),
            &["--json", "session", "create", "--dir", w, "--workspace", "a"],
        ),
        "session",
    );
    let id = json(made)["id"].as_str().expect("id").to_owned();
    let call = serde_json::json!({ "path": "gone.txt" }).to_string();
    ok(
        as_node(s3.addr, &repo, "node-a", &cache("a"), &["tool", "delete_file", "--session", &id, &call]),
        "delete_file",
    );
    assert!(
        common::http::eventually(5, || listed("/v1/trash")
            .iter()
            .any(|t| t["node"] == "node-a" && t["path"] == "gone.txt")),
        "the trash item shows within 5 s"
    );
    let sessions = listed("/v1/sessions");
    assert!(sessions.iter().any(|s| s["id"] == id.as_str() && s["node"] == "node-a"), "{sessions:?}");
    let one = review.get(&format!("/v1/sessions/{id}"));
    assert_eq!((one.status, one.json()["node"].clone()), (200, Value::from("node-a")), "{}", one.text());
    let changes = review.get(&format!("/v1/sessions/{id}/changes"));
    assert_eq!(changes.status, 200, "{}", changes.text());
    // Its files, snapshots and trash, read on node-a from its snapshots (its tree is on
    // node-a's host, even where this host has a directory of that name); its sandbox's file
    // operations are node-a's server's.
    let files = review.get(&format!("/api/sessions/{id}/files"));
    assert_eq!(files.status, 200, "{}", files.text());
    assert!(files.text().contains("more.txt") && files.text().contains("snapshot"), "{}", files.text());
    let more = review.get(&format!("/api/sessions/{id}/files/more.txt"));
    assert!(more.status == 200 && more.text().contains("more"), "{}", more.text());
    let snaps_of = review.get(&format!("/v1/sessions/{id}/snapshots"));
    assert_eq!(
        snaps_of.json().as_array().map(Vec::len),
        Some(3),
        "the workspace's two, and the session's start: {}",
        snaps_of.text()
    );
    assert!(review.get(&format!("/v1/sessions/{id}/trash")).text().contains("gone.txt"));
    let sandbox = review.call("POST", &format!("/v1/sessions/{id}/file/read"), r#"{"file":"more.txt"}"#);
    assert_eq!(sandbox.status, 409, "{}", sandbox.text());
    assert!(sandbox.text().contains("node-a"), "{}", sandbox.text());
    for (method, target, body) in [
        ("GET", format!("/v1/sessions/{id}/file/download?path=more.txt"), ""),
        ("POST", format!("/v1/sessions/{id}/file/watch"), r#"{"path":"."}"#),
    ] {
        let refused = review.call(method, &target, body);
        assert_eq!(refused.status, 409, "{target}: {}", refused.text());
        assert!(refused.text().contains("node-a") && refused.text().contains("read_only"), "{}", refused.text());
    }
    // The audit records of every node, each naming its node; one node's with node=.
    let audit = |target: &str| -> Vec<Value> {
        let r = review.get(target);
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        r.json()["records"].as_array().cloned().expect("records")
    };
    assert!(
        common::http::eventually(5, || audit("/v1/audit?limit=1000")
            .iter()
            .any(|r| r["node"] == "node-a" && r["operation"] == "delete_file")),
        "node-a's delete shows in the fleet's audit records"
    );
    let merged = audit("/v1/audit?limit=1000");
    assert!(merged.iter().any(|r| r["node"] == "node-c"), "{merged:?}");
    let only_c = audit("/v1/audit?node=node-c&after=0");
    assert!(!only_c.is_empty() && only_c.iter().all(|r| r["node"] == "node-c"), "{only_c:?}");
    assert_eq!(review.get("/v1/audit?after=0").status, 400, "a seq cursor needs one node");
    assert_eq!(review.get("/v1/audit?node=nobody").status, 404, "a name that is no node opens nothing");
    assert_eq!(review.get("/v1/audit/stream?node=node-c").status, 400, "the stream is this node's");
    // A session of node-a that may read src/ only, read outside it from here: refused, and the
    // refusal recorded in this node's log, naming node-a.
    let scoped_dir = tmp.path().join("ws-scoped");
    std::fs::create_dir_all(scoped_dir.join("src")).expect("mkdir");
    std::fs::write(scoped_dir.join("src/in.rs"), "in scope").expect("write");
    std::fs::write(scoped_dir.join("secret.txt"), "out of scope").expect("write");
    let scoped = ok(
        as_node(
            s3.addr,
            &repo,
            "node-a",
            &cache("a"),
            &[
                "--json",
                "session",
                "create",
                "--dir",
                scoped_dir.to_str().expect("utf-8"),
                "--workspace",
                "scoped",
                "--read",
                "src",
            ],
        ),
        "a scoped session",
    );
    let scoped = json(scoped)["id"].as_str().expect("id").to_owned();
    assert!(
        common::http::eventually(5, || review.get(&format!("/api/sessions/{scoped}/files/src/in.rs")).status == 200),
        "node-a's scoped session read here within 5 s"
    );
    let outside = review.get(&format!("/api/sessions/{scoped}/files/secret.txt"));
    assert_eq!(outside.status, 403, "{}", outside.text());
    let denied = audit("/v1/audit?limit=1000");
    assert!(
        denied.iter().any(|r| r["node"] == "review"
            && r["operation"] == "files_read"
            && r["outcome"] == "permission_denied"
            && r["session"] == scoped.as_str()
            && r["details"]["node"] == "node-a"),
        "{denied:?}"
    );
    // And a reviewer in a browser's place: every node's sessions listed with their node, and
    // another node's session drawn with its change.
    let cookie = common::http::ui_login(review.addr, common::http::TOKEN);
    let page = |target: &str| {
        let r = common::http::request(review.addr, "GET", target, &[("Cookie", &cookie)], b"");
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        r.text()
    };
    let listed_page = page("/ui/sessions");
    assert!(listed_page.contains(&format!("/ui/sessions/{id}")) && listed_page.contains("node-a"), "{listed_page}");
    ok(as_node(s3.addr, &repo, "node-a", &cache("a"), &["session", "end", &id]), "end");
    let session_page = format!("/ui/sessions/{id}");
    let drawn_with = |what: &str| {
        let r = common::http::request(review.addr, "GET", &session_page, &[("Cookie", &cookie)], b"");
        r.status == 200 && r.text().contains(what)
    };
    assert!(
        common::http::eventually(5, || drawn_with("gone.txt")),
        "another node's session, drawn with its deletion once it ended: {}",
        page(&session_page)
    );
    // Its audit records are linked in node-a's log, its deleted file to its trash item's page
    // (no restore in place: its tree is on node-a's host).
    let drawn = page(&session_page);
    assert!(drawn.contains("On node <strong>node-a</strong>"), "{drawn}");
    assert!(drawn.contains("?node=node-a\"><code>node-a/") && !drawn.contains("/restore\""), "{drawn}");
    let history = page(&format!("/ui/sessions/{id}/history?path=gone.txt"));
    assert!(history.contains("On node <strong>node-a</strong>"), "{history}");
    // The trash, audit and content pages read every node, or the node they name.
    let trash_page = page("/ui/trash");
    assert!(trash_page.contains("<th>Node</th>") && trash_page.contains("gone.txt"), "{trash_page}");
    let a_log = page("/ui/audit?node=node-a");
    assert!(a_log.contains("Audit log of node node-a") && a_log.contains("delete_file"), "{a_log}");
    let permalink =
        a_log.split("class=\"permalink\" href=\"").nth(1).and_then(|r| r.split('"').next()).expect("a permalink");
    assert!(permalink.ends_with("?node=node-a"), "{permalink}");
    assert!(page(permalink).contains("node-a/"), "another node's record drawn");
    // A node that never signed a checkpoint (node-c's two snapshots are far from one): its
    // records drawn, none of them proven.
    let c_log = page("/ui/audit?node=node-c");
    assert!(c_log.contains("Audit log of node node-c") && c_log.contains("snapshot"), "{c_log}");
    assert!(c_log.contains("--node node-c --pubkey") && !c_log.contains("(verified)"), "{c_log}");
    assert_eq!(
        common::http::request(review.addr, "GET", "/ui/audit?node=nobody", &[("Cookie", &cookie)], b"").status,
        404
    );
    assert!(changes.text().contains("gone.txt"), "{}", changes.text());
    let item = listed("/v1/trash").into_iter().find(|t| t["path"] == "gone.txt").expect("item");
    let shown = review.get(&format!("/v1/trash/{}", item["id"].as_str().expect("id")));
    assert_eq!((shown.status, shown.json()["node"].clone()), (200, Value::from("node-a")), "{}", shown.text());
    let item_page = page(&format!("/ui/trash/{}", item["id"].as_str().expect("id")));
    assert!(item_page.contains("of node <strong>node-a</strong>"), "{item_page}");
    let download = item_page.split("href=\"/ui/content/").nth(1).and_then(|r| r.split('"').next()).expect("a link");
    let download = download.replace("&#38;", "&").replace("&amp;", "&");
    assert!(download.ends_with("&node=node-a"), "{download}");
    let got =
        common::http::request(review.addr, "GET", &format!("/ui/content/{download}"), &[("Cookie", &cookie)], b"");
    assert_eq!((got.status, got.text()), (200, "to be deleted".to_owned()), "node-a's content, from its store");
    // A cursor pages one node's trash: refused in a fleet, saying what to do.
    let paged = review.get("/v1/trash?cursor=1.1");
    assert_eq!(paged.status, 400, "{}", paged.text());
    // Another node's item exported by id, then restored into a workspace of the review host's:
    // recorded in its log, and marked restored in node-a's trash.
    let item_id = item["id"].as_str().expect("id").to_owned();
    let tar = review.get(&format!("/v1/trash/export?ids={item_id}"));
    assert_eq!(tar.status, 200, "{}", tar.text());
    assert!(tar.text().contains("to be deleted"), "the archive holds node-a's item");
    assert_eq!(review.get("/v1/trash/export?ids=trash_0123456789abcdef").status, 404);
    let inbox = review.workspace("inbox");
    std::fs::create_dir_all(&inbox).expect("mkdir");
    let body = serde_json::json!({ "ids": [item_id], "workspace": "inbox" }).to_string();
    let restored = review.call("POST", "/v1/trash/restore", &body);
    assert_eq!((restored.status, restored.json()["restored"].clone()), (200, Value::from(1)), "{}", restored.text());
    assert_eq!(std::fs::read_to_string(inbox.join("gone.txt")).expect("restored"), "to be deleted");
    assert!(
        common::http::eventually(5, || review.get(&format!("/v1/trash/{item_id}")).json()["restoredAt"].is_string()),
        "marked restored in node-a's trash"
    );
    let mine = audit("/v1/audit?node=review&after=0");
    let r = mine.iter().find(|r| r["operation"] == "trash_restore").expect("recorded");
    assert_eq!((&r["details"]["node"], &r["workspace"]), (&Value::from("node-a"), &Value::from("inbox")), "{r}");
}

/// A node's audit log is published in the bucket as C2SP tiles at each checkpoint: a reader
/// written from the specifications alone (`tests/tlog_tiles_reader.py`) verifies them, and so
/// does `trove audit verify --node --pubkey` with nothing but the bucket (no passphrase, an
/// empty cache); a changed entry, or another node's key, is refused; a record whose details
/// would not fit an entry keeps their length and hash.
#[test]
fn a_nodes_audit_log_is_published_as_tiles_that_any_reader_verifies_from_the_bucket() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/fleet");
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = tmp.path().join("cache-t1");
    ok(as_node(s3.addr, &repo, "t1", &cache, &["init", "--layout", "nodes"]), "init");
    ok(as_node(s3.addr, &repo, "t2", &tmp.path().join("cache-t2"), &["audit", "checkpoint"]), "t2 signs");
    let access = common::s3::node_access(s3.addr, &cache, "t1");
    let t1 = trove::Repo::open_bucket(&bucket, "fleet", &access).expect("open as t1");
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_nanos() as i64;
    for i in 0..300 {
        t1.audit(trove::AuditRecord::ok(now(), "test", &format!("note-{i}"))).expect("audit");
    }
    let first = t1.checkpoint().expect("checkpoint");
    let raw = S3Backend::open(&bucket, "fleet", &settings(s3.addr)).expect("open");
    let published = raw.list("nodes/t1/tlog/").expect("list");
    for key in ["checkpoint", "tile/0/000", "tile/entries/000", "tile/1/000.p/1"] {
        assert!(published.contains(&format!("nodes/t1/tlog/{key}")), "{key} in {published:?}");
    }
    let partial = (first.size % 256) as usize;
    assert!(published.contains(&format!("nodes/t1/tlog/tile/0/001.p/{partial}")), "{published:?}");

    // More records, one whose details are longer than an entry holds; the next checkpoint
    // publishes what the first did not.
    let mut long = trove::AuditRecord::ok(now(), "test", "long");
    long.details = serde_json::json!({ "blob": "x".repeat(100_000) });
    let seq = t1.audit(long).expect("a long record");
    let kept = t1.audit_record(seq).expect("read").expect("there");
    assert_eq!(kept.record.details["truncated"]["bytes"], 100_000 + 11, "{}", kept.record.details);
    for i in 0..300 {
        t1.audit(trove::AuditRecord::ok(now(), "test", &format!("more-{i}"))).expect("audit");
    }
    let second = t1.checkpoint().expect("checkpoint");
    assert!(second.size > first.size + 300);
    // The tile that filled since replaced its partial ones.
    let published = raw.list("nodes/t1/tlog/").expect("list");
    assert!(published.contains(&"nodes/t1/tlog/tile/entries/001".to_owned()), "{published:?}");
    assert!(!published.iter().any(|k| k.contains("/001.p/")), "{published:?}");
    let vkey = t1.audit_verifier().expect("key").to_string();
    assert!(vkey.contains("/t1+"), "the key names the node's log: {vkey}");
    drop(t1);

    // An independent reader of the format.
    let reader = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tlog_tiles_reader.py");
    let read = |key: &str| {
        std::process::Command::new(common::s3::python())
            .arg(&reader)
            .args([&format!("http://{}", s3.addr), &bucket, "fleet/nodes/t1/tlog", key])
            .output()
            .expect("run the reader")
    };
    let seen = json(ok(read(&vkey), "the independent reader"));
    assert_eq!(seen["size"], second.size, "{seen}");
    assert_eq!(seen["root"], base64_of(&second.root), "{seen}");

    // trove itself, from a host with nothing but the bucket and the public key.
    let bare = tmp.path().join("bare-host");
    let verify = |key: &str| {
        common::s3::trove_cmd(s3.addr, &repo, &bare, &["--node", "t1", "--json", "audit", "verify", "--pubkey", key])
            .env_remove("TROVE_PASSWORD")
            .output()
            .expect("run trove")
    };
    let report = json(ok(verify(&vkey), "audit verify --node"));
    assert_eq!(report["records"], second.size, "{report}");
    assert_eq!(report["verifiedTo"], second.size, "{report}");
    assert_eq!(report["problems"].as_array().map(Vec::len), Some(0), "{report}");
    assert!(!bare.exists(), "verifying made no cache");

    // Another node's key is refused.
    let t2_key = ok(as_node(s3.addr, &repo, "t2", &tmp.path().join("cache-t2"), &["audit", "pubkey"]), "t2's key");
    let other = verify(t2_key.trim());
    assert_eq!(other.status.code(), Some(3), "{}", common::stderr(&other));

    // A changed entry: the bundle no longer gives the tile's hashes nor the signed root.
    let at = "nodes/t1/tlog/tile/entries/000";
    let good = raw.get_whole(at, 1 << 24).expect("bundle");
    let mut bad = good.clone();
    let i = bad.windows(6).position(|w| w == b"note-7").expect("an entry") + 5;
    bad[i] = b'8';
    raw.replace(at, &bad).expect("tamper");
    let tampered = verify(&vkey);
    assert_eq!(tampered.status.code(), Some(3), "{}", common::stdout(&tampered));
    assert!(
        common::stdout(&tampered).contains("tile/0/000 holds another hash for record"),
        "{}",
        common::stdout(&tampered)
    );
    let refused = read(&vkey);
    assert!(!refused.status.success(), "the independent reader refuses it too");
    raw.replace(at, &good).expect("put back");
    ok(verify(&vkey), "verifies again");
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
