//! The `apply_patch` tool: a patch's file operations checked (paths in scope and named once,
//! sizes bounded, `expectedSha256ByPath` honoured), drafted, and handed to the journal as one
//! change, so either every file of the patch changes or none does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::caller::Caller;
use super::mutate::{check_expected, stale, written, ApplyPatch, EDIT_LIMIT};
use super::output::{ApplyPatchResult, PatchOp, PatchedFile};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::fs::lock::Locked;
use crate::fs::workdir::{Current, Kind, WorkDir};
use crate::ops::journal::{already_exists, hex_sha, Done, Draft, NewContent};
use crate::ops::trash::remove::draft_remove;
use crate::patch::{FileOp, Patch};

/// What the patch did to one path: `add`, `delete`, `update` or `move` (with its destination).
struct Outcome {
    path: Vec<u8>,
    op: PatchOp,
    moved_to: Option<Vec<u8>>,
}

/// The files checked against `expectedSha256ByPath`, as they were then (`None`: absent).
type Checked = BTreeMap<Vec<u8>, Option<Current>>;

/// `apply_patch`.
pub(super) fn apply_patch(c: &Caller<'_>, l: &Locked, p: &ApplyPatch) -> Result<ApplyPatchResult> {
    let patch = crate::patch::parse(&p.patch)?;
    let wd = &l.wd;
    check_paths(c, &patch)?;
    let _held = c.repo.hold(2 * update_bytes(wd, &patch)?)?;
    let mut checked = check_expected_map(c, wd, &p.expected_sha256_by_path)?;
    let (mut drafts, mut outcomes) = (Vec::new(), Vec::new());
    for op in &patch.ops {
        draft_op(c, wd, op, &mut checked, &mut drafts, &mut outcomes)?;
    }
    let done = c.repo.execute(wd, c.author().ctx("apply_patch", json!({})), drafts)?;
    let files = outcomes.into_iter().map(|o| patched(o, &done)).collect();
    Ok(ApplyPatchResult { files, plan: done.plan })
}

/// Every path the patch names is writable, and named once: two operations on one path are
/// ambiguous.
fn check_paths(c: &Caller<'_>, patch: &Patch) -> Result<()> {
    let mut seen = BTreeSet::new();
    for op in &patch.ops {
        let mut names = vec![op.path().to_string()];
        if let FileOp::Update { move_to: Some(to), .. } = op {
            names.push(to.clone());
        }
        for n in names {
            let rel = c.author().writable(&n).map_err(|e| e.context(format!("patch line {}", op.line())))?;
            if !seen.insert(rel) {
                return Err(Error::invalid_argument(format!(
                    "patch line {}: '{n}' appears in more than one operation of the patch; make one operation per file",
                    op.line()
                )));
            }
        }
    }
    Ok(())
}

/// The bytes of the files the patch updates, which are held in memory (old and new): bounded
/// before any is read.
fn update_bytes(wd: &WorkDir, patch: &Patch) -> Result<u64> {
    let mut total = 0u64;
    for op in &patch.ops {
        if let FileOp::Update { path: pth, .. } = op {
            total += wd.stat(&path::normalize_nonempty(pth.as_bytes())?)?.map_or(0, |m| m.size);
        }
    }
    if total > EDIT_LIMIT {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("the files this patch updates hold {total} bytes, over the {EDIT_LIMIT}-byte limit of one patch: split it"),
        ));
    }
    Ok(total)
}

/// Checks `expectedSha256ByPath` (`""`: the file must not exist). The hash checked here is the
/// one the journal checks again right before the rename.
fn check_expected_map(c: &Caller<'_>, wd: &WorkDir, expected: &BTreeMap<String, String>) -> Result<Checked> {
    let mut checked = Checked::new();
    for (pth, want) in expected {
        let rel = path::normalize_nonempty(pth.as_bytes())?;
        c.scope.check_read(&rel)?;
        let cur = wd.current(&rel)?;
        let seen = match (want.as_str(), cur) {
            ("", None) => None,
            ("", Some(cur)) => return Err(stale(&rel, Some(&cur), Some(""))),
            (want, cur) => Some(check_expected(&rel, cur, Some(want))?),
        };
        checked.insert(rel, seen);
    }
    Ok(checked)
}

/// The journal steps of one file operation, and what it will report.
fn draft_op(
    c: &Caller<'_>,
    wd: &WorkDir,
    op: &FileOp,
    checked: &mut Checked,
    drafts: &mut Vec<Draft>,
    outcomes: &mut Vec<Outcome>,
) -> Result<()> {
    match op {
        FileOp::Add { path: pth, contents, line } => {
            let rel = path::normalize_nonempty(pth.as_bytes())?;
            if wd.stat(&rel)?.is_some() {
                return Err(already_exists(&rel).context(format!("patch line {line}: Add File")));
            }
            outcomes.push(Outcome { path: rel.clone(), op: PatchOp::Add, moved_to: None });
            let content = NewContent::Bytes(contents.clone().into_bytes());
            drafts.push(Draft::Write { path: rel, content, mode: 0o644, before: None });
        }
        FileOp::Delete { path: pth, line } => {
            let rel = path::normalize_nonempty(pth.as_bytes())?;
            check_deletable(wd, &rel, pth, *line)?;
            outcomes.push(Outcome { path: rel.clone(), op: PatchOp::Delete, moved_to: None });
            let expected = checked.get(&rel).and_then(|r| r.as_ref()).map(|c| hex_sha(&c.sha256));
            drafts.push(draft_remove(&c.author(), wd, &rel, expected.as_deref(), "apply_patch")?);
        }
        FileOp::Update { path: pth, move_to, chunks, line } => {
            let rel = path::normalize_nonempty(pth.as_bytes())?;
            let (cur, new) = updated(wd, &rel, pth, chunks, *line, checked)?;
            match move_to {
                Some(to) => {
                    let to_rel = path::normalize_nonempty(to.as_bytes())?;
                    if wd.stat(&to_rel)?.is_some() {
                        return Err(already_exists(&to_rel).context(format!("patch line {line}: Move to")));
                    }
                    outcomes.push(Outcome { path: rel.clone(), op: PatchOp::Move, moved_to: Some(to_rel.clone()) });
                    let moved = cur.clone();
                    drafts.push(Draft::Move { from: rel, to: to_rel.clone(), before: Some(cur) });
                    drafts.push(Draft::Write { path: to_rel, content: new, mode: moved.mode, before: Some(moved) });
                }
                None => {
                    outcomes.push(Outcome { path: rel.clone(), op: PatchOp::Update, moved_to: None });
                    drafts.push(Draft::Write { path: rel, content: new, mode: cur.mode, before: Some(cur) });
                }
            }
        }
    }
    Ok(())
}

/// A Delete File must name a regular file that exists.
fn check_deletable(wd: &WorkDir, rel: &[u8], pth: &str, line: usize) -> Result<()> {
    match wd.stat(rel)? {
        Some(m) if m.kind == Kind::File => Ok(()),
        Some(_) => Err(Error::new(
            ErrorKind::IsDirectory,
            format!("patch line {line}: Delete File '{pth}' is not a regular file"),
        )),
        None => {
            Err(Error::not_found(format!("patch line {line}: Delete File '{pth}' does not exist"))
                .with_detail("path", pth))
        }
    }
}

/// An Update File's file as it is now and its new content: the chunks applied to its text
/// (none: the content unchanged, for a pure move). The file must still be the one checked
/// against `expectedSha256ByPath`.
fn updated(
    wd: &WorkDir,
    rel: &[u8],
    pth: &str,
    chunks: &[crate::patch::Chunk],
    line: usize,
    checked: &mut Checked,
) -> Result<(Current, NewContent)> {
    let (cur, bytes) = match wd.read_whole(rel, EDIT_LIMIT) {
        Ok(Some(read)) => read,
        Ok(None) => {
            return Err(Error::not_found(format!(
                "patch line {line}: Update File '{pth}' does not exist: use Add File to create it"
            ))
            .with_detail("path", pth))
        }
        Err(e) => return Err(e.context(format!("patch line {line}"))),
    };
    if let Some(Some(seen)) = checked.remove(rel) {
        if seen.sha256 != cur.sha256 {
            return Err(stale(rel, Some(&cur), Some(&hex_sha(&seen.sha256))));
        }
    }
    let new = if chunks.is_empty() {
        NewContent::Stored { id: cur.content, sha256: cur.sha256 }
    } else {
        NewContent::Bytes(crate::patch::apply_chunks(pth, &bytes, chunks)?)
    };
    Ok((cur, new))
}

/// One file of the result: its path and operation, and its new hash (or, deleted, its trash
/// id).
fn patched(o: Outcome, done: &Done) -> PatchedFile {
    let (sha256, trash_id) = if o.op == PatchOp::Delete {
        (None, done.trashed.iter().find(|(p, _)| *p == o.path).map(|(_, id)| id.clone()))
    } else {
        (written(done, o.moved_to.as_deref().unwrap_or(&o.path)), None)
    };
    PatchedFile {
        path: path::display(&o.path).into_owned(),
        op: o.op,
        sha256,
        trash_id,
        moved_to: o.moved_to.as_deref().map(|to| path::display(to).into_owned()),
    }
}
