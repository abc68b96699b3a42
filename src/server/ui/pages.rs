//! The review pages' views: the sessions list and one session's changes, each built from the
//! library's answers (the same as `GET /v1/sessions` and `GET /v1/sessions/{id}/changes`)
//! into the values its template draws.

use askama::Template;

use super::diff::{rows, split, Row, SplitRow};
use super::kept::EndedTotals;
use super::url::{encode, node_param, with_query};
use crate::base::error::Result;
use crate::model::diff::{ChangedPath, DiffStats, EndpointKind, SessionChanges, Version};
use crate::model::session::{Session, Status};
use crate::ops::diff::DiffOptions;
use crate::repo::Repo;

/// A patch longer than this is drawn collapsed; one longer than [`DRAWN_MAX`] is not drawn on
/// the session's page at all (its card says so): the page stays fast to load and to render.
pub const COLLAPSED_OVER: usize = 400;
/// Rows of a diff drawn as one table: a large diff's tables off the screen are not laid out.
pub const ROWS_PER_BLOCK: usize = 200;
/// See [`COLLAPSED_OVER`].
pub const DRAWN_MAX: usize = 256 * 1024;
/// The most sessions one list shows, newest first.
pub const LISTED_MAX: usize = 100;
/// The longest patch a file's page of its own draws (`?file=PATH`): a rewrite of a file of
/// several MB, opened on purpose, not drawn with the rest.
pub const ALONE_MAX: usize = 32 * 1024 * 1024;
/// The most changed paths one session's page lists.
pub const CHANGES_MAX: usize = 2000;
/// The most patch bytes one session's page draws in all; the cards past it give sizes and
/// hashes, so a session that rewrote everything still makes a page a browser can hold.
pub const PAGE_PATCH_BUDGET: usize = 4 * 1024 * 1024;

#[derive(Template)]
#[template(path = "ui/login.html")]
pub struct LoginPage {
    pub form_token: Option<String>,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "ui/error.html")]
pub struct ErrorPage {
    pub form_token: Option<String>,
    pub title: String,
    pub message: String,
}

/// One row of the sessions list.
pub struct SessionRow {
    pub id: String,
    pub short_id: String,
    pub status: &'static str,
    /// The node whose log holds it, in a fleet (empty elsewhere).
    pub node: String,
    pub workspace: String,
    pub created: String,
    pub changed: u64,
    pub lines_added: u64,
    pub lines_removed: u64,
    pub deleted: u64,
    pub refused: u64,
}

#[derive(Template)]
#[template(path = "ui/sessions.html")]
pub struct SessionsPage {
    pub form_token: Option<String>,
    pub statuses: Vec<(&'static str, &'static str)>,
    pub status: String,
    pub workspace: String,
    pub rows: Vec<SessionRow>,
    pub note: Option<String>,
    /// Sessions of a fleet's nodes: a node column.
    pub fleet: bool,
}

/// The sessions list's filters, as the URL carries them.
#[derive(Debug, Default, serde::Deserialize)]
pub struct SessionsQuery {
    /// `running` (ready or paused), `ended`, or `all` (the default).
    pub status: Option<String>,
    /// Only this workspace's.
    pub workspace: Option<String>,
}

pub(super) fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// What a diff for the pages asks: line counts, and the patches when `patch`.
fn options(s: &Session, patch: bool, limit: usize) -> Result<DiffOptions> {
    Ok(DiffOptions {
        paths: Vec::new(),
        scope: s.scope()?,
        renames: Some(crate::ops::diff::DEFAULT_RENAME_THRESHOLD),
        lines: true,
        patch,
        context: 3,
        limit: Some(limit),
    })
}

/// The totals of session `s`'s changes: every changed path, and the lines of every text file
/// (up to [`CHANGES_MAX`] paths compared), an ended session's from what `ended` keeps.
fn totals(repo: &Repo, ended: &EndedTotals, s: &Session) -> Result<DiffStats> {
    let last = if s.status == Status::Ended { Some(repo.session_snapshot(&s.id)?) } else { None };
    if let Some(stats) = last.as_ref().and_then(|last| ended.get(&s.id, last)) {
        return Ok(stats);
    }
    let stats = repo.session_changes(s, &options(s, false, CHANGES_MAX)?)?.stats;
    if let Some(last) = last {
        ended.put(&s.id, last, stats.clone());
    }
    Ok(stats)
}

/// The sessions list under `q`'s filters, newest first.
pub fn sessions(
    views: &[(Option<&str>, &Repo)],
    ended: &EndedTotals,
    q: &SessionsQuery,
    form_token: String,
) -> Result<SessionsPage> {
    let status = q.status.clone().unwrap_or_else(|| "all".into());
    let workspace = q.workspace.clone().unwrap_or_default();
    // Every node's sessions in a fleet, each with the handle over its node's log.
    let mut all = Vec::new();
    for (node, repo) in views {
        all.extend(repo.sessions(true)?.into_iter().map(|s| (*node, *repo, s)));
    }
    all.retain(|(_, _, s)| match status.as_str() {
        "running" => s.status != Status::Ended,
        "ended" => s.status == Status::Ended,
        _ => true,
    });
    all.retain(|(_, _, s)| workspace.is_empty() || s.workspace == workspace);
    all.sort_by_key(|(_, _, s)| std::cmp::Reverse(s.created_ns));
    let note = (all.len() > LISTED_MAX).then(|| format!("The newest {LISTED_MAX} of {} sessions.", all.len()));
    let mut rows = Vec::new();
    for (node, repo, s) in all.into_iter().take(LISTED_MAX) {
        let stats = totals(repo, ended, &s)?;
        rows.push(SessionRow {
            id: s.id.to_string(),
            short_id: short(s.id.as_str()),
            status: s.status.as_str(),
            node: node.unwrap_or_default().to_owned(),
            workspace: s.workspace.clone(),
            created: crate::base::time::iso_time(s.created_ns),
            changed: stats.changed,
            lines_added: stats.lines_added,
            lines_removed: stats.lines_removed,
            deleted: stats.deleted,
            refused: repo.audit_refusals(&s.id)?,
        });
    }
    let statuses = vec![("all", "All"), ("running", "Running"), ("ended", "Ended")];
    let fleet = views.iter().any(|(node, _)| node.is_some());
    Ok(SessionsPage { form_token: Some(form_token), statuses, status, workspace, rows, note, fleet })
}

/// An audit record as a card lists it.
pub struct RecordRow {
    pub seq: i64,
    pub time: String,
    pub actor: String,
    pub operation: String,
    pub outcome: String,
    pub outcome_class: &'static str,
}

/// One changed file's card.
pub struct FileCard {
    pub anchor: String,
    pub path: String,
    pub old_path: Option<String>,
    pub status: &'static str,
    pub letter: char,
    pub mode_change: Option<String>,
    pub lines_added: u64,
    pub lines_removed: u64,
    pub old_side: Option<String>,
    pub new_side: Option<String>,
    pub note: Option<String>,
    /// Where the bytes of a version not drawn can be downloaded: (its side, the link).
    pub downloads: Vec<(&'static str, String)>,
    /// Whether the diff is drawn (as `rows`, or side by side as `split_rows`), and its rows.
    pub drawn: bool,
    pub lines: usize,
    pub rows: Vec<Row>,
    pub split_rows: Vec<SplitRow>,
    /// The link that draws this file's diff with every line of it, while it has a few.
    pub expand_link: Option<String>,
    /// The link to a page of this file's diff alone, when it is too long to draw here.
    pub alone_link: Option<String>,
    /// The link to the file's history (its versions across snapshots).
    pub history_link: String,
    pub large: bool,
    pub records: Vec<RecordRow>,
    /// The newest trash item holding the path, not restored since: its id, and what it is
    /// (the path it was deleted at, a file or a directory holding the path).
    pub trash: Option<TrashButton>,
}

/// What a deleted file's Restore button brings back.
pub struct TrashButton {
    pub id: String,
    pub path: String,
    pub what: &'static str,
}

#[derive(Template)]
#[template(path = "ui/session.html")]
pub struct SessionPage {
    pub form_token: Option<String>,
    pub token: String,
    pub id: String,
    pub short_id: String,
    pub status: &'static str,
    pub workspace: String,
    pub from_label: String,
    pub to_label: String,
    pub changed: u64,
    pub added: u64,
    pub modified: u64,
    pub deleted: u64,
    pub renamed: u64,
    pub lines_added: u64,
    pub lines_removed: u64,
    pub truncated: bool,
    pub files: Vec<FileCard>,
    pub restored: Option<Vec<super::trash::OutcomeView>>,
    /// Side by side, or unified.
    pub split: bool,
    /// The one file this page shows, if it shows one.
    pub alone: Option<String>,
    pub unified_link: String,
    pub split_link: String,
    /// Another node's session (a review host's page of it): its node. Its audit records and
    /// stored versions are linked on that node (`node=`), and its deleted files to their trash
    /// items' pages (restored from there into this host's workspaces), not restored in place:
    /// its tree is on that node's host.
    pub other_node: Option<String>,
    /// `?node=NAME` for the links to another node's audit records (empty for this node's).
    pub audit_query: String,
}

/// How a session's page draws its diffs, as the URL says.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct View {
    /// `split`: side by side; anything else, unified.
    pub view: Option<String>,
    /// A path whose diff is drawn with all its lines, not 3 of context.
    pub expand: Option<String>,
    /// The one path the page shows (a diff too long to draw with the others).
    pub file: Option<String>,
}

impl View {
    fn split(&self) -> bool {
        self.view.as_deref() == Some("split")
    }

    /// The page's link with this view, `split` or not, and `expand`.
    fn link(&self, id: &str, split: bool, expand: Option<&str>) -> String {
        let pairs = [("view", split.then_some("split")), ("expand", expand), ("file", self.file.as_deref())];
        with_query(&format!("/ui/sessions/{id}"), pairs.into_iter().filter_map(|(k, v)| Some((k, v?))))
    }
}

/// Lines of context of an expanded diff: every line, for any file whose diff is drawn at all.
const EXPANDED_CONTEXT: usize = 1_000_000;

fn side(v: &Version) -> String {
    let sha = v.sha256.as_ref().map(|s| format!(", sha256 {s}")).unwrap_or_default();
    format!("{} bytes, mode {}{sha}", v.size, v.mode)
}

fn status_name(c: &ChangedPath) -> &'static str {
    use crate::model::diff::ChangeStatus::*;
    match c.change.status {
        Added => "added",
        Modified => "modified",
        Deleted => "deleted",
        Renamed => "renamed",
        TypeChanged => "typeChanged",
        ModeChanged => "modeChanged",
    }
}

/// The card of change `i`, drawing its patch if it fits in what is left of the page's
/// `budget` (taken from it).
fn card(repo: &Repo, i: usize, c: &ChangedPath, budget: &mut usize, view: &View, id: &str) -> FileCard {
    let e = &c.change;
    let patch = e.patch.as_deref().unwrap_or_default();
    let drawn_max = if view.file.is_some() { ALONE_MAX } else { DRAWN_MAX };
    let drawn = patch.len() <= drawn_max.min(*budget) && !e.binary;
    let rows = if drawn {
        *budget -= patch.len();
        rows(patch)
    } else {
        Vec::new()
    };
    // A rename or a mode change with the same content: nothing to draw but the header.
    let same_content = drawn && rows.is_empty();
    let drawn = drawn && !same_content;
    let note = match (&e.note, drawn) {
        (Some(n), _) => Some(n.clone()),
        (None, false) if same_content => Some("The content is the same on both sides".into()),
        (None, false) if e.binary => Some("Binary content: compared by hash".into()),
        (None, false) if patch.len() > drawn_max => {
            Some(format!("The diff is {} KiB, too long to draw with the others", patch.len() / 1024))
        }
        (None, false) => Some("Not drawn: this page already holds as much diff as it draws".into()),
        _ => None,
    };
    let (lines, large) = (rows.len(), rows.len() > COLLAPSED_OVER);
    // A text diff too long for this page opens on a page of its own.
    let alone_link = (!drawn && !same_content && !e.binary && !patch.is_empty() && view.file.is_none()).then(|| {
        let alone = View { file: Some(e.path.clone()), ..view.clone() };
        alone.link(id, view.split(), None)
    });
    let expanded = view.expand.as_deref() == Some(e.path.as_str());
    let expand_link = (drawn && !expanded && e.status != crate::model::diff::ChangeStatus::Added)
        .then(|| format!("{}#file-{i}", view.link(id, view.split(), Some(&e.path))));
    let (rows, split_rows) = if view.split() { (Vec::new(), split(rows)) } else { (rows, Vec::new()) };
    let downloads = if drawn {
        Vec::new()
    } else {
        [("before", &e.old), ("after", &e.new)]
            .into_iter()
            .filter_map(|(side, v)| {
                let id = v.as_ref()?.content.as_ref()?;
                // A live file's content is not in the repository until stored: no link then.
                if !repo.content_stored(id).unwrap_or(false) {
                    return None;
                }
                let name = e.path.rsplit('/').next().unwrap_or("file");
                Some((side, format!("/ui/content/{}?name={}{}", id.to_hex(), encode(name), node_param(repo))))
            })
            .collect()
    };
    let mode_change = match (&e.old, &e.new) {
        (Some(o), Some(n)) if o.mode != n.mode => Some(format!("{} → {}", o.mode, n.mode)),
        _ => None,
    };
    FileCard {
        anchor: format!("file-{i}"),
        path: e.path.clone(),
        old_path: e.old_path.clone(),
        status: status_name(c),
        letter: e.status.letter(),
        mode_change,
        lines_added: e.lines_added.unwrap_or(0),
        lines_removed: e.lines_removed.unwrap_or(0),
        old_side: e.old.as_ref().map(side),
        new_side: e.new.as_ref().map(side),
        note,
        downloads,
        large,
        drawn,
        lines,
        rows,
        split_rows,
        expand_link,
        alone_link,
        history_link: format!("/ui/sessions/{id}/history?path={}", encode(&e.path)),
        records: c
            .records
            .iter()
            .map(|r| RecordRow {
                seq: r.seq,
                time: r.time.clone(),
                actor: r.actor.clone(),
                operation: r.operation.clone(),
                outcome_class: if r.outcome == "ok" { "ok" } else { "refused" },
                outcome: r.outcome.clone(),
            })
            .collect(),
        trash: c.trash.first().filter(|t| !t.restored).map(|t| TrashButton {
            id: t.id.to_string(),
            path: t.path.clone(),
            what: if t.kind == crate::model::tree::EntryKind::Dir { "directory" } else { "file" },
        }),
    }
}

fn endpoint_label(e: &crate::model::diff::Endpoint) -> String {
    match e.kind {
        EndpointKind::Snapshot => {
            let id = e.snapshot.as_ref().map(|s| short(s.as_str())).unwrap_or_default();
            format!("snapshot {id}{}", e.at.as_ref().map(|t| format!(" ({t})")).unwrap_or_default())
        }
        EndpointKind::Live => "the live tree".into(),
        EndpointKind::Empty => "nothing".into(),
    }
}

/// One session's page: its changes with their diffs, who made them, and a restore for what
/// it deleted.
pub fn session(repo: &Repo, s: &Session, changes: SessionChanges, form_token: String, view: &View) -> SessionPage {
    let mut budget = if view.file.is_some() { ALONE_MAX } else { PAGE_PATCH_BUDGET };
    let id = s.id.to_string();
    let files = changes
        .entries
        .iter()
        .enumerate()
        .filter(|(_, c)| view.file.as_ref().is_none_or(|f| *f == c.change.path))
        .map(|(i, c)| card(repo, i, c, &mut budget, view, &id))
        .collect();
    SessionPage {
        form_token: Some(form_token.clone()),
        token: form_token,
        id: s.id.to_string(),
        short_id: short(s.id.as_str()),
        status: s.status.as_str(),
        workspace: s.workspace.clone(),
        from_label: endpoint_label(&changes.from),
        to_label: endpoint_label(&changes.to),
        changed: changes.stats.changed,
        added: changes.stats.added,
        modified: changes.stats.modified,
        deleted: changes.stats.deleted,
        renamed: changes.stats.renamed,
        lines_added: changes.stats.lines_added,
        lines_removed: changes.stats.lines_removed,
        truncated: changes.truncated,
        files,
        restored: None,
        split: view.split(),
        alone: view.file.clone(),
        unified_link: view.link(&id, false, view.expand.as_deref()),
        split_link: view.link(&id, true, view.expand.as_deref()),
        other_node: repo.is_other_node().then(|| repo.node().unwrap_or_default().to_owned()),
        audit_query: node_param(repo).replacen('&', "?", 1),
    }
}

/// The changes of `s` for its page, the one `expand` names with all its lines.
pub fn changes_of(repo: &Repo, s: &Session, expand: Option<&str>) -> Result<SessionChanges> {
    let mut changes = repo.session_changes(s, &options(s, true, CHANGES_MAX)?)?;
    if let Some(path) = expand {
        let opts = DiffOptions {
            paths: vec![crate::base::path::from_text(path)?],
            context: EXPANDED_CONTEXT,
            ..options(s, true, CHANGES_MAX)?
        };
        let whole = repo.session_changes(s, &opts)?;
        for found in whole.entries {
            if let Some(slot) = changes.entries.iter_mut().find(|c| c.change.path == found.change.path) {
                *slot = found;
            }
        }
    }
    Ok(changes)
}
