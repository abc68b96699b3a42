//! Criterion benchmarks of the repository core: cold, no-change and one-file-changed
//! snapshots, listing a whole snapshot, and reading one file back.
//!
//! Workspaces: a generated 20,000-file tree with the size mix of `shared/bench/
//! make-synthetic-ws.py` (about 400 MB), and every directory named in `TROVE_BENCH_WS`
//! (colon-separated; e.g. the npm workspace of `shared/bench/build-npm-ws.sh`), or
//! `/tmp/ws/npm` when it exists. `TROVE_BENCH_FILES` changes the generated file count.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use trove::{EntryKind, Repo, SnapshotOptions};

fn workspaces(scratch: &Path) -> Vec<(String, PathBuf)> {
    let files = std::env::var("TROVE_BENCH_FILES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let generated = scratch.join("synthetic");
    let bytes = trove::sample::generate(&generated, files, 42).expect("generate the workspace");
    let mut out = vec![(format!("synthetic-{files}-{}MB", bytes / 1_000_000), generated)];
    let extra = std::env::var("TROVE_BENCH_WS").unwrap_or_else(|_| "/tmp/ws/npm".into());
    for dir in extra.split(':').filter(|d| !d.is_empty()) {
        let p = PathBuf::from(dir);
        if p.is_dir() {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| dir.into());
            out.push((name, p));
        }
    }
    out
}

/// Every file is kept (no default exclusions), as restic, borg and git would keep them.
fn opts() -> SnapshotOptions<'static> {
    SnapshotOptions {
        workspace: Some("bench".into()),
        replace_excludes: Some(Vec::new()),
        ..SnapshotOptions::default()
    }
}

/// A mid-sized text file of the snapshot, the "read one file" target.
fn pick_file(repo: &Repo, snap: &trove::SnapshotInfo) -> Vec<u8> {
    let mut best: Option<(u64, Vec<u8>)> = None;
    repo.list(snap, b"", true, &mut |p, e| {
        if e.kind == EntryKind::File && (20_000..200_000).contains(&e.size) && best.is_none() {
            best = Some((e.size, p.to_vec()));
        }
        Ok(())
    })
    .expect("list");
    best.map(|b| b.1).expect("a file of 20-200 KB")
}

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    for (name, ws) in workspaces(scratch.path()) {
        let mut g = c.benchmark_group(&name);
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(15));

        g.bench_function("cold snapshot", |b| {
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir_in(scratch.path()).expect("repo dir");
                    let repo = Repo::init(&dir.path().join("repo"), "bench").expect("init");
                    (dir, repo)
                },
                |(dir, repo)| {
                    repo.snapshot(&ws, &opts()).expect("snapshot");
                    (dir, repo)
                },
                BatchSize::PerIteration,
            )
        });

        let dir = tempfile::tempdir_in(scratch.path()).expect("repo dir");
        let repo = Repo::init(&dir.path().join("repo"), "bench").expect("init");
        repo.snapshot(&ws, &opts()).expect("first snapshot");
        // Past the racy window, so the stat cache vouches for every file, as it would for a
        // workspace that was not generated a moment ago.
        std::thread::sleep(Duration::from_millis(2100));
        repo.snapshot(&ws, &opts()).expect("second snapshot");

        g.bench_function("no-change snapshot", |b| b.iter(|| repo.snapshot(&ws, &opts()).expect("snapshot")));

        let snap = repo.resolve_snapshot("latest", None).expect("latest");
        let edited = ws.join(std::ffi::OsStr::new(std::str::from_utf8(&pick_file(&repo, &snap)).expect("utf8")));
        let original = fs::read(&edited).expect("read");
        g.bench_function("one-file-changed snapshot", |b| {
            b.iter(|| {
                let mut f = fs::OpenOptions::new().append(true).open(&edited).expect("open");
                writeln!(f, "// bench edit").expect("append");
                repo.snapshot(&ws, &opts()).expect("snapshot")
            })
        });
        fs::write(&edited, &original).expect("restore the edited file");

        let snap = repo.resolve_snapshot("latest", None).expect("latest");
        g.bench_function("list whole snapshot", |b| {
            b.iter(|| {
                let mut n = 0u64;
                repo.list(&snap, b"", true, &mut |_, _| {
                    n += 1;
                    Ok(())
                })
                .expect("list");
                n
            })
        });

        let target = pick_file(&repo, &snap);
        g.bench_function("read one file", |b| {
            b.iter(|| {
                let e = repo.lookup(&snap, &target).expect("lookup");
                repo.read_content(&e).expect("read").len()
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
