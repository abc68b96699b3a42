//! The server against hostile and careless clients (issue 11): a panicking handler is
//! answered and contained; error bodies show no server path and no internals; names too long
//! are refused as such; unknown fields are refused by name; tokens take effect and are revoked
//! at once; refusals are audited; `If-Match: *` and bulk deletes behave as HTTP and the seed
//! say.

mod common;

use common::http::{self, Server, TOKEN};
use serde_json::{json, Value};

fn start_with(env: &[(&str, &str)], extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("tmp");
    assert!(common::trove(&dir.path().join("repo"), &["init"]).status.success());
    http::start_env(dir, Some(TOKEN), extra, env)
}

#[test]
fn a_panicking_handler_answers_500_with_a_request_id_and_the_server_stays_up() {
    for point in ["server:panic-blocking", "server:panic-inline"] {
        let s = start_with(&[("TROVE_FAILPOINT", point)], &[]);
        let id = s.session(r#"{"workspace": "w"}"#);
        std::fs::write(s.workspace("w").join("a.txt"), "a").expect("write");
        let target = match point {
            "server:panic-blocking" => format!("/api/sessions/{id}/files"),
            _ => format!("/api/sessions/{id}/files/a.txt"),
        };
        let r = s.get(&target);
        assert_eq!(r.status, 500, "{point}: {}", r.text());
        let body = r.json();
        assert_eq!(body["kind"], "internal", "{point}: {body}");
        let rid = body["requestId"].as_str().expect("a request id").to_string();
        assert!(rid.starts_with("req_"), "{rid}");
        assert_eq!(r.header("x-request-id"), Some(rid.as_str()));
        assert!(!r.text().contains("failpoint") && !r.text().contains("panicked at"), "{point}: {}", r.text());
        assert_eq!(s.get("/v1/sessions").status, 200, "{point}: the server still answers");
        assert_eq!(s.get(&target).status, 500, "{point}: and contains the next panic too");
    }
}

/// Every answer to `requests` on a server; none may show the repository or workspaces path.
fn bodies(s: &Server, requests: &[(&str, String, String)]) -> Vec<(u16, Value)> {
    let hidden = [s.repo.to_string_lossy().into_owned(), s.workspaces.to_string_lossy().into_owned()];
    let tmp = s.dir.path().to_string_lossy().into_owned();
    requests
        .iter()
        .map(|(method, target, body)| {
            let r = s.call(method, target, body);
            let text = r.text();
            for h in hidden.iter().chain([&tmp]) {
                assert!(!text.contains(h.as_str()), "{method} {target} shows '{h}': {text}");
            }
            (r.status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
        .collect()
}

#[test]
fn error_bodies_never_show_server_paths_and_long_names_are_name_too_long() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    let ws = s.workspace("w");
    std::fs::create_dir_all(ws.join("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", ws.join("out")).expect("link");
    let long = "n".repeat(300);
    let files = format!("/api/sessions/{id}/files");
    let tools = format!("/v1/sessions/{id}/tools");
    let requests = vec![
        ("GET", format!("{files}/{long}"), String::new()),
        ("GET", format!("{files}/dir/{long}/x"), String::new()),
        ("PUT", format!("/v1/sessions/{id}/files/{long}"), "x".to_string()),
        ("DELETE", format!("/v1/sessions/{id}/files/{long}"), String::new()),
        ("POST", format!("{tools}/create_file"), json!({"path": long, "content": "x"}).to_string()),
        ("POST", format!("{tools}/read_file"), json!({"path": format!("dir/{long}")}).to_string()),
        ("GET", format!("{files}/missing.txt"), String::new()),
        ("GET", format!("{files}/dir"), String::new()),
        ("GET", format!("{files}/out"), String::new()),
        (
            "POST",
            format!("{tools}/write_file"),
            json!({"path": "dir", "content": "x", "expectedSha256": "00"}).to_string(),
        ),
        ("POST", format!("{tools}/list_directory"), json!({"path": "nope"}).to_string()),
        ("POST", format!("{tools}/create_file"), json!({"path": "out/x", "content": "x"}).to_string()),
    ];
    let answers = bodies(&s, &requests);
    for (i, (status, body)) in answers.iter().take(3).enumerate() {
        assert_eq!((*status, body["kind"].as_str()), (400, Some("name_too_long")), "request {i}: {body}");
    }
    assert_eq!(answers[4].1["error"]["kind"], "name_too_long", "{}", answers[4].1);
    // Damage the repository: the answers to reads that meet it still show no path.
    let packs = s.repo.join("packs");
    std::fs::write(ws.join("big.txt"), "x".repeat(100_000)).expect("write");
    assert_eq!(s.call("POST", &format!("/v1/sessions/{id}/snapshots"), "").status, 201);
    for entry in walkdir::WalkDir::new(&packs).into_iter().filter_map(|e| e.ok()).filter(|e| e.file_type().is_file()) {
        std::fs::remove_file(entry.path()).expect("remove pack");
    }
    let broken = bodies(&s, &[("GET", "/v1/snapshots/latest/files/big.txt".to_string(), String::new())]);
    assert_eq!(broken[0].0, 500, "{:?}", broken[0]);
}

#[test]
fn unknown_fields_are_refused_by_name_and_change_nothing() {
    let s = http::start(Some(TOKEN), &[]);
    let r = s.call("POST", "/v1/sessions", r#"{"workspace": "w", "fileAccess": {"read": ["src"]}}"#);
    assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("invalid_argument")), "{}", r.text());
    assert!(r.text().contains("fileAccess"), "the field is named: {}", r.text());
    let r = s.call("POST", "/v1/sessions", r#"{"file_access": {"read": ["src"], "wrte": ["src"]}}"#);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("wrte"), "{}", r.text());
    assert_eq!(s.get("/v1/sessions").json(), json!([]), "no session was created");
    // The seed's own fields are accepted.
    let r = s.call("POST", "/v1/sessions", r#"{"model": "m", "tools": [{"type": "function"}]}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s.get("/v1/sessions?include_ended=true&includeEnded=true");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("includeEnded"), "{}", r.text());
}

#[test]
fn if_match_star_means_any_current_file_and_a_bare_bulk_delete_is_refused() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    std::fs::write(s.workspace("w").join("a.txt"), "old").expect("write");
    let star = [("Authorization", format!("Bearer {TOKEN}")), ("If-Match", "*".to_string())];
    let headers: Vec<(&str, &str)> = star.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = http::request(s.addr, "PUT", &format!("/v1/sessions/{id}/files/a.txt"), &headers, b"new");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(std::fs::read_to_string(s.workspace("w").join("a.txt")).expect("read"), "new");
    let r = http::request(s.addr, "PUT", &format!("/v1/sessions/{id}/files/none.txt"), &headers, b"x");
    assert_eq!(r.status, 412, "nothing there: {}", r.text());
    assert!(!s.workspace("w").join("none.txt").exists());
    let r = http::request(s.addr, "DELETE", &format!("/v1/sessions/{id}/files/a.txt"), &headers, b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!s.workspace("w").join("a.txt").exists());

    let r = s.call("DELETE", "/v1/sessions", "");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(s.get(&format!("/v1/sessions/{id}")).status, 200, "the session lives on");
    let r = s.call("DELETE", "/v1/sessions?all=true", "");
    assert_eq!((r.status, r.json()["deleted"].as_u64()), (200, Some(1)), "{}", r.text());
}

/// The audit log as JSON records, newest last.
fn audit(s: &Server) -> Vec<Value> {
    let out = common::trove(&s.repo, &["--json", "audit", "log", "--limit", "200"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("json")
}

#[test]
fn tokens_created_or_revoked_while_the_server_runs_take_effect_at_once() {
    let s = http::start(Some(TOKEN), &[]);
    let out = common::trove(&s.repo, &["--json", "token", "create", "--label", "ci"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let made: Value = serde_json::from_slice(&out.stdout).expect("json");
    let (token, id) = (made["token"].as_str().expect("token"), made["id"].as_str().expect("id"));
    let with = |t: &str| {
        let auth = format!("Bearer {t}");
        http::request(s.addr, "GET", "/v1/sessions", &[("Authorization", &auth)], b"").status
    };
    assert_eq!(with(token), 200, "a new token works without a restart");
    // Its calls are done in its name.
    let auth = format!("Bearer {token}");
    let r = http::request(s.addr, "POST", "/v1/sessions", &[("Authorization", &auth)], br#"{"workspace": "w"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let created = audit(&s).into_iter().rev().find(|r| r["operation"] == "session_create").expect("audited");
    assert_eq!(created["actor"], id);

    let out = common::trove(&s.repo, &["token", "revoke", id]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(with(token), 401, "a revoked token is refused at once");
    assert_eq!(with(TOKEN), 200, "the others still work");
    let listed = common::trove(&s.repo, &["--json", "token", "list"]);
    let rows: Vec<Value> = serde_json::from_slice(&listed.stdout).expect("json");
    let row = rows.iter().find(|r| r["id"] == id).expect("listed");
    assert!(row["revokedAt"].is_string() && !common::stdout(&listed).contains(token), "{rows:?}");
    let ops: Vec<String> = audit(&s).iter().map(|r| r["operation"].as_str().unwrap_or("").to_string()).collect();
    assert!(ops.contains(&"token_create".to_string()) && ops.contains(&"token_revoke".to_string()), "{ops:?}");
    assert!(common::trove(&s.repo, &["token", "revoke", id]).status.code() == Some(1), "revoking twice is an error");
}

#[test]
fn auth_failures_and_scope_denials_are_audited() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w", "file_access": {"read": ["src"], "write": []}}"#);
    std::fs::write(s.workspace("w").join("secret.txt"), "s").expect("write");
    assert_eq!(http::request(s.addr, "GET", "/v1/sessions", &[], b"").status, 401);
    let bad = [("Authorization", "Bearer not-a-token")];
    assert_eq!(http::request(s.addr, "GET", "/v1/sessions", &bad, b"").status, 401);
    assert_eq!(s.get(&format!("/api/sessions/{id}/files/secret.txt")).status, 403);
    let t = s.call("POST", &format!("/v1/sessions/{id}/tools/read_file"), r#"{"path": "secret.txt"}"#);
    assert_eq!(t.json()["error"]["kind"], "permission_denied");
    let log = audit(&s);
    let auth: Vec<&Value> = log.iter().filter(|r| r["operation"] == "auth").collect();
    assert_eq!(auth.len(), 2, "{log:?}");
    assert!(auth.iter().all(|r| r["outcome"] == "unauthorized" && r["actor"] == "anonymous"));
    assert!(!serde_json::to_string(&log).expect("json").contains("not-a-token"), "no token material");
    for op in ["files_read", "read_file"] {
        let denied = log.iter().find(|r| r["operation"] == op).unwrap_or_else(|| panic!("{op} audited: {log:?}"));
        assert_eq!(
            (denied["outcome"].as_str(), denied["path"].as_str()),
            (Some("permission_denied"), Some("secret.txt"))
        );
        assert_eq!(denied["session"], id.as_str());
    }
}

/// Raises this process's open-file limit to its hard limit (the test opens thousands of sockets).
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    l.current = l.maximum;
    let _ = setrlimit(Resource::Nofile, l);
}

#[test]
fn two_thousand_idle_sockets_do_not_stop_a_normal_request() {
    raise_fd_limit();
    let s =
        http::start(Some(TOKEN), &["--max-connections", "64", "--header-timeout", "60s", "--keepalive-timeout", "60s"]);
    // The server gets the common default of 1024 descriptors, fewer than the sockets opened.
    let pid = rustix::process::Pid::from_raw(s.pid()).expect("pid");
    let maximum = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let limit = rustix::process::Rlimit { current: Some(1024), maximum };
    rustix::process::prlimit(Some(pid), rustix::process::Resource::Nofile, limit).expect("lower the limit");
    let mut idle = Vec::new();
    for i in 0..2000 {
        let mut c = std::net::TcpStream::connect(s.addr).expect("connect");
        if i % 2 == 0 {
            // Half of them start a request line and stop.
            std::io::Write::write_all(&mut c, b"GET /v1/sess").expect("partial");
        }
        idle.push(c);
    }
    let started = std::time::Instant::now();
    let r = s.get("/v1/sessions");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "answered while the idle sockets stay open");
    assert_eq!(s.get("/healthz").status, 200);
    drop(idle);
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use std::io::{Read, Write};
    let s = http::start(Some(TOKEN), &["--header-timeout", "1s"]);
    let mut c = std::net::TcpStream::connect(s.addr).expect("connect");
    c.write_all(b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\n").expect("half a head");
    c.set_read_timeout(Some(std::time::Duration::from_secs(15))).expect("timeout");
    let mut buf = [0u8; 64];
    let n = c.read(&mut buf).expect("the server closes the connection (not a read timeout)");
    assert_eq!(n, 0, "closed without an answer: {:?}", String::from_utf8_lossy(&buf[..n]));
}

#[test]
fn when_every_connection_is_busy_a_new_one_gets_503_at_once() {
    // No reserve: even the operator's request is refused (its reserve is shown in
    // `server_limits.rs`).
    let s =
        http::start(Some(TOKEN), &["--max-connections", "2", "--reserved-connections", "0", "--request-timeout", "5s"]);
    let id = s.session(r#"{"workspace": "w"}"#);
    let ws = s.workspace("w");
    std::fs::write(ws.join("a.txt"), "a\n").expect("write");
    // Hold the workspace's lock, so two writes wait in flight.
    let meta = std::fs::metadata(&ws).expect("stat");
    use std::os::unix::fs::MetadataExt;
    let locks = s.repo.join("locks");
    std::fs::create_dir_all(&locks).expect("mkdir");
    let lock = std::fs::File::create(locks.join(format!("{:x}-{:x}.lock", meta.dev(), meta.ino()))).expect("lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("lock");
    let body = json!({"path": "b.txt", "content": "b"}).to_string();
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let (addr, target, body) = (s.addr, format!("/v1/sessions/{id}/tools/create_file"), body.clone());
            std::thread::spawn(move || {
                let auth = format!("Bearer {TOKEN}");
                http::request(addr, "POST", &target, &[("Authorization", &auth)], body.as_bytes()).status
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let r = s.get("/v1/sessions");
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["kind"], "busy");
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "at once, not after the busy ones");
    drop(lock);
    for b in busy {
        assert!([200, 503].contains(&b.join().expect("join")));
    }
    assert_eq!(s.get("/v1/sessions").status, 200, "room again once they finished");
}

#[test]
fn a_name_that_is_not_utf8_is_read_by_its_percent_encoded_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    std::fs::write(s.workspace("w").join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), "latin-1 name").expect("write");
    let r = s.get(&format!("/api/sessions/{id}/files/caf%E9.txt?download=1"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"latin-1 name"[..]), "{}", r.text());
    let r = s.get(&format!("/api/sessions/{id}/files/caf%E9.txt"));
    assert_eq!(r.json()["content"], "latin-1 name", "{}", r.text());
    for bad in ["caf%E", "a%5C..%5Cb", "a%zz"] {
        let r = s.get(&format!("/api/sessions/{id}/files/{bad}"));
        assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("invalid_path")), "{bad}: {}", r.text());
    }
}

#[test]
fn patterns_too_deep_or_too_long_are_400_and_the_server_stays_up() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "w"}"#);
    std::fs::write(s.workspace("w").join("a.rs"), "fn a() {}\n").expect("write");
    for depth in [10_000, 30_000] {
        let deep = "{".repeat(depth) + &"}".repeat(depth);
        for (tool, params) in [
            ("glob", json!({"pattern": deep})),
            ("search_files", json!({"pattern": "fn", "include": [deep]})),
            ("search_files", json!({"pattern": "fn", "exclude": [deep]})),
        ] {
            let r = s.call("POST", &format!("/v1/sessions/{id}/tools/{tool}"), &params.to_string());
            assert_eq!((r.status, r.json()["kind"].as_str()), (400, Some("invalid_argument")), "{tool} {depth}");
            assert!(!r.text().contains("panicked") && r.text().len() < 1000, "{}", r.text());
        }
    }
    let long = json!({"pattern": "x".repeat(10_000), "mode": "regex"});
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/search_files"), &long.to_string());
    assert_eq!(r.status, 400, "{}", r.text());
    let ok = s.call("POST", &format!("/v1/sessions/{id}/tools/glob"), r#"{"pattern": "{a,b}*.rs"}"#);
    assert_eq!(ok.json()["data"]["files"][0]["path"], "a.rs", "{}", ok.text());
    let deep = "{".repeat(30_000) + &"}".repeat(30_000);
    let out = common::trove(&s.repo, &["workspace", "excludes", "w", "--add", &deep]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
}
