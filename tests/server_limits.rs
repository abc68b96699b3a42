//! What one session or client can take from a running server, tried as an attacker would: MCP
//! sessions, watchers' memory and inotify watches, slow uploads, descriptors and audit records.
//! Each test drives a real `trove serve` and checks the bound RELIABILITY.md states.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::http::{self, eventually, inotify_watches, multipart, rss_kib, Resp, Server, TOKEN};
use serde_json::json;

/// A request with `token` as its bearer.
fn with_token(s: &Server, token: &str, method: &str, target: &str, body: &[u8], extra: &[(&str, &str)]) -> Resp {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    headers.extend_from_slice(extra);
    http::request(s.addr, method, target, &headers, body)
}

const MCP_ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");

fn mcp_initialize(s: &Server, token: &str, target: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}});
    let r = with_token(s, token, "POST", target, body.to_string().as_bytes(), &[MCP_ACCEPT]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("mcp-session-id").expect("an MCP session").to_string()
}

fn mcp_list(s: &Server, token: &str, target: &str, sid: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let extra = [MCP_ACCEPT, ("Mcp-Session-Id", sid), ("MCP-Protocol-Version", "2025-06-18")];
    with_token(s, token, "POST", target, body.to_string().as_bytes(), &extra).status
}

/// Every `initialize` opens an MCP session: a session's token keeps only its last few (the
/// oldest is closed), thousands of them leave the server's memory where it was, and the trove
/// session's end closes the rest.
#[test]
fn mcp_sessions_of_one_session_are_capped_and_end_with_it() {
    let (s, log) = http::start_logging(&["--log-level", "info"]);
    let (id, token) = s.session_with_token(r#"{"workspace": "m"}"#);
    let sids: Vec<String> = (0..40).map(|_| mcp_initialize(&s, &token, "/v1/mcp")).collect();
    assert_eq!(mcp_list(&s, &token, "/v1/mcp", &sids[0]), 404, "the oldest was closed to make room");
    for sid in &sids[32..] {
        assert_eq!(mcp_list(&s, &token, "/v1/mcp", sid), 200, "the newest 8 stay");
    }
    let before = rss_kib(s.pid());
    for _ in 0..2000 {
        mcp_initialize(&s, &token, "/v1/mcp");
    }
    let grown = rss_kib(s.pid()).saturating_sub(before);
    assert!(grown < 40 << 10, "2,000 initializes grew the server by {grown} KiB");

    // The operator's MCP sessions of the trove session close with it.
    let target = format!("/v1/sessions/{id}/mcp");
    let kept = mcp_initialize(&s, TOKEN, &target);
    assert_eq!(mcp_list(&s, TOKEN, &target, &kept), 200);
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{id}"), "").status, 204);
    assert_eq!(mcp_list(&s, TOKEN, &target, &kept), 404, "closed when its session ended");
    // Thousands of MCP sessions opened and closed leave the log at INFO as it was.
    let text = std::fs::read_to_string(&log).expect("log");
    let lines = text.lines().count();
    assert!(lines < 50, "{lines} lines logged, e.g. {:?}", text.lines().rev().take(3).collect::<Vec<_>>());
}

/// Requests without a valid token (an operator's or a session's) are audited, a flood of them
/// as its first few and one summary that counts the rest by route.
#[test]
fn a_flood_of_failed_logins_adds_a_few_audit_records_and_a_summary() {
    let s = http::start(Some(TOKEN), &["--refusal-interval", "2s"]);
    for _ in 0..1000 {
        assert_eq!(http::request(s.addr, "GET", "/v1/sessions", &[], b"").status, 401);
    }
    for target in ["/v1/file/read", "/v1/mcp"] {
        for _ in 0..50 {
            let r = with_token(&s, "trs_not-a-session-token", "POST", target, b"{}", &[MCP_ACCEPT]);
            assert_eq!(r.status, 401, "{}", r.text());
        }
    }
    let auth =
        || s.get("/v1/audit?operation=auth&limit=1000").json()["records"].as_array().cloned().unwrap_or_default();
    assert!(eventually(20, || auth().iter().any(|r| r["details"]["reason"] == "summary")), "{:?}", auth());
    let records = auth();
    assert_eq!(records.len(), 11, "ten one by one and a summary: {records:?}");
    let summary = records.iter().find(|r| r["details"]["reason"] == "summary").expect("summary");
    assert_eq!(summary["details"]["suppressed"], 1090, "{summary}");
    let routes: Vec<&str> =
        summary["details"]["byRoute"].as_array().expect("routes").iter().filter_map(|r| r["route"].as_str()).collect();
    assert!(routes.contains(&"/v1/file/read") && routes.contains(&"/v1/mcp"), "session-token failures: {routes:?}");
}

/// A directory chain whose paths are about 3.5 KB long, below `root`.
fn deep_dir(root: &std::path::Path) -> std::path::PathBuf {
    let mut dir = root.to_path_buf();
    for i in 0..17 {
        dir = dir.join(format!("{i:02}{}", "d".repeat(198)));
    }
    std::fs::create_dir_all(&dir).expect("deep dirs");
    dir
}

/// Sixteen recursive watchers and thousands of events with kilobyte paths: the events they
/// hold are bounded in bytes (the oldest dropped, `overflow` said), not only in count.
#[test]
fn watchers_hold_a_bounded_number_of_bytes_whatever_their_paths() {
    let s = http::start(Some(TOKEN), &[]);
    let (_, token) = s.session_with_token(r#"{"workspace": "w"}"#);
    let deep = deep_dir(&s.workspace("w"));
    let watchers: Vec<String> = (0..16)
        .map(|_| {
            let r = with_token(&s, &token, "POST", "/v1/file/watch", br#"{"path": ""}"#, &[]);
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["data"]["watcher_id"].as_str().expect("id").to_string()
        })
        .collect();
    let before = rss_kib(s.pid());
    for i in 0..4000 {
        std::fs::File::create(deep.join(format!("f{i}"))).expect("create");
    }
    std::thread::sleep(Duration::from_secs(3));
    let grown = rss_kib(s.pid()).saturating_sub(before);
    assert!(grown < 96 << 10, "16 watchers grew the server by {grown} KiB");
    let poll =
        with_token(&s, &token, "POST", &format!("/v1/file/watch/{}/poll", watchers[0]), br#"{"limit": 1000}"#, &[]);
    assert_eq!(poll.status, 200, "{}", poll.text());
    let v = poll.json();
    let overflow = v["overflow"].as_bool().or(v["data"]["overflow"].as_bool());
    assert_eq!(overflow, Some(true), "events were dropped for room, and the poll says so: {}", poll.text());
}

/// One session's watchers may hold only their share of the server's inotify watches: a tree
/// with more directories is refused, naming the limit, and other sessions' watchers still work.
#[test]
fn one_sessions_watchers_cannot_take_every_inotify_watch() {
    let s = http::start(Some(TOKEN), &["--session-watches", "100"]);
    let (_, greedy) = s.session_with_token(r#"{"workspace": "big"}"#);
    for i in 0..30 {
        for j in 0..5 {
            std::fs::create_dir_all(s.workspace("big").join(format!("a{i}/b{j}"))).expect("dirs");
        }
    }
    let r = with_token(&s, &greedy, "POST", "/v1/file/watch", br#"{"path": ""}"#, &[]);
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("100 directories")), "{}", r.text());
    assert_eq!(inotify_watches(s.pid()), 0, "a refused watcher gives back what it took");
    let r = with_token(&s, &greedy, "POST", "/v1/file/watch", br#"{"path": "", "recursive": false}"#, &[]);
    assert_eq!(r.status, 201, "one directory is within the share: {}", r.text());

    let (_, other) = s.session_with_token(r#"{"workspace": "small"}"#);
    for i in 0..10 {
        std::fs::create_dir_all(s.workspace("small").join(format!("d{i}"))).expect("dirs");
    }
    let r = with_token(&s, &other, "POST", "/v1/file/watch", br#"{"path": ""}"#, &[]);
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(inotify_watches(s.pid()), 1 + 11);
}

/// Starts an upload on a new connection and sends its head and the start of its body: the
/// rest is for the caller to trickle.
fn start_upload(s: &Server, token: &str, path: &str) -> TcpStream {
    let (ctype, body) = multipart(&[("path", None, path.as_bytes()), ("file", Some("f"), &[b'x'; 100_000])]);
    let mut c = TcpStream::connect(s.addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let head = format!(
        "POST /v1/file/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).expect("head");
    c.write_all(&body[..300]).expect("the start of the body");
    c
}

/// Sends a byte every 2 s until the server answers, looking for the answer every 50 ms so
/// that no test waits a whole beat for an answer already sent; its answer.
fn trickle(mut c: TcpStream) -> Resp {
    c.set_nonblocking(true).expect("nonblocking");
    let mut raw = Vec::new();
    let started = Instant::now();
    let mut next_byte = started + Duration::from_secs(2);
    while started.elapsed() < Duration::from_secs(120) {
        let mut buf = [0u8; 4096];
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    std::thread::sleep(Duration::from_millis(200));
                    if let Ok(n) = c.read(&mut buf) {
                        raw.extend_from_slice(&buf[..n]);
                    }
                    break;
                }
            }
            Err(_) => {}
        }
        if Instant::now() >= next_byte {
            let _ = c.write_all(b"x");
            next_byte += Duration::from_secs(2);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    http::parse(&raw)
}

/// Uploads that trickle a byte at a time: a session may hold only its share of requests, the
/// operator and `/healthz` are answered at once while every ordinary connection is busy, and
/// the trickles are cut off (408) with nothing written.
#[test]
fn slow_uploads_are_cut_off_and_never_lock_out_the_operator() {
    let (s, log) = http::start_logging(&[
        "--max-connections",
        "6",
        "--reserved-connections",
        "4",
        "--session-requests",
        "3",
        "--log-level",
        "info,trove::server::upload=debug,trove::server::connections=debug",
    ]);
    let (_, a) = s.session_with_token(r#"{"workspace": "a"}"#);
    let (_, b) = s.session_with_token(r#"{"workspace": "b"}"#);
    let (_, c) = s.session_with_token(r#"{"workspace": "c"}"#);
    let mut slow = Vec::new();
    for token in [&a, &b] {
        for i in 0..3 {
            slow.push(start_upload(&s, token, &format!("slow{i}.bin")));
        }
    }
    // No request can ask whether the server has taken the six in yet: any probe at the limit
    // would close one of them that is still idle (its head not yet read) to make room. Its log
    // says so instead, once each upload's head is read and its handler holds its share (a
    // fixed wait of 2 s was not always enough on a loaded machine).
    let receiving = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.matches("an upload is being received").count()
    };
    assert!(http::eventually(30, || receiving() >= 6), "the six uploads were never all taken in: {}", receiving());
    // A fourth upload of `a` is over its share: refused at once.
    let refused = trickle(start_upload(&s, &a, "fourth.bin"));
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.json()["kind"], "busy");
    // Every ordinary connection is busy: the operator and /healthz still get in...
    let r = s.get("/v1/sessions");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(s.get("/healthz").status, 200);
    // ...and another session's request does not take the operator's reserve.
    let r = with_token(&s, &c, "POST", "/v1/file/list", br#"{"path": ""}"#, &[]);
    assert_eq!(r.status, 503, "{}\n{}", r.text(), std::fs::read_to_string(&log).unwrap_or_default());
    let answers: Vec<Resp> =
        slow.into_iter().map(|c| std::thread::spawn(move || trickle(c))).map(|t| t.join().expect("join")).collect();
    for r in &answers {
        assert_eq!(r.status, 408, "{}", r.text());
        assert_eq!(r.header("connection"), Some("close"));
    }
    for ws in ["a", "b"] {
        let left: Vec<_> = std::fs::read_dir(s.workspace(ws)).expect("ws").flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "nothing written, no temporary left in {ws}: {left:?}");
    }
}

/// At the common soft limit of 1,024 descriptors and the default connection limit, 1,500 idle
/// sockets do not starve a request: the limit stays under the descriptors the server has.
#[test]
fn idle_sockets_at_the_default_limits_never_starve_a_request() {
    use rustix::process::{getrlimit, prlimit, setrlimit, Pid, Resource, Rlimit};
    let mut mine = getrlimit(Resource::Nofile);
    mine.current = mine.maximum;
    let _ = setrlimit(Resource::Nofile, mine);
    let s = http::start(Some(TOKEN), &["--header-timeout", "60s", "--keepalive-timeout", "60s"]);
    let pid = Pid::from_raw(s.pid()).expect("pid");
    let maximum = getrlimit(Resource::Nofile).maximum;
    prlimit(Some(pid), Resource::Nofile, Rlimit { current: Some(1024), maximum }).expect("lower the limit");
    // The idle sockets connect from a thread of their own: on a server that stops accepting,
    // their connects wait in the kernel's backlog, as the request's would.
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (count, addr) = (opened.clone(), s.addr);
    let (stop, held) = std::sync::mpsc::channel::<()>();
    let idle = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for _ in 0..1500 {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(90)) {
                Ok(c) => kept.push(c),
                Err(_) => break,
            }
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let _ = held.recv();
        drop(kept);
    });
    eventually(20, || opened.load(std::sync::atomic::Ordering::Relaxed) >= 1500);
    // Answered while the idle sockets stay open (they would time out only after 60 s).
    let auth = format!("Bearer {TOKEN}");
    let r = answered_within(&s, "GET", "/v1/sessions", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(answered_within(&s, "GET", "/healthz", &[], b"").status, 200);
    let r = answered_within(&s, "POST", "/v1/sessions", &[("Authorization", &auth)], br#"{"workspace": "fd"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
    let auth = format!("Bearer {}", r.json()["session_token"].as_str().expect("token"));
    let r = answered_within(&s, "POST", "/v1/file/list", &[("Authorization", &auth)], br#"{"path": ""}"#);
    assert_eq!(r.status, 200, "a session's request too: {}", r.text());
    drop(stop);
    idle.join().expect("idle sockets");
}

/// One request on a new connection, whose answer must come within 10 s (a read timeout, not a
/// measurement: a starved request would wait for idle sockets' 60 s timeouts).
fn answered_within(s: &Server, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut c = TcpStream::connect_timeout(&s.addr, Duration::from_secs(10)).expect("connected within 10 s");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    http::send(&mut c, method, target, headers, body);
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).expect("answered within 10 s");
    http::parse(&raw)
}

/// `trove serve` runs with glibc malloc's settings for a process that lives for weeks (fewer
/// arenas, large blocks unmapped when freed: `cli/allocator.rs`): started without them it starts
/// itself again with them, keeping its process id. A user's own malloc settings are left alone.
#[cfg(target_env = "gnu")]
#[test]
fn the_server_runs_with_the_allocators_settings_unless_the_user_chose_their_own() {
    let environ = |pid: i32| std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let has = |env: &[u8], var: &str| env.split(|b| *b == 0).any(|e| e.starts_with(var.as_bytes()));
    let server = http::start(Some(TOKEN), &[]);
    let env = environ(server.pid());
    assert!(
        has(&env, "TROVE_MALLOC_TUNED=1") && has(&env, "GLIBC_TUNABLES=glibc.malloc.arena_max="),
        "{}",
        String::from_utf8_lossy(&env)
    );
    assert_eq!(server.get("/healthz").status, 200);

    let dir = tempfile::tempdir().expect("tmp");
    let out = common::trove(&dir.path().join("repo"), &["init"]);
    assert!(out.status.success(), "init: {}", common::stderr(&out));
    let own = http::start_env(dir, Some(TOKEN), &[], &[("MALLOC_ARENA_MAX", "2")]);
    let env = environ(own.pid());
    assert!(!has(&env, "TROVE_MALLOC_TUNED") && !has(&env, "GLIBC_TUNABLES"), "{}", String::from_utf8_lossy(&env));
    assert_eq!(own.get("/healthz").status, 200);
}
