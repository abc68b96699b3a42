//! Reviewing over HTTP: diffs between snapshots and of a session, what a session changed, a
//! path's history, search inside a snapshot, and finding paths across snapshots.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::session_missing;
use super::extract::{P, Q};
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::base::path;
use crate::model::scope::Scope;
use crate::ops::diff::{DiffOptions, DiffTarget, DEFAULT_RENAME_THRESHOLD};
use crate::ops::search::{Matcher, SearchMode, SearchSpec, MAX_CONTEXT};

/// The most entries one diff answer holds unless `limit` says fewer.
const MAX_DIFF_ENTRIES: u64 = 10_000;
/// The most results of a search or find.
const MAX_RESULTS: u64 = 10_000;

/// Declares a diff query: `$extra` fields, then the options every diff takes, and `options`.
macro_rules! diff_query {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub(super) struct $name {
            $($(#[$fdoc])* $field: $ty,)*
            /// Only this path (a file or a directory).
            #[serde(default)]
            #[schemars(schema_with = "crate::base::path::rooted_schema")]
            path: Option<String>,
            /// `false`: no rename detection.
            renames: Option<bool>,
            /// Similarity in percent from which a deleted and an added text file are a rename
            /// (default 50; 100: identical content only).
            #[schemars(range(min = 1, max = 100))]
            threshold: Option<u8>,
            /// `false`: skip counting lines (faster).
            lines: Option<bool>,
            /// `true`: each text file's unified diff in `patch`.
            patch: Option<bool>,
            /// Lines of context in patches (default 3).
            #[schemars(range(min = 0, max = 100))]
            context: Option<u64>,
            /// At most this many entries, 1 to 10000 (default 10000); `stats` counts them all.
            #[schemars(range(min = 1, max = 10000))]
            limit: Option<u64>,
        }

        impl $name {
            fn options(&self, scope: Scope) -> Result<DiffOptions> {
                diff_options(
                    self.path.as_deref(),
                    (self.renames, self.threshold),
                    (self.lines, self.patch, self.context),
                    self.limit,
                    scope,
                )
            }
        }
    };
}

diff_query! {
    /// The query of `GET /v1/snapshots/{snap}/diff/{other}` and `GET /v1/sessions/{id}/changes`.
    DiffQuery {}
}

/// A side of a session diff: `start`, `now`, `latest`, or a snapshot id or prefix.
fn side_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "pattern": "^(start|now|latest|[0-9a-fA-F]{1,64})$"})
}

diff_query! {
    /// The query of `GET /v1/sessions/{id}/diff`: the two sides, and the diff's options.
    SessionDiffQuery {
        /// The old side: `start` (default: what the session started from), `now`, `latest`,
        /// or a snapshot id or prefix of the session's workspace.
        #[serde(default)]
        #[schemars(schema_with = "side_schema")]
        from: Option<String>,
        /// The new side: `now` (default: the live tree while the session runs, else its last
        /// snapshot), `start`, `latest`, or a snapshot.
        #[serde(default)]
        #[schemars(schema_with = "side_schema")]
        to: Option<String>,
    }
}

/// The options of a diff query, checked.
fn diff_options(
    path: Option<&str>,
    (renames, threshold): (Option<bool>, Option<u8>),
    (lines, patch, context): (Option<bool>, Option<bool>, Option<u64>),
    limit: Option<u64>,
    scope: Scope,
) -> Result<DiffOptions> {
    let paths = match path {
        Some(p) => {
            let p = path::from_text(p)?;
            if p.is_empty() {
                Vec::new()
            } else {
                vec![p]
            }
        }
        None => Vec::new(),
    };
    let context = context.unwrap_or(3);
    if context > MAX_CONTEXT as u64 {
        return Err(Error::invalid_argument(format!("context {context} is more than {MAX_CONTEXT} lines")));
    }
    let limit = limit.unwrap_or(MAX_DIFF_ENTRIES);
    if !(1..=MAX_DIFF_ENTRIES).contains(&limit) {
        return Err(Error::invalid_argument(format!("limit {limit} is not from 1 to {MAX_DIFF_ENTRIES}")));
    }
    let threshold = threshold.unwrap_or(DEFAULT_RENAME_THRESHOLD);
    if !(1..=100).contains(&threshold) {
        return Err(Error::invalid_argument(format!("threshold {threshold} is not a percentage from 1 to 100")));
    }
    Ok(DiffOptions {
        paths,
        scope,
        renames: (renames != Some(false)).then_some(threshold),
        lines: lines != Some(false),
        patch: patch == Some(true),
        context: context as usize,
        limit: Some(limit as usize),
    })
}

/// `GET /v1/snapshots/{snap}/diff/{other}`: what changed from one snapshot to another.
pub(super) async fn snapshots(
    State(st): State<Arc<AppState>>,
    P((snap, other)): P<(String, String)>,
    Q(q): Q<DiffQuery>,
) -> Result<Response, ApiError> {
    let opts = q.options(Scope::whole())?;
    let unique = crate::ops::fleet::unique_snapshot(&snap);
    let report = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.resolve_snapshot(&snap, None), ApiError::from),
            (|s| s.created_ns, unique),
            move |_, repo, from| {
                let to = repo.resolve_snapshot(&other, Some(&from.workspace))?;
                Ok::<_, ApiError>(repo.diff(
                    &DiffTarget::Snapshot(Box::new(from)),
                    &DiffTarget::Snapshot(Box::new(to)),
                    &opts,
                )?)
            },
        )
        .await?;
    Ok(axum::Json(report).into_response())
}

/// `GET /v1/sessions/{id}/diff?from=&to=`: a diff of the session's workspace, within its scope.
pub(super) async fn session(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    Q(q): Q<SessionDiffQuery>,
) -> Result<Response, ApiError> {
    let report = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.session(&id), session_missing),
            (|s| s.created_ns, None),
            move |_, repo, s| {
                let opts = q.options(s.scope()?)?;
                let side = |r: Option<&str>, default_now: bool| -> Result<DiffTarget> {
                    match r {
                        Some("start") => repo.session_start(&s),
                        Some("") => Err(Error::invalid_argument("from and to, when given, name a side")),
                        Some("now") => repo.session_now(&s),
                        None if default_now => repo.session_now(&s),
                        None => repo.session_start(&s),
                        Some(snap) => {
                            Ok(DiffTarget::Snapshot(Box::new(repo.resolve_snapshot(snap, Some(&s.workspace))?)))
                        }
                    }
                };
                let (from, to) = (side(q.from.as_deref(), false)?, side(q.to.as_deref(), true)?);
                Ok::<_, ApiError>(repo.diff(&from, &to, &opts)?)
            },
        )
        .await?;
    Ok(axum::Json(report).into_response())
}

/// `GET /v1/sessions/{id}/changes`: what the session changed, with who touched each path.
pub(super) async fn changes(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    Q(q): Q<DiffQuery>,
) -> Result<Response, ApiError> {
    let report = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.session(&id), session_missing),
            (|s| s.created_ns, None),
            move |_, repo, s| {
                let opts = q.options(s.scope()?)?;
                Ok::<_, ApiError>(repo.session_changes(&s, &opts)?)
            },
        )
        .await?;
    Ok(axum::Json(report).into_response())
}

/// The query of `GET /v1/log`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    /// The workspace.
    workspace: String,
    /// The workspace-relative path.
    #[schemars(schema_with = "crate::base::path::nonempty_schema")]
    path: String,
    /// `true`: go on across renames.
    follow: Option<bool>,
    /// In a fleet's bucket: the workspace of node NODE (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

/// `GET /v1/log?workspace=&path=&follow=`: a path's versions across snapshots, newest first.
pub(super) async fn log(State(st): State<Arc<AppState>>, Q(q): Q<LogQuery>) -> Result<Response, ApiError> {
    let rel = path::normalize_nonempty(&path::from_text(&q.path)?)?;
    let node = st.named_node(q.node.clone())?;
    let log = st
        .blocking_on(node, move |_, repo| repo.path_log(&q.workspace, &rel, q.follow == Some(true), &Scope::whole()))
        .await?;
    Ok(axum::Json(log).into_response())
}

/// The query of `GET /v1/snapshots/{snap}/search`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SearchQuery {
    /// What to look for: one line (a search matches within lines).
    #[schemars(schema_with = "search_pattern_schema")]
    pattern: String,
    /// `literal` (default), `regex`, or `glob` (over paths).
    mode: Option<SearchMode>,
    /// Only under this directory.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    path: Option<String>,
    /// Only files matching this glob.
    include: Option<String>,
    /// Never files matching this glob.
    exclude: Option<String>,
    /// Match regardless of case.
    case_insensitive: Option<bool>,
    /// Lines of context around each match (at most 100).
    #[schemars(range(min = 0, max = 100))]
    context: Option<u64>,
    /// At most this many results, 1 to 10000 (default 200).
    #[schemars(range(min = 1, max = 10000))]
    max_results: Option<u64>,
}

/// A search pattern: 1 to 4096 characters, no line break.
fn search_pattern_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "^[^\\n]+$"})
}

/// `GET /v1/snapshots/{snap}/search`: content or path search inside a snapshot.
pub(super) async fn search(
    State(st): State<Arc<AppState>>,
    P(snap): P<String>,
    Q(q): Q<SearchQuery>,
) -> Result<Response, ApiError> {
    let max = q.max_results.unwrap_or(200);
    if !(1..=MAX_RESULTS).contains(&max) {
        return Err(Error::invalid_argument(format!("maxResults {max} is not from 1 to {MAX_RESULTS}")).into());
    }
    let context = q.context.unwrap_or(0);
    if context > MAX_CONTEXT as u64 {
        return Err(Error::invalid_argument(format!("context {context} is more than {MAX_CONTEXT} lines")).into());
    }
    if let Some(p) = &q.path {
        // The path rules, as everywhere a path arrives: a backslash or `..` is refused by name.
        crate::base::path::from_text(p)?;
    }
    let spec = SearchSpec {
        pattern: q.pattern,
        mode: q.mode.unwrap_or_default(),
        path: q.path.unwrap_or_default(),
        include: q.include.into_iter().collect(),
        exclude: q.exclude.into_iter().collect(),
        case_insensitive: q.case_insensitive == Some(true),
        context: context as usize,
    };
    let m = Matcher::new(&spec)?;
    // In a fleet, searched on the node holding the snapshot.
    let node = st.snapshot_node(snap.clone()).await?;
    let found = st
        .blocking_on(node, move |_, repo| {
            let info = repo.resolve_snapshot(&snap, None)?;
            repo.search_snapshot(&info, &Scope::whole(), &m, max as usize)
        })
        .await?;
    Ok(axum::Json(found).into_response())
}

/// The query of `GET /v1/find`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FindQuery {
    /// A name, a path (with `/`), or a glob over names or paths.
    #[schemars(length(min = 1, max = 1024))]
    pattern: String,
    /// Only this workspace.
    workspace: Option<String>,
    /// Match regardless of case.
    case_insensitive: Option<bool>,
    /// At most this many versions, 1 to 10000 (default 1000).
    #[schemars(range(min = 1, max = 10000))]
    limit: Option<u64>,
    /// In a fleet's bucket: node NODE's snapshots (default: this node's).
    node: Option<crate::base::id::NodeName>,
}

/// `GET /v1/find?pattern=`: which snapshots hold a matching path, from the path index.
pub(super) async fn find(State(st): State<Arc<AppState>>, Q(q): Q<FindQuery>) -> Result<Response, ApiError> {
    let limit = q.limit.unwrap_or(1000);
    if !(1..=MAX_RESULTS).contains(&limit) {
        return Err(Error::invalid_argument(format!("limit {limit} is not from 1 to {MAX_RESULTS}")).into());
    }
    if q.pattern.is_empty() {
        return Err(Error::invalid_argument("pattern is empty: give a name or a glob").into());
    }
    let node = st.named_node(q.node.clone())?;
    let found = st
        .blocking_on(node, move |_, repo| {
            repo.find_paths(&q.pattern, q.workspace.as_deref(), q.case_insensitive == Some(true), limit as usize)
        })
        .await?;
    Ok(axum::Json(found).into_response())
}
