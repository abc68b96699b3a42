//! The unified `files` tool (`../shared/seeds/unified-files-tool.md`), walked section by
//! section: the commands with their parameters, default string results and typed results (per
//! call and per session), the read caps, delete into the trash, over HTTP and `trove tool`.

mod common;

use common::http::{self, write, Server, TOKEN};
use serde_json::{json, Value};

/// A server with session `proj` holding `docs/README.md` (3 lines) and `pyproject.toml`.
fn fixture(extra: Value) -> (Server, String) {
    let s = http::start(Some(TOKEN), &[]);
    let mut body = json!({"workspace": "proj"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let id = s.session(&body.to_string());
    let ws = s.workspace("proj");
    write(&ws.join("docs/README.md"), b"# Title\n\nSome text.\n");
    write(&ws.join("pyproject.toml"), b"version = \"0.1.0\"\nother = \"0.1.0\"\n");
    (s, id)
}

/// Calls the tool; the envelope.
fn files(s: &Server, id: &str, call: Value) -> Value {
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/files"), &call.to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// The result of a call that must succeed.
fn ok(s: &Server, id: &str, call: Value) -> Value {
    let v = files(s, id, call);
    assert_eq!(v["ok"], true, "{v}");
    v["data"].clone()
}

#[test]
fn ls_lists_every_file_as_a_list_of_strings_by_default() {
    let (s, id) = fixture(json!({}));
    assert_eq!(ok(&s, &id, json!({"params": {"command": "ls"}})), json!(["docs/README.md", "pyproject.toml"]));
}

#[test]
fn read_answers_numbered_lines_from_offset_up_to_limit() {
    let (s, id) = fixture(json!({}));
    let all = ok(&s, &id, json!({"params": {"command": "read", "file_path": "docs/README.md"}}));
    assert_eq!(all, json!("     1\t# Title\n     2\t\n     3\tSome text."));
    let part =
        ok(&s, &id, json!({"params": {"command": "read", "file_path": "docs/README.md", "offset": 1, "limit": 1}}));
    assert_eq!(part, json!("     2\t"));
    let v = files(&s, &id, json!({"params": {"command": "read", "file_path": "docs/README.md", "offset": 9}}));
    assert_eq!(v["ok"], false);
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("offset 9"), "{v}");
}

#[test]
fn read_caps_lines_at_2000_characters_and_2000_lines_by_default() {
    let (s, id) = fixture(json!({}));
    let ws = s.workspace("proj");
    let long = "x".repeat(5000);
    let many: String = (0..2500).map(|i| format!("{i}\n")).collect();
    write(&ws.join("long.txt"), format!("{long}\n").as_bytes());
    write(&ws.join("many.txt"), many.as_bytes());
    let got = ok(&s, &id, json!({"params": {"command": "read", "file_path": "long.txt"}}));
    assert_eq!(got.as_str().map(str::len), Some(7 + 2000), "six columns, a tab, 2000 characters");
    let got = ok(&s, &id, json!({"params": {"command": "read", "file_path": "many.txt"}}));
    let lines: Vec<&str> = got.as_str().unwrap_or("").lines().collect();
    assert_eq!(lines.len(), 2000);
    assert_eq!(lines[1999], "  2000\t1999");
}

#[test]
fn write_replaces_a_file_and_keeps_the_old_content_as_a_pre_image() {
    let (s, id) = fixture(json!({}));
    let got = ok(&s, &id, json!({"params": {"command": "write", "file_path": "docs/note.md", "content": "Hello"}}));
    assert!(got.as_str().unwrap_or("").contains("docs/note.md"), "{got}");
    assert_eq!(std::fs::read(s.workspace("proj").join("docs/note.md")).expect("written"), b"Hello");
    let again = ok(
        &s,
        &id,
        json!({"params": {"command": "write", "file_path": "docs/note.md", "content": "Again"}, "typed_results": true}),
    );
    let seq = again["audit_seq"].as_i64().expect("audited");
    let out = common::trove(&s.repo, &["revert", &seq.to_string()]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(std::fs::read(s.workspace("proj").join("docs/note.md")).expect("back"), b"Hello");
}

#[test]
fn edit_replaces_one_occurrence_or_all_with_replace_all() {
    let (s, id) = fixture(json!({}));
    let ambiguous = files(
        &s,
        &id,
        json!({"params": {"command": "edit", "file_path": "pyproject.toml", "old_string": "0.1.0", "new_string": "0.1.1"}}),
    );
    assert_eq!(ambiguous["ok"], false, "two occurrences and no replace_all: {ambiguous}");
    let once = ok(
        &s,
        &id,
        json!({"params": {"command": "edit", "file_path": "pyproject.toml", "old_string": "version = \"0.1.0\"", "new_string": "version = \"0.1.1\""}}),
    );
    assert!(once.as_str().unwrap_or("").contains("1 occurrence"), "{once}");
    let all = ok(
        &s,
        &id,
        json!({"params": {"command": "edit", "file_path": "pyproject.toml", "old_string": "\"0.1", "new_string": "\"0.2", "replace_all": true}, "typed_results": true}),
    );
    assert_eq!(all["replaced"], 2);
    assert_eq!(all["path"], "pyproject.toml");
    let text = std::fs::read_to_string(s.workspace("proj").join("pyproject.toml")).expect("read");
    assert_eq!(text, "version = \"0.2.1\"\nother = \"0.2.0\"\n");
}

#[test]
fn delete_moves_the_file_to_the_trash_from_where_it_is_restored() {
    let (s, id) = fixture(json!({}));
    let d = ok(&s, &id, json!({"params": {"command": "delete", "file_path": "docs/README.md"}, "typed_results": true}));
    let trash_id = d["trash_id"].as_str().expect("a trash id").to_string();
    assert!(!s.workspace("proj").join("docs/README.md").exists());
    let r = s.call("POST", &format!("/v1/sessions/{id}/tools/restore_file"), &json!({"trashId": trash_id}).to_string());
    assert_eq!(r.json()["ok"], true, "{}", r.text());
    assert_eq!(std::fs::read(s.workspace("proj").join("docs/README.md")).expect("back"), b"# Title\n\nSome text.\n");
}

#[test]
fn typed_results_per_call_give_the_seeds_result_models_and_the_sha256() {
    let (s, id) = fixture(json!({}));
    let typed = |p: Value| ok(&s, &id, json!({"params": p, "typed_results": true}));
    assert_eq!(typed(json!({"command": "ls"})), json!({"files": ["docs/README.md", "pyproject.toml"]}));
    let r = typed(json!({"command": "read", "file_path": "docs/README.md", "limit": 1}));
    assert_eq!(r["lines"], json!(["     1\t# Title"]));
    assert!(r["summary"].is_string());
    assert_eq!(r["sha256"], http::sha256_hex(b"# Title\n\nSome text.\n"), "ready for the stale-file tools");
    let w = typed(json!({"command": "write", "file_path": "n.txt", "content": "x"}));
    assert_eq!((w["path"].as_str(), w["summary"].is_string()), (Some("n.txt"), true));
    let d = typed(json!({"command": "delete", "file_path": "n.txt"}));
    assert_eq!((d["path"].as_str(), d["summary"].is_string()), (Some("n.txt"), true));
}

#[test]
fn a_session_created_with_typed_results_answers_typed_unless_a_call_says_otherwise() {
    let (s, id) = fixture(json!({"typed_results": true}));
    assert!(ok(&s, &id, json!({"params": {"command": "ls"}}))["files"].is_array());
    assert!(ok(&s, &id, json!({"params": {"command": "ls"}, "typed_results": false})).is_array());
}

#[test]
fn instance_is_accepted_and_bad_params_are_refused_by_name() {
    let (s, id) = fixture(json!({}));
    ok(&s, &id, json!({"params": {"command": "ls", "instance": "default"}}));
    for bad in [
        json!({"params": {"command": "rm"}}),
        json!({"params": {"command": "read"}}),
        json!({"params": {"command": "ls", "file_path": "x"}}),
        json!({"command": "ls"}),
    ] {
        let r = s.call("POST", &format!("/v1/sessions/{id}/tools/files"), &bad.to_string());
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
}

#[test]
fn paths_outside_the_workspace_and_scope_are_refused_and_change_nothing() {
    let (s, id) = fixture(json!({"file_access": {"read": ["docs"], "write": ["docs"]}}));
    assert_eq!(ok(&s, &id, json!({"params": {"command": "ls"}})), json!(["docs/README.md"]));
    for p in [
        json!({"command": "read", "file_path": "pyproject.toml"}),
        json!({"command": "write", "file_path": "../escape.txt", "content": "x"}),
        json!({"command": "write", "file_path": "/etc/passwd", "content": "x"}),
        json!({"command": "delete", "file_path": "pyproject.toml"}),
    ] {
        assert_eq!(files(&s, &id, json!({"params": p}))["ok"], false, "{p}");
    }
    assert!(s.workspace("proj").join("pyproject.toml").exists());
}

#[test]
fn a_session_that_requires_sha256_refuses_blind_changes_with_the_stale_file_error() {
    let (s, id) = fixture(json!({"require_sha256": true}));
    let v = files(&s, &id, json!({"params": {"command": "write", "file_path": "pyproject.toml", "content": "x"}}));
    assert_eq!(v["error"]["kind"], "stale_file", "{v}");
    ok(&s, &id, json!({"params": {"command": "write", "file_path": "new.txt", "content": "x"}}));
}

#[test]
fn trove_tool_files_runs_the_same_tool_from_the_command_line() {
    let (s, id) = fixture(json!({}));
    let out = common::trove(&s.repo, &["tool", "files", "--session", &id, r#"{"params": {"command": "ls"}}"#]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: Value = serde_json::from_str(&common::stdout(&out)).expect("json");
    assert_eq!(v["data"], json!(["docs/README.md", "pyproject.toml"]));
}
