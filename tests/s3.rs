//! The storage backend against a real S3 server (moto's, started by the test): the contract
//! every backend keeps, run on memory, a local directory and the bucket alike; values uploaded
//! in parts; and what the network does to requests: 503s retried, a create whose answer was
//! lost settled by reading the key back, slow answers waited for, and a bucket that keeps
//! failing reported naming the key once the retries are spent.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::s3::{fresh_bucket, proxy, server, settings, Action};
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
