//! apply_patch's matching on big inputs: a 100,000-line file and a patch of 2,000 chunks, with
//! distinct lines ("typical"), with most context lines repeated across the file
//! ("repetitive"), and with context that matches only once whitespace or typographic quotes
//! are read loosely (as agents often write it), where a scan of the whole file per pass and
//! chunk costs lines x chunks.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

/// How the patch's context differs from the file's lines.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    Same,
    /// The file's lines have a trailing space the patch leaves out.
    TrailingSpace,
    /// The file has typographic quotes where the patch has ASCII ones.
    Quotes,
}

/// A file of `n` lines and a patch changing every `n / chunks`-th line, with three lines of
/// context on each side; `repeat` makes most lines the same.
fn input(n: usize, chunks: usize, repeat: bool, context: Context) -> (Vec<u8>, String) {
    let line = |i: usize| {
        if repeat && !i.is_multiple_of(8) {
            "        total += step;".to_string()
        } else if i % 10 == 9 {
            "    }".to_string()
        } else {
            format!("    let v{i} = compute({i}, \"{}\");", i % 97)
        }
    };
    let file: String = (0..n)
        .map(|i| match context {
            Context::Same => line(i) + "\n",
            Context::TrailingSpace => line(i) + " \n",
            Context::Quotes => line(i).replace('"', "\u{201C}") + "\n",
        })
        .collect();
    let mut patch = String::from("*** Begin Patch\n*** Update File: big.rs\n");
    let step = n / chunks;
    for c in 0..chunks {
        let at = c * step + step / 2;
        patch.push_str("@@\n");
        for i in at - 3..at {
            patch.push_str(&format!(" {}\n", line(i)));
        }
        patch.push_str(&format!("-{}\n+    let changed{at} = {at};\n", line(at)));
        for i in at + 1..at + 4 {
            patch.push_str(&format!(" {}\n", line(i)));
        }
    }
    patch.push_str("*** End Patch\n");
    (file.into_bytes(), patch)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply_patch matching");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let cases = [
        ("typical", false, Context::Same),
        ("repetitive", true, Context::Same),
        ("trailing spaces", false, Context::TrailingSpace),
        ("typographic quotes", false, Context::Quotes),
    ];
    for (name, repeat, context) in cases {
        let (file, text) = input(100_000, 2_000, repeat, context);
        let patch = trove::patch::parse(&text).expect("parse");
        let trove::patch::FileOp::Update { chunks, .. } = &patch.ops[0] else { panic!("an update") };
        g.bench_function(format!("100k lines, 2000 chunks, {name}"), |b| {
            b.iter(|| trove::patch::apply_chunks("big.rs", &file, chunks).expect("applies"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
