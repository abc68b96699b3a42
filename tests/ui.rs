//! The review pages in a real browser: Playwright for Python (from PyPI, into a virtualenv
//! under `target/`) driving Debian's Chromium, against a `trove serve` this test starts, over a
//! session whose agent edited, rewrote, deleted and was refused. The browser runs with
//! JavaScript off: every flow the script walks (log in, the sessions, a session's diffs, a
//! restore, logging out) is pages and forms. The script is `tests/ui/review_pages.py`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::http::{self, sha256_hex, Server, TOKEN};
use common::*;

const PLAYWRIGHT: &str = "1.56.0";

/// Debian's Chromium (a test tool's own browser download does not work here): installed with
/// apt when missing, as `.ci/run` does first.
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    if !path.exists() {
        let _ = Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "chromium"]).status();
    }
    if !path.exists() {
        let _ = Command::new("apt-get").arg("update").status();
        let _ = Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "chromium"]).status();
    }
    assert!(path.exists(), "Debian's chromium is needed at /usr/bin/chromium: run `apt-get install chromium` as root");
    path
}

const AXE: &str = "4.10.3";

/// axe-core from the npm registry (the accessibility checker the script runs in every page),
/// installed under `target/` if missing (under a temporary name, renamed into place).
fn axe() -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let dir = target.join(format!("axe-core-{AXE}"));
    let script = dir.join("node_modules/axe-core/axe.min.js");
    if script.exists() {
        return script;
    }
    let tmp = target.join(format!("axe-core-{AXE}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("axe dir");
    let ok = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&tmp)
        .arg(format!("axe-core@{AXE}"))
        .status()
        .expect("npm install axe-core (Node.js and npm are needed)");
    assert!(ok.success(), "npm install axe-core@{AXE} failed");
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    script
}

fn tool(s: &Server, sid: &str, name: &str, params: serde_json::Value) -> serde_json::Value {
    let r = s.call("POST", &format!("/v1/sessions/{sid}/tools/{name}"), &params.to_string());
    r.json()
}

fn sha(s: &Server, sid: &str, path: &str) -> String {
    let read = tool(s, sid, "read_file", serde_json::json!({"path": path}));
    read["data"]["sha256"].as_str().expect("sha256").to_string()
}

/// The workspace before the session, and the agent's work in it; the session's id.
fn an_agents_session(s: &Server) -> String {
    let ws = s.workspace("app");
    http::write(&ws.join("src/auth.rs"), b"pub fn check(token: &str) -> bool {\n    token.len() > 8\n}\n");
    http::write(&ws.join("src/main.rs"), b"fn main() {\n    serve();\n}\n");
    // About 1 MB: its rewrite's diff is too long for the session's page, and opens on its own.
    let big: String = (0..30_000).map(|i| format!("line {i} of the generated table\n")).collect();
    http::write(&ws.join("docs/table.txt"), big.as_bytes());
    http::write(&ws.join("logo.bin"), &[0u8, 1, 2, 3, 255, 0, 7]);
    let lib: String = (1..=20).map(|i| format!("pub const C{i}: u32 = {i};\n")).collect();
    http::write(&ws.join("src/lib.rs"), lib.as_bytes());
    http::write(&ws.join("notes/a.md"), b"# a\n");
    http::write(&ws.join("notes/b.md"), b"# b\n");
    http::write(&ws.join("config.toml"), b"port = 3000\n");
    http::write(&ws.join("assets/one.txt"), b"one\n");
    http::write(&ws.join("assets/two.txt"), b"two\n");
    http::write(&ws.join("readme.txt"), b"first readme\n");
    let sid = s.session(r#"{"workspace": "app"}"#);
    let auth_sha = sha(s, &sid, "src/auth.rs");
    let edit = serde_json::json!({"path": "src/auth.rs", "expectedSha256": auth_sha,
        "edits": [{"oldText": "token.len() > 8", "newText": "true"}]});
    assert_eq!(tool(s, &sid, "edit_file", edit)["ok"], true);
    assert_eq!(tool(s, &sid, "delete_file", serde_json::json!({"path": "src/main.rs"}))["ok"], true);
    let edit = serde_json::json!({"path": "src/lib.rs", "expectedSha256": sha(s, &sid, "src/lib.rs"),
        "edits": [{"oldText": "C10: u32 = 10", "newText": "C10: u32 = 100"}]});
    assert_eq!(tool(s, &sid, "edit_file", edit)["ok"], true);
    let rewritten: String = (0..30_000).map(|i| format!("row {i} of the regenerated table\n")).collect();
    http::write(&ws.join("docs/table.txt"), rewritten.as_bytes());
    // Refused: the agent's view of the file is stale.
    let stale = serde_json::json!({"path": "src/auth.rs", "content": "x", "expectedSha256": auth_sha});
    assert_eq!(tool(s, &sid, "write_file", stale)["error"]["kind"], "stale_file");
    http::write(&ws.join("logo.bin"), &[0u8, 1, 2, 3, 254, 0, 7, 9]);
    for gone in ["notes/a.md", "notes/b.md", "config.toml"] {
        assert_eq!(tool(s, &sid, "delete_file", serde_json::json!({"path": gone}))["ok"], true, "{gone}");
    }
    // The paths taken again: restoring the old config, readme or assets meets the new ones.
    let config = serde_json::json!({"path": "config.toml", "content": "port = 4000\n"});
    assert_eq!(tool(s, &sid, "create_file", config)["ok"], true);
    for gone in ["assets", "readme.txt"] {
        assert_eq!(tool(s, &sid, "delete_file", serde_json::json!({"path": gone}))["ok"], true, "{gone}");
    }
    for (path, content) in [("assets/three.txt", "three\n"), ("readme.txt", "second readme\n")] {
        let made = tool(s, &sid, "create_file", serde_json::json!({"path": path, "content": content}));
        assert_eq!(made["ok"], true, "{made}");
    }
    sid
}

#[test]
fn a_reviewer_logs_in_reads_the_diffs_restores_a_file_and_is_protected_from_other_sites() {
    let chromium = chromium();
    let venv = python_venv(&format!("playwright-{PLAYWRIGHT}"), &format!("playwright=={PLAYWRIGHT}"));
    let s = http::start(Some(TOKEN), &[]);
    let sid = an_agents_session(&s);
    // A token of the repository's own, which the script revokes to see the browser logged out.
    let o = trove(&s.repo, &["--json", "token", "create", "--label", "reviewer"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let created: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    // The records so far signed: the timeline shows them covered, and what follows not.
    let o = trove(&s.repo, &["audit", "checkpoint"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // What the command line says the session changed: the page must say the same.
    let o = trove(&s.repo, &["--json", "session", "changes", &sid]);
    assert!(o.status.success(), "{}", stderr(&o));
    let changes = stdout(&o);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/review_pages.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(&script)
        .env("BASE_URL", format!("http://{}", s.addr))
        .env("UI_TOKEN", TOKEN)
        .env("REVOCABLE_TOKEN", created["token"].as_str().expect("token"))
        .env("REVOCABLE_ID", created["id"].as_str().expect("id"))
        .env("SID", &sid)
        .env("CHANGES", &changes)
        .env("CHROMIUM", &chromium)
        .env("AXE", axe())
        .env("TROVE_BIN", trove_bin())
        .env("REPO", &s.repo)
        .env("WORK", s.dir.path())
        .env_remove("TROVE_REPO")
        // TROVE_SCREENSHOTS=DIR (passed on from this process) saves the pages the manual shows.
        .output()
        .expect("run the browser script");
    assert!(out.status.success(), "the browser script failed:\n{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("every check passed"), "{}", stdout(&out));
    // The bundle the reviewer downloaded verifies offline with the repository's public key.
    let key = stdout(&trove(&s.repo, &["audit", "pubkey"])).trim().to_string();
    let bundle = s.dir.path().join("audit.bundle");
    let o = trove(&s.repo, &["audit", "verify", "--bundle", bundle.to_str().expect("utf8"), "--pubkey", &key]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    // The restore the reviewer clicked put the file back, whole, and the audit log says who.
    let back = std::fs::read(s.workspace("app").join("src/main.rs")).expect("restored");
    assert_eq!(back, b"fn main() {\n    serve();\n}\n");
    let audit = s.get("/v1/audit?operation=trash_restore&limit=10").json();
    let done: Vec<(&str, &str)> = audit["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| Some((r["path"].as_str()?, r["outcome"].as_str()?)))
        .filter(|(p, _)| !p.starts_with("assets") && !p.starts_with("readme"))
        .collect();
    // The overwrite is two steps of one plan: the file there to the trash, the old one back.
    let expected = [
        ("src/main.rs", "ok"),
        ("notes/a.md", "ok"),
        ("notes/b.md", "ok"),
        ("config.toml", "already_exists"),
        ("config.toml", "ok"),
        ("config.toml", "ok"),
    ];
    assert_eq!(done, expected, "{audit}");
    // From the trash page: both notes back, and the old config over the new one, which went to
    // the trash in its place.
    for (path, bytes) in [("notes/a.md", &b"# a\n"[..]), ("notes/b.md", b"# b\n"), ("config.toml", b"port = 3000\n")] {
        assert_eq!(std::fs::read(s.workspace("app").join(path)).expect(path), bytes, "{path}");
    }
    // Merged: the deleted directory's files beside the new one; renamed: the old readme beside
    // the new.
    for (path, bytes) in [
        ("assets/one.txt", &b"one\n"[..]),
        ("assets/two.txt", b"two\n"),
        ("assets/three.txt", b"three\n"),
        ("readme.txt", b"second readme\n"),
        ("readme (restored).txt", b"first readme\n"),
    ] {
        assert_eq!(std::fs::read(s.workspace("app").join(path)).expect(path), bytes, "{path}");
    }
    // The history page put the first version of auth.rs back; the agent's edit is in the trash.
    let auth = std::fs::read(s.workspace("app").join("src/auth.rs")).expect("auth.rs");
    assert_eq!(auth, b"pub fn check(token: &str) -> bool {\n    token.len() > 8\n}\n");
    let trash = s.get("/v1/trash?workspace=app&prefix=src/auth.rs").json();
    assert_eq!(trash["items"][0]["reason"], "restore_version", "{trash}");
    assert_eq!(trash["items"][0]["sha256"], sha256_hex(b"pub fn check(token: &str) -> bool {\n    true\n}\n"));
    let trash = s.get("/v1/trash?workspace=app&prefix=config.toml").json();
    let replaced = &trash["items"][0];
    assert_eq!(replaced["sha256"], sha256_hex(b"port = 4000\n"), "{trash}");
}
