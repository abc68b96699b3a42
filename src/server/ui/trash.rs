//! The trash in the review pages: items newest first under filters the URL keeps, chosen with
//! check boxes and restored together with a conflict choice (refused by default), each item's
//! outcome shown; and one item's page, with a preview of what comes back, the file now at its
//! path (with the hash an overwrite must name) and every way to restore it.

use std::io::Read;
use std::path::Path;

use askama::Template;

use super::super::state::Views;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::TrashId;
use crate::fs::workdir::WorkDir;
use crate::model::trash::{BulkRestore, OnConflict, RestoredFilter, TrashFilter, TrashItem, TrashRecord};
use crate::model::tree::EntryKind;
use crate::ops::trash::restore::{RestoreRequest, Restorer, TrashSelection};
use crate::repo::Repo;

use super::url::{encode, node_param, some};

/// Items one page lists.
pub const PAGE: usize = 100;
/// The most of a file one preview shows.
const PREVIEW_BYTES: u64 = 64 * 1024;
/// The most ids one restore takes from a form.
const IDS_MAX: usize = 1000;

/// The list's filters, as the URL carries them.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct TrashFilters {
    pub workspace: Option<String>,
    /// A path prefix, whole components.
    pub prefix: Option<String>,
    /// `file` or `dir`.
    pub kind: Option<String>,
    /// `no` (in the trash, the default), `yes` (restored since) or `all`.
    pub restored: Option<String>,
}

/// One item as the pages show it.
pub struct ItemView {
    pub id: String,
    pub workspace: String,
    pub path: String,
    pub kind: &'static str,
    pub size: u64,
    pub files: Option<u64>,
    pub sha256: String,
    pub deleted_by: String,
    pub deleted_at: String,
    pub reason: String,
    pub restored: bool,
    /// In a fleet, the node whose trash holds it.
    pub node: Option<String>,
}

fn item_view(t: &TrashRecord) -> ItemView {
    ItemView {
        node: t.node.clone(),
        id: t.id.to_string(),
        workspace: t.workspace.clone(),
        path: t.path.clone(),
        kind: if t.kind == EntryKind::Dir { "directory" } else { "file" },
        size: t.size,
        files: t.files,
        sha256: t.sha256.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        deleted_by: t.deleted_by.clone(),
        deleted_at: t.deleted_at.clone(),
        reason: t.reason.clone(),
        restored: t.restored,
    }
}

/// How one item of a restore went.
pub struct OutcomeView {
    pub id: String,
    pub path: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Template)]
#[template(path = "ui/trash.html")]
pub struct TrashPage {
    pub form_token: Option<String>,
    pub token: String,
    pub f: TrashFilters,
    pub items: Vec<ItemView>,
    pub more: bool,
    pub outcomes: Option<Vec<OutcomeView>>,
    /// Items of a fleet's nodes: a node column.
    pub fleet: bool,
}

#[derive(Template)]
#[template(path = "ui/trash_item.html")]
pub struct ItemPage {
    pub form_token: Option<String>,
    pub token: String,
    pub item: ItemView,
    /// The first bytes of a text file, or why there is none.
    pub preview: Option<String>,
    pub preview_note: String,
    /// A directory's members (their paths).
    pub members: Vec<String>,
    /// The sha256 of the file at the item's path now, if there is one.
    pub current: Option<String>,
    pub download: Option<String>,
}

/// The list under `f`, of every node's trash in a fleet (`views`: a node's name and handle,
/// this node's first).
pub fn list(views: &Views<'_>, f: TrashFilters, token: String) -> Result<TrashPage> {
    let kind = match some(&f.kind).as_deref() {
        None => None,
        Some("file") => Some(EntryKind::File),
        Some("dir") => Some(EntryKind::Dir),
        Some(other) => return Err(Error::invalid_argument(format!("kind {other:?} is not `file` or `dir`"))),
    };
    let restored = match some(&f.restored).as_deref() {
        None | Some("no") => RestoredFilter::No,
        Some("yes") => RestoredFilter::Yes,
        Some("all") => RestoredFilter::All,
        Some(other) => return Err(Error::invalid_argument(format!("restored {other:?} is not `no`, `yes` or `all`"))),
    };
    let prefix = some(&f.prefix).map(|p| crate::base::path::from_text(&p)).transpose()?.unwrap_or_default();
    let filter =
        TrashFilter { workspace: some(&f.workspace), prefix, kind, restored, limit: PAGE, ..Default::default() };
    let (page, more) = match views {
        [(_, repo)] => {
            let page = repo.trash_page(&filter, |_| true)?;
            let more = page.next_cursor.is_some();
            (page, more)
        }
        _ => {
            // One more than a page: whether any node has more.
            let mut page = crate::ops::fleet::fleet_trash_page(views, &TrashFilter { limit: PAGE + 1, ..filter })?;
            let more = page.items.len() > PAGE;
            page.items.truncate(PAGE);
            (page, more)
        }
    };
    Ok(TrashPage {
        form_token: Some(token.clone()),
        token,
        f,
        items: page.items.iter().map(item_view).collect(),
        more,
        outcomes: None,
        fleet: views.len() > 1,
    })
}

/// What a restore form sent: the items, how to meet a taken path, an overwrite's hash.
pub struct RestoreForm {
    pub form_token: String,
    pub ids: Vec<TrashId>,
    pub on_conflict: OnConflict,
    pub expected_sha256: Option<String>,
}

impl RestoreForm {
    /// A restore of `ids` refused where a path is taken (a deleted file's own button).
    pub fn refusing(ids: Vec<TrashId>) -> RestoreForm {
        RestoreForm { form_token: String::new(), ids, on_conflict: OnConflict::Fail, expected_sha256: None }
    }
}

/// Reads a restore form (`id` repeated, one per item chosen).
pub fn parse_restore(body: &[u8]) -> Result<RestoreForm> {
    let mut form = RestoreForm {
        form_token: String::new(),
        ids: Vec::new(),
        on_conflict: OnConflict::Fail,
        expected_sha256: None,
    };
    for (k, v) in form_urlencoded::parse(body) {
        match k.as_ref() {
            "formToken" => form.form_token = v.into_owned(),
            "id" if form.ids.len() < IDS_MAX => form.ids.push(TrashId::parse(&v)?),
            "id" => return Err(Error::invalid_argument(format!("more than {IDS_MAX} items in one restore"))),
            "onConflict" => {
                form.on_conflict = match v.as_ref() {
                    "fail" => OnConflict::Fail,
                    "rename" => OnConflict::Rename,
                    "overwrite" => OnConflict::Overwrite,
                    "merge" => OnConflict::Merge,
                    other => return Err(Error::invalid_argument(format!("onConflict {other:?} is not a choice"))),
                }
            }
            "expectedSha256" if !v.trim().is_empty() => form.expected_sha256 = Some(v.trim().to_string()),
            _ => {}
        }
    }
    if form.ids.is_empty() {
        return Err(Error::invalid_argument("no item was chosen: tick the items to restore"));
    }
    Ok(form)
}

/// Restores what `form` names, as `actor`, each item into its workspace's directory (in a
/// fleet, from whichever node of `views` holds it, into this host's workspace of its name);
/// every item's outcome.
pub fn restore(views: &Views<'_>, workspaces: &Path, actor: &str, form: &RestoreForm) -> Result<Vec<OutcomeView>> {
    let root = workspaces.to_path_buf();
    let live_dir = move |w: &str| crate::ops::session::workspace_dir(&root, w);
    let req = RestoreRequest {
        workspace: None,
        selection: TrashSelection::Ids(form.ids.clone()),
        to: None,
        on_conflict: form.on_conflict,
        // The hash an overwrite names; a form sends the file's hash whatever was chosen.
        expected_sha256: form.expected_sha256.clone().filter(|_| form.on_conflict == OnConflict::Overwrite),
    };
    let who = Restorer::Operator { actor, live_dir: &live_dir };
    Ok(outcomes(crate::ops::trash::elsewhere::restore_trash_in_fleet(views, &req, &who)?))
}

/// Every item's outcome of a restore, as the pages list them.
pub fn outcomes(done: BulkRestore) -> Vec<OutcomeView> {
    done.items
        .into_iter()
        .map(|o| OutcomeView {
            id: o.trash_id.to_string(),
            path: o.path.unwrap_or_default(),
            ok: o.ok,
            detail: match (&o.restored, &o.error) {
                (Some(r), _) => format!("back at {}", r.path),
                (_, Some(e)) => e.message.clone(),
                _ => String::new(),
            },
        })
        .collect()
}

/// The sha256 of the regular file at `rel` beneath `dir` now; None when there is none, or
/// something else is there (a directory, a symlink, a path through one): what a page shows
/// as "the file now", read without following a link out of `dir`.
pub fn file_now(dir: &Path, rel: &[u8]) -> Result<Option<String>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    match WorkDir::open(dir)?.current(rel) {
        Ok(found) => Ok(found.map(|c| c.sha256.to_string())),
        Err(e) if matches!(e.kind(), ErrorKind::IsDirectory | ErrorKind::InvalidArgument | ErrorKind::InvalidPath) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The first bytes of stored content `object` (`size` bytes in all) as text, and a note: how
/// much it shows, or that it is not text.
pub fn text_preview(repo: &Repo, object: crate::object::ObjectId, size: u64) -> Result<(Option<String>, String)> {
    let mut head = Vec::new();
    repo.open_object(object, None)?.take(PREVIEW_BYTES).read_to_end(&mut head).map_err(crate::base::error::from_io)?;
    let cut = || format!("The first {} KiB of {size} bytes.", PREVIEW_BYTES / 1024);
    Ok(match std::str::from_utf8(&head) {
        Ok(text) if !head.contains(&0) => {
            (Some(text.to_string()), if size > PREVIEW_BYTES { cut() } else { String::new() })
        }
        // Cut inside a character, or not text.
        Err(e) if e.error_len().is_none() && !head.contains(&0) => {
            (Some(String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned()), cut())
        }
        _ => (None, "Binary content: download it to look inside.".into()),
    })
}

/// One item's page, `item` read through `repo` (in a fleet, its node's handle). What is at its
/// path now is read in this host's workspace of its workspace's name: where a restore from
/// here puts it.
pub fn item(repo: &Repo, workspaces: &Path, item: TrashItem, token: String) -> Result<ItemPage> {
    let node = repo.node().filter(|_| repo.is_other_node()).map(str::to_owned);
    let record = TrashRecord { node, ..item.record() };
    let (mut preview, mut preview_note, mut download) = (None, String::new(), None);
    if let Some(object) = item.object.filter(|_| item.kind == EntryKind::File) {
        (preview, preview_note) = text_preview(repo, object, item.size)?;
        let name = record.path.rsplit('/').next().unwrap_or("file");
        download = Some(format!("/ui/content/{}?name={}{}", object.to_hex(), encode(name), node_param(repo)));
    }
    let members = item.entries.iter().map(|e| crate::base::path::display(&e.rel).into_owned()).collect();
    // The file at the item's path now, read beneath the workspace's directory (never made
    // here: a page only reads).
    crate::model::session::check_workspace_name(&item.workspace)?;
    let current = file_now(&workspaces.join(&item.workspace), &item.path)?;
    Ok(ItemPage {
        form_token: Some(token.clone()),
        token,
        item: item_view(&record),
        preview,
        preview_note,
        members,
        current,
        download,
    })
}
