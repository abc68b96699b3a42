//! The agent-framework adapters: `GET /v1/tools` (every tool with the JSON Schemas of its
//! parameters and answer), `trove mcp` on stdio driven by a real MCP client (the `rmcp` crate's,
//! spawning it as a child process: initialize, tools/list, tools/call), the same over
//! streamable HTTP under `trove serve`, and CORS for browser clients.

mod common;

use common::http::{self, write, TOKEN};
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::{json, Value};

#[test]
fn get_v1_tools_lists_every_tool_with_its_parameter_and_result_schemas() {
    let s = http::start(Some(TOKEN), &[]);
    // No token needed: it says what the tools are, not what a workspace holds.
    let r = http::request(s.addr, "GET", "/v1/tools", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let tools = r.json()["tools"].as_array().cloned().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in ["read_file", "write_file", "edit_file", "delete_file", "apply_patch", "files"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    for t in &tools {
        assert_eq!(t["parameters"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()), "{t}");
        assert!(t["result"]["properties"]["ok"].is_object(), "{t}");
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").expect("read_file");
    assert!(read["parameters"]["properties"]["path"].is_object(), "{read}");
}

/// A repository with a session on a workspace holding `notes.txt`; (repo dir guard, repo, id, ws).
fn cli_session() -> (tempfile::TempDir, std::path::PathBuf, String, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let (repo, ws) = (dir.path().join("repo"), dir.path().join("ws"));
    write(&ws.join("notes.txt"), b"one\ntwo\n");
    assert!(common::trove(&repo, &["init"]).status.success());
    let out = common::trove(&repo, &["--json", "session", "create", "--dir", ws.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: Value = serde_json::from_str(&common::stdout(&out)).expect("json");
    (dir, repo, v["id"].as_str().expect("id").to_string(), ws)
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

#[test]
fn trove_mcp_serves_the_tools_to_a_real_mcp_client_over_stdio() {
    let (_dir, repo, id, ws) = cli_session();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(common::trove_bin());
        cmd.arg("--repo").arg(&repo).args(["mcp", "--session", &id]).env_remove("TROVE_REPO");
        let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn trove mcp");
        let client = ().serve(transport).await.expect("initialize");
        let info = client.peer_info().expect("the server's info");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("trove"));
        assert!(info.capabilities.tools.is_some());

        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(names.contains(&"read_file") && names.contains(&"files"), "{names:?}");
        // Annotations say what a tool does to the workspace; an output schema what it answers.
        let tool = |name: &str| tools.iter().find(|t| t.name == name).expect("listed").clone();
        let hints = |name: &str| {
            let a = tool(name).annotations.expect("annotations");
            (a.read_only_hint, a.destructive_hint, a.open_world_hint)
        };
        assert_eq!(hints("read_file"), (Some(true), Some(false), Some(false)));
        assert_eq!(hints("create_file"), (Some(false), Some(false), Some(false)));
        assert_eq!(hints("delete_file"), (Some(false), Some(true), Some(false)));
        let output = tool("read_file").output_schema.expect("read_file declares its output");
        assert_eq!(output["type"], "object");
        let required: Vec<String> = output["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        assert!(required.contains(&"sha256".to_string()), "{required:?}");
        assert!(tool("files").output_schema.is_none(), "files answers a string by default");
        for t in tools.iter().filter(|t| t.name != "files") {
            let output = t.output_schema.as_ref().unwrap_or_else(|| panic!("{} declares no output", t.name));
            assert_eq!(output["type"], "object", "MCP takes an object schema: {}", t.name);
        }

        let read = client
            .call_tool(CallToolRequestParams::new("read_file").with_arguments(args(json!({"path": "notes.txt"}))))
            .await
            .expect("tools/call read_file");
        assert_eq!(read.is_error, Some(false));
        let data = read.structured_content.expect("structured");
        assert_eq!(data["content"], "one\ntwo\n");
        for key in &required {
            assert!(data.get(key).is_some(), "the answer lacks '{key}', which its output schema requires: {data}");
        }
        let sha = data["sha256"].as_str().expect("sha256").to_string();

        let write = client
            .call_tool(
                CallToolRequestParams::new("write_file")
                    .with_arguments(args(json!({"path": "notes.txt", "content": "three\n", "expectedSha256": sha}))),
            )
            .await
            .expect("tools/call write_file");
        assert_eq!(write.is_error, Some(false), "{write:?}");

        // A refusal is a tool error the model can read, not a protocol failure.
        let stale =
            client
                .call_tool(CallToolRequestParams::new("write_file").with_arguments(args(
                    json!({"path": "notes.txt", "content": "x", "expectedSha256": "0".repeat(64)}),
                )))
                .await
                .expect("tools/call answered");
        assert_eq!(stale.is_error, Some(true));
        assert_eq!(stale.structured_content.expect("error")["error"]["kind"], "stale_file");

        let ls = client
            .call_tool(CallToolRequestParams::new("files").with_arguments(args(json!({"params": {"command": "ls"}}))))
            .await
            .expect("tools/call files");
        assert_eq!(ls.is_error, Some(false));
        assert!(format!("{:?}", ls.content).contains("notes.txt"), "{ls:?}");

        let unknown = client.call_tool(CallToolRequestParams::new("rm_rf")).await;
        assert!(unknown.is_err(), "an unknown tool is a protocol error");
        client.cancel().await.expect("close");
    });
    assert_eq!(std::fs::read(ws.join("notes.txt")).expect("written"), b"three\n");
}

#[test]
fn calls_through_trove_mcp_and_trove_tool_keep_a_served_session_from_ending_as_idle() {
    let s = http::start(Some(TOKEN), &["--idle-timeout", "2s", "--reap-interval", "100ms"]);
    let id = s.session(r#"{"workspace": "busy"}"#);
    write(&s.workspace("busy").join("notes.txt"), b"one\n");
    let alive = || s.get(&format!("/v1/sessions/{id}")).status == 200;
    let pace = std::time::Duration::from_millis(300);
    // Another process serves the session's tools to an agent over stdio, for three idle
    // timeouts: `trove serve` must see that work as the session's activity.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(common::trove_bin());
        cmd.arg("--repo").arg(&s.repo).args(["mcp", "--session", &id]).env_remove("TROVE_REPO");
        let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).expect("spawn")).await.expect("initialize");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(6);
        while std::time::Instant::now() < until {
            let read = client
                .call_tool(CallToolRequestParams::new("read_file").with_arguments(args(json!({"path": "notes.txt"}))))
                .await
                .expect("tools/call");
            assert_eq!(read.is_error, Some(false), "{read:?}");
            tokio::time::sleep(pace).await;
        }
        assert!(alive(), "the session ended as idle while an agent worked through trove mcp");
        let write =
            client
                .call_tool(CallToolRequestParams::new("files").with_arguments(args(
                    json!({"params": {"command": "write", "file_path": "new.txt", "content": "x"}}),
                )))
                .await
                .expect("tools/call");
        assert_eq!(write.is_error, Some(false), "writes still go through: {write:?}");
        client.cancel().await.expect("close");
    });
    // The same through `trove tool`, one process per call.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(6);
    while std::time::Instant::now() < until {
        let out = common::trove(&s.repo, &["tool", "read_file", "--session", &id, r#"{"path": "notes.txt"}"#]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        std::thread::sleep(pace);
    }
    assert!(alive(), "the session ended as idle while an agent worked through trove tool");
    // Left alone, it does end: the reaper ran all along.
    assert!(http::eventually(20, || !alive()), "an idle session must still end");
}

/// Parses the JSON-RPC message of a streamable HTTP answer (JSON, or the `data:` of an SSE
/// event).
fn rpc_answer(r: &http::Resp) -> Value {
    let text = r.text();
    if r.header("content-type").is_some_and(|c| c.starts_with("application/json")) {
        return r.json();
    }
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON-RPC message in: {text}"));
    serde_json::from_str(data).expect("JSON-RPC")
}

#[test]
fn the_same_tools_answer_over_streamable_http_under_serve() {
    let s = http::start(Some(TOKEN), &[]);
    let id = s.session(r#"{"workspace": "mcp"}"#);
    write(&s.workspace("mcp").join("a.txt"), b"alpha\n");
    let target = format!("/v1/sessions/{id}/mcp");
    let auth = format!("Bearer {TOKEN}");
    let post = |body: Value, session: Option<&str>| {
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(sid) = session {
            headers.push(("Mcp-Session-Id", sid));
            headers.push(("MCP-Protocol-Version", "2025-06-18"));
        }
        http::request(s.addr, "POST", &target, &headers, body.to_string().as_bytes())
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        None,
    );
    assert_eq!(init.status, 200, "{}", init.text());
    let sid = init.header("mcp-session-id").expect("an MCP session").to_string();
    assert_eq!(rpc_answer(&init)["result"]["serverInfo"]["name"], "trove");
    let r = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&sid));
    assert!(r.status == 202 || r.status == 200, "{}", r.text());
    let list = rpc_answer(&post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), Some(&sid)));
    assert!(list["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "files")), "{list}");
    let call = rpc_answer(&post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        Some(&sid),
    ));
    assert_eq!(call["result"]["structuredContent"]["content"], "alpha\n", "{call}");
    // Closing the MCP session answers 200, as the official SDKs expect (they log anything else
    // but 405 as a failed close); the session is gone after.
    let headers =
        [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid.as_str()), ("MCP-Protocol-Version", "2025-06-18")];
    let closed = http::request(s.addr, "DELETE", &target, &headers, b"");
    assert_eq!(closed.status, 200, "{}", closed.text());
    let after = post(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}), Some(&sid));
    assert_eq!(after.status, 404, "a closed MCP session is gone: {}", after.text());
    // The MCP library's refusals answer as every route's errors do: JSON, with the status the
    // document gives (a body that is no JSON-RPC message is a 400).
    let not_rpc = post(json!({"hello": "world"}), None);
    assert_eq!(not_rpc.status, 400, "{}", not_rpc.text());
    assert_eq!(not_rpc.header("content-type"), Some("application/json"));
    assert_eq!(not_rpc.json()["kind"], "invalid_argument");
    let plain = http::request(s.addr, "GET", &target, &[("Authorization", auth.as_str())], b"");
    assert_eq!((plain.status, plain.header("content-type")), (406, Some("application/json")), "{}", plain.text());
    // The operator's token guards it like every route.
    let r = http::request(s.addr, "POST", &target, &[("Content-Type", "application/json")], b"{}");
    assert_eq!(r.status, 401);
}

#[test]
fn cors_answers_preflights_and_marks_answers_for_allowed_origins_only() {
    let s = http::start(Some(TOKEN), &["--cors-origin", "https://app.example.com"]);
    let pre = http::request(
        s.addr,
        "OPTIONS",
        "/v1/sessions",
        &[
            ("Origin", "https://app.example.com"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "authorization, content-type"),
        ],
        b"",
    );
    assert_eq!(pre.status, 204, "a preflight needs no token: {}", pre.text());
    assert_eq!(pre.header("access-control-allow-origin"), Some("https://app.example.com"));
    assert!(pre.header("access-control-allow-methods").is_some_and(|m| m.contains("POST")));
    assert!(pre.header("access-control-allow-headers").is_some_and(|h| h.contains("authorization")));
    let auth = format!("Bearer {TOKEN}");
    let r = http::request(
        s.addr,
        "GET",
        "/v1/sessions",
        &[("Origin", "https://app.example.com"), ("Authorization", &auth)],
        b"",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example.com"));
    let other = http::request(
        s.addr,
        "GET",
        "/v1/sessions",
        &[("Origin", "https://evil.example"), ("Authorization", &auth)],
        b"",
    );
    assert_eq!(other.header("access-control-allow-origin"), None);
    // Unknown routes answer 404 with the error body, CORS or not.
    let r = http::request(s.addr, "GET", "/v1/nowhere", &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["kind"], "not_found");
}
