//! The tools that change files: each checks the stale-file protocol against the file as it is
//! now, drafts its steps, and hands them to the journal (`ops/journal/`), which checks again
//! immediately before each rename. Deleting and restoring are drafted by `ops/trash/`, as for
//! an operator.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use super::caller::Caller;
use super::edit::{self, Edit};
use super::output::{DeleteResult, EditResult, MoveResult, WriteResult};
use crate::base::budget::Permit;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::fs::lock::Locked;
use crate::fs::workdir::{Current, Kind, WorkDir};
use crate::model::trash::RestoreResult;
use crate::ops::journal::{already_exists, hex_sha, stale as journal_stale, Done, Draft, NewContent};
use crate::ops::trash::remove::draft_remove;
use crate::ops::trash::restore::RestoreTo;

pub use crate::model::trash::OnConflict;
pub(super) use crate::ops::trash::remove::check_expected;

/// `create_file`: makes a file that must not exist yet.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The exact path bytes in standard base64, for a name that is not UTF-8 (as answers'
    /// `pathBase64` give it); given, it is the file and `path` is only shown.
    #[serde(default)]
    pub path_base64: Option<String>,
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
    /// The exact path bytes in standard base64, for a name that is not UTF-8 (as answers'
    /// `pathBase64` give it); given, it is the file and `path` is only shown.
    #[serde(default)]
    pub path_base64: Option<String>,
    /// The new content.
    pub content: String,
    /// `utf-8` (default) or `base64`: how `content` is written.
    pub encoding: Option<String>,
    /// The sha256 the file has now, as last read (the stale-file protocol); `""` means it must not exist.
    pub expected_sha256: Option<String>,
    /// Write over whatever the file holds now, without a sha256: the sandbox file API's writes,
    /// which its seed allows (the pre-image is still kept and audited). Never set by a tool call.
    #[serde(skip)]
    #[schemars(skip)]
    pub blind: bool,
}

/// `edit_file`: exact-string replacements in a text file, all or none.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The exact path bytes in standard base64, for a name that is not UTF-8 (as answers'
    /// `pathBase64` give it); given, it is the file and `path` is only shown.
    #[serde(default)]
    pub path_base64: Option<String>,
    /// The sha256 the file has now, as last read (the stale-file protocol); `""` means it must not exist.
    pub expected_sha256: Option<String>,
    /// The replacements, applied in order (at least one).
    #[serde(deserialize_with = "some_edits")]
    #[schemars(length(min = 1))]
    pub edits: Vec<Edit>,
    /// Edit whatever the file holds now, without a sha256 (as `WriteFile::blind`).
    #[serde(skip)]
    #[schemars(skip)]
    pub blind: bool,
}

/// `delete_file`: moves a file, or a directory with everything in it, into the trash.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The exact path bytes in standard base64, for a name that is not UTF-8 (as answers'
    /// `pathBase64` give it); given, it is the file and `path` is only shown.
    #[serde(default)]
    pub path_base64: Option<String>,
    /// A file's sha256 as last read; leave it out for a directory.
    pub expected_sha256: Option<String>,
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
    journal_stale(rel, cur.map(|c| hex_sha(&c.sha256)), expected)
}

/// The sha256 `done` left at `rel`, if it wrote there.
pub(super) fn written(done: &Done, rel: &[u8]) -> Option<String> {
    done.written.iter().rev().find(|(p, _)| p == rel).map(|(_, s)| s.clone())
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

/// The file at `rel` whole, for an edit, if it still has `expected`; with the share of the
/// memory budget its bytes take.
fn read_to_edit(
    c: &Caller<'_>,
    wd: &WorkDir,
    rel: &[u8],
    expected: Option<&str>,
) -> Result<(Current, Vec<u8>, Permit)> {
    let size = wd.stat(rel)?.map_or(0, |m| m.size);
    let held = c.repo.hold(2 * size.min(EDIT_LIMIT))?;
    let read = wd.read_whole(rel, EDIT_LIMIT)?;
    let (cur, bytes) = match read {
        Some((cur, bytes)) => (Some(cur), bytes),
        None => (None, Vec::new()),
    };
    Ok((check_expected(rel, cur, expected)?, bytes, held))
}

/// Carries out `drafts` for tool `tool` on the caller's locked tree.
fn execute(c: &Caller<'_>, l: &Locked, tool: &str, drafts: Vec<Draft>) -> Result<Done> {
    c.repo.execute(&l.wd, c.author().ctx(tool, json!({})), drafts)
}

/// `create_file`.
pub(super) fn create_file(c: &Caller<'_>, l: &Locked, p: &CreateFile) -> Result<WriteResult> {
    let rel = c.author().writable_bytes(&path::exact_or_text(&p.path, p.path_base64.as_deref())?)?;
    let content = decode(&p.content, p.encoding.as_deref())?;
    if l.wd.stat(&rel)?.is_some() {
        return Err(already_exists(&rel));
    }
    let size = content.len();
    let draft = Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None };
    let done = execute(c, l, "create_file", vec![draft])?;
    Ok(write_result(&done, &rel, size))
}

/// `write_file`.
pub(super) fn write_file(c: &Caller<'_>, l: &Locked, p: &WriteFile) -> Result<WriteResult> {
    let rel = c.author().writable_bytes(&path::exact_or_text(&p.path, p.path_base64.as_deref())?)?;
    let content = decode(&p.content, p.encoding.as_deref())?;
    let size = content.len();
    let cur = l.wd.current(&rel)?;
    // A blind write takes what is there now, under the lock, as what it replaces.
    let now = cur.as_ref().map(|c| hex_sha(&c.sha256));
    let expected = match (p.blind, p.expected_sha256.as_deref()) {
        (true, None) => now.as_deref(),
        (_, e) => e,
    };
    let draft = match (cur, expected) {
        // "" asserts there is nothing yet, as in apply_patch.
        (None, Some("")) => {
            Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None }
        }
        (Some(c), Some("")) => return Err(stale(&rel, Some(&c), Some(""))),
        (cur, expected) => {
            let cur = check_expected(&rel, cur, expected)?;
            Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: cur.mode, before: Some(cur) }
        }
    };
    let done = execute(c, l, "write_file", vec![draft])?;
    Ok(write_result(&done, &rel, size))
}

/// Writes an upload's content (in the store, or streamed to a temporary in the tree) at
/// `rel`: over whatever is there when `blind`, else only over `expected` (`""`: nothing may be
/// there).
pub(crate) fn write_stored(
    c: &Caller<'_>,
    l: &Locked,
    rel: &[u8],
    (content, size): (NewContent, u64),
    expected: Option<&str>,
    blind: bool,
) -> Result<WriteResult> {
    let cur = l.wd.current(rel)?;
    let now = cur.as_ref().map(|c| hex_sha(&c.sha256));
    let expected = if blind && expected.is_none() { now.as_deref() } else { expected };
    let draft = match (cur, expected) {
        (None, None | Some("")) => Draft::Write { path: rel.to_vec(), content, mode: 0o644, before: None },
        (Some(c), Some("")) => return Err(stale(rel, Some(&c), Some(""))),
        (cur, expected) => {
            let cur = check_expected(rel, cur, expected)?;
            Draft::Write { path: rel.to_vec(), content, mode: cur.mode, before: Some(cur) }
        }
    };
    let done = execute(c, l, "upload", vec![draft])?;
    Ok(write_result(&done, rel, size as usize))
}

/// `edit_file`.
pub(super) fn edit_file(c: &Caller<'_>, l: &Locked, p: &EditFile) -> Result<EditResult> {
    let rel = c.author().writable_bytes(&path::exact_or_text(&p.path, p.path_base64.as_deref())?)?;
    let now = match (p.blind, &p.expected_sha256) {
        (true, None) => match l.wd.current(&rel)? {
            Some(c) => Some(hex_sha(&c.sha256)),
            None => {
                let shown = path::display(&rel);
                return Err(Error::not_found(format!("file '{shown}' not found: nothing to edit"))
                    .with_detail("path", shown.as_ref()));
            }
        },
        _ => None,
    };
    let expected = p.expected_sha256.as_deref().or(now.as_deref());
    let (cur, bytes, _held) = read_to_edit(c, &l.wd, &rel, expected)?;
    let shown = path::display(&rel).into_owned();
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        Error::new(ErrorKind::NotText, format!("'{shown}' is not UTF-8 text: replace it with write_file"))
    })?;
    let (new, replacements) = edit::apply(&shown, text, &p.edits)?;
    drop(bytes);
    let content = NewContent::Bytes(new.into_bytes());
    let draft = Draft::Write { path: rel.clone(), content, mode: cur.mode, before: Some(cur) };
    let done = execute(c, l, "edit_file", vec![draft])?;
    Ok(EditResult {
        path: shown,
        sha256: written(&done, &rel),
        replacements,
        audit_seq: done.audit_seqs.first().copied(),
    })
}

/// `delete_file`.
pub(super) fn delete_file(c: &Caller<'_>, l: &Locked, p: &DeleteFile) -> Result<DeleteResult> {
    let rel = c.author().writable_bytes(&path::exact_or_text(&p.path, p.path_base64.as_deref())?)?;
    let draft = draft_remove(&c.author(), &l.wd, &rel, p.expected_sha256.as_deref(), "delete_file")?;
    let (kind, size) = match &draft {
        Draft::Remove { trash, .. } => (Some(trash.kind), trash.size),
        _ => (None, 0),
    };
    let done = execute(c, l, "delete_file", vec![draft])?;
    let trash_id = done.trashed.first().map(|(_, id)| id.clone());
    Ok(DeleteResult {
        path: path::display(&rel).into_owned(),
        trash_id,
        kind,
        size,
        audit_seq: done.audit_seqs.first().copied(),
    })
}

/// `move_file`.
pub(super) fn move_file(c: &Caller<'_>, l: &Locked, p: &MoveFile) -> Result<MoveResult> {
    let from = c.author().writable(&p.from)?;
    let to = c.author().writable(&p.to)?;
    if to.starts_with(&from) && (to.len() == from.len() || to[from.len()] == b'/') {
        return Err(Error::invalid_argument(format!(
            "cannot move '{}' into itself ('{}')",
            path::display(&from),
            path::display(&to)
        )));
    }
    let not_found = || Error::not_found(format!("'{}' not found", path::display(&from)));
    let meta = l.wd.stat(&from)?.ok_or_else(|| not_found().with_detail("path", path::display(&from).as_ref()))?;
    if l.wd.stat(&to)?.is_some() {
        return Err(already_exists(&to));
    }
    let before = match meta.kind {
        Kind::File => {
            let cur = l.wd.current(&from)?;
            Some(match p.expected_sha256.as_deref() {
                Some(e) => check_expected(&from, cur, Some(e))?,
                None => cur.ok_or_else(not_found)?,
            })
        }
        Kind::Dir if p.expected_sha256.is_some() => {
            return Err(Error::invalid_argument("expectedSha256 applies to files only; leave it out for a directory"))
        }
        _ => None,
    };
    let sha = before.as_ref().map(|b| hex_sha(&b.sha256));
    let draft = Draft::Move { from: from.clone(), to: to.clone(), before };
    let done = execute(c, l, "move_file", vec![draft])?;
    Ok(MoveResult {
        from: path::display(&from).into_owned(),
        to: path::display(&to).into_owned(),
        sha256: sha,
        audit_seq: done.audit_seqs.first().copied(),
    })
}

/// `restore_file`: the item by id (in the session's workspace) or the newest deletion at a
/// path, restored as an operator's restore would be, within the session's scope.
pub(super) fn restore_file(c: &Caller<'_>, l: &Locked, p: &RestoreFile) -> Result<RestoreResult> {
    let by = c.author();
    let item = c.repo.trash_item_to_restore(by.workspace, by.scope, p.trash_id.as_ref(), p.path.as_deref())?;
    let how = RestoreTo {
        to: p.to.as_deref().map(str::as_bytes),
        on_conflict: p.on_conflict,
        expected_sha256: p.expected_sha256.as_deref(),
    };
    c.repo.restore_trash_item(&l.wd, &by, "restore_file", &item, how, json!({}))
}

/// `edits`, refused when empty as its schema says (`minItems` 1), when the parameters are read.
fn some_edits<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<Edit>, D::Error> {
    let edits = <Vec<Edit> as serde::Deserialize>::deserialize(d)?;
    if edits.is_empty() {
        return Err(serde::de::Error::custom("edits is empty: give at least one {oldText, newText}"));
    }
    Ok(edits)
}
