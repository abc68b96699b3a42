//! Drafting a deletion into the trash: the journal step that moves a file, or a directory with
//! everything in it, out of the live tree, and the trash row that keeps it. The tools
//! (`delete_file`, `apply_patch`'s Delete, an overwrite during a restore, a revert) and the
//! operator's `trove rm` all draft it here, so every deletion keeps its content the same way.

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::base::random::new_trash_id;
use crate::base::time::now_ns;
use crate::fs::workdir::{Current, Kind, Meta, WorkDir};
use crate::model::scope::Scope;
use crate::model::trash::{TrashEntry, TrashItem, TrashRecord};
use crate::model::tree::EntryKind;
use crate::ops::journal::{hex_sha, stale, Author, Draft};
use crate::repo::Repo;

/// The most one deletion of a directory may take into the trash: every file is read and
/// stored before the plan commits, so one call is bounded.
pub const DELETE_DIR_ENTRIES: usize = 20_000;
/// The most bytes one deletion of a directory may take into the trash.
pub const DELETE_DIR_BYTES: u64 = 256 << 20;

impl Repo {
    /// Deletes `paths` (files or whole directories) of workspace `workspace`, whose live tree
    /// is `dir`, into the trash as an operator (`trove rm`): one journaled change, so every path
    /// goes or none does, each only once its content is durable in the store; audited with
    /// `actor`. Returns the new trash items.
    pub fn remove_into_trash(
        &self,
        workspace: &str,
        dir: &std::path::Path,
        paths: &[String],
        actor: &str,
    ) -> Result<Vec<TrashRecord>> {
        crate::model::session::check_workspace_name(workspace)?;
        if paths.is_empty() {
            return Err(Error::invalid_argument("name at least one path to delete"));
        }
        let scope = Scope::whole();
        let by = Author { workspace, session: None, actor, scope: &scope };
        let locked = self.lock_live(dir)?;
        let mut drafts = Vec::with_capacity(paths.len());
        let mut seen = Vec::<Vec<u8>>::new();
        for p in paths {
            let rel = by.writable(p)?;
            // One path inside another would be deleted twice: name each once.
            let nested = |a: &[u8], b: &[u8]| a == b || (b.starts_with(a) && b.get(a.len()) == Some(&b'/'));
            if let Some(other) = seen.iter().find(|s| nested(s, &rel) || nested(&rel, s)) {
                return Err(Error::invalid_argument(format!(
                    "'{}' and '{}' overlap: name each thing to delete once",
                    path::display(other),
                    path::display(&rel)
                )));
            }
            drafts.push(draft_remove(&by, &locked.wd, &rel, None, "rm")?);
            seen.push(rel);
        }
        // The limits of one deletion hold for the whole change, not for each path of it.
        let (mut entries, mut bytes) = (0usize, 0u64);
        for d in &drafts {
            if let Draft::Remove { trash, .. } = d {
                entries = entries.saturating_add(trash.entries.len().max(1));
                bytes = bytes.saturating_add(trash.size);
            }
        }
        if entries > DELETE_DIR_ENTRIES || bytes > DELETE_DIR_BYTES {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "these paths hold {entries} entries and {bytes} bytes, over the {DELETE_DIR_ENTRIES}-entry / {DELETE_DIR_BYTES}-byte limit of one delete: delete them in parts"
                ),
            ));
        }
        let done = self.execute(&locked.wd, by.ctx("rm", serde_json::json!({})), drafts)?;
        done.trashed.iter().map(|(_, id)| self.trash_item(id).map(|t| t.record())).collect()
    }
}

/// The stale-file protocol for a file that must exist: `expected` must be its sha256.
pub fn check_expected(rel: &[u8], cur: Option<Current>, expected: Option<&str>) -> Result<Current> {
    match (cur, expected) {
        (Some(c), Some(e)) if hex_sha(&c.sha256).eq_ignore_ascii_case(e) => Ok(c),
        (cur, e) => Err(stale(rel, cur.map(|c| hex_sha(&c.sha256)), e)),
    }
}

/// The `not_found` of a path to delete, naming it.
fn missing(rel: &[u8]) -> Error {
    Error::not_found(format!("'{}' not found", path::display(rel))).with_detail("path", path::display(rel).as_ref())
}

/// Drafts moving whatever is at `rel` (file or directory) to the trash, as `by`, for `reason`
/// (the tool, or `operator`). A file must still have `expected` when it is given; a directory
/// takes no sha256, and every member must be writable in `by`'s scope.
pub fn draft_remove(by: &Author<'_>, wd: &WorkDir, rel: &[u8], expected: Option<&str>, reason: &str) -> Result<Draft> {
    let meta = wd.stat(rel)?.ok_or_else(|| missing(rel))?;
    match meta.kind {
        Kind::File => {
            let cur = wd.current(rel)?;
            let cur = match expected {
                Some(e) => check_expected(rel, cur, Some(e))?,
                None => cur.ok_or_else(|| missing(rel))?,
            };
            let trash = TrashItem {
                size: cur.size,
                sha256: Some(cur.sha256),
                mode: cur.mode,
                object: Some(cur.content),
                mtime_ns: meta.mtime_ns,
                ..blank_item(by, rel, EntryKind::File, reason)?
            };
            Ok(Draft::Remove { path: rel.to_vec(), before: Some(cur), trash: Box::new(trash), members: Vec::new() })
        }
        Kind::Dir => {
            if expected.is_some() {
                return Err(Error::invalid_argument(format!(
                    "'{}' is a directory: expectedSha256 applies to files only; leave it out",
                    path::display(rel)
                )));
            }
            draft_remove_dir(by, wd, rel, &meta, reason)
        }
        Kind::Symlink | Kind::Other => Err(Error::invalid_argument(format!(
            "'{}' is a symlink or special file: only files and directories are deleted into the trash",
            path::display(rel)
        ))),
    }
}

/// A trash row for `rel` with its who, when and why, and nothing of its content yet.
fn blank_item(by: &Author<'_>, rel: &[u8], kind: EntryKind, reason: &str) -> Result<TrashItem> {
    Ok(TrashItem {
        id: new_trash_id()?,
        workspace: by.workspace.to_string(),
        session: by.session.cloned(),
        path: rel.to_vec(),
        kind,
        size: 0,
        sha256: None,
        mode: 0,
        object: None,
        deleted_by: by.actor.to_string(),
        deleted_ns: now_ns(),
        reason: reason.into(),
        audit_seq: None,
        restored_ns: None,
        mtime_ns: 0,
        files: 0,
        entries: Vec::new(),
    })
}

/// The removal of directory `rel` (as `meta` found it) with everything in it.
fn draft_remove_dir(by: &Author<'_>, wd: &WorkDir, rel: &[u8], meta: &Meta, reason: &str) -> Result<Draft> {
    let mut walked = Vec::new();
    wd.walk(rel, &mut walked)?;
    let total: u64 = walked.iter().filter(|(_, m)| m.kind == Kind::File).map(|(_, m)| m.size).sum();
    if walked.len() > DELETE_DIR_ENTRIES || total > DELETE_DIR_BYTES {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "directory '{}' holds {} entries and {total} bytes, over the {DELETE_DIR_ENTRIES}-entry / {DELETE_DIR_BYTES}-byte limit of one delete: delete its subdirectories one at a time",
                path::display(rel),
                walked.len()
            ),
        ));
    }
    let (mut entries, mut members, mut size) = (Vec::new(), Vec::new(), 0);
    for (child, m) in walked {
        if !by.scope.can_write(&child) {
            return Err(Scope::denied_path(&child));
        }
        let Some(e) = trash_entry(wd, rel, &child, &m)? else { continue };
        if let (EntryKind::File, Some(sha)) = (e.kind, e.sha256) {
            size += e.size;
            members.push((child, sha));
        }
        entries.push(e);
    }
    let trash = TrashItem {
        size,
        mode: meta.mode,
        mtime_ns: meta.mtime_ns,
        files: members.len() as u64,
        entries,
        ..blank_item(by, rel, EntryKind::Dir, reason)?
    };
    Ok(Draft::Remove { path: rel.to_vec(), before: None, trash: Box::new(trash), members })
}

/// The trash entry of `child`, a member of directory `dir` (`None` for a socket, FIFO or
/// device, which is not kept).
fn trash_entry(wd: &WorkDir, dir: &[u8], child: &[u8], m: &Meta) -> Result<Option<TrashEntry>> {
    let rel = child.get(dir.len() + 1..).map(<[u8]>::to_vec).ok_or_else(|| {
        Error::internal(format!("'{}' was walked as a member of '{}'", path::display(child), path::display(dir)))
    })?;
    let blank = |kind| TrashEntry {
        rel: rel.clone(),
        kind,
        size: 0,
        sha256: None,
        mode: m.mode,
        object: None,
        target: None,
        mtime_ns: m.mtime_ns,
    };
    Ok(Some(match m.kind {
        Kind::File => {
            let cur = wd.current(child)?.ok_or_else(|| Error::not_found(path::display(child)))?;
            TrashEntry {
                size: cur.size,
                sha256: Some(cur.sha256),
                mode: cur.mode,
                object: Some(cur.content),
                ..blank(EntryKind::File)
            }
        }
        Kind::Dir => blank(EntryKind::Dir),
        Kind::Symlink => TrashEntry { target: Some(wd.read_link(child)?), ..blank(EntryKind::Symlink) },
        Kind::Other => return Ok(None),
    }))
}
