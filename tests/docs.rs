//! The documentation, checked as a reader uses it.
//!
//! The shell examples, run as a reader runs them: every ```` ```sh ```` block of the README (on
//! its own) and of the manual's chapters (`docs/src/`, all in one run, in the order of
//! [`CHAPTERS_RUN`]), in one shell (a variable one block sets is there for the next), from an
//! empty home directory with `trove` on the PATH, so that an example that no longer works
//! fails this test.
//!
//! What the runner changes, and nothing else: the server's port (the examples' `4100` becomes
//! a free one, so that tests can run side by side), and `curl`, which fails on an HTTP error
//! status (`--fail-with-body`), so that a refused request fails its example. A block preceded by
//! `<!-- not run: REASON -->` is skipped (building trove itself, say), with its reason in the
//! text for a reader to see. Every block runs under `set -euo pipefail`: a command that fails
//! fails the test, naming the block's file and line; an example meant to show a refusal says so
//! with `|| echo ...` as a reader would write it.
//!
//! The links: every relative link of the README and the manual names a file that exists and,
//! with an `#anchor`, a heading of it.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One example: its first line in the file, and its text.
struct Block {
    line: usize,
    text: String,
}

/// The ```` ```sh ```` blocks of `markdown`, but those marked as not run. A `not run` mark
/// without a reason is refused: a reader must learn why an example is not checked. Fences are
/// found as CommonMark has them: three or more backticks opening a line, an info string
/// without a backtick (a line that starts with an inline code span is no fence), closed by as
/// many backticks or more.
fn sh_blocks(markdown: &str) -> Vec<Block> {
    let fence = |line: &str| -> Option<(usize, String)> {
        let ticks = line.len() - line.trim_start_matches('`').len();
        let info = &line[ticks..];
        (ticks >= 3 && !info.contains('`')).then(|| (ticks, info.trim().to_string()))
    };
    let mut blocks = Vec::new();
    let mut lines = markdown.lines().enumerate();
    let mut skip_next = false;
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(mark) = trimmed.strip_prefix("<!-- not run:") {
            let reason = mark.trim_end_matches("-->").trim();
            assert!(!reason.is_empty(), "line {}: a `not run` mark gives its reason", i + 1);
            skip_next = true;
            continue;
        }
        let Some((ticks, info)) = fence(trimmed) else {
            if !trimmed.is_empty() {
                skip_next = false;
            }
            continue;
        };
        let mut text = String::new();
        let mut closed = false;
        for (_, l) in lines.by_ref() {
            let t = l.trim();
            if t.len() >= ticks && t.chars().all(|c| c == '`') {
                closed = true;
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        assert!(closed, "line {}: a code block that never closes", i + 1);
        if info == "sh" && !std::mem::take(&mut skip_next) {
            blocks.push(Block { line: i + 1, text });
        }
        skip_next = false;
    }
    blocks
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("address").port()
}

/// The chapters whose examples run, in the order they run: each may use what an earlier one
/// made (the repository, a session, a server).
const CHAPTERS_RUN: &[&str] = &[
    "docs/src/getting-started.md",
    "docs/src/cli.md",
    "docs/src/s3.md",
    "docs/src/fleet.md",
    "docs/src/server.md",
    "docs/src/tools.md",
    "docs/src/http-api.md",
    "docs/src/review.md",
    "docs/src/trash.md",
    "docs/src/operations.md",
    "docs/src/audit.md",
    "docs/src/development.md",
];

fn read(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Runs the examples of `files` (relative to the crate), one after the other in one shell, and
/// fails naming the block that failed.
fn run_examples(files: &[&str]) {
    let blocks: Vec<(&str, Block)> =
        files.iter().flat_map(|file| sh_blocks(&read(file)).into_iter().map(move |b| (*file, b))).collect();
    assert!(!blocks.is_empty(), "{files:?} have no examples");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let port = free_port().to_string();
    let bin_dir = common::trove_bin().parent().expect("bin dir").to_path_buf();

    // Each block announces itself on stderr, so that a failure names it; the servers an
    // example starts in the background are stopped when the script exits, however it exits.
    let mut script = String::from(
        "set -euo pipefail\ntrap 'for j in $(jobs -p); do kill $j; done; wait' EXIT\n\
         trap 'echo \"failed: $BASH_COMMAND\" >&2' ERR\ncd \"$HOME\"\n\
         curl() { command curl --fail-with-body \"$@\"; }\n",
    );
    for (file, b) in &blocks {
        script.push_str(&format!("echo '>>> {file}:{}' >&2\n", b.line));
        script.push_str(&b.text.replace("4100", &port));
    }
    let log = dir.path().join("examples.log");
    // One open file for both streams: one offset, so that the block marks and the output
    // interleave as they were written.
    let out = std::fs::File::create(&log).expect("log");
    // Its own process group, so that a server an example left running goes with it on a
    // timeout.
    let mut child = Command::new("bash")
        .process_group(0)
        .arg("-c")
        .arg(&script)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()))
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("TROVE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("run bash");
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    let failed_in = out.lines().filter_map(|l| l.strip_prefix(">>> ")).next_back().unwrap_or("(before any block)");
    match status {
        Some(s) if s.success() => {}
        Some(s) => {
            panic!("the example at {failed_in} failed ({s}); output from its block on:\n{}", tail_from(&out, failed_in))
        }
        None => panic!("the examples ran past 300 s, in {failed_in}:\n{}", tail_from(&out, failed_in)),
    }
}

/// The output from block `at` on.
fn tail_from(out: &str, at: &str) -> String {
    let start = out.find(&format!(">>> {at}")).unwrap_or(0);
    out[start..].to_string()
}

#[test]
fn the_readme_examples_run() {
    run_examples(&["README.md"]);
}

#[test]
fn the_manual_examples_run() {
    run_examples(CHAPTERS_RUN);
}

/// A chapter with examples that is not in [`CHAPTERS_RUN`] would never be checked.
#[test]
fn every_chapter_with_examples_is_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src");
    for entry in std::fs::read_dir(&dir).expect("docs/src").flatten() {
        let name = format!("docs/src/{}", entry.file_name().to_string_lossy());
        if name.ends_with(".md") && !sh_blocks(&read(&name)).is_empty() {
            assert!(CHAPTERS_RUN.contains(&name.as_str()), "{name} has examples but is not in CHAPTERS_RUN");
        }
    }
}

#[test]
fn blocks_are_found_and_not_run_marks_skip_exactly_one() {
    let md = "text\n```sh\necho one\n```\n<!-- not run: it builds trove -->\n```sh\nexit 1\n```\n```console\nx\n```\n\
              ```` ```sh ```` blocks are run\n````sh\necho two\n```\n````\n";
    let found: Vec<(usize, String)> = sh_blocks(md).into_iter().map(|b| (b.line, b.text)).collect();
    assert_eq!(found, [(2, "echo one\n".to_string()), (13, "echo two\n```\n".to_string())]);
}

/// The lines of `markdown` outside fenced code blocks, with inline code spans blanked (where
/// links can be) or, `code_kept`, only their backticks dropped (a heading's text).
fn prose(markdown: &str, code_kept: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<usize> = None;
    for (i, line) in markdown.lines().enumerate() {
        let t = line.trim();
        let ticks = t.len() - t.trim_start_matches('`').len();
        match fence {
            Some(open) if ticks >= open && t.chars().all(|c| c == '`') => fence = None,
            Some(_) => {}
            None if ticks >= 3 && !t[ticks..].contains('`') => fence = Some(ticks),
            None => {
                // Code spans: every other run of backticks opens or closes one.
                let mut kept = String::new();
                for (n, part) in line.split('`').enumerate() {
                    if n % 2 == 0 || code_kept {
                        kept.push_str(part);
                    }
                }
                out.push((i + 1, kept));
            }
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of `markdown`, with their lines.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line, text) in prose(markdown, false) {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push((line, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors of `markdown`'s headings as mdBook (and GitHub) make them: lower case, spaces
/// to `-`, everything but letters, digits, `-` and `_` dropped.
fn anchors(markdown: &str) -> Vec<String> {
    prose(markdown, true)
        .into_iter()
        .filter_map(|(_, l)| l.strip_prefix('#').map(|h| h.trim_start_matches('#').trim().to_string()))
        .map(|h| {
            h.chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
                    c if c.is_whitespace() => Some('-'),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Every relative link of the README, the changelog and the manual names a file that exists,
/// and an anchor a heading of it.
#[test]
fn internal_links_lead_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec!["README.md".to_string(), "CHANGELOG.md".to_string()];
    for entry in std::fs::read_dir(root.join("docs/src")).expect("docs/src").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/src/{name}"));
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let dir = root.join(file).parent().expect("a file's directory").to_path_buf();
        for (line, target) in links(&read(file)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if path.is_empty() { root.join(file) } else { dir.join(path) };
            if !linked.exists() {
                broken.push(format!("{file}:{line}: {target}: no such file"));
                continue;
            }
            let is_markdown = linked.extension().is_some_and(|e| e == "md");
            if !anchor.is_empty() && is_markdown {
                let text = std::fs::read_to_string(&linked).expect("read the linked file");
                if !anchors(&text).iter().any(|a| a == anchor) {
                    broken.push(format!("{file}:{line}: {target}: no heading with that anchor"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 20, "the manual's own links were found ({checked})");
}

#[test]
fn links_and_anchors_are_read_as_a_renderer_reads_them() {
    let md = "# The `files` tool\n[a](x.md#the-files-tool) `[b](code.md)`\n```\n[c](fenced.md)\n```\n[d](y.md)\n";
    assert_eq!(links(md), [(2, "x.md#the-files-tool".to_string()), (6, "y.md".to_string())]);
    assert_eq!(anchors(md), ["the-files-tool"]);
}

/// The manual carries the API document the server serves at `/openapi.json`, so that a reader
/// without a server has it; a change to the API that does not write it again fails here.
#[test]
fn the_manuals_api_document_is_the_one_the_server_serves() {
    let served = serde_json::to_string_pretty(&trove::server::openapi::document()).expect("serialize") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/openapi.json");
    if std::env::var_os("TROVE_WRITE_DOCS").is_some() {
        std::fs::write(&path, &served).expect("write docs/src/openapi.json");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == served,
        "docs/src/openapi.json is not the document the server serves: write it again with `TROVE_WRITE_DOCS=1 cargo test --test docs`"
    );
}
