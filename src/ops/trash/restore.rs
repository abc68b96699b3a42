//! Restoring from the trash into the live tree: choosing the items (by id, the newest deletion
//! of a path, or every path under a prefix), where each goes (its original path, another one,
//! or a free `(restored)` name beside a taken one, or merged into a directory there), making
//! missing parent directories, and carrying each item out through the journal, so a directory
//! comes back whole or not at all and its trash row is marked restored in the same transaction.
//! A bulk restore reports every item's outcome; one refusal never stops the others.

use std::path::PathBuf;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::fs::walk::join_rel;
use crate::fs::workdir::{split, Kind, WorkDir};
use crate::model::scope::Scope;
use crate::model::session::Session;
use crate::model::trash::{
    BulkRestore, OnConflict, RestoreOutcome, RestoreResult, RestoredFilter, TrashFilter, TrashItem,
};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};
use crate::ops::journal::{hex_sha, stale, Author, Draft, NewContent};
use crate::repo::Repo;

use super::remove::draft_remove;

/// Which trash items a restore takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrashSelection {
    /// These items, by id (any version of a path).
    Ids(Vec<TrashId>),
    /// The newest deletion of this path not restored yet, or the newest before `before_ns`.
    Path {
        /// The path, workspace-relative.
        path: Vec<u8>,
        /// Only deletions before this time (ns).
        before_ns: Option<i64>,
    },
    /// For every path at or below this one, its newest deletion not restored yet.
    Prefix(Vec<u8>),
}

/// A restore as asked: which items, of which workspace, where to, and what to do when a
/// target is taken.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    /// The workspace a path or prefix is in (a session's own is implied).
    pub workspace: Option<String>,
    /// The items.
    pub selection: TrashSelection,
    /// Another workspace-relative path: for one item its new path; for a prefix, what the
    /// prefix becomes.
    pub to: Option<String>,
    /// What to do when a target is taken.
    pub on_conflict: OnConflict,
    /// The sha256 a target must have to be overwritten (`on_conflict: overwrite`).
    pub expected_sha256: Option<String>,
}

/// Who restores: an operator, into each workspace's live directory with the whole workspace in
/// scope, or a session, into its own live tree within its scope.
pub enum Restorer<'a> {
    /// An operator (`trove trash restore`, `POST /v1/trash/restore`).
    Operator {
        /// Who, as the audit log names them.
        actor: &'a str,
        /// The live directory of a workspace, by name.
        live_dir: &'a dyn Fn(&str) -> Result<PathBuf>,
    },
    /// A session (`POST /v1/sessions/{id}/trash/restore`).
    Session {
        /// The session.
        session: &'a Session,
        /// Who, as the audit log names them.
        actor: &'a str,
    },
}

/// Where and how to restore one trash item.
#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreTo<'a> {
    /// Another workspace-relative path; the item's own by default.
    pub to: Option<&'a [u8]>,
    /// What to do when the target is taken.
    pub on_conflict: OnConflict,
    /// The target's sha256, for [`OnConflict::Overwrite`].
    pub expected_sha256: Option<&'a str>,
}

/// An item picked for a restore (its row, without a directory's members yet), or the id that
/// could not be.
pub(super) type Picked = std::result::Result<TrashItem, (TrashId, Error)>;

/// The most items one restore takes: each is a plan of its own, and the answer lists them all.
pub const RESTORE_ITEMS: usize = 10_000;

impl Repo {
    /// Restores the items `req` selects, as `who`, each through the journal on its own: every
    /// item's outcome is reported, and a refusal (audited) never stops the others. A request
    /// that cannot be understood (a path without a workspace, `to` with several ids) fails whole
    /// and changes nothing; past the request's deadline the items not started are reported as
    /// `timeout` and left as they are. On a handle over another node's replica, its items (by
    /// id) are restored into the acting node's workspaces (`ops/trash/elsewhere.rs`).
    pub fn restore_trash(&self, req: &RestoreRequest, who: &Restorer<'_>) -> Result<BulkRestore> {
        if self.is_other_node() {
            return self.restore_elsewhere(req, who);
        }
        let (workspace, scope) = match who {
            Restorer::Operator { .. } => (req.workspace.clone(), Scope::whole()),
            Restorer::Session { session, .. } => {
                if req.workspace.as_deref().is_some_and(|w| w != session.workspace) {
                    return Err(Error::invalid_argument(format!(
                        "session '{}' restores into its own workspace '{}' only",
                        session.id, session.workspace
                    )));
                }
                (Some(session.workspace.clone()), session.scope()?)
            }
        };
        let to = checked_to(req)?;
        let picked = self.pick_for_restore(&req.selection, workspace.as_deref(), &scope)?;
        Ok(restore_each(
            picked,
            || self.check_deadline("restoring from the trash"),
            |item| self.restore_picked(who, &scope, item, req, to.as_deref()),
        ))
    }

    /// One picked item restored (its members read now), as its outcome. A session is not told
    /// where an item it cannot read was.
    fn restore_picked(
        &self,
        who: &Restorer<'_>,
        scope: &Scope,
        row: TrashItem,
        req: &RestoreRequest,
        to: Option<&[u8]>,
    ) -> RestoreOutcome {
        if !scope.can_read(&row.path) {
            let e = Error::new(
                ErrorKind::PermissionDenied,
                format!("trash item '{}' is outside this session's scope", row.id),
            );
            self.audit_restore_refusal(who, &row, &e);
            return RestoreOutcome::failed(row.id, None, &e);
        }
        let shown = path::display(&row.path).into_owned();
        let target = target_of(&req.selection, to, &row);
        let how = RestoreTo {
            to: target.as_deref(),
            on_conflict: req.on_conflict,
            expected_sha256: req.expected_sha256.as_deref(),
        };
        let result = self.trash_item(&row.id).and_then(|item| self.restore_one(who, scope, &item, how));
        match result {
            Ok(r) => RestoreOutcome::done(row.id, shown, r),
            Err(e) => {
                self.audit_restore_refusal(who, &row, &e);
                RestoreOutcome::failed(row.id, Some(shown), &e)
            }
        }
    }

    /// The audit record of a refused restore (none for one that changed the tree all the same);
    /// one that cannot be written is logged, and the item's outcome still reported.
    pub(super) fn audit_restore_refusal(&self, who: &Restorer<'_>, item: &TrashItem, e: &Error) {
        // A restore that reached the tree is no refusal: its own record comes with its recovery.
        if e.made_the_change() {
            return;
        }
        let (actor, session) = match who {
            Restorer::Operator { actor, .. } => (*actor, None),
            Restorer::Session { session, actor } => (*actor, Some(&session.id)),
        };
        let p = path::display(&item.path);
        if let Err(a) = self.audit_refusal(&item.workspace, session, actor, "trash_restore", Some(&p), e) {
            tracing::error!(trash = %item.id, error = %a, refused = %e, "a refused restore could not be audited");
        }
    }

    /// The trash item of `workspace` a restore names: `id`, or the newest deletion at `path`
    /// that is not restored yet, which `scope` must be able to read.
    pub(crate) fn trash_item_to_restore(
        &self,
        workspace: &str,
        scope: &Scope,
        id: Option<&TrashId>,
        at: Option<&str>,
    ) -> Result<TrashItem> {
        match (id, at) {
            (Some(id), _) => {
                let item = self.trash_item(id)?;
                if item.workspace != workspace {
                    return Err(Error::not_found(format!("trash item '{id}' is not in this session's workspace")));
                }
                Ok(item)
            }
            (None, Some(pth)) => {
                let rel = path::normalize_nonempty(pth.as_bytes())?;
                let sel = TrashSelection::Path { path: rel, before_ns: None };
                let row = self.pick_for_restore(&sel, Some(workspace), scope)?.into_iter().next();
                match row {
                    Some(Ok(row)) => self.trash_item(&row.id),
                    Some(Err((_, e))) => Err(e),
                    None => Err(Error::internal("a path restore picked nothing without saying why")),
                }
            }
            (None, None) => Err(Error::invalid_argument("give trashId, or the path that was deleted")),
        }
    }

    /// The rows of the items `sel` names in `workspace` (when given); scopes are checked as
    /// each item is restored.
    pub(super) fn pick_for_restore(
        &self,
        sel: &TrashSelection,
        workspace: Option<&str>,
        scope: &Scope,
    ) -> Result<Vec<Picked>> {
        let need_workspace = || {
            workspace.ok_or_else(|| {
                Error::invalid_argument("a path or prefix names items of one workspace: give the workspace too")
            })
        };
        let too_many = |n: usize| {
            Error::invalid_argument(format!(
                "{n} items are more than one restore takes ({RESTORE_ITEMS}): narrow the prefix, or restore in parts"
            ))
        };
        match sel {
            TrashSelection::Ids(ids) => {
                if ids.len() > RESTORE_ITEMS {
                    return Err(too_many(ids.len()));
                }
                Ok(ids
                    .iter()
                    .map(|id| {
                        let row = match crate::manifest::trash::row_of(self.manifest.conn(), id) {
                            Ok(Some(row)) => row,
                            Ok(None) => return Err((id.clone(), super::no_item(id))),
                            Err(e) => return Err((id.clone(), e)),
                        };
                        match workspace {
                            Some(w) if row.workspace != w => Err((
                                id.clone(),
                                Error::not_found(format!("trash item '{id}' is not in workspace '{w}'")),
                            )),
                            _ => Ok(row),
                        }
                    })
                    .collect())
            }
            TrashSelection::Path { path: rel, before_ns } => {
                let rel = path::components(rel)?.join(&b'/');
                scope.check_read(&rel)?;
                let w = need_workspace()?;
                // The newest deletion not restored yet; before a time, the newest then, restored
                // since or not (a point in time is asked for).
                let found = self.trash(w, Some(&rel))?.into_iter().find(|t| match before_ns {
                    None => t.restored_ns.is_none(),
                    Some(b) => t.deleted_ns < *b,
                });
                let item = found.ok_or_else(|| {
                    let when = before_ns.map(|b| format!(" before {}", crate::base::time::iso_time(b)));
                    Error::not_found(format!(
                        "nothing deleted at '{}'{} is in the trash of '{w}': list it with `trove trash ls --prefix`",
                        path::display(&rel),
                        when.unwrap_or_default()
                    ))
                })?;
                Ok(vec![Ok(item)])
            }
            TrashSelection::Prefix(prefix) => {
                let prefix = path::components(prefix)?.join(&b'/');
                let w = need_workspace()?;
                let filter = TrashFilter {
                    workspace: Some(w.to_string()),
                    prefix,
                    restored: RestoredFilter::No,
                    limit: RESTORE_ITEMS.saturating_mul(4),
                    ..Default::default()
                };
                // Newest first, so the first item of each path is the one to restore.
                let mut seen = std::collections::HashSet::new();
                let mut out = Vec::new();
                for (item, _) in crate::manifest::trash::page(self.manifest.conn(), &filter)? {
                    if scope.can_read(&item.path) && seen.insert(item.path.clone()) {
                        out.push(Ok(item));
                        if out.len() > RESTORE_ITEMS {
                            return Err(too_many(out.len()));
                        }
                    }
                }
                Ok(out)
            }
        }
    }

    /// One item of a bulk restore, as `who`, under the workspace lock.
    fn restore_one(
        &self,
        who: &Restorer<'_>,
        scope: &Scope,
        item: &TrashItem,
        how: RestoreTo<'_>,
    ) -> Result<RestoreResult> {
        let (actor, session, locked) = match who {
            Restorer::Operator { actor, live_dir } => (*actor, None, self.lock_live(&live_dir(&item.workspace)?)?),
            Restorer::Session { session, actor } => (*actor, Some(&session.id), self.lock_writable(session)?),
        };
        let by = Author { workspace: &item.workspace, session, actor, scope };
        self.restore_trash_item(&locked.wd, &by, "trash_restore", item, how, serde_json::json!({}))
    }

    /// Restores `item` into the tree of `wd` as `by`, through the journal under operation
    /// `tool`, with `details` added to its audit records. The item must be readable in `by`'s
    /// scope and its target writable; missing parent directories are made first (with the mode
    /// of a trashed directory at their path). A merge that left members out does not mark the
    /// item restored.
    pub(crate) fn restore_trash_item(
        &self,
        wd: &WorkDir,
        by: &Author<'_>,
        tool: &str,
        item: &TrashItem,
        how: RestoreTo<'_>,
        details: serde_json::Value,
    ) -> Result<RestoreResult> {
        // Restoring elsewhere is a read of what was deleted: the caller must be able to see it.
        by.scope.check_read(&item.path)?;
        let target = match how.to {
            Some(to) => by.writable_bytes(to)?,
            None => {
                by.scope.check_write(&item.path)?;
                item.path.clone()
            }
        };
        let mut drafts = Vec::new();
        let (target, merge) = free_target(by, wd, tool, &how, item, target, &mut drafts)?;
        let made_parents = self.draft_parents(wd, by.workspace, &target, &mut drafts)?;
        let collisions = draft_restore(wd, item, &target, merge, &mut drafts)?;
        if merge && !drafts.iter().any(|d| !matches!(d, Draft::Remove { .. })) {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "every member of trash item {} collides with something at its path under '{}': nothing to merge",
                    item.id,
                    path::display(&target)
                ),
            ));
        }
        let mut details = details;
        if let Some(d) = details.as_object_mut() {
            // Only a whole restore marks the row restored (the journal's finish reads this key).
            let key = if collisions.is_empty() { "restoredTrashId" } else { "partlyRestoredTrashId" };
            d.insert(key.into(), serde_json::json!(item.id));
        }
        let done = self.execute(wd, by.ctx(tool, details), drafts)?;
        let sha256 = match item.kind {
            EntryKind::File => done.written.iter().rev().find(|(p, _)| *p == target).map(|(_, s)| s.clone()),
            _ => None,
        };
        Ok(RestoreResult {
            path: path::display(&target).into_owned(),
            sha256,
            trash_id: item.id.clone(),
            kind: item.kind,
            replaced_trash_id: done.trashed.first().map(|(_, id)| id.clone()),
            audit_seq: done.audit_seqs.last().copied(),
            made_parents: made_parents.iter().map(|p| path::display(p).into_owned()).collect(),
            collisions: collisions.iter().map(|p| path::display(p).into_owned()).collect(),
        })
    }

    /// `Mkdir` steps for the missing ancestors of `target`, outermost first; each gets the
    /// mode of the newest trashed directory at its path, if one is in the trash.
    fn draft_parents(
        &self,
        wd: &WorkDir,
        workspace: &str,
        target: &[u8],
        drafts: &mut Vec<Draft>,
    ) -> Result<Vec<Vec<u8>>> {
        let mut made = Vec::new();
        let mut missing = false;
        let ancestors = target.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| &target[..i]);
        for dir in ancestors {
            if !missing {
                match wd.stat(dir)? {
                    Some(m) if m.kind == Kind::Dir => continue,
                    Some(_) => {
                        return Err(Error::new(
                            ErrorKind::AlreadyExists,
                            format!(
                                "'{}' is not a directory, so '{}' cannot be restored under it: restore it elsewhere with `to`",
                                path::display(dir),
                                path::display(target)
                            ),
                        )
                        .with_detail("path", path::display(dir).as_ref()))
                    }
                    None => missing = true,
                }
            }
            let trashed = self.trash(workspace, Some(dir))?.into_iter().find(|t| t.kind == EntryKind::Dir);
            drafts.push(Draft::Mkdir { path: dir.to_vec(), mode: trashed.map(|t| t.mode) });
            made.push(dir.to_vec());
        }
        Ok(made)
    }
}

/// The request's `to`, normalized: a path below the workspace's root, with one item at most.
pub(super) fn checked_to(req: &RestoreRequest) -> Result<Option<Vec<u8>>> {
    let to = req.to.as_deref().map(path::from_text).transpose()?;
    if to.as_ref().is_some_and(|t| t.is_empty()) {
        return Err(Error::invalid_argument("`to` must name a path below the workspace's root"));
    }
    if let (TrashSelection::Ids(ids), Some(_)) = (&req.selection, &to) {
        if ids.len() > 1 {
            return Err(Error::invalid_argument(
                "`to` names one new path: give one id with it, or a prefix to move a whole set",
            ));
        }
    }
    Ok(to)
}

/// Restores the `picked` items one by one with `one`, parents before children and the newest
/// version of a path first, each outcome reported; once `deadline` fails, the items not started
/// are reported as failed with its error and left as they are.
pub(super) fn restore_each(
    mut picked: Vec<Picked>,
    deadline: impl Fn() -> Result<()>,
    mut one: impl FnMut(TrashItem) -> RestoreOutcome,
) -> BulkRestore {
    // Parents before children (a directory restored before what is restored into it); the
    // newest version of a path first.
    picked.sort_by(|a, b| match (a, b) {
        (Ok(a), Ok(b)) => a.path.cmp(&b.path).then(b.deleted_ns.cmp(&a.deleted_ns)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => std::cmp::Ordering::Equal,
    });
    let mut out = BulkRestore { restored: 0, failed: 0, items: Vec::with_capacity(picked.len()) };
    let mut late = None;
    for p in picked {
        let outcome = match (p, &late) {
            (Ok(item), None) => match deadline() {
                Ok(()) => one(item),
                Err(e) => {
                    let outcome = RestoreOutcome::failed(item.id, None, &e);
                    late = Some(e);
                    outcome
                }
            },
            (Ok(item), Some(e)) => RestoreOutcome::failed(item.id, None, e),
            (Err((id, e)), _) => RestoreOutcome::failed(id, None, &e),
        };
        if outcome.ok {
            out.restored += 1;
        } else {
            out.failed += 1;
        }
        out.items.push(outcome);
    }
    out
}

/// Where `to` (normalized) puts an item: itself for one item; for a prefix, the prefix
/// replaced by it, byte for byte.
pub(super) fn target_of(sel: &TrashSelection, to: Option<&[u8]>, item: &TrashItem) -> Option<Vec<u8>> {
    let to = to?;
    match sel {
        TrashSelection::Prefix(prefix) => {
            let prefix = path::components(prefix).ok()?.join(&b'/');
            let rest = item.path.get(prefix.len()..).unwrap_or(b"");
            Some(match rest.strip_prefix(b"/").unwrap_or(rest) {
                b"" => to.to_vec(),
                rest => join_rel(to, rest),
            })
        }
        _ => Some(to.to_vec()),
    }
}

/// The refusal of a restore onto a taken path, saying what to do about it.
fn taken(target: &[u8]) -> Error {
    let shown = path::display(target);
    Error::new(
        ErrorKind::AlreadyExists,
        format!(
            "'{shown}' already exists: restore with onConflict rename, merge (a directory) or overwrite (a file, with its expectedSha256), or to another path"
        ),
    )
    .with_detail("path", shown.as_ref())
}

/// Where a restore goes when `target` is taken: refused (`fail`), the first free
/// `(restored)` name (`rename`), over the file there, which goes to the trash, if it is the one
/// `expectedSha256` names (`overwrite`, files only), or into the directory there (`merge`,
/// directories only). Returns the target and whether it merges.
fn free_target(
    by: &Author<'_>,
    wd: &WorkDir,
    tool: &str,
    how: &RestoreTo<'_>,
    item: &TrashItem,
    target: Vec<u8>,
    drafts: &mut Vec<Draft>,
) -> Result<(Vec<u8>, bool)> {
    let Some(there) = wd.stat(&target)? else { return Ok((target, false)) };
    match how.on_conflict {
        OnConflict::Fail => Err(taken(&target)),
        OnConflict::Rename => {
            let free = free_name(wd, &target)?;
            by.scope.check_write(&free)?;
            Ok((free, false))
        }
        OnConflict::Overwrite => {
            if item.kind == EntryKind::Dir {
                return Err(Error::invalid_argument(
                    "onConflict overwrite restores files only; restore a directory with merge, rename or to another path",
                ));
            }
            let Some(expected) = how.expected_sha256 else {
                let cur = wd.current(&target)?;
                return Err(stale(&target, cur.map(|c| hex_sha(&c.sha256)), None));
            };
            drafts.push(draft_remove(by, wd, &target, Some(expected), tool)?);
            Ok((target, false))
        }
        OnConflict::Merge if item.kind == EntryKind::Dir && there.kind == Kind::Dir => Ok((target, true)),
        OnConflict::Merge => Err(Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "'{}' already exists, and onConflict merge restores a directory into a directory: use rename, or overwrite for a file",
                path::display(&target)
            ),
        )),
    }
}

/// A content in the store, from a trash row's object id and sha256 (a file's row has both).
fn stored(item: &TrashId, object: Option<ObjectId>, sha256: Option<Sha256>) -> Result<NewContent> {
    match (object, sha256) {
        (Some(id), Some(sha256)) => Ok(NewContent::Stored { id, sha256 }),
        _ => Err(Error::corrupt(format!("trash item {item} records a file without its content or sha256"))),
    }
}

/// The steps that put `item` back at `target`: a file written from its object, or a
/// directory made with its subdirectories first, then its files and links. Merging into an
/// existing directory, a member whose path is taken is left out (with everything under it) and
/// returned as a collision.
fn draft_restore(
    wd: &WorkDir,
    item: &TrashItem,
    target: &[u8],
    merge: bool,
    drafts: &mut Vec<Draft>,
) -> Result<Vec<Vec<u8>>> {
    if item.kind != EntryKind::Dir {
        let content = stored(&item.id, item.object, item.sha256)?;
        drafts.push(Draft::Write { path: target.to_vec(), content, mode: item.mode, before: None });
        return Ok(Vec::new());
    }
    if !merge {
        drafts.push(Draft::Mkdir { path: target.to_vec(), mode: Some(item.mode) });
    }
    let (mut members, mut collisions) = (Vec::new(), Vec::<Vec<u8>>::new());
    for e in &item.entries {
        let rel = join_rel(target, &e.rel);
        if merge {
            if collisions.iter().any(|c| rel.starts_with(c) && rel.get(c.len()) == Some(&b'/')) {
                continue;
            }
            match (wd.stat(&rel)?, e.kind) {
                (None, _) => {}
                (Some(m), EntryKind::Dir) if m.kind == Kind::Dir => continue,
                (Some(_), _) => {
                    collisions.push(rel);
                    continue;
                }
            }
        }
        match (e.kind, &e.target) {
            (EntryKind::File, _) => {
                let content = stored(&item.id, e.object, e.sha256)?;
                members.push(Draft::Write { path: rel, content, mode: e.mode, before: None });
            }
            (EntryKind::Dir, _) => drafts.push(Draft::Mkdir { path: rel, mode: Some(e.mode) }),
            (EntryKind::Symlink, Some(t)) => members.push(Draft::Symlink { path: rel, target: t.clone() }),
            (EntryKind::Symlink, None) => {
                return Err(Error::corrupt(format!(
                    "trash item {} records the symlink '{}' without its target",
                    item.id,
                    path::display(&e.rel)
                )))
            }
        }
    }
    drafts.extend(members);
    Ok(collisions)
}

/// `a/b.txt` -> `a/b (restored).txt`, then `(restored 2)`, ... the first that is free.
fn free_name(wd: &WorkDir, rel: &[u8]) -> Result<Vec<u8>> {
    let (dir, name) = split(rel);
    let name = path::display(name).into_owned();
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (&name[..], ""),
    };
    for n in 1..1000 {
        let suffix = if n == 1 { " (restored)".to_string() } else { format!(" (restored {n})") };
        let candidate = join_rel(dir, format!("{stem}{suffix}{ext}").as_bytes());
        if wd.stat(&candidate)?.is_none() {
            return Ok(candidate);
        }
    }
    Err(taken(rel))
}
