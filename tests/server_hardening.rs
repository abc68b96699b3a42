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
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    let s = http::start_on(dir, Some(TOKEN), extra);
    for (k, _) in env {
        std::env::remove_var(k);
    }
    s
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
