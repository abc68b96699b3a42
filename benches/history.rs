//! Criterion benchmark of reading a long history back (issue 38): a 68 KB source file edited
//! 200 times through `edit_file`, each version stored as a delta against the one before (chains
//! of at most 48), then the 200th version read by its content id, as a review or a revert reads
//! it. Before criterion's own run, 2,000 reads are timed one by one and their median and 99th
//! percentile printed: the figure the issue asks for.

use std::fs;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use trove::tools::ToolCall;
use trove::{Repo, SessionSpec};

#[allow(clippy::print_stdout)] // the percentiles, beside criterion's report
fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ws = scratch.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    let mut rng = trove::sample::Rng::new(38);
    let mut lines: Vec<String> = Vec::new();
    while lines.iter().map(|l| l.len() + 1).sum::<usize>() < 68_000 {
        let (a, b) = (rng.next_u64() % 100_000, rng.next_u64() % 1000);
        lines.push(format!("    let value_{a} = compute_{b}(input, {a}).unwrap_or_default();"));
    }
    fs::write(ws.join("big.rs"), lines.join("\n") + "\n").expect("write");
    let repo = Repo::init(&scratch.path().join("repo"), "bench").expect("init");
    let root = ws.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(root), "bench").expect("session");
    let mut last = String::new();
    for k in 0..200 {
        let text = fs::read_to_string(ws.join("big.rs")).expect("read");
        let sha = trove::tools::read::sha256_hex(text.as_bytes());
        let at = (rng.next_u64() as usize) % lines.len();
        let anchor = format!("{}\n", lines[at]);
        let call = json!({"path": "big.rs", "expectedSha256": sha,
            "edits": [{"oldText": anchor, "newText": format!("    // edit {k}\n{anchor}")}]});
        let s = repo.session(&s.id).expect("session");
        let out = trove::tools::run(&repo, &s, ToolCall::parse("edit_file", call).expect("params"), "bench")
            .expect("edit_file");
        last = out.to_json()["sha256"].as_str().unwrap_or_default().to_string();
    }
    assert!(!last.is_empty());
    let conn = trove::testing::conn(&repo);
    let content: String = conn
        .query_row(
            "SELECT hex(after_object) FROM audit WHERE operation = 'edit_file' ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get::<_, String>(0),
        )
        .expect("the last version")
        .to_lowercase();
    let mut times: Vec<Duration> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            repo.content_bytes(&content).expect("read");
            t.elapsed()
        })
        .collect();
    times.sort();
    println!("200th version of a 68 KB file: p50 {:?}, p99 {:?}", times[1000], times[1980]);
    let mut g = c.benchmark_group("history");
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("read the 200th version of a 68 KB file", |b| {
        b.iter(|| repo.content_bytes(&content).expect("read"));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
