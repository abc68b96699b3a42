//! Criterion benchmarks of post-session review (issue 15) on a 100,000-file workspace: a diff of
//! two snapshots differing in 10 files, what a session that changed 10 files did (ended, and
//! still running against its live tree), `find` over 100 snapshots (by name and by glob, the
//! path index up to date), and a regex search of a 200 MB snapshot. The search's comparison
//! with ripgrep over the same files is `benches/review_search.sh` (the two alternate run by run).
//! The repository lives in a temporary directory on the disk `TMPDIR` points at.

use std::fs;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use trove::{DiffOptions, DiffTarget, EndReason, Matcher, Repo, Scope, SearchMode, SearchSpec, SessionSpec};

const FILES: usize = 100_000;

/// `n` small source-like files, 100 to a directory, 10 directories to a parent.
fn make_tree(root: &Path, n: usize) {
    for i in 0..n {
        let dir = root.join(format!("p{:02}/d{:03}", i / 10_000, (i / 100) % 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        fs::write(dir.join(format!("f{i:06}.rs")), format!("// file {i}\nfn f{i}() -> u64 {{ {i} }}\n"))
            .expect("write");
    }
}

/// The path of file `i` of `make_tree`.
fn file(i: usize) -> String {
    format!("p{:02}/d{:03}/f{i:06}.rs", i / 10_000, (i / 100) % 100)
}

fn tool(repo: &Repo, s: &trove::SessionId, name: &str, p: serde_json::Value) -> serde_json::Value {
    let call = trove::tools::ToolCall::parse(name, p).expect("parse");
    trove::tools::run(repo, &repo.session(s).expect("session"), call, "bench").expect(name).to_json()
}

/// A session on `ws` that rewrites 10 files through the tools.
fn session_changing_ten(repo: &Repo, ws: &Path, round: usize) -> trove::Session {
    let root = ws.to_path_buf();
    let spec = SessionSpec { workspace: Some("w".into()), persistent: true, ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(root), "bench").expect("session");
    for k in 0..10 {
        let path = file(k * 9_973 % FILES);
        let sha = tool(repo, &s.id, "read_file", json!({ "path": path }))["sha256"].as_str().expect("sha").to_string();
        let content = format!("// rewritten in round {round}\nfn g{k}() {{}}\n");
        tool(repo, &s.id, "write_file", json!({ "path": path, "content": content, "expectedSha256": sha }));
    }
    s
}

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ws = scratch.path().join("ws");
    make_tree(&ws, FILES);
    // A workspace an agent works in is older than the racy window: files written in the last
    // two seconds would be read again by every snapshot and live diff, as git re-reads them too.
    std::thread::sleep(Duration::from_millis(2_100));
    let repo = Repo::init(&scratch.path().join("repo"), "bench").expect("init");
    let opts = trove::SnapshotOptions { workspace: Some("w".into()), ..Default::default() };
    let a = repo.snapshot(&ws, &opts).expect("snapshot");

    let mut g = c.benchmark_group("review");
    g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));

    // Two snapshots 10 files apart (through a session, which also takes its start snapshot).
    let ended = session_changing_ten(&repo, &ws, 0);
    let ended = repo.end_session(&ended.id, EndReason::Deleted, "bench").expect("end");
    let b = repo.resolve_snapshot("latest", Some("w")).expect("latest");
    let (from, to) = (DiffTarget::Snapshot(Box::new(a.clone())), DiffTarget::Snapshot(Box::new(b)));
    let lines = DiffOptions::default();
    let r = repo.diff(&from, &to, &lines).expect("diff");
    assert_eq!(r.stats.changed, 10, "{:?}", r.stats);
    g.bench_function("diff_100k_files_10_changed", |bn| bn.iter(|| repo.diff(&from, &to, &lines).expect("diff")));
    let ids = DiffOptions { lines: false, ..DiffOptions::default() };
    g.bench_function("diff_100k_files_10_changed_no_lines", |bn| {
        bn.iter(|| repo.diff(&from, &to, &ids).expect("diff"))
    });

    g.bench_function("session_changes_100k_files_ended", |bn| {
        bn.iter(|| repo.session_changes(&ended, &lines).expect("changes"))
    });
    let active = session_changing_ten(&repo, &ws, 1);
    let r = repo.session_changes(&active, &lines).expect("changes");
    assert_eq!(r.stats.changed, 10, "{:?}", r.stats);
    g.bench_function("session_changes_100k_files_active_live", |bn| {
        bn.iter(|| repo.session_changes(&active, &lines).expect("changes"))
    });
    // As a server answers it: a change feed keeps the live tree's trees, so each call reads
    // again only what changed since the last (here one file rewritten before every call).
    let mut served = Repo::open(&scratch.path().join("repo")).expect("open");
    served.set_live_feeds(std::sync::Arc::new(trove::LiveFeeds::new()));
    let first = served.session_changes(&active, &lines).expect("changes");
    assert_eq!(first.stats.changed, 10, "{:?}", first.stats);
    let mut round = 0u64;
    g.bench_function("session_changes_100k_files_active_feed_one_write", |bn| {
        bn.iter(|| {
            round += 1;
            fs::write(ws.join(file(FILES / 2)), format!("// feed round {round}\n")).expect("write");
            served.session_changes(&active, &lines).expect("changes")
        })
    });
    // Written here too: with a name filter the benchmark above may not have run.
    fs::write(ws.join(file(FILES / 2)), "// feed round last\n").expect("write");
    let r = served.session_changes(&active, &lines).expect("changes");
    assert_eq!(r.stats.changed, 11, "{:?}", r.stats);
    // A feed's first read: the whole walk, every directory watched as it is listed.
    g.bench_function("session_changes_100k_files_feed_start", |bn| {
        bn.iter(|| {
            served.set_live_feeds(std::sync::Arc::new(trove::LiveFeeds::new()));
            served.session_changes(&active, &lines).expect("changes")
        })
    });
    repo.end_session(&active.id, EndReason::Deleted, "bench").expect("end");

    // 100 snapshots, each a file changed from the one before.
    let mut n = repo.snapshots(Some("w")).expect("list").len();
    let mut k = 0;
    while n < 100 {
        fs::write(ws.join(file(k * 7_919 % FILES)), format!("// version {k}\n")).expect("write");
        repo.snapshot(&ws, &opts).expect("snapshot");
        n += 1;
        k += 1;
    }
    // The first query brings the index up to date (once); the benchmark is the query itself.
    let first = repo.find_paths("f000042.rs", Some("w"), false, 1000).expect("find");
    assert!(!first.matches.is_empty());
    g.bench_function("find_100_snapshots_100k_files_by_name", |bn| {
        bn.iter(|| repo.find_paths(&format!("f{:06}.rs", 7_919), None, false, 1000).expect("find"))
    });
    g.bench_function("find_100_snapshots_100k_files_by_glob", |bn| {
        bn.iter(|| repo.find_paths("f00004*.rs", None, false, 1000).expect("find"))
    });
    g.bench_function("log_100_snapshots_100k_files", |bn| {
        bn.iter(|| repo.path_log("w", file(0).as_bytes(), false, &Scope::whole()).expect("log"))
    });
    drop(g);

    // A 200 MB snapshot of text files, searched for a rare regex.
    let big = scratch.path().join("big");
    // Every line differs (no two files share content, compression is ordinary), about 50 KiB
    // a file.
    for i in 0..4_000 {
        let body: String = (0..730)
            .map(|n| format!("let value_{i}_{n} = compute(alpha{n}, beta, {}); // source text\n", i * n))
            .collect();
        let dir = big.join(format!("d{:02}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        let needle = if i % 500 == 0 { format!("fn needle_{i}() {{}}\n") } else { String::new() };
        fs::write(dir.join(format!("f{i:04}.rs")), format!("{body}{needle}")).expect("write");
    }
    let big_opts = trove::SnapshotOptions { workspace: Some("big".into()), ..Default::default() };
    let snap = repo.snapshot(&big, &big_opts).expect("snapshot");
    let spec = SearchSpec { pattern: r"fn needle_\d+".into(), mode: SearchMode::Regex, ..SearchSpec::default() };
    let m = Matcher::new(&spec).expect("matcher");
    let found = repo.search_snapshot(&snap, &Scope::whole(), &m, 1000).expect("search");
    assert_eq!(found.matches.len(), 8);
    let mut g = c.benchmark_group("review");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(10));
    g.bench_function("search_regex_200mb_snapshot", |bn| {
        bn.iter(|| repo.search_snapshot(&snap, &Scope::whole(), &m, 1000).expect("search"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
