//! The upload route (`POST /v1/file/upload`, multipart/form-data) on arbitrary bodies, through
//! the server's whole app in process, as a session's client would call it: never a panic or an
//! internal error, and nothing of an upload that did not land stays in the workspace (no
//! temporary of trove's, no record of one).
#![no_main]

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower_service::Service;

const TOKEN: &str = "fuzz-token-0123456789";

struct Harness {
    rt: tokio::runtime::Runtime,
    app: Mutex<axum::Router>,
    session_token: String,
    workspace: PathBuf,
    _dir: tempfile::TempDir,
}

fn call(h: &Harness, req: Request<Body>) -> (StatusCode, Vec<u8>) {
    let mut app = h.app.lock().unwrap_or_else(|p| p.into_inner()).clone();
    h.rt.block_on(async move {
        let resp = app.call(req).await.expect("the router is infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("a body");
        (status, body.to_vec())
    })
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp");
        let repo = dir.path().join("repo");
        trove::Repo::init(&repo, "fuzz").expect("init");
        let workspaces = dir.path().join("workspaces");
        let token = (trove::tokens::hash_token(TOKEN), trove::TokenId::parse("env").expect("id"));
        let opts = trove::server::ServeOptions::new(repo, workspaces.clone(), vec![token]);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
        let app = { let _g = rt.enter(); trove::server::app_for_tests(opts).expect("app") };
        let mut h = Harness {
            rt,
            app: Mutex::new(app),
            session_token: String::new(),
            workspace: workspaces.join("fuzz"),
            _dir: dir,
        };
        let req = Request::post("/v1/sessions")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"workspace": "fuzz", "persistent": true}"#))
            .expect("request");
        let (status, body) = call(&h, req);
        assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        h.session_token = v["session_token"].as_str().expect("token").to_string();
        h
    })
}

fuzz_target!(|data: &[u8]| {
    let h = harness();
    // The first byte picks the content type's boundary parameter, the rest is the body.
    let (ctype, body) = match data.split_first() {
        Some((b, rest)) if b % 4 == 0 => ("multipart/form-data".to_string(), rest),
        Some((b, rest)) if b % 4 == 1 => ("multipart/form-data; boundary=\"B\"".to_string(), rest),
        Some((_, rest)) => ("multipart/form-data; boundary=B".to_string(), rest),
        None => ("multipart/form-data; boundary=B".to_string(), &data[..0]),
    };
    let req = Request::post("/v1/file/upload")
        .header(header::AUTHORIZATION, format!("Bearer {}", h.session_token))
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body.to_vec()))
        .expect("request");
    let (status, answer) = call(h, req);
    assert!(!status.is_server_error(), "{status}: {}", String::from_utf8_lossy(&answer));
    for e in std::fs::read_dir(&h.workspace).into_iter().flatten().flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        assert!(!(name.starts_with(".trove-up-") && name.ends_with(".tmp")), "a temporary left: {name}");
    }
});
