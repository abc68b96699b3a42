//! The storage backend against a real S3 server (moto's, started by the test): the contract
//! every backend keeps, run on memory, a local directory and the bucket alike; values uploaded
//! in parts; and what the network does to requests: 503s retried, a create whose answer was
//! lost settled by reading the key back, slow answers waited for, and a bucket that keeps
//! failing reported naming the key once the retries are spent.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::s3::{fresh_bucket, ok, proxy, serve_on, server, settings, trove_cmd, trove_on, Action};
use trove::object::backend::contract;
use trove::object::{Backend, LocalBackend, MemoryBackend, S3Backend, SealedBackend};
use trove::ErrorKind;

#[test]
fn the_backend_contract_holds_on_memory_a_directory_and_a_real_s3_server() {
    contract(&MemoryBackend::new());
    let dir = tempfile::tempdir().expect("tempdir");
    contract(&LocalBackend::new(dir.path()));
    let s3 = server();
    // Under a prefix, and at a bucket's root.
    let bucket = fresh_bucket(s3.addr);
    contract(&S3Backend::open(&bucket, "team/repo", &settings(s3.addr)).expect("open"));
    let root = fresh_bucket(s3.addr);
    let backend = S3Backend::open(&root, "", &settings(s3.addr)).expect("open");
    contract(&backend);
    assert_eq!(backend.describe(), format!("s3://{root}"));
    // The prefixed repository's values are where its prefix says, and nothing else is there.
    let outside = S3Backend::open(&bucket, "", &settings(s3.addr)).expect("open");
    let keys = outside.list("").expect("list");
    assert_eq!(keys, vec!["team/repo/packs/bb/two.pack", "team/repo/packs/cc/three.pack"]);
}

#[test]
fn values_past_one_request_upload_in_parts_and_are_never_replaced() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let b = S3Backend::open(&bucket, "r", &settings(s3.addr)).expect("open");
    // 33 MiB: past the largest single create, so two 8 MiB parts and more.
    let value: Vec<u8> = (0..33u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let stage = |bytes: &[u8]| {
        let mut staged = b.stage("packs").expect("stage");
        for piece in bytes.chunks(1 << 20) {
            staged.write(piece).expect("write");
        }
        staged.commit("packs/big.pack")
    };
    stage(&value).expect("upload in parts");
    assert_eq!(b.size("packs/big.pack").expect("size"), value.len() as u64);
    for at in [0u64, 8 << 20, (33 << 20) - 100] {
        assert_eq!(b.get_range("packs/big.pack", at, 100).expect("get"), value[at as usize..at as usize + 100]);
    }
    stage(&value).expect("the same bytes again");
    let mut other = value.clone();
    other[20 << 20] ^= 1;
    assert_eq!(stage(&other).expect_err("other bytes").kind(), ErrorKind::AlreadyExists);
    assert_eq!(b.get_range("packs/big.pack", 20 << 20, 1).expect("get"), [value[20 << 20]]);
}

#[test]
fn failures_on_the_way_are_retried_settled_or_reported_naming_the_key() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    // Requests 0-1 answered 503, the create at 2 lands but its answer is lost, request 5 (a
    // read) waits 300 ms; the rest pass.
    let policy: common::s3::Policy = Arc::new(|n, _method, _path| match n {
        0 | 1 => Action::Unavailable,
        2 => Action::LoseAnswer,
        5 => Action::Delay(Duration::from_millis(300)),
        _ => Action::Forward,
    });
    let (addr, log) = proxy(s3.addr, policy);
    let b = S3Backend::open(&bucket, "r", &settings(addr)).expect("open");
    b.put("packs/one.pack", b"hello").expect("a create through two 503s and a lost answer");
    let seen: Vec<_> = log.lock().expect("log").iter().map(|(m, _, a)| (m.clone(), *a)).collect();
    assert_eq!(
        seen[..3],
        [("PUT".into(), Action::Unavailable), ("PUT".into(), Action::Unavailable), ("PUT".into(), Action::LoseAnswer)]
    );
    // Whether the client tries the create once more (refused: the key exists) or not, the
    // outcome is settled by reading the key back.
    assert!(seen.iter().filter(|(m, _)| m == "PUT").count() <= 4, "{seen:?}");
    assert!(seen[3..].iter().any(|(m, _)| m == "HEAD"), "settled by reading back: {seen:?}");
    assert_eq!(b.get_range("packs/one.pack", 0, 5).expect("a slow read"), b"hello");
    // The lost answer's create is settled the same way when the key holds other bytes.
    let direct = S3Backend::open(&bucket, "r", &settings(s3.addr)).expect("open");
    assert_eq!(direct.put("packs/one.pack", b"HELLO").expect_err("other bytes").kind(), ErrorKind::AlreadyExists);

    // A bucket that keeps failing: the retries are bounded, then the error names the key.
    let (down, log) = proxy(s3.addr, Arc::new(|_, _, _| Action::Unavailable));
    let mut few = settings(down);
    few.retries = 2;
    few.retry_timeout = Duration::from_secs(10);
    let b = S3Backend::open(&bucket, "r", &few).expect("open");
    let e = b.put("packs/two.pack", b"bytes").expect_err("always 503");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let message = e.to_string();
    assert!(message.contains("packs/two.pack") && message.contains(&format!("s3://{bucket}/r")), "{message}");
    let methods: Vec<String> = log.lock().expect("log").iter().map(|(m, ..)| m.clone()).collect();
    assert_eq!(
        methods,
        ["PUT", "PUT", "PUT", "HEAD", "HEAD", "HEAD"],
        "the create and the read-back of whether it landed: one try and two retries each"
    );
    let e = b.get_range("packs/one.pack", 0, 5).expect_err("always 503");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("packs/one.pack"), "{e}");
}

#[test]
fn sealed_values_in_the_bucket_hold_no_plaintext_and_a_flipped_bit_is_corrupt() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let open = || S3Backend::open(&bucket, "sealed", &settings(s3.addr)).expect("open");
    let key = trove::object::keyfile::new_seal_key().expect("key");
    contract(&SealedBackend::new(open(), key.clone()));
    let sealed = SealedBackend::new(open(), key.clone());
    let secret = b"the workspace's private notes; ".repeat(10_000);
    sealed.put("packs/s.pack", &secret).expect("put");
    let raw =
        sealed.inner().get_range("packs/s.pack", 0, sealed.inner().size("packs/s.pack").expect("size")).expect("raw");
    assert!(!raw.windows(16).any(|w| w == &secret[..16]), "the bucket holds no plaintext");
    assert_eq!(sealed.get_range("packs/s.pack", 200_000, 31).expect("ranged"), secret[200_000..200_031]);
    // The same bytes with one bit flipped, stored under another key: opening it fails, by name.
    let mut flipped = raw.clone();
    flipped[raw.len() / 2] ^= 0x10;
    sealed.inner().put("packs/flipped.pack", &flipped).expect("raw put");
    let e = sealed.get_range("packs/flipped.pack", 0, secret.len() as u64).expect_err("flipped");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("packs/flipped.pack"), "{e}");
    // Another repository's key opens nothing.
    let stranger = SealedBackend::new(open(), trove::object::keyfile::new_seal_key().expect("key"));
    assert_eq!(stranger.get_range("packs/s.pack", 0, 10).expect_err("other key").kind(), ErrorKind::Corrupt);
}

/// `trove` with the environment that reaches the test's S3 server, the passphrase, and this
/// node's cache directory.
/// Repository `prefix` of `bucket` opened in this process as the host whose cache is `cache`,
/// with the passphrase `trove_on` gives.
fn open_host(s3: std::net::SocketAddr, bucket: &str, prefix: &str, cache: &std::path::Path) -> trove::Repo {
    let access = trove::BucketAccess {
        password: Some("correct horse battery staple".into()),
        cache_base: Some(cache.to_path_buf()),
        settings: settings(s3),
        ..Default::default()
    };
    trove::Repo::open_bucket(bucket, prefix, &access).expect("open a host")
}

/// The bucket is the repository: made by `trove init`, written by one host, read byte for byte
/// by a host with no cache, written by two hosts in turn (one of them out of date), and the
/// audit log of all of it verified anywhere. Nothing in the bucket is plaintext.
#[test]
fn a_repository_in_a_bucket_is_written_by_several_hosts_and_read_by_one_with_no_cache() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/team/repo");
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, b, c) = (tmp.path().join("host-a"), tmp.path().join("host-b"), tmp.path().join("host-c"));
    let work = tmp.path().join("work");
    common::rich_workspace(&work);
    let secret = b"a line only this workspace holds, 7f3a9c";
    std::fs::write(work.join("secret.txt"), secret).expect("write");

    // The hosts share one audit signing key, kept outside the bucket (here one file for all).
    let audit_key = tmp.path().join("audit.key");
    ok(trove_on(s3.addr, &repo, &a, &["init", "--audit-key", audit_key.to_str().expect("utf-8")]), "init");
    let again = trove_on(s3.addr, &repo, &a, &["init"]);
    assert_eq!(again.status.code(), Some(1), "a second init is refused: {}", common::stderr(&again));
    let w = work.to_str().expect("utf-8");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "snapshot on a");

    // A host with no cache restores it byte for byte from the bucket alone.
    let out = tmp.path().join("restored");
    ok(trove_on(s3.addr, &repo, &b, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore on b");
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
    assert_eq!(ok(trove_on(s3.addr, &repo, &b, &["cat", "latest", "secret.txt"]), "cat").as_bytes(), secret);

    // b writes; then a, whose replica has not seen b's write, writes too: both are kept.
    std::fs::write(work.join("b.txt"), "from b").expect("write");
    ok(trove_on(s3.addr, &repo, &b, &["snapshot", w, "--workspace", "w"]), "snapshot on b");
    std::fs::write(work.join("a.txt"), "from a").expect("write");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "snapshot on a again");
    let listed_on = |host: &std::path::Path, ws: &str| -> Vec<String> {
        let json = ok(trove_on(s3.addr, &repo, host, &["--json", "snapshots", ws]), "snapshots");
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        let list = v.as_array().or_else(|| v["snapshots"].as_array()).expect("a list").clone();
        list.iter().map(|s| s["id"].as_str().expect("id").to_string()).collect()
    };
    let listed = |host: &std::path::Path| listed_on(host, "w");
    let listed_in = |ws: &str| listed_on(&c, ws);
    // Two hosts snapshotting at once, each into the log's next segment: one wins each race,
    // the other runs its write again on the winner's rows; both are kept.
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    common::rich_workspace(&one);
    common::rich_workspace(&two);
    let racers: Vec<_> = [(&a, &one, "one"), (&b, &two, "two")]
        .into_iter()
        .map(|(host, dir, ws)| {
            let (repo, host, dir) = (repo.clone(), host.clone(), dir.clone());
            std::thread::spawn(move || {
                ok(trove_on(s3.addr, &repo, &host, &["snapshot", dir.to_str().expect("utf-8"), "--workspace", ws]), ws)
            })
        })
        .collect();
    for r in racers {
        r.join().expect("a racer");
    }
    std::fs::remove_dir_all(&b).expect("b's cache goes");
    let seen = listed(&c);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(listed(&a), seen);
    assert_eq!(listed(&b), seen);
    assert_eq!(
        ok(trove_on(s3.addr, &repo, &c, &["cat", seen.last().expect("a snapshot"), "b.txt"]), "cat b.txt"),
        "from b"
    );
    for ws in ["one", "two"] {
        assert_eq!(listed_in(ws).len(), 1, "{ws}");
    }
    ok(trove_on(s3.addr, &repo, &c, &["check", "--read-data"]), "check --read-data");
    ok(trove_on(s3.addr, &repo, &a, &["audit", "checkpoint"]), "a checkpoint signed on a");
    let verified = ok(trove_on(s3.addr, &repo, &c, &["audit", "verify"]), "audit verify");
    assert!(verified.contains("verified"), "{verified}");

    // What the bucket holds is sealed: no workspace byte, name or path in the clear.
    let raw = S3Backend::open(&bucket, "team/repo", &settings(s3.addr)).expect("open");
    let keys = raw.list("").expect("list");
    assert!(keys.iter().any(|k| k.starts_with("keys/")) && keys.iter().any(|k| k == "config"), "{keys:?}");
    assert!(keys.iter().any(|k| k.starts_with("log/")) && keys.iter().any(|k| k.starts_with("packs/")), "{keys:?}");
    for k in &keys {
        let bytes = raw.get_range(k, 0, raw.size(k).expect("size")).expect("get");
        for needle in [&secret[..], b"secret.txt", b"host-a", w.as_bytes()] {
            assert!(
                !bytes.windows(needle.len()).any(|x| x == needle),
                "{k} holds {:?}",
                String::from_utf8_lossy(needle)
            );
        }
    }

    // Without the passphrase, or with another, nothing opens; the error says what to set.
    let o = trove_cmd(s3.addr, &repo, &c, &["snapshots"]).env_remove("TROVE_PASSWORD").output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("TROVE_PASSWORD"), "{}", common::stderr(&o));
}

/// A repository in a fresh bucket, initialized on host `a` (of hosts `a` and `b`, cache
/// directories under `tmp`), with a session on `tmp/ws` whose `notes.txt` holds `notes`: the
/// bucket, the repository's address and the session's id.
struct Edited {
    bucket: String,
    repo: String,
    a: std::path::PathBuf,
    b: std::path::PathBuf,
    ws: std::path::PathBuf,
    id: String,
}

fn session_in_a_bucket(s3: std::net::SocketAddr, tmp: &std::path::Path, notes: &str) -> Edited {
    let bucket = fresh_bucket(s3);
    let repo = format!("s3://{bucket}/repo");
    let (a, b, ws) = (tmp.join("host-a"), tmp.join("host-b"), tmp.join("ws"));
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::write(ws.join("notes.txt"), notes).expect("write");
    ok(trove_on(s3, &repo, &a, &["init"]), "init");
    let made =
        ok(trove_on(s3, &repo, &a, &["--json", "session", "create", "--dir", ws.to_str().expect("utf-8")]), "session");
    let id = serde_json::from_str::<serde_json::Value>(&made).expect("json")["id"].as_str().expect("id").to_string();
    Edited { bucket, repo, a, b, ws, id }
}

/// The seqs of the successful `edit_file` records in `trove --json audit log`'s output.
fn edits_recorded(log: String) -> Vec<u64> {
    let records: serde_json::Value = serde_json::from_str(&log).expect("json");
    records
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["operation"] == "edit_file" && r["outcome"] == "ok")
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect()
}

/// An agent's edit through the tools is one segment of the record log (its new version, a
/// delta, with its audit record), plus one for the session's activity at most once a second;
/// another host, with no cache, reads those versions from the bucket and reverts an edit.
#[test]
fn an_edit_through_the_tools_is_one_segment_and_another_host_reverts_it() {
    use sha2::Digest;
    let s3 = server();
    let tmp = tempfile::tempdir().expect("tmp");
    let start: String = (0..120).map(|n| format!("line {n}\n")).collect();
    let mut text = start.clone();
    let Edited { bucket, repo, a, b, ws, id } = session_in_a_bucket(s3.addr, tmp.path(), &text);
    let raw = S3Backend::open(&bucket, "repo", &settings(s3.addr)).expect("open");
    let segments = || raw.list("log/").expect("list").len();
    let activity = || {
        let shown = ok(trove_on(s3.addr, &repo, &a, &["--json", "session", "show", &id]), "session show");
        serde_json::from_str::<serde_json::Value>(&shown).expect("json")["last_activity"].to_string()
    };
    let edits = [("line 7\n", "line seven\n"), ("line 60\n", "line sixty\n"), ("line 99\n", "line ninety-nine\n")];
    for (i, (old, new)) in edits.into_iter().enumerate() {
        let (before, at) = (segments(), activity());
        let call = serde_json::json!({
            "path": "notes.txt",
            "expectedSha256": hex::encode(sha2::Sha256::digest(text.as_bytes())),
            "edits": [{"oldText": old, "newText": new}],
        });
        let out = ok(trove_on(s3.addr, &repo, &a, &["tool", "edit_file", "--session", &id, &call.to_string()]), "edit");
        assert!(out.contains("\"ok\": true"), "edit {i}: {out}");
        text = text.replacen(old, new, 1);
        assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), text);
        let touched = activity() != at;
        assert_eq!(
            segments() - before,
            1 + usize::from(touched),
            "edit {i}: one segment, and one if the activity moved"
        );
    }
    // b has never opened the repository: every version comes from the bucket.
    ok(trove_on(s3.addr, &repo, &b, &["check", "--read-data"]), "check --read-data on b");
    let seqs = edits_recorded(ok(trove_on(s3.addr, &repo, &b, &["--json", "audit", "log"]), "audit log on b"));
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    let second = start.replacen(edits[0].0, edits[0].1, 1).replacen(edits[1].0, edits[1].1, 1);
    ok(trove_on(s3.addr, &repo, &b, &["revert", &seqs[2].to_string()]), "revert on b");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("read"),
        second,
        "the second edit's version, read on b"
    );
}

/// A tool change killed after its segment reached the bucket but before its host committed it
/// locally: the next open applies the segment, finds the change recorded, and closes the plan
/// without recording it a second time.
#[test]
fn a_tool_change_killed_after_its_segment_landed_is_recorded_once() {
    let s3 = server();
    let tmp = tempfile::tempdir().expect("tmp");
    let Edited { repo, a, b, ws, id, .. } = session_in_a_bucket(s3.addr, tmp.path(), "one\ntwo\n");
    common::kill_edit_after_its_segment(
        &ws,
        |read| {
            ok(trove_on(s3.addr, &repo, &a, &["tool", "read_file", "--session", &id, read]), "read");
        },
        |call| trove_cmd(s3.addr, &repo, &a, &["tool", "edit_file", "--session", &id, call]),
    );
    let edits = |host: &std::path::Path| {
        let log = ok(trove_on(s3.addr, &repo, host, &["--json", "audit", "log"]), "audit log");
        let v: serde_json::Value = serde_json::from_str(&log).expect("json");
        v.as_array().expect("records").iter().filter(|r| r["operation"] == "edit_file").count()
    };
    assert_eq!(edits(&a), 1, "recorded once on the host that was killed");
    assert_eq!(edits(&b), 1, "and once in the bucket");
    ok(trove_on(s3.addr, &repo, &a, &["check"]), "check: no plan left open");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), "one\nTWO\n");
}

/// A host killed in the middle of a tool change (its tree changed, its record not written) and
/// back only after another host collected past the grace period: what the change stored from
/// the tree (the file's previous content, which nothing else reaches) was kept for it by its
/// logged roots, so the change is recorded whole on its return and reverted from another host.
#[test]
fn a_host_killed_mid_change_and_back_after_the_grace_finds_what_the_change_stored() {
    use sha2::Digest;
    use std::os::unix::process::ExitStatusExt;
    let s3 = server();
    let tmp = tempfile::tempdir().expect("tmp");
    let Edited { bucket, repo, a, b, ws, id } = session_in_a_bucket(s3.addr, tmp.path(), "one\n");
    let roots = |host: &str| {
        let repo = open_host(s3.addr, &bucket, "repo", &tmp.path().join(host));
        trove::testing::plan_roots(&repo).expect("plan roots")
    };
    // Written beside the tools: no snapshot, record or trash item holds it.
    let before = "written outside the tools\n";
    std::fs::write(ws.join("outside.txt"), before).expect("write");
    let call = serde_json::json!({
        "path": "outside.txt",
        "expectedSha256": hex::encode(sha2::Sha256::digest(before.as_bytes())),
        "edits": [{"oldText": "outside", "newText": "inside"}],
    })
    .to_string();
    let killed = trove_cmd(s3.addr, &repo, &a, &["tool", "edit_file", "--session", &id, &call])
        .env("TROVE_FAILPOINT", "edit_file:buried")
        .output()
        .expect("run");
    assert_eq!(killed.status.signal(), Some(6), "killed at the failpoint: {}", common::stderr(&killed));
    let after = "written inside the tools\n";
    assert_eq!(std::fs::read_to_string(ws.join("outside.txt")).expect("read"), after, "applied, not recorded");
    assert_eq!(roots("host-c"), 1, "the pre-image it stored is a root in the log");

    // Another host collects with no grace (condemning, then deleting past it), twice.
    for _ in 0..2 {
        let r: serde_json::Value =
            serde_json::from_str(&ok(trove_on(s3.addr, &repo, &b, &["--json", "gc", "--grace", "0s"]), "gc on b"))
                .expect("json");
        assert_eq!(r["waiting"], 0, "{r}");
    }

    // Back: the change is recorded once, with its pre-image, and every host reads it.
    let seqs = edits_recorded(ok(trove_on(s3.addr, &repo, &a, &["--json", "audit", "log"]), "audit log on a"));
    assert_eq!(seqs.len(), 1, "{seqs:?}");
    ok(trove_on(s3.addr, &repo, &b, &["check", "--read-data"]), "check --read-data on b");
    ok(trove_on(s3.addr, &repo, &b, &["revert", &seqs[0].to_string()]), "revert on b");
    assert_eq!(std::fs::read_to_string(ws.join("outside.txt")).expect("read"), before, "the previous content, back");
    // Closed, the plan's roots went with it.
    assert_eq!(roots("host-c"), 0, "no root left in the log");
}

/// A snapshot killed at any moment of its upload (a packed but unrecorded snapshot, before and
/// after its segment is created, and at random moments while requests are slow) leaves a bucket
/// every host opens, loses no acknowledged snapshot, and the next snapshot succeeds; a
/// no-change snapshot costs a handful of requests.
#[test]
fn a_snapshot_killed_anywhere_in_its_upload_loses_nothing_acknowledged() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/r");
    let tmp = tempfile::tempdir().expect("tmp");
    let (host, fresh) = (tmp.path().join("host"), tmp.path().join("fresh"));
    let work = tmp.path().join("work");
    common::rich_workspace(&work);
    let w = work.to_str().expect("utf-8");
    ok(trove_on(s3.addr, &repo, &host, &["init"]), "init");
    ok(trove_on(s3.addr, &repo, &host, &["snapshot", w, "--workspace", "w"]), "first snapshot");
    let count = |host: &std::path::Path| -> usize {
        let json = ok(trove_on(s3.addr, &repo, host, &["--json", "snapshots", "w"]), "snapshots");
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        v.as_array().or_else(|| v["snapshots"].as_array()).expect("a list").len()
    };
    let mut acknowledged = 1;
    for (i, point) in ["snapshot:packed", "log:publishing", "log:published"].into_iter().enumerate() {
        std::fs::write(work.join(format!("change-{i}.txt")), format!("change {i}")).expect("write");
        let o = trove_cmd(s3.addr, &repo, &host, &["snapshot", w, "--workspace", "w"])
            .env("TROVE_FAILPOINT", point)
            .output()
            .expect("run");
        assert!(!o.status.success(), "{point}: the snapshot was killed");
        // Past the segment's creation the snapshot is in the bucket, though never acknowledged.
        let kept = usize::from(point == "log:published");
        let _ = std::fs::remove_dir_all(&fresh);
        assert_eq!(count(&fresh), acknowledged + kept, "{point}: a new host");
        assert_eq!(count(&host), acknowledged + kept, "{point}: the killed host");
        ok(trove_on(s3.addr, &repo, &host, &["snapshot", w, "--workspace", "w"]), "the next snapshot");
        acknowledged += kept + 1;
        assert_eq!(count(&fresh), acknowledged, "{point}");
    }

    // Killed at random moments while every request takes 150 ms.
    let (slow, _) = proxy(s3.addr, std::sync::Arc::new(|_, _, _| Action::Delay(Duration::from_millis(150))));
    for (i, after) in [400u64, 900, 1700].into_iter().enumerate() {
        std::fs::write(work.join(format!("slow-{i}.bin")), vec![i as u8; 300_000 * (i + 1)]).expect("write");
        let mut child = trove_cmd(slow, &repo, &host, &["snapshot", w, "--workspace", "w"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(after));
        let _ = child.kill();
        let finished = child.wait().expect("wait").success();
        let _ = std::fs::remove_dir_all(&fresh);
        let now = count(&fresh);
        assert!(now == acknowledged || (now == acknowledged + 1), "killed after {after} ms: {now} of {acknowledged}");
        assert!(!finished || now == acknowledged + 1, "an acknowledged snapshot is kept");
        acknowledged = now;
        ok(trove_on(s3.addr, &repo, &host, &["snapshot", w, "--workspace", "w"]), "the next snapshot");
        acknowledged += 1;
    }
    let _ = std::fs::remove_dir_all(&fresh);
    assert_eq!(count(&fresh), acknowledged);
    ok(trove_on(s3.addr, &repo, &fresh, &["check", "--read-data"]), "check --read-data");

    // What a snapshot of an unchanged tree asks of the store, counted at a proxy.
    // (The first through the proxy reads the key file and config once: to the node, the proxy
    // is another store.)
    let (counted, seen) = proxy(s3.addr, std::sync::Arc::new(|_, _, _| Action::Forward));
    ok(trove_on(counted, &repo, &host, &["snapshot", w, "--workspace", "w"]), "a first no-change snapshot");
    seen.lock().expect("seen").clear();
    ok(trove_on(counted, &repo, &host, &["snapshot", w, "--workspace", "w"]), "a no-change snapshot");
    let requests: Vec<(String, String)> =
        seen.lock().expect("seen").iter().map(|(m, p, _)| (m.clone(), p.clone())).collect();
    // Is the key file still there; is there a newer segment; the new segment's create.
    let methods: Vec<&str> = requests.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(methods, ["HEAD", "GET", "PUT"], "{requests:#?}");
}

/// Key files as restic's: another passphrase added opens the repository; the first removed
/// opens it no more, even on a host that remembered its key file; the one in use cannot be
/// removed; every change is in the audit log.
#[test]
fn key_files_are_added_listed_and_removed_and_a_removed_passphrase_opens_nothing() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/keys");
    let tmp = tempfile::tempdir().expect("tmp");
    let host = tmp.path().join("host");
    ok(trove_on(s3.addr, &repo, &host, &["init"]), "init");
    let list = |password: &str| -> serde_json::Value {
        let o = trove_cmd(s3.addr, &repo, &host, &["--json", "key", "list"])
            .env("TROVE_PASSWORD", password)
            .output()
            .expect("run");
        serde_json::from_str(&ok(o, "key list")).expect("json")
    };
    let first = list("correct horse battery staple");
    assert_eq!(first.as_array().expect("list").len(), 1);
    assert_eq!(first[0]["current"], true);
    let first_id = first[0]["id"].as_str().expect("id").to_string();

    let o = trove_cmd(s3.addr, &repo, &host, &["--json", "key", "add"])
        .env("TROVE_NEW_PASSWORD", "another passphrase")
        .output()
        .expect("run");
    let added: serde_json::Value = serde_json::from_str(&ok(o, "key add")).expect("json");
    // A damaged object among the key files locks out no passphrase and is not listed.
    let raw = S3Backend::open(&bucket, "keys", &settings(s3.addr)).expect("open");
    raw.put("keys/zzzzdamaged", b"not a key file").expect("put");
    let both = list("another passphrase");
    assert_eq!(both.as_array().expect("list").len(), 2);
    let current: Vec<&str> = both
        .as_array()
        .expect("list")
        .iter()
        .filter(|k| k["current"] == true)
        .filter_map(|k| k["id"].as_str())
        .collect();
    assert_eq!(current, vec![added["id"].as_str().expect("id")]);

    // The key in use is never removed; another is, by a command opened with the new one.
    let o = trove_on(s3.addr, &repo, &host, &["key", "remove", &first_id]);
    assert!(!o.status.success() && common::stderr(&o).contains("opened with"), "{}", common::stderr(&o));
    let o = trove_cmd(s3.addr, &repo, &host, &["key", "remove", &first_id])
        .env("TROVE_PASSWORD", "another passphrase")
        .output()
        .expect("run");
    ok(o, "key remove");
    // This host remembered the first key file; it opens nothing now.
    let o = trove_on(s3.addr, &repo, &host, &["snapshots"]);
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("no key file"), "{}", common::stderr(&o));
    let o = trove_cmd(s3.addr, &repo, &host, &["--json", "audit", "log"])
        .env("TROVE_PASSWORD", "another passphrase")
        .output()
        .expect("run");
    let log = ok(o, "audit log");
    assert!(log.contains("key-add") && log.contains("key-remove"), "{log}");
}

/// A review host serves a bucket's repository over HTTP: what another host snapshotted reads
/// back, and a snapshot taken after the server started shows within a second or two.
#[test]
fn a_server_on_another_host_serves_the_buckets_snapshots_and_sees_new_ones() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/served");
    let tmp = tempfile::tempdir().expect("tmp");
    let agent = tmp.path().join("agent-host");
    let work = tmp.path().join("work");
    common::rich_workspace(&work);
    let w = work.to_str().expect("utf-8");
    ok(trove_on(s3.addr, &repo, &agent, &["init"]), "init");
    ok(trove_on(s3.addr, &repo, &agent, &["snapshot", w, "--workspace", "w"]), "snapshot");

    let served = serve_on(s3.addr, &repo, &[]);
    let r = served.get("/v1/snapshots/latest/files/src/main.rs");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"], "fn main() {}\n");

    std::fs::write(work.join("later.txt"), "written after the server started").expect("write");
    ok(trove_on(s3.addr, &repo, &agent, &["snapshot", w, "--workspace", "w"]), "a later snapshot");
    let seen = common::http::eventually(20, || {
        let r = served.get("/v1/snapshots/latest/files/later.txt");
        r.status == 200 && r.json()["content"] == "written after the server started"
    });
    assert!(seen, "the server saw the other host's snapshot");
    let list = served.get("/v1/snapshots?workspace=w");
    assert_eq!(list.status, 200, "{}", list.text());
    let v = list.json();
    assert_eq!(v.as_array().or_else(|| v["snapshots"].as_array()).map_or(0, Vec::len), 2, "{v}");
}

/// Two servers on one bucket, each with its own idle timeout: a session ends by idleness on
/// the host that serves it, never on another (ending it there would snapshot a directory of
/// that host); the other host then reads its final snapshot.
#[test]
fn a_session_ends_by_idleness_on_its_own_host_only() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/sessions");
    let tmp = tempfile::tempdir().expect("tmp");
    ok(trove_on(s3.addr, &repo, &tmp.path().join("init"), &["init"]), "init");
    let serve = |idle: &str| serve_on(s3.addr, &repo, &["--idle-timeout", idle, "--reap-interval", "100ms"]);
    // The agents' host ends idle sessions after 4 s; the review host would after 1 s.
    let agents = serve("4s");
    let review = serve("1s");
    let id = agents.session(r#"{"workspace": "idle"}"#);
    std::fs::write(agents.workspace("idle").join("f.txt"), b"idle work").expect("write");
    let seen = common::http::eventually(10, || review.get(&format!("/v1/sessions/{id}")).status == 200);
    assert!(seen, "the review host sees the session");
    // Past the review host's timeout, and many of its reaper's ticks: still live.
    std::thread::sleep(Duration::from_millis(2500));
    let r = agents.get(&format!("/v1/sessions/{id}"));
    assert_eq!(r.status, 200, "the review host ended a session it does not serve: {}", r.text());
    // Past its own host's: ended there, with its final snapshot, which the review host reads.
    assert!(
        common::http::eventually(20, || agents.get(&format!("/v1/sessions/{id}")).status == 404),
        "the agents' host did not end its idle session"
    );
    let read = common::http::eventually(20, || {
        let r = review.get(&format!("/api/sessions/{id}/files/f.txt"));
        r.status == 200 && r.json()["content"] == "idle work" && r.json()["source"] == "snapshot"
    });
    assert!(read, "the review host reads the final snapshot");
    // And a reviewer there, in a browser's place, finds the session and what it changed, its
    // own host done with it.
    let cookie = common::http::ui_login(review.addr, common::http::TOKEN);
    let page = |target: &str| {
        let r = common::http::request(review.addr, "GET", target, &[("Cookie", &cookie)], b"");
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        r.text()
    };
    assert!(page("/ui/sessions?status=ended").contains(&format!("/ui/sessions/{id}")), "listed as ended");
    let changes = page(&format!("/ui/sessions/{id}"));
    assert!(changes.contains("f.txt") && changes.contains("idle work"), "its change, drawn: {changes}");
}

/// A tool's change on one host whose record is refused after the change reached the tree (a
/// collection on another host recorded a sweep past the epoch the change began at while it
/// ran) is recorded all the same, its stored contents secured again: the caller is told it
/// succeeded (never to run it again over a tree that holds it), the audit log names every
/// version, and the bucket checks whole, every byte read, on a third host. The big file's
/// chunks, which only the change's journal named, are deleted by the sweep and stored again
/// from the tree.
#[test]
fn a_tool_change_refused_after_it_reached_the_tree_is_recorded_all_the_same() {
    let Fresh { s3, bucket, repo, tmp, work } = fresh("applied");
    let a = tmp.path().join("host-a");
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    let b = open_host(s3.addr, &bucket, "applied", &tmp.path().join("host-b"));
    let w = work.clone();
    let spec = trove::SessionSpec { workspace: Some("w".into()), persistent: true, ..Default::default() };
    let s = b.create_session(&spec, move |_| Ok(w), "agent").expect("session");
    let run = |name: &str, params: serde_json::Value| {
        trove::tools::run(&b, &s, trove::tools::ToolCall::parse(name, params).expect("parse"), "agent")
            .map(|r| r.to_json())
    };
    run("create_file", serde_json::json!({"path": "notes.txt", "content": "first version\n"})).expect("create");
    let sha = run("read_file", serde_json::json!({"path": "notes.txt"})).expect("read")["sha256"].clone();

    // Between each change's apply and its record, two collections on host a with no grace:
    // the second sweeps past the epoch the change began at.
    let collect_twice = move || {
        for _ in 0..2 {
            ok(trove_on(s3.addr, &format!("s3://{bucket}/applied"), &a, &["gc", "--grace", "0s"]), "gc on a");
        }
    };
    let refusals = std::rc::Rc::new(std::cell::Cell::new(0));
    for tool in ["write_file", "create_file"] {
        trove::testing::set_hook(&format!("{tool}:buried"), collect_twice.clone());
        let seen = refusals.clone();
        trove::testing::set_hook(&format!("{tool}:record-refused"), move || seen.set(seen.get() + 1));
    }
    let written = run(
        "write_file",
        serde_json::json!({"path": "notes.txt", "content": "second version\n", "expectedSha256": sha}),
    );
    let big = String::from_utf8(trove::sample::text(&mut trove::sample::Rng::new(633), 1_500_000)).expect("text");
    let created = run("create_file", serde_json::json!({"path": "big.txt", "content": big}));
    trove::testing::clear_hooks();
    written.expect("the write is recorded");
    created.expect("the create is recorded");
    assert_eq!(refusals.get(), 2, "each record was refused once, then written");
    assert_eq!(std::fs::read_to_string(work.join("notes.txt")).expect("read"), "second version\n");

    // A third host sees every change in the audit log, and reads every byte the bucket holds.
    let c = tmp.path().join("host-c");
    let history =
        ok(trove_on(s3.addr, &repo, &c, &["--json", "audit", "history", "--workspace", "w", "notes.txt"]), "history");
    let history: serde_json::Value = serde_json::from_str(&history).expect("json");
    let records = history.as_array().or_else(|| history["records"].as_array()).expect("records");
    assert_eq!(records.len(), 2, "{history}");
    let log = ok(trove_on(s3.addr, &repo, &c, &["--json", "audit", "log"]), "log");
    assert!(log.contains("big.txt"), "{log}");
    ok(trove_on(s3.addr, &repo, &c, &["check", "--read-data"]), "check");
    ok(trove_on(s3.addr, &repo, &c, &["audit", "verify"]), "audit verify");
    let w = work.to_str().expect("utf-8");
    ok(trove_on(s3.addr, &repo, &c, &["snapshot", w, "--workspace", "w"]), "snapshot on c");
    assert_eq!(ok(trove_on(s3.addr, &repo, &c, &["cat", "latest", "big.txt"]), "cat"), big);
}

/// A change refused before it touches the tree (a sweep on another host passed the epoch it
/// began at) lets go of the roots it logged for what it stored, and leaves no plan open: nothing
/// changed, nothing is kept for it, and it succeeds when run again.
#[test]
fn a_tool_change_refused_before_it_applies_leaves_no_roots_behind() {
    let Fresh { s3, bucket, repo, tmp, work } = fresh("unapplied");
    let a = tmp.path().join("host-a");
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    let b = open_host(s3.addr, &bucket, "unapplied", &tmp.path().join("host-b"));
    let w = work.clone();
    let spec = trove::SessionSpec { workspace: Some("w".into()), persistent: true, ..Default::default() };
    let s = b.create_session(&spec, move |_| Ok(w), "agent").expect("session");
    // Something for the collections to condemn and sweep: a forgotten snapshot's file.
    let wd = work.to_str().expect("utf-8");
    for content in ["a first version", "a second version"] {
        std::fs::write(work.join("gone.txt"), content).expect("write");
        ok(trove_on(s3.addr, &repo, &a, &["snapshot", wd, "--workspace", "w"]), "snapshot");
    }
    ok(trove_on(s3.addr, &repo, &a, &["workspace", "retention", "w", "--keep-last", "1"]), "policy");
    ok(trove_on(s3.addr, &repo, &a, &["forget"]), "forget");
    let before = "written outside the tools\n";
    std::fs::write(work.join("outside.txt"), before).expect("write");
    let call = || {
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(before.as_bytes()));
        let params = serde_json::json!({"path": "outside.txt", "content": "replaced\n", "expectedSha256": sha});
        trove::tools::run(&b, &s, trove::tools::ToolCall::parse("write_file", params).expect("parse"), "agent")
    };
    let collect_twice = move || {
        for _ in 0..2 {
            ok(trove_on(s3.addr, &format!("s3://{bucket}/unapplied"), &a, &["gc", "--grace", "0s"]), "gc on a");
        }
        // The check before the apply reads the log again only when its replica is over a
        // second old.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    };
    trove::testing::set_hook("write_file:journaled", collect_twice);
    let refused = call();
    trove::testing::clear_hooks();
    let e = refused.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(std::fs::read_to_string(work.join("outside.txt")).expect("read"), before, "the tree is as it was");
    assert_eq!(trove::testing::plan_roots(&b).expect("roots"), 0, "no roots left in the log");
    call().expect("run again");
    assert_eq!(std::fs::read_to_string(work.join("outside.txt")).expect("read"), "replaced\n");
    assert_eq!(trove::testing::plan_roots(&b).expect("roots"), 0);
    ok(trove_on(s3.addr, &repo, &tmp.path().join("host-c"), &["check", "--read-data"]), "check on c");
}

/// Hosts of a bucket sign the audit log with keys of their own: each registers its public key
/// in the log with its first checkpoint, signs over the others' checkpoints, and a third host
/// that never signed (its key is not registered) verifies all of them. Given one host's key alone (`--pubkey`), the other's
/// checkpoints are named as problems (exit 3); given both, the log and its bundle verify.
#[test]
fn checkpoints_of_hosts_with_keys_of_their_own_verify_on_every_host() {
    let Fresh { s3, repo, tmp, work, .. } = fresh("keys");
    let w = work.to_str().expect("utf-8");
    let host = |name: &str| tmp.path().join(name);
    let (a, b, c) = (host("host-a"), host("host-b"), host("host-c"));
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    for (h, file) in [(&a, "a.txt"), (&b, "b.txt"), (&a, "a2.txt")] {
        std::fs::write(work.join(file), file).expect("write");
        ok(trove_on(s3.addr, &repo, h, &["snapshot", w, "--workspace", "w"]), "snapshot");
        ok(trove_on(s3.addr, &repo, h, &["audit", "checkpoint"]), "checkpoint");
    }
    let pubkey =
        |h: &std::path::Path| ok(trove_on(s3.addr, &repo, h, &["audit", "pubkey"]), "pubkey").trim().to_string();
    let (key_a, key_b) = (pubkey(&a), pubkey(&b));
    assert_ne!(key_a, key_b);
    let keys: serde_json::Value =
        serde_json::from_str(&ok(trove_on(s3.addr, &repo, &c, &["--json", "audit", "keys"]), "keys")).expect("json");
    let listed: Vec<&str> = keys.as_array().expect("a list").iter().map(|k| k["key"].as_str().expect("key")).collect();
    assert_eq!(listed, [key_a.as_str(), key_b.as_str()], "{keys}");
    assert!(keys.as_array().expect("a list").iter().all(|k| k["host"].is_string() && k["thisHost"] == false), "{keys}");

    let verify = |args: &[&str]| {
        let mut all = vec!["--json", "audit", "verify"];
        all.extend_from_slice(args);
        let o = trove_on(s3.addr, &repo, &c, &all);
        let report: serde_json::Value = serde_json::from_str(&common::stdout(&o)).expect("a report");
        (o.status.code(), report)
    };
    let (code, report) = verify(&[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["checkpoints"], 3, "{report}");
    assert_eq!(report["verifiedTo"], report["records"], "{report}");
    let (code, report) = verify(&["--pubkey", &key_a]);
    assert_eq!(code, Some(3), "{report}");
    let key_id = key_b.split('+').take(2).collect::<Vec<_>>().join("+");
    let problems = report["problems"].to_string();
    assert!(problems.contains("no signature by a key trusted here") && problems.contains(&key_id), "{report}");
    let (code, report) = verify(&["--pubkey", &key_a, "--pubkey", &key_b]);
    assert_eq!(code, Some(0), "{report}");

    let bundle = tmp.path().join("audit.bundle");
    ok(trove_on(s3.addr, &repo, &c, &["audit", "export", "--output", bundle.to_str().expect("utf-8")]), "export");
    let b = bundle.to_str().expect("utf-8");
    let (code, report) = verify(&["--bundle", b, "--pubkey", &key_a, "--pubkey", &key_b]);
    assert_eq!(code, Some(0), "{report}");
}

/// A snapshot one host searched (its search index, node-local and derived, names it) and
/// another host forgets: the first host applies the forget, clearing what it derived, and reads
/// on. (Found by the soak against a bucket: the replica refused the delete by its foreign key.)
#[test]
fn a_snapshot_searched_on_one_host_and_forgotten_on_another_leaves_both_reading() {
    let Fresh { s3, repo, tmp, work, .. } = fresh("derived");
    let w = work.to_str().expect("utf-8");
    let (a, b) = (tmp.path().join("host-a"), tmp.path().join("host-b"));
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "first snapshot");
    let first = ok(trove_on(s3.addr, &repo, &a, &["--json", "snapshots", "w"]), "list");
    let first: serde_json::Value = serde_json::from_str(&first).expect("json");
    let first = first.as_array().or_else(|| first["snapshots"].as_array()).expect("a list")[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    ok(trove_on(s3.addr, &repo, &b, &["grep", &first, "main", "--workspace", "w"]), "grep on b");
    std::fs::write(work.join("later.txt"), "later").expect("write");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "second snapshot");
    ok(trove_on(s3.addr, &repo, &a, &["workspace", "retention", "w", "--keep-last", "1"]), "policy");
    ok(trove_on(s3.addr, &repo, &a, &["forget"]), "forget on a");
    let listed = ok(trove_on(s3.addr, &repo, &b, &["--json", "snapshots", "w"]), "b catches up");
    assert!(!listed.contains(&first), "{listed}");
    ok(trove_on(s3.addr, &repo, &b, &["grep", "latest", "later", "--workspace", "w"]), "grep on b again");
}

/// What a test of a repository in a bucket starts from: the S3 server, a fresh bucket, the
/// address of a repository under `prefix` there (not made yet), a temporary directory, and a
/// rich workspace in it.
struct Fresh {
    s3: &'static common::s3::S3Server,
    bucket: String,
    repo: String,
    tmp: tempfile::TempDir,
    work: std::path::PathBuf,
}

fn fresh(prefix: &str) -> Fresh {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let repo = format!("s3://{bucket}/{prefix}");
    let tmp = tempfile::tempdir().expect("tmp");
    let work = tmp.path().join("work");
    common::rich_workspace(&work);
    Fresh { s3, bucket, repo, tmp, work }
}

/// A restore on a host with no cache fetches each pack it reads whole, once, into the node's
/// pack cache, and reads from there: a `cat` after it asks the bucket for no pack. The cache
/// keeps to `--cache-size` (a restore it cannot hold reads the rest blob by blob), and 0 keeps
/// none; every restore is byte for byte.
#[test]
fn a_restore_fetches_each_pack_once_into_a_cache_bounded_by_cache_size() {
    let Fresh { s3, bucket, repo, tmp, work } = fresh("cached");
    let w = work.to_str().expect("utf-8");
    let a = tmp.path().join("host-a");
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    // Three snapshots, each with new content: a pack each at least.
    let mut rng = trove::sample::Rng::new(39);
    for i in 0..3 {
        std::fs::write(work.join(format!("part-{i}.bin")), rng.bytes(1 << 20)).expect("write");
        ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "snapshot");
    }
    let raw = S3Backend::open(&bucket, "cached", &settings(s3.addr)).expect("open");
    let packs: Vec<(String, u64)> =
        raw.list("packs/").expect("list").into_iter().map(|k| (k.clone(), raw.size(&k).expect("size"))).collect();
    assert!(packs.len() >= 3, "{packs:?}");
    let total: u64 = packs.iter().map(|(_, s)| s).sum();
    let pack_requests = |seen: &common::s3::Seen| -> Vec<(String, String)> {
        let seen = seen.lock().expect("seen");
        seen.iter().filter(|(_, p, _)| p.contains("/packs/")).map(|(m, p, _)| (m.clone(), p.clone())).collect()
    };
    let cached = |host: &std::path::Path| -> Vec<u64> {
        let ids: Vec<_> = std::fs::read_dir(host)
            .expect("host")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.file_name().is_some_and(|n| n.len() == 32))
            .collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        match std::fs::read_dir(ids[0].join("pack-cache")) {
            Ok(files) => files.map(|f| f.expect("file").metadata().expect("meta").len()).collect(),
            Err(_) => Vec::new(),
        }
    };

    // A new host: one GET of each pack, nothing else of them.
    let (counted, seen) = proxy(s3.addr, Arc::new(|_, _, _| Action::Forward));
    let b = tmp.path().join("host-b");
    let out = tmp.path().join("restored-b");
    ok(trove_on(counted, &repo, &b, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore on b");
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
    let mut asked = pack_requests(&seen);
    asked.sort();
    assert_eq!(asked.len(), packs.len(), "one request a pack: {asked:#?}");
    assert!(asked.iter().all(|(m, _)| m == "GET"), "{asked:#?}");
    asked.dedup();
    assert_eq!(asked.len(), packs.len(), "each pack once: {asked:#?}");
    let mut held = cached(&b);
    held.sort_unstable();
    let mut sizes: Vec<u64> = packs.iter().map(|(_, s)| *s).collect();
    sizes.sort_unstable();
    assert_eq!(held, sizes, "the cache holds the packs as the bucket does");
    // Read from the cache after: the bucket is asked for no pack.
    seen.lock().expect("seen").clear();
    let big = trove_on(counted, &repo, &b, &["cat", "latest", "part-2.bin"]);
    assert!(big.status.success(), "cat: {}", common::stderr(&big));
    assert!(big.stdout == std::fs::read(work.join("part-2.bin")).expect("read"), "cat gives the file's bytes");
    ok(
        trove_on(counted, &repo, &b, &["restore", "latest", "--to", tmp.path().join("again").to_str().expect("utf-8")]),
        "again",
    );
    assert_eq!(pack_requests(&seen), Vec::<(String, String)>::new());

    // A bound under the packs' total: what fits is cached, the rest read blob by blob.
    let bound = total - packs.iter().map(|(_, s)| *s).min().unwrap_or(0) / 2 - 1;
    let c = tmp.path().join("host-c");
    let out = tmp.path().join("restored-c");
    let o = trove_cmd(s3.addr, &repo, &c, &["restore", "latest", "--to", out.to_str().expect("utf-8")])
        .env("TROVE_CACHE_SIZE", bound.to_string())
        .output()
        .expect("run");
    ok(o, "restore on c");
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
    let held: u64 = cached(&c).iter().sum();
    assert!(held <= bound && held > 0, "{held} of {bound}");

    // 0: nothing cached, the restore as whole.
    let d = tmp.path().join("host-d");
    let out = tmp.path().join("restored-d");
    let (counted, seen) = proxy(s3.addr, Arc::new(|_, _, _| Action::Forward));
    ok(
        trove_on(counted, &repo, &d, &["--cache-size", "0", "restore", "latest", "--to", out.to_str().expect("utf-8")]),
        "restore on d",
    );
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
    assert_eq!(cached(&d), Vec::<u64>::new());
    assert!(pack_requests(&seen).len() > packs.len(), "ranged reads: {:#?}", pack_requests(&seen));
    let bad = trove_on(s3.addr, &repo, &d, &["--cache-size", "lots", "snapshots"]);
    assert_eq!(bad.status.code(), Some(2), "{}", common::stderr(&bad));
    assert!(common::stderr(&bad).contains("is not a size"), "{}", common::stderr(&bad));

    // `check` verifies the bucket, not a host's cached copies: a pack gone from the bucket is
    // found on b, which still holds it, with or without reading the data.
    let (gone, _) = &packs[0];
    raw.delete(gone).expect("delete a pack");
    let name = gone.rsplit('/').next().expect("name").trim_end_matches(".pack");
    for args in [&["check"][..], &["check", "--read-data"]] {
        let o = trove_on(s3.addr, &repo, &b, args);
        let said = format!("{}{}", common::stdout(&o), common::stderr(&o));
        assert!(!o.status.success(), "{args:?}: {said}");
        assert!(said.contains(name), "{args:?} names the pack {name}: {said}");
    }
}

/// A host writes a copy of its replica every `TROVE_LOG_COPY_EVERY` segments; a new host
/// starts from the newest copy and reads only the segments after it, and ends with what a
/// host that replayed the whole log has (the audit log verifying).
#[test]
fn a_new_host_starts_from_a_copy_of_a_replica_and_reads_only_the_log_after_it() {
    let Fresh { s3, bucket, repo, tmp, work } = fresh("copied");
    let w = work.to_str().expect("utf-8");
    let a = tmp.path().join("host-a");
    let on_a = |args: &[&str]| {
        let o = trove_cmd(s3.addr, &repo, &a, args).env("TROVE_LOG_COPY_EVERY", "4").output().expect("run");
        ok(o, &args.join(" "))
    };
    on_a(&["init"]);
    for i in 0..6 {
        std::fs::write(work.join("n.txt"), format!("version {i}")).expect("write");
        on_a(&["snapshot", w, "--workspace", "w"]);
    }
    let raw = S3Backend::open(&bucket, "copied", &settings(s3.addr)).expect("open");
    let copies = raw.list("replica/").expect("list");
    assert_eq!(copies, ["replica/00000000000000000004"], "a copy at segment 4");
    let segments = raw.list("log/").expect("list").len();
    assert!(segments >= 7, "{segments}");

    let (counted, seen) = proxy(s3.addr, Arc::new(|_, _, _| Action::Forward));
    let b = tmp.path().join("host-b");
    let listed = |host: &std::path::Path, s3: std::net::SocketAddr| -> serde_json::Value {
        serde_json::from_str(&ok(trove_on(s3, &repo, host, &["--json", "snapshots", "w"]), "snapshots")).expect("json")
    };
    let from_copy = listed(&b, counted);
    let paths: Vec<String> = seen.lock().expect("seen").iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    for seq in 1..=4 {
        let segment = format!("/log/{seq:020}");
        // Segment 4's length is asked (HEAD): a copy past the log's end is not used.
        let read = |p: &&String| p.ends_with(&segment) && !(seq == 4 && p.starts_with("HEAD"));
        assert!(!paths.iter().any(|p| read(&p)), "segment {seq} was read: {paths:#?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("HEAD") && p.ends_with("/log/00000000000000000004")), "{paths:#?}");
    assert!(paths.iter().any(|p| p.starts_with("GET") && p.contains("/replica/00000000000000000004")), "{paths:#?}");
    assert!(paths.iter().any(|p| p.ends_with("/log/00000000000000000005")), "{paths:#?}");
    // The same as a host that replayed everything, and the audit log verifies from the copy.
    assert_eq!(from_copy, listed(&a, s3.addr));
    assert_eq!(from_copy.as_array().map(Vec::len), Some(6));
    let verified = ok(trove_on(s3.addr, &repo, &b, &["audit", "verify"]), "audit verify on b");
    assert!(verified.contains("verified"), "{verified}");
    let out = tmp.path().join("restored");
    ok(trove_on(s3.addr, &repo, &b, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore on b");
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
}

/// Garbage collection in a bucket: what a forgotten snapshot alone held is condemned, kept
/// through the grace period (measured by the store's clock), then deleted with its pack; a
/// host with no cache still restores what stays, and `check --read-data` finds the bucket
/// whole. An operation on another host that began before the condemnation and commits after
/// the sweep is refused, writing nothing, and succeeds when run again. A collection still
/// running on one host keeps another host's from starting.
#[test]
fn gc_in_a_bucket_waits_out_its_grace_then_deletes_what_stays_unreached() {
    let Fresh { s3, bucket, repo, tmp, work } = fresh("collected");
    let w = work.to_str().expect("utf-8");
    let a = tmp.path().join("host-a");
    ok(trove_on(s3.addr, &repo, &a, &["init"]), "init");
    let mut rng = trove::sample::Rng::new(16);
    std::fs::write(work.join("big.bin"), rng.bytes(3 << 20)).expect("write");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "first snapshot");
    std::fs::write(work.join("big.bin"), rng.bytes(3 << 20)).expect("write");
    ok(trove_on(s3.addr, &repo, &a, &["snapshot", w, "--workspace", "w"]), "second snapshot");
    ok(trove_on(s3.addr, &repo, &a, &["workspace", "retention", "w", "--keep-last", "1"]), "policy");
    ok(trove_on(s3.addr, &repo, &a, &["forget"]), "forget");
    let raw = S3Backend::open(&bucket, "collected", &settings(s3.addr)).expect("open");
    let pack_bytes = || -> u64 { raw.list("packs/").expect("list").iter().map(|k| raw.size(k).expect("size")).sum() };
    let before = pack_bytes();
    let gc = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--json", "gc"];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(trove_on(s3.addr, &repo, &a, &all), "gc")).expect("json")
    };

    // A clock reading a killed collection left an hour ago goes; one of now stays.
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs();
    let (stale, recent) = (format!("clock/{:012}-left", now_s - 7200), format!("clock/{now_s:012}-reading"));
    for key in [&stale, &recent] {
        raw.put(key, b"").expect("put");
    }

    // Within the grace period: condemned, nothing deleted.
    let r = gc(&[]);
    assert_eq!(raw.list("clock/").expect("list"), vec![recent]);
    assert_eq!(r["deleted"]["objects"], 0, "{r}");
    assert!(r["waiting"].as_u64().expect("waiting") > 0, "{r}");
    assert_eq!(pack_bytes(), before);

    // Another host begins an operation now, before the sweep: its writes are refused after it.
    let b = open_host(s3.addr, &bucket, "collected", &tmp.path().join("host-b"));
    let in_flight = trove::testing::lease(&b, "a long snapshot").expect("lease");

    // Past it (no grace): deleted, and the pack of the forgotten version with it.
    let r = gc(&["--grace", "0s"]);
    assert!(r["deleted"]["objects"].as_u64().expect("deleted") > 0, "{r}");
    assert_eq!(r["waiting"], 0, "{r}");
    assert!(pack_bytes() < before - (2 << 20), "{} of {before} bytes of packs left", pack_bytes());

    std::fs::write(work.join("late.txt"), "written by a long operation").expect("write");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..trove::SnapshotOptions::default() };
    let refused = b.snapshot(&work, &opts).expect_err("refused");
    assert_eq!(refused.kind(), ErrorKind::Conflict, "{refused}");
    assert!(refused.to_string().contains("garbage collection"), "{refused}");
    drop(in_flight);
    b.snapshot(&work, &opts).expect("run again");
    drop(b);

    // A host with no cache restores the latest byte for byte, and the bucket checks whole.
    let c = tmp.path().join("host-c");
    let out = tmp.path().join("restored");
    ok(trove_on(s3.addr, &repo, &c, &["restore", "latest", "--to", out.to_str().expect("utf-8")]), "restore");
    assert_eq!(common::tree_state(&out), common::tree_state(&work));
    ok(trove_on(s3.addr, &repo, &c, &["check", "--read-data"]), "check");
    ok(trove_on(s3.addr, &repo, &c, &["audit", "verify"]), "audit verify");

    // One collection at a time across hosts: one killed mid-run on a still keeps c's from
    // starting (until it is stale), and c's says so.
    let killed = trove_cmd(s3.addr, &repo, &a, &["gc"]).env("TROVE_FAILPOINT", "gc:marked").output().expect("run");
    assert!(!killed.status.success());
    let other = trove_on(s3.addr, &repo, &c, &["gc"]);
    assert!(!other.status.success(), "{}", common::stderr(&other));
    assert!(common::stderr(&other).contains("has not ended"), "{}", common::stderr(&other));
}
