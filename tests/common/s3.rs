//! A real S3 server for the tests: moto's, from PyPI, installed once into a virtualenv under
//! `target/` and started once per test binary on a free port; and a proxy in front of it that
//! fails, drops or slows chosen requests.
//!
//! The server runs until this process ends: its Python wrapper exits when its standard input,
//! held open here, reaches end of file, so no server outlives a test run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const MOTO: &str = "5.2.5";

/// The running server: its address, and the process with its held-open input.
pub struct S3Server {
    pub addr: SocketAddr,
    _child: Mutex<(Child, ChildStdin)>,
}

/// The Python of the virtualenv holding moto (and boto3, which the tests' own S3 readers use).
pub fn python() -> PathBuf {
    venv().join("bin/python")
}

/// The virtualenv holding moto, installed under `target/` if missing.
fn venv() -> PathBuf {
    super::python_venv(&format!("moto-{MOTO}"), &format!("moto[server]=={MOTO}"))
}

/// The server's launcher, shared with the benchmarks' (`benches/moto.sh`): moto with its
/// conditional create made atomic (see the file).
const WRAPPER: &str = include_str!("../moto_server.py");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The test binary's S3 server, started on first use.
pub fn server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let venv = venv();
        let port = free_port();
        let mut child = Command::new(venv.join("bin/python"))
            .arg("-c")
            .arg(WRAPPER)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("moto's first line");
        assert_eq!(line.trim(), "ready", "moto did not start");
        S3Server { addr: SocketAddr::from(([127, 0, 0, 1], port)), _child: Mutex::new((child, stdin)) }
    })
}

/// Makes bucket `name` on the server at `addr` (moto takes an unsigned request for it).
pub fn make_bucket(addr: SocketAddr, name: &str) {
    let mut s = TcpStream::connect(addr).expect("connect to moto");
    write!(s, "PUT /{name} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "creating bucket {name}: {answer}");
}

/// A fresh bucket name: each test works in its own.
pub fn fresh_bucket(addr: SocketAddr) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!("t{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    make_bucket(addr, &name);
    name
}

/// The settings that reach the S3 server at `endpoint` with test credentials.
pub fn settings(endpoint: SocketAddr) -> trove::object::S3Settings {
    let config = [
        ("aws_endpoint", format!("http://{endpoint}")),
        ("aws_allow_http", "true".into()),
        ("aws_access_key_id", "test".into()),
        ("aws_secret_access_key", "test".into()),
        ("aws_region", "us-east-1".into()),
    ];
    trove::object::S3Settings {
        config: config.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        ..Default::default()
    }
}

/// What the proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Passes it on and returns the answer.
    Forward,
    /// Answers 503 Service Unavailable without passing it on.
    Unavailable,
    /// Passes it on, then closes the connection without returning the answer: a lost answer.
    LoseAnswer,
    /// Waits, then passes it on.
    Delay(Duration),
    /// Passes a listing on and leaves out of its answer every key this proxy saw created less
    /// than this long ago: a listing that lags behind writes.
    Lag(Duration),
}

/// The policy: from the request's number (from 0), method and path, what to do.
pub type Policy = Arc<dyn Fn(usize, &str, &str) -> Action + Send + Sync>;

/// The requests a proxy saw, in order: method, path, and what it did.
pub type Seen = Arc<Mutex<Vec<(String, String, Action)>>>;

/// A proxy in front of `upstream` that applies `policy` to each request (one per connection:
/// every answer closes its connection); returns its address and the log of requests seen
/// (method, path, action).
pub fn proxy(upstream: SocketAddr, policy: Policy) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = listener.local_addr().expect("addr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let count = Arc::new(AtomicUsize::new(0));
    let created = Created::default();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (policy, seen, count, created) = (policy.clone(), seen.clone(), count.clone(), created.clone());
            std::thread::spawn(move || serve(conn, upstream, &*policy, &seen, &count, &created));
        }
    });
    (addr, log)
}

/// How many listed keys every lagging proxy of this test binary has left out so far.
pub static HIDDEN: AtomicUsize = AtomicUsize::new(0);

/// When the proxy saw each key created (a `PUT` answered 200), by key within its bucket.
type Created = Arc<Mutex<std::collections::HashMap<String, std::time::Instant>>>;

/// A listing's answer without the `<Contents>` of keys created within `lag`, its
/// `Content-Length` made to match.
fn lagging(answer: Vec<u8>, created: &Created, lag: Duration) -> Vec<u8> {
    let Some(split) = answer.windows(4).position(|w| w == b"\r\n\r\n") else { return answer };
    let (head, body) = (String::from_utf8_lossy(&answer[..split]).to_string(), &answer[split + 4..]);
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        panic!("a chunked listing: the lagging proxy reads only a listing with a Content-Length");
    }
    let body = String::from_utf8_lossy(body).to_string();
    let created = created.lock().expect("created");
    let mut out = String::new();
    let mut rest = body.as_str();
    while let Some(start) = rest.find("<Contents>") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("</Contents>").map_or(rest.len(), |e| start + e + "</Contents>".len());
        let entry = &rest[start..end];
        let key = entry.split("<Key>").nth(1).and_then(|k| k.split("</Key>").next()).unwrap_or_default();
        if created.get(key).is_none_or(|at| at.elapsed() >= lag) {
            out.push_str(entry);
        } else {
            HIDDEN.fetch_add(1, Ordering::SeqCst);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    let head: Vec<String> = head
        .split("\r\n")
        .map(|l| {
            if l.to_ascii_lowercase().starts_with("content-length:") {
                format!("Content-Length: {}", out.len())
            } else {
                l.to_owned()
            }
        })
        .collect();
    let mut bytes = head.join("\r\n").into_bytes();
    bytes.extend_from_slice(b"\r\n\r\n");
    bytes.extend_from_slice(out.as_bytes());
    bytes
}

fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    policy: &(dyn Fn(usize, &str, &str) -> Action + Send + Sync),
    seen: &Mutex<Vec<(String, String, Action)>>,
    count: &AtomicUsize,
    created: &Created,
) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    // The request: its head up to the blank line, then Content-Length bytes of body.
    let mut request = Vec::new();
    let mut byte = [0u8; 1];
    while !request.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => request.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&request).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if client.read_exact(&mut body).is_err() {
        return;
    }
    request.extend_from_slice(&body);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or("").to_owned(), words.next().unwrap_or("").to_owned());
    let action = policy(count.fetch_add(1, Ordering::SeqCst), &method, &path);
    let key = path.split('?').next().unwrap_or_default().trim_start_matches('/');
    let key = key.split_once('/').map(|(_bucket, key)| key.to_owned()).unwrap_or_default();
    let creates = method == "PUT" && !key.is_empty();
    seen.lock().expect("log").push((method, path, action));
    match action {
        Action::Unavailable => {
            let body = "<Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return;
        }
        Action::Delay(d) => std::thread::sleep(d),
        Action::Forward | Action::LoseAnswer | Action::Lag(_) => {}
    }
    let Ok(mut up) = TcpStream::connect(upstream) else { return };
    // One request per connection upstream too, so its answer ends where the connection does.
    let text = String::from_utf8_lossy(&request[..request.len() - length])
        .replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let text = text.replace("connection: keep-alive\r\n", "");
    if up.write_all(text.as_bytes()).and_then(|()| up.write_all(&body)).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer);
    if creates && answer.starts_with(b"HTTP/1.1 200") {
        created.lock().expect("created").insert(key, std::time::Instant::now());
    }
    if let Action::Lag(lag) = action {
        answer = lagging(answer, created, lag);
    }
    if action == Action::LoseAnswer {
        return; // dropped: the client sees its connection close with no answer
    }
    // The answer closes the connection, whatever the server said, so the client never sends
    // a second request on it.
    if let Some(end) = answer.windows(2).position(|w| w == b"\r\n") {
        let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(answer.len());
        let head = String::from_utf8_lossy(&answer[..head_end]).to_ascii_lowercase();
        if !head.contains("\r\nconnection: close") {
            answer.splice(end + 2..end + 2, b"Connection: close\r\n".iter().copied());
        }
    }
    let _ = client.write_all(&answer);
}

/// `trove` with `args` on the bucket repository `repo` (the S3 server at `s3`), as the host
/// whose cache directory is `cache`, with the passphrase the tests use.
pub fn trove_on(s3: std::net::SocketAddr, repo: &str, cache: &std::path::Path, args: &[&str]) -> std::process::Output {
    trove_cmd(s3, repo, cache, args).output().expect("run trove")
}

/// `trove` as node `node` of a fleet's bucket (its cache directory `cache`).
pub fn as_node(
    s3: std::net::SocketAddr,
    repo: &str,
    node: &str,
    cache: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    let mut all = vec!["--node", node];
    all.extend_from_slice(args);
    trove_on(s3, repo, cache, &all)
}

/// The command [`trove_on`] runs.
pub fn trove_cmd(
    s3: std::net::SocketAddr,
    repo: &str,
    cache: &std::path::Path,
    args: &[&str],
) -> std::process::Command {
    let mut c = std::process::Command::new(super::trove_bin());
    c.args(["--repo", repo])
        .args(args)
        .env_remove("TROVE_REPO")
        .env_remove("TROVE_LOG")
        .env_remove("TROVE_PASSWORD_FILE")
        .env("TROVE_PASSWORD", "correct horse battery staple")
        .env("TROVE_CACHE_DIR", cache)
        .env("AWS_ENDPOINT_URL", format!("http://{s3}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1");
    c
}

/// How node `node` of a fleet opens the bucket on the S3 server at `s3`, its cache directory
/// `cache`, with the passphrase the tests use (and a cheap stretch for any key file it makes).
pub fn node_access(s3: std::net::SocketAddr, cache: &std::path::Path, node: &str) -> trove::BucketAccess {
    trove::BucketAccess {
        password: Some("correct horse battery staple".into()),
        cache_base: Some(cache.to_path_buf()),
        settings: settings(s3),
        stretch: Some(trove::object::Stretch { memory_kib: 1024, iterations: 1, parallelism: 1 }),
        node: Some(trove::NodeName::parse(node).expect("a node's name")),
        ..Default::default()
    }
}

/// The standard output of `o`, which must have succeeded (`what` names it otherwise).
pub fn ok(o: std::process::Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {}\n{}", super::stderr(&o), super::stdout(&o));
    super::stdout(&o)
}

/// `trove serve` of the bucket repository `repo` on a host of its own (a temporary directory,
/// its cache directory in it), with `extra` arguments.
pub fn serve_on(s3: std::net::SocketAddr, repo: &str, extra: &[&str]) -> super::http::Server {
    let host = tempfile::tempdir().expect("host");
    let cache = host.path().join("cache");
    let endpoint = format!("http://{s3}");
    let env = [
        ("TROVE_PASSWORD", "correct horse battery staple"),
        ("TROVE_CACHE_DIR", cache.to_str().expect("utf-8")),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ];
    super::http::start_at(host, repo, Some(super::http::TOKEN), extra, &env)
}
