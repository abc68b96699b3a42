//! The review pages under `/ui/`: what an agent changed, what it deleted and who did it, in a
//! browser. Rendered on the server from askama templates (`templates/ui/`), with the one
//! stylesheet (light and dark) and the one small script (the audit timeline's live tail)
//! embedded in the binary: every view is a page and every action a form that work with scripts
//! off, and nothing is fetched from anywhere else (the Content-Security-Policy says so).
//!
//! A browser logs in with an operator token typed into a password field and is given a cookie
//! that stands for the token's id (`logins.rs`); the pages act in that token's name.

mod audit;
mod diff;
mod draw;
mod history;
mod kept;
mod logins;
mod pages;
mod trash;
mod url;

use std::sync::Arc;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};

use draw::Draw;
pub use kept::UiState;
use logins::Login;

use super::error::ApiError;
use super::state::AppState;
use crate::base::error::{Error, ErrorKind};
use crate::base::id::{NodeName, SessionId, TrashId};

/// What a page may load: its own stylesheet and script (the audit timeline's live tail), from
/// the server, and nothing else; forms post to the server only; a script may ask the server
/// alone.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The routes of the pages.
pub(super) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(login_page))
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/sessions", get(sessions))
        .route("/ui/sessions/{id}", get(session))
        .route("/ui/sessions/{id}/restore", post(restore))
        .route("/ui/sessions/{id}/history", get(file_history))
        .route("/ui/sessions/{id}/history/restore", post(restore_version))
        .route("/ui/content/{id}", get(content))
        .route("/ui/trash", get(trash_list))
        .route("/ui/trash/restore", post(trash_restore))
        .route("/ui/trash/{id}", get(trash_item))
        .route("/ui/audit", get(audit_timeline))
        .route("/ui/audit/bundle", get(audit_bundle))
        .route("/ui/audit/{seq}", get(audit_record))
        .route(
            "/ui/assets/style.css",
            get(|| async { asset(include_str!("../../../assets/ui/style.css"), "text/css; charset=utf-8") }),
        )
        .route(
            "/ui/assets/follow.js",
            get(|| async { asset(include_str!("../../../assets/ui/follow.js"), "text/javascript; charset=utf-8") }),
        )
        .layer(axum::middleware::from_fn(page_headers))
}

/// Every page's headers: the policy above, no sniffing, no referrer to other sites (not none at
/// all: with `no-referrer` a browser sends a form's `Origin` as `null`, which the posts' check
/// refuses), and never cached (a page shows a moment's state, and one seen after logging out
/// must not come back from a cache).
/// Each answer also says in `Server-Timing` how long the server took to make it (the pages are
/// drawn whole before they are sent).
async fn page_headers(req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let mut resp = next.run(req).await;
    let took = format!("total;dur={:.1}", started.elapsed().as_secs_f64() * 1000.0);
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&took) {
        h.insert(HeaderName::from_static("server-timing"), v);
    }
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    resp
}

/// An embedded asset as `content_type`, which a browser may keep for an hour (it changes only
/// with the binary).
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=3600"));
    resp
}

/// `body` as a download saved under `name` (only a file name's safe characters), never drawn by
/// the browser.
fn download(body: axum::body::Body, name: &str) -> Response {
    let mut name: String =
        name.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).take(100).collect();
    if name.trim_matches('.').is_empty() {
        // Nothing safe was left of it (a name in another script): a plain one.
        name = "download".into();
    }
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    resp
}

/// A page drawn, or the error page if its template fails.
fn html(status: StatusCode, page: &dyn Draw) -> Response {
    match page.draw() {
        Ok(body) => (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a review page could not be drawn");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be drawn: the server logged why").into_response()
        }
    }
}

/// An error as a page: the status its kind maps to and the sentence a client may read.
fn error_page(e: impl Into<ApiError>, login: Option<&Login>) -> Response {
    let (status, message) = e.into().public();
    let title = status.canonical_reason().unwrap_or("Error").to_string();
    html(status, &pages::ErrorPage { form_token: login.map(|l| l.form_token.clone()), title, message })
}

/// 403 for a post from another site, or without this login's form token.
fn forbidden(login: Option<&Login>) -> Response {
    let e = Error::new(
        ErrorKind::PermissionDenied,
        "this form was not sent from this server's own page: open the page again and resend it",
    );
    error_page(e, login)
}

/// The login `headers` carry, if it is still one.
fn login_of(st: &AppState, headers: &HeaderMap) -> Result<Option<(String, Login)>, Error> {
    st.ui.logins.of(headers, |id| st.tokens.is_live(id))
}

/// Runs `page` with the request's login, or sends the browser to log in.
async fn logged_in<F>(st: &Arc<AppState>, headers: &HeaderMap, page: F) -> Response
where
    F: AsyncFnOnce(Login) -> Response,
{
    match login_of(st, headers) {
        Ok(Some((_, login))) => page(login).await,
        Ok(None) => Redirect::to("/ui/").into_response(),
        Err(e) => error_page(e, None),
    }
}

/// `build`'s page for `login`, built on the blocking pool with a pooled repository and the
/// login's form token, or its error drawn as a page.
async fn drawn<P, F>(st: &Arc<AppState>, login: &Login, build: F) -> Response
where
    P: Draw + Send + 'static,
    F: FnOnce(&AppState, &crate::repo::Repo, String) -> Result<P, Error> + Send + 'static,
{
    let token = login.form_token.clone();
    match st.blocking(move |st, repo| build(st, repo, token)).await {
        Ok(page) => html(StatusCode::OK, &page),
        Err(e) => error_page(e, Some(login)),
    }
}

/// [`drawn`] with node `node`'s handle (None: this node's), in a fleet.
async fn drawn_on<P, F>(st: &Arc<AppState>, login: &Login, node: Option<NodeName>, build: F) -> Response
where
    P: Draw + Send + 'static,
    F: FnOnce(&AppState, &crate::repo::Repo, String) -> Result<P, Error> + Send + 'static,
{
    let token = login.form_token.clone();
    match st.blocking_on(node, move |st, repo| build(st, repo, token)).await {
        Ok(page) => html(StatusCode::OK, &page),
        Err(e) => error_page(e, Some(login)),
    }
}

/// Whatever `built` came to, as a page for `login`.
fn shown<P: Draw>(built: Result<P, Error>, login: &Login) -> Response {
    match built {
        Ok(page) => html(StatusCode::OK, &page),
        Err(e) => error_page(e, Some(login)),
    }
}

/// The node a page's URL names (`node=`), parsed; blank is this node. Outside a fleet's
/// bucket there is none (`not_found`), as for the API's `node=`.
fn node_of(st: &AppState, node: &Option<String>) -> Result<Option<NodeName>, Error> {
    st.named_node(url::some(node).map(|n| NodeName::parse(&n)).transpose()?)
}

/// A query that does not parse, as the error its page shows.
fn filters<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, Error> {
    query.map(|Query(q)| q).map_err(|e| Error::invalid_argument(format!("the filters do not parse: {e}")))
}

/// `GET /ui/`: the login form, or the sessions for a browser logged in.
async fn login_page(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    match login_of(&st, &headers) {
        Ok(Some(_)) => Redirect::to("/ui/sessions").into_response(),
        Ok(None) => html(StatusCode::OK, &pages::LoginPage { form_token: None, error: None }),
        Err(e) => error_page(e, None),
    }
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /ui/login`: an operator token in, a cookie out; a wrong token is audited as any
/// failed authentication, and answered with the form again.
async fn login(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    if !logins::same_origin(&headers) {
        return forbidden(None);
    }
    let Ok(Form(form)) = form else {
        return html(
            StatusCode::BAD_REQUEST,
            &pages::LoginPage { form_token: None, error: Some("Type the operator token.".into()) },
        );
    };
    let id = match st.tokens.check(form.token.trim()) {
        Ok(Some(id)) => id,
        Ok(None) => {
            super::auth::audit_refusal_of(&st, "POST", "/ui/login", "unknown or revoked token", "operator").await;
            let error = Some("That is not a live operator token.".to_string());
            return html(StatusCode::UNAUTHORIZED, &pages::LoginPage { form_token: None, error });
        }
        Err(e) => return error_page(e, None),
    };
    match st.ui.logins.start(id) {
        Ok((cookie, _)) => redirect_with_cookie("/ui/sessions", &logins::set_cookie(&cookie)),
        Err(e) => error_page(e, None),
    }
}

/// A redirect to `to` that sets the login cookie as `set_cookie` says.
fn redirect_with_cookie(to: &str, set_cookie: &str) -> Response {
    let mut resp = Redirect::to(to).into_response();
    if let Ok(v) = HeaderValue::from_str(set_cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[derive(serde::Deserialize)]
struct TokenForm {
    #[serde(rename = "formToken")]
    form_token: String,
}

/// `POST /ui/logout`: the login ends here and in the browser.
async fn logout(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Response {
    let Ok(Some((cookie, login))) = login_of(&st, &headers) else {
        return Redirect::to("/ui/").into_response();
    };
    let sent = form.map(|Form(f)| f.form_token).unwrap_or_default();
    if !logins::posted(&headers, &login, &sent) {
        return forbidden(Some(&login));
    }
    st.ui.logins.end(&cookie);
    redirect_with_cookie("/ui/", &logins::clear_cookie())
}

/// `GET /ui/sessions`: every session, newest first, with what each changed.
async fn sessions(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<pages::SessionsQuery>, QueryRejection>,
) -> Response {
    let q = filters(query);
    // In a fleet, every node's sessions.
    logged_in(&st, &headers, async |login: Login| {
        let token = login.form_token.clone();
        let built = st.blocking_fleet(move |st, views| pages::sessions(views, &st.ui.ended, &q?, token)).await;
        shown(built, &login)
    })
    .await
}

/// `GET /ui/sessions/{id}?view=split&expand=PATH`: one session's changes.
async fn session(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<pages::View>, QueryRejection>,
) -> Response {
    let view = filters(query);
    // In a fleet, the session of whichever node holds it.
    logged_in(&st, &headers, async |login: Login| {
        let token = login.form_token.clone();
        let built = match (view, SessionId::parse(&id)) {
            (Ok(view), Ok(id)) => {
                st.blocking_found(
                    (move |repo: &crate::repo::Repo| repo.session(&id), std::convert::identity),
                    (|s: &crate::model::session::Session| s.created_ns, None),
                    move |_, repo, s| {
                        let changes = pages::changes_of(repo, &s, view.expand.as_deref())?;
                        Ok::<_, Error>(pages::session(repo, &s, changes, token, &view))
                    },
                )
                .await
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        shown(built, &login)
    })
    .await
}

#[derive(serde::Deserialize)]
struct RestoreForm {
    #[serde(rename = "formToken")]
    form_token: String,
    id: String,
}

/// `POST /ui/sessions/{id}/restore`: a deleted file of the session back from the trash, into
/// its workspace, refused (changing nothing) if its path is taken; the session's page again,
/// with how it went.
async fn restore(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Form<RestoreForm>, FormRejection>,
) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        let Ok(Form(form)) = form else { return forbidden(Some(&login)) };
        if !logins::posted(&headers, &login, &form.form_token) {
            return forbidden(Some(&login));
        }
        let (id, item) = match (SessionId::parse(&id), TrashId::parse(&form.id)) {
            (Ok(id), Ok(item)) => (id, item),
            (Err(e), _) | (_, Err(e)) => return error_page(e, Some(&login)),
        };
        let actor = login.token.to_string();
        drawn(&st, &login, move |st, repo, token| {
            let s = repo.session(&id)?;
            // Only what this session deleted, and only once: a page reloaded or a form sent
            // again must not bring back an older version over a newer deletion.
            let deleted = pages::changes_of(repo, &s, None)?.trash;
            match deleted.iter().find(|t| t.id == item) {
                None => {
                    return Err(Error::not_found(format!(
                        "{item} is not an item session {id} deleted: open the session's page again"
                    )))
                }
                Some(t) if t.restored => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "{item} ({}) was restored already, at {}: nothing was changed",
                            t.path,
                            t.restored_at.as_deref().unwrap_or("an earlier time")
                        ),
                    ))
                }
                Some(_) => {}
            }
            let form = trash::RestoreForm::refusing(vec![item]);
            let outcomes = trash::restore(&[(repo.node(), repo)], &st.opts.workspaces, &actor, &form)?;
            let changes = pages::changes_of(repo, &s, None)?;
            let mut page = pages::session(repo, &s, changes, token, &pages::View::default());
            page.restored = Some(outcomes);
            Ok(page)
        })
        .await
    })
    .await
}

/// `GET /ui/audit`: the timeline under the URL's filters.
async fn audit_timeline(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<audit::AuditFilters>, QueryRejection>,
) -> Response {
    // In a fleet, one node's log at a time (a seq is a position in one log): `node=`.
    logged_in(&st, &headers, async |login: Login| {
        let (f, node) = match filters(query).and_then(|f| Ok((node_of(&st, &f.node)?, f))) {
            Ok((node, f)) => (f, node),
            Err(e) => return error_page(e, Some(&login)),
        };
        drawn_on(&st, &login, node, move |st, repo, token| {
            let nodes = fleet_nodes(st, repo);
            audit::timeline(repo, &st.ui.verified, f, token, nodes)
        })
        .await
    })
    .await
}

/// Every node of the fleet by name (none outside one), for the pages that read one node's log.
fn fleet_nodes(st: &AppState, repo: &crate::repo::Repo) -> Vec<String> {
    let Some(me) = repo.node() else { return Vec::new() };
    // The links to other logs are a convenience: without them the page still shows this one.
    let mut all: Vec<String> = match st.fleet.others(repo) {
        Ok(others) => others.into_iter().map(|n| n.to_string()).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "the fleet's nodes were not listed: the audit page links to no other node's log");
            Vec::new()
        }
    };
    all.push(me.to_owned());
    all.sort();
    all
}

#[derive(serde::Deserialize)]
struct NodeQuery {
    /// In a fleet, the node whose log the record is in (blank: this node's).
    node: Option<String>,
}

/// `GET /ui/audit/{seq}?node=`: one record, its permalink.
async fn audit_record(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(seq): Path<String>,
    query: Result<Query<NodeQuery>, QueryRejection>,
) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        let node = match filters(query).and_then(|q| node_of(&st, &q.node)) {
            Ok(node) => node,
            Err(e) => return error_page(e, Some(&login)),
        };
        drawn_on(&st, &login, node, move |st, repo, token| {
            let seq =
                seq.parse::<i64>().map_err(|_| Error::invalid_argument(format!("{seq:?} is not a record's number")))?;
            audit::record(repo, &st.ui.verified, seq, token)
        })
        .await
    })
    .await
}

/// `GET /ui/audit/bundle`: the whole log with its checkpoints as a bundle `trove audit verify
/// --bundle` checks offline, streamed.
async fn audit_bundle(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    logged_in(&st, &headers, async |_: Login| {
        let body = super::stream::body(&st, move |_, repo, out| repo.export_audit_bundle(1, out).map(|_| ()));
        download(body, "audit.bundle")
    })
    .await
}

#[derive(serde::Deserialize)]
struct ContentQuery {
    /// The file name the browser saves it under.
    name: Option<String>,
    /// In a fleet, the node whose store holds it (blank: this node's).
    node: Option<String>,
}

/// `GET /ui/content/{id}?name=`: stored content by its id, as a download (never drawn by the
/// browser: it may be anything), streamed.
async fn content(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<ContentQuery>, QueryRejection>,
) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        let id = match crate::object::ObjectId::from_hex(&id) {
            Ok(id) => id,
            Err(e) => return error_page(e, Some(&login)),
        };
        let (name, node) = match query {
            Ok(Query(q)) => (q.name, q.node),
            Err(_) => (None, None),
        };
        let name = name.filter(|n| !n.is_empty()).unwrap_or_else(|| id.to_hex());
        let node = match node_of(&st, &node) {
            Ok(node) => node,
            Err(e) => return error_page(e, Some(&login)),
        };
        // Found before the answer starts, so a missing id is a 404 page, not a cut body.
        let stored = st.blocking_on(node.clone(), move |_, repo| repo.content_stored(&id)).await;
        match stored {
            Ok(true) => {}
            Ok(false) => {
                let e = Error::not_found(format!("content {} is not in the repository", id.to_hex()));
                return error_page(e, Some(&login));
            }
            Err(e) => return error_page(e, Some(&login)),
        }
        let body = super::stream::body_on(&st, node, move |_, repo, out| {
            let mut reader = repo.open_object(id, None)?;
            std::io::copy(&mut reader, out).map(|_| ()).map_err(crate::base::error::from_io)
        });
        download(body, &name)
    })
    .await
}

/// `GET /ui/trash`: the items under the URL's filters.
async fn trash_list(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<trash::TrashFilters>, QueryRejection>,
) -> Response {
    let f = filters(query);
    // In a fleet, every node's items.
    logged_in(&st, &headers, async |login: Login| {
        let token = login.form_token.clone();
        shown(st.blocking_fleet(move |_, views| trash::list(views, f?, token)).await, &login)
    })
    .await
}

/// `GET /ui/trash/{id}`: one item (on whichever node holds it), what comes back and what is at
/// its path now.
async fn trash_item(State(st): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        let token = login.form_token.clone();
        let id = match TrashId::parse(&id) {
            Ok(id) => id,
            Err(e) => return error_page(e, Some(&login)),
        };
        let built = st
            .blocking_found(
                (move |repo: &crate::repo::Repo| repo.trash_item(&id), std::convert::identity),
                (|t: &crate::model::trash::TrashItem| t.deleted_ns, None),
                move |st, repo, item| trash::item(repo, &st.opts.workspaces, item, token),
            )
            .await;
        shown(built, &login)
    })
    .await
}

/// `POST /ui/trash/restore`: the items chosen, each restored or refused as the form says; the
/// trash again, with every item's outcome.
async fn trash_restore(State(st): State<Arc<AppState>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        if !logins::same_origin(&headers) {
            return forbidden(Some(&login));
        }
        let form = match trash::parse_restore(&body) {
            Ok(form) if logins::form_token_matches(&login, &form.form_token) => form,
            Ok(_) => return forbidden(Some(&login)),
            Err(e) => return error_page(e, Some(&login)),
        };
        let actor = login.token.to_string();
        let token = login.form_token.clone();
        // In a fleet, each item from whichever node holds it.
        let built = st
            .blocking_fleet(move |st, views| {
                let outcomes = trash::restore(views, &st.opts.workspaces, &actor, &form)?;
                let mut page = trash::list(views, trash::TrashFilters::default(), token)?;
                page.outcomes = Some(outcomes);
                Ok::<_, Error>(page)
            })
            .await;
        shown(built, &login)
    })
    .await
}

/// `GET /ui/sessions/{id}/history?path=`: a file's versions across the workspace's snapshots;
/// with `&content=`, one version beside the file now.
async fn file_history(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<history::Which>, QueryRejection>,
) -> Response {
    let which = filters(query);
    // In a fleet, the session of whichever node holds it.
    logged_in(&st, &headers, async |login: Login| {
        let token = login.form_token.clone();
        let (id, which) = match (SessionId::parse(&id), which) {
            (Ok(id), Ok(which)) => (id, which),
            (Err(e), _) | (_, Err(e)) => return error_page(e, Some(&login)),
        };
        let built = st
            .blocking_found(
                (move |repo: &crate::repo::Repo| repo.session(&id), std::convert::identity),
                (|s: &crate::model::session::Session| s.created_ns, None),
                move |_, repo, s| {
                    // Two pages from one route: each is an askama page of its own type.
                    Ok::<_, Error>(match which.content {
                        Some(_) => history::Shown::Version(history::version(repo, &s, &which, token)?),
                        None => history::Shown::History(history::history(repo, &s, &which, token)?),
                    })
                },
            )
            .await;
        shown(built, &login)
    })
    .await
}

/// `POST /ui/sessions/{id}/history/restore`: a version back over the file the page showed.
async fn restore_version(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Form<history::RestoreVersion>, FormRejection>,
) -> Response {
    logged_in(&st, &headers, async |login: Login| {
        let Ok(Form(form)) = form else { return forbidden(Some(&login)) };
        if !logins::posted(&headers, &login, &form.form_token) {
            return forbidden(Some(&login));
        }
        let actor = login.token.to_string();
        drawn(&st, &login, move |_, repo, token| history::restore(repo, &SessionId::parse(&id)?, &form, &actor, token))
            .await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_is_named_with_the_safe_characters_only_or_plainly() {
        let named = |name: &str| {
            let resp = download(axum::body::Body::empty(), name);
            resp.headers().get(header::CONTENT_DISPOSITION).and_then(|v| v.to_str().ok()).map(str::to_string)
        };
        assert_eq!(named("notes v2/../a\"b.txt").as_deref(), Some("attachment; filename=\"notesv2..ab.txt\""));
        assert_eq!(named("日本").as_deref(), Some("attachment; filename=\"download\""));
        assert_eq!(named("..").as_deref(), Some("attachment; filename=\"download\""));
    }
}
