//! Criterion benchmarks of serving a session's files (issue 3): listing a 10,000-file workspace
//! from a snapshot and from the live tree, and reading one small file from each, through the
//! same library calls the HTTP handlers make (scope and exclusions applied).
//!
//! The workspace is generated (`trove::sample::generate`, 10,000 files unless
//! `TROVE_BENCH_FILES` says otherwise) in a temporary directory, or taken from
//! `TROVE_BENCH_SERVE_WS`. Compare the live listing with `find DIR -type f` on the same tree
//! (BENCHMARKS.md gives the hyperfine command).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use trove::Excludes;
use trove::{ChangePolicy, FILES_READ_LIMIT as READ_LIMIT};
use trove::{EntryKind, Repo, SnapshotOptions};
use trove::{FileAccess, Scope};
use trove::{Source, WorkspaceView};

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ws = match std::env::var_os("TROVE_BENCH_SERVE_WS") {
        Some(d) => PathBuf::from(d),
        None => {
            let files = std::env::var("TROVE_BENCH_FILES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
            let dir = scratch.path().join("ws");
            trove::sample::generate(&dir, files, 7).expect("generate the workspace");
            dir
        }
    };
    let repo = Repo::init(&scratch.path().join("repo"), "bench").expect("init");
    let opts = SnapshotOptions { workspace: Some("serve".into()), ..SnapshotOptions::default() };
    let snap = repo.snapshot(&ws, &opts).expect("snapshot");
    let excludes = Excludes::effective(None, &[]).expect("excludes");
    let scope = Scope::new("sess_bench", &FileAccess::default()).expect("scope");
    let view =
        WorkspaceView { name: "serve", session: None, live_dir: Some(&ws), excludes: &excludes, scope: Some(&scope) };
    // A small file (under 4 KiB): what an agent UI reads most.
    let mut small = None;
    repo.list(&snap, b"", true, &mut |p, e| {
        if small.is_none() && e.kind == EntryKind::File && (100..4096).contains(&e.size) {
            small = Some(p.to_vec());
        }
        Ok(())
    })
    .expect("list");
    let small = small.expect("a small file");
    let snap_source = Source::Snapshot(snap.id.to_string());
    let files = snap.counts.files;

    let mut g = c.benchmark_group(format!("serve-{files}-files"));
    g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));
    g.bench_function("list from snapshot", |b| b.iter(|| repo.list_files(&view, &snap_source).expect("list").0.len()));
    g.bench_function("list live tree", |b| b.iter(|| repo.list_files(&view, &Source::Live).expect("list").0.len()));
    g.bench_function("read small file from snapshot", |b| {
        b.iter(|| repo.read_file_from(&view, &snap_source, &small, READ_LIMIT, ChangePolicy::Retry).expect("read"))
    });
    g.bench_function("read small file live", |b| {
        b.iter(|| repo.read_file_from(&view, &Source::Live, &small, READ_LIMIT, ChangePolicy::Retry).expect("read"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
