//! Issue 16's stress test against a bucket on a real S3 server (moto's, started by the test),
//! in a test binary of its own: cargo runs binaries one after another, so the four hosts here
//! share the machine and the server with no other test.

mod common;

use std::time::Duration;

use common::s3::{fresh_bucket, server, settings};

/// Issue 16's stress test against a bucket: snapshots, tool writes and trash restores on three
/// hosts, and forget and gc in a loop on a fourth, lose nothing. The grace period (by the
/// store's clock) is ten seconds: longer than any one operation here takes, with the second
/// a replica may lag its log and the second the store dates to, as an hour is longer than one
/// takes in use. Each worker rests a little between operations, so that one Python S3 server
/// answers four hosts each reading every segment the others write. An operation refused with
/// `conflict` (by a fence, if a loaded machine stretched one past the grace; nothing written)
/// is run again, as its caller would (a tool's change is refused only before it touches the
/// tree: refused after, it is recorded all the same); the checks at the end show that nothing
/// was lost.
#[test]
fn gc_in_a_bucket_in_a_loop_costs_other_hosts_no_snapshot_tool_write_or_trash_restore() {
    let s3 = server();
    let bucket = fresh_bucket(s3.addr);
    let tmp = tempfile::tempdir().expect("tmp");
    let base = tmp.path().to_path_buf();
    let access = move |host: &str| trove::BucketAccess {
        password: Some("correct horse battery staple".into()),
        cache_base: Some(base.join(format!("host-{host}"))),
        settings: settings(s3.addr),
        stretch: Some(trove::object::Stretch { memory_kib: 1024, iterations: 1, parallelism: 1 }),
        ..Default::default()
    };
    trove::Repo::init_bucket(
        &bucket,
        "stress",
        "t",
        trove::AuditSettings::default(),
        trove::Layout::Log,
        &access("init"),
    )
    .expect("init");
    let open = move |host: &str| trove::Repo::open_bucket(&bucket, "stress", &access(host)).expect("open");
    let how = common::stress::Stress {
        grace: Duration::from_secs(10),
        pause: Duration::from_millis(100),
        run_for: Duration::from_secs(40),
        retry_conflicts: true,
        collects: true,
    };
    let (runs, deleted) = common::stress::gc_in_a_loop(tmp.path(), open, how);
    assert!(runs > 0 && deleted > 0);
}
