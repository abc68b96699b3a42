//! The audit log over HTTP: queries with the CLI's filters and cursor (`GET /v1/audit`), a live
//! Server-Sent Events stream that resumes from `Last-Event-ID` (`GET /v1/audit/stream`), a
//! path's history, the latest checkpoint, inclusion and consistency proofs; and, with
//! `--audit-reads`, the middleware that records every read.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::{P, Q};
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::base::time::now_ns;
use crate::model::audit::{AuditEntry, AuditQuery, AuditRecord, Order};

/// The default and the largest page.
const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 1000;
/// How often the stream looks for new records, and sends a comment to keep the line open.
const POLL: Duration = Duration::from_millis(250);
const KEEPALIVE: Duration = Duration::from_secs(15);

fn date_time_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "format": "date-time"})
}

fn time(name: &str, text: Option<&str>) -> Result<Option<i64>> {
    text.map(|t| {
        crate::base::time::parse_rfc3339(t).ok_or_else(|| {
            Error::invalid_argument(format!("{name} '{t}' is not an RFC 3339 time such as 2026-11-24T10:00:00Z"))
        })
    })
    .transpose()
}

/// The filters of `GET /v1/audit` and its stream.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditParams {
    /// Only records at or after this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    since: Option<String>,
    /// Only records before this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    until: Option<String>,
    /// Only this actor's (a token id, `cli:<user>`, ...).
    actor: Option<String>,
    /// Only this session's.
    session: Option<SessionId>,
    /// Only this workspace's.
    workspace: Option<String>,
    /// Only this operation's (`write_file`, `trash_purge`, `session_end`, ...).
    operation: Option<String>,
    /// Only this outcome's (`ok`, or an error kind).
    outcome: Option<String>,
    /// Only records of exactly this path.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::nonempty_schema")]
    path: Option<String>,
    /// Only records of this path or below it.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
    /// Only records after this seq, oldest first (the previous page's `nextAfter`).
    #[schemars(range(min = 0))]
    after: Option<i64>,
    /// Records a page, 1 to 1000 (default 100).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u64>,
    /// `true`: each record with its inclusion proof against the latest checkpoint.
    proof: Option<bool>,
    /// In a fleet's bucket: only this node's log. By default every node's, merged by time (one
    /// page, no `nextAfter`: `after` and `proof` need one node's log).
    node: Option<crate::base::id::NodeName>,
}

impl AuditParams {
    fn query(&self) -> Result<AuditQuery> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::invalid_argument(format!("limit {limit} is not from 1 to {MAX_LIMIT}")));
        }
        if self.path.is_some() && self.prefix.is_some() {
            return Err(Error::invalid_argument("give path or prefix, not both"));
        }
        if self.after.is_some_and(|a| a < 0) {
            return Err(Error::invalid_argument("after is a seq: 0 or more"));
        }
        Ok(AuditQuery {
            actor: self.actor.clone(),
            session: self.session.clone(),
            workspace: self.workspace.clone(),
            operation: self.operation.clone(),
            outcome: self.outcome.clone(),
            path: self
                .path
                .as_deref()
                .map(|p| match crate::base::path::from_text(p)? {
                    rel if rel.is_empty() => Err(Error::new(
                        crate::base::error::ErrorKind::InvalidPath,
                        "path names a file or directory below the root: use prefix for everything",
                    )),
                    rel => Ok(rel),
                })
                .transpose()?,
            prefix: self.prefix.as_deref().map(crate::base::path::from_text).transpose()?,
            since_ns: time("since", self.since.as_deref())?,
            until_ns: time("until", self.until.as_deref())?,
            order: self.after.map_or(Order::Newest, Order::After),
            limit: limit as usize,
        })
    }
}

/// A page of `GET /v1/audit`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuditPage {
    /// The records, oldest first.
    records: Vec<AuditEntry>,
    /// Pass as `after` to read on (the last record's seq); absent when there were none, and
    /// from a fleet's merged page (a seq is one node's).
    next_after: Option<i64>,
}

/// `GET /v1/audit`: the records the filters select, oldest first.
pub(super) async fn query(State(st): State<Arc<AppState>>, Q(q): Q<AuditParams>) -> Result<Response, ApiError> {
    let query = q.query()?;
    let proof = q.proof.unwrap_or(false);
    let node = st.named_node(q.node.clone())?;
    if st.in_fleet && node.is_none() {
        if proof || q.after.is_some() {
            return Err(Error::invalid_argument(
                "after and proof need one node's log (a seq is a position in one): in a fleet, add node=NODE",
            )
            .into());
        }
        let records = st.blocking_fleet(move |_, views| crate::ops::fleet::fleet_audit(views, &query)).await?;
        return Ok(axum::Json(AuditPage { records, next_after: None }).into_response());
    }
    let records = st
        .blocking_on(node, move |_, repo| {
            let mut records = crate::ops::fleet::fleet_audit(&[(repo.node(), repo)], &query)?;
            if proof {
                let size = repo.latest_checkpoint()?.map_or(0, |c| c.size);
                for r in records.iter_mut().filter(|r| r.seq as u64 <= size) {
                    r.proof = Some(repo.inclusion_proof(r.seq, Some(size))?);
                }
            }
            Ok::<_, Error>(records)
        })
        .await?;
    let next_after = records.last().map(|r| r.seq);
    Ok(axum::Json(AuditPage { records, next_after }).into_response())
}

/// `GET /v1/audit/stream`: Server-Sent Events, one `record` event per record (its seq as the
/// event id), from `after` or the `Last-Event-ID` header on, or from now; new records as they
/// are appended.
pub(super) async fn stream(
    State(st): State<Arc<AppState>>,
    Q(q): Q<AuditParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if q.node.is_some() {
        return Err(Error::invalid_argument(
            "the stream follows this node's log: read another node's with GET /v1/audit?node=NODE&after=SEQ",
        )
        .into());
    }
    let mut query = q.query()?;
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(|v| {
        v.trim().parse::<i64>().map_err(|_| Error::invalid_argument(format!("Last-Event-ID '{v}' is not a seq")))
    });
    let start = match (resume.transpose()?, q.after) {
        (Some(seq), _) | (None, Some(seq)) => seq,
        (None, None) => st.blocking(|_, repo| repo.audit_size()).await? as i64,
    };
    query.order = Order::After(start);
    query.limit = MAX_LIMIT as usize;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    let state = st.clone();
    tokio::spawn(async move {
        let mut quiet = Duration::ZERO;
        loop {
            let q = query.clone();
            let got = state.blocking(move |_, repo| repo.audit_query(&q)).await;
            let records = match got {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "the audit stream stopped");
                    return;
                }
            };
            let mut text = String::new();
            for r in &records {
                let data = serde_json::to_string(&r.entry()).unwrap_or_default();
                text.push_str(&format!("id: {}\nevent: record\ndata: {data}\n\n", r.seq));
                query.order = Order::After(r.seq);
            }
            if records.is_empty() {
                quiet += POLL;
                if quiet >= KEEPALIVE {
                    text.push_str(": still here\n\n");
                    quiet = Duration::ZERO;
                }
            } else {
                quiet = Duration::ZERO;
            }
            if !text.is_empty() && tx.send(Ok(Bytes::from(text))).await.is_err() {
                return;
            }
            if records.len() < query.limit {
                tokio::time::sleep(POLL).await;
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| (piece, rx))
    }));
    let mut resp = body.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// The query of `GET /v1/audit/history`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryParams {
    /// The workspace.
    workspace: String,
    /// The path.
    #[schemars(schema_with = "path_schema")]
    path: String,
    /// At most this many records, 1 to 10000 (default 100).
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<u64>,
    /// In a fleet's bucket: node NODE's log (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

fn path_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "pattern": crate::base::path::pattern_nonempty()})
}

/// `GET /v1/audit/history?workspace=&path=`: every recorded change to the path, newest first,
/// renames followed.
pub(super) async fn history(State(st): State<Arc<AppState>>, Q(q): Q<HistoryParams>) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=10_000).contains(&limit) {
        return Err(Error::invalid_argument(format!("limit {limit} is not from 1 to 10000")).into());
    }
    let rel = crate::base::path::from_text(&q.path)?;
    if rel.is_empty() {
        return Err(Error::invalid_argument("history names a path below the workspace's root").into());
    }
    let node = st.named_node(q.node.clone())?;
    let entries = st.blocking_on(node, move |_, repo| repo.path_history(&q.workspace, &rel, limit as usize)).await?;
    Ok(axum::Json(entries).into_response())
}

/// The query of `GET /v1/audit/checkpoint`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckpointParams {
    /// In a fleet's bucket: node NODE's log (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

/// `GET /v1/audit/checkpoint`: the latest signed checkpoint (in a fleet, of `node`'s log).
pub(super) async fn checkpoint(
    State(st): State<Arc<AppState>>,
    Q(q): Q<CheckpointParams>,
) -> Result<Response, ApiError> {
    let node = st.named_node(q.node.clone())?;
    let c = st
        .blocking_on(node, |_, repo| {
            repo.latest_checkpoint()?.ok_or_else(|| Error::not_found("no checkpoint has been written yet"))
        })
        .await?;
    Ok(axum::Json(c.record()).into_response())
}

/// The query of `GET /v1/audit/proof/{seq}`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ProofParams {
    /// The tree size to prove against (default: the latest checkpoint's).
    #[schemars(range(min = 1))]
    size: Option<u64>,
    /// In a fleet's bucket: node NODE's log (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

/// `GET /v1/audit/proof/{seq}`: the inclusion proof of record `seq`.
pub(super) async fn proof(
    State(st): State<Arc<AppState>>,
    P(seq): P<i64>,
    Q(q): Q<ProofParams>,
) -> Result<Response, ApiError> {
    let node = st.named_node(q.node.clone())?;
    let p = st.blocking_on(node, move |_, repo| repo.inclusion_proof(seq, q.size)).await?;
    Ok(axum::Json(p).into_response())
}

/// The query of `GET /v1/audit/consistency`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConsistencyParams {
    /// The smaller size.
    #[schemars(range(min = 1))]
    from: u64,
    /// The larger size.
    #[schemars(range(min = 1))]
    to: u64,
    /// In a fleet's bucket: node NODE's log (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

/// `GET /v1/audit/consistency?from=&to=`: the proof that the log of `to` records extends the
/// log of `from` records.
pub(super) async fn consistency(
    State(st): State<Arc<AppState>>,
    Q(q): Q<ConsistencyParams>,
) -> Result<Response, ApiError> {
    let node = st.named_node(q.node.clone())?;
    let p = st.blocking_on(node, move |_, repo| repo.consistency_proof(q.from, q.to)).await?;
    Ok(axum::Json(p).into_response())
}

/// The reading tools, audited as reads with `--audit-reads`.
const READING_TOOLS: &[&str] = &["read_file", "list_directory", "search_files", "glob"];
/// The sandbox file API's reading operations (`POST .../file/{op}`).
const READING_OPS: &[&str] = &["read", "search", "find", "grep", "glob", "list"];

/// The path a read names, as its request gave it.
#[derive(Debug, Default)]
enum Asked {
    #[default]
    Nothing,
    /// Decoded from the URL (`.../files/{*path}`): workspace-relative bytes.
    Url(Vec<u8>),
    /// As given in a query or body: workspace-relative, or absolute under the sandbox root; or
    /// its exact bytes in base64.
    Given { text: String, base64: Option<String> },
}

/// What a request is, for `--audit-reads`: whether it reads, and where it names its path.
struct ReadRoute {
    /// The tool, for `.../tools/{tool}`.
    tool: Option<String>,
    /// Whether the path is in the JSON body (held for it).
    in_body: bool,
    /// An MCP message: a read only when it calls a reading tool.
    mcp: bool,
}

/// Whether `method` on `route` (`target` as sent) may be a read, and where its path is.
fn read_route(method: &axum::http::Method, route: &str, target: &str) -> Option<ReadRoute> {
    let (post, get) = (*method == axum::http::Method::POST, *method == axum::http::Method::GET);
    if route.ends_with("/tools/{tool}") {
        let tool = target.rsplit('/').next().unwrap_or("").to_string();
        return is_reading_tool(&tool).then_some(ReadRoute { tool: Some(tool), in_body: true, mcp: false });
    }
    if route.ends_with("/mcp") {
        // A GET is the server's event channel, not a read of anything.
        return post.then_some(ReadRoute { tool: None, in_body: true, mcp: true });
    }
    if post {
        let op = route.strip_prefix("/v1/file/").or_else(|| route.split_once("/file/").map(|(_, op)| op));
        return op.filter(|op| READING_OPS.contains(op)).map(|_| ReadRoute { tool: None, in_body: true, mcp: false });
    }
    get.then_some(ReadRoute { tool: None, in_body: false, mcp: false })
}

fn is_reading_tool(tool: &str) -> bool {
    READING_TOOLS.contains(&tool) || tool == crate::tools::files::NAME
}

/// The path a tool call's parameters name: `path`, or the `files` tool's `params.file_path`
/// when its command reads (`None`: the call reads nothing, a `files` write for one).
fn tool_path(tool: &str, params: &serde_json::Value) -> Option<Asked> {
    let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(|p| p.as_str()).map(str::to_string);
    if tool == crate::tools::files::NAME {
        let params = params.get("params").cloned().unwrap_or_default();
        return match text(&params, "command").as_deref() {
            Some("read") => {
                Some(text(&params, "file_path").map_or(Asked::Nothing, |p| Asked::Given { text: p, base64: None }))
            }
            Some("ls") => Some(Asked::Nothing),
            _ => None,
        };
    }
    Some(text(params, "path").map_or(Asked::Nothing, |p| Asked::Given { text: p, base64: None }))
}

/// The reads an MCP message asks for: each `tools/call` of a reading tool (a batch may hold
/// several), as (tool, path).
fn mcp_reads(body: &[u8]) -> Vec<(String, Asked)> {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let messages = match v {
        serde_json::Value::Array(all) => all,
        one => vec![one],
    };
    messages
        .iter()
        .filter(|m| m.get("method").and_then(|m| m.as_str()) == Some("tools/call"))
        .filter_map(|m| {
            let name = m.pointer("/params/name").and_then(|n| n.as_str()).filter(|n| is_reading_tool(n))?;
            let args = m.pointer("/params/arguments").cloned().unwrap_or_default();
            Some((name.to_string(), tool_path(name, &args)?))
        })
        .collect()
}

/// The path a read names: in its URL (`/files/{*path}`), its query (a download's `path` or
/// `path_base64`, an export's `path`, a snapshot listing's or trash export's `prefix`) or its
/// JSON body (`path`, `file`, `file_base64`; a tool's parameters). `None`: not a read after all
/// (a `files` call that writes).
fn asked(
    route: &str,
    target: &str,
    query: &[(String, String)],
    body: Option<&[u8]>,
    tool: Option<&str>,
) -> Option<Asked> {
    if route.ends_with("/files/{*path}") {
        return Some(match target.split_once("/files/").map(|(_, f)| crate::base::path::from_url(f)) {
            Some(Ok(p)) => Asked::Url(p),
            _ => Asked::Nothing,
        });
    }
    if let Some(body) = body {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        if let Some(tool) = tool {
            return tool_path(tool, &v);
        }
        let text = |k: &str| v.get(k).and_then(|p| p.as_str()).map(str::to_string);
        return Some(match text("file").or_else(|| text("path")) {
            Some(p) => Asked::Given { text: p, base64: text("file_base64").or_else(|| text("path_base64")) },
            None => Asked::Nothing,
        });
    }
    // Only where the query names what is read: elsewhere (`GET /v1/audit?path=`) it is a filter.
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let named = match route {
        r if r.ends_with("/file/download") || r == "/v1/snapshots/{snap}/export" => get("path"),
        "/v1/snapshots/{snap}/files" | "/v1/trash/export" => get("prefix"),
        _ => None,
    };
    Some(match named {
        Some(p) => Asked::Given { text: p, base64: get("path_base64") },
        None => Asked::Nothing,
    })
}

/// The body of `req` read whole (up to `limit` bytes) and the request with the same bytes to
/// hand on. A body over the limit, or one that fails, is handed on as it came (what was read,
/// then the rest), for the handler to refuse as it does; nothing is held of it then.
async fn hold_body(req: Request, limit: usize) -> (Request, Option<Bytes>) {
    use futures_util::StreamExt;
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut held: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let passed = match chunk {
            Ok(c) => {
                held.extend_from_slice(&c);
                if held.len() <= limit {
                    continue;
                }
                futures_util::stream::iter([Ok(Bytes::from(held))]).chain(stream).boxed()
            }
            Err(e) => futures_util::stream::iter([Ok(Bytes::from(held)), Err(e)]).boxed(),
        };
        return (Request::from_parts(parts, Body::from_stream(passed)), None);
    }
    let bytes = Bytes::from(held);
    (Request::from_parts(parts, Body::from(bytes.clone())), Some(bytes))
}

/// Middleware: with `--audit-reads`, every successful read (a `GET`, a reading tool over its
/// route or MCP, a reading operation of the file API) is recorded (`read`: who, the session and
/// its workspace, or the snapshot's, the path read, the route, the status) once it is answered,
/// so "who read X" is `trove audit log --path X --operation read`. A path given absolute under
/// the sandbox root is recorded workspace-relative, as every other record's.
pub(super) async fn record_reads(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if !st.opts.audit_reads {
        return next.run(req).await;
    }
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    let method = req.method().clone();
    let target = req.uri().path().to_string();
    let query = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(req.uri()).map(|q| q.0).unwrap_or_default();
    let Some(read) = read_route(&method, &route, &target) else { return next.run(req).await };
    let (req, body) = if read.in_body { hold_body(req, st.opts.body_limit).await } else { (req, None) };
    let reads: Vec<(Option<String>, Asked)> = if read.mcp {
        body.as_deref().map(mcp_reads).unwrap_or_default().into_iter().map(|(t, a)| (Some(t), a)).collect()
    } else {
        asked(&route, &target, &query, body.as_deref(), read.tool.as_deref())
            .map(|a| (read.tool, a))
            .into_iter()
            .collect()
    };
    if reads.is_empty() {
        return next.run(req).await;
    }
    let token_session = req.extensions().get::<super::fileapi::TokenSession>().map(|t| t.0.clone());
    let resp = next.run(req).await;
    if !(resp.status().is_success() || resp.status() == axum::http::StatusCode::NOT_MODIFIED) {
        return resp;
    }
    let actor = super::request::actor();
    let status = resp.status().as_u16();
    let _ = st
        .blocking(move |st, repo| {
            let mut parts = target.split('/');
            let in_url = parts.by_ref().skip_while(|p| *p != "sessions").nth(1);
            let session_id = in_url.and_then(|id| SessionId::parse(id).ok()).or(token_session);
            let session = session_id.as_ref().and_then(|id| repo.session(id).ok());
            let (mut workspace, mut snapshot) = (session.as_ref().map(|s| s.workspace.clone()), None);
            if let Some(snap) = route.strip_prefix("/v1/snapshots/{snap}").and_then(|_| target.split('/').nth(3)) {
                if let Ok(info) = repo.resolve_snapshot(snap, None) {
                    workspace = Some(info.workspace.clone());
                    snapshot = Some(info.id.to_string());
                }
            }
            for (tool, asked) in reads {
                st.audit_read(|| {
                    let mut rec = AuditRecord::ok(now_ns(), &actor, "read");
                    rec.session = session_id.clone();
                    rec.workspace = workspace.clone();
                    rec.path = match asked {
                        Asked::Nothing => None,
                        Asked::Url(p) => Some(p),
                        Asked::Given { text, base64 } => match &session {
                            Some(s) => crate::tools::fileapi::Sandbox::new(repo, s, "", &st.opts.sandbox_root)
                                .rel_exact(&text, base64.as_deref())
                                .ok()
                                .map(|(rel, _)| rel),
                            None => crate::base::path::from_text(&text).ok(),
                        },
                    }
                    .filter(|p| !p.is_empty());
                    rec.details = serde_json::json!({
                        "method": method.as_str(), "route": route, "target": target, "tool": tool,
                        "snapshot": snapshot, "status": status,
                    });
                    rec
                });
            }
            Ok::<_, Error>(())
        })
        .await;
    resp
}
