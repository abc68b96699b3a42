//! The build script: the commit a binary was built from, for `trove --version`.
//!
//! `TROVE_VERSION` is the package's version and the short hash of `HEAD` (`0.1.0 (1a2b3c4d5)`),
//! or the version alone outside a git checkout (a crate built from a registry's source). The script runs
//! again when `HEAD` moves (a checkout, or a commit on its branch), not on every build; it
//! does not say whether the tree had uncommitted changes, which only a run on every build
//! could keep true.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Asks for a run when `path` changes, if it exists: cargo takes a missing file for a
/// changed one and would run the script, and rebuild the crate, every time.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut commit = String::new();
    if let (Some(dir), Some(common)) = (git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"])) {
        let (dir, common) = (PathBuf::from(dir), PathBuf::from(common));
        watch(&dir.join("HEAD"));
        watch(&common.join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&common.join(branch));
        }
        commit = git(&["rev-parse", "--short=9", "HEAD"]).unwrap_or_default();
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let full = if commit.is_empty() { version } else { format!("{version} ({commit})") };
    println!("cargo:rustc-env=TROVE_VERSION={full}");
}
