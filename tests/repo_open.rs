//! Opening a repository whose files are not what they should be (issue 36, item 17): a config
//! that is a FIFO, a directory or huge is refused at once, naming it; one that does not parse is
//! damage, with advice that works (`trove init` refuses such a directory); a manifest that is not
//! SQLite, is shorter than a page or is empty is `corrupt` (exit 3), naming it, and is left
//! exactly as it was.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{stderr, trove, trove_bin};

/// Runs `trove --repo REPO ARGS` and waits for it, killing it if it has not ended after a minute
/// (a command that waits on a FIFO never would): None then.
fn trove_or_hang(repo: &Path, args: &[&str]) -> Option<Output> {
    let mut child = Command::new(trove_bin())
        .arg("--repo")
        .arg(repo)
        .args(args)
        .env_remove("TROVE_REPO")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trove");
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().expect("output"))
}

fn new_repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    let out = trove(&repo, &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    repo
}

#[test]
fn a_config_that_is_not_a_small_regular_file_is_refused_at_once_naming_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = new_repo(tmp.path());
    let cfg = repo.join("config.json");
    let good = fs::read(&cfg).expect("read");

    fs::remove_file(&cfg).expect("rm");
    let made = Command::new("mkfifo").arg(&cfg).status().expect("mkfifo");
    assert!(made.success());
    for args in [&["snapshots"][..], &["check"], &["gc", "--dry-run"]] {
        let out = trove_or_hang(&repo, args).unwrap_or_else(|| panic!("{args:?} waits on the FIFO"));
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&cfg.display().to_string()), "{}", stderr(&out));
        assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    }

    fs::remove_file(&cfg).expect("rm");
    fs::create_dir(&cfg).expect("mkdir");
    let out = trove(&repo, &["snapshots"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    fs::remove_dir(&cfg).expect("rmdir");

    // Valid JSON, padded past the limit: refused by its size, before it is read whole.
    let mut huge = good.clone();
    huge.truncate(huge.len() - 1);
    huge.extend(std::iter::repeat_n(b' ', 2 << 20));
    huge.push(b'}');
    fs::write(&cfg, &huge).expect("write");
    let out = trove(&repo, &["snapshots"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("bytes"), "{}", stderr(&out));

    fs::write(&cfg, &good).expect("write");
    let out = trove(&repo, &["snapshots"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_config_that_does_not_parse_is_damage_and_the_advice_is_not_init() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = new_repo(tmp.path());
    fs::write(repo.join("config.json"), "{ not json").expect("write");
    let out = trove(&repo, &["snapshots"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("config.json") && said.contains("does not parse") && said.contains("backup"), "{said}");
    assert!(!said.contains("trove init"), "init refuses this directory: {said}");
    let init = trove(&repo, &["init"]);
    assert!(!init.status.success(), "init would not have helped: {}", stderr(&init));

    // Without a config beside a manifest: not advised to init there either (it would refuse).
    fs::remove_file(repo.join("config.json")).expect("rm");
    let out = trove(&repo, &["snapshots"]);
    let said = stderr(&out);
    assert!(said.contains("no config.json") && said.contains("backup"), "{said}");
    assert!(!said.contains("run `trove init` there"), "{said}");
    // Where init would work (an empty directory), it is the advice.
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    let out = trove(&empty, &["snapshots"]);
    assert!(stderr(&out).contains("run `trove init` there"), "{}", stderr(&out));
}

#[test]
fn a_manifest_that_is_not_sqlite_or_is_empty_is_corrupt_and_left_as_it_was() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = new_repo(tmp.path());
    let db = repo.join("manifest.db");
    let leftovers = |repo: &Path| {
        ["manifest.db-wal", "manifest.db-shm", "manifest.db-journal"].iter().any(|f| repo.join(f).exists())
    };

    let junk = b"this is not sqlite at all, only text that goes on for a while to pass a header".repeat(60);
    // Shorter than a page, SQLite takes a file for a new database too, and would write one.
    let short = b"not a database, and shorter than one page".to_vec();
    for (what, bytes) in [("not sqlite", &junk[..]), ("shorter than a page", &short[..]), ("empty", &b""[..])] {
        fs::write(&db, bytes).expect("write");
        for args in [&["check"][..], &["snapshots"], &["check", "--read-data"]] {
            let out = trove(&repo, args);
            assert_eq!(out.status.code(), Some(3), "{what} {args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(&db.display().to_string()), "{what}: {}", stderr(&out));
            assert_eq!(fs::read(&db).expect("read"), bytes, "{what}: the manifest is left as it was");
            assert!(!leftovers(&repo), "{what}: nothing written beside it");
        }
    }
}
