//! Criterion benchmarks of the audit log (issue 14): durable appends from many threads with
//! group commit, filtered queries over 1,000,000 records (by session, by path prefix; the first
//! 100 rows), verifying 1,000,000 records, inclusion and consistency proofs, and checkpoints
//! (1,000 records after the last; the first of a key with no signer state). The repository
//! lives in a temporary directory on the disk `TMPDIR` points at, so every fsync is real.
//! `TROVE_BENCH_AUDIT_RECORDS` changes the size of the big log.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trove::{AuditAppender, AuditQuery, AuditRecord, Order, Repo};

/// Record `i` of the big log: 10 actors, 1,000 sessions, 10 workspaces, 100 directories of
/// 10 files each, 5 operations.
fn record(i: u64) -> AuditRecord {
    let ops = ["write_file", "edit_file", "read_file", "delete_file", "apply_patch"];
    let mut r = AuditRecord::ok(
        1_700_000_000_000_000_000 + i as i64 * 1000,
        &format!("tok_{:012x}", i % 10),
        ops[i as usize % 5],
    );
    r.workspace = Some(format!("ws{}", i % 10));
    r.session = Some(format!("sess_{:012x}", i % 1000).parse().expect("id"));
    r.path = Some(format!("src/d{:03}/f{}.rs", (i / 7) % 100, i % 10).into_bytes());
    r.details = serde_json::json!({"plan": format!("op_{i:012x}")});
    r
}

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let mut g = c.benchmark_group("audit");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(10));

    // Durable appends from 16 and 64 threads: each returns once its record is on disk.
    let small = scratch.path().join("appends");
    drop(Repo::init(&small, "bench").expect("init"));
    let appender = AuditAppender::open(&small).expect("appender");
    g.throughput(Throughput::Elements(1));
    for threads in [16u64, 64] {
        g.bench_function(format!("durable append, {threads} threads, group commit"), |b| {
            b.iter_custom(|iters| {
                let per = iters.div_ceil(threads);
                let t = Instant::now();
                std::thread::scope(|s| {
                    for k in 0..threads {
                        let a = appender.clone();
                        s.spawn(move || {
                            for i in 0..per {
                                a.append(record(k * per + i)).expect("append");
                            }
                        });
                    }
                });
                t.elapsed().mul_f64(iters as f64 / (per * threads) as f64)
            })
        });
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("durable append, one thread", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for i in 0..iters {
                appender.append(record(i)).expect("append");
            }
            t.elapsed()
        })
    });

    // The big log, appended in transactions of 10,000 (the tree kept as it goes).
    let n: u64 = std::env::var("TROVE_BENCH_AUDIT_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let big = scratch.path().join("big");
    let repo = Repo::init(&big, "bench").expect("init");
    let conn = trove::testing::conn(&repo);
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let tx = conn.unchecked_transaction().expect("tx");
        for &i in chunk {
            trove::testing::audit::append(&tx, &record(i)).expect("append");
        }
        tx.commit().expect("commit");
    }
    let cp = repo.checkpoint().expect("checkpoint");
    g.throughput(Throughput::Elements(100));
    let by_session = AuditQuery {
        session: Some("sess_0000000002a7".parse().expect("id")),
        order: Order::After(0),
        limit: 100,
        ..Default::default()
    };
    g.bench_function(format!("first 100 of {n} records by session"), |b| {
        b.iter(|| repo.audit_query(&by_session).expect("query"))
    });
    let by_prefix =
        AuditQuery { prefix: Some(b"src/d042".to_vec()), order: Order::After(0), limit: 100, ..Default::default() };
    g.bench_function(format!("first 100 of {n} records by path prefix (1%)"), |b| {
        b.iter(|| repo.audit_query(&by_prefix).expect("query"))
    });
    let wide = AuditQuery { prefix: Some(b"src".to_vec()), order: Order::After(0), limit: 100, ..Default::default() };
    g.bench_function(format!("first 100 of {n} records by path prefix (all)"), |b| {
        b.iter(|| repo.audit_query(&wide).expect("query"))
    });
    let newest = AuditQuery { actor: Some("tok_000000000003".into()), limit: 100, ..Default::default() };
    g.bench_function(format!("newest 100 of {n} records by actor"), |b| {
        b.iter(|| repo.audit_query(&newest).expect("query"))
    });
    g.throughput(Throughput::Elements(1));
    let mut k = 0u64;
    g.bench_function(format!("inclusion proof in {n} records"), |b| {
        b.iter(|| {
            k = (k + 7919) % cp.size;
            repo.inclusion_proof(k as i64 + 1, Some(cp.size)).expect("proof")
        })
    });
    g.bench_function(format!("consistency proof in {n} records"), |b| {
        b.iter(|| {
            k = (k + 7919) % cp.size;
            repo.consistency_proof(k + 1, cp.size).expect("proof")
        })
    });
    g.throughput(Throughput::Elements(n));
    g.measurement_time(Duration::from_secs(30));
    g.bench_function(format!("verify {n} records"), |b| {
        b.iter(|| {
            let report = repo.verify_audit(&[]).expect("verify");
            assert!(report.ok(), "{report:?}");
        })
    });
    // A checkpoint 1,000 records after the last: the signer grows the frontier it remembers by
    // them and checks the stored tree in a few lookups, whatever the log's size (issue 36).
    g.throughput(Throughput::Elements(1000));
    g.measurement_time(Duration::from_secs(10));
    let mut next = n;
    g.bench_function(format!("checkpoint 1,000 records after the last, of {n}"), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let tx = conn.unchecked_transaction().expect("tx");
                for i in next..next + 1000 {
                    trove::testing::audit::append(&tx, &record(i)).expect("append");
                }
                tx.commit().expect("commit");
                next += 1000;
                let t = Instant::now();
                repo.checkpoint().expect("checkpoint");
                spent += t.elapsed();
            }
            spent
        })
    });
    // The first checkpoint of a key with no state (made before the state was kept): the whole
    // log checked once against the checkpoints it signed.
    g.throughput(Throughput::Elements(n));
    g.bench_function(format!("first checkpoint of a key with no state, {n} records"), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                std::fs::remove_file(big.join("audit.key.signed")).expect("the state");
                trove::testing::audit::append(conn, &record(next)).expect("append");
                next += 1;
                let t = Instant::now();
                repo.checkpoint().expect("checkpoint");
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
