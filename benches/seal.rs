//! What sealing costs a repository in a bucket: sealing and opening a 16 MiB pack whole
//! (throughput in bytes a second), and opening a 4 KiB range of it through a sealed backend
//! (one segment opened), against the same read from the plain backend.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use trove::object::keyfile::new_seal_key;
use trove::object::seal::{open, seal};
use trove::object::{Backend, MemoryBackend, SealedBackend};

fn sealing(c: &mut Criterion) {
    let key = new_seal_key().expect("key");
    // Bytes like a pack's: compressed, so no pattern.
    let pack: Vec<u8> = (0..16u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let mut g = c.benchmark_group("seal");
    g.measurement_time(Duration::from_secs(8)).sample_size(20);
    g.throughput(Throughput::Bytes(pack.len() as u64));
    g.bench_function(BenchmarkId::new("seal", "16 MiB"), |b| b.iter(|| seal(&key, &pack).expect("seal")));
    let sealed = seal(&key, &pack).expect("seal");
    g.bench_function(BenchmarkId::new("open", "16 MiB"), |b| b.iter(|| open(&key, "p", &sealed).expect("open")));
    g.finish();

    let mut g = c.benchmark_group("seal_range");
    let plain = MemoryBackend::new();
    plain.put("packs/p", &pack).expect("put");
    let with_seal = SealedBackend::new(MemoryBackend::new(), key);
    with_seal.put("packs/p", &pack).expect("put");
    let at = 9 << 20;
    g.bench_function("plain 4 KiB", |b| b.iter(|| plain.get_range("packs/p", at, 4096).expect("get")));
    g.bench_function("sealed 4 KiB", |b| b.iter(|| with_seal.get_range("packs/p", at, 4096).expect("get")));
    g.finish();
}

criterion_group!(benches, sealing);
criterion_main!(benches);
