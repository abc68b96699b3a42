//! A fleet's collections under load, against a real S3 server (moto's, started by the test), in
//! a test binary of its own so that nothing else shares the machine.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::s3::{fresh_bucket, ok, server, trove_on};

/// Two nodes of one bucket of a log per node, each with snapshots (under a retention policy,
/// forgotten by the node itself), tool writes and trash restores running for a minute, while a
/// third node, which writes nothing of its own, collects the fleet in a loop (a grace of ten
/// seconds): its condemnations and sweeps are segments in the writers' logs, which they catch
/// up with and write after, and the writers' leases in the bucket hold it back. Then every
/// snapshot each node kept restores exactly what its workspace held, every trash item left
/// reads back, a last collection leaves nothing waiting on any node, and each node's
/// `check --read-data` reads every byte clean.
#[test]
#[allow(clippy::print_stderr)] // the collector's figures, with --nocapture
fn a_third_node_collecting_in_a_loop_beside_two_writing_nodes_loses_nothing_for_a_minute() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let tmp = tempfile::tempdir().expect("tmp");
    let base = tmp.path().to_path_buf();
    let access = move |node: &str| common::s3::node_access(s3.addr, &base.join(format!("cache-{node}")), node);
    trove::Repo::init_bucket(
        &bucket,
        "fleet",
        "t",
        trove::AuditSettings::default(),
        trove::Layout::Nodes,
        &access("n1"),
    )
    .expect("init");
    let grace = Duration::from_secs(10);
    let stop = Arc::new(AtomicBool::new(false));
    let collector = {
        let (bucket, access, stop) = (bucket.clone(), access.clone(), stop.clone());
        std::thread::spawn(move || -> (u64, u64) {
            let repo = trove::Repo::open_bucket(&bucket, "fleet", &access("n3")).expect("open");
            let (mut runs, mut deleted) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(150));
                let r = repo.gc(&trove::GcOptions { grace, ..Default::default() }).expect("the fleet's collection");
                deleted += r.deleted.objects + r.deleted.trees + r.deleted.loose;
                runs += 1;
            }
            (runs, deleted)
        })
    };
    let nodes: Vec<_> = ["n1", "n2"]
        .into_iter()
        .map(|node| {
            let (bucket, access, dir) = (bucket.clone(), access.clone(), tmp.path().join(format!("work-{node}")));
            std::thread::spawn(move || {
                std::fs::create_dir_all(&dir).expect("dir");
                // Every worker of the node opens as it, from its one cache directory.
                let open =
                    move |_worker: &str| trove::Repo::open_bucket(&bucket, "fleet", &access(node)).expect("open");
                let how = common::stress::Stress {
                    grace,
                    pause: Duration::from_millis(150),
                    run_for: Duration::from_secs(60),
                    retry_conflicts: true,
                    collects: false,
                };
                common::stress::gc_in_a_loop(&dir, open, how)
            })
        })
        .collect();
    for node in nodes {
        node.join().expect("a node's workers lost nothing while n3 collected");
    }
    stop.store(true, Ordering::Relaxed);
    let (runs, deleted) = collector.join().expect("n3's collections never failed");
    eprintln!("n3: {runs} collections of the fleet deleted {deleted} rows");
    assert!(runs >= 5 && deleted > 0, "{runs} collections deleted {deleted} rows");
    // The nodes' work is over, as a command's is when it ends: their leases in the bucket go
    // (`trove` deletes them as it exits). Left, a lease says the epoch of an operation begun up
    // to a third of a lease's time before the last, and holds the last collection back.
    trove::let_go_of_leases();

    // Past the grace period by the store's clock (read to the second), a last collection
    // leaves nothing waiting on any node.
    std::thread::sleep(grace + Duration::from_secs(2));
    let repo = trove::Repo::open_bucket(&bucket, "fleet", &access("n3")).expect("open");
    let r = repo.gc(&trove::GcOptions { grace, ..Default::default() }).expect("a last collection");
    assert_eq!(r.waiting, 0, "{r:?}");
    assert_eq!(r.nodes.len(), 3, "{r:?}");
    let repo = format!("s3://{bucket}/fleet");
    for node in ["n1", "n2"] {
        let cache = tmp.path().join(format!("cache-{node}"));
        ok(trove_on(s3.addr, &repo, &cache, &["--node", node, "check", "--read-data"]), "check --read-data");
    }
}
