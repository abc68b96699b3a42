//! The trash as people browse it (issue 13): every deleted version listed newest first and
//! addressable by id, filters (path prefix, kind, time, session, restored), pages that resume
//! exactly, a directory item's members, from the library, the CLI and HTTP, within a session's
//! scope.

mod common;

use std::fs;

use common::http::{self, TOKEN};
use common::{stdout, trove};
use serde_json::{json, Value};
use trove::{EntryKind, Repo, RestoredFilter, SessionSpec, TrashFilter};

/// A workspace whose trash holds two versions of `notes.md`, a directory `build/` of three
/// files, and `src/old.rs`; the first version of `notes.md` was restored and deleted again.
fn deleted_things(repo: &Repo, root: &std::path::Path) -> trove::Session {
    fs::create_dir_all(root.join("build/out")).expect("mkdir");
    fs::create_dir_all(root.join("src")).expect("mkdir");
    for (p, text) in [("build/a.o", "a"), ("build/b.o", "bb"), ("build/out/c.o", "ccc"), ("src/old.rs", "fn f() {}\n")]
    {
        fs::write(root.join(p), text).expect("write");
    }
    let r = root.to_path_buf();
    let spec = SessionSpec { workspace: Some("w".into()), ..Default::default() };
    let s = repo.create_session(&spec, move |_| Ok(r), "t").expect("session");
    let run = |tool: &str, p: Value| {
        let call = trove::tools::ToolCall::parse(tool, p).expect("parse");
        trove::tools::run(repo, &repo.session(&s.id).expect("s"), call, "agent").expect(tool).to_json()
    };
    for version in ["one\n", "two\n"] {
        run("create_file", json!({"path": "notes.md", "content": version}));
        run("delete_file", json!({"path": "notes.md"}));
    }
    run("delete_file", json!({"path": "build"}));
    run("delete_file", json!({"path": "src/old.rs"}));
    s
}

#[test]
fn every_version_is_listed_newest_first_filtered_and_paged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = Repo::init(&dir.path().join("repo"), "t").expect("init");
    deleted_things(&repo, &dir.path().join("ws"));
    let all = repo.trash_page(&TrashFilter::default(), |_| true).expect("list");
    let paths: Vec<&str> = all.items.iter().map(|t| t.path.as_str()).collect();
    assert_eq!(paths, ["src/old.rs", "build", "notes.md", "notes.md"], "newest first");
    assert!(all.next_cursor.is_none());
    let notes: Vec<_> = all.items.iter().filter(|t| t.path == "notes.md").collect();
    assert_ne!(notes[0].id, notes[1].id, "each version has its own id");
    assert_ne!(notes[0].sha256, notes[1].sha256);
    let build = &all.items[1];
    assert_eq!((build.kind, build.files, build.size), (EntryKind::Dir, Some(3), 6));
    assert_eq!(build.reason, "delete_file");
    assert!(build.session.is_some() && build.audit_seq.is_some() && !build.restored);

    let only = |f: TrashFilter| -> Vec<String> {
        repo.trash_page(&f, |_| true).expect("list").items.into_iter().map(|t| t.path).collect()
    };
    let prefix = |p: &str| TrashFilter { prefix: p.as_bytes().to_vec(), ..Default::default() };
    assert_eq!(only(prefix("build")), ["build"]);
    assert_eq!(only(prefix("src")), ["src/old.rs"]);
    assert_eq!(only(prefix("bui")), Vec::<String>::new(), "a prefix is a path, not a string prefix");
    assert_eq!(only(TrashFilter { kind: Some(EntryKind::Dir), ..Default::default() }), ["build"]);
    assert_eq!(only(TrashFilter { workspace: Some("other".into()), ..Default::default() }), Vec::<String>::new());
    let newest = all.items[0].deleted_at.clone();
    let at = trove::parse_rfc3339(&newest).expect("time");
    assert_eq!(only(TrashFilter { since_ns: Some(at), ..Default::default() }), ["src/old.rs"]);
    assert_eq!(only(TrashFilter { until_ns: Some(at), ..Default::default() }).len(), 3);

    // Pages of one resume exactly where the last ended, and the last has no cursor.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = repo.trash_page(&TrashFilter { limit: 1, after, ..Default::default() }, |_| true).expect("page");
        seen.extend(page.items.iter().map(|t| t.id.clone()));
        match page.next_cursor {
            Some(c) => after = Some(c.parse().expect("cursor")),
            None => break,
        }
    }
    assert_eq!(seen, all.items.iter().map(|t| t.id.clone()).collect::<Vec<_>>());
    // A filter that drops rows still fills a page.
    let page = repo.trash_page(&TrashFilter { limit: 2, ..Default::default() }, |t| t.path == b"notes.md").expect("p");
    assert_eq!(page.items.len(), 2);

    // Restored items leave the default listing and stay listed as restored.
    let restored = &notes[1].id;
    let s = repo.sessions(false).expect("sessions").remove(0);
    let call = trove::tools::ToolCall::parse("restore_file", json!({"trashId": restored})).expect("parse");
    trove::tools::run(&repo, &s, call, "agent").expect("restore");
    let now: Vec<_> = repo.trash_page(&TrashFilter::default(), |_| true).expect("l").items;
    assert!(now.iter().all(|t| &t.id != restored));
    let was = repo.trash_page(&TrashFilter { restored: RestoredFilter::Yes, ..Default::default() }, |_| true);
    let was = was.expect("restored").items;
    assert_eq!((was.len(), &was[0].id, was[0].restored), (1, restored, true));
    assert!(was[0].restored_at.is_some());
}

#[test]
fn the_cli_lists_shows_and_refuses_bad_filters_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_path = dir.path().join("repo");
    let repo = Repo::init(&repo_path, "t").expect("init");
    deleted_things(&repo, &dir.path().join("ws"));
    drop(repo);
    let o = trove(&repo_path, &["--json", "trash", "ls", "--kind", "dir"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let page: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let id = page["items"][0]["id"].as_str().expect("id").to_string();
    assert_eq!(page["items"][0]["files"], json!(3));
    let o = trove(&repo_path, &["--json", "trash", "show", &id]);
    let shown: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let members: Vec<&str> =
        shown["members"].as_array().expect("m").iter().filter_map(|m| m["path"].as_str()).collect();
    assert_eq!(members, ["a.o", "b.o", "out", "out/c.o"]);
    let table = stdout(&trove(&repo_path, &["trash", "ls", "--limit", "1", "--since", "1h"]));
    assert!(table.contains("src/old.rs") && table.contains("next: --cursor "), "{table}");
    let cursor = table.lines().last().and_then(|l| l.strip_prefix("next: --cursor ")).expect("cursor").to_string();
    let next = stdout(&trove(&repo_path, &["trash", "ls", "--limit", "1", "--cursor", &cursor]));
    assert!(next.contains("build") && !next.contains("src/old.rs"), "{next}");
    let none = stdout(&trove(&repo_path, &["trash", "ls", "--until", "2000-01-01T00:00:00Z"]));
    assert!(none.contains("holds nothing"), "{none}");
    for (args, said) in [
        (&["trash", "ls", "--since", "yesterday-ish"][..], "--since 'yesterday-ish'"),
        (&["trash", "ls", "--cursor", "12"][..], "cursor '12'"),
        (&["trash", "ls", "--prefix", "../x"][..], "invalid path"),
        (&["trash", "show", "trash_000000000000"][..], "trove trash ls"),
    ] {
        let o = trove(&repo_path, args);
        assert!(!o.status.success() && common::stderr(&o).contains(said), "{args:?}: {}", common::stderr(&o));
    }
}

#[test]
fn over_http_operators_see_every_workspace_and_sessions_only_their_scope() {
    let s = http::start(Some(TOKEN), &[]);
    let wide = s.session(r#"{"workspace": "shared"}"#);
    let ws = s.workspace("shared");
    http::write(&ws.join("src/a.rs"), b"a\n");
    http::write(&ws.join("secret/key"), b"k\n");
    for path in ["src/a.rs", "secret/key"] {
        let r = s.call("POST", &format!("/v1/sessions/{wide}/tools/delete_file"), &json!({ "path": path }).to_string());
        assert_eq!(r.json()["ok"], json!(true), "{}", r.text());
    }
    let narrow = s.session(r#"{"workspace": "shared", "file_access": {"read": ["src"], "write": []}}"#);
    let paths = |target: &str| -> Vec<String> {
        let r = s.get(target);
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        let items = r.json()["items"].as_array().cloned().unwrap_or_default();
        items.iter().filter_map(|t| t["path"].as_str().map(str::to_string)).collect()
    };
    assert_eq!(paths("/v1/trash"), ["secret/key", "src/a.rs"]);
    assert_eq!(paths("/v1/trash?workspace=shared&prefix=src&kind=file&restored=no&limit=10"), ["src/a.rs"]);
    assert_eq!(paths(&format!("/v1/trash?session={wide}")).len(), 2);
    assert_eq!(paths(&format!("/v1/sessions/{narrow}/trash")), ["src/a.rs"], "the scope hides secret/");
    assert_eq!(paths("/v1/trash?since=2000-01-01T00:00:00%2B02:00&until=2999-01-01T00:00:00Z").len(), 2);
    let page = s.get("/v1/trash?limit=1").json();
    let next = page["nextCursor"].as_str().expect("cursor").to_string();
    assert_eq!(paths(&format!("/v1/trash?limit=1&cursor={next}")), ["src/a.rs"]);
    for bad in ["limit=0", "limit=1001", "since=yesterday", "cursor=1", "kind=socket", "prefix=..%2Fx", "color=red"] {
        let r = s.get(&format!("/v1/trash?{bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    assert_eq!(s.get("/v1/sessions/sess_000000000000/trash").status, 404);
    assert_eq!(s.get(&format!("/v1/sessions/{narrow}/trash?workspace=shared")).status, 400);
}

#[test]
fn over_http_items_are_shown_restored_in_bulk_exported_and_expired() {
    let s = http::start(Some(TOKEN), &["--reap-interval", "200ms"]);
    let wide = s.session(r#"{"workspace": "shared", "persistent": true}"#);
    let ws = s.workspace("shared");
    for (p, text) in [("src/a.rs", "a\n"), ("src/b.rs", "b\n"), ("secret/key", "k\n"), ("docs/x.md", "x\n")] {
        http::write(&ws.join(p), text.as_bytes());
    }
    let mut ids = Vec::new();
    for path in ["src", "secret/key", "docs/x.md"] {
        let r = s.call("POST", &format!("/v1/sessions/{wide}/tools/delete_file"), &json!({ "path": path }).to_string());
        assert_eq!(r.json()["ok"], json!(true), "{}", r.text());
        ids.push(r.json()["data"]["trashId"].as_str().expect("id").to_string());
    }
    // One item with its members.
    let shown = s.get(&format!("/v1/trash/{}", ids[0])).json();
    assert_eq!((shown["kind"].clone(), shown["files"].clone()), (json!("dir"), json!(2)));
    let members: Vec<&str> =
        shown["members"].as_array().expect("m").iter().filter_map(|m| m["path"].as_str()).collect();
    assert_eq!(members, ["a.rs", "b.rs"]);
    assert_eq!(s.get("/v1/trash/trash_000000000000").status, 404);
    assert_eq!(s.get("/v1/trash/not%20an%20id").status, 400);

    // A session restores what its scope reaches; the rest is refused item by item.
    let narrow =
        s.session(r#"{"workspace": "shared", "file_access": {"read": ["src", "docs"], "write": ["src", "docs"]}}"#);
    let body = json!({"ids": [ids[0], ids[1]]}).to_string();
    let r = s.call("POST", &format!("/v1/sessions/{narrow}/trash/restore"), &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let done = r.json();
    assert_eq!((done["restored"].clone(), done["failed"].clone()), (json!(1), json!(1)), "{done}");
    let refused = done["items"].as_array().expect("items").iter().find(|o| o["ok"] == json!(false)).cloned();
    assert_eq!(refused.map(|o| o["error"]["kind"].clone()), Some(json!("permission_denied")));
    assert_eq!(std::fs::read_to_string(ws.join("src/b.rs")).expect("back"), "b\n");
    // An operator restores by path into the workspace's directory, here with a new name.
    let body = json!({"workspace": "shared", "path": "docs/x.md", "to": "docs/y.md"}).to_string();
    let r = s.call("POST", "/v1/trash/restore", &body);
    assert_eq!(r.json()["restored"], json!(1), "{}", r.text());
    assert_eq!(std::fs::read_to_string(ws.join("docs/y.md")).expect("back"), "x\n");
    for bad in [
        json!({}),
        json!({"ids": [ids[0]], "path": "src"}),
        json!({"path": "src"}),
        json!({"ids": [ids[0], ids[1]], "to": "x"}),
        json!({"prefix": "src", "workspace": "shared", "before": "2026-01-01T00:00:00Z"}),
        json!({"ids": ["bad id"]}),
        json!({"ids": [ids[0]], "onConflict": "clobber"}),
        json!([ids[0]]),
    ] {
        let r = s.call("POST", "/v1/trash/restore", &bad.to_string());
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    let r = s.call(
        "POST",
        &format!("/v1/sessions/{narrow}/trash/restore"),
        &json!({"workspace": "other", "prefix": "src"}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.text());

    // Export: the content type says what it is, and the archive holds the item at its path.
    let r = s.get(&format!("/v1/trash/export?ids={}&format=tar.zst", ids[1]));
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/zstd")));
    let tar = zstd::decode_all(&r.body[..]).expect("zstd");
    let mut archive = tar::Archive::new(&tar[..]);
    let mut entries = archive.entries().expect("entries");
    let mut e = entries.next().expect("one").expect("entry");
    assert_eq!(e.path().expect("path").to_string_lossy(), "secret/key");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut e, &mut text).expect("read");
    assert_eq!(text, "k\n");
    let r = s.get("/v1/trash/export?workspace=shared&restored=all");
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/x-tar")));
    assert_eq!(s.get(&format!("/v1/trash/export?ids={}&workspace=shared", ids[1])).status, 400);
    assert_eq!(s.get("/v1/trash/export?ids=trash_000000000000").status, 404);

    // The reaper expires what retention says, and audits it.
    let repo = trove::Repo::open(&s.repo).expect("open");
    repo.trash_retention("shared", Some(Some(1)), None, "t").expect("retention");
    assert!(http::eventually(10, || s.get("/v1/trash?workspace=shared&restored=all").json()["items"] == json!([])));
    let log = repo.audit_log(None, 1000).expect("log");
    assert!(log.iter().any(|r| r.record.operation == "trash_expire" && r.record.actor == "trove-serve"));
}
