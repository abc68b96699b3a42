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
/// installed under `target/` if missing.
fn axe() -> PathBuf {
    let dir = install_once(&format!("axe-core-{AXE}"), |tmp| {
        std::fs::create_dir_all(tmp).expect("axe dir");
        let ok = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(tmp)
            .arg(format!("axe-core@{AXE}"))
            .status()
            .expect("npm install axe-core (Node.js and npm are needed)");
        assert!(ok.success(), "npm install axe-core@{AXE} failed");
    });
    dir.join("node_modules/axe-core/axe.min.js")
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
    http::write(&ws.join("src/util.rs"), b"pub fn helper() -> u32 {\n    42\n}\n");
    http::write(&ws.join("deploy.sh"), b"#!/bin/sh\necho deploying\n");
    set_mode(&ws.join("deploy.sh"), 0o644);
    let sid = s.session(r#"{"workspace": "app"}"#);
    // A rename, and a script made executable: both in the card's header.
    let moved = serde_json::json!({"from": "src/util.rs", "to": "src/helpers.rs"});
    assert_eq!(tool(s, &sid, "move_file", moved)["ok"], true);
    set_mode(&ws.join("deploy.sh"), 0o755);
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

/// A record rewritten behind the log's back: the timeline marks it and every record after it
/// "failed verification"; those before it under a checkpoint that still verifies stay covered,
/// and those under the checkpoint the rewrite broke are unproven, not "after the last checkpoint".
#[test]
fn the_timeline_marks_a_rewritten_record_and_what_follows_as_failed() {
    let s = http::start(Some(TOKEN), &[]);
    s.workspace("app");
    let checkpoint = |s: &Server| {
        let o = trove(&s.repo, &["--json", "audit", "checkpoint"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let seqs = s.get("/v1/audit?limit=1").json();
        seqs["records"][0]["seq"].as_i64().expect("the newest record")
    };
    for _ in 0..2 {
        s.session(r#"{"workspace": "app"}"#);
    }
    let first = checkpoint(&s);
    for _ in 0..4 {
        s.session(r#"{"workspace": "app"}"#);
    }
    let second = checkpoint(&s);
    let bad = first + 2;
    assert!(bad < second, "records {first} and {second}");
    // What someone with write access to the manifest can do: the triggers dropped, a column
    // edited.
    let c = rusqlite::Connection::open(s.repo.join("manifest.db")).expect("open the manifest");
    c.execute_batch("DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_append_only;")
        .expect("drop triggers");
    c.execute("UPDATE audit SET actor = 'mallory' WHERE seq = ?1", [bad]).expect("rewrite");
    drop(c);

    let cookie = logged_in(&s);
    let page = http::request(s.addr, "GET", "/ui/audit", &[("Cookie", &cookie)], b"");
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    for seq in 1..=second {
        // Each record's item carries its id and, in its badge, what proves it.
        let at = html.find(&format!("id=\"seq-{seq}\"")).unwrap_or_else(|| panic!("record {seq} listed"));
        let item = &html[at..html[at..].find("</li>").map_or(html.len(), |end| at + end)];
        let want = match seq {
            _ if seq >= bad => "proof-failed",
            _ if seq > first => "proof-unproven",
            _ => "proof-verified",
        };
        assert!(item.contains(want), "record {seq} (checkpoints {first}, {second}; rewritten {bad}): {want}: {item}");
    }
    assert!(html.contains("failed verification"), "the badge says it in words");
}

/// A login cookie for the server's operator token, as the login form gets it.
fn logged_in(s: &Server) -> String {
    http::ui_login(s.addr, TOKEN)
}

/// The timeline's pages: 100 records a page, and a link to older ones only when there are.
#[test]
fn the_timeline_links_to_older_records_only_when_there_are_some() {
    let s = http::start(Some(TOKEN), &[]);
    s.workspace("app");
    let cookie = logged_in(&s);
    let page = |target: &str| {
        let r = http::request(s.addr, "GET", target, &[("Cookie", &cookie)], b"");
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        r.text()
    };
    for _ in 0..100 {
        s.session(r#"{"workspace": "app"}"#);
    }
    let first = page("/ui/audit?operation=session_create");
    assert_eq!(first.matches("<li id=\"seq-").count(), 100);
    assert!(!first.contains("Older records"), "exactly a page: nothing older to open");
    s.session(r#"{"workspace": "app"}"#);
    let first = page("/ui/audit?operation=session_create");
    assert_eq!(first.matches("<li id=\"seq-").count(), 100);
    let at = first.find("Older records").expect("a link to the older record");
    let href = first[..at].rsplit("href=\"").next().and_then(|h| h.split('"').next()).expect("the link");
    let href = href.replace("&#38;", "&").replace("&amp;", "&");
    assert!(href.contains("operation=session_create") && href.contains("before="), "{href}");
    let older = page(&href);
    assert_eq!(older.matches("<li id=\"seq-").count(), 1, "{href}");
    assert!(!older.contains("Older records"));
    // A node's log is a fleet's notion: outside one, there is no node of that name, as for the
    // API's `node=`.
    let named = http::request(s.addr, "GET", "/ui/audit?node=elsewhere", &[("Cookie", &cookie)], b"");
    assert_eq!(named.status, 404, "{}", named.text());
    assert!(named.text().contains("fleet"), "{}", named.text());
}

/// The value of the first `name="NAME" value="..."` in a page.
fn field<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let at = html.find(&format!("name=\"{name}\" value=\""))? + name.len() + 15;
    html[at..].split('"').next()
}

/// A reviewer at the pages for minutes (`TROVE_UI_SOAK_SECS`, 120 by default) while the agent
/// works (the first 60% of the time) and after: every page answers every time, every file the
/// reviewer restores from a card comes back whole, the login lasts, the server's memory is
/// flat once the session stops growing, and the page says what the command line says.
#[test]
fn a_reviewer_keeps_at_the_pages_while_the_agent_works() {
    let secs: u64 = std::env::var("TROVE_UI_SOAK_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(120);
    let s = http::start(Some(TOKEN), &[]);
    let ws = s.workspace("app");
    for i in 0..400 {
        http::write(&ws.join(format!("base/f{i:03}.txt")), format!("file {i}\n").repeat(20).as_bytes());
    }
    let sid = s.session(r#"{"workspace": "app"}"#);
    let cookie = logged_in(&s);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let agent = {
        let (stop, addr, ws, sid) = (stop.clone(), s.addr, ws.clone(), sid.clone());
        std::thread::spawn(move || {
            let auth = format!("Bearer {TOKEN}");
            let tool = |name: &str, body: serde_json::Value| {
                let target = format!("/v1/sessions/{sid}/tools/{name}");
                let r = http::request(addr, "POST", &target, &[("Authorization", &auth)], body.to_string().as_bytes());
                assert_eq!(r.json()["ok"], true, "{name} {body}: {}", r.text());
            };
            let mut i = 0;
            let busy = std::time::Duration::from_secs(secs * 6 / 10);
            let started = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 300 && started.elapsed() < busy {
                // Its tools for new files and deletions, its shell for edits.
                tool(
                    "create_file",
                    serde_json::json!({"path": format!("gen/n{i:03}.txt"), "content": format!("new {i}\n")}),
                );
                tool("delete_file", serde_json::json!({"path": format!("base/f{i:03}.txt")}));
                let edited = ws.join(format!("base/f{:03}.txt", 399 - i % 100));
                let mut text = std::fs::read_to_string(&edited).expect("read");
                text.push_str(&format!("edit {i}\n"));
                http::write(&edited, text.as_bytes());
                i += 1;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            i
        })
    };
    let page = |target: &str| {
        let r = http::request(s.addr, "GET", target, &[("Cookie", &cookie)], b"");
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        assert!(r.text().contains("Log out"), "{target}: still logged in");
        r.text()
    };
    let started = std::time::Instant::now();
    let (mut rounds, mut restored) = (0u64, Vec::new());
    // The server's memory at each round once the agent has stopped: the same pages of the
    // same state, again and again.
    let mut quiet_rss = Vec::new();
    while started.elapsed().as_secs() < secs {
        page("/ui/sessions");
        let html = page(&format!("/ui/sessions/{sid}"));
        // A deleted file back from its card, as the reviewer's click sends it.
        if let (Some(token), Some(item)) = (field(&html, "formToken"), field(&html, "id")) {
            let body = format!("formToken={token}&id={item}");
            let r = http::request(
                s.addr,
                "POST",
                &format!("/ui/sessions/{sid}/restore"),
                &[("Cookie", &cookie), ("Content-Type", "application/x-www-form-urlencoded")],
                body.as_bytes(),
            );
            assert_eq!(r.status, 200, "restore {item}: {}", r.text());
            let said = r.text();
            let path = said
                .split(&format!("Restored <code>{item}</code> "))
                .nth(1)
                .and_then(|p| p.split(':').next())
                .map(str::to_string);
            restored.push(path.unwrap_or_else(|| panic!("the outcome names the file: {said}")));
        }
        page("/ui/audit?follow=1");
        page("/ui/trash?prefix=base");
        page(&format!("/ui/sessions/{sid}/history?path=base%2Ff399.txt"));
        rounds += 1;
        if agent.is_finished() {
            quiet_rss.push(http::rss_kib(s.pid()));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let steps = agent.join().expect("the agent");
    assert!(rounds >= 10 && steps >= 10, "{rounds} rounds of pages, {steps} steps of the agent");
    assert!(restored.len() >= 5, "restored {restored:?}");
    for path in &restored {
        let i: usize = path.trim_start_matches("base/f").trim_end_matches(".txt").parse().expect(path);
        let back = std::fs::read_to_string(ws.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(back.starts_with(&format!("file {i}\n").repeat(20)), "{path} came back whole");
    }
    // Memory: once warm (a quarter of the quiet rounds), the same pages of the same state cost
    // nothing more, however often they are asked (a leak grows with every round).
    assert!(quiet_rss.len() >= 20, "{} rounds after the agent stopped", quiet_rss.len());
    let warm = quiet_rss[quiet_rss.len() / 4];
    let last = quiet_rss.last().copied().unwrap_or(0);
    let quiet = quiet_rss.len() - quiet_rss.len() / 4;
    assert!(
        last < warm + 16 * 1024,
        "the server grew from {warm} KiB to {last} KiB over {quiet} rounds of the same pages"
    );
    // Quiet again: the page and the command line agree on what changed.
    let agree = http::eventually(20, || {
        let o = trove(&s.repo, &["--json", "session", "changes", &sid]);
        let cli: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let html = page(&format!("/ui/sessions/{sid}"));
        cli["entries"].as_array().is_some_and(|e| e.len() == html.matches("<section class=\"card\"").count())
    });
    assert!(agree, "the session's page and `trove session changes` agree once the agent stops");
}

/// The sessions list's totals are the command line's, for a running session and for an ended
/// one (whose totals the server keeps), at every load.
#[test]
fn the_sessions_list_counts_every_path_and_line_running_or_ended() {
    let s = http::start(Some(TOKEN), &[]);
    let ws = s.workspace("app");
    http::write(&ws.join("a.txt"), b"one\ntwo\n");
    http::write(&ws.join("b.txt"), b"three\n");
    let sid = s.session(r#"{"workspace": "app"}"#);
    http::write(&ws.join("a.txt"), b"one\n2\nthree\n");
    http::write(&ws.join("b.txt"), b"3\n");
    http::write(&ws.join("c.txt"), b"four\nfive\n");
    let cookie = logged_in(&s);
    let row = |status: &str| {
        let r = http::request(s.addr, "GET", &format!("/ui/sessions?status={status}"), &[("Cookie", &cookie)], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        let html = r.text();
        let at = html.find(&format!("href=\"/ui/sessions/{sid}\"")).expect("the session is listed");
        let end = html[at..].find("</tr>").map_or(html.len(), |e| at + e);
        html[at..end].to_string()
    };
    let cli = || {
        let o = trove(&s.repo, &["--json", "session", "changes", &sid]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        v["stats"].clone()
    };
    let agrees = |row: &str, st: &serde_json::Value| {
        let cells = [
            format!("<td>{}</td>", st["changed"]),
            format!("+{}<", st["linesAdded"]),
            format!("−{}<", st["linesRemoved"]),
        ];
        cells.iter().all(|c| row.contains(c.as_str()))
    };
    let running = cli();
    assert_eq!((running["changed"].as_u64(), running["linesAdded"].as_u64()), (Some(3), Some(5)), "{running}");
    assert!(http::eventually(10, || agrees(&row("running"), &running)), "{}\n{running}", row("running"));
    let ended = s.call("DELETE", &format!("/v1/sessions/{sid}"), "");
    assert!(ended.status < 300, "{}", ended.text());
    let end = cli();
    assert_eq!(end, running, "the final snapshot holds what the live tree did");
    for _ in 0..2 {
        assert!(agrees(&row("ended"), &end), "{}\n{end}", row("ended"));
    }
}
