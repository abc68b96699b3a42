//! Criterion benchmarks of the agent file tools (issue 4), through `trove::tools::run` as the CLI
//! and the server call it: `read_file` of a 100 KB file, `write_file` of a 10 KB file (every
//! write fsynced: the temporary file, the directory, the journal commit) and an `apply_patch`
//! touching 20 files. The repository and workspace live in a temporary directory on the disk
//! `TMPDIR` points at, so the fsyncs are real.

use std::fs;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use trove::tools::ToolCall;
use trove::Repo;
use trove::SessionSpec;

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ws = scratch.path().join("ws");
    fs::create_dir_all(ws.join("src")).expect("mkdir");
    let mut rng = trove::sample::Rng::new(11);
    // 100 KB of text lines.
    let mut big = String::new();
    while big.len() < 100_000 {
        big.push_str(&format!("let value_{} = compute({});\n", rng.next_u64() % 100_000, rng.next_u64() % 1000));
    }
    fs::write(ws.join("big.rs"), &big).expect("write");
    for i in 0..20 {
        fs::write(ws.join(format!("src/m{i:02}.rs")), format!("// module {i}\nconst X: u32 = 0;\nfn f() {{}}\n"))
            .expect("write");
    }
    let repo = Repo::init(&scratch.path().join("repo"), "bench").expect("init");
    let root = ws.clone();
    let s = repo.create_session(&SessionSpec::default(), move |_| Ok(root), "bench").expect("session");
    let run = |tool: &str, p: Value| -> trove::tools::ToolOutput {
        trove::tools::run(&repo, &s, ToolCall::parse(tool, p).expect("params"), "bench").expect(tool)
    };
    let mut g = c.benchmark_group("tools");
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("read_file 100KB", |b| {
        b.iter(|| run("read_file", json!({"path": "big.rs"})));
    });
    // Two versions of 10 KB of code-like text, written in turn so every write changes the file.
    let contents: Vec<String> = (0..2)
        .map(|_| {
            let mut t = String::new();
            while t.len() < 10 * 1024 {
                t.push_str(&format!("fn f{}() -> u64 {{ {} }}\n", rng.next_u64() % 100_000, rng.next_u64()));
            }
            t
        })
        .collect();
    fs::write(ws.join("small.txt"), &contents[1]).expect("write");
    let mut sha = trove::tools::read::sha256_hex(contents[1].as_bytes());
    let mut k = 0;
    g.bench_function("write_file 10KB", |b| {
        b.iter(|| {
            let out = run("write_file", json!({"path": "small.txt", "content": contents[k], "expectedSha256": sha}));
            sha = out.sha256().expect("sha").to_string();
            k ^= 1;
        });
    });
    let patch = |from: u32, to: u32| {
        let mut p = String::from("*** Begin Patch\n");
        for i in 0..20 {
            p.push_str(&format!(
                "*** Update File: src/m{i:02}.rs\n@@\n // module {i}\n-const X: u32 = {from};\n+const X: u32 = {to};\n"
            ));
        }
        p.push_str("*** End Patch\n");
        p
    };
    let patches = [patch(0, 1), patch(1, 0)];
    let mut k = 0;
    g.bench_function("apply_patch 20 files", |b| {
        b.iter(|| {
            run("apply_patch", json!({"patch": patches[k]}));
            k ^= 1;
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
