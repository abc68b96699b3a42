//! The tools that change files, and `revert`: each checks the stale-file protocol against the
//! file as it is now, drafts its steps, and hands them to the journal (`journal.rs`), which
//! checks again immediately before each rename.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::caller::Caller;
use super::edit::{self, Edit};
use super::output::{DeleteResult, EditResult, MoveResult, RestoreResult, RevertResult, ToolOutput, WriteResult};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::base::random::new_trash_id;
use crate::base::time::now_ns;
use crate::fs::lock::Locked;
use crate::fs::workdir::{Current, Kind, WorkDir};
use crate::journal::{self, already_exists, hex_sha, Ctx, Done, Draft, NewContent};
use crate::model::audit::AuditRecord;
use crate::model::session::Session;
use crate::model::trash::{TrashEntry, TrashItem};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};
use crate::repo::Repo;

/// `create_file`: makes a file that must not exist yet.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The new content.
    pub content: String,
    /// `utf-8` (default) or `base64`: how `content` is written.
    pub encoding: Option<String>,
}

/// `write_file`: replaces a file's whole content, if it is still what was read.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The new content.
    pub content: String,
    /// `utf-8` (default) or `base64`: how `content` is written.
    pub encoding: Option<String>,
    /// The sha256 the file has now, as last read (the stale-file protocol); `""` means it must not exist.
    pub expected_sha256: Option<String>,
}

/// `edit_file`: exact-string replacements in a text file, all or none.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The sha256 the file has now, as last read (the stale-file protocol); `""` means it must not exist.
    pub expected_sha256: Option<String>,
    /// The replacements, applied in order.
    pub edits: Vec<Edit>,
}

/// `delete_file`: moves a file, or a directory with everything in it, into the trash.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteFile {
    /// The file, workspace-relative.
    pub path: String,
    /// A file's sha256 as last read; leave it out for a directory.
    pub expected_sha256: Option<String>,
}

/// What `restore_file` does when something is at the target path.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// Refuse with `already_exists`.
    #[default]
    Fail,
    /// Restore beside it, as `name (restored).ext`.
    Rename,
    /// Replace it (a file, whose sha256 must be given), sending it to the trash.
    Overwrite,
}

/// `restore_file`: brings a trash item back.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreFile {
    /// The item to restore; or give `path`.
    pub trash_id: Option<TrashId>,
    /// The newest deletion at this path, when no `trashId` is given.
    pub path: Option<String>,
    /// Where to restore it; its original path by default.
    pub to: Option<String>,
    /// What to do when the target path is taken.
    #[serde(default)]
    pub on_conflict: OnConflict,
    /// The target's sha256, for `overwrite`.
    pub expected_sha256: Option<String>,
}

/// `move_file`: renames a file or directory, never over anything.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MoveFile {
    /// Where it is, workspace-relative.
    pub from: String,
    /// Where it goes; must be free.
    pub to: String,
    /// A file's sha256 as last read.
    pub expected_sha256: Option<String>,
}

/// `apply_patch`: a multi-file patch, applied all or nothing.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyPatch {
    /// The patch text (`*** Begin Patch` ... `*** End Patch`).
    pub patch: String,
    /// Per path, the sha256 the file must have now (`""`: must not exist).
    #[serde(default)]
    pub expected_sha256_by_path: BTreeMap<String, String>,
}

/// The largest text `edit_file` and `apply_patch` rewrite in memory (all files of one patch
/// together); bigger files are replaced whole with `write_file`.
pub const EDIT_LIMIT: u64 = 32 << 20;

/// A content in the store, from a trash row's object id and sha256 (a file's row has both).
fn stored(item: &TrashId, object: Option<ObjectId>, sha256: Option<Sha256>) -> Result<NewContent> {
    match (object, sha256) {
        (Some(id), Some(sha256)) => Ok(NewContent::Stored { id, sha256 }),
        _ => Err(Error::corrupt(format!("trash item {item} records a file without its content or sha256"))),
    }
}

/// The most one `delete_file` of a directory may take into the trash.
const DELETE_DIR_ENTRIES: usize = 20_000;
const DELETE_DIR_BYTES: u64 = 256 << 20;

/// A path a tool may write: normalized, inside the scope.
pub(super) fn writable(c: &Caller<'_>, p: &str) -> Result<Vec<u8>> {
    let rel = path::normalize_nonempty(p.as_bytes())?;
    c.scope.check_write(&rel)?;
    Ok(rel)
}

fn decode(content: &str, encoding: Option<&str>) -> Result<Vec<u8>> {
    match encoding {
        None | Some("utf-8") | Some("utf8") => Ok(content.as_bytes().to_vec()),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|e| Error::invalid_argument(format!("content is not valid base64: {e}"))),
        Some(other) => Err(Error::invalid_argument(format!("encoding '{other}' is not one of: utf-8, base64"))),
    }
}

pub(super) fn stale(rel: &[u8], cur: Option<&Current>, expected: Option<&str>) -> Error {
    journal::stale(rel, cur.map(|c| hex_sha(&c.sha256)), expected)
}

/// The stale-file protocol for a file that must exist: `expected` must be its sha256.
pub(super) fn check_expected(rel: &[u8], cur: Option<Current>, expected: Option<&str>) -> Result<Current> {
    match (cur, expected) {
        (Some(c), Some(e)) if hex_sha(&c.sha256).eq_ignore_ascii_case(e) => Ok(c),
        (cur, e) => Err(stale(rel, cur.as_ref(), e)),
    }
}

pub(super) fn ctx<'a>(c: &'a Caller<'a>, tool: &'a str, details: Value) -> Ctx<'a> {
    Ctx { tool, actor: c.actor, workspace: &c.session.workspace, session: Some(&c.session.id), details }
}

fn trash_file(c: &Caller<'_>, rel: &[u8], cur: &Current, reason: &str) -> Result<TrashItem> {
    Ok(TrashItem {
        id: new_trash_id()?,
        workspace: c.session.workspace.clone(),
        session: Some(c.session.id.clone()),
        path: rel.to_vec(),
        kind: EntryKind::File,
        size: cur.size,
        sha256: Some(cur.sha256),
        mode: cur.mode,
        object: Some(cur.content),
        deleted_by: c.actor.to_string(),
        deleted_ns: now_ns(),
        reason: reason.into(),
        audit_seq: None,
        restored_ns: None,
        entries: Vec::new(),
    })
}

/// Drafts moving whatever is at `rel` (file or directory) to the trash.
pub(super) fn draft_remove(
    c: &Caller<'_>,
    wd: &WorkDir,
    rel: &[u8],
    expected: Option<&str>,
    reason: &str,
) -> Result<Draft> {
    let meta = wd.stat(rel)?.ok_or_else(|| {
        Error::not_found(format!("'{}' not found", path::display(rel))).with_detail("path", path::display(rel).as_ref())
    })?;
    match meta.kind {
        Kind::File => {
            let cur = wd.current(rel)?;
            let cur = match expected {
                Some(e) => check_expected(rel, cur, Some(e))?,
                None => cur.ok_or_else(|| Error::not_found(format!("'{}' not found", path::display(rel))))?,
            };
            let trash = trash_file(c, rel, &cur, reason)?;
            Ok(Draft::Remove { path: rel.to_vec(), before: Some(cur), trash: Box::new(trash), members: Vec::new() })
        }
        Kind::Dir => {
            if expected.is_some() {
                return Err(Error::invalid_argument(format!(
                    "'{}' is a directory: expectedSha256 applies to files only; leave it out",
                    path::display(rel)
                )));
            }
            draft_remove_dir(c, wd, rel, meta.mode, reason)
        }
        Kind::Symlink | Kind::Other => Err(Error::invalid_argument(format!(
            "'{}' is a symlink or special file: the tools delete files and directories only",
            path::display(rel)
        ))),
    }
}

/// The removal of directory `rel` (permission bits `mode`) with everything in it: every member
/// must be writable in the scope, and one call is bounded in entries and bytes.
fn draft_remove_dir(c: &Caller<'_>, wd: &WorkDir, rel: &[u8], mode: u32, reason: &str) -> Result<Draft> {
    let mut walked = Vec::new();
    wd.walk(rel, &mut walked)?;
    // Every file is read and stored in one transaction: bound what one call may take.
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
    let mut entries = Vec::new();
    let mut members = Vec::new();
    let mut size = 0;
    for (child, m) in walked {
        if !c.scope.can_write(&child) {
            return Err(crate::model::scope::Scope::denied_path(&child));
        }
        let Some(e) = trash_entry(wd, rel, &child, &m)? else { continue };
        if let (EntryKind::File, Some(sha)) = (e.kind, e.sha256) {
            size += e.size;
            members.push((child, sha));
        }
        entries.push(e);
    }
    let trash = TrashItem {
        id: new_trash_id()?,
        workspace: c.session.workspace.clone(),
        session: Some(c.session.id.clone()),
        path: rel.to_vec(),
        kind: EntryKind::Dir,
        size,
        sha256: None,
        mode,
        object: None,
        deleted_by: c.actor.to_string(),
        deleted_ns: now_ns(),
        reason: reason.into(),
        audit_seq: None,
        restored_ns: None,
        entries,
    };
    Ok(Draft::Remove { path: rel.to_vec(), before: None, trash: Box::new(trash), members })
}

/// The trash entry of `child`, a member of directory `dir` (`None` for a socket, FIFO or
/// device, which is not kept).
fn trash_entry(wd: &WorkDir, dir: &[u8], child: &[u8], m: &crate::fs::workdir::Meta) -> Result<Option<TrashEntry>> {
    let rel = child[dir.len() + 1..].to_vec();
    let blank =
        |kind| TrashEntry { rel: rel.clone(), kind, size: 0, sha256: None, mode: m.mode, object: None, target: None };
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

pub(super) fn written(done: &Done, rel: &[u8]) -> Option<String> {
    done.written.iter().rev().find(|(p, _)| p == rel).map(|(_, s)| s.clone())
}

/// The step that puts back the content a write replaced, if the file is still what it wrote.
fn undo_write(wd: &WorkDir, rec: &AuditRecord, rel: &[u8], after: Option<&str>, seq: i64) -> Result<Vec<Draft>> {
    let cur = check_expected(rel, wd.current(rel)?, after)?;
    let obj = rec.before_object.ok_or_else(|| Error::corrupt(format!("audit record {seq} kept no pre-image")))?;
    let sha = rec.before_sha256.ok_or_else(|| Error::corrupt(format!("audit record {seq} lacks the old sha256")))?;
    let content = NewContent::Stored { id: obj, sha256: sha };
    Ok(vec![Draft::Write { path: rel.to_vec(), content, mode: cur.mode, before: Some(cur) }])
}

/// The step that moves a moved file or directory back, if its old path is free and a file is
/// still what it was.
fn undo_move(wd: &WorkDir, rec: &AuditRecord, rel: &[u8], after: Option<&str>, seq: i64) -> Result<Vec<Draft>> {
    let to =
        rec.dest_path.clone().ok_or_else(|| Error::corrupt(format!("audit record {seq} lacks its destination")))?;
    if wd.stat(rel)?.is_some() {
        return Err(already_exists(rel));
    }
    let before = match wd.stat(&to)? {
        Some(m) if m.kind == Kind::File => Some(check_expected(&to, wd.current(&to)?, after)?),
        Some(_) => None,
        None => return Err(stale(&to, None, after)),
    };
    Ok(vec![Draft::Move { from: to, to: rel.to_vec(), before }])
}

/// Where a restore goes when `target` is taken: refused (`fail`), the first free
/// `(restored)` name (`rename`), or over the file there, which goes to the trash, if it is the
/// one `expectedSha256` names (`overwrite`, files only).
fn free_target(
    c: &Caller<'_>,
    l: &Locked,
    p: &RestoreFile,
    item: &TrashItem,
    target: Vec<u8>,
    drafts: &mut Vec<Draft>,
) -> Result<Vec<u8>> {
    if l.wd.stat(&target)?.is_none() {
        return Ok(target);
    }
    match p.on_conflict {
        OnConflict::Fail => Err(already_exists(&target)),
        OnConflict::Rename => {
            let free = free_name(&l.wd, &target)?;
            c.scope.check_write(&free)?;
            Ok(free)
        }
        OnConflict::Overwrite => {
            if item.kind == EntryKind::Dir {
                return Err(Error::invalid_argument(
                    "onConflict overwrite restores files only; restore the directory with rename or to another path",
                ));
            }
            let Some(expected) = p.expected_sha256.as_deref() else {
                let cur = l.wd.current(&target)?;
                return Err(stale(&target, cur.as_ref(), None));
            };
            drafts.push(draft_remove(c, &l.wd, &target, Some(expected), "restore_file")?);
            Ok(target)
        }
    }
}

/// The steps that put `item` back at `target`: a file written from its object, or a
/// directory made with its subdirectories first, then its files and links.
fn draft_restore(item: &TrashItem, target: &[u8], drafts: &mut Vec<Draft>) -> Result<()> {
    if item.kind != EntryKind::Dir {
        let content = stored(&item.id, item.object, item.sha256)?;
        drafts.push(Draft::Write { path: target.to_vec(), content, mode: item.mode, before: None });
        return Ok(());
    }
    drafts.push(Draft::Mkdir { path: target.to_vec() });
    let mut members = Vec::new();
    for e in &item.entries {
        let rel = crate::fs::walk::join_rel(target, &e.rel);
        match (e.kind, &e.target) {
            (EntryKind::File, _) => {
                let content = stored(&item.id, e.object, e.sha256)?;
                members.push(Draft::Write { path: rel, content, mode: e.mode, before: None });
            }
            (EntryKind::Dir, _) => drafts.push(Draft::Mkdir { path: rel }),
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
    Ok(())
}

/// What `create_file` and `write_file` answer once `done` wrote `size` bytes at `rel`.
fn write_result(done: &Done, rel: &[u8], size: usize) -> WriteResult {
    WriteResult {
        path: path::display(rel).into_owned(),
        sha256: written(done, rel),
        size,
        audit_seq: done.audit_seqs.first().copied(),
    }
}

/// `a/b.txt` -> `a/b (restored).txt`, then `(restored 2)`, ... the first that is free.
fn free_name(wd: &WorkDir, rel: &[u8]) -> Result<Vec<u8>> {
    let (dir, name) = crate::fs::workdir::split(rel);
    let name = path::display(name).into_owned();
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (&name[..], ""),
    };
    for n in 1..1000 {
        let suffix = if n == 1 { " (restored)".to_string() } else { format!(" (restored {n})") };
        let candidate = crate::fs::walk::join_rel(dir, format!("{stem}{suffix}{ext}").as_bytes());
        if wd.stat(&candidate)?.is_none() {
            return Ok(candidate);
        }
    }
    Err(already_exists(rel))
}

impl Repo {
    /// The file at `rel` whole, for an edit, if it still has `expected`; with the share of the
    /// memory budget its bytes take.
    fn read_to_edit(
        &self,
        wd: &WorkDir,
        rel: &[u8],
        expected: Option<&str>,
    ) -> Result<(Current, Vec<u8>, crate::base::budget::Permit)> {
        let size = wd.stat(rel)?.map_or(0, |m| m.size);
        let held = self.hold(2 * size.min(EDIT_LIMIT))?;
        let read = wd.read_whole(rel, EDIT_LIMIT)?;
        let (cur, bytes) = match read {
            Some((cur, bytes)) => (Some(cur), bytes),
            None => (None, Vec::new()),
        };
        Ok((check_expected(rel, cur, expected)?, bytes, held))
    }

    /// The bytes of a file content object (loose or packed, whole or chunked), verified.
    pub fn content_bytes(&self, hex_id: &str) -> Result<Vec<u8>> {
        let id = ObjectId::from_hex(hex_id)?;
        let chunks = crate::manifest::objects::chunk_list(self.manifest.conn(), &id)?;
        if chunks.is_empty() {
            return self.read_object(&id);
        }
        let mut out = Vec::new();
        for (_, c) in chunks {
            out.extend_from_slice(&self.read_object(&c)?);
        }
        if ObjectId::of(&out) != id {
            return Err(Error::corrupt(format!("the chunks of {id} do not add up to it; run `trove check`")));
        }
        Ok(out)
    }

    pub(crate) fn tool_create_file(&self, c: &Caller<'_>, l: &Locked, p: &CreateFile) -> Result<WriteResult> {
        let rel = writable(c, &p.path)?;
        let content = decode(&p.content, p.encoding.as_deref())?;
        if l.wd.stat(&rel)?.is_some() {
            return Err(already_exists(&rel));
        }
        let size = content.len();
        let draft = Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None };
        let done = self.execute(&l.wd, ctx(c, "create_file", json!({})), vec![draft])?;
        Ok(write_result(&done, &rel, size))
    }

    pub(crate) fn tool_write_file(&self, c: &Caller<'_>, l: &Locked, p: &WriteFile) -> Result<WriteResult> {
        let rel = writable(c, &p.path)?;
        let content = decode(&p.content, p.encoding.as_deref())?;
        let size = content.len();
        let cur = l.wd.current(&rel)?;
        let draft = match (cur, p.expected_sha256.as_deref()) {
            // "" asserts there is nothing yet, as in apply_patch.
            (None, Some("")) => {
                Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None }
            }
            (Some(c), Some("")) => return Err(stale(&rel, Some(&c), Some(""))),
            (cur, expected) => {
                let cur = check_expected(&rel, cur, expected)?;
                Draft::Write {
                    path: rel.clone(),
                    content: NewContent::Bytes(content),
                    mode: cur.mode,
                    before: Some(cur),
                }
            }
        };
        let done = self.execute(&l.wd, ctx(c, "write_file", json!({})), vec![draft])?;
        Ok(write_result(&done, &rel, size))
    }

    pub(crate) fn tool_edit_file(&self, c: &Caller<'_>, l: &Locked, p: &EditFile) -> Result<EditResult> {
        let rel = writable(c, &p.path)?;
        let (cur, bytes, _held) = self.read_to_edit(&l.wd, &rel, p.expected_sha256.as_deref())?;
        let shown = path::display(&rel).into_owned();
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            Error::new(ErrorKind::NotText, format!("'{shown}' is not UTF-8 text: replace it with write_file"))
        })?;
        let (new, replacements) = edit::apply(&shown, text, &p.edits)?;
        drop(bytes);
        let content = NewContent::Bytes(new.into_bytes());
        let draft = Draft::Write { path: rel.clone(), content, mode: cur.mode, before: Some(cur) };
        let done = self.execute(&l.wd, ctx(c, "edit_file", json!({})), vec![draft])?;
        Ok(EditResult {
            path: shown,
            sha256: written(&done, &rel),
            replacements,
            audit_seq: done.audit_seqs.first().copied(),
        })
    }

    pub(crate) fn tool_delete_file(&self, c: &Caller<'_>, l: &Locked, p: &DeleteFile) -> Result<DeleteResult> {
        let rel = writable(c, &p.path)?;
        let draft = draft_remove(c, &l.wd, &rel, p.expected_sha256.as_deref(), "delete_file")?;
        let (kind, size) = match &draft {
            Draft::Remove { trash, .. } => (Some(trash.kind), trash.size),
            _ => (None, 0),
        };
        let done = self.execute(&l.wd, ctx(c, "delete_file", json!({})), vec![draft])?;
        let trash_id = done.trashed.first().map(|(_, id)| id.clone());
        Ok(DeleteResult {
            path: path::display(&rel).into_owned(),
            trash_id,
            kind,
            size,
            audit_seq: done.audit_seqs.first().copied(),
        })
    }

    pub(crate) fn tool_move_file(&self, c: &Caller<'_>, l: &Locked, p: &MoveFile) -> Result<MoveResult> {
        let from = writable(c, &p.from)?;
        let to = writable(c, &p.to)?;
        if to.starts_with(&from) && (to.len() == from.len() || to[from.len()] == b'/') {
            return Err(Error::invalid_argument(format!(
                "cannot move '{}' into itself ('{}')",
                path::display(&from),
                path::display(&to)
            )));
        }
        let meta = l.wd.stat(&from)?.ok_or_else(|| {
            Error::not_found(format!("'{}' not found", path::display(&from)))
                .with_detail("path", path::display(&from).as_ref())
        })?;
        if l.wd.stat(&to)?.is_some() {
            return Err(already_exists(&to));
        }
        let before = match meta.kind {
            Kind::File => {
                let cur = l.wd.current(&from)?;
                Some(match p.expected_sha256.as_deref() {
                    Some(e) => check_expected(&from, cur, Some(e))?,
                    None => cur.ok_or_else(|| Error::not_found(format!("'{}' not found", path::display(&from))))?,
                })
            }
            Kind::Dir if p.expected_sha256.is_some() => {
                return Err(Error::invalid_argument(
                    "expectedSha256 applies to files only; leave it out for a directory",
                ))
            }
            _ => None,
        };
        let sha = before.as_ref().map(|b| hex_sha(&b.sha256));
        let draft = Draft::Move { from: from.clone(), to: to.clone(), before };
        let done = self.execute(&l.wd, ctx(c, "move_file", json!({})), vec![draft])?;
        Ok(MoveResult {
            from: path::display(&from).into_owned(),
            to: path::display(&to).into_owned(),
            sha256: sha,
            audit_seq: done.audit_seqs.first().copied(),
        })
    }

    pub(crate) fn tool_restore_file(&self, c: &Caller<'_>, l: &Locked, p: &RestoreFile) -> Result<RestoreResult> {
        let item = self.trash_item_to_restore(c, p)?;
        // Restoring elsewhere is a read of what was deleted: the session must be able to see it.
        c.scope.check_read(&item.path)?;
        let target = match &p.to {
            Some(to) => writable(c, to)?,
            None => {
                c.scope.check_write(&item.path)?;
                item.path.clone()
            }
        };
        let mut drafts = Vec::new();
        let target = free_target(c, l, p, &item, target, &mut drafts)?;
        draft_restore(&item, &target, &mut drafts)?;
        let done = self.execute(&l.wd, ctx(c, "restore_file", json!({"restoredTrashId": item.id})), drafts)?;
        Ok(RestoreResult {
            path: path::display(&target).into_owned(),
            sha256: if item.kind == EntryKind::File { written(&done, &target) } else { None },
            trash_id: item.id,
            kind: item.kind,
            replaced_trash_id: done.trashed.first().map(|(_, id)| id.clone()),
            audit_seq: done.audit_seqs.last().copied(),
        })
    }

    /// The trash item a `restore_file` call names: by id (in the session's workspace), or the
    /// newest deletion at a path that is not restored yet.
    fn trash_item_to_restore(&self, c: &Caller<'_>, p: &RestoreFile) -> Result<TrashItem> {
        match (&p.trash_id, &p.path) {
            (Some(id), _) => {
                let item = self.trash_item(id)?;
                if item.workspace != c.session.workspace {
                    return Err(Error::not_found(format!("trash item '{id}' is not in this session's workspace")));
                }
                Ok(item)
            }
            (None, Some(pth)) => {
                let rel = path::normalize_nonempty(pth.as_bytes())?;
                c.scope.check_read(&rel)?;
                self.trash(&c.session.workspace, Some(&rel))?
                    .into_iter()
                    .find(|t| t.restored_ns.is_none())
                    .map(|t| self.trash_item(&t.id))
                    .transpose()?
                    .ok_or_else(|| {
                        Error::not_found(format!("nothing deleted at '{}' is in the trash", path::display(&rel)))
                    })
            }
            (None, None) => Err(Error::invalid_argument("give trashId, or the path that was deleted")),
        }
    }

    /// Undoes the change audit record `seq` made, through the stale-file protocol: refused
    /// (`stale_file`) if the file changed since. The revert is itself a mutation, audited.
    pub fn revert(&self, seq: i64, actor: &str) -> Result<ToolOutput> {
        let rec = self
            .audit_record(seq)?
            .ok_or_else(|| Error::not_found(format!("audit record {seq} not found: list them with `trove audit log`")))?
            .record;
        let change = rec.details.get("change").and_then(Value::as_str).unwrap_or("");
        if rec.outcome != "ok" || change.is_empty() {
            return Err(Error::invalid_argument(format!(
                "audit record {seq} ({} {}) is not a file change a revert can undo",
                rec.operation, rec.outcome
            )));
        }
        let sid =
            rec.session.clone().ok_or_else(|| Error::invalid_argument(format!("audit record {seq} has no session")))?;
        let s = self.session(&sid)?;
        let result = self.revert_record(&s, &rec, change, seq, actor);
        if let Err(e) = &result {
            let p = rec.path.as_deref().map(path::display);
            self.audit_refusal(&s, actor, "revert", p.as_deref(), e)?;
        }
        result
    }

    fn revert_record(&self, s: &Session, rec: &AuditRecord, change: &str, seq: i64, actor: &str) -> Result<ToolOutput> {
        let l = self.check_writable(s)?;
        let c = Caller { session: s, scope: s.scope()?, actor };
        let rel =
            rec.path.clone().ok_or_else(|| Error::invalid_argument(format!("audit record {seq} names no path")))?;
        let after = rec.after_sha256.map(hex::encode);
        let drafts = match change {
            "write" => undo_write(&l.wd, rec, &rel, after.as_deref(), seq)?,
            "create" | "mkdir" | "symlink" => vec![draft_remove(&c, &l.wd, &rel, after.as_deref(), "revert")?],
            "move" => undo_move(&l.wd, rec, &rel, after.as_deref(), seq)?,
            "delete" => {
                let named = rec.details.get("trashId").and_then(Value::as_str);
                let trash_id = named.map(TrashId::parse).transpose()?.ok_or_else(|| {
                    Error::corrupt(format!("audit record {seq} deleted a file but names no trash id to restore"))
                })?;
                drop(l);
                let call = RestoreFile {
                    trash_id: Some(trash_id),
                    path: None,
                    to: None,
                    on_conflict: OnConflict::Fail,
                    expected_sha256: None,
                };
                let l = self.check_writable(s)?;
                return self.tool_restore_file(&c, &l, &call).map(ToolOutput::Restore);
            }
            other => {
                return Err(Error::invalid_argument(format!("audit record {seq}: a '{other}' cannot be reverted")))
            }
        };
        let done = self.execute(&l.wd, ctx(&c, "revert", json!({"reverts": seq})), drafts)?;
        Ok(ToolOutput::Revert(RevertResult {
            reverted: seq,
            path: path::display(&rel).into_owned(),
            sha256: written(&done, &rel),
            trash_id: done.trashed.first().map(|(_, id)| id.clone()),
            audit_seq: done.audit_seqs.last().copied(),
        }))
    }
}
