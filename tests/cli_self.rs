//! The CLI describing itself: `--version` names the commit, `completions` gives scripts a
//! shell completes with, `man` writes a page per command that `man` renders.

mod common;

use std::process::Command;

use common::*;

fn run(args: &[&str]) -> std::process::Output {
    // No home and no repository: none of these needs one.
    Command::new(trove_bin()).args(args).env_remove("HOME").env_remove("TROVE_REPO").output().expect("run trove")
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let o = run(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let version = stdout(&o);
    let head = Command::new("git").args(["rev-parse", "--short=9", "HEAD"]).output().expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(version.trim(), format!("trove {} ({head})", env!("CARGO_PKG_VERSION")));
}

/// What bash's completion offers for the words typed so far (the last one being completed),
/// with the script `trove completions bash` printed loaded, called as bash calls it: the
/// command, the word being completed and the one before it.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let program = format!(
        "source {}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; _trove trove \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1
    );
    let o = Command::new("bash").args(["--norc", "-c", &program]).output().expect("bash");
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_commands_subcommands_and_flags_from_the_script() {
    let tmp = tempfile::tempdir().expect("tmp");
    let script = tmp.path().join("trove.bash");
    let o = run(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&script, &o.stdout).expect("write");
    let offered = bash_completes(&script, &["trove", "sna"]);
    assert_eq!(offered, ["snapshot", "snapshots"], "{offered:?}");
    assert_eq!(bash_completes(&script, &["trove", "trash", "rest"]), ["restore"]);
    let flags = bash_completes(&script, &["trove", "trash", "restore", "--on-"]);
    assert_eq!(flags, ["--on-conflict"], "{flags:?}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = run(&["completions", shell]);
        assert!(o.status.success() && stdout(&o).contains("snapshots"), "{shell}: {}", stderr(&o));
    }
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "an unknown shell is a usage error");
    assert!(stderr(&o).contains("bash"), "the error lists the shells: {}", stderr(&o));
}

#[test]
fn man_writes_a_page_per_command_that_man_renders() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("man/man1");
    let o = run(&["--json", "man", dir.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let written: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let pages: Vec<&str> = written["pages"].as_array().expect("pages").iter().filter_map(|p| p.as_str()).collect();
    assert_eq!(pages[0], "trove.1");
    for page in ["trove-snapshot.1", "trove-trash-restore.1", "trove-session-changes.1", "trove-completions.1"] {
        assert!(pages.contains(&page), "{page} missing from {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("help")), "clap's help is no command of trove's: {pages:?}");
    let mut on_disk: Vec<String> =
        std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    on_disk.sort();
    let mut listed: Vec<String> = pages.iter().map(|p| p.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    // The page renders as a manual page: its name line and a flag of its own.
    let o = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(dir.join("trove-trash-restore.1"))
        .env("MANWIDTH", "200")
        .output()
        .expect("man");
    let text = stdout(&o);
    assert!(text.contains("trove-trash-restore - Bring items back"), "{text}\n{}", stderr(&o));
    assert!(text.contains("--on-conflict"), "{text}");
}
