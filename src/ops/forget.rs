//! Forgetting snapshots by a workspace's retention policy, and pins: which snapshots go, which
//! stay and by which rules; the rows removed (children re-linked to the nearest kept ancestor)
//! with an audit record each. What only forgotten snapshots held is garbage collection's.

use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::base::id::SnapshotId;
use crate::base::time::{iso_time, now_ns};
use crate::manifest::{self, gc, snapshots, workspaces};
use crate::model::audit::AuditRecord;
use crate::model::retention::{decide, Candidate, RetentionPolicy};
use crate::model::session::{check_workspace_name, Status};
use crate::repo::Repo;

/// A snapshot a policy keeps, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeptSnapshot {
    /// Its id.
    pub id: SnapshotId,
    /// When it was taken (RFC 3339, UTC).
    pub created_at: String,
    /// Why it was taken.
    pub reason: String,
    /// Every rule that keeps it (`latest`, `pinned`, `last 3`, `daily 2026-11-25`...).
    pub kept_by: Vec<String>,
}

/// A snapshot a policy forgets.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgottenSnapshot {
    /// Its id.
    pub id: SnapshotId,
    /// When it was taken (RFC 3339, UTC).
    pub created_at: String,
    /// Why it was taken.
    pub reason: String,
}

/// One workspace's decision.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceForget {
    /// The workspace.
    pub workspace: String,
    /// Its policy (`null`: none, every snapshot kept).
    pub policy: Option<RetentionPolicy>,
    /// Snapshots kept, oldest first.
    pub kept: Vec<KeptSnapshot>,
    /// Snapshots forgotten (or, in a dry run, to be), oldest first.
    pub forgotten: Vec<ForgottenSnapshot>,
}

/// What `forget` decided and did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgetReport {
    /// Nothing was removed.
    pub dry_run: bool,
    /// Each workspace looked at.
    pub workspaces: Vec<WorkspaceForget>,
}

/// An operator's pin, as `pin` and `unpin` answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinResult {
    /// The snapshot.
    pub snapshot: SnapshotId,
    /// Whether it is pinned now.
    pub pinned: bool,
    /// Whether this call changed that.
    pub changed: bool,
}

impl Repo {
    /// Sets workspace `name`'s snapshot retention policy (`None`, or an empty policy: keep
    /// every snapshot); audited.
    pub fn set_snapshot_retention(&self, name: &str, policy: Option<RetentionPolicy>, actor: &str) -> Result<()> {
        check_workspace_name(name)?;
        let policy = policy.filter(|p| !p.is_empty());
        if let Some(p) = &policy {
            let bad = |v: Option<i64>| v.is_some_and(|s| s < 1);
            if bad(p.keep_within_s) || bad(p.keep_session_end_s) {
                return Err(Error::invalid_argument("a retention duration must be at least one second"));
            }
        }
        self.manifest.write(|tx| {
            let ws = workspaces::ensure(tx, name, now_ns())?;
            workspaces::set_snapshot_retention(tx, ws.id, policy.as_ref())?;
            let mut rec = AuditRecord::ok(now_ns(), actor, "snapshot_retention");
            rec.workspace = Some(name.to_string());
            rec.details = serde_json::json!({ "policy": policy });
            manifest::audit::append(tx, &rec)?;
            Ok(())
        })
    }

    /// Applies the retention policy of `workspace` (or of every workspace that has one):
    /// decides, and unless `dry_run`, removes the snapshots no rule keeps.
    pub fn forget(&self, workspace: Option<&str>, dry_run: bool, actor: &str) -> Result<ForgetReport> {
        let conn = self.manifest.conn();
        let all = workspaces::list(conn)?;
        if let Some(w) = workspace {
            if !all.iter().any(|x| x.name == w) {
                return Err(Error::not_found(format!("workspace '{w}' not found: `trove workspace list` names them")));
            }
        }
        let running: std::collections::BTreeSet<String> =
            self.sessions(false)?.into_iter().filter(|s| s.status != Status::Ended).map(|s| s.id.to_string()).collect();
        let mut report = ForgetReport { dry_run, workspaces: Vec::new() };
        let now = now_ns();
        for ws in all.into_iter().filter(|w| workspace.is_none_or(|n| n == w.name)) {
            let Some(policy) = ws.snapshot_retention.clone() else {
                if workspace.is_some() {
                    report.workspaces.push(WorkspaceForget {
                        workspace: ws.name.clone(),
                        policy: None,
                        kept: Vec::new(),
                        forgotten: Vec::new(),
                    });
                }
                continue;
            };
            let snaps = snapshots::list(conn, Some(&ws.name))?;
            let mut candidates = Vec::with_capacity(snaps.len());
            for s in &snaps {
                candidates.push(Candidate {
                    created_ns: s.created_ns,
                    reason: s.reason.clone(),
                    pinned: gc::is_pinned(conn, s.id.as_str())?,
                    active_session: s.session.as_ref().is_some_and(|id| running.contains(&id.to_string())),
                });
            }
            let decision = decide(&policy, &candidates, now);
            let mut w = WorkspaceForget {
                workspace: ws.name.clone(),
                policy: Some(policy),
                kept: Vec::new(),
                forgotten: Vec::new(),
            };
            for (s, kept_by) in snaps.iter().zip(decision) {
                let (id, created_at, reason) = (s.id.clone(), iso_time(s.created_ns), s.reason.clone());
                if kept_by.is_empty() {
                    w.forgotten.push(ForgottenSnapshot { id, created_at, reason });
                } else {
                    w.kept.push(KeptSnapshot { id, created_at, reason, kept_by });
                }
            }
            if !dry_run {
                w.forgotten.retain(|f| !matches!(self.forget_one(&ws.name, &f.id, actor), Ok(false)));
            }
            report.workspaces.push(w);
        }
        Ok(report)
    }

    /// Removes one snapshot in a transaction of its own: its children point at its parent, a
    /// session's final snapshot column no longer names it. False (and nothing removed) if it
    /// was pinned, or is the workspace's newest, meanwhile.
    fn forget_one(&self, workspace: &str, id: &SnapshotId, actor: &str) -> Result<bool> {
        self.manifest.write(|tx| {
            if gc::is_pinned(tx, id.as_str())? {
                return Ok(false);
            }
            if snapshots::latest(tx, Some(workspace))?.is_some_and(|l| l.id == *id) {
                return Ok(false);
            }
            let parent: Option<String> = tx
                .query_row("SELECT parent FROM snapshots WHERE id = ?1", [id.as_str()], |r| r.get(0))
                .map_err(|e| Error::db("forgetting a snapshot", e))?;
            let step = |sql: &str, p: &[&dyn rusqlite::ToSql]| {
                tx.execute(sql, p).map(|_| ()).map_err(|e| Error::db("forgetting a snapshot", e))
            };
            step("UPDATE snapshots SET parent = ?1 WHERE parent = ?2", &[&parent, &id.as_str()])?;
            step("UPDATE sessions SET final_snapshot = NULL WHERE final_snapshot = ?1", &[&id.as_str()])?;
            step("DELETE FROM search_snapshots WHERE snapshot = ?1", &[&id.as_str()])?;
            step("DELETE FROM snapshots WHERE id = ?1", &[&id.as_str()])?;
            let mut rec = AuditRecord::ok(now_ns(), actor, "forget");
            rec.workspace = Some(workspace.to_string());
            rec.details = serde_json::json!({ "snapshot": id });
            manifest::audit::append(tx, &rec)?;
            Ok(true)
        })
    }

    /// Pins (or with `pin` false, unpins) a snapshot: no retention policy forgets a pinned one.
    pub fn pin(&self, reference: &str, workspace: Option<&str>, pin: bool, actor: &str) -> Result<PinResult> {
        let snap = self.resolve_snapshot(reference, workspace)?;
        let changed = self.manifest.write(|tx| {
            let changed =
                if pin { gc::pin(tx, snap.id.as_str(), now_ns(), actor)? } else { gc::unpin(tx, snap.id.as_str())? };
            if changed {
                let mut rec = AuditRecord::ok(now_ns(), actor, if pin { "pin" } else { "unpin" });
                rec.workspace = Some(snap.workspace.clone());
                rec.details = serde_json::json!({ "snapshot": snap.id });
                manifest::audit::append(tx, &rec)?;
            }
            Ok(changed)
        })?;
        Ok(PinResult { snapshot: snap.id, pinned: pin, changed })
    }
}
