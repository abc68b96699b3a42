//! The trash over HTTP: listings (`GET /v1/trash` for operators, every workspace;
//! `GET /v1/sessions/{id}/trash`, what the session's scope can read of its workspace), newest
//! first, filtered and paged like `trove trash ls`; one item with its members; bulk restores
//! (`POST /v1/trash/restore`, `POST /v1/sessions/{id}/trash/restore`); and tar exports.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::{P, Q};
use super::files::session_of;
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, Result};
use crate::base::id::{SessionId, TrashId};
use crate::base::progress::NoProgress;
use crate::model::trash::{OnConflict, RestoredFilter, TrashFilter, TrashMember, TrashRecord};
use crate::model::tree::EntryKind;
use crate::ops::session::workspace_dir;
use crate::ops::trash::elsewhere::{restore_trash_in_fleet, trash_by_node};
use crate::ops::trash::export::export_trash_of;
use crate::ops::trash::purge::TrashSet;
use crate::ops::trash::restore::{RestoreRequest, Restorer, TrashSelection};

/// The default and the largest page.
const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 1000;

/// The filters both trash routes take.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionTrashQuery {
    /// Only items at this path or below it.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
    /// Only items deleted at or after this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    since: Option<String>,
    /// Only items deleted before this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    until: Option<String>,
    /// Only files, directories or symlinks.
    kind: Option<EntryKind>,
    /// `no` (default: what is in the trash), `yes` (restored since) or `all`.
    restored: Option<RestoredFilter>,
    /// Items a page, 1 to 1000 (default 100).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u64>,
    /// Where to start: the `nextCursor` of the previous page.
    #[schemars(regex(pattern = r"^-?[0-9]{1,19}\.-?[0-9]{1,19}$"))]
    cursor: Option<String>,
}

/// The query of `GET /v1/trash`: the session route's filters, and which workspace or session.
/// (The fields are repeated: serde cannot refuse unknown fields through `flatten`.)
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TrashQuery {
    /// Only this workspace's items.
    workspace: Option<String>,
    /// Only items this session deleted.
    session: Option<SessionId>,
    /// Only items at this path or below it.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
    /// Only items deleted at or after this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    since: Option<String>,
    /// Only items deleted before this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    until: Option<String>,
    /// Only files, directories or symlinks.
    kind: Option<EntryKind>,
    /// `no` (default: what is in the trash), `yes` (restored since) or `all`.
    restored: Option<RestoredFilter>,
    /// Items a page, 1 to 1000 (default 100).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u64>,
    /// Where to start: the `nextCursor` of the previous page.
    #[schemars(regex(pattern = r"^-?[0-9]{1,19}\.-?[0-9]{1,19}$"))]
    cursor: Option<String>,
}

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

impl SessionTrashQuery {
    fn filter(self) -> Result<TrashFilter> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::invalid_argument(format!("limit {limit} is not from 1 to {MAX_LIMIT}")));
        }
        Ok(TrashFilter {
            workspace: None,
            session: None,
            prefix: crate::base::path::from_text(self.prefix.as_deref().unwrap_or(""))?,
            since_ns: time("since", self.since.as_deref())?,
            until_ns: time("until", self.until.as_deref())?,
            kind: self.kind,
            restored: self.restored.unwrap_or_default(),
            limit: limit as usize,
            after: self.cursor.as_deref().map(str::parse).transpose()?,
        })
    }
}

/// `GET /v1/trash`: every workspace's trash, or one's.
pub(super) async fn list(State(st): State<Arc<AppState>>, Q(q): Q<TrashQuery>) -> Result<Response, ApiError> {
    let (workspace, session) = (q.workspace, q.session);
    let common = SessionTrashQuery {
        prefix: q.prefix,
        since: q.since,
        until: q.until,
        kind: q.kind,
        restored: q.restored,
        limit: q.limit,
        cursor: q.cursor,
    };
    let filter = TrashFilter { workspace, session, ..common.filter()? };
    let page = st
        .blocking_fleet(move |_, views| {
            if views.len() == 1 {
                return views[0].1.trash_page(&filter, |_| true);
            }
            crate::ops::fleet::fleet_trash_page(views, &filter)
        })
        .await?;
    Ok(axum::Json(page).into_response())
}

/// `GET /v1/sessions/{id}/trash`: the trash of the session's workspace that its scope can read.
pub(super) async fn session_list(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    Q(q): Q<SessionTrashQuery>,
) -> Result<Response, ApiError> {
    let filter = q.filter()?;
    // In a fleet, another node's session's trash is that node's.
    let node = st.session_node(id.clone()).await?;
    let page = st
        .blocking_on(node, move |_, repo| {
            let s = session_of(repo, &id)?;
            let scope = s.scope()?;
            let filter = TrashFilter { workspace: Some(s.workspace.clone()), ..filter };
            Ok::<_, ApiError>(repo.trash_page(&filter, |t| scope.can_read(&t.path))?)
        })
        .await?;
    Ok(axum::Json(page).into_response())
}

/// An item as `GET /v1/trash/{trash}` shows it: its record and a directory's members.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct ShownItem {
    #[serde(flatten)]
    item: TrashRecord,
    /// A directory's members, parents first.
    members: Vec<TrashMember>,
}

/// `GET /v1/trash/{trash}`: one item, with a directory's members.
pub(super) async fn show(State(st): State<Arc<AppState>>, P(id): P<TrashId>) -> Result<Response, ApiError> {
    let (node, item) = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.trash_item(&id), ApiError::from),
            (|t| t.deleted_ns, None),
            |_, repo, item| Ok::<_, ApiError>((repo.node().map(str::to_owned), item)),
        )
        .await?;
    let members = item.entries.iter().map(|e| e.record()).collect();
    Ok(axum::Json(ShownItem { item: TrashRecord { node, ..item.record() }, members }).into_response())
}

/// The body of a restore: the items (ids, a path or a prefix), where to, and the conflict
/// policy.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RestoreBody {
    /// The items, by id (any version of a path).
    #[serde(default)]
    ids: Vec<TrashId>,
    /// Or: the newest deletion of this path not restored yet.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::nonempty_schema")]
    path: Option<String>,
    /// With `path`: the newest deletion before this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    before: Option<String>,
    /// Or: every path at or below this one, each its newest deletion.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
    /// The workspace of `path` or `prefix` (operators; a session restores into its own).
    workspace: Option<String>,
    /// Another workspace-relative path: one item's new path, or what `prefix` becomes.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::nonempty_schema")]
    to: Option<String>,
    /// When the target is taken: `fail` (default), `rename`, `overwrite` (a file, with
    /// `expectedSha256`) or `merge` (a directory into a directory).
    #[serde(default)]
    on_conflict: OnConflict,
    /// The sha256 of the file `overwrite` replaces.
    expected_sha256: Option<String>,
}

impl RestoreBody {
    fn request(self) -> Result<RestoreRequest> {
        let selection = match (self.ids.is_empty(), self.path, self.prefix) {
            (true, Some(p), None) => TrashSelection::Path {
                path: crate::base::path::from_text(&p)?,
                before_ns: time("before", self.before.as_deref())?,
            },
            (true, None, Some(p)) => TrashSelection::Prefix(crate::base::path::from_text(&p)?),
            (false, None, None) => TrashSelection::Ids(self.ids),
            _ => return Err(Error::invalid_argument("name the items one way: ids, path or prefix")),
        };
        if self.before.is_some() && !matches!(selection, TrashSelection::Path { .. }) {
            return Err(Error::invalid_argument("`before` goes with `path`"));
        }
        Ok(RestoreRequest {
            workspace: self.workspace,
            selection,
            to: self.to,
            on_conflict: self.on_conflict,
            expected_sha256: self.expected_sha256,
        })
    }
}

/// `POST /v1/trash/restore`: an operator restores items into their workspaces' directories;
/// 200 with every item's outcome, whatever they are.
pub(super) async fn restore(
    State(st): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let req = super::extract::json_object::<RestoreBody>(&super::extract::body_of(body)?, "restore")?.request()?;
    // In a fleet, each item named by id is restored from whichever node holds it.
    let done = st
        .blocking_fleet(move |st, views| {
            let root = st.opts.workspaces.clone();
            let live_dir = move |w: &str| workspace_dir(&root, w);
            restore_trash_in_fleet(views, &req, &Restorer::Operator { actor: &actor, live_dir: &live_dir })
        })
        .await?;
    Ok(axum::Json(done).into_response())
}

/// `POST /v1/sessions/{id}/trash/restore`: the session restores items of its workspace into
/// its live tree, within its scope.
pub(super) async fn session_restore(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let req = super::extract::json_object::<RestoreBody>(&super::extract::body_of(body)?, "restore")?.request()?;
    let _busy = st.mark_busy(&id);
    let done = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &id)?;
            Ok::<_, ApiError>(repo.restore_trash(&req, &Restorer::Session { session: &s, actor: &actor })?)
        })
        .await?;
    Ok(axum::Json(done).into_response())
}

/// The query of `GET /v1/trash/export`: ids, or the listing's filters.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportQuery {
    /// Comma-separated item ids; when given, the filters are not.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,64}(,[A-Za-z0-9_-]{1,64})*$"))]
    ids: Option<String>,
    /// Only this workspace's items.
    workspace: Option<String>,
    /// Only items this session deleted.
    session: Option<SessionId>,
    /// Only items at this path or below it.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
    /// Only items deleted at or after this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    since: Option<String>,
    /// Only items deleted before this time (RFC 3339).
    #[serde(default)]
    #[schemars(schema_with = "date_time_schema")]
    until: Option<String>,
    /// Only files, directories or symlinks.
    kind: Option<EntryKind>,
    /// `no` (default: what is in the trash), `yes` (restored since) or `all`.
    restored: Option<RestoredFilter>,
    /// `tar` (default) or `tar.zst`.
    format: Option<super::snapshots::ExportFormat>,
}

impl ExportQuery {
    fn set(self) -> Result<TrashSet> {
        let filtered = self.workspace.is_some()
            || self.session.is_some()
            || self.prefix.is_some()
            || self.since.is_some()
            || self.until.is_some()
            || self.kind.is_some()
            || self.restored.is_some();
        if let Some(ids) = self.ids {
            if filtered {
                return Err(Error::invalid_argument("give ids or filters, not both"));
            }
            return ids.split(',').map(TrashId::parse).collect::<Result<Vec<_>>>().map(TrashSet::Ids);
        }
        let common = SessionTrashQuery {
            prefix: self.prefix,
            since: self.since,
            until: self.until,
            kind: self.kind,
            restored: self.restored,
            limit: None,
            cursor: None,
        };
        let filter = TrashFilter { workspace: self.workspace, session: self.session, ..common.filter()? };
        Ok(TrashSet::Filter(TrashFilter { limit: 0, ..filter }))
    }
}

/// `GET /v1/trash/export?ids=…` or `?workspace=…&prefix=…`: the items as a tar stream (plain,
/// or zstd with `format=tar.zst`), each at its original path. A failure after the headers are
/// sent cuts the body short.
pub(super) async fn export(State(st): State<Arc<AppState>>, Q(q): Q<ExportQuery>) -> Result<Response, ApiError> {
    let zstd = match q.format {
        Some(super::snapshots::ExportFormat::TarZst) => Some(3),
        _ => None,
    };
    let set = q.set()?;
    // In a fleet, items named by id are read on whichever node holds each: every one is found
    // before the response starts, so an id no node holds is a 404, not a cut archive.
    let body = match set {
        TrashSet::Ids(ids) if st.in_fleet => {
            let groups = st
                .blocking_fleet(move |_, views| {
                    let groups = trash_by_node(views, &ids)?.found()?;
                    Ok::<_, Error>(
                        groups.into_iter().map(|(i, items)| (views[i].0.map(str::to_owned), items)).collect::<Vec<_>>(),
                    )
                })
                .await?;
            super::stream::body_fleet(&st, move |_, views, out| {
                let mut parts = Vec::with_capacity(groups.len());
                for (node, items) in &groups {
                    let (_, repo) = views.iter().find(|(n, _)| n.map(str::to_owned) == *node).ok_or_else(|| {
                        Error::new(
                            crate::base::error::ErrorKind::Busy,
                            format!(
                                "node {} cannot be read now: export its items again later",
                                node.as_deref().unwrap_or_default()
                            ),
                        )
                    })?;
                    parts.push((*repo, &items[..]));
                }
                export_trash_of(&parts, out, zstd, &NoProgress).map(|_| ())
            })
        }
        set => {
            let items = st.blocking(move |_, repo| repo.trash_set(&set)).await?;
            super::stream::body(&st, move |_, repo, out| repo.export_trash(&items, out, zstd, &NoProgress).map(|_| ()))
        }
    };
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    let (media, name) = match zstd {
        Some(_) => ("application/zstd", "trash.tar.zst"),
        None => ("application/x-tar", "trash.tar"),
    };
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
