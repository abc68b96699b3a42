//! A file's history in the review pages: its versions across the session's workspace's
//! snapshots, newest first; one version's preview beside the file as it is now; and "restore
//! this version", a write gated by the current file's sha256 whose replaced file goes to the
//! trash (`Repo::restore_version`).

use askama::Template;

use super::trash::{text_preview, OutcomeView};
use super::url::{encode, node_param};
use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::model::history::VersionOrigin;
use crate::model::session::Session;
use crate::object::ObjectId;
use crate::repo::Repo;

/// What the history pages take from the URL or a form.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct Which {
    /// The workspace-relative path.
    pub path: String,
    /// A version, by content id.
    pub content: Option<String>,
}

/// One version as the history lists it.
pub struct VersionView {
    pub content: String,
    pub sha256: String,
    pub size: u64,
    pub mode: String,
    pub first_at: String,
    pub snapshots: String,
    pub origin: &'static str,
    pub change: Option<i64>,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "ui/history.html")]
pub struct HistoryPage {
    pub form_token: Option<String>,
    pub id: String,
    /// Another node's session: its node, named on the page.
    pub other_node: Option<String>,
    /// `?node=NAME` for the links to another node's audit records (empty for this node's).
    pub audit_query: String,
    pub path: String,
    pub path_query: String,
    pub versions: Vec<VersionView>,
    pub outcome: Option<OutcomeView>,
}

#[derive(Template)]
#[template(path = "ui/version.html")]
pub struct VersionPage {
    pub form_token: Option<String>,
    pub token: String,
    pub id: String,
    /// Another node's session: its node; its files are not restored from here.
    pub other_node: Option<String>,
    pub path: String,
    pub path_query: String,
    pub v: VersionView,
    pub preview: Option<String>,
    pub preview_note: String,
    pub download: String,
    /// The sha256 of the file at the path now, if there is one.
    pub current: Option<String>,
}

/// The history, or one version of it: the two pages of one route.
pub enum Shown {
    History(HistoryPage),
    Version(VersionPage),
}

impl super::draw::Draw for Shown {
    fn draw(&self) -> askama::Result<String> {
        match self {
            Shown::History(p) => askama::Template::render(p),
            Shown::Version(p) => askama::Template::render(p),
        }
    }
}

/// The sha256 of the file at `rel` of the session's tree now, read beneath its directory; none
/// for another node's session (its tree is on that node's host, not this one).
fn current(repo: &Repo, s: &Session, rel: &[u8]) -> Result<Option<String>> {
    if repo.is_other_node() {
        return Ok(None);
    }
    super::trash::file_now(&s.live_dir, rel)
}

fn versions(repo: &Repo, s: &Session, rel: &[u8]) -> Result<Vec<VersionView>> {
    let now = current(repo, s, rel)?;
    let log = repo.path_log(&s.workspace, rel, false, &s.scope()?)?;
    Ok(log
        .versions
        .into_iter()
        .filter_map(|e| {
            let v = e.version;
            let sha256 = v.sha256.as_ref()?.to_string();
            Some(VersionView {
                content: v.content.as_ref()?.to_hex(),
                current: now.as_deref() == Some(sha256.as_str()),
                sha256,
                size: v.size,
                mode: v.mode.clone(),
                snapshots: if v.first_snapshot == v.last_snapshot {
                    format!("snapshot {}", super::pages::short(v.first_snapshot.as_str()))
                } else {
                    format!(
                        "snapshots {} to {}",
                        super::pages::short(v.first_snapshot.as_str()),
                        super::pages::short(v.last_snapshot.as_str())
                    )
                },
                first_at: v.first_at,
                origin: match e.origin {
                    VersionOrigin::Added => "added",
                    VersionOrigin::Modified => "modified",
                    VersionOrigin::Renamed => "renamed",
                },
                change: e.change.map(|c| c.seq),
            })
        })
        .collect())
}

fn rel_of(path: &str) -> Result<Vec<u8>> {
    crate::base::path::normalize_nonempty(&crate::base::path::from_text(path)?)
}

/// The history of `which.path` in session `s`'s workspace (read through `repo`, its node's
/// handle).
pub fn history(repo: &Repo, s: &Session, which: &Which, token: String) -> Result<HistoryPage> {
    let rel = rel_of(&which.path)?;
    Ok(HistoryPage {
        form_token: Some(token),
        id: s.id.to_string(),
        other_node: other_node(repo),
        audit_query: node_param(repo).replacen('&', "?", 1),
        path: which.path.clone(),
        path_query: encode(&which.path),
        versions: versions(repo, s, &rel)?,
        outcome: None,
    })
}

/// One version of `which.path`: what it holds, and the file there now.
pub fn version(repo: &Repo, s: &Session, which: &Which, token: String) -> Result<VersionPage> {
    let rel = rel_of(&which.path)?;
    let wanted = which.content.as_deref().unwrap_or_default();
    let v = versions(repo, s, &rel)?
        .into_iter()
        .find(|v| v.content == wanted)
        .ok_or_else(|| Error::not_found(format!("{} has no version {wanted}", which.path)))?;
    let (preview, preview_note) = text_preview(repo, ObjectId::from_hex(&v.content)?, v.size)?;
    let name = which.path.rsplit('/').next().unwrap_or("file");
    Ok(VersionPage {
        form_token: Some(token.clone()),
        token,
        id: s.id.to_string(),
        other_node: other_node(repo),
        path: which.path.clone(),
        path_query: encode(&which.path),
        download: format!("/ui/content/{}?name={}{}", v.content, encode(name), node_param(repo)),
        current: current(repo, s, &rel)?,
        v,
        preview,
        preview_note,
    })
}

/// Another node's name, for a page of its session (a review host's): what it shows of the
/// session is read, and nothing of it is written here.
fn other_node(repo: &Repo) -> Option<String> {
    repo.is_other_node().then(|| repo.node().unwrap_or_default().to_owned())
}

/// The form that restores a version.
#[derive(Debug, serde::Deserialize)]
pub struct RestoreVersion {
    #[serde(rename = "formToken")]
    pub form_token: String,
    pub path: String,
    pub content: String,
    /// The sha256 of the file there when the page was drawn; empty when there was none.
    #[serde(rename = "expectedSha256", default)]
    pub expected_sha256: String,
}

/// Restores the version `form` names over the file there, as `actor`; the history with how it
/// went.
pub fn restore(repo: &Repo, id: &SessionId, form: &RestoreVersion, actor: &str, token: String) -> Result<HistoryPage> {
    let s = repo.session(id)?;
    let rel = rel_of(&form.path)?;
    let v = versions(repo, &s, &rel)?
        .into_iter()
        .find(|v| v.content == form.content)
        .ok_or_else(|| Error::not_found(format!("{} has no version {}", form.path, form.content)))?;
    let sha = crate::object::Sha256::from_hex(&v.sha256)?;
    let mode = u32::from_str_radix(&v.mode, 8).unwrap_or(0o644);
    let expected = Some(form.expected_sha256.trim()).filter(|e| !e.is_empty());
    let done = repo.restore_version(&s, &rel, (ObjectId::from_hex(&v.content)?, sha, mode), expected, actor);
    let outcome = match done {
        Ok(r) => OutcomeView {
            id: r.trash_id.map(|t| t.to_string()).unwrap_or_default(),
            path: r.path,
            ok: true,
            detail: "this version is back; the file it replaced is in the trash".into(),
        },
        Err(e) => {
            OutcomeView { id: String::new(), path: form.path.clone(), ok: false, detail: e.message().to_string() }
        }
    };
    let mut page = history(repo, &s, &Which { path: form.path.clone(), content: None }, token)?;
    page.outcome = Some(outcome);
    Ok(page)
}
