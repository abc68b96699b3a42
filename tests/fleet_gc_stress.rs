//! A fleet's collections under load, against a real S3 server (moto's, started by the test), in
//! a test binary of its own so that nothing else shares the machine.

mod common;

use std::time::Duration;

use common::s3::{fresh_bucket, ok, server, settings, trove_on};

/// Two nodes of one bucket of a log per node, each with snapshots (under a retention policy),
/// tool writes and trash restores running for a minute while that node's collector runs `gc`
/// (and `forget`) in a loop beside them, sharing its cache directory: a node's packs are named
/// only by its own records, so its own collector is the one that may delete them, and it must
/// cost its writers nothing. Then every snapshot each node kept restores exactly what its
/// workspace held, every trash item left reads back, a last collection leaves nothing waiting,
/// and each node's `check --read-data` reads every byte clean.
#[test]
fn each_node_collecting_in_a_loop_beside_its_writers_loses_nothing_for_a_minute() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let tmp = tempfile::tempdir().expect("tmp");
    let base = tmp.path().to_path_buf();
    let access = move |node: &str| trove::BucketAccess {
        password: Some("correct horse battery staple".into()),
        cache_base: Some(base.join(format!("cache-{node}"))),
        settings: settings(s3.addr),
        stretch: Some(trove::object::Stretch { memory_kib: 1024, iterations: 1, parallelism: 1 }),
        node: Some(trove::NodeName::parse(node).expect("name")),
        ..Default::default()
    };
    trove::Repo::init_bucket(
        &bucket,
        "fleet",
        "t",
        trove::AuditSettings::default(),
        trove::Layout::Nodes,
        &access("n1"),
    )
    .expect("init");
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
                    grace: Duration::from_secs(10),
                    pause: Duration::from_millis(150),
                    run_for: Duration::from_secs(60),
                    retry_conflicts: true,
                };
                common::stress::gc_in_a_loop(&dir, open, how)
            })
        })
        .collect();
    for node in nodes {
        let (runs, deleted) = node.join().expect("a node's workers and collector lost nothing");
        assert!(runs > 0 && deleted > 0);
    }
    let repo = format!("s3://{bucket}/fleet");
    for node in ["n1", "n2"] {
        let cache = tmp.path().join(format!("cache-{node}"));
        ok(trove_on(s3.addr, &repo, &cache, &["--node", node, "check", "--read-data"]), "check --read-data");
    }
}
