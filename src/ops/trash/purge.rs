//! Purging trash items for good, and expiring them by each workspace's retention (an age and a
//! byte quota). A purge deletes the items' rows, each with an audit record; their objects stay
//! where they are, since a snapshot, a pre-image or another item may share them: garbage
//! collection reclaims what nothing references any more. A purge takes exactly the items it
//! listed when it started, so an item deleted while it runs is never taken.

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::base::time::{iso_time, now_ns};
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::model::session::check_workspace_name;
use crate::model::trash::{PurgeReport, PurgedItem, RestoredFilter, Retention, TrashFilter, TrashItem};
use crate::repo::Repo;

/// Items purged in one transaction: their rows and audit records commit together.
pub(super) const BATCH: usize = 500;

/// A set of trash items, for a purge or an export.
#[derive(Debug, Clone)]
pub enum TrashSet {
    /// These items, by id.
    Ids(Vec<TrashId>),
    /// Every item the filter selects (its limit and cursor aside).
    Filter(TrashFilter),
}

/// Why an item is purged: what its audit record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeReason {
    /// An operator asked (`trove trash purge`).
    Operator,
    /// Older than its workspace's retention age.
    Age,
    /// Beyond its workspace's byte quota (the oldest go first).
    Quota,
}

impl PurgeReason {
    /// The name records and reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            PurgeReason::Operator => "operator",
            PurgeReason::Age => "age",
            PurgeReason::Quota => "quota",
        }
    }
}

impl Repo {
    /// The items of `set`, as they are now: what a purge of it takes (and nothing deleted
    /// later). An id not in the trash is `not_found`.
    pub fn trash_set(&self, set: &TrashSet) -> Result<Vec<TrashItem>> {
        match set {
            TrashSet::Ids(ids) => ids.iter().map(|id| self.trash_item(id)).collect(),
            TrashSet::Filter(f) => {
                let all = TrashFilter { limit: 0, after: None, ..f.clone() };
                Ok(manifest::trash::page(self.manifest.conn(), &all)?.into_iter().map(|(t, _)| t).collect())
            }
        }
    }

    /// Purges `items` (as [`Repo::trash_set`] or [`Repo::expired_trash`] listed them) for
    /// `reason`, as `actor`, each with an audit record; with `dry_run` only reports them. An
    /// item purged meanwhile by someone else is left out of the report.
    pub fn purge_trash(&self, items: &[(TrashItem, PurgeReason)], dry_run: bool, actor: &str) -> Result<PurgeReport> {
        // Another node's items: recorded in this node's log, deleted in theirs.
        if self.is_other_node() && !dry_run {
            return self.purge_elsewhere(items, actor);
        }
        let mut report = PurgeReport { dry_run, purged: 0, bytes: 0, items: Vec::new() };
        for batch in items.chunks(BATCH) {
            let done = if dry_run {
                batch.iter().map(|(t, why)| purged(t, *why)).collect()
            } else {
                self.manifest.write(|tx| {
                    let mut done = Vec::with_capacity(batch.len());
                    for (t, why) in batch {
                        if manifest::trash::delete(tx, &t.id)? {
                            manifest::audit::append(tx, &purge_record(t, *why, actor))?;
                            done.push(purged(t, *why));
                        }
                    }
                    Ok(done)
                })?
            };
            for p in done {
                report.purged += 1;
                report.bytes = report.bytes.saturating_add(p.size);
                report.items.push(p);
            }
        }
        if !dry_run && report.purged > 0 {
            self.checkpoint_if_due();
        }
        Ok(report)
    }

    /// The items retention expires now, of every workspace or of `workspace`: those older than
    /// the workspace's trash age, then, oldest first, those beyond its byte quota.
    pub fn expired_trash(&self, workspace: Option<&str>) -> Result<Vec<(TrashItem, PurgeReason)>> {
        let now = now_ns();
        let mut out = Vec::new();
        for ws in self.workspaces()? {
            if workspace.is_some_and(|w| w != ws.name) {
                continue;
            }
            let (age_s, quota) = ws.retention();
            let cutoff = now.saturating_sub(age_s.saturating_mul(1_000_000_000));
            let all =
                TrashFilter { workspace: Some(ws.name.clone()), restored: RestoredFilter::All, ..Default::default() };
            let Some(quota) = quota else {
                // No quota: only the items past the age, found through the time index.
                let old = TrashFilter { until_ns: Some(cutoff), ..all };
                out.extend(
                    manifest::trash::page(self.manifest.conn(), &old)?.into_iter().map(|(t, _)| (t, PurgeReason::Age)),
                );
                continue;
            };
            // Newest first: an item expires by age, or, still in the trash, when the newer ones
            // fill the quota (a restored item's content is live again: it counts by age only).
            let mut kept = 0u64;
            for (item, _) in manifest::trash::page(self.manifest.conn(), &all)? {
                if item.deleted_ns < cutoff {
                    out.push((item, PurgeReason::Age));
                } else if item.restored_ns.is_some() {
                } else if kept.saturating_add(item.size) > quota {
                    out.push((item, PurgeReason::Quota));
                } else {
                    kept = kept.saturating_add(item.size);
                }
            }
        }
        Ok(out)
    }

    /// The trash retention of workspace `name`, changed where `age_s` or `quota` is given
    /// (`Some(None)`: back to the default age, or no quota), and audited when changed.
    pub fn trash_retention(
        &self,
        name: &str,
        age_s: Option<Option<i64>>,
        quota: Option<Option<u64>>,
        actor: &str,
    ) -> Result<Retention> {
        check_workspace_name(name)?;
        if let Some(Some(a)) = age_s {
            if a < 1 {
                return Err(Error::invalid_argument(format!(
                    "a trash age of {a} s would expire everything at once: give at least one second"
                )));
            }
        }
        if let Some(Some(0)) = quota {
            return Err(Error::invalid_argument(
                "a trash quota of 0 bytes would expire everything: purge with `trove trash purge --all` instead",
            ));
        }
        let ws = self.manifest.write(|tx| {
            let ws = manifest::workspaces::ensure(tx, name, now_ns())?;
            if age_s.is_none() && quota.is_none() {
                return Ok(ws);
            }
            let (age, quota) = (age_s.unwrap_or(ws.trash_age_s), quota.unwrap_or(ws.trash_quota));
            manifest::workspaces::set_retention(tx, ws.id, age, quota)?;
            let mut rec = AuditRecord::ok(now_ns(), actor, "workspace_retention");
            rec.workspace = Some(name.to_string());
            rec.details = serde_json::json!({"trashAgeSeconds": age, "trashQuota": quota});
            manifest::audit::append(tx, &rec)?;
            manifest::workspaces::get(tx, name)?.ok_or_else(|| Error::internal("a workspace vanished"))
        })?;
        let (age, quota) = ws.retention();
        Ok(Retention {
            workspace: ws.name,
            trash_age: humantime::format_duration(std::time::Duration::from_secs(age.max(0) as u64)).to_string(),
            trash_age_seconds: age,
            default_age: ws.trash_age_s.is_none(),
            trash_quota: quota,
        })
    }
}

pub(super) fn purged(t: &TrashItem, why: PurgeReason) -> PurgedItem {
    let (path, path_base64) = path::for_json(&t.path);
    PurgedItem {
        id: t.id.clone(),
        workspace: t.workspace.clone(),
        path,
        path_base64,
        kind: t.kind,
        size: t.size,
        deleted_at: iso_time(t.deleted_ns),
        reason: why.as_str().to_string(),
    }
}

/// The audit record of purging `t`: what it was (its path, sha256 and content) and why it went.
pub(super) fn purge_record(t: &TrashItem, why: PurgeReason, actor: &str) -> AuditRecord {
    let operation = if why == PurgeReason::Operator { "trash_purge" } else { "trash_expire" };
    let mut rec = AuditRecord::ok(now_ns(), actor, operation);
    rec.workspace = Some(t.workspace.clone());
    rec.path = Some(t.path.clone());
    rec.before_sha256 = t.sha256;
    rec.before_object = t.object;
    rec.details = serde_json::json!({
        "trashId": t.id, "kind": t.kind, "size": t.size, "reason": why.as_str(), "deletedAt": iso_time(t.deleted_ns),
    });
    rec
}
