//! The sandbox file API (`../shared/seeds/sandbox-file-operations.md`), walked section by section
//! against a running server, one test per documented behaviour, named after it; then what trove
//! adds (session tokens, the sandbox root, scope, pre-images, `require_sha256`).

mod common;

use base64::Engine;
use common::http::{self, multipart, sha256_hex, write, Resp, Server, TOKEN};
use serde_json::{json, Value};

/// A session on workspace `ws` created with `extra` fields; its id and session token.
fn session(s: &Server, ws: &str, extra: Value) -> (String, String) {
    let mut body = json!({"workspace": ws});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let r = s.call("POST", "/v1/sessions", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let token = v["session_token"].as_str().expect("a session token in the creation answer").to_string();
    (v["id"].as_str().expect("id").to_string(), token)
}

/// `POST /v1/file/{op}` with the session token.
fn op(s: &Server, token: &str, name: &str, body: Value) -> Resp {
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    http::request(s.addr, "POST", &format!("/v1/file/{name}"), &headers, body.to_string().as_bytes())
}

/// The answer of an operation that must succeed: its `data`.
fn ok(r: Resp) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["success"], true, "{v}");
    v["data"].clone()
}

/// The answer of an operation that must fail as expected (200, `success: false`): its `data`.
fn failed(r: Resp) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(v["message"], v["data"]["message"]);
    v["data"].clone()
}

/// A server and one session with a small tree: `src/app.py`, `src/util.ts`, `notes.txt`,
/// `.hidden/secret.json`, `data/a.json`, `node_modules/x/index.json`.
fn fixture() -> (Server, String, String) {
    let s = http::start(Some(TOKEN), &[]);
    let (id, token) = session(&s, "proj", json!({}));
    let ws = s.workspace("proj");
    write(&ws.join("src/app.py"), b"import os\n# TODO: tidy\nprint('hello')\n");
    write(&ws.join("src/util.ts"), b"export const x = 1; // todo later\n");
    write(&ws.join("notes.txt"), b"line 0\nline 1\nline 2\nline 3\n");
    write(&ws.join(".hidden/secret.json"), b"{}\n");
    write(&ws.join("data/a.json"), b"{\"a\": 1}\n");
    write(&ws.join("node_modules/x/index.json"), b"{\"TODO\": true}\n");
    (s, id, token)
}

fn upload(s: &Server, token: &str, target: &str, parts: &[(&str, Option<&str>, &[u8])]) -> Resp {
    let (ctype, body) = multipart(parts);
    let auth = format!("Bearer {token}");
    http::request(s.addr, "POST", target, &[("Authorization", &auth), ("Content-Type", &ctype)], &body)
}

fn download(s: &Server, token: &str, query: &str) -> Resp {
    let auth = format!("Bearer {token}");
    http::request(s.addr, "GET", &format!("/v1/file/download?{query}"), &[("Authorization", &auth)], b"")
}

// ---- Error Handling ------------------------------------------------------------------------

#[test]
fn expected_failures_answer_200_with_success_false_and_the_structured_error() {
    let (s, _, token) = fixture();
    let e = failed(op(&s, &token, "read", json!({"file": "/workspace/missing.txt"})));
    assert_eq!(e["path"], "/workspace/missing.txt");
    assert_eq!(e["operation"], "read");
    assert_eq!(e["error_type"], "not_found");
    assert_eq!(e["retryable"], false);
    assert_eq!(e["errno"], 2);
    assert_eq!(e["errno_name"], "ENOENT");
    assert_eq!(e["exception_type"], "FileNotFoundError");
    let message = e["message"].as_str().expect("message");
    assert!(
        message.starts_with("Failed to read file: [Errno 2] No such file or directory: '/workspace/missing.txt'"),
        "{message}"
    );
}

#[test]
fn common_error_types_are_reported_by_name() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    write(&ws.join("blob.bin"), &[0, 159, 146, 150, 0, 1]);
    let cases = [
        ("read", json!({"file": "src"}), "invalid_target", "EISDIR"),
        ("read", json!({"file": "blob.bin"}), "decode_error", "EILSEQ"),
        ("read", json!({"file": "../etc/passwd"}), "invalid_path", "EINVAL"),
        ("read", json!({"file": "/etc/passwd"}), "permission_denied", "EACCES"),
        ("write", json!({"file": "notes.txt", "content": "x", "expected_sha256": ""}), "stale_file", "ESTALE"),
        ("list", json!({"path": "nowhere"}), "not_found", "ENOENT"),
    ];
    for (name, body, error_type, errno_name) in cases {
        let e = failed(op(&s, &token, name, body.clone()));
        assert_eq!(
            (e["error_type"].as_str(), e["errno_name"].as_str()),
            (Some(error_type), Some(errno_name)),
            "{body}"
        );
        assert_eq!(e["operation"], name);
    }
    assert_eq!(std::fs::read(ws.join("notes.txt")).expect("kept"), b"line 0\nline 1\nline 2\nline 3\n");
    // The advice for a binary file is this route's own: read refuses an `encoding`.
    let e = failed(op(&s, &token, "read", json!({"file": "blob.bin"})));
    let advice = e["message"].as_str().expect("message");
    assert!(advice.contains("/v1/file/download") && !advice.contains("encoding"), "{advice}");
    let r = op(&s, &token, "read", json!({"file": "blob.bin", "encoding": "base64"}));
    assert_eq!(r.status, 400, "read takes no encoding, so it must not advise one: {}", r.text());
}

#[test]
fn a_malformed_request_is_an_http_400_in_the_same_wrapper() {
    let (s, _, token) = fixture();
    let r = op(&s, &token, "read", json!({"file": "notes.txt", "start_lines": 1}));
    assert_eq!(r.status, 400);
    let v = r.json();
    assert_eq!(v["success"], false);
    assert!(v["message"].as_str().is_some_and(|m| m.contains("start_lines")), "{v}");
    assert_eq!(v["data"]["path"], "notes.txt");
}

#[test]
fn download_uses_http_errors_instead_of_the_wrapper() {
    let (s, _, token) = fixture();
    let r = download(&s, &token, "path=/workspace/missing.bin");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["kind"], "not_found");
    assert_eq!(download(&s, &token, "path=/etc/passwd").status, 403);
    let r = http::request(s.addr, "GET", "/v1/file/download?path=notes.txt", &[], b"");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["kind"], "unauthorized", "plain HTTP errors, even for the token");
}

// ---- Read Files ----------------------------------------------------------------------------

#[test]
fn read_takes_a_0_based_line_range_with_end_line_exclusive() {
    let (s, _, token) = fixture();
    let d = ok(op(&s, &token, "read", json!({"file": "/workspace/notes.txt", "start_line": 1, "end_line": 3})));
    assert_eq!(d["content"], "line 1\nline 2\n");
    assert_eq!(d["line_count"], 2);
    assert_eq!(d["file"], "/workspace/notes.txt");
    let whole = ok(op(&s, &token, "read", json!({"file": "notes.txt"})));
    assert_eq!(whole["content"], "line 0\nline 1\nline 2\nline 3\n");
    assert_eq!(whole["line_count"], 4);
    assert_eq!(whole["file"], "notes.txt", "named as the request named it");
    let tail = ok(op(&s, &token, "read", json!({"file": "notes.txt", "start_line": 3})));
    assert_eq!(tail["content"], "line 3\n");
    let past = ok(op(&s, &token, "read", json!({"file": "notes.txt", "start_line": 10, "end_line": 20})));
    assert_eq!((past["content"].as_str(), past["line_count"].as_u64()), (Some(""), Some(0)));
    let huge = ok(op(&s, &token, "read", json!({"file": "notes.txt", "start_line": u64::MAX})));
    assert_eq!(huge["content"], "");
    let e = failed(op(&s, &token, "read", json!({"file": "notes.txt", "start_line": 3, "end_line": 1})));
    assert_eq!(e["error_type"], "invalid_target");
}

#[test]
fn read_answers_the_sha256_for_the_stale_file_protocol() {
    let (s, _, token) = fixture();
    let d = ok(op(&s, &token, "read", json!({"file": "notes.txt", "start_line": 0, "end_line": 1})));
    assert_eq!(d["sha256"], sha256_hex(b"line 0\nline 1\nline 2\nline 3\n"), "the whole file's");
    assert_eq!(d["total_lines"], 4);
}

#[test]
fn the_seeds_large_file_loop_reads_a_file_by_line_ranges() {
    let (s, _, token) = fixture();
    let text: String = (0..2500).map(|i| format!("row {i}\n")).collect();
    write(&s.workspace("proj").join("big.log"), text.as_bytes());
    let (mut total, mut parts) = (0, Vec::new());
    loop {
        let d = ok(op(&s, &token, "read", json!({"file": "big.log", "start_line": total, "end_line": total + 1000})));
        let content = d["content"].as_str().expect("content").to_string();
        if content.is_empty() {
            break;
        }
        total += 1000;
        let short = content.lines().count() < 1000;
        parts.push(content);
        if short {
            break;
        }
    }
    assert_eq!(parts.concat(), text);
}

// ---- Write Files ---------------------------------------------------------------------------

#[test]
fn write_text_with_encoding_append_and_newline_options() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    let d = ok(op(
        &s,
        &token,
        "write",
        json!({"file": "/workspace/output.txt", "content": "Hello, World!", "encoding": "utf-8", "append": false,
               "leading_newline": false, "trailing_newline": true, "sudo": false}),
    ));
    assert_eq!(std::fs::read(ws.join("output.txt")).expect("written"), b"Hello, World!\n");
    assert_eq!(d["file"], "/workspace/output.txt");
    assert_eq!(d["bytes_written"], 14);
    assert_eq!(d["sha256"], sha256_hex(b"Hello, World!\n"));
    assert!(d["audit_seq"].as_i64().is_some_and(|n| n > 0), "{d}");
    ok(op(
        &s,
        &token,
        "write",
        json!({"file": "output.txt", "content": "more", "append": true, "leading_newline": true}),
    ));
    assert_eq!(std::fs::read(ws.join("output.txt")).expect("appended"), b"Hello, World!\n\nmore");
    ok(op(&s, &token, "write", json!({"file": "fresh/app.log", "content": "Process started\n", "append": true})));
    assert_eq!(std::fs::read(ws.join("fresh/app.log")).expect("created"), b"Process started\n", "append creates");
}

#[test]
fn write_binary_content_as_base64() {
    let (s, _, token) = fixture();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let d = ok(op(&s, &token, "write", json!({"file": "/workspace/pixel.png", "content": png, "encoding": "base64"})));
    let bytes = base64::engine::general_purpose::STANDARD.decode(png).expect("b64");
    assert_eq!(std::fs::read(s.workspace("proj").join("pixel.png")).expect("written"), bytes);
    assert_eq!(d["size"], bytes.len());
    let e = failed(op(&s, &token, "write", json!({"file": "bad.png", "content": "@@@", "encoding": "base64"})));
    assert_eq!(e["error_type"], "decode_error");
    assert!(!s.workspace("proj").join("bad.png").exists(), "a refused write changes nothing");
}

#[test]
fn write_raw_content_one_byte_per_character() {
    let (s, _, token) = fixture();
    ok(op(&s, &token, "write", json!({"file": "latin.bin", "content": "caf\u{e9}\u{ff}\u{0}", "encoding": "raw"})));
    assert_eq!(
        std::fs::read(s.workspace("proj").join("latin.bin")).expect("written"),
        [b'c', b'a', b'f', 0xe9, 0xff, 0]
    );
    let e = failed(op(&s, &token, "write", json!({"file": "wide.bin", "content": "\u{2603}", "encoding": "raw"})));
    assert_eq!(e["error_type"], "decode_error");
    // An encoding the route does not take is a malformed request, as the document says: 400.
    let r = op(&s, &token, "write", json!({"file": "x.txt", "content": "x", "encoding": "utf-16"}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["success"], false);
    assert!(r.text().contains("utf-16"), "{}", r.text());
    ok(op(&s, &token, "write", json!({"file": "x.txt", "content": "x", "encoding": "UTF-8"})));
}

// ---- Replace And Search ----------------------------------------------------------------------

#[test]
fn replace_text_in_a_file() {
    let (s, _, token) = fixture();
    ok(op(&s, &token, "write", json!({"file": "/workspace/output.txt", "content": "Hello, World! World."})));
    let d = ok(op(
        &s,
        &token,
        "replace",
        json!({"file": "/workspace/output.txt", "old_str": "World", "new_str": "Sandbox", "sudo": false}),
    ));
    assert_eq!(d["replaced_count"], 2);
    assert_eq!(std::fs::read(s.workspace("proj").join("output.txt")).expect("read"), b"Hello, Sandbox! Sandbox.");
    let e = failed(op(&s, &token, "replace", json!({"file": "output.txt", "old_str": "absent", "new_str": "x"})));
    assert_eq!(e["operation"], "replace");
    let e = failed(op(&s, &token, "replace", json!({"file": "gone.txt", "old_str": "a", "new_str": "b"})));
    assert_eq!(e["error_type"], "not_found");
}

#[test]
fn search_one_file_with_a_regular_expression() {
    let (s, _, token) = fixture();
    ok(op(&s, &token, "write", json!({"file": "/workspace/output.txt", "content": "Hi\nHello,   Sandbox\nbye\n"})));
    let d = ok(op(&s, &token, "search", json!({"file": "/workspace/output.txt", "regex": "Hello,\\s+\\w+"})));
    assert_eq!(d["match_count"], 1);
    assert_eq!(d["matches"][0]["line_number"], 2);
    assert_eq!(d["matches"][0]["line"], "Hello,   Sandbox");
    assert_eq!(d["matches"][0]["file"], "/workspace/output.txt");
    let e = failed(op(&s, &token, "search", json!({"file": "output.txt", "regex": "("})));
    assert_eq!(e["error_type"], "invalid_target", "a bad regex is named");
    let e = failed(op(&s, &token, "search", json!({"file": "none.txt", "regex": "x"})));
    assert_eq!(e["error_type"], "not_found");
}

#[test]
fn grep_searches_a_tree_with_include_exclude_case_insensitive_and_max_results() {
    let (s, _, token) = fixture();
    let d = ok(op(
        &s,
        &token,
        "grep",
        json!({"path": "/workspace", "pattern": "TODO", "include": ["*.py", "*.ts", "*.tsx", "*.json"],
               "exclude": ["node_modules", ".git"], "case_insensitive": true, "max_results": 100}),
    ));
    let files: Vec<&str> =
        d["matches"].as_array().expect("matches").iter().filter_map(|m| m["file"].as_str()).collect();
    assert_eq!(files, ["/workspace/src/app.py", "/workspace/src/util.ts"], "{d}");
    assert_eq!(d["matches"][0]["line_number"], 2);
    let sensitive = ok(op(&s, &token, "grep", json!({"path": "src", "pattern": "TODO"})));
    assert_eq!(sensitive["total"], 1);
    assert_eq!(sensitive["matches"][0]["file"], "src/app.py");
    let capped = ok(op(&s, &token, "grep", json!({"path": "", "pattern": "line", "max_results": 2})));
    assert_eq!(capped["total"], 2);
    assert_eq!(capped["truncated"], true);
    // A path that is a file searches that file, as grep given a file does.
    let one = ok(op(&s, &token, "grep", json!({"path": "/workspace/src/app.py", "pattern": "TODO"})));
    assert_eq!((one["total"].as_u64(), one["files_searched"].as_u64()), (Some(1), Some(1)), "{one}");
    assert_eq!(one["matches"][0]["file"], "/workspace/src/app.py");
}

// ---- Find, Glob, And List --------------------------------------------------------------------

#[test]
fn find_files_by_a_simple_glob() {
    let (s, _, token) = fixture();
    write(&s.workspace("proj").join("src/deep/more.py"), b"x\n");
    let d = ok(op(&s, &token, "find", json!({"path": "/workspace/src", "glob": "*.py"})));
    assert_eq!(d["files"], json!(["/workspace/src/app.py", "/workspace/src/deep/more.py"]));
    let rel = ok(op(&s, &token, "find", json!({"path": "src", "glob": "*.ts"})));
    assert_eq!(rel["files"], json!(["src/util.ts"]));
}

#[test]
fn glob_matches_recursively_with_metadata_sorting_and_hidden_file_controls() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    write(&ws.join("data/big.json"), &[b' '; 5000]);
    let d = ok(op(
        &s,
        &token,
        "glob",
        json!({"path": "/workspace", "pattern": "**/*.json", "exclude": ["node_modules/**"], "include_hidden": false,
               "files_only": true, "include_metadata": true, "max_results": 200, "sort_by": "path"}),
    ));
    assert_eq!(d["files"], json!(["/workspace/data/a.json", "/workspace/data/big.json"]));
    let entries = d["entries"].as_array().expect("metadata");
    assert_eq!(entries[1]["size"], 5000);
    assert!(entries[0]["modified_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    let hidden = ok(op(&s, &token, "glob", json!({"path": "", "pattern": "**/*.json", "include_hidden": true})));
    assert!(hidden["files"].as_array().expect("files").contains(&json!(".hidden/secret.json")));
    let by_size =
        ok(op(&s, &token, "glob", json!({"path": "data", "pattern": "*.json", "sort_by": "size", "max_results": 1})));
    assert_eq!(by_size["files"], json!(["data/big.json"]));
    assert_eq!((by_size["total"].as_u64(), by_size["truncated"].as_bool()), (Some(2), Some(true)));
    // `files_only: false` lists the directories that match too, marked in the metadata.
    write(&ws.join("src/deep/more.py"), b"x\n");
    let files = ok(op(&s, &token, "glob", json!({"path": "src", "pattern": "**/*e*"})));
    assert_eq!(files["files"], json!(["src/deep/more.py"]));
    let both = ok(op(
        &s,
        &token,
        "glob",
        json!({"path": "src", "pattern": "**/*e*", "files_only": false, "include_metadata": true}),
    ));
    assert_eq!(both["files"], json!(["src/deep", "src/deep/more.py"]));
    let kinds: Vec<bool> = both["entries"].as_array().expect("metadata").iter().map(|e| e["is_dir"] == true).collect();
    assert_eq!(kinds, [true, false]);
    let r = op(&s, &token, "glob", json!({"path": "", "pattern": "*", "sort_by": "colour"}));
    assert_eq!(r.status, 400, "an unknown sort is a malformed request");
    assert!(r.text().contains("colour"));
}

#[test]
fn find_grep_and_glob_in_a_missing_directory_are_not_found() {
    let (s, _, token) = fixture();
    for (name, body) in [
        ("find", json!({"path": "/workspace/nowhere", "glob": "*.py"})),
        ("grep", json!({"path": "nowhere", "pattern": "TODO"})),
        ("glob", json!({"path": "src/nowhere", "pattern": "**/*"})),
    ] {
        let e = failed(op(&s, &token, name, body));
        assert_eq!(
            (e["error_type"].as_str(), e["errno_name"].as_str()),
            (Some("not_found"), Some("ENOENT")),
            "{name}: {e}"
        );
        assert!(e["message"].as_str().is_some_and(|m| m.contains("nowhere")), "{name} names the path: {e}");
    }
    // An empty directory is no error: nothing matches in it.
    std::fs::create_dir_all(s.workspace("proj").join("empty")).expect("mkdir");
    assert_eq!(ok(op(&s, &token, "find", json!({"path": "empty", "glob": "*"})))["total"], 0);
    assert_eq!(ok(op(&s, &token, "grep", json!({"path": "empty", "pattern": "x"})))["total"], 0);

    // Out of a scoped session's sight, a missing directory and a present one answer alike.
    let (_, scoped) = session(&s, "scoped", json!({"file_access": {"read": ["docs"]}}));
    write(&s.workspace("scoped").join("secret/key.txt"), b"key\n");
    for name in ["find", "grep", "glob"] {
        let ask = |dir: &str| {
            let body = match name {
                "find" => json!({"path": dir, "glob": "*"}),
                "grep" => json!({"path": dir, "pattern": "key"}),
                _ => json!({"path": dir, "pattern": "**/*"}),
            };
            let r = op(&s, &scoped, name, body);
            (r.status, r.text().replace(dir, "DIR"))
        };
        assert_eq!(ask("secret"), ask("absent"), "{name} tells an out-of-scope directory's existence");
    }
}

#[test]
fn list_a_directory_recursive_show_hidden_include_size() {
    let (s, _, token) = fixture();
    let d = ok(op(
        &s,
        &token,
        "list",
        json!({"path": "/workspace", "recursive": false, "show_hidden": true,
                                              "include_size": true}),
    ));
    let names: Vec<&str> =
        d["entries"].as_array().expect("entries").iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(names.contains(&".hidden") && names.contains(&"notes.txt") && !names.contains(&"app.py"), "{names:?}");
    let notes = d["entries"].as_array().and_then(|a| a.iter().find(|e| e["name"] == "notes.txt")).expect("notes");
    assert_eq!(notes["size"], 28);
    assert_eq!(notes["path"], "/workspace/notes.txt");
    assert_eq!(notes["is_dir"], false);
    let plain = ok(op(&s, &token, "list", json!({"path": "", "recursive": true})));
    let paths: Vec<&str> =
        plain["entries"].as_array().expect("entries").iter().filter_map(|e| e["path"].as_str()).collect();
    assert!(paths.contains(&"src/app.py") && !paths.iter().any(|p| p.starts_with(".hidden")), "{paths:?}");
    assert!(plain["entries"][0].get("size").is_none(), "size only with include_size");
}

// ---- Upload And Download ---------------------------------------------------------------------

#[test]
fn upload_with_multipart_form_data() {
    let (s, _, token) = fixture();
    let pdf: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let d = ok(upload(
        &s,
        &token,
        "/v1/file/upload",
        &[("file", Some("report.pdf"), &pdf), ("path", None, b"/workspace/report.pdf")],
    ));
    assert_eq!(d["size"], pdf.len());
    assert_eq!(d["sha256"], sha256_hex(&pdf));
    assert_eq!(std::fs::read(s.workspace("proj").join("report.pdf")).expect("stored"), pdf);
    // The path part may come first.
    ok(upload(&s, &token, "/v1/file/upload", &[("path", None, b"first.bin"), ("file", Some("f"), b"abc")]));
    assert_eq!(std::fs::read(s.workspace("proj").join("first.bin")).expect("stored"), b"abc");
    let r = upload(&s, &token, "/v1/file/upload", &[("file", Some("f"), b"abc"), ("paht", None, b"x")]);
    assert_eq!(r.status, 400, "an unknown part is refused by name: {}", r.text());
    assert!(r.text().contains("paht"));
    let r = upload(&s, &token, "/v1/file/upload", &[("file", Some("f"), b"abc")]);
    assert_eq!(r.status, 400, "no path");
}

#[test]
fn uploads_over_the_configured_limit_are_refused_and_change_nothing() {
    let s = http::start(Some(TOKEN), &["--upload-limit", "1000"]);
    let (_, token) = session(&s, "small", json!({}));
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"big.bin"), ("file", Some("b"), &[1u8; 5000])]);
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(!s.workspace("small").join("big.bin").exists());
    ok(upload(&s, &token, "/v1/file/upload", &[("path", None, b"ok.bin"), ("file", Some("b"), &[1u8; 900])]));
    assert_eq!(internal_names(&s.workspace("small")), Vec::<String>::new(), "no temporary left");
}

/// trove's own temporaries in a tree.
fn internal_names(ws: &std::path::Path) -> Vec<String> {
    walkdir::WalkDir::new(ws)
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".trove-"))
        .collect()
}

#[test]
fn kill_9_at_each_step_of_an_upload_leaves_the_old_file_or_the_whole_new_one() {
    let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    for (point, lands) in
        [("upload:drafted", false), ("upload:journaled", true), ("upload:staged", true), ("upload:step:0", true)]
    {
        let dir = tempfile::tempdir().expect("tmp");
        assert!(common::trove(&dir.path().join("repo"), &["init"]).status.success());
        let s = http::start_env(dir, Some(TOKEN), &[], &[("TROVE_FAILPOINT", point)]);
        let (_, token) = session(&s, "up", json!({"persistent": true}));
        let ws = s.workspace("up");
        write(&ws.join("data/f.bin"), b"old content");
        let (ctype, body) = multipart(&[("file", Some("f"), &bytes), ("path", None, b"data/f.bin")]);
        let auth = format!("Bearer {token}");
        let mut c = std::net::TcpStream::connect(s.addr).expect("connect");
        http::send(&mut c, "POST", "/v1/file/upload", &[("Authorization", &auth), ("Content-Type", &ctype)], &body);
        let mut answer = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut answer);
        assert!(answer.is_empty(), "{point}: the server was to die: {}", String::from_utf8_lossy(&answer));
        // The next command to open the repository settles what the crash interrupted.
        let out = common::trove(&s.repo, &["audit", "log", "--json"]);
        assert!(out.status.success(), "{point}: {}", common::stderr(&out));
        let now = std::fs::read(ws.join("data/f.bin")).expect("the file is there");
        if lands {
            assert!(now == bytes, "{point}: the whole upload, rolled forward");
            assert!(common::stdout(&out).contains("upload"), "{point}: audited");
        } else {
            assert_eq!(now, b"old content", "{point}: untouched");
        }
        assert_eq!(internal_names(&ws), Vec::<String>::new(), "{point}: no temporary left, an upload's neither");
    }
}

/// Entries named like an upload's temporary that trove did not record (a directory, an old
/// file) are the agent's: no upload, accepted or refused, removes them.
#[test]
fn uploads_never_touch_entries_trove_did_not_record() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    write(&ws.join(".trove-up-notes/keep.txt"), b"mine");
    write(&ws.join(".trove-up-0123456789abcdef.tmp"), b"mine too");
    let old = filetime::FileTime::from_unix_time(1_600_000_000, 0);
    for p in [ws.join(".trove-up-notes"), ws.join(".trove-up-0123456789abcdef.tmp")] {
        filetime::set_file_mtime(&p, old).expect("age it");
    }
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"up.txt"), ("file", Some("f"), b"new")]);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"../out.txt"), ("file", Some("f"), b"no")]);
    assert_eq!(r.json()["success"], false, "{}", r.text());
    assert_eq!(std::fs::read(ws.join(".trove-up-notes/keep.txt")).expect("kept"), b"mine");
    assert_eq!(std::fs::read(ws.join(".trove-up-0123456789abcdef.tmp")).expect("kept"), b"mine too");
}

/// A session ended while an upload streams in: its final snapshot does not hold the half
/// received file, and the upload is refused and leaves nothing.
#[test]
fn a_session_ended_mid_upload_keeps_the_partial_file_out_of_its_final_snapshot() {
    let (s, id, token) = fixture();
    let ws = s.workspace("proj");
    let (ctype, body) = multipart(&[("path", None, b"big.bin"), ("file", Some("f"), &vec![7u8; 4 << 20])]);
    let mut c = std::net::TcpStream::connect(s.addr).expect("connect");
    let head = format!(
        "POST /v1/file/upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    std::io::Write::write_all(&mut c, head.as_bytes()).expect("head");
    std::io::Write::write_all(&mut c, &body[..1 << 20]).expect("a first MiB");
    assert!(http::eventually(10, || internal_names(&ws).iter().any(|n| n.starts_with(".trove-up-"))), "streaming in");
    let r = s.call("DELETE", &format!("/v1/sessions/{id}"), "");
    assert_eq!(r.status, 204, "{}", r.text());
    let snap = s.get(&format!("/v1/sessions/{id}/snapshots")).json();
    let snap = snap["snapshots"][0]["id"].as_str().or(snap[0]["id"].as_str()).expect("the final snapshot").to_string();
    let files = s.get(&format!("/v1/snapshots/{snap}/files")).text();
    assert!(files.contains("notes.txt"), "{files}");
    assert!(!files.contains(".trove-up-"), "the half-received upload is not the workspace's: {files}");
    std::io::Write::write_all(&mut c, &body[1 << 20..]).expect("the rest");
    let mut raw = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c, &mut raw);
    let r = http::parse(&raw);
    assert_eq!(r.json()["success"], false, "{}", r.text());
    assert!(!ws.join("big.bin").exists());
    assert_eq!(internal_names(&ws), Vec::<String>::new(), "the temporary is removed");
}

/// A server killed mid-upload leaves a part-written temporary; the next command to open the
/// repository removes it (it was recorded, its process is gone), and no snapshot stores it.
#[test]
fn a_killed_uploads_temporary_is_removed_and_never_snapshotted() {
    let dir = tempfile::tempdir().expect("tmp");
    assert!(common::trove(&dir.path().join("repo"), &["init"]).status.success());
    let s = http::start_env(dir, Some(TOKEN), &[], &[("TROVE_FAILPOINT", "upload:receiving")]);
    let (_, token) = session(&s, "up", json!({"persistent": true}));
    let ws = s.workspace("up");
    write(&ws.join("kept.txt"), b"kept");
    let r = std::panic::catch_unwind(|| {
        upload(&s, &token, "/v1/file/upload", &[("path", None, b"f.bin"), ("file", Some("f"), &[1u8; 300_000])])
    });
    assert!(r.is_err() || r.is_ok_and(|r| r.body.is_empty()), "the server was to die mid-upload");
    let left = internal_names(&ws);
    assert!(left.iter().any(|n| n.starts_with(".trove-up-")), "a part-written temporary is left: {left:?}");
    let out = common::trove(&s.repo, &["snapshot", ws.to_str().expect("utf-8"), "--json"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(internal_names(&ws), Vec::<String>::new(), "removed when the repository was next opened");
    let out = common::trove(&s.repo, &["ls", "--json", "latest"]);
    let listing = common::stdout(&out);
    assert!(listing.contains("kept.txt") && !listing.contains(".trove-up-"), "{listing}");
}

/// A paused session's upload is refused before its content is stored: nothing grows.
#[test]
fn a_paused_sessions_upload_is_refused_before_anything_is_stored() {
    let (s, id, token) = fixture();
    assert_eq!(s.call("POST", &format!("/v1/sessions/{id}/pause"), "").status, 200);
    let size = |p: &std::path::Path| -> u64 {
        walkdir::WalkDir::new(p)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    let before = size(&s.repo);
    // Incompressible: stored, it would grow the repository by its whole size.
    let bytes = trove::sample::Rng::new(7).bytes(20_000_000);
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"big.bin"), ("file", Some("f"), &bytes)]);
    let v = r.json();
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(v["data"]["errno"], 30, "read-only (EROFS): {v}");
    let grown = size(&s.repo).saturating_sub(before);
    assert!(grown < 1 << 20, "the refused upload grew the repository by {grown} bytes");
    let audit = s.get(&format!("/v1/audit?session={id}&operation=upload")).json();
    assert_eq!(audit["records"][0]["outcome"], "read_only", "{audit}");
}

#[test]
fn download_as_a_file_stream() {
    let (s, _, token) = fixture();
    let bytes: Vec<u8> = (0..2_000_000u32).map(|i| (i % 253) as u8).collect();
    write(&s.workspace("proj").join("report.pdf"), &bytes);
    let r = download(&s, &token, "path=/workspace/report.pdf");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, bytes);
    assert_eq!(r.header("etag").map(str::to_string), Some(format!("\"{}\"", sha256_hex(&bytes))));
    assert_eq!(download(&s, &token, "path=report.pdf").body.len(), bytes.len());
}

#[test]
fn download_with_change_policy_abort_answers_409_when_the_source_changes() {
    let (s, _, token) = fixture();
    let path = s.workspace("proj").join("log.bin");
    write(&path, &vec![7u8; 8 << 20]);
    let (stop, writer) = http::appender(&path);
    let mut refused = 0;
    for _ in 0..20 {
        let r = download(&s, &token, "path=/workspace/log.bin&change_policy=abort");
        if r.status == 409 || r.cut {
            refused += 1;
        } else {
            assert_eq!(r.status, 200);
            assert_eq!(r.header("etag").map(str::to_string), Some(format!("\"{}\"", sha256_hex(&r.body))));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    assert!(refused > 0, "downloads overlapping an append must answer 409");
}

// ---- Permissions and security notes ------------------------------------------------------------

#[test]
fn sudo_is_accepted_and_refused_when_true() {
    let (s, _, token) = fixture();
    ok(op(&s, &token, "read", json!({"file": "notes.txt", "sudo": false})));
    let e = failed(op(&s, &token, "read", json!({"file": "/etc/nginx/nginx.conf", "sudo": true})));
    assert_eq!(e["error_type"], "permission_denied");
    let e = failed(op(&s, &token, "write", json!({"file": "cron.txt", "content": "x", "sudo": true})));
    assert_eq!(e["error_type"], "permission_denied");
    assert!(!s.workspace("proj").join("cron.txt").exists());
}

#[test]
fn paths_are_relative_or_absolute_under_the_sandbox_root_and_nothing_else() {
    let (s, _, token) = fixture();
    for given in ["notes.txt", "./notes.txt", "/workspace/notes.txt", "/workspace//notes.txt"] {
        ok(op(&s, &token, "read", json!({"file": given})));
    }
    for (given, error_type) in [
        ("/workspacex/notes.txt", "permission_denied"),
        ("/tmp/notes.txt", "permission_denied"),
        ("/workspace/../etc/passwd", "invalid_path"),
        ("src/../../x", "invalid_path"),
        ("a\\b", "invalid_path"),
    ] {
        let e = failed(op(&s, &token, "write", json!({"file": given, "content": "x"})));
        assert_eq!(e["error_type"], error_type, "{given}");
        assert_eq!(e["path"], given);
    }
    let root = ok(op(&s, &token, "list", json!({"path": "/workspace"})));
    assert_eq!(root["path"], "/workspace");
}

#[test]
fn a_symlink_out_of_the_workspace_is_never_followed() {
    let (s, _, token) = fixture();
    let outside = s.dir.path().join("outside.txt");
    std::fs::write(&outside, b"secret\n").expect("outside");
    std::os::unix::fs::symlink(&outside, s.workspace("proj").join("link.txt")).expect("symlink");
    let e = failed(op(&s, &token, "read", json!({"file": "link.txt"})));
    assert_ne!(e["error_type"], "io_error", "{e}");
    assert!(!e["message"].as_str().unwrap_or("").contains("secret"));
    failed(op(&s, &token, "write", json!({"file": "link.txt", "content": "overwritten"})));
    assert_eq!(std::fs::read(&outside).expect("outside"), b"secret\n");
}

#[test]
fn the_sandbox_root_is_settable_per_session_and_per_server() {
    let s = http::start(Some(TOKEN), &["--sandbox-root", "/home/gem/workspace"]);
    let (_, server_wide) = session(&s, "a", json!({}));
    ok(op(&s, &server_wide, "write", json!({"file": "/home/gem/workspace/config.json", "content": "{}"})));
    assert!(s.workspace("a").join("config.json").exists());
    failed(op(&s, &server_wide, "read", json!({"file": "/workspace/config.json"})));
    let (id, own) = session(&s, "b", json!({"sandbox_root": "/tmp/demo"}));
    ok(op(&s, &own, "write", json!({"file": "/tmp/demo/result.json", "content": "{}"})));
    assert!(s.workspace("b").join("result.json").exists());
    assert_eq!(s.get(&format!("/v1/sessions/{id}")).json()["sandbox_root"], "/tmp/demo");
    let r = s.call("POST", "/v1/sessions", r#"{"workspace": "c", "sandbox_root": "relative/dir"}"#);
    assert_eq!(r.status, 400, "{}", r.text());
}

#[test]
fn scope_limits_the_file_api_as_it_limits_the_tools() {
    let s = http::start(Some(TOKEN), &[]);
    let (_, token) = session(&s, "scoped", json!({"file_access": {"read": ["docs"], "write": ["docs/drafts"]}}));
    let ws = s.workspace("scoped");
    write(&ws.join("docs/guide.md"), b"guide\n");
    write(&ws.join("secret/key.txt"), b"key\n");
    ok(op(&s, &token, "read", json!({"file": "docs/guide.md"})));
    let e = failed(op(&s, &token, "read", json!({"file": "secret/key.txt"})));
    assert_eq!(e["error_type"], "permission_denied");
    let e = failed(op(&s, &token, "write", json!({"file": "docs/guide.md", "content": "x"})));
    assert_eq!(e["error_type"], "permission_denied");
    ok(op(&s, &token, "write", json!({"file": "docs/drafts/new.md", "content": "draft"})));
    let listed = ok(op(&s, &token, "list", json!({"path": "", "recursive": true})));
    assert!(!listed.to_string().contains("secret"), "{listed}");
    let grep = ok(op(&s, &token, "grep", json!({"path": "", "pattern": "key"})));
    assert_eq!(grep["total"], 0);
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"secret/up.bin"), ("file", Some("f"), b"x")]);
    assert_eq!(failed(r)["error_type"], "permission_denied");
    assert!(!ws.join("secret/up.bin").exists());
}

#[test]
fn a_sessions_changes_are_the_same_from_the_cli_and_http_and_a_refusal_stays_on_its_path() {
    let s = http::start(Some(TOKEN), &[]);
    let (id, token) = session(&s, "scoped", json!({"file_access": {"read": ["docs"], "write": ["docs"]}}));
    let ws = s.workspace("scoped");
    ok(op(&s, &token, "write", json!({"file": "docs/a.md", "content": "a"})));
    ok(op(&s, &token, "write", json!({"file": "docs/b.md", "content": "b"})));
    // An upload onto the directory itself is refused, and audited at that path.
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"docs"), ("file", Some("f"), b"x")]);
    failed(r);
    // Something outside the session's scope changes meanwhile.
    write(&ws.join("secret/key.txt"), b"key\n");

    let over_http = s.get(&format!("/v1/sessions/{id}/changes")).json();
    let out = common::trove(&s.repo, &["--json", "session", "changes", &id]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let from_cli: Value = serde_json::from_str(&common::stdout(&out)).expect("json");
    let paths = |v: &Value| -> Vec<String> {
        v["entries"].as_array().expect("entries").iter().filter_map(|e| e["path"].as_str().map(String::from)).collect()
    };
    assert_eq!(paths(&over_http), ["docs/a.md", "docs/b.md"], "{over_http}");
    assert_eq!(paths(&from_cli), paths(&over_http), "the CLI answers what HTTP answers");
    for e in over_http["entries"].as_array().expect("entries") {
        let ops: Vec<&str> =
            e["records"].as_array().expect("records").iter().filter_map(|r| r["operation"].as_str()).collect();
        assert!(!ops.contains(&"upload"), "a refused upload onto docs is not a record of {}: {ops:?}", e["path"]);
    }
}

// ---- File Watch -----------------------------------------------------------------------------

/// `POST /v1/file/watch...` (resource-style JSON, not the wrapper) with the session token.
fn watch_call(s: &Server, token: &str, method: &str, rest: &str, body: Value) -> Resp {
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let body = if body.is_null() { String::new() } else { body.to_string() };
    http::request(s.addr, method, &format!("/v1/file/watch{rest}"), &headers, body.as_bytes())
}

/// Starts a watcher; its id.
fn watcher(s: &Server, token: &str, body: Value) -> String {
    let r = watch_call(s, token, "POST", "", body);
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["data"]["watcher_id"].as_str().expect("watcher_id").to_string()
}

/// Polls until `want` events came (or 10 s passed); (events, cursor, overflow seen).
fn poll_events(s: &Server, token: &str, id: &str, want: usize) -> (Vec<Value>, u64, bool) {
    let (mut events, mut cursor, mut overflow) = (Vec::new(), 0u64, false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while events.len() < want && std::time::Instant::now() < deadline {
        let r = watch_call(
            s,
            token,
            "POST",
            &format!("/{id}/poll"),
            json!({"cursor": cursor, "limit": 1000, "timeout": 2}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        events.extend(v["events"].as_array().cloned().unwrap_or_default());
        overflow |= v["overflow"] == true;
        cursor = v["cursor"].as_u64().expect("cursor");
    }
    (events, cursor, overflow)
}

#[test]
fn wait_for_one_file_answers_its_event_or_times_out() {
    let (s, _, token) = fixture();
    let r = watch_call(&s, &token, "POST", "/wait", json!({"path": "/workspace/demo/result.json", "timeout": 1}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"event": null, "timed_out": true}));
    // Written while the wait runs, in a directory that did not exist when it began.
    let writer = {
        let (addr, token) = (s.addr, token.clone());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let auth = format!("Bearer {token}");
            let body = json!({"file": "demo/result.json", "content": "{}"}).to_string();
            http::request(addr, "POST", "/v1/file/write", &[("Authorization", &auth)], body.as_bytes())
        })
    };
    let r = watch_call(
        &s,
        &token,
        "POST",
        "/wait",
        json!({"path": "/workspace/demo/result.json", "timeout": 20, "event_types": ["create", "write"]}),
    );
    let written = ok(writer.join().expect("writer"));
    assert_eq!(r.status, 200, "{}", r.text());
    let e = r.json()["event"].clone();
    assert_eq!(e["type"], "create", "{e}");
    assert_eq!(e["path"], "/workspace/demo/result.json");
    assert_eq!(e["relative_path"], "result.json");
    assert_eq!(e["old_path"], Value::Null);
    assert_eq!(e["is_dir"], false);
    assert_eq!(e["size"], 2);
    assert!(e["timestamp"].as_f64().expect("timestamp") > 1.7e9 && e["mtime"].is_f64() && e["inode"].is_u64(), "{e}");
    assert_eq!(e["audit_seq"], written["audit_seq"], "trove's own write names its audit record");
    // It exists now: with create wanted, the wait answers at once; without, it waits.
    let r = watch_call(&s, &token, "POST", "/wait", json!({"path": "demo/result.json", "event_types": ["create"]}));
    assert_eq!(r.json()["event"]["type"], "create");
    assert_eq!(r.json()["event"]["path"], "demo/result.json", "named as the request named it");
    let r = watch_call(
        &s,
        &token,
        "POST",
        "/wait",
        json!({"path": "demo/result.json", "timeout": 0.3, "event_types": ["write"]}),
    );
    assert_eq!(r.json()["timed_out"], true);
}

#[test]
fn wait_reports_a_rename_onto_the_path_with_where_it_came_from() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    // Renamed onto the path while the wait runs, as an atomic save does.
    let wait_for = |name: &str, body: Value| {
        let from = ws.join(format!("demo/{name}.tmp"));
        write(&from, b"{}");
        let to = ws.join(format!("demo/{name}.json"));
        let mover = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::fs::rename(from, to).expect("rename");
        });
        let r = watch_call(&s, &token, "POST", "/wait", body);
        mover.join().expect("mover");
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["event"].clone()
    };
    let e = wait_for("a", json!({"path": "/workspace/demo/a.json", "timeout": 20}));
    assert_eq!((e["type"].as_str(), e["path"].as_str()), (Some("rename"), Some("/workspace/demo/a.json")), "{e}");
    assert_eq!(e["old_path"], "/workspace/demo/a.tmp");
    // A wait for creations and writes only still wakes for it, and says where it came from.
    let e = wait_for("b", json!({"path": "demo/b.json", "timeout": 20, "event_types": ["create", "write"]}));
    assert_eq!((e["type"].as_str(), e["old_path"].as_str()), (Some("create"), Some("demo/b.tmp")), "{e}");
}

#[test]
fn long_poll_a_directory_with_cursor_include_patterns_exclude_and_delete() {
    let (s, _, token) = fixture();
    let id = watcher(
        &s,
        &token,
        json!({"path": "/workspace", "recursive": true, "exclude": ["node_modules", ".git"], "include_patterns": ["*.py", "*.json"]}),
    );
    assert!(id.starts_with("w_"), "{id}");
    let ws = s.workspace("proj");
    write(&ws.join("node_modules/x/skip.py"), b"no\n");
    write(&ws.join("notes.md"), b"not included\n");
    write(&ws.join("src/new.py"), b"print(1)\n");
    let (events, cursor, overflow) = poll_events(&s, &token, &id, 2);
    assert!(!overflow);
    let paths: Vec<(&str, &str)> =
        events.iter().map(|e| (e["type"].as_str().unwrap_or(""), e["path"].as_str().unwrap_or(""))).collect();
    assert_eq!(paths, [("create", "/workspace/src/new.py"), ("write", "/workspace/src/new.py")], "{events:?}");
    assert_eq!(events[0]["relative_path"], "src/new.py");
    assert_eq!(events.last().expect("event")["seq"].as_u64(), Some(cursor), "the cursor is the last seq consumed");
    // Nothing new: an empty answer at the same cursor, after the timeout.
    let started = std::time::Instant::now();
    let r = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({"cursor": cursor, "timeout": 0.5}));
    assert!(started.elapsed() >= std::time::Duration::from_millis(400), "a long poll waits");
    assert_eq!(r.json()["events"], json!([]));
    assert_eq!(r.json()["cursor"], cursor);
    // A rename within the tree is one event with the old path.
    std::fs::rename(ws.join("src/new.py"), ws.join("src/renamed.py")).expect("rename");
    let r = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({"cursor": cursor, "timeout": 5}));
    let e = r.json()["events"][0].clone();
    assert_eq!((e["type"].as_str(), e["old_path"].as_str()), (Some("rename"), Some("/workspace/src/new.py")), "{e}");
    let r = watch_call(&s, &token, "DELETE", &format!("/{id}"), Value::Null);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"], json!({"watcher_id": id, "stopped": true}));
    let r = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({}));
    assert_eq!(r.status, 404);
    assert!(r.text().contains(&id), "{}", r.text());
}

#[test]
fn debounce_gathers_the_changes_of_one_path_into_one_event() {
    let (s, _, token) = fixture();
    let id = watcher(&s, &token, json!({"path": "", "debounce": 300}));
    let ws = s.workspace("proj");
    write(&ws.join("burst.txt"), b"1");
    for i in 0..5 {
        std::fs::write(ws.join("burst.txt"), format!("{i}")).expect("rewrite");
    }
    write(&ws.join("brief.txt"), b"here");
    std::fs::remove_file(ws.join("brief.txt")).expect("remove");
    let (events, ..) = poll_events(&s, &token, &id, 1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let r = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({"cursor": 1}));
    let later = r.json()["events"].as_array().cloned().unwrap_or_default();
    let kinds: Vec<(String, String)> = events
        .iter()
        .chain(&later)
        .map(|e| (e["type"].as_str().unwrap_or("").into(), e["path"].as_str().unwrap_or("").into()))
        .collect();
    assert_eq!(kinds, [("create".to_string(), "burst.txt".to_string())], "created and gone again is nothing");
}

#[test]
fn sse_emits_watch_started_file_change_with_ids_and_resumes_after_last_event_id() {
    use std::io::{Read, Write};
    let (s, _, token) = fixture();
    let id = watcher(&s, &token, json!({"path": "src"}));
    let open_at = |query: &str, last: Option<&str>| {
        let mut c = std::net::TcpStream::connect(s.addr).expect("connect");
        c.set_read_timeout(Some(std::time::Duration::from_secs(10))).expect("timeout");
        let resume = last.map(|l| format!("Last-Event-ID: {l}\r\n")).unwrap_or_default();
        write!(
            c,
            "GET /v1/file/watch/{id}/events{query} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n{resume}\r\n"
        )
        .expect("send");
        c
    };
    let open = |last: Option<&str>| open_at("", last);
    let read_until = |c: &mut std::net::TcpStream, needle: &str| {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = c.read(&mut buf).expect("read the stream");
            assert!(n > 0, "the stream ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    };
    let mut c = open(None);
    let head = read_until(&mut c, "event: watch_started");
    assert!(head.contains("text/event-stream"), "{head}");
    write(&s.workspace("proj").join("src/live.ts"), b"x\n");
    let got = read_until(&mut c, &format!("id: {id}:1\nevent: file_change\ndata: "));
    assert!(got.contains("\"relative_path\":\"live.ts\""), "{got}");
    drop(c);
    let mut c = open(Some(&format!("{id}:1")));
    let got = read_until(&mut c, "event: file_change");
    assert!(!got.contains(&format!("id: {id}:1\n")) && got.contains(&format!("id: {id}:2\n")), "{got}");
    // A client without the header resumes with `?cursor=`, a query string's text.
    let mut c = open_at("?cursor=1", None);
    let got = read_until(&mut c, "event: file_change");
    assert!(!got.contains(&format!("id: {id}:1\n")) && got.contains(&format!("id: {id}:2\n")), "{got}");
}

#[test]
fn every_event_is_within_the_sessions_scope() {
    let s = http::start(Some(TOKEN), &[]);
    let (_, token) = session(&s, "scoped", json!({"file_access": {"read": ["docs"], "write": ["docs"]}}));
    let ws = s.workspace("scoped");
    write(&ws.join("docs/keep.md"), b"x\n");
    let id = watcher(&s, &token, json!({"path": "", "event_types": ["create"]}));
    write(&ws.join("secret/key.txt"), b"key\n");
    write(&ws.join("docs/seen.md"), b"x\n");
    let (events, ..) = poll_events(&s, &token, &id, 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (more, ..) = poll_events(&s, &token, &id, 0);
    let all: Vec<&Value> = events.iter().chain(&more).collect();
    assert!(all.iter().all(|e| e["path"].as_str().is_some_and(|p| p.starts_with("docs"))), "{all:?}");
    assert!(all.iter().any(|e| e["path"] == "docs/seen.md"), "{all:?}");
}

/// A scoped session learns nothing of what is outside its scope: a search of an out-of-scope
/// file is denied the same whether it exists or not, and so is a watch of an out-of-scope
/// directory (a directory on the way to the scope may be watched: its events are filtered).
#[test]
fn out_of_scope_paths_answer_alike_whether_they_exist_or_not() {
    let s = http::start(Some(TOKEN), &[]);
    let (_, token) = session(&s, "scoped", json!({"file_access": {"read": ["docs/pub"], "write": []}}));
    let ws = s.workspace("scoped");
    write(&ws.join("docs/pub/a.md"), b"a\n");
    write(&ws.join("secret/key.txt"), b"key\n");
    let answer = |file: &str| {
        let e = failed(op(&s, &token, "search", json!({"file": file, "regex": "k"})));
        (e["error_type"].clone(), e["errno"].clone(), e["message"].as_str().unwrap_or("").replace(file, "<path>"))
    };
    let (there, missing) = (answer("secret/key.txt"), answer("secret/nokey.txt"));
    assert_eq!(there, missing);
    assert_eq!(there.0, "permission_denied");
    for dir in ["secret", "nothere", "docs/other"] {
        let r = watch_call(&s, &token, "POST", "", json!({"path": dir}));
        assert_eq!(r.status, 403, "{dir}: {}", r.text());
    }
    for dir in ["", "docs", "docs/pub"] {
        assert_eq!(watch_call(&s, &token, "POST", "", json!({"path": dir})).status, 201, "{dir}");
    }
}

/// Files an agent names `.trove-…` are its own and reported like any other; only the exact
/// names trove gives its temporaries are left out.
#[test]
fn watchers_report_the_agents_own_dot_trove_files() {
    let (s, _, token) = fixture();
    let ws = s.workspace("proj");
    let id = watcher(&s, &token, json!({"path": "", "event_types": ["create"]}));
    for name in [".trove-notes", ".trove-cache/x.txt", ".trove-my-1.tmp"] {
        write(&ws.join(name), b"mine\n");
    }
    let (events, ..) = poll_events(&s, &token, &id, 4);
    let paths: Vec<&str> = events.iter().filter_map(|e| e["path"].as_str()).collect();
    for name in [".trove-notes", ".trove-cache", ".trove-cache/x.txt", ".trove-my-1.tmp"] {
        assert!(paths.contains(&name), "{name} reported: {paths:?}");
    }
}

#[test]
fn trove_own_writes_and_deletes_carry_their_audit_seq() {
    let (s, id, token) = fixture();
    let w = watcher(&s, &token, json!({"path": "", "event_types": ["write", "remove"]}));
    let d = ok(op(&s, &token, "write", json!({"file": "notes.txt", "content": "new\n"})));
    let r =
        s.call("POST", &format!("/v1/sessions/{id}/tools/delete_file"), &json!({"path": "src/util.ts"}).to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    let deleted = r.json()["result"]["audit_seq"].clone();
    let (events, ..) = poll_events(&s, &token, &w, 2);
    assert!(events.iter().all(|e| !e["path"].as_str().unwrap_or("").contains(".trove-")), "{events:?}");
    let written = events.iter().find(|e| e["path"] == "notes.txt").expect("the write");
    assert_eq!((&written["type"], &written["audit_seq"]), (&json!("write"), &d["audit_seq"]));
    let removed = events.iter().find(|e| e["path"] == "src/util.ts").expect("the delete");
    assert_eq!(removed["type"], "remove");
    assert!(removed["audit_seq"].is_i64(), "{removed}");
    if deleted.is_i64() {
        assert_eq!(removed["audit_seq"], deleted);
    }
}

#[test]
fn a_full_queue_drops_its_oldest_events_and_the_next_poll_says_overflow() {
    let (s, _, token) = fixture();
    let id = watcher(&s, &token, json!({"path": "data"}));
    let dir = s.workspace("proj").join("data");
    for i in 0..6000 {
        std::fs::write(dir.join(format!("f{i}")), b"x").expect("write");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({"cursor": 0, "limit": 10}));
        let v = r.json();
        if v["overflow"] == true {
            let first = v["events"][0]["seq"].as_u64().unwrap_or(u64::MAX);
            assert!(first > 1, "events before the drop are gone: {v}");
            let next = watch_call(&s, &token, "POST", &format!("/{id}/poll"), json!({"cursor": v["cursor"]}));
            assert_eq!(next.status, 200, "going on from the answered cursor: {}", next.text());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no overflow after 12,000 changes: {v}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn watchers_are_limited_per_session_and_stop_when_their_session_ends() {
    let (s, id, token) = fixture();
    let ids: Vec<String> = (0..16).map(|_| watcher(&s, &token, json!({"path": "src"}))).collect();
    let r = watch_call(&s, &token, "POST", "", json!({"path": "src"}));
    assert_eq!(r.status, 409, "{}", r.text());
    // The operator's family reaches the same watchers; another session's are unknown.
    let r = s.call("POST", &format!("/v1/sessions/{id}/file/watch/{}/poll", ids[0]), "{}");
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, other) = session(&s, "other", json!({}));
    assert_eq!(watch_call(&s, &other, "POST", &format!("/{}/poll", ids[0]), json!({})).status, 404);
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{id}"), "").status, 204);
    let r = s.call("POST", &format!("/v1/sessions/{id}/file/watch/{}/poll", ids[1]), "{}");
    assert_eq!(r.status, 404, "{}", r.text());
    let r = s.call("POST", &format!("/v1/sessions/{id}/file/watch"), &json!({"path": "src"}).to_string());
    assert_eq!(r.status, 409, "an ended session has no live tree to watch: {}", r.text());
}

// ---- What trove adds: nothing lost, and whose request it is -----------------------------------

#[test]
fn a_blind_overwrite_keeps_the_previous_content_as_an_audited_pre_image() {
    let (s, _, token) = fixture();
    let d = ok(op(&s, &token, "write", json!({"file": "notes.txt", "content": "replaced\n"})));
    let seq = d["audit_seq"].as_i64().expect("audited");
    let r = s.get("/v1/audit?workspace=proj&operation=write_file&limit=5");
    let rec = r.json()["records"].as_array().and_then(|a| a.iter().find(|x| x["seq"] == seq).cloned()).expect("record");
    assert!(rec["beforeObject"].is_string(), "{rec}");
    assert!(rec["actor"].as_str().is_some_and(|a| a.starts_with("session:")), "{rec}");
    // The pre-image brings the old content back.
    let out = common::trove(&s.repo, &["revert", &seq.to_string()]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(
        std::fs::read(s.workspace("proj").join("notes.txt")).expect("back"),
        b"line 0\nline 1\nline 2\nline 3\n"
    );
    let e = ok(op(&s, &token, "replace", json!({"file": "notes.txt", "old_str": "line 0", "new_str": "LINE"})));
    assert!(e["audit_seq"].as_i64().is_some());
}

#[test]
fn a_session_created_with_require_sha256_refuses_blind_overwrites() {
    let s = http::start(Some(TOKEN), &[]);
    let (id, token) = session(&s, "strict", json!({"require_sha256": true}));
    assert_eq!(s.get(&format!("/v1/sessions/{id}")).json()["require_sha256"], true);
    write(&s.workspace("strict").join("a.txt"), b"one\n");
    let e = failed(op(&s, &token, "write", json!({"file": "a.txt", "content": "two\n"})));
    assert_eq!(e["error_type"], "stale_file");
    let e = failed(op(&s, &token, "replace", json!({"file": "a.txt", "old_str": "one", "new_str": "two"})));
    assert_eq!(e["error_type"], "stale_file");
    let r = upload(&s, &token, "/v1/file/upload", &[("path", None, b"a.txt"), ("file", Some("f"), b"three")]);
    assert_eq!(failed(r)["error_type"], "stale_file");
    assert_eq!(std::fs::read(s.workspace("strict").join("a.txt")).expect("kept"), b"one\n");
    let sha = ok(op(&s, &token, "read", json!({"file": "a.txt"})))["sha256"].as_str().expect("sha").to_string();
    ok(op(&s, &token, "write", json!({"file": "a.txt", "content": "two\n", "expected_sha256": sha})));
    let stale = failed(op(&s, &token, "write", json!({"file": "a.txt", "content": "x", "expected_sha256": sha})));
    assert_eq!(stale["error_type"], "stale_file");
    ok(op(&s, &token, "write", json!({"file": "new.txt", "content": "new files need no hash"})));
}

#[test]
fn a_session_token_reaches_its_own_session_only_and_dies_with_it() {
    let s = http::start(Some(TOKEN), &[]);
    let (a, token_a) = session(&s, "one", json!({}));
    let (_, token_b) = session(&s, "two", json!({}));
    write(&s.workspace("one").join("mine.txt"), b"a\n");
    ok(op(&s, &token_a, "read", json!({"file": "mine.txt"})));
    failed(op(&s, &token_b, "read", json!({"file": "mine.txt"})));
    assert_eq!(s.get(&format!("/v1/sessions/{a}")).json().get("session_token"), None, "shown once, at creation");
    // The operator's token is not a session token, nor the other way round.
    assert_eq!(op(&s, TOKEN, "read", json!({"file": "mine.txt"})).status, 401);
    let r = http::request(
        s.addr,
        "GET",
        &format!("/v1/sessions/{a}"),
        &[("Authorization", &format!("Bearer {token_a}"))],
        b"",
    );
    assert_eq!(r.status, 401);
    let r = op(&s, "trs_not-a-token", "read", json!({"file": "mine.txt"}));
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["success"], false);
    let e = &r.json()["data"];
    assert_eq!((e["error_type"].as_str(), e["errno_name"].as_str()), (Some("unauthorized"), Some("EACCES")), "{e}");
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{a}"), "").status, 204);
    let r = op(&s, &token_a, "read", json!({"file": "mine.txt"}));
    assert_eq!(r.status, 401, "revoked when the session ended: {}", r.text());
}

#[test]
fn operators_reach_the_same_operations_under_the_session() {
    let (s, id, _) = fixture();
    let d = ok(s.call(
        "POST",
        &format!("/v1/sessions/{id}/file/read"),
        r#"{"file": "/workspace/notes.txt", "end_line": 1}"#,
    ));
    assert_eq!(d["content"], "line 0\n");
    let w = ok(s.call(
        "POST",
        &format!("/v1/sessions/{id}/file/write"),
        r#"{"file": "op.txt", "content": "by the operator"}"#,
    ));
    let seq = w["audit_seq"].as_i64().expect("seq");
    let rec = s.get("/v1/audit?workspace=proj&limit=3").json();
    let actor = rec["records"].as_array().and_then(|a| a.iter().find(|x| x["seq"] == seq)).map(|x| x["actor"].clone());
    assert!(actor.is_some_and(|a| !a.as_str().unwrap_or("").starts_with("session:")), "the operator's actor");
    let r = s.call("POST", "/v1/sessions/00000000-0000-4000-8000-000000000000/file/read", r#"{"file": "a"}"#);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["success"], false);
    let (ctype, body) = multipart(&[("path", None, b"up.txt"), ("file", Some("f"), b"op upload")]);
    let auth = format!("Bearer {TOKEN}");
    let r = http::request(
        s.addr,
        "POST",
        &format!("/v1/sessions/{id}/file/upload"),
        &[("Authorization", &auth), ("Content-Type", &ctype)],
        &body,
    );
    ok(r);
    let r = s.get(&format!("/v1/sessions/{id}/file/download?path=up.txt"));
    assert_eq!(r.body, b"op upload");
}

#[test]
fn an_ended_session_reads_from_its_snapshot_and_refuses_writes() {
    let (s, id, _) = fixture();
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{id}"), "").status, 204);
    let d = ok(s.call("POST", &format!("/v1/sessions/{id}/file/read"), r#"{"file": "notes.txt"}"#));
    assert_eq!(d["content"], "line 0\nline 1\nline 2\nline 3\n");
    let e = failed(s.call("POST", &format!("/v1/sessions/{id}/file/write"), r#"{"file": "x.txt", "content": "x"}"#));
    assert_eq!(e["error_type"], "read_only_filesystem");
    // Its sandbox gone, the searches still answer from the snapshot.
    std::fs::remove_dir_all(s.workspace("proj")).expect("rm");
    let grep = ok(s.call("POST", &format!("/v1/sessions/{id}/file/grep"), r#"{"path": "src", "pattern": "TODO"}"#));
    assert_eq!(grep["total"], 1, "{grep}");
    let find = ok(s.call("POST", &format!("/v1/sessions/{id}/file/find"), r#"{"path": "src", "glob": "*.py"}"#));
    assert_eq!(find["files"], json!(["src/app.py"]));
}

#[test]
fn a_name_that_is_not_utf8_is_listed_and_readable() {
    use std::os::unix::ffi::OsStrExt;
    let (s, id, token) = fixture();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(s.workspace("proj").join(name), b"latin-1 name\n").expect("write");
    // The files API takes the raw bytes percent-encoded, and lists them so.
    let files = s.get(&format!("/v1/sessions/{id}/files")).json();
    let f = files["files"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["path"].as_str().is_some_and(|p| p.starts_with("caf"))).cloned())
        .expect("listed");
    assert!(f.to_string().contains("caf"), "{f}");
    let r = s.get(&format!("/v1/sessions/{id}/files/caf%E9.txt?download=1"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.body, b"latin-1 name\n");
    let listed = ok(op(&s, &token, "list", json!({"path": ""})));
    let entry = listed["entries"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"].as_str().is_some_and(|n| n.starts_with("caf"))).cloned())
        .expect("listed");
    assert_eq!(entry["path_base64"], base64::engine::general_purpose::STANDARD.encode(b"caf\xe9.txt"));
    let d = ok(op(&s, &token, "read", json!({"file": entry["path"], "file_base64": entry["path_base64"]})));
    assert_eq!(d["content"], "latin-1 name\n");
    let r = download(&s, &token, &format!("path=x&path_base64={}", "Y2Fm6S50eHQ%3D"));
    assert_eq!(r.body, b"latin-1 name\n");
    ok(op(&s, &token, "write", json!({"file": "x", "file_base64": "Y2Fm6S50eHQ=", "content": "new\n"})));
    assert_eq!(std::fs::read(s.workspace("proj").join(name)).expect("written"), b"new\n");
    // And the files API writes and deletes them by their percent-encoded bytes.
    let r = http::request(
        s.addr,
        "PUT",
        &format!("/v1/sessions/{id}/files/na%EFve.txt"),
        &[("Authorization", &format!("Bearer {TOKEN}")), ("If-None-Match", "*")],
        b"put\n",
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let naive = std::ffi::OsStr::from_bytes(b"na\xefve.txt");
    assert_eq!(std::fs::read(s.workspace("proj").join(naive)).expect("put"), b"put\n");
    assert_eq!(s.call("DELETE", &format!("/v1/sessions/{id}/files/na%EFve.txt"), "").status, 200);
    assert!(!s.workspace("proj").join(naive).exists());
    let e = failed(op(&s, &token, "read", json!({"file": "x", "file_base64": "Li4vZXRj"})));
    assert_eq!(e["error_type"], "invalid_path", "../etc is refused however it is spelt");
}

// ---- The seed's Python client ------------------------------------------------------------------

#[test]
fn a_client_written_like_the_seeds_python_example_works_unchanged() {
    let s = http::start(Some(TOKEN), &[]);
    let (_, token) = session(&s, "py", json!({"sandbox_root": "/home/gem/workspace"}));
    let ws = s.workspace("py");
    write(&ws.join("src/main.py"), b"print('main')\n");
    write(&ws.join("data/one.txt"), b"first\n");
    write(&ws.join("data/two.txt"), b"second\n");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/sandbox_file_api.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", s.addr))
        .arg(&token)
        .output()
        .expect("python3 runs (it is on every CI machine: schemathesis needs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Found: /home/gem/workspace/src/main.py"), "{stdout}");
    assert_eq!(std::fs::read(ws.join("config.json")).expect("config"), b"{\"debug\": true}\n");
    assert_eq!(std::fs::read(ws.join("app.log")).expect("log"), b"Process started\n");
    assert_eq!(std::fs::read(ws.join("data/one_processed.txt")).expect("batch"), b"FIRST\n");
    assert_eq!(std::fs::read(ws.join("data/two_processed.txt")).expect("batch"), b"SECOND\n");
}
