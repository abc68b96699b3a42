//! The README's shell examples, run as a reader runs them: every ```` ```sh ```` block in order,
//! in one shell (a variable one block sets is there for the next), from an empty home directory
//! with `trove` on the PATH, so that an example that no longer works fails this test.
//!
//! What the runner changes, and nothing else: the server's port (the README's `4100` becomes
//! a free one, so that tests can run side by side), and `curl`, which fails on an HTTP error
//! status (`--fail-with-body`), so that a refused request fails its example. A block preceded by
//! `<!-- not run: REASON -->` is skipped (building trove itself, say), with its reason in the
//! README for a reader to see. Every block runs under `set -euo pipefail`: a command that fails
//! fails the test, naming the block's line; an example meant to show a refusal says so with
//! `|| echo ...` as a reader would write it.

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

/// Runs the examples of `file` (relative to the crate) and fails naming the block that failed.
fn run_examples(file: &str) {
    let markdown = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).expect("read");
    let blocks = sh_blocks(&markdown);
    assert!(!blocks.is_empty(), "{file} has no examples");
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
    for b in &blocks {
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
    run_examples("README.md");
}

#[test]
fn blocks_are_found_and_not_run_marks_skip_exactly_one() {
    let md = "text\n```sh\necho one\n```\n<!-- not run: it builds trove -->\n```sh\nexit 1\n```\n```console\nx\n```\n\
              ```` ```sh ```` blocks are run\n````sh\necho two\n```\n````\n";
    let found: Vec<(usize, String)> = sh_blocks(md).into_iter().map(|b| (b.line, b.text)).collect();
    assert_eq!(found, [(2, "echo one\n".to_string()), (13, "echo two\n```\n".to_string())]);
}
