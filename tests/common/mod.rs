//! Fixtures shared by the integration tests: workspaces, repositories, and running the binary.
#![allow(dead_code)]

pub mod backend;
pub mod http;
pub mod s3;
pub mod stress;

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn trove_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_trove"))
}

/// `trove --repo REPO ARGS...`, unaffected by this process's `TROVE_REPO` and `TROVE_LOG`.
fn trove_command(repo: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(trove_bin());
    c.arg("--repo").arg(repo).args(args).env_remove("TROVE_REPO").env_remove("TROVE_LOG");
    c
}

/// Runs `trove --repo REPO ARGS...` and returns its output.
pub fn trove(repo: &Path, args: &[&str]) -> Output {
    trove_command(repo, args).output().expect("run trove")
}

/// Runs `trove --repo REPO ARGS...` with failpoint `point` armed (`TROVE_FAILPOINT`), which
/// kills it there, and returns its output.
pub fn trove_at_failpoint(repo: &Path, args: &[&str], point: &str) -> Output {
    trove_command(repo, args).env("TROVE_FAILPOINT", point).output().expect("run trove")
}

/// The node-local cache database of the repository at `repo` under cache directory `base`
/// (`--cache-dir` / `TROVE_CACHE_DIR`): `<base>/<repository id>/cache.db`.
pub fn cache_db(repo: &Path, base: &Path) -> PathBuf {
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(repo.join("config.json")).expect("config")).expect("config parses");
    base.join(config["id"].as_str().expect("id")).join("cache.db")
}

/// `target/NAME`, made by `install` if missing: into a temporary directory, renamed into place,
/// so concurrent test binaries never see half an install.
pub fn install_once(name: &str, install: impl FnOnce(&Path)) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let dir = target.join(name);
    if dir.exists() {
        return dir;
    }
    fs::create_dir_all(&target).expect("target dir");
    let tmp = target.join(format!("{name}.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    install(&tmp);
    if fs::rename(&tmp, &dir).is_err() {
        // Another test binary installed it first.
        let _ = fs::remove_dir_all(&tmp);
    }
    dir
}

/// A virtualenv under `target/NAME` holding `requirement` from PyPI, installed if missing.
pub fn python_venv(name: &str, requirement: &str) -> PathBuf {
    install_once(name, |tmp| {
        let ok = Command::new("python3").arg("-m").arg("venv").arg(tmp).status().expect("python3 -m venv");
        assert!(ok.success(), "python3 -m venv failed");
        let ok = Command::new(tmp.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", requirement])
            .status()
            .expect("pip install");
        assert!(ok.success(), "pip install {requirement} failed");
    })
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small workspace with every kind trove keeps: nested files, an empty directory, a
/// relative and an absolute symlink, an executable, a non-UTF-8 name, a chunked large file,
/// and entries the default exclusions drop.
pub fn rich_workspace(dir: &Path) {
    fs::create_dir_all(dir.join("src/deep/er")).expect("mkdir");
    fs::create_dir_all(dir.join("empty")).expect("mkdir");
    fs::create_dir_all(dir.join("node_modules/pkg")).expect("mkdir");
    fs::write(dir.join("src/main.rs"), "fn main() {}\n").expect("write");
    fs::write(dir.join("src/deep/er/notes.txt"), "deep\n".repeat(100)).expect("write");
    fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").expect("write");
    set_mode(&dir.join("run.sh"), 0o755);
    fs::write(dir.join("node_modules/pkg/index.js"), "x").expect("write");
    fs::write(dir.join("yarn.lock"), "lock").expect("write");
    fs::write(dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), b"latin-1 name").expect("write");
    let mut rng = trove::sample::Rng::new(3);
    fs::write(dir.join("big.bin"), rng.bytes(3 << 20)).expect("write");
    std::os::unix::fs::symlink("src/main.rs", dir.join("link")).expect("symlink");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("abs-link")).expect("symlink");
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every entry under `dir` (relative path bytes, kind, mode, mtime ns, content or target),
/// excluding what the default exclusions drop: what a restore must reproduce.
/// One entry as `tree_state` sees it: path, kind, mode, mtime ns, content or link target.
pub type EntryState = (Vec<u8>, String, u32, i64, Vec<u8>);

pub fn tree_state(dir: &Path) -> Vec<EntryState> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.expect("walk");
        let rel = e.path().strip_prefix(dir).expect("rel").as_os_str().as_bytes().to_vec();
        let name = e.file_name().as_bytes();
        if name == b"node_modules" || rel.starts_with(b"node_modules/") || name.ends_with(b".lock") {
            continue;
        }
        let m = fs::symlink_metadata(e.path()).expect("lstat");
        let ft = m.file_type();
        let (kind, body) = if ft.is_symlink() {
            ("link", fs::read_link(e.path()).expect("readlink").as_os_str().as_bytes().to_vec())
        } else if ft.is_dir() {
            ("dir", Vec::new())
        } else {
            ("file", fs::read(e.path()).expect("read"))
        };
        // Directory mtimes are checked too: restore sets them after filling the directory.
        let mtime = if ft.is_symlink() { 0 } else { m.mtime() * 1_000_000_000 + m.mtime_nsec() };
        out.push((rel, kind.to_string(), m.mode() & 0o7777, mtime, body));
    }
    out
}

/// Every row of `sql`, a query of two columns, as pairs.
pub fn pairs<A: rusqlite::types::FromSql, B: rusqlite::types::FromSql>(
    conn: &rusqlite::Connection,
    sql: &str,
) -> Vec<(A, B)> {
    conn.prepare(sql)
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// A copy of the tree at `from` (a fixture, which opening a repository may write to; or real
/// files for a workspace) at `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        fs::create_dir_all(&dst).expect("mkdir");
        for entry in fs::read_dir(&src).expect("read the tree to copy") {
            let entry = entry.expect("entry");
            let target = dst.join(entry.file_name());
            let kind = entry.file_type().expect("type");
            if kind.is_dir() {
                stack.push((entry.path(), target));
            } else if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(entry.path()).expect("readlink"), &target).expect("symlink");
            } else {
                fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }
}

/// Kills an `edit_file` of `notes.txt` in `ws` (from "one\ntwo\n" to "one\nTWO\n"; `edit` builds
/// the command from the call's parameters) at failpoint `log:published`, until the segment the
/// failpoint took was the edit's own: the first segment a process creates is the session's
/// activity when a second has passed since the last, else the edit's, so each try comes right
/// after `read` (given a `read_file` call's parameters), a call that recorded the activity. At
/// most five tries.
pub fn kill_edit_after_its_segment(ws: &Path, read: impl Fn(&str), edit: impl Fn(&str) -> Command) {
    use sha2::Digest;
    use std::os::unix::process::ExitStatusExt;
    let call = serde_json::json!({
        "path": "notes.txt",
        "expectedSha256": hex::encode(sha2::Sha256::digest(b"one\ntwo\n")),
        "edits": [{"oldText": "two", "newText": "TWO"}],
    })
    .to_string();
    for _ in 0..5 {
        read(r#"{"path": "notes.txt"}"#);
        let out = edit(&call).env("TROVE_FAILPOINT", "log:published").output().expect("run");
        assert_eq!(out.status.signal(), Some(6), "killed at the failpoint: {}", stderr(&out));
        if fs::read_to_string(ws.join("notes.txt")).expect("read") == "one\nTWO\n" {
            return;
        }
    }
    panic!("the edit's own segment was never the one the failpoint took");
}
