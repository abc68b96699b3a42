//! A full disk (issue 36, item 15), on a real full file system: a tmpfs of a few MiB mounted
//! for the test and filled to the last byte (needs root, as CI runs; skipped, saying so,
//! where mounting is not permitted).
//!
//! A lease whose withdrawal the full disk refused is withdrawn once there is space, so garbage
//! collection is not held back for the life of the process; commands that only read
//! (`snapshots`, `ls`, `cat`, `check`, a restore to another disk) work on a full repository,
//! and those that write fail saying the disk is full; a tool's I/O failure over HTTP names the
//! request whose log lines hold its details.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::http::{self, TOKEN};
use common::{stderr, stdout, trove};
use serde_json::{json, Value};
use trove::{GcOptions, Repo, SnapshotOptions};

/// A tmpfs mounted on a temporary directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `16m`), or says why not and returns None.
    #[allow(clippy::print_stderr)] // a skipped test says so in the test's output
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tmp");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!("skipped: cannot mount a tmpfs to fill (needs root): {}", String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system to its last byte with a file of zeros, returned to be removed.
    ///
    /// The file is written by a child process (`dd`) and never opened in this one: a child that
    /// another test's thread forks meanwhile gets a copy of every descriptor this process has
    /// open and keeps it until it execs, so a filler open here at that moment would stay
    /// allocated after its removal until that child execs, and a test would go on as if there
    /// were space while the disk is still full
    /// (`a_removed_filler_is_free_space_at_once_whatever_this_process_forks`).
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        // dd ends with "No space left on device": the point of it.
        let out = Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", path.display()))
            .arg("bs=64k")
            .output()
            .expect("run dd");
        assert_eq!(self.free(), 0, "dd left space: {}", String::from_utf8_lossy(&out.stderr));
        path
    }

    /// The bytes free on the file system.
    fn free(&self) -> u64 {
        let st = rustix::fs::statvfs(self.path()).expect("statvfs");
        st.f_bavail * st.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

fn leases(repo: &Repo) -> i64 {
    trove::testing::conn(repo).query_row("SELECT COUNT(*) FROM gc_leases", [], |r| r.get(0)).expect("leases")
}

#[test]
fn a_lease_a_full_disk_kept_from_being_withdrawn_is_withdrawn_once_there_is_space() {
    let Some(disk) = Tmpfs::mount("64m") else { return };
    let repo = Repo::init(&disk.path().join("repo"), "t").expect("init");

    // The disk fills while an operation is in flight: its lease cannot be withdrawn.
    let lease = trove::testing::lease(&repo, "tool").expect("lease");
    let filler = disk.fill();
    drop(lease);
    assert_eq!(leases(&repo), 1, "the full disk refused the withdrawal");
    // Still full: the next lease cannot be recorded either, nor the old one withdrawn.
    drop(trove::testing::lease(&repo, "restore").expect("a lease held by gc.lock instead"));
    assert_eq!(leases(&repo), 1);

    // Space again: the next lease taken withdraws it.
    fs::remove_file(&filler).expect("free");
    let next = trove::testing::lease(&repo, "tool").expect("lease");
    assert_eq!(leases(&repo), 1, "only the new lease is left");
    drop(next);
    assert_eq!(leases(&repo), 0);

    // Again, and a collection withdraws it before it looks at the operations in flight.
    let lease = trove::testing::lease(&repo, "tool").expect("lease");
    let filler = disk.fill();
    drop(lease);
    assert_eq!(leases(&repo), 1);
    fs::remove_file(&filler).expect("free");
    let r = repo.gc(&GcOptions { grace: std::time::Duration::ZERO, ..GcOptions::default() }).expect("gc");
    assert_eq!(r.in_flight, 0, "no operation of this process is in flight: {r:?}");
    assert_eq!(leases(&repo), 0);
}

/// Every test here frees a full disk by removing its filler, and goes on as if there were
/// space. A filler ever open in this process could be held by a child another test's thread
/// forks meanwhile (a child has a copy of every descriptor until it execs): its removal then
/// frees nothing for a while, and the next write fails for a full disk (a collection did, one
/// run in three). The filler is watched for in this process's descriptors the whole time it is
/// written, and its space must be back the moment it is removed.
#[test]
fn a_removed_filler_is_free_space_at_once_whatever_this_process_forks() {
    let Some(disk) = Tmpfs::mount("64m") else { return };
    let filler = disk.path().join("filler");
    let filling = std::sync::atomic::AtomicBool::new(true);
    let open_here = std::thread::scope(|s| {
        let watch = s.spawn(|| {
            let mut seen = false;
            while filling.load(std::sync::atomic::Ordering::SeqCst) {
                let fds = fs::read_dir("/proc/self/fd").expect("/proc/self/fd");
                seen |= fds.flatten().any(|fd| fs::read_link(fd.path()).is_ok_and(|to| to.starts_with(&filler)));
            }
            seen
        });
        // The watcher stops even if the fill panics, so the scope ends.
        let filled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| disk.fill()));
        filling.store(false, std::sync::atomic::Ordering::SeqCst);
        let seen = watch.join().expect("watcher");
        assert_eq!(filled.expect("fill"), filler);
        seen
    });
    assert!(!open_here, "the filler was open in this process while it was written");
    fs::remove_file(&filler).expect("free");
    assert!(disk.free() > 60 << 20, "the removed filler's space is free: {} bytes", disk.free());
}

#[test]
fn on_a_full_disk_reads_and_restores_elsewhere_work_and_writes_say_the_disk_is_full() {
    let Some(disk) = Tmpfs::mount("64m") else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let repo_path = disk.path().join("repo");
    let ws = tmp.path().join("w");
    fs::create_dir_all(ws.join("sub")).expect("mkdir");
    for i in 0..20 {
        fs::write(ws.join(format!("sub/f{i}.txt")), format!("file {i}\n").repeat(1000)).expect("write");
    }
    {
        let repo = Repo::init(&repo_path, "t").expect("init");
        let opts = SnapshotOptions { workspace: Some("w".into()), ..SnapshotOptions::default() };
        repo.snapshot(&ws, &opts).expect("snapshot");
    }
    let filler = disk.fill();
    let manifest = fs::read(repo_path.join("manifest.db")).expect("read");

    let out = trove(&repo_path, &["--json", "snapshots"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(listed.as_array().map(|a| a.len()), Some(1), "{listed}");
    let out = trove(&repo_path, &["ls", "-r", "latest"]);
    assert!(out.status.success() && stdout(&out).contains("f19.txt"), "{}", stderr(&out));
    let out = trove(&repo_path, &["cat", "latest", "sub/f3.txt"]);
    assert_eq!(stdout(&out), "file 3\n".repeat(1000), "{}", stderr(&out));
    let out = trove(&repo_path, &["check", "--read-data"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("no problems found"), "{}", stdout(&out));

    // A restore onto another disk, into a new directory: whole, byte for byte.
    let to = tmp.path().join("restored");
    let out = trove(&repo_path, &["restore", "latest", "--to", to.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(common::tree_state(&to), common::tree_state(&ws));
    // Over files that are there, it would need its record: refused, nothing changed.
    fs::write(to.join("sub/f0.txt"), "changed\n").expect("write");
    let out = trove(&repo_path, &["restore", "latest", "--to", to.to_str().expect("utf-8"), "--overwrite"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("new or empty directory"), "{}", stderr(&out));
    assert_eq!(fs::read(to.join("sub/f0.txt")).expect("read"), b"changed\n");

    // A write says why it cannot be done.
    let out = trove(&repo_path, &["snapshot", ws.to_str().expect("utf-8"), "--workspace", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("disk is full"), "{}", stderr(&out));
    assert_eq!(fs::read(repo_path.join("manifest.db")).expect("read"), manifest, "nothing was written to the manifest");

    // With space again, everything writes and checks clean.
    fs::remove_file(&filler).expect("free");
    let out = trove(&repo_path, &["snapshot", ws.to_str().expect("utf-8"), "--workspace", "w"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = trove(&repo_path, &["check"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    let out = trove(&repo_path, &["--json", "gc", "--grace", "0s"]);
    let r: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(r["inFlight"], json!(0), "{r}");
}

#[test]
fn a_tools_io_failure_over_http_names_its_request() {
    let Some(disk) = Tmpfs::mount("64m") else { return };
    let dir = tempfile::tempdir_in(disk.path()).expect("tmp");
    let out = trove(&dir.path().join("repo"), &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = http::start_on(dir, Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    http::write(&s.workspace("w").join("a.txt"), b"a\n");
    let _filler = disk.fill();
    let body = json!({"path": "b.txt", "content": "b\n".repeat(10_000)}).to_string();
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/create_file"), &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!((v["ok"].clone(), v["error"]["kind"].clone()), (json!(false), json!("io")), "{v}");
    let request = r.header("x-request-id").expect("x-request-id").to_string();
    assert!(request.starts_with("req_"), "{request}");
    assert_eq!(v["error"]["requestId"], json!(request), "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.ends_with(&request)), "{v}");
}

/// A directory of the log layout whose cache directory (its replica of the manifest) is on a
/// full disk: its replica opens read-only and reads as of its last catch-up, writes say the disk
/// is full, and once there is space everything writes and checks clean.
#[test]
fn a_log_layout_directory_whose_cache_is_full_reads_and_refuses_writes() {
    let Some(disk) = Tmpfs::mount("16m") else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let (repo, ws) = (tmp.path().join("repo"), tmp.path().join("w"));
    let cache = disk.path().join("cache");
    fs::create_dir_all(&ws).expect("mkdir");
    fs::write(ws.join("a.txt"), "alpha\n").expect("write");
    let run = |args: &[&str]| {
        Command::new(common::trove_bin())
            .arg("--repo")
            .arg(&repo)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args)
            .env_remove("TROVE_REPO")
            .env_remove("TROVE_LOG")
            .output()
            .expect("run trove")
    };
    let w = ws.to_str().expect("utf-8");
    for args in [&["init", "--layout", "log"][..], &["snapshot", w, "--workspace", "w"]] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let filler = disk.fill();

    let out = run(&["--json", "snapshots"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let out = run(&["cat", "latest", "a.txt"]);
    assert_eq!(stdout(&out), "alpha\n", "{}", stderr(&out));
    let out = run(&["check"]);
    assert!(out.status.success() && stdout(&out).contains("no problems found"), "{}{}", stdout(&out), stderr(&out));
    let segments = fs::read_dir(repo.join("log")).expect("log").count();
    let out = run(&["snapshot", w, "--workspace", "w"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("disk is full"), "{}", stderr(&out));
    assert_eq!(fs::read_dir(repo.join("log")).expect("log").count(), segments, "nothing was published");

    fs::remove_file(&filler).expect("free");
    fs::write(ws.join("b.txt"), "beta\n").expect("write");
    let out = run(&["snapshot", w, "--workspace", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["check"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("segments of the record log replayed"), "{}", stdout(&out));
}
