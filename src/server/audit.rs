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
    /// Pass as `after` to read on (the last record's seq); absent when there were none.
    next_after: Option<i64>,
}

/// `GET /v1/audit`: the records the filters select, oldest first.
pub(super) async fn query(State(st): State<Arc<AppState>>, Q(q): Q<AuditParams>) -> Result<Response, ApiError> {
    let query = q.query()?;
    let proof = q.proof.unwrap_or(false);
    let records = st
        .blocking(move |_, repo| {
            let mut records: Vec<AuditEntry> = repo.audit_query(&query)?.iter().map(|r| r.entry()).collect();
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
    let entries = st.blocking(move |_, repo| repo.path_history(&q.workspace, &rel, limit as usize)).await?;
    Ok(axum::Json(entries).into_response())
}

/// `GET /v1/audit/checkpoint`: the latest signed checkpoint.
pub(super) async fn checkpoint(State(st): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let c = st
        .blocking(|_, repo| {
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
}

/// `GET /v1/audit/proof/{seq}`: the inclusion proof of record `seq`.
pub(super) async fn proof(
    State(st): State<Arc<AppState>>,
    P(seq): P<i64>,
    Q(q): Q<ProofParams>,
) -> Result<Response, ApiError> {
    let p = st.blocking(move |_, repo| repo.inclusion_proof(seq, q.size)).await?;
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
}

/// `GET /v1/audit/consistency?from=&to=`: the proof that the log of `to` records extends the
/// log of `from` records.
pub(super) async fn consistency(
    State(st): State<Arc<AppState>>,
    Q(q): Q<ConsistencyParams>,
) -> Result<Response, ApiError> {
    let p = st.blocking(move |_, repo| repo.consistency_proof(q.from, q.to)).await?;
    Ok(axum::Json(p).into_response())
}

/// The reading tools, audited as reads with `--audit-reads`.
const READING_TOOLS: &[&str] = &["read_file", "list_directory", "search_files", "glob"];

/// Middleware: with `--audit-reads`, every successful read (a `GET`, or a reading tool) is
/// recorded (`read`: who, the route, the session, the file path, the status) before it is
/// answered.
pub(super) async fn record_reads(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if !st.opts.audit_reads {
        return next.run(req).await;
    }
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    let method = req.method().clone();
    let target = req.uri().path().to_string();
    let tool = route.ends_with("/tools/{tool}").then(|| target.rsplit('/').next().unwrap_or("").to_string());
    let is_read = method == axum::http::Method::GET || tool.as_deref().is_some_and(|t| READING_TOOLS.contains(&t));
    let resp = next.run(req).await;
    if !is_read || !(resp.status().is_success() || resp.status() == axum::http::StatusCode::NOT_MODIFIED) {
        return resp;
    }
    let actor = super::request::actor();
    let status = resp.status().as_u16();
    let record = move || {
        let mut rec = AuditRecord::ok(now_ns(), &actor, "read");
        let mut parts = target.split('/');
        if let Some(id) = parts.by_ref().skip_while(|p| *p != "sessions").nth(1) {
            rec.session = SessionId::parse(id).ok();
        }
        if let Some((_, file)) = target.split_once("/files/") {
            rec.path = crate::base::path::from_url(file).ok();
        }
        rec.details = serde_json::json!({"method": method.as_str(), "route": route, "target": target, "tool": tool, "status": status});
        rec
    };
    let _ = st
        .blocking(move |st, _| {
            st.audit_read(record);
            Ok::<_, Error>(())
        })
        .await;
    resp
}
