//! `trove serve` over a real loopback socket: the Files API (every status of files-api.md), the
//! sessions API and its lifecycle, scope, traversal attempts, auth, snapshots, change detection
//! during downloads, and graceful shutdown.

mod common;

use std::io::Read;
use std::os::unix::fs::symlink;
use std::time::Duration;

use common::http::{self, eventually, sha256_hex, write, Server, TOKEN};
use serde_json::json;

fn files(s: &Server, sid: &str) -> Vec<String> {
    let r = s.get(&format!("/api/sessions/{sid}/files"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["files"].as_array().expect("files").iter().map(|f| f["path"].as_str().expect("path").to_string()).collect()
}

#[test]
fn auth_is_required_and_a_first_start_creates_a_token_once() {
    let s = http::start(None, &[]);
    let line = s.banner.iter().find(|l| l.contains("trove_")).expect("a first start prints a token");
    let token = line.rsplit(' ').next().expect("token").to_string();
    let list = |auth: Option<&str>| {
        let h = auth.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = h.as_deref().map(|v| vec![("Authorization", v)]).unwrap_or_default();
        http::request(s.addr, "GET", "/v1/sessions", &headers, b"")
    };
    let none = list(None);
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["kind"], "unauthorized");
    assert_eq!(none.json()["statusCode"], 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    let wrong = list(Some("trove_not_the_token"));
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["error"], "unknown token");
    assert_eq!(list(Some(&token)).status, 200);
    // The token is stored hashed: the manifest never contains it, nor its write-ahead log.
    let mut stored = std::fs::read(s.repo.join("manifest.db")).expect("manifest");
    stored.extend(std::fs::read(s.repo.join("manifest.db-wal")).unwrap_or_default());
    assert!(!stored.windows(token.len()).any(|w| w == token.as_bytes()));
    // The API description and liveness need no token.
    let doc = http::request(s.addr, "GET", "/openapi.json", &[], b"");
    assert_eq!(doc.status, 200);
    assert!(doc.json()["paths"]["/api/sessions/{id}/files/{path}"]["get"].is_object());
    assert_eq!(http::request(s.addr, "GET", "/healthz", &[], b"").status, 200);

    // A second start prints no token, and the first still works.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::rename(&s.repo, dir.path().join("repo")).expect("move repo");
    drop(s);
    let again = http::start_on(dir, None, &[]);
    assert!(!again.banner.iter().any(|l| l.contains("trove_")), "{:?}", again.banner);
    let h = format!("Bearer {token}");
    assert_eq!(http::request(again.addr, "GET", "/v1/sessions", &[("Authorization", &h)], b"").status, 200);
}

#[test]
fn files_api_answers_as_the_seed_says() {
    let s = http::start(Some(TOKEN), &[]);
    let sid = s.session(r#"{"workspace": "app", "metadata": {"ticket": "T-1"}}"#);
    let ws = s.workspace("app");
    write(&ws.join("CLAUDE.md"), b"# notes\n");
    write(&ws.join("src/index.ts"), b"console.log(1);\n");
    write(&ws.join("node_modules/x/index.js"), b"x");
    write(&ws.join(".git/HEAD"), b"ref");
    write(&ws.join("app.lock"), b"l");
    write(&ws.join("big.txt"), &vec![b'a'; (1 << 20) + 1]);
    write(&ws.join("blob.bin"), &[0xff, 0xfe, 0x00, 0x80]);

    let r = s.get(&format!("/api/sessions/{sid}/files"));
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["source"], "sandbox");
    let paths: Vec<&str> =
        body["files"].as_array().expect("files").iter().map(|f| f["path"].as_str().expect("p")).collect();
    assert_eq!(paths, ["CLAUDE.md", "big.txt", "blob.bin", "src/index.ts"], "exclusions apply");
    let f = &body["files"][3];
    assert_eq!(f["size"], 16);
    assert!(f["modifiedAt"].as_str().expect("time").ends_with('Z'));

    let r = s.get(&format!("/api/sessions/{sid}/files/src/index.ts"));
    assert_eq!(r.status, 200);
    let j = r.json();
    assert_eq!(
        (j["path"].as_str(), j["content"].as_str(), j["size"].as_u64()),
        (Some("src/index.ts"), Some("console.log(1);\n"), Some(16))
    );
    assert_eq!(j["source"], "sandbox");

    // 400s: traversal in every spelling, a leading slash, a missing path, a directory, too large.
    for target in [
        "src/../CLAUDE.md",
        "src/%2e%2e/CLAUDE.md",
        "src/%2E%2E/%2e%2e/etc/passwd",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "src%5C..%5C..%5Cetc%5Cpasswd",
        "src\\..\\CLAUDE.md",
        "src/index.ts%00.png",
        "",
        "src",
        "big.txt",
    ] {
        let r = s.get(&format!("/api/sessions/{sid}/files/{target}"));
        assert_eq!(r.status, 400, "{target}: {}", r.text());
        assert_eq!(r.json()["statusCode"], 400);
        assert!(["invalid_path", "is_directory", "too_large"].contains(&r.json()["kind"].as_str().expect("kind")));
    }
    // A double slash is a leading slash once the route is matched.
    let r = s.get(&format!("/api/sessions/{sid}/files//etc/passwd"));
    assert_eq!(r.status, 400, "{}", r.text());
    // Binary content is not served as JSON text, but downloads whole with its sha256 as ETag.
    let r = s.get(&format!("/api/sessions/{sid}/files/blob.bin"));
    assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("not_text")));
    let r = s.get(&format!("/api/sessions/{sid}/files/blob.bin?download=1"));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, [0xff, 0xfe, 0x00, 0x80]);
    let etag = format!("\"{}\"", sha256_hex(&r.body));
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("x-trove-source"), Some("sandbox"));
    let auth = format!("Bearer {TOKEN}");
    let cached = http::request(
        s.addr,
        "GET",
        &format!("/api/sessions/{sid}/files/blob.bin?download=1"),
        &[("Authorization", &auth), ("If-None-Match", &etag)],
        b"",
    );
    assert_eq!(cached.status, 304);
    // Over the JSON limit, a download still serves the file.
    let r = s.get(&format!("/api/sessions/{sid}/files/big.txt?download=1"));
    assert_eq!((r.status, r.body.len()), (200, (1 << 20) + 1));

    // 404s in the seed's shapes.
    let r = s.get("/api/sessions/sess_000000000000/files");
    assert_eq!((r.status, r.json()["error"].as_str()), (404, Some("Session not found")));
    let r = s.get(&format!("/api/sessions/{sid}/files/src/missing.ts"));
    assert_eq!((r.status, r.json()["error"].as_str()), (404, Some("File not found")));
    assert_eq!(r.json()["statusCode"], 404);

    // Explicit sources: no snapshot yet, then one.
    let r = s.get(&format!("/api/sessions/{sid}/files?source=latest"));
    assert_eq!((r.status, r.json()["error"].as_str()), (404, Some("No workspace available for this session")));
    // The seed's string, and trove's sentence saying what to ask for instead.
    let said = r.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(said.contains(&sid) && said.contains("no snapshot yet") && said.contains("source live"), "{said}");
    assert_eq!(s.call("POST", &format!("/v1/sessions/{sid}/snapshots"), "").status, 201);
    write(&ws.join("src/index.ts"), b"console.log(2);\n");
    let r = s.get(&format!("/api/sessions/{sid}/files/src/index.ts?source=latest"));
    assert_eq!(
        (r.json()["content"].as_str(), r.json()["source"].as_str()),
        (Some("console.log(1);\n"), Some("snapshot"))
    );
    let r = s.get(&format!("/api/sessions/{sid}/files/src/index.ts?source=live"));
    assert_eq!(r.json()["content"], "console.log(2);\n");
    let r = s.get(&format!("/api/sessions/{sid}/files?source=0123"));
    assert_eq!(r.status, 404, "{}", r.text());

    // The session record keeps the seed's shape.
    let rec = s.get(&format!("/v1/sessions/{sid}")).json();
    for key in ["id", "created_at", "last_activity", "busy", "persistent", "ttl", "status", "metadata", "file_access"] {
        assert!(rec.get(key).is_some(), "{key} in {rec}");
    }
    assert_eq!(
        (rec["status"].as_str(), rec["ttl"].as_i64(), rec["metadata"]["ticket"].as_str()),
        (Some("ready"), Some(14400), Some("T-1"))
    );

    // Ending keeps the files: they come from the final snapshot, even once the directory is gone.
    let r = s.call("DELETE", &format!("/v1/sessions/{sid}"), "");
    assert_eq!(r.status, 204);
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{sid}"), "").status, 404, "idempotent: 404 once destroyed");
    assert_eq!(s.get(&format!("/v1/sessions/{sid}")).status, 404);
    std::fs::remove_dir_all(&ws).expect("evict the sandbox");
    let r = s.get(&format!("/api/sessions/{sid}/files"));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["source"], "snapshot");
    assert!(r.json()["snapshot"].as_str().is_some_and(|id| id.len() == 64));
    let r = s.get(&format!("/api/sessions/{sid}/files/src/index.ts"));
    assert_eq!(
        (r.json()["content"].as_str(), r.json()["source"].as_str()),
        (Some("console.log(2);\n"), Some("snapshot"))
    );
    assert_eq!(s.get(&format!("/api/sessions/{sid}/files/src/missing.ts")).status, 404);
    let all = s.get("/v1/sessions?include_ended=true").json();
    assert_eq!(all[0]["status"], "ended");
    assert_eq!(all[0]["end_reason"], "deleted");

    // A session whose directory is gone before any snapshot: nothing to serve.
    let gone = s.session(r#"{"workspace": "gone"}"#);
    std::fs::remove_dir_all(s.workspace("gone")).expect("rm");
    let r = s.get(&format!("/api/sessions/{gone}/files"));
    assert_eq!((r.status, r.json()["error"].as_str()), (404, Some("No workspace available for this session")));

    // Bad bodies and queries.
    let r = s.call("POST", "/v1/sessions", r#"{"ttl": -1}"#);
    assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("invalid_argument")));
    let r = s.call("POST", "/v1/sessions", r#"{"workspace": ".."}"#);
    assert_eq!(r.status, 400);
    let r = s.call("POST", "/v1/sessions", "{not json");
    assert_eq!(r.status, 400);
    let r = s.call("POST", "/v1/sessions", r#"{"file_access": {"read": ["../x"]}}"#);
    assert_eq!(r.status, 400);
    for body in ["[]", "[true, 60]", "null", r#"{"ttl": 3153600001}"#, r#"{"file_access": {"read": ["a\\b"]}}"#] {
        assert_eq!(s.call("POST", "/v1/sessions", body).status, 400, "{body}");
    }
    assert_eq!(s.call("PUT", "/v1/sessions", "").status, 405);
    let huge = format!(r#"{{"metadata": {{"pad": "{}"}}}}"#, "x".repeat((1 << 20) + 64));
    let r = s.call("POST", "/v1/sessions", &huge);
    assert_eq!((r.status, r.json()["kind"].as_str()), (413, Some("too_large")), "bodies are bounded");
    assert_eq!(s.get("/v1/nothing").status, 404);
}

#[test]
fn scope_hides_and_refuses_and_symlinks_never_leave_the_workspace() {
    let s = http::start(Some(TOKEN), &[]);
    let sid = s.session(
        r#"{"workspace": "w", "file_access": {"read": ["projects/my-project", "shared/templates"], "write": ["projects/my-project/output"]}}"#,
    );
    let ws = s.workspace("w");
    write(&ws.join("projects/my-project/a.rs"), b"a");
    write(&ws.join("projects/my-project/output/r.md"), b"r");
    write(&ws.join("projects/my-project2/b.rs"), b"b");
    write(&ws.join("projects/other/c.rs"), b"c");
    write(&ws.join("shared/templates/t.txt"), b"t");
    write(&ws.join("secret.env"), b"KEY=1");
    write(&ws.join(format!(".sessions/{sid}/notes.md")), b"mine");
    write(&ws.join(".sessions/sess_other/notes.md"), b"theirs");
    assert_eq!(
        files(&s, &sid),
        [
            format!(".sessions/{sid}/notes.md"),
            "projects/my-project/a.rs".into(),
            "projects/my-project/output/r.md".into(),
            "shared/templates/t.txt".into()
        ]
    );
    for denied in ["secret.env", "projects/my-project2/b.rs", "projects/other/c.rs", ".sessions/sess_other/notes.md"] {
        let r = s.get(&format!("/api/sessions/{sid}/files/{denied}"));
        assert_eq!(r.status, 403, "{denied}");
        let j = r.json();
        assert_eq!(j["error"], "Forbidden");
        assert_eq!(j["message"], format!("'{denied}' not in session scope"));
    }
    // Out of scope answers 403 whether or not the file exists.
    assert_eq!(s.get(&format!("/api/sessions/{sid}/files/nope/x")).status, 403);
    assert_eq!(s.get(&format!("/api/sessions/{sid}/files/projects/my-project/a.rs")).status, 200);

    // Symlinks: to /etc, to .., chains of them, all read as not found; an inside one works.
    let open = s.session(r#"{"workspace": "links"}"#);
    let lw = s.workspace("links");
    write(&lw.join("src/a.rs"), b"inside");
    write(&s.workspaces.join("outside.txt"), b"OUTSIDE");
    symlink("/etc/passwd", lw.join("etc-link")).expect("symlink");
    symlink("/etc", lw.join("etc-dir")).expect("symlink");
    symlink("../outside.txt", lw.join("up-link")).expect("symlink");
    symlink("..", lw.join("parent")).expect("symlink");
    symlink("hop2", lw.join("hop1")).expect("symlink");
    symlink("up-link", lw.join("hop2")).expect("symlink");
    symlink("src/a.rs", lw.join("in-link")).expect("symlink");
    for escape in ["etc-link", "etc-dir/passwd", "up-link", "parent/outside.txt", "hop1", "parent/links/src/a.rs"] {
        let r = s.get(&format!("/api/sessions/{open}/files/{escape}"));
        assert_eq!(r.status, 404, "{escape}: {}", r.text());
        assert!(!r.text().contains("root:") && !r.text().contains("OUTSIDE"));
    }
    assert_eq!(s.get(&format!("/api/sessions/{open}/files/in-link")).json()["content"], "inside");
    let listed = files(&s, &open);
    assert_eq!(listed, ["src/a.rs"], "listings show regular files only, never through a link");
}

#[test]
fn sessions_pause_resume_expire_and_bulk_delete() {
    let s = http::start(Some(TOKEN), &["--idle-timeout", "1s", "--reap-interval", "100ms"]);
    let idle = s.session(r#"{"workspace": "idle"}"#);
    let kept = s.session(r#"{"workspace": "kept", "persistent": true}"#);
    write(&s.workspace("idle").join("f.txt"), b"idle work");
    write(&s.workspace("kept").join("f.txt"), b"kept work");

    // Pause: a snapshot, and the live tree is no longer served.
    let r = s.call("POST", &format!("/v1/sessions/{kept}/pause"), "");
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("paused")));
    write(&s.workspace("kept").join("f.txt"), b"changed while paused");
    let r = s.get(&format!("/api/sessions/{kept}/files/f.txt"));
    assert_eq!((r.json()["content"].as_str(), r.json()["source"].as_str()), (Some("kept work"), Some("snapshot")));
    let r = s.call("POST", &format!("/v1/sessions/{kept}/resume"), "");
    assert_eq!(r.json()["status"], "ready");
    let r = s.get(&format!("/api/sessions/{kept}/files/f.txt"));
    assert_eq!(
        (r.json()["content"].as_str(), r.json()["source"].as_str()),
        (Some("changed while paused"), Some("sandbox"))
    );

    // The non-persistent session ends by itself after a second idle; the persistent one stays.
    assert!(eventually(20, || s.get(&format!("/v1/sessions/{idle}")).status == 404), "idle session did not end");
    let r = s.get(&format!("/api/sessions/{idle}/files/f.txt"));
    assert_eq!((r.json()["content"].as_str(), r.json()["source"].as_str()), (Some("idle work"), Some("snapshot")));
    let ended = s.get("/v1/sessions?include_ended=true").json();
    let rec = ended.as_array().expect("list").iter().find(|r| r["id"] == idle.as_str()).expect("idle listed").clone();
    assert_eq!(rec["end_reason"], "idle");
    assert_eq!(s.get(&format!("/v1/sessions/{kept}")).status, 200);

    // Bulk delete: by age, then idle ones.
    let r = s.call("DELETE", "/v1/sessions?older_than=1h", "");
    assert_eq!(r.json()["deleted"], 0);
    let r = s.call("DELETE", "/v1/sessions?older_than=1h30x", "");
    assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("invalid_argument")));
    let r = s.call("DELETE", "/v1/sessions?status=busy", "");
    assert_eq!(r.status, 400);
    let another = s.session(r#"{"persistent": true}"#);
    // By workspace: only that workspace's sessions end.
    let other = s.session(r#"{"persistent": true, "workspace": "elsewhere"}"#);
    assert_eq!(s.call("DELETE", "/v1/sessions?workspace=", "").status, 400, "an empty name is no filter");
    let r = s.call("DELETE", "/v1/sessions?workspace=elsewhere", "");
    assert_eq!((r.status, r.json()["deleted"].as_u64()), (200, Some(1)));
    assert_eq!(s.get(&format!("/v1/sessions/{other}")).status, 404);
    assert_eq!(s.get(&format!("/v1/sessions/{another}")).status, 200);
    let r = s.call("DELETE", "/v1/sessions?status=idle&older_than=0s", "");
    assert_eq!((r.status, r.json()["deleted"].as_u64()), (200, Some(2)));
    assert_eq!(s.get(&format!("/v1/sessions/{another}")).status, 404);
    assert_eq!(s.get("/v1/sessions").json(), serde_json::json!([]));
}

#[test]
fn snapshots_endpoints_take_list_read_and_export() {
    let s = http::start(Some(TOKEN), &[]);
    let sid = s.session(r#"{"workspace": "snap"}"#);
    let ws = s.workspace("snap");
    write(&ws.join("a.txt"), b"alpha");
    write(&ws.join("dir/b.txt"), b"beta");
    let r = s.call("POST", &format!("/v1/sessions/{sid}/snapshots"), "");
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().expect("id").to_string();
    assert_eq!(r.json()["session"], sid.as_str());
    assert_eq!(s.get(&format!("/v1/sessions/{sid}/snapshots")).json()[0]["id"], id.as_str());
    assert_eq!(s.get("/v1/snapshots?workspace=snap").json().as_array().map(Vec::len), Some(1));
    let shown = s.get(&format!("/v1/snapshots/{}", &id[..10])).json();
    assert_eq!(shown["id"], id.as_str());
    assert!(shown["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{shown}");
    assert!(shown.get("created_at").is_none() && shown.get("created_ns").is_none(), "{shown}");
    let listed = s.get(&format!("/v1/snapshots/{id}/files")).json();
    assert_eq!(listed["files"].as_array().map(Vec::len), Some(2));
    assert_eq!(listed["source"], "snapshot");
    let under = s.get(&format!("/v1/snapshots/{id}/files?prefix=dir")).json();
    assert_eq!(under["files"][0]["path"], "dir/b.txt");
    assert_eq!(under["files"].as_array().map(Vec::len), Some(1));
    assert_eq!(s.get(&format!("/v1/snapshots/{id}/files/dir/b.txt")).json()["content"], "beta");
    let raw = s.get(&format!("/v1/snapshots/{id}/files/a.txt?download=1"));
    assert_eq!(raw.body, b"alpha");
    assert_eq!(raw.header("etag").map(str::to_string), Some(format!("\"{}\"", sha256_hex(b"alpha"))));
    assert_eq!(s.get(&format!("/v1/snapshots/{id}/files/nope")).status, 404);
    assert_eq!(s.get(&format!("/v1/snapshots/{id}/files/%2e%2e/x")).status, 400);
    assert_eq!(s.get("/v1/snapshots/ffffffffff").status, 404);
    assert_eq!(s.get("/v1/snapshots/not-hex").status, 400);
    assert_eq!(s.call("POST", "/v1/sessions/sess_nope/snapshots", "").status, 404);

    for (query, want) in [("", vec!["a.txt", "dir/", "dir/b.txt"]), ("?path=dir", vec!["dir/", "dir/b.txt"])] {
        let r = s.get(&format!("/v1/snapshots/{id}/export{query}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/x-tar"));
        let mut archive = tar::Archive::new(&r.body[..]);
        let mut names = Vec::new();
        for e in archive.entries().expect("tar") {
            let mut e = e.expect("entry");
            let name = e.path().expect("path").to_string_lossy().into_owned();
            if name == "a.txt" {
                let mut text = String::new();
                e.read_to_string(&mut text).expect("read");
                assert_eq!(text, "alpha");
            }
            names.push(name);
        }
        assert_eq!(names, want);
    }
    let r = s.get(&format!("/v1/snapshots/{id}/export?format=tar.zst"));
    let tar_bytes = zstd::decode_all(&r.body[..]).expect("zstd");
    assert_eq!(tar::Archive::new(&tar_bytes[..]).entries().expect("tar").count(), 3);
    assert_eq!(s.get(&format!("/v1/snapshots/{id}/export?path=nope")).status, 404);
    assert_eq!(s.get(&format!("/v1/snapshots/{id}/export?format=zip")).status, 400);
}

#[test]
fn a_download_of_a_file_changing_underneath_answers_409_with_abort() {
    let s = http::start(Some(TOKEN), &[]);
    let sid = s.session(r#"{"workspace": "busy"}"#);
    let path = s.workspace("busy").join("log.bin");
    write(&path, &vec![7u8; 8 << 20]);
    let (stop, writer) = http::appender(&path);
    let target = format!("/api/sessions/{sid}/files/log.bin?download=1&change_policy=abort");
    // On 2 cores the appender is sometimes not scheduled for a whole read; such a read saw no
    // change and may answer 200, but only ever with a body matching its ETag.
    let mut refused = 0;
    for _ in 0..20 {
        let r = s.get(&target);
        if r.status == 409 {
            assert_eq!(r.json()["kind"], "conflict");
            refused += 1;
        } else if r.cut {
            // The file changed between the hash and the bytes: the transfer was cut short of
            // its Content-Length, which a client sees as a failed download, never as a whole.
            refused += 1;
        } else {
            assert_eq!(r.status, 200);
            assert_eq!(r.header("etag").map(str::to_string), Some(format!("\"{}\"", sha256_hex(&r.body))));
        }
    }
    assert!(refused > 0, "reads overlapping an append must answer 409");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    let r = s.get(&target);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag").map(str::to_string), Some(format!("\"{}\"", sha256_hex(&r.body))));
    assert_eq!(s.get(&format!("/api/sessions/{sid}/files/log.bin?change_policy=sometimes")).status, 400);
}

#[test]
fn shutdown_finishes_the_request_in_flight() {
    let mut s = http::start(Some(TOKEN), &[]);
    let sid = s.session(r#"{"workspace": "big"}"#);
    let ws = s.workspace("big");
    let mut rng = trove::sample::Rng::new(9);
    for i in 0..24 {
        write(&ws.join(format!("f{i:02}.bin")), &rng.bytes(1 << 20));
    }
    let id =
        s.call("POST", &format!("/v1/sessions/{sid}/snapshots"), "").json()["id"].as_str().expect("id").to_string();
    let mut conn = std::net::TcpStream::connect(s.addr).expect("connect");
    let auth = format!("Bearer {TOKEN}");
    http::send(&mut conn, "GET", &format!("/v1/snapshots/{id}/export"), &[("Authorization", &auth)], b"");
    let mut first = [0u8; 1024];
    let n = conn.read(&mut first).expect("first bytes");
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    // SIGTERM while the archive is still streaming.
    let status = std::process::Command::new("kill").arg("-TERM").arg(s.pid().to_string()).status().expect("kill");
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(300));
    let mut raw = first[..n].to_vec();
    conn.read_to_end(&mut raw).expect("rest of the archive");
    let r = http::parse(&raw);
    let names: Vec<String> = tar::Archive::new(&r.body[..])
        .entries()
        .expect("tar")
        .map(|e| e.expect("entry").path().expect("path").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 24, "the in-flight export completes");
    let exit = s.child.wait().expect("wait");
    assert!(exit.success(), "graceful exit: {exit:?}");
    assert!(std::net::TcpStream::connect(s.addr).is_err(), "no longer accepting");
}

#[test]
fn a_request_over_the_timeout_stops_and_says_nothing_changed() {
    let dir = tempfile::tempdir().expect("tmp");
    let repo = dir.path().join("repo");
    let ws = dir.path().join("workspaces/slow");
    assert!(common::trove(&repo, &["init"]).status.success());
    let out = common::trove(&repo, &["--json", "session", "create", "--dir", ws.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let sid =
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")["id"].as_str().expect("id").to_string();
    for i in 0..3000 {
        write(&ws.join(format!("d{}/f{i}.txt", i % 30)), b"x");
    }
    // Listing 3,000 files cannot finish within a millisecond.
    let s = http::start_on(dir, Some(TOKEN), &["--request-timeout", "1ms"]);
    let r = s.get(&format!("/api/sessions/{sid}/files"));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!((r.json()["kind"].as_str(), &r.json()["changed"]), (Some("timeout"), &serde_json::json!(false)));
}

#[test]
fn tools_and_conditional_writes_over_http() {
    let s = http::start(Some(TOKEN), &[]);
    let sid = s.session(r#"{"workspace": "tools"}"#);
    let ws = s.workspace("tools");
    http::write(&ws.join("app.ts"), b"const PORT = 3000;\n");
    let auth = format!("Bearer {TOKEN}");
    let with = |method: &str, path: &str, extra: &[(&str, &str)], body: &[u8]| {
        let mut headers = vec![("Authorization", auth.as_str())];
        headers.extend_from_slice(extra);
        http::request(s.addr, method, &format!("/v1/sessions/{sid}/files/{path}"), &headers, body)
    };
    // The tools endpoint: results are 200 envelopes, request problems are statuses.
    let tool = |name: &str, body: &str| s.call("POST", &format!("/v1/sessions/{sid}/tools/{name}"), body);
    let read = tool("read_file", r#"{"path": "app.ts"}"#);
    assert_eq!(read.status, 200, "{}", read.text());
    let sha = read.json()["data"]["sha256"].as_str().expect("sha").to_string();
    assert_eq!(sha, http::sha256_hex(b"const PORT = 3000;\n"));
    let stale = tool(
        "edit_file",
        r#"{"path": "app.ts", "expectedSha256": "00", "edits": [{"oldText": "3000", "newText": "4000"}]}"#,
    );
    assert_eq!(stale.status, 200);
    assert_eq!(stale.json()["ok"], json!(false));
    assert_eq!(stale.json()["error"]["kind"], json!("stale_file"));
    assert_eq!(stale.json()["error"]["currentSha256"], json!(sha));
    let edit = tool(
        "edit_file",
        &json!({"path": "app.ts", "expectedSha256": sha, "edits": [{"oldText": "3000", "newText": "4000"}]})
            .to_string(),
    );
    assert_eq!(edit.json()["ok"], json!(true), "{}", edit.text());
    assert_eq!(std::fs::read_to_string(ws.join("app.ts")).expect("read"), "const PORT = 4000;\n");
    assert_eq!(tool("no_such_tool", "{}").status, 404);
    assert_eq!(tool("read_file", r#"{"nope": 1}"#).status, 400);
    assert_eq!(tool("read_file", "not json").status, 400);
    assert_eq!(s.call("POST", "/v1/sessions/sess_000000000000/tools/read_file", r#"{"path":"a"}"#).status, 404);
    let patch = json!({"patch": "*** Begin Patch\n*** Add File: src/new.ts\n+export {};\n*** End Patch"}).to_string();
    let applied = tool("apply_patch", &patch);
    assert_eq!(applied.json()["data"]["files"][0]["sha256"], json!(http::sha256_hex(b"export {};\n")));

    // PUT: If-None-Match: * creates only; If-Match must be the current sha256; neither is refused.
    let created = with("PUT", "notes.md", &[("If-None-Match", "*")], b"hello\n");
    assert_eq!(created.status, 201, "{}", created.text());
    let tag = format!("\"{}\"", http::sha256_hex(b"hello\n"));
    assert_eq!(created.header("etag"), Some(tag.as_str()));
    assert_eq!(with("PUT", "notes.md", &[("If-None-Match", "*")], b"again\n").status, 412);
    let blind = with("PUT", "notes.md", &[], b"blind\n");
    assert_eq!(blind.status, 412);
    assert_eq!(blind.json()["kind"], json!("stale_file"));
    let wrong = with("PUT", "notes.md", &[("If-Match", "\"0000\"")], b"x\n");
    assert_eq!(wrong.status, 412);
    assert_eq!(wrong.json()["currentSha256"], json!(http::sha256_hex(b"hello\n")));
    // A malformed precondition is refused, never taken for a mismatch (nor a write taken blind).
    for (name, value) in [("If-Match", "nope"), ("If-Match", "W/abc"), ("If-None-Match", "\"x\"")] {
        let r = with("PUT", "notes.md", &[(name, value)], b"x\n");
        assert_eq!((r.status, r.json()["kind"].clone()), (400, json!("invalid_argument")), "{name}: {value}");
    }
    assert_eq!(std::fs::read_to_string(ws.join("notes.md")).expect("read"), "hello\n");
    let ok = with("PUT", "notes.md", &[("If-Match", tag.as_str())], b"updated\n");
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(std::fs::read_to_string(ws.join("notes.md")).expect("read"), "updated\n");
    // DELETE: conditional too, into the trash, and back with restore_file.
    assert_eq!(with("DELETE", "notes.md", &[("If-Match", tag.as_str())], b"").status, 412);
    let gone = with("DELETE", "notes.md", &[], b"");
    assert_eq!(gone.status, 200, "{}", gone.text());
    assert!(!ws.join("notes.md").exists());
    let trash = gone.json()["trashId"].as_str().expect("trash").to_string();
    let back = tool("restore_file", &json!({"trashId": trash}).to_string());
    assert_eq!(back.json()["ok"], json!(true), "{}", back.text());
    assert_eq!(std::fs::read_to_string(ws.join("notes.md")).expect("read"), "updated\n");
    assert_eq!(with("DELETE", "missing.md", &[], b"").status, 404);
    // An ended session is read-only, and tools read its final snapshot.
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{sid}"), "").status, 204);
    let ro = with("PUT", "notes.md", &[("If-None-Match", "*")], b"x");
    assert_eq!((ro.status, ro.json()["kind"].clone()), (409, json!("read_only")));
    let after = tool("read_file", r#"{"path": "notes.md"}"#);
    assert_eq!(after.json()["data"]["source"], json!("snapshot"));
    // The OpenAPI document lists the new routes.
    let doc = http::request(s.addr, "GET", "/openapi.json", &[], b"").json();
    assert!(doc["paths"]["/v1/sessions/{id}/tools/apply_patch"]["post"]["requestBody"].is_object());
    assert!(doc["paths"]["/v1/sessions/{id}/files/{path}"]["put"].is_object());
}
