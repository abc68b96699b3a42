//! A running `trove serve` on an ephemeral loopback port, and a raw HTTP/1.1 client for it. The
//! client writes the request target byte for byte: library clients normalize `..`, `%2e%2e` and
//! `//` away, and those are exactly what the traversal tests must send.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::trove_bin;

pub const TOKEN: &str = "test-token-0123456789";

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub repo: PathBuf,
    pub workspaces: PathBuf,
    /// Lines printed before the address (a created token).
    pub banner: Vec<String>,
    pub dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `trove serve` on a fresh repository with `TOKEN` (or no token when `token` is None).
pub fn start(token: Option<&str>, extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("tmp");
    let repo = dir.path().join("repo");
    let out = super::trove(&repo, &["init"]);
    assert!(out.status.success(), "init: {}", super::stderr(&out));
    start_on(dir, token, extra)
}

/// Starts `trove serve` on the repository in `dir/repo`.
pub fn start_on(dir: tempfile::TempDir, token: Option<&str>, extra: &[&str]) -> Server {
    start_env(dir, token, extra, &[])
}

/// Starts `trove serve` on the repository in `dir/repo` with more environment variables (for
/// this server only: the test process's own environment is shared by every test).
pub fn start_env(dir: tempfile::TempDir, token: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Server {
    spawn(dir, token, extra, env, Stdio::inherit())
}

/// Starts `trove serve` on a fresh repository with `TOKEN`, its log (stderr) going to the file
/// returned, for tests of what it logs.
pub fn start_logging(extra: &[&str]) -> (Server, PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let out = super::trove(&dir.path().join("repo"), &["init"]);
    assert!(out.status.success(), "init: {}", super::stderr(&out));
    let log = dir.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    (spawn(dir, Some(TOKEN), extra, &[], Stdio::from(file)), log)
}

fn spawn(dir: tempfile::TempDir, token: Option<&str>, extra: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Server {
    let repo = dir.path().join("repo");
    spawn_at(dir, repo, token, extra, env, stderr)
}

/// Starts `trove serve` on the repository `repo` (a directory, or `s3://...` given its
/// settings in `env`), its workspaces under `dir`, with `extra` arguments.
pub fn start_at(
    dir: tempfile::TempDir,
    repo: &str,
    token: Option<&str>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Server {
    spawn_at(dir, PathBuf::from(repo), token, extra, env, Stdio::inherit())
}

fn spawn_at(
    dir: tempfile::TempDir,
    repo: PathBuf,
    token: Option<&str>,
    extra: &[&str],
    env: &[(&str, &str)],
    stderr: Stdio,
) -> Server {
    let workspaces = dir.path().join("workspaces");
    let mut cmd = Command::new(trove_bin());
    cmd.arg("--repo").arg(&repo).arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--workspaces").arg(&workspaces);
    cmd.args(extra).env_remove("TROVE_REPO").envs(env.iter().copied()).stdout(Stdio::piped()).stderr(stderr);
    match token {
        Some(t) => cmd.env("TROVE_API_TOKEN", t),
        None => cmd.env_remove("TROVE_API_TOKEN"),
    };
    let mut child = cmd.spawn().expect("spawn trove serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut banner = Vec::new();
    let addr = loop {
        let mut line = String::new();
        assert!(lines.read_line(&mut line).expect("read banner") > 0, "trove serve exited: {banner:?}");
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split_whitespace().next().expect("address").parse().expect("socket address");
        }
        banner.push(line.trim().to_string());
    };
    Server { child, addr, repo, workspaces, banner, dir }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body ended short of its Content-Length: the server cut the transfer.
    pub cut: bool,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Server {
    /// A request with the test token.
    pub fn call(&self, method: &str, target: &str, body: &str) -> Resp {
        let auth = format!("Bearer {TOKEN}");
        request(self.addr, method, target, &[("Authorization", &auth)], body.as_bytes())
    }

    pub fn get(&self, target: &str) -> Resp {
        self.call("GET", target, "")
    }

    /// Creates a session from a JSON body and returns its id.
    pub fn session(&self, body: &str) -> String {
        let r = self.call("POST", "/v1/sessions", body);
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["id"].as_str().expect("id").to_string()
    }

    pub fn workspace(&self, name: &str) -> PathBuf {
        self.workspaces.join(name)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// A review pages' login cookie (`name=value`) for `token`, as the login form gets it.
pub fn ui_login(addr: SocketAddr, token: &str) -> String {
    let body = format!("token={token}");
    let login =
        request(addr, "POST", "/ui/login", &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes());
    assert_eq!(login.status, 303, "{}", login.text());
    login.header("set-cookie").and_then(|c| c.split(';').next()).expect("a login cookie").to_string()
}

/// Sends one request on a new connection and reads the whole response.
pub fn request(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    send(&mut s, method, target, headers, body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    parse(&raw)
}

pub fn send(s: &mut TcpStream, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n").into_bytes();
    for (k, v) in headers {
        req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    req.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    req.extend_from_slice(body);
    s.write_all(&req).expect("send request");
}

/// Parses a complete response (status line, headers, a Content-Length or chunked body).
pub fn parse(raw: &[u8]) -> Resp {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("status line");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))).collect();
    let rest = &raw[end + 4..];
    let chunked = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    let length =
        headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.parse().ok());
    let cut = length.is_some_and(|n: usize| body.len() < n);
    Resp { status, headers, body, cut }
}

/// Decodes a chunked body; panics on a body cut short (no final zero-size chunk).
pub fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").expect("chunk size line: body cut short");
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).expect("hex").trim(), 16).expect("size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body;
        }
        assert!(rest.len() >= size + 2, "chunk cut short");
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Polls `f` every 50 ms for up to `secs` seconds.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn write(path: &Path, data: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).expect("mkdir");
    }
    std::fs::write(path, data).expect("write");
}

/// A thread appending to `path` without pause until the returned flag is set: every read of
/// the file overlaps a change.
pub fn appender(path: &Path) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, path) = (stop.clone(), path.to_path_buf());
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            f.write_all(b"x").expect("append");
        }
    });
    (stop, writer)
}

/// The resident memory of process `pid`, in KiB (`VmRSS`).
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// The inotify watches process `pid` holds now, over all its inotify descriptors.
pub fn inotify_watches(pid: i32) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).expect("fdinfo").flatten() {
        if let Ok(info) = std::fs::read_to_string(e.path()) {
            n += info.lines().filter(|l| l.starts_with("inotify wd:")).count();
        }
    }
    n
}

/// A `multipart/form-data` body of `parts` (name, file name, bytes) and its content type.
pub fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "trove-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, filename, data) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match filename {
            Some(f) => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n").as_bytes(),
            ),
            None => body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes()),
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

impl Server {
    /// Creates a session from a JSON body; its id and session token.
    pub fn session_with_token(&self, body: &str) -> (String, String) {
        let r = self.call("POST", "/v1/sessions", body);
        assert_eq!(r.status, 201, "{}", r.text());
        let v = r.json();
        (v["id"].as_str().expect("id").to_string(), v["session_token"].as_str().expect("session token").to_string())
    }
}
