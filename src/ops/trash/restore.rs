//! Restoring a trash item into the live tree: choosing where it goes (its original path,
//! another one, or a free `(restored)` name beside a taken one), drafting the steps that put it
//! back, and carrying them out through the journal, so a directory comes back whole or not at
//! all, and the trash row is marked restored in the same transaction.

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::fs::walk::join_rel;
use crate::fs::workdir::{split, WorkDir};
use crate::model::trash::{OnConflict, RestoreResult, TrashItem};
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};
use crate::ops::journal::{already_exists, stale, Author, Draft, NewContent};
use crate::repo::Repo;

use super::remove::draft_remove;

/// Where and how to restore a trash item.
#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreTo<'a> {
    /// Another workspace-relative path; the item's own by default.
    pub to: Option<&'a str>,
    /// What to do when the target is taken.
    pub on_conflict: OnConflict,
    /// The target's sha256, for [`OnConflict::Overwrite`].
    pub expected_sha256: Option<&'a str>,
}

impl Repo {
    /// Restores `item` into the tree of `wd` as `by`, through the journal under operation
    /// `tool`. The item must be readable in `by`'s scope and its target writable.
    pub(crate) fn restore_trash_item(
        &self,
        wd: &WorkDir,
        by: &Author<'_>,
        tool: &str,
        item: &TrashItem,
        how: RestoreTo<'_>,
    ) -> Result<RestoreResult> {
        // Restoring elsewhere is a read of what was deleted: the caller must be able to see it.
        by.scope.check_read(&item.path)?;
        let target = match how.to {
            Some(to) => by.writable(to)?,
            None => {
                by.scope.check_write(&item.path)?;
                item.path.clone()
            }
        };
        let mut drafts = Vec::new();
        let target = free_target(by, wd, tool, &how, item, target, &mut drafts)?;
        draft_restore(item, &target, &mut drafts)?;
        let details = serde_json::json!({"restoredTrashId": item.id});
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
        })
    }
}

/// Where a restore goes when `target` is taken: refused (`fail`), the first free
/// `(restored)` name (`rename`), or over the file there, which goes to the trash, if it is the
/// one `expectedSha256` names (`overwrite`, files only).
fn free_target(
    by: &Author<'_>,
    wd: &WorkDir,
    tool: &str,
    how: &RestoreTo<'_>,
    item: &TrashItem,
    target: Vec<u8>,
    drafts: &mut Vec<Draft>,
) -> Result<Vec<u8>> {
    if wd.stat(&target)?.is_none() {
        return Ok(target);
    }
    match how.on_conflict {
        OnConflict::Fail => Err(already_exists(&target)),
        OnConflict::Rename => {
            let free = free_name(wd, &target)?;
            by.scope.check_write(&free)?;
            Ok(free)
        }
        OnConflict::Overwrite => {
            if item.kind == EntryKind::Dir {
                return Err(Error::invalid_argument(
                    "onConflict overwrite restores files only; restore the directory with rename or to another path",
                ));
            }
            let Some(expected) = how.expected_sha256 else {
                let cur = wd.current(&target)?;
                return Err(stale(&target, cur.map(|c| crate::ops::journal::hex_sha(&c.sha256)), None));
            };
            drafts.push(draft_remove(by, wd, &target, Some(expected), tool)?);
            Ok(target)
        }
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
        let rel = join_rel(target, &e.rel);
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
    Err(already_exists(rel))
}
