//! The search index behind content searches of snapshots: it never rules out a file that
//! matches (every pattern kind, case folding, non-ASCII text, binary and chunked files), it
//! reads only candidates for a selective pattern, it is shared by snapshots with the same
//! contents, its segments merge, and a damaged posting list is reported, never trusted.

mod common;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use trove::{LineMatch, Matcher, Repo, Scope, SearchMode, SearchSpec, SnapshotInfo, SnapshotOptions};

fn snap(repo: &Repo, dir: &Path) -> SnapshotInfo {
    let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
    repo.snapshot(dir, &opts).expect("snapshot")
}

fn write(dir: &Path, rel: &[u8], bytes: &[u8]) {
    let p = dir.join(std::ffi::OsStr::from_bytes(rel));
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, bytes).expect("write");
}

/// A deterministic stream of numbers (no dependency on a random crate).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

const WORDS: &[&str] = &[
    "fn",
    "needle",
    "Needle",
    "NEEDLE",
    "hay",
    "stack",
    "café",
    "CAFÉ",
    "\u{212a}elvin",
    "kelvin",
    "value_1",
    "x",
    "ab",
    "abc",
    "colour",
    "color",
    "Straße",
    "{",
    "}",
    "(",
    ")",
    "//",
    "0xdead",
    "beta",
    "λx",
    "日本語",
];

/// Files of random lines of `WORDS`, some binary (a NUL early or late), one chunked, one name
/// that is not UTF-8; returns every file's path and bytes.
fn workspace(dir: &Path, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Lcg(seed);
    let mut files = Vec::new();
    for i in 0..120 {
        let mut text = String::new();
        for _ in 0..rng.next(40) {
            for _ in 0..1 + rng.next(6) {
                text.push_str(WORDS[rng.next(WORDS.len() as u64) as usize]);
                text.push(if rng.next(3) == 0 { '_' } else { ' ' });
            }
            text.push('\n');
        }
        let mut bytes = text.into_bytes();
        match i % 17 {
            3 => bytes.insert(bytes.len() / 2, 0), // binary: never reported
            5 => bytes.extend(b"\n".repeat(9000).iter().chain(b"\0 needle\n")), // NUL past 8 KiB: still text
            _ => {}
        }
        let name = format!("d{}/f{i:03}.txt", i % 7).into_bytes();
        files.push((name, bytes));
    }
    let mut big = "hay stack filler line\n".repeat(80_000);
    big.push_str("the one needle in the chunked file\n");
    files.push((b"big/chunked.txt".to_vec(), big.into_bytes()));
    files.push((b"odd/caf\xe9.txt".to_vec(), b"latin-1 name, needle inside\n".to_vec()));
    for (rel, bytes) in &files {
        write(dir, rel, bytes);
    }
    files.sort();
    files
}

fn spec(pattern: &str, mode: SearchMode, case_insensitive: bool) -> SearchSpec {
    SearchSpec { pattern: pattern.into(), mode, case_insensitive, ..SearchSpec::default() }
}

/// The answer a file-by-file search of the bytes themselves gives, with no index.
fn oracle(files: &[(Vec<u8>, Vec<u8>)], m: &Matcher) -> Vec<LineMatch> {
    let mut out = Vec::new();
    for (rel, bytes) in files {
        m.search_bytes(rel, bytes, usize::MAX, &mut out).expect("search");
    }
    out
}

fn key(m: &LineMatch) -> (String, usize, usize, String) {
    (m.path.clone(), m.line, m.column, m.text.clone())
}

#[test]
fn the_index_never_rules_out_a_file_that_holds_a_match() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    let files = workspace(&w, 7);
    let s = snap(&repo, &w);
    let patterns: &[(&str, SearchMode)] = &[
        ("needle", SearchMode::Literal),
        ("café", SearchMode::Literal),
        ("value_1 x", SearchMode::Literal),
        ("(", SearchMode::Literal),
        (r"needle_\w+", SearchMode::Regex),
        (r"fn (hay|stack)", SearchMode::Regex),
        ("colou?r", SearchMode::Regex),
        ("kelvin", SearchMode::Regex),
        ("straße", SearchMode::Regex),
        (r"\bab\b", SearchMode::Regex),
        ("日本", SearchMode::Regex),
        (r"λx\s+\{", SearchMode::Regex),
        ("^needle$", SearchMode::Regex),
        (r"[Nn]eedle [hs]", SearchMode::Regex),
        ("(?i)NEEDLE (hay|STACK)", SearchMode::Regex),
        ("one needle in the chunked", SearchMode::Literal),
        ("no such words anywhere", SearchMode::Literal),
    ];
    let mut ruled_out = 0;
    for &(p, mode) in patterns {
        for ci in [false, true] {
            let m = Matcher::new(&spec(p, mode, ci)).expect("matcher");
            let found = repo.search_snapshot(&s, &Scope::whole(), &m, 1_000_000).expect("search");
            let want: Vec<_> = oracle(&files, &m).iter().map(key).collect();
            let got: Vec<_> = found.matches.iter().map(key).collect();
            assert_eq!(got, want, "pattern {p:?} ({mode:?}, case-insensitive {ci})");
            assert_eq!(found.files_searched + found.files_ruled_out, files.len(), "{p:?}");
            ruled_out += found.files_ruled_out;
        }
    }
    assert!(ruled_out > 0, "selective patterns read fewer files");

    // A pattern with no trigram to look up reads every file, and needs no index.
    let m = Matcher::new(&spec(r"\w+", SearchMode::Regex, false)).expect("matcher");
    let found = repo.search_snapshot(&s, &Scope::whole(), &m, 1_000_000).expect("search");
    assert_eq!((found.files_ruled_out, found.matches.len()), (0, oracle(&files, &m).len()));

    // A selective pattern reads just the files holding its trigrams.
    let m = Matcher::new(&spec("one needle in the chunked", SearchMode::Literal, false)).expect("matcher");
    let found = repo.search_snapshot(&s, &Scope::whole(), &m, 10).expect("search");
    assert_eq!((found.files_searched, found.matches.len()), (1, 1));
}

#[test]
fn snapshots_share_documents_segments_merge_and_damage_is_reported() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = Repo::init(&tmp.path().join("repo"), "t").expect("init");
    let w = tmp.path().join("w");
    let mut files = workspace(&w, 11);
    let needle = Matcher::new(&spec("needle", SearchMode::Literal, false)).expect("matcher");
    let conn = trove::testing::conn(&repo);
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).expect(sql);
    let distinct = |files: &[(Vec<u8>, Vec<u8>)]| {
        let mut ids: Vec<_> = files.iter().map(|(_, b)| b.clone()).collect();
        ids.sort();
        ids.dedup();
        ids.len() as i64
    };

    // Twenty snapshots, each one new file: every search indexes only what is new, as one more
    // segment, and past sixteen segments they merge. Results stay those of a plain search.
    for round in 0..20 {
        let rel = format!("new/r{round:02}.txt").into_bytes();
        let bytes = format!("round {round} brings a needle\n").into_bytes();
        write(&w, &rel, &bytes);
        files.push((rel, bytes));
        files.sort();
        let s = snap(&repo, &w);
        let found = repo.search_snapshot(&s, &Scope::whole(), &needle, 1_000_000).expect("search");
        let want: Vec<_> = oracle(&files, &needle).iter().map(key).collect();
        assert_eq!(found.matches.iter().map(key).collect::<Vec<_>>(), want, "round {round}");
        assert!(count("SELECT COUNT(*) FROM search_segments") <= 16, "round {round}: segments merge");
    }
    assert_eq!(count("SELECT COUNT(*) FROM search_docs"), distinct(&files), "one document per content");
    assert_eq!(count("SELECT COUNT(*) FROM search_snapshots"), 20);

    // A posting list that does not decode is reported with its trigram, never trusted.
    conn.execute(
        "UPDATE search_grams SET docs = x'80' WHERE gram = ?1",
        [i64::from_be_bytes([0, 0, 0, 0, 0, b'n', b'e', b'e'])],
    )
    .expect("damage");
    let s = repo.resolve_snapshot("latest", Some("w")).expect("latest");
    let e = repo.search_snapshot(&s, &Scope::whole(), &needle, 10).expect_err("damaged index");
    assert_eq!(e.kind(), trove::ErrorKind::Corrupt);
    assert!(e.message().contains("trigram 6e6565"), "{}", e.message());
}
