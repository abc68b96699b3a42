//! Criterion benchmarks of the trash (issue 13): deleting a 10,000-file directory into it as
//! an operator, restoring that directory, listing 100,000 items filtered by prefix (the first
//! page), and exporting a directory item as tar. The repository and workspace live in a
//! temporary directory on the disk `TMPDIR` points at, so every fsync is real.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use trove::{OnConflict, Repo, RestoreRequest, Restorer, TrashFilter, TrashSelection};

/// A directory of `n` small source-like files in 100 subdirectories.
fn make_dir(root: &Path, n: usize) {
    for i in 0..n {
        let dir = root.join(format!("d{:03}", i % 100));
        if i < 100 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        fs::write(dir.join(format!("f{i:05}.rs")), format!("// file {i}\nfn f{i}() -> u64 {{ {i} }}\n"))
            .expect("write");
    }
}

fn bench(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let ws = scratch.path().join("ws");
    fs::create_dir_all(&ws).expect("mkdir");
    let repo = Repo::init(&scratch.path().join("repo"), "bench").expect("init");
    let root = ws.clone();
    // A session gives the workspace its directory.
    repo.create_session(
        &trove::SessionSpec { workspace: Some("w".into()), ..Default::default() },
        move |_| Ok(root),
        "b",
    )
    .expect("session");
    let mut g = c.benchmark_group("trash");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));

    // Delete, then restore, the same 10,000-file directory: each timed on its own.
    let round = |delete: bool| -> Duration {
        make_dir(&ws.join("big"), 10_000);
        let t = Instant::now();
        let items = repo.remove_into_trash("w", &ws, &["big".into()], "bench").expect("rm");
        let deleted = t.elapsed();
        let req = RestoreRequest {
            workspace: Some("w".into()),
            selection: TrashSelection::Ids(vec![items[0].id.clone()]),
            to: None,
            on_conflict: OnConflict::Fail,
            expected_sha256: None,
        };
        let dir = ws.clone();
        let live_dir = move |_: &str| Ok(dir.clone());
        let t = Instant::now();
        let done =
            repo.restore_trash(&req, &Restorer::Operator { actor: "bench", live_dir: &live_dir }).expect("restore");
        let restored = t.elapsed();
        assert_eq!(done.restored, 1, "{done:?}");
        fs::remove_dir_all(ws.join("big")).expect("clean");
        if delete {
            deleted
        } else {
            restored
        }
    };
    g.bench_function("delete a 10,000-file directory", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| round(true)).sum());
    });
    g.bench_function("restore a 10,000-file directory", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| round(false)).sum());
    });

    // 100,000 items: 1,000 directories of 100 deleted files each; a prefix selects one.
    let conn = trove::testing::conn(&repo);
    let tx = conn.unchecked_transaction().expect("tx");
    for i in 0..100_000u64 {
        let t = trove::TrashItem {
            id: format!("trash_{i:012x}").parse().expect("id"),
            workspace: "w".into(),
            session: None,
            path: format!("src/m{:03}/f{i:06}.rs", i % 1000).into_bytes(),
            kind: trove::EntryKind::File,
            size: 100,
            sha256: Some(trove::object::Sha256([1; 32])),
            mode: 0o644,
            object: Some(trove::object::ObjectId([2; 32])),
            deleted_by: "bench".into(),
            deleted_ns: 1_700_000_000_000_000_000 + i as i64 * 1000,
            reason: "delete_file".into(),
            audit_seq: None,
            restored_ns: None,
            mtime_ns: 0,
            files: 0,
            entries: Vec::new(),
        };
        trove::testing::trash::insert(&tx, &t).expect("insert");
    }
    tx.commit().expect("commit");
    for (name, prefix) in [("1% of them", "src/m500"), ("all of them", "src")] {
        let filter = TrashFilter { prefix: prefix.as_bytes().to_vec(), limit: 100, ..Default::default() };
        g.bench_function(format!("list 100,000 items by prefix, first page ({name})"), |b| {
            b.iter(|| {
                let page = repo.trash_page(&filter, |_| true).expect("list");
                assert_eq!(page.items.len(), 100);
            });
        });
    }

    // Export of a directory item of 10,000 files.
    make_dir(&ws.join("exported"), 10_000);
    let items = repo.remove_into_trash("w", &ws, &["exported".into()], "bench").expect("rm");
    let item = repo.trash_item(&items[0].id).expect("item");
    g.bench_function("export a 10,000-file directory item as tar", |b| {
        b.iter(|| repo.export_trash(std::slice::from_ref(&item), &mut std::io::sink(), None, &trove::NoProgress))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
