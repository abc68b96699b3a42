//! Property test (issue 11, item 5): random trees with random symlinks (into and out of the
//! scope, into another session's `.sessions/` directory, out of the workspace, absolute, in
//! loops and chains) and a scoped session: no read ever returns bytes of a file outside the
//! scope, and reads from the live tree and from a snapshot of it always give the same answer.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use trove::ChangePolicy;
use trove::Excludes;
use trove::{FileAccess, Scope};
use trove::{Repo, SnapshotOptions};
use trove::{Source, WorkspaceView};

const SID: &str = "sess_000000000001";
/// Directories of the fixed part of the tree; each holds `f.txt` whose content is its path.
const DIRS: [&str; 7] = ["", "in", "in/sub", "out", "out/sub", ".sessions/sess_000000000001", ".sessions/other"];
/// Components that links and probes are made of.
const WORDS: [&str; 12] =
    ["..", ".", "in", "out", "sub", "f.txt", ".sessions", "other", SID, "l0", "l1", "outside.txt"];
const LINKS: [&str; 3] = ["l0", "l1", "l2"];

#[derive(Debug, Clone)]
enum Target {
    /// A path to node `nodes()[i]` of the tree (or outside it), relative to the link's
    /// directory, or absolute; optionally with one more component after it.
    Node(usize, bool, Option<usize>),
    /// Components drawn at random.
    Words(Vec<usize>),
}

#[derive(Debug, Clone)]
struct Link {
    dir: usize,
    name: usize,
    target: Target,
}

/// Workspace-relative paths a link may aim at: every directory, file and link place, and the
/// file just outside the workspace.
fn nodes() -> Vec<String> {
    let mut out: Vec<String> = DIRS.iter().map(|d| d.to_string()).collect();
    out.extend(DIRS.iter().map(|d| join(d, "f.txt")));
    out.extend(DIRS.iter().flat_map(|d| LINKS.iter().map(move |l| join(d, l))));
    out.push("../outside.txt".into());
    out
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}/{b}")
    }
}

fn link() -> impl Strategy<Value = Link> {
    let target = prop_oneof![
        3 => (0..nodes().len(), prop::bool::weighted(0.15), prop::option::weighted(0.3, 0..WORDS.len()))
            .prop_map(|(n, abs, extra)| Target::Node(n, abs, extra)),
        1 => prop::collection::vec(0..WORDS.len(), 1..5).prop_map(Target::Words),
    ];
    (0..DIRS.len(), 0..LINKS.len(), target).prop_map(|(dir, name, target)| Link { dir, name, target })
}

/// The text of a link at `dir` to `target` (`ws` for absolute targets).
fn target_text(ws: &Path, dir: &str, target: &Target) -> String {
    match target {
        Target::Words(w) => w.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join("/"),
        Target::Node(n, absolute, extra) => {
            let node = &nodes()[*n];
            let mut t = if *absolute {
                format!("{}/{node}", ws.display())
            } else {
                let ups = if dir.is_empty() { 0 } else { dir.split('/').count() };
                let up = "../".repeat(ups);
                if node.is_empty() {
                    if up.is_empty() {
                        ".".to_string()
                    } else {
                        up.trim_end_matches('/').to_string()
                    }
                } else {
                    format!("{up}{node}")
                }
            };
            if let Some(e) = extra {
                t = format!("{t}/{}", WORDS[*e]);
            }
            t
        }
    }
}

fn build(ws: &Path, outside: &Path, links: &[Link]) {
    for d in DIRS {
        fs::create_dir_all(ws.join(d)).expect("mkdir");
        let f = if d.is_empty() { "f.txt".to_string() } else { format!("{d}/f.txt") };
        fs::write(ws.join(&f), &f).expect("write");
    }
    fs::write(outside, "OUTSIDE").expect("write");
    for l in links {
        let at = ws.join(DIRS[l.dir]).join(LINKS[l.name]);
        // Two links drawn at one place: the first wins.
        let _ = std::os::unix::fs::symlink(target_text(ws, DIRS[l.dir], &l.target), &at);
    }
}

/// Every path of up to three components drawn from `WORDS` and the link names, and every
/// link place with one more component.
fn probes() -> Vec<String> {
    let words: Vec<&str> = WORDS.iter().chain(&["l2"]).copied().filter(|w| *w != "." && *w != "..").collect();
    let one: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    let mut out = one.clone();
    let two: Vec<String> = one.iter().flat_map(|a| words.iter().map(move |b| format!("{a}/{b}"))).collect();
    let three: Vec<String> = two.iter().flat_map(|a| words.iter().map(move |b| format!("{a}/{b}"))).collect();
    out.extend(two);
    out.extend(three);
    for d in DIRS {
        for l in LINKS {
            out.push(join(d, l));
            out.extend(words.iter().map(|w| format!("{}/{w}", join(d, l))));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_read_leaves_the_scope_and_live_and_snapshot_agree(links in prop::collection::vec(link(), 1..8)) {
        let tmp = tempfile::tempdir().expect("tmp");
        let (ws, outside) = (tmp.path().join("ws"), tmp.path().join("outside.txt"));
        build(&ws, &outside, &links);
        let repo = Repo::in_memory().expect("repo");
        let snap = repo
            .snapshot(&ws, &SnapshotOptions { workspace: Some("ws".into()), ..SnapshotOptions::default() })
            .expect("snapshot");
        let ex = Excludes::none();
        let scope = Scope::new(SID, &FileAccess { read: vec!["in".into()], write: vec!["in/sub".into()] })
            .expect("scope");
        let view = WorkspaceView { name: "ws", session: None, live_dir: Some(&ws), excludes: &ex, scope: Some(&scope) };
        let read = |want: &Source, p: &str| {
            repo.read_file_from(&view, want, p.as_bytes(), 1 << 20, ChangePolicy::Abort).map(|(r, _)| r.bytes)
        };
        for p in probes() {
            let live = read(&Source::Live, &p);
            let from_snap = read(&Source::Snapshot(snap.id.to_string()), &p);
            if let Ok(bytes) = &live {
                let origin = String::from_utf8_lossy(bytes).into_owned();
                prop_assert!(origin != "OUTSIDE", "'{}' read a file outside the workspace", p);
                prop_assert!(
                    scope.can_read(origin.as_bytes()),
                    "'{}' read '{}', outside the scope; links {:?}", p, origin, links
                );
            }
            match (&live, &from_snap) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "'{}': live and snapshot bytes differ", p),
                (Err(a), Err(b)) => prop_assert_eq!(a.kind(), b.kind(), "'{}': {} vs {}", p, a, b),
                (a, b) => prop_assert!(false, "'{}': live {:?} but snapshot {:?}; links {:?}",
                    p, a.as_ref().map(|_| "ok"), b.as_ref().map(|_| "ok"), links),
            }
        }
    }
}
