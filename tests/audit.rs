//! The audit log an operator can trust (issue 14): every way of rewriting it directly in SQLite
//! (triggers dropped) is caught and named by `trove audit verify`; checkpoints are signed and
//! written when due; time never goes back; queries, history, bundles verified offline, and
//! group-committed appends from many threads.

mod common;

use std::path::{Path, PathBuf};

use common::{stdout, trove};
use rusqlite::Connection;
use serde_json::{json, Value};
use trove::tlog::note::{SignerKey, VerifierKey};
use trove::{AuditAppender, AuditQuery, AuditRecord, Order, Repo};

/// A repository whose log holds `n` records past `init`, checkpointed every 4.
fn log_of(dir: &Path, n: usize) -> (PathBuf, Repo) {
    let path = dir.join("repo");
    let settings = trove::AuditSettings { checkpoint_every: 4, ..Default::default() };
    let repo = Repo::init_with(&path, "t", settings).expect("init");
    for i in 0..n {
        let mut r = AuditRecord::ok(trove::now_ns(), if i % 2 == 0 { "alice" } else { "bob" }, "write_file");
        r.workspace = Some("w".into());
        r.path = Some(format!("src/f{}.rs", i % 3).into_bytes());
        r.details = json!({"i": i});
        repo.audit(r).expect("append");
    }
    (path, repo)
}

/// The manifest with its audit triggers dropped: what someone with write access can do.
fn raw(path: &Path) -> Connection {
    let c = Connection::open(path.join("manifest.db")).expect("open");
    c.execute_batch(
        "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete;
         DROP TRIGGER IF EXISTS audit_append_only;",
    )
    .expect("drop triggers");
    c
}

fn verify(path: &Path) -> trove::VerifyReport {
    Repo::open(path).expect("open").verify_audit(&[]).expect("verify")
}

#[test]
fn an_untouched_log_verifies_and_checkpoints_come_when_due() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    // init + 10 = 11 records, checkpointed every 4: at 4 and 8.
    let sizes: Vec<u64> = repo.checkpoints().expect("list").iter().map(|c| c.size).collect();
    assert_eq!(sizes, [4, 8]);
    let report = verify(&path);
    assert!(report.ok(), "{report:?}");
    assert_eq!((report.records, report.verified_to, report.unsigned_tail, report.checkpoints), (11, 8, 3, 2));
    // Each checkpoint is a C2SP note the public key opens.
    let key = VerifierKey::parse(&repo.audit_verifier().expect("key").to_string()).expect("parse");
    for c in repo.checkpoints().expect("list") {
        let cp = trove::tlog::note::Checkpoint::parse(key.open(&c.note).expect("signed")).expect("checkpoint");
        assert_eq!((cp.size, cp.root), (c.size, c.root));
    }
    // The key lives outside the manifest, readable by its owner only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path.join("audit.key")).expect("key").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let out = trove(&path, &["audit", "verify"]);
    assert!(out.status.success(), "{}", stdout(&out));
}

#[test]
fn records_keep_only_their_columns_and_their_encodings_are_computed_from_them() {
    // Schema 17: a record's canonical encoding is not stored twice. The rows keep an empty one;
    // verification, the tree and bundles compute it from the columns.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    drop(repo);
    let c = raw(&path);
    let (rows, kept): (i64, i64) = c
        .query_row("SELECT count(*), SUM(length(encoded) > 0) FROM audit", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("count");
    assert_eq!((rows, kept), (11, 0));
    // Each record's leaf is the hash of the encoding its columns give.
    let repo = Repo::open(&path).expect("open");
    for seq in 1..=11 {
        let full = repo.audit_record(seq).expect("read").expect("record");
        let leaf: Vec<u8> = c
            .query_row("SELECT hash FROM audit_tree WHERE level = 0 AND idx = ?1", [seq - 1], |r| r.get(0))
            .expect("leaf");
        assert_eq!(leaf, trove::tlog::merkle::leaf_hash(&full.record.encode(seq)).to_vec(), "record {seq}");
    }
    // The tree dropped is grown again from the columns, and the log still verifies. (So is a
    // column edited with it, as a rewrite of column and encoding always was: records no
    // checkpoint covers are proven by nothing but the manifest, and verification says so.)
    c.execute("DELETE FROM audit_tree", []).expect("drop the tree");
    drop(repo);
    Repo::open(&path).expect("open").audit(AuditRecord::ok(trove::now_ns(), "t", "noop")).expect("append");
    let report = verify(&path);
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.records, 12);
}

/// One way of rewriting the log, and what `verify` must say about it.
struct Tamper {
    name: &'static str,
    sql: &'static str,
    first_bad: i64,
    says: &'static str,
}

#[test]
fn every_rewrite_of_the_log_is_caught_and_named() {
    let cases = [
        Tamper {
            name: "an edited column",
            sql: "UPDATE audit SET actor = 'mallory' WHERE seq = 6",
            first_bad: 6,
            says: "record 6 was edited",
        },
        Tamper {
            name: "an edited encoding",
            sql: "UPDATE audit SET encoded = x'00' WHERE seq = 3",
            first_bad: 3,
            says: "record 3 was edited",
        },
        Tamper {
            name: "a deleted record",
            sql: "DELETE FROM audit WHERE seq = 5",
            first_bad: 5,
            says: "record 5 is missing",
        },
        Tamper {
            name: "a truncated log",
            sql: "DELETE FROM audit WHERE seq > 6",
            first_bad: 7,
            says: "records 7 on were removed",
        },
        Tamper {
            name: "an inserted record",
            sql: "UPDATE audit SET seq = seq + 100 WHERE seq >= 7; UPDATE audit SET seq = seq - 99 WHERE seq >= 107;
                  INSERT INTO audit SELECT 7, time_ns, 'mallory', operation, workspace, session, path, dest_path,
                         before_sha256, after_sha256, before_object, after_object, outcome, details, encoded
                  FROM audit WHERE seq = 6",
            first_bad: 7,
            says: "record 7 was edited",
        },
        Tamper {
            name: "two records swapped",
            sql: "UPDATE audit SET seq = -1 WHERE seq = 2; UPDATE audit SET seq = 2 WHERE seq = 3;
                  UPDATE audit SET seq = 3 WHERE seq = -1",
            first_bad: 2,
            says: "record 2 was edited",
        },
        Tamper {
            name: "a time moved back",
            sql: "UPDATE audit SET time_ns = 1 WHERE seq = 9",
            first_bad: 9,
            says: "record 9 was edited",
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().expect("tmp");
        let (path, repo) = log_of(dir.path(), 10);
        drop(repo);
        raw(&path).execute_batch(case.sql).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let report = verify(&path);
        assert!(!report.ok(), "{}: not caught", case.name);
        assert_eq!(report.first_bad_seq, Some(case.first_bad), "{}: {report:?}", case.name);
        assert!(report.problems.iter().any(|p| p.contains(case.says)), "{}: {:?}", case.name, report.problems);
        // The command line says so and exits 3.
        let out = trove(&path, &["audit", "verify"]);
        assert_eq!(out.status.code(), Some(3), "{}: {}", case.name, stdout(&out));
        assert!(stdout(&out).contains(&format!("first divergent record is {}", case.first_bad)), "{}", stdout(&out));
    }
}

#[test]
fn a_rewrite_with_its_encoding_and_tree_recomputed_is_caught_by_the_signed_root() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    // Record 3 rewritten everywhere it is kept: columns, encoding, leaf, and the nodes above it
    // (recomputed as an attacker would), so only a signature stands in the way.
    let mut rec = repo.audit_record(3).expect("read").expect("record").record;
    drop(repo);
    rec.actor = "mallory".into();
    let encoded = rec.encode(3);
    let c = raw(&path);
    c.execute("UPDATE audit SET actor = 'mallory', encoded = ?1 WHERE seq = 3", [&encoded]).expect("rewrite");
    c.execute("DELETE FROM audit_tree", []).expect("drop tree");
    drop(c);
    // The next append rebuilds the tree from the rewritten records.
    Repo::open(&path).expect("open").audit(AuditRecord::ok(trove::now_ns(), "t", "noop")).expect("append");
    let report = verify(&path);
    assert!(!report.ok());
    assert_eq!(report.first_bad_seq, Some(1), "{report:?}");
    assert!(
        report.problems.iter().any(|p| p.contains("records 1 to 4 do not hash to the root checkpoint 4 signs")),
        "{:?}",
        report.problems
    );
}

#[test]
fn a_forged_or_edited_checkpoint_is_caught() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    let origin = repo.audit_origin().expect("origin");
    drop(repo);
    // A checkpoint signed by another key under the log's name.
    let forger = SignerKey::generate(&origin).expect("key");
    let c = raw(&path);
    let root: Vec<u8> =
        c.query_row("SELECT root FROM audit_checkpoints WHERE size = 8", [], |r| r.get(0)).expect("root");
    let text = trove::tlog::note::Checkpoint {
        origin: origin.clone(),
        size: 8,
        root: root.clone().try_into().expect("hash"),
        time_ns: None,
    }
    .text();
    c.execute("UPDATE audit_checkpoints SET note = ?1 WHERE size = 8", [forger.sign(&text).expect("sign")])
        .expect("forge");
    drop(c);
    let report = verify(&path);
    assert!(
        report.problems.iter().any(|p| p.contains("checkpoint 8") && p.contains("no signature")),
        "{:?}",
        report.problems
    );
    assert_eq!(report.verified_to, 4);
    // A checkpoint row whose root was changed beside its note.
    let c = raw(&path);
    c.execute("UPDATE audit_checkpoints SET root = zeroblob(32) WHERE size = 4", []).expect("edit");
    drop(c);
    let report = verify(&path);
    assert!(report.problems.iter().any(|p| p.starts_with("checkpoint 4")), "{:?}", report.problems);
    // Verifying with another log's public key finds nothing signed.
    let other = SignerKey::generate("someone/else").expect("key").verifier();
    let report = Repo::open(&path).expect("open").verify_audit(std::slice::from_ref(&other)).expect("verify");
    assert_eq!(report.verified_to, 0);
    assert!(!report.ok());
}

#[test]
fn time_never_goes_backwards_and_a_step_back_is_recorded() {
    let repo = Repo::in_memory().expect("repo");
    let now = trove::now_ns();
    let seq1 = repo.audit(AuditRecord::ok(now, "t", "first")).expect("append");
    let seq2 = repo.audit(AuditRecord::ok(now - 5_000_000_000, "t", "stepped")).expect("append");
    let r = repo.audit_record(seq2).expect("read").expect("record").record;
    assert_eq!(r.time_ns, now, "the stepped-back record keeps the last time");
    assert_eq!(r.details["clockStepBackNs"], json!(5_000_000_000i64));
    assert_eq!(seq2, seq1 + 1);
    assert!(repo.verify_audit(&[]).expect("verify").ok());
}

#[test]
fn queries_filter_page_and_print_as_table_json_lines_and_csv() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 12);
    let q = |f: AuditQuery| -> Vec<i64> { repo.audit_query(&f).expect("query").iter().map(|r| r.seq).collect() };
    let base = AuditQuery { limit: 100, order: Order::After(0), ..Default::default() };
    assert_eq!(q(AuditQuery { actor: Some("bob".into()), ..base.clone() }), [3, 5, 7, 9, 11, 13]);
    assert_eq!(q(AuditQuery { path: Some(b"src/f1.rs".to_vec()), ..base.clone() }), [3, 6, 9, 12]);
    assert_eq!(q(AuditQuery { prefix: Some(b"src".to_vec()), limit: 3, ..base.clone() }), [2, 3, 4]);
    assert_eq!(q(AuditQuery { prefix: Some(b"sr".to_vec()), ..base.clone() }), Vec::<i64>::new());
    assert_eq!(q(AuditQuery { operation: Some("init".into()), ..base.clone() }), [1]);
    assert_eq!(q(AuditQuery { order: Order::After(10), ..base.clone() }), [11, 12, 13]);
    assert_eq!(q(AuditQuery { order: Order::Newest, limit: 2, ..base.clone() }), [12, 13]);
    assert_eq!(q(AuditQuery { until_ns: Some(0), ..base.clone() }), Vec::<i64>::new());
    let t5 = repo.audit_record(5).expect("read").expect("record").record.time_ns;
    let t8 = repo.audit_record(8).expect("read").expect("record").record.time_ns;
    let window = q(AuditQuery { since_ns: Some(t5), until_ns: Some(t8), ..base.clone() });
    assert_eq!((window.first(), window.last()), (Some(&5), Some(&7)), "{window:?}");
    drop(repo);
    let out = trove(&path, &["audit", "log", "--actor", "alice", "--format", "jsonl", "--after", "0", "--limit", "3"]);
    let lines: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines.iter().map(|l| l["seq"].as_i64().expect("seq")).collect::<Vec<_>>(), [2, 4, 6]);
    let out = trove(&path, &["audit", "log", "--format", "csv", "--prefix", "src/f2.rs", "--after", "0"]);
    let csv = stdout(&out);
    assert!(csv.starts_with("seq,time,actor,operation,"), "{csv}");
    assert_eq!(csv.lines().count(), 5, "{csv}");
    let out = trove(&path, &["--json", "audit", "log", "--limit", "2", "--proof"]);
    let entries: Value = serde_json::from_str(&stdout(&out)).expect("json");
    let proof = &entries[1]["proof"];
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(v.as_str().expect("b64")).expect("decode")
    };
    let hashes: Vec<Vec<u8>> = proof["proof"].as_array().expect("proof").iter().map(b64).collect();
    trove::tlog::merkle::verify_inclusion(
        proof["leafIndex"].as_u64().expect("index"),
        proof["treeSize"].as_u64().expect("size"),
        &b64(&proof["leafHash"]),
        &hashes,
        &b64(&proof["root"]),
    )
    .expect("the proof holds");
    for bad in [&["audit", "log", "--since", "soon"][..], &["audit", "log", "--path", "../x"]] {
        assert_eq!(trove(&path, bad).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn a_paths_history_follows_renames() {
    let dir = tempfile::tempdir().expect("tmp");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    let repo = Repo::init(&dir.path().join("repo"), "t").expect("init");
    let r = ws.clone();
    let spec = trove::SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    let run = |tool: &str, p: Value| {
        let call = trove::tools::ToolCall::parse(tool, p).expect("parse");
        trove::tools::run(&repo, &repo.session(&s.id).expect("s"), call, "agent").expect(tool).to_json()
    };
    let first = run("create_file", json!({"path": "old.txt", "content": "one\n"}));
    run("move_file", json!({"from": "old.txt", "to": "new.txt"}));
    run("write_file", json!({"path": "new.txt", "content": "two\n", "expectedSha256": first["sha256"]}));
    run("create_file", json!({"path": "unrelated.txt", "content": "x"}));
    let h = repo.path_history("w", b"new.txt", 100).expect("history");
    let seen: Vec<(&str, &str)> = h.iter().map(|e| (e.change.as_deref().unwrap_or(""), e.as_path.as_str())).collect();
    assert_eq!(seen, [("write", "new.txt"), ("move", "new.txt"), ("create", "old.txt")]);
    // `trove revert` works from a row it lists: undo the write.
    let write_seq = h[0].entry.seq;
    repo.revert(write_seq, "operator").expect("revert");
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).expect("read"), "one\n");
}

#[test]
fn a_bundle_verifies_offline_with_the_public_key_alone_and_tampering_shows() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    let pubkey = repo.audit_verifier().expect("key").to_string();
    drop(repo);
    let bundle = dir.path().join("audit.bundle");
    let out = trove(&path, &["audit", "export", "--from", "3", "-o", bundle.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    // Elsewhere: no repository, only the key.
    let elsewhere = dir.path().join("nowhere");
    let out = trove(&elsewhere, &["audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", &pubkey]);
    assert!(out.status.success(), "{}", stdout(&out));
    let text = std::fs::read_to_string(&bundle).expect("read");
    // One record changed inside the bundle: its leaf no longer hashes to the signed root.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("{\"record\"") && l.contains("\"seq\":5")).expect("record 5");
    let mut rec: Value = serde_json::from_str(lines[at]).expect("json");
    let (_, mut r) = {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(rec["record"]["encoded"].as_str().expect("enc"))
            .expect("b64");
        AuditRecord::decode(&bytes).expect("decode")
    };
    r.actor = "mallory".into();
    rec["record"]["encoded"] = {
        use base64::Engine;
        json!(base64::engine::general_purpose::STANDARD.encode(r.encode(5)))
    };
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[at] = rec.to_string();
    std::fs::write(&bundle, edited.join("\n") + "\n").expect("write");
    let out = trove(&elsewhere, &["audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", &pubkey]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    // And with another key, nothing verifies.
    std::fs::write(&bundle, text).expect("restore");
    let other = SignerKey::generate("someone/else").expect("key").verifier().to_string();
    let out = trove(&elsewhere, &["audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", &other]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn records_appended_from_many_threads_are_group_committed_in_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 0);
    drop(repo);
    let appender = AuditAppender::open(&path).expect("appender");
    let seqs: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let a = appender.clone();
                s.spawn(move || {
                    (0..50)
                        .map(|i| {
                            a.append(AuditRecord::ok(trove::now_ns(), &format!("t{t}"), &format!("op{i}")))
                                .expect("append")
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    let mut sorted = seqs.clone();
    sorted.sort();
    assert_eq!(sorted, (2..402).collect::<Vec<i64>>(), "every record once, contiguous after init");
    let report = verify(&path);
    assert!(report.ok(), "{report:?}");
    assert!(report.unsigned_tail < 4, "checkpoints came with the batches, every 4 records: {report:?}");
}

#[test]
fn a_log_without_its_tree_gets_it_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 6);
    drop(repo);
    raw(&path).execute("DELETE FROM audit_tree", []).expect("drop the tree");
    let repo = Repo::open(&path).expect("open");
    repo.audit(AuditRecord::ok(trove::now_ns(), "t", "more")).expect("append rebuilds the tree");
    assert!(repo.verify_audit(&[]).expect("verify").ok());
    assert_eq!(repo.inclusion_proof(3, None).expect("proof").tree_size, 8);
}

#[test]
fn a_witness_cosigns_checkpoints_and_a_failing_one_is_no_failure() {
    let dir = tempfile::tempdir().expect("tmp");
    let witness = dir.path().join("witness.sh");
    std::fs::write(&witness, "#!/bin/sh\ncat\nprintf '\\342\\200\\224 witness.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\\n'\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&witness, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let settings = trove::AuditSettings {
        checkpoint_every: 2,
        witness: Some(vec![witness.to_string_lossy().into_owned()]),
        ..Default::default()
    };
    let repo = Repo::init_with(&dir.path().join("repo"), "t", settings).expect("init");
    repo.audit(AuditRecord::ok(trove::now_ns(), "t", "x")).expect("append");
    let c = repo.latest_checkpoint().expect("read").expect("a checkpoint at 2");
    assert!(c.note.contains("\u{2014} witness.example "), "{}", c.note);
    assert!(repo.verify_audit(&[]).expect("verify").ok());
    let broken = trove::AuditSettings {
        checkpoint_every: 1,
        witness: Some(vec!["/nonexistent/witness".into()]),
        ..Default::default()
    };
    let repo = Repo::init_with(&dir.path().join("repo2"), "t", broken).expect("init");
    repo.audit(AuditRecord::ok(trove::now_ns(), "t", "x")).expect("append despite the witness");
    assert!(repo.latest_checkpoint().expect("read").is_some());
}

/// Reads a Server-Sent Events stream until `n` events came: their ids and data.
fn events(addr: std::net::SocketAddr, target: &str, last_id: Option<&str>, n: usize) -> Vec<(i64, Value)> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    let auth = format!("Bearer {}", common::http::TOKEN);
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(id) = last_id {
        headers.push(("Last-Event-ID", id));
    }
    common::http::send(&mut s, "GET", target, &headers, b"");
    let (mut raw, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let text = String::from_utf8_lossy(&raw).into_owned();
        let got: Vec<(i64, Value)> = text
            .split("\n\n")
            .filter_map(|ev| {
                let id = ev.lines().find_map(|l| l.strip_prefix("id: "))?.trim().parse().ok()?;
                let data = ev.lines().find_map(|l| l.strip_prefix("data: "))?;
                Some((id, serde_json::from_str(data).ok()?))
            })
            .collect();
        if got.len() >= n {
            assert!(text.contains("text/event-stream"), "{text}");
            return got;
        }
        let k = s.read(&mut buf).expect("read the stream");
        assert!(k > 0, "the stream ended: {text}");
        raw.extend_from_slice(&buf[..k]);
    }
}

#[test]
fn over_http_the_log_is_queried_streamed_proven_and_reads_are_recorded() {
    use common::http;
    let s =
        http::start(Some(http::TOKEN), &["--audit-reads", "--checkpoint-interval", "1s", "--reap-interval", "200ms"]);
    let id = s.session(r#"{"workspace": "w", "persistent": true}"#);
    let put = http::request(
        s.addr,
        "PUT",
        &format!("/v1/sessions/{id}/files/notes.md"),
        &[("Authorization", &format!("Bearer {}", http::TOKEN)), ("If-None-Match", "*")],
        b"hello\n",
    );
    assert!(put.status < 300, "{}", put.text());
    assert_eq!(s.get(&format!("/api/sessions/{id}/files/notes.md")).status, 200);
    // The records of this session: who (the token's id), what, and the read.
    let page = s.get(&format!("/v1/audit?session={id}&after=0")).json();
    let records = page["records"].as_array().expect("records");
    let ops: Vec<&str> = records.iter().filter_map(|r| r["operation"].as_str()).collect();
    assert!(ops.contains(&"session_create") && ops.contains(&"read"), "{ops:?}");
    assert!(records.iter().all(|r| r["actor"] == json!("env")), "{records:?}");
    let read = records.iter().find(|r| r["operation"] == json!("read")).expect("read");
    assert_eq!(read["path"], json!("notes.md"));
    let after = page["nextAfter"].as_i64().expect("cursor");
    assert_eq!(s.get(&format!("/v1/audit?session={id}&after={after}")).json()["records"], json!([]));
    assert_eq!(s.get("/v1/audit?operation=session_create&limit=1").json()["records"].as_array().map(Vec::len), Some(1));
    for bad in ["limit=0", "after=-1", "since=yesterday", "path=a&prefix=b", "color=red"] {
        assert_eq!(s.get(&format!("/v1/audit?{bad}")).status, 400, "{bad}");
    }
    // A live stream from the start, then resumed after its third event.
    let first = events(s.addr, "/v1/audit/stream?after=0", None, 4);
    assert_eq!(first.iter().take(4).map(|(i, _)| *i).collect::<Vec<_>>(), [1, 2, 3, 4]);
    let resumed = events(s.addr, "/v1/audit/stream", Some("3"), 1);
    assert_eq!(resumed[0].0, 4);
    // New records arrive on an open stream.
    let total = s.get("/v1/audit?limit=1").json()["nextAfter"].as_i64().expect("size");
    let addr = s.addr;
    let watcher = std::thread::spawn(move || events(addr, "/v1/audit/stream", None, 1));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(s.get("/v1/trash").status, 200);
    let live = watcher.join().expect("watcher");
    assert!(live[0].0 > total, "{live:?}");
    // A checkpoint comes within its interval; a record's proof leads to its root.
    let cp = {
        assert!(http::eventually(10, || s.get("/v1/audit/checkpoint").status == 200));
        s.get("/v1/audit/checkpoint").json()
    };
    let pubkey = Repo::open(&s.repo).expect("open").audit_verifier().expect("key");
    let note = cp["note"].as_str().expect("note");
    let signed = trove::tlog::note::Checkpoint::parse(pubkey.open(note).expect("signed")).expect("checkpoint");
    let proof = s.get(&format!("/v1/audit/proof/2?size={}", signed.size)).json();
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(v.as_str().expect("b64")).expect("decode")
    };
    let hashes: Vec<Vec<u8>> = proof["proof"].as_array().expect("proof").iter().map(b64).collect();
    trove::tlog::merkle::verify_inclusion(1, signed.size, &b64(&proof["leafHash"]), &hashes, &signed.root)
        .expect("record 2 is in the signed log");
    assert_eq!(s.get("/v1/audit/proof/999999").status, 404);
    let c = s.get(&format!("/v1/audit/consistency?from=1&to={}", signed.size)).json();
    assert_eq!(c["toRoot"], cp["root"]);
    // The path's history.
    let h = s.get("/v1/audit/history?workspace=w&path=notes.md").json();
    assert!(h.as_array().is_some_and(|a| !a.is_empty()), "{h}");
    assert_eq!(s.get("/v1/audit/history?workspace=w&path=..").status, 400);
}

#[test]
fn audit_log_follow_prints_new_records_as_they_come() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 2);
    let mut child = std::process::Command::new(common::trove_bin())
        .arg("--repo")
        .arg(&path)
        .args(["audit", "log", "--follow", "--format", "jsonl", "--limit", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first: Value = serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    assert_eq!(first["seq"], json!(3), "the newest record first");
    for op in ["later_one", "later_two"] {
        repo.audit(AuditRecord::ok(trove::now_ns(), "t", op)).expect("append");
    }
    let ops: Vec<String> = (0..2)
        .map(|_| {
            let v: Value = serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
            v["operation"].as_str().expect("op").to_string()
        })
        .collect();
    assert_eq!(ops, ["later_one", "later_two"]);
    child.kill().expect("kill");
    child.wait().expect("wait");
}

/// Record `seq` rewritten with `actor`, its encoding recomputed to match (what an attacker who
/// can write the manifest, not the key, can do).
fn rewrite_actor(path: &Path, seq: i64, actor: &str) {
    let mut rec = Repo::open(path).expect("open").audit_record(seq).expect("read").expect("record").record;
    rec.actor = actor.into();
    let encoded = rec.encode(seq);
    raw(path)
        .execute("UPDATE audit SET actor = ?1, encoded = ?2 WHERE seq = ?3", rusqlite::params![actor, encoded, seq])
        .expect("rewrite");
}

fn verify_cli(path: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["audit", "verify"];
    args.extend_from_slice(extra);
    let out = trove(path, &args);
    (out.status.code(), format!("{}{}", stdout(&out), common::stderr(&out)))
}

#[test]
fn a_rewrite_under_a_checkpoint_is_never_signed_by_the_key_kept_apart() {
    // Issue 36, item 7: the key outside the repository, a writer of the manifest rewrites a
    // record a checkpoint covers, deletes the checkpoints and the cached tree; the next routine
    // checkpoint used to sign the forgery, and `verify` then passed.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, key) = (dir.path().join("repo"), dir.path().join("keys/audit.key"));
    let out = trove(&path, &["init", "--audit-key", key.to_str().expect("utf8"), "--checkpoint-every", "4"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let repo = Repo::open(&path).expect("open");
    for i in 0..10 {
        repo.audit(AuditRecord::ok(trove::now_ns(), "alice", &format!("op{i}"))).expect("append");
    }
    drop(repo);
    assert!(trove(&path, &["audit", "checkpoint"]).status.success());
    rewrite_actor(&path, 3, "mallory");
    raw(&path).execute_batch("DELETE FROM audit_checkpoints; DELETE FROM audit_tree;").expect("delete");
    // The routine checkpoint refuses, naming the records and the repository.
    let out = trove(&path, &["audit", "checkpoint"]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{}{err}", stdout(&out));
    assert!(err.contains("records 1 to 11 no longer hash to the root this key signed"), "{err}");
    assert!(err.contains(path.to_str().expect("utf8")) && err.contains("trove audit verify"), "{err}");
    // Nor does the checkpoint due after more records (the server's and the tools' path).
    let repo = Repo::open(&path).expect("open");
    for i in 0..6 {
        repo.audit(AuditRecord::ok(trove::now_ns(), "bob", &format!("later{i}"))).expect("append");
    }
    assert!(repo.checkpoints().expect("list").is_empty(), "no checkpoint over the rewritten log");
    assert_eq!(repo.checkpoint().expect_err("refused").kind(), trove::ErrorKind::Corrupt);
    drop(repo);
    // And verify does not pass: the checkpoint the key remembers was deleted.
    let (code, text) = verify_cli(&path, &[]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("the checkpoint of 11 records this key signed at"), "{text}");
    assert!(key.with_extension("key.signed").exists(), "the signer remembers what it signed, beside its key");

    // Rewritten with the tree left as it was: the signer signs the log it signed before, never
    // the rewrite, which verification then names.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, key) = (dir.path().join("repo"), dir.path().join("keys/audit.key"));
    assert!(trove(&path, &["init", "--audit-key", key.to_str().expect("utf8")]).status.success());
    let repo = Repo::open(&path).expect("open");
    for i in 0..6 {
        repo.audit(AuditRecord::ok(trove::now_ns(), "alice", &format!("op{i}"))).expect("append");
    }
    repo.checkpoint().expect("checkpoint");
    drop(repo);
    rewrite_actor(&path, 2, "mallory");
    Repo::open(&path).expect("open").audit(AuditRecord::ok(trove::now_ns(), "t", "more")).expect("append");
    assert!(trove(&path, &["audit", "checkpoint"]).status.success());
    let report = verify(&path);
    assert_eq!(report.first_bad_seq, Some(2), "{report:?}");
}

#[test]
fn records_no_checkpoint_covers_are_named_and_never_counted_as_verified() {
    // Issue 36, item 7: deleting every checkpoint verified, exit 0, with nothing signed.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    drop(repo);
    // Records after the last checkpoint (8 of 11): named, exit 0, and 3 when they must be.
    let (code, text) = verify_cli(&path, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("verified: records 1 to 8 are signed by checkpoint 8, signed "), "{text}");
    assert!(text.contains("unsigned: 9-11 (3 records after the last checkpoint)"), "{text}");
    let (code, text) = verify_cli(&path, &["--require-checkpoint"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("records 9-11 are not covered by a signed checkpoint"), "{text}");
    let report: Value =
        serde_json::from_str(&stdout(&trove(&path, &["--json", "audit", "verify"]))).expect("json report");
    assert_eq!(report["unsigned"], json!({"first": 9, "last": 11}));
    assert_eq!(report["lastCheckpoint"]["size"], json!(8));
    // Every checkpoint deleted: the signer's state beside the key says so.
    raw(&path).execute("DELETE FROM audit_checkpoints", []).expect("delete");
    let (code, text) = verify_cli(&path, &[]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("the checkpoint of 8 records this key signed at"), "{text}");
    // Without that state (verifying where only the public key is): nothing is covered, and
    // plain verify says so; --require-checkpoint exits 3.
    std::fs::remove_file(path.join("audit.key.signed")).expect("no state");
    let (code, text) = verify_cli(&path, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("verified: none: no signed checkpoint covers any of the 11 records"), "{text}");
    assert!(text.contains("unsigned: 1-11 (11 records with no checkpoint)"), "{text}");
    assert!(!text.contains("verified: 11"), "{text}");
    let (code, text) = verify_cli(&path, &["--require-checkpoint"]);
    assert_eq!(code, Some(3), "{text}");
    // A checkpoint written now covers them all, and the state is kept from then on.
    assert!(trove(&path, &["audit", "checkpoint"]).status.success());
    assert_eq!(verify_cli(&path, &["--require-checkpoint"]).0, Some(0));
    assert!(path.join("audit.key.signed").exists());
}

/// The lines of a bundle exported from `path` from record 1, and the public key.
fn bundle_of(path: &Path, dir: &Path) -> (PathBuf, Vec<String>, String) {
    let pubkey = Repo::open(path).expect("open").audit_verifier().expect("key").to_string();
    let bundle = dir.join("audit.bundle");
    let out = trove(path, &["audit", "export", "-o", bundle.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let lines = std::fs::read_to_string(&bundle).expect("read").lines().map(str::to_string).collect();
    (bundle, lines, pubkey)
}

fn verify_bundle_cli(bundle: &Path, pubkey: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", pubkey];
    args.extend_from_slice(extra);
    let out = trove(&bundle.with_extension("nowhere"), &args);
    (out.status.code(), format!("{}{}", stdout(&out), common::stderr(&out)))
}

#[test]
fn a_bundles_shown_fields_are_checked_against_the_signed_encoding() {
    // Issue 36, item 8: `shown` (what people read) could be changed and the bundle verified.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    drop(repo);
    let (bundle, lines, pubkey) = bundle_of(&path, dir.path());
    assert_eq!(verify_bundle_cli(&bundle, &pubkey, &[]).0, Some(0));
    let at = lines.iter().position(|l| l.starts_with("{\"record\"") && l.contains("\"seq\":5,")).expect("record 5");
    for (field, value) in [("actor", json!("mallory")), ("operation", json!("read")), ("path", json!("src/other.rs"))] {
        let mut rec: Value = serde_json::from_str(&lines[at]).expect("json");
        rec["record"]["shown"][field] = value;
        let mut edited = lines.clone();
        edited[at] = rec.to_string();
        std::fs::write(&bundle, edited.join("\n") + "\n").expect("write");
        let (code, text) = verify_bundle_cli(&bundle, &pubkey, &[]);
        assert_eq!(code, Some(3), "{field}: {text}");
        assert!(
            text.contains(&format!(
                "record 5 was edited in the bundle: the fields shown differ from its encoding: {field}"
            )),
            "{text}"
        );
    }
    // A bundle without shown fields (or an older one with fewer) still verifies.
    let mut rec: Value = serde_json::from_str(&lines[at]).expect("json");
    rec["record"].as_object_mut().expect("object").remove("shown");
    let mut edited = lines.clone();
    edited[at] = rec.to_string();
    std::fs::write(&bundle, edited.join("\n") + "\n").expect("write");
    assert_eq!(verify_bundle_cli(&bundle, &pubkey, &[]).0, Some(0));
}

#[test]
fn a_bundle_cut_back_to_an_old_checkpoint_shows_that_checkpoints_time() {
    // Issue 36, item 7: checkpoints carry their time, so a bundle cut back is told apart.
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 10);
    let times: Vec<(u64, String)> =
        repo.checkpoints().expect("list").iter().map(|c| (c.size, c.record().time)).collect();
    assert_eq!(times.iter().map(|t| t.0).collect::<Vec<_>>(), [4, 8]);
    let c8 = repo.checkpoints().expect("list").into_iter().find(|c| c.size == 8).expect("checkpoint 8");
    let signed =
        trove::tlog::note::Checkpoint::parse(repo.audit_verifier().expect("key").open(&c8.note).expect("open"))
            .expect("checkpoint");
    assert_eq!(signed.time_ns, Some(c8.time_ns), "the time is inside the signed text");
    drop(repo);
    let (bundle, lines, pubkey) = bundle_of(&path, dir.path());
    assert_eq!(verify_bundle_cli(&bundle, &pubkey, &[]).0, Some(0));
    // Cut back to checkpoint 8: the header's end, the later checkpoint, its proof, later records.
    let cut: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("json");
            if let Some(h) = v.get_mut("header") {
                h["to"] = json!(8);
            }
            let keep = v.get("checkpoint").is_none_or(|c| c["size"].as_u64() <= Some(8))
                && v.get("consistency").is_none_or(|c| c["to"].as_u64() <= Some(8))
                && v.get("record").is_none_or(|r| r["seq"].as_u64() <= Some(8));
            keep.then(|| v.to_string())
        })
        .collect();
    std::fs::write(&bundle, cut.join("\n") + "\n").expect("write");
    let (code, text) = verify_bundle_cli(&bundle, &pubkey, &[]);
    assert_eq!(code, Some(0), "{text}");
    let t8 = &times[1].1;
    assert!(text.contains(&format!("records 1 to 8 are signed by checkpoint 8, signed {t8}")), "{t8}: {text}");
    assert_eq!(verify_bundle_cli(&bundle, &pubkey, &["--require-checkpoint"]).0, Some(0), "covered to its end");
    let out = trove(
        &bundle.with_extension("nowhere"),
        &["--json", "audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", &pubkey],
    );
    let report: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(report["lastCheckpoint"], json!({"size": 8, "time": t8}));
}

#[test]
fn reads_are_recorded_with_their_path_session_and_workspace_and_found_by_path() {
    // Issue 36, item 9: `--audit-reads` recorded reads without their path.
    use common::http;
    let s = http::start(Some(http::TOKEN), &["--audit-reads"]);
    let created = s.call("POST", "/v1/sessions", r#"{"workspace": "w", "persistent": true}"#);
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().expect("id").to_string();
    let session_token = created.json()["session_token"].as_str().expect("token").to_string();
    let put =
        s.call("POST", &format!("/v1/sessions/{id}/tools/create_file"), r#"{"path": "notes.md", "content": "hi\n"}"#);
    assert!(put.json()["ok"] == json!(true), "{}", put.text());
    let bearer = format!("Bearer {session_token}");
    let reads: Vec<(&str, http::Resp)> = vec![
        ("files", s.get(&format!("/v1/sessions/{id}/files/notes.md"))),
        ("file/read", s.call("POST", &format!("/v1/sessions/{id}/file/read"), r#"{"file": "notes.md"}"#)),
        ("absolute", s.call("POST", &format!("/v1/sessions/{id}/file/read"), r#"{"file": "/workspace/notes.md"}"#)),
        ("read_file", s.call("POST", &format!("/v1/sessions/{id}/tools/read_file"), r#"{"path": "notes.md"}"#)),
        (
            "files tool",
            s.call(
                "POST",
                &format!("/v1/sessions/{id}/tools/files"),
                r#"{"params": {"command": "read", "file_path": "notes.md"}}"#,
            ),
        ),
        ("download", s.get(&format!("/v1/sessions/{id}/file/download?path=notes.md"))),
        (
            "bare",
            http::request(s.addr, "POST", "/v1/file/read", &[("Authorization", &bearer)], br#"{"file": "notes.md"}"#),
        ),
    ];
    for (what, r) in &reads {
        assert_eq!(r.status, 200, "{what}: {}", r.text());
    }
    // And over MCP: only the call of a reading tool is a read.
    let auth = format!("Bearer {}", http::TOKEN);
    let mcp = |body: Value, sid: Option<&str>| {
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(sid) = sid {
            headers.extend([("Mcp-Session-Id", sid), ("MCP-Protocol-Version", "2025-06-18")]);
        }
        http::request(s.addr, "POST", &format!("/v1/sessions/{id}/mcp"), &headers, body.to_string().as_bytes())
    };
    let init = mcp(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        None,
    );
    let sid = init.header("mcp-session-id").expect("an MCP session").to_string();
    mcp(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&sid));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "read_file", "arguments": {"path": "notes.md"}}});
    let r = mcp(call, Some(&sid));
    assert!(r.status == 200 && r.text().contains("hi"), "{}", r.text());
    let reads = reads.len() + 1;
    let snap = s.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
    assert!(snap.status < 300, "{}", snap.text());
    let snap_id = snap.json()["id"].as_str().expect("snapshot id").to_string();
    assert_eq!(s.get(&format!("/v1/snapshots/{snap_id}/files/notes.md")).status, 200);
    // Who read notes.md: every read, each with its session and workspace.
    let found = s.get("/v1/audit?path=notes.md&operation=read&after=0&limit=100").json();
    let found = found["records"].as_array().expect("records").clone();
    assert_eq!(found.len(), reads + 1, "{found:#?}");
    for r in &found[..reads] {
        assert_eq!((r["session"].as_str(), r["workspace"].as_str()), (Some(id.as_str()), Some("w")), "{r}");
    }
    assert_eq!(found[reads]["workspace"], json!("w"));
    // A write is not a read, and the command line finds the same records.
    assert!(found.iter().all(|r| r["details"]["tool"] != json!("create_file")));
    let out = trove(
        &s.repo,
        &["audit", "log", "--path", "notes.md", "--operation", "read", "--format", "jsonl", "--after", "0"],
    );
    assert_eq!(stdout(&out).lines().count(), reads + 1, "{}", stdout(&out));
}

#[test]
fn a_bundle_claiming_sizes_past_what_a_seq_counts_is_refused_not_panicked_on() {
    // Found while writing the `audit_bundle` fuzz target: a bundle's header and prefix claim
    // sizes, and arithmetic on them overflowed (a panic in debug builds).
    use base64::Engine;
    let key = SignerKey::generate("trove/fuzzed").expect("key");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let header = |from: u64| json!({"header": {"format": "trove-audit-bundle/1", "origin": "trove/fuzzed", "from": from, "to": from}});
    let record = json!({"record": {"seq": 5, "encoded": b64(&AuditRecord::ok(1, "t", "x").encode(5))}});
    // From record 0: no record comes before it.
    let bundle = format!("{}\n{}\n{record}\n", header(0), json!({"prefix": []}));
    let e = trove::verify_bundle(bundle.as_bytes(), &[key.verifier()]).expect_err("refused");
    assert!(e.message().contains("the prefix covers 0 records"), "{e}");
    // A prefix of 2^63 - 1 records, and a record after it.
    let prefix: Vec<Value> = (0..63).rev().map(|l| json!([l, b64(&[7u8; 32])])).collect();
    let bundle = format!("{}\n{}\n{record}\n", header(1 << 63), json!({ "prefix": prefix }));
    let report = trove::verify_bundle(bundle.as_bytes(), &[key.verifier()]).expect("a report");
    assert!(report.problems.iter().any(|p| p.contains("more records than a seq can count")), "{report:?}");
    // And every level: past what a u64 counts.
    let prefix: Vec<Value> = (0..64).rev().map(|l| json!([l, b64(&[7u8; 32])])).collect();
    let bundle = format!("{}\n{}\n{record}\n", header(u64::MAX), json!({ "prefix": prefix }));
    assert!(trove::verify_bundle(bundle.as_bytes(), &[key.verifier()]).is_err());
}

#[test]
fn a_record_dated_before_1970_is_shown_and_verified_not_panicked_on() {
    // Found by the `audit_bundle` fuzz target in its first seconds: a record whose encoded time
    // is before the epoch panicked the time formatter when its shown fields were checked.
    use base64::Engine;
    let b64 = &base64::engine::general_purpose::STANDARD;
    let dir = tempfile::tempdir().expect("tmp");
    let (path, repo) = log_of(dir.path(), 6);
    let key = repo.audit_verifier().expect("key");
    drop(repo);
    let (_, lines, _) = bundle_of(&path, dir.path());
    let at = lines.iter().position(|l| l.starts_with("{\"record\"") && l.contains("\"seq\":5,")).expect("record 5");
    let mut rec: Value = serde_json::from_str(&lines[at]).expect("json");
    let bytes = b64.decode(rec["record"]["encoded"].as_str().expect("encoded")).expect("b64");
    let (_, mut r) = AuditRecord::decode(&bytes).expect("decode");
    r.time_ns = -5_726_593_693_729_427_849;
    rec["record"]["encoded"] = json!(b64.encode(r.encode(5)));
    let mut edited = lines.clone();
    edited[at] = rec.to_string();
    let text = edited.join("\n") + "\n";
    let report = trove::verify_bundle(text.as_bytes(), std::slice::from_ref(&key)).expect("a report");
    assert!(report.problems.iter().any(|p| p.contains("record 5 was edited in the bundle")), "{report:?}");
    // And the time is shown as the date it is.
    assert_eq!(trove::FullRecord { seq: 5, record: r }.entry().time, "1788-07-12T23:31:46.270Z");
}

#[test]
fn a_filter_by_an_operation_no_record_has_says_so_and_names_those_recorded() {
    let dir = tempfile::tempdir().expect("tmp");
    let (path, _repo) = log_of(dir.path(), 3);
    let out = trove(&path, &["--json", "audit", "log", "--operation", "write_file"]);
    assert!(out.status.success());
    let hits: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(hits.as_array().map(Vec::len), Some(3));
    assert!(!common::stderr(&out).contains("no record"), "a filter that matches says nothing more");
    let misspelt = trove(&path, &["--json", "audit", "log", "--operation", "wirte_file"]);
    assert!(misspelt.status.success(), "an empty answer is still an answer");
    assert_eq!(stdout(&misspelt).trim(), "[]");
    let said = common::stderr(&misspelt);
    assert!(said.contains("'wirte_file'") && said.contains("write_file") && said.contains("init"), "{said}");
}
