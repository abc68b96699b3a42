//! Reverting one audited file change (`trove revert SEQ`): the change the record describes is
//! undone through the stale-file protocol, so a file changed since is refused, and the revert
//! is itself a journaled, audited change.

use serde::Serialize;
use serde_json::{json, Value};

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::fs::workdir::{Kind, WorkDir};
use crate::model::audit::AuditRecord;
use crate::model::session::Session;
use crate::ops::journal::{already_exists, stale, Author, Draft, NewContent};
use crate::ops::trash::remove::{check_expected, draft_remove};
use crate::ops::trash::restore::RestoreTo;
use crate::repo::Repo;

/// The change a revert undid.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevertResult {
    /// The audit record whose change was undone.
    pub reverted: i64,
    /// The path it changed.
    pub path: String,
    /// The file's sha256 now, if it exists.
    pub sha256: Option<String>,
    /// The trash item that keeps what the revert removed, if it removed something.
    pub trash_id: Option<TrashId>,
    /// The trash item the revert brought back, when it undid a deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_trash_id: Option<TrashId>,
    /// The audit record of the revert.
    pub audit_seq: Option<i64>,
}

impl Repo {
    /// Undoes the change audit record `seq` made, through the stale-file protocol: refused
    /// (`stale_file`) if the file changed since. The revert is itself a mutation, audited.
    pub fn revert(&self, seq: i64, actor: &str) -> Result<RevertResult> {
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
        // A change that reached the tree is no refusal: its own record comes with its recovery.
        if let Some(e) = result.as_ref().err().filter(|e| !e.made_the_change()) {
            let p = rec.path.as_deref().map(path::display);
            self.audit_refusal(&s.workspace, Some(&s.id), actor, "revert", p.as_deref(), e)?;
        }
        result
    }

    fn revert_record(
        &self,
        s: &Session,
        rec: &AuditRecord,
        change: &str,
        seq: i64,
        actor: &str,
    ) -> Result<RevertResult> {
        let l = self.lock_writable(s)?;
        let scope = s.scope()?;
        let by = Author { workspace: &s.workspace, session: Some(&s.id), actor, scope: &scope };
        let rel =
            rec.path.clone().ok_or_else(|| Error::invalid_argument(format!("audit record {seq} names no path")))?;
        let after = rec.after_sha256.map(hex::encode);
        let drafts = match change {
            "write" => undo_write(&l.wd, rec, &rel, after.as_deref(), seq)?,
            "create" | "mkdir" | "symlink" => vec![draft_remove(&by, &l.wd, &rel, after.as_deref(), "revert")?],
            "move" => undo_move(&l.wd, rec, &rel, after.as_deref(), seq)?,
            "delete" => {
                let named = rec.details.get("trashId").and_then(Value::as_str);
                let trash_id = named.map(TrashId::parse).transpose()?.ok_or_else(|| {
                    Error::corrupt(format!("audit record {seq} deleted a file but names no trash id to restore"))
                })?;
                let item = self.trash_item(&trash_id)?;
                let details = json!({"reverts": seq});
                let r = self.restore_trash_item(&l.wd, &by, "revert", &item, RestoreTo::default(), details)?;
                return Ok(RevertResult {
                    reverted: seq,
                    path: r.path,
                    sha256: r.sha256,
                    trash_id: None,
                    restored_trash_id: Some(r.trash_id),
                    audit_seq: r.audit_seq,
                });
            }
            other => {
                return Err(Error::invalid_argument(format!("audit record {seq}: a '{other}' cannot be reverted")))
            }
        };
        let done = self.execute(&l.wd, by.ctx("revert", json!({"reverts": seq})), drafts)?;
        Ok(RevertResult {
            reverted: seq,
            path: path::display(&rel).into_owned(),
            sha256: done.written.iter().rev().find(|(p, _)| *p == rel).map(|(_, s)| s.clone()),
            trash_id: done.trashed.first().map(|(_, id)| id.clone()),
            restored_trash_id: None,
            audit_seq: done.audit_seqs.last().copied(),
        })
    }
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

/// A version brought back over a file (see [`Repo::restore_version`]).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionRestored {
    /// The path.
    pub path: String,
    /// The file's sha256 now: the version's.
    pub sha256: Option<String>,
    /// The trash item keeping the file the version replaced, if there was one.
    pub trash_id: Option<TrashId>,
    /// The audit record of the restore's last step.
    pub audit_seq: Option<i64>,
}

impl Repo {
    /// Puts stored content `content` (sha256 `sha256`, mode `mode` unless a file is there) back
    /// at `rel` of session `s`'s tree, as `actor`: an earlier version of the file, chosen from
    /// its history. The file there now must be the one `expected` names (the stale-file
    /// protocol: refused with `stale_file`, nothing changed, if it is not), and goes to the
    /// trash; with nothing there, `expected` must be absent. Journaled and audited as
    /// `restore_version`; a refusal is audited too.
    pub fn restore_version(
        &self,
        s: &Session,
        rel: &[u8],
        content: (crate::object::ObjectId, crate::object::Sha256, u32),
        expected: Option<&str>,
        actor: &str,
    ) -> Result<VersionRestored> {
        let result = self.restore_version_in(s, rel, content, expected, actor);
        if let Some(e) = result.as_ref().err().filter(|e| !e.made_the_change()) {
            self.audit_refusal(&s.workspace, Some(&s.id), actor, "restore_version", Some(&path::display(rel)), e)?;
        }
        result
    }

    fn restore_version_in(
        &self,
        s: &Session,
        rel: &[u8],
        (id, sha256, mode): (crate::object::ObjectId, crate::object::Sha256, u32),
        expected: Option<&str>,
        actor: &str,
    ) -> Result<VersionRestored> {
        let l = self.lock_writable(s)?;
        let scope = s.scope()?;
        let by = Author { workspace: &s.workspace, session: Some(&s.id), actor, scope: &scope };
        let rel = &by.writable_bytes(rel)?[..];
        let mut drafts = Vec::new();
        let mode = match l.wd.current(rel)? {
            Some(cur) => {
                let mode = cur.mode;
                check_expected(rel, Some(cur), expected)?;
                drafts.push(draft_remove(&by, &l.wd, rel, expected, "restore_version")?);
                mode
            }
            None if expected.is_some() => return Err(stale(rel, None, expected)),
            None => mode,
        };
        let content = NewContent::Stored { id, sha256 };
        drafts.push(Draft::Write { path: rel.to_vec(), content, mode, before: None });
        let done = self.execute(&l.wd, by.ctx("restore_version", json!({"content": id.to_hex()})), drafts)?;
        Ok(VersionRestored {
            path: path::display(rel).into_owned(),
            sha256: done.written.iter().rev().find(|(p, _)| p == rel).map(|(_, s)| s.clone()),
            trash_id: done.trashed.first().map(|(_, id)| id.clone()),
            audit_seq: done.audit_seqs.last().copied(),
        })
    }
}
