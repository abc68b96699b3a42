//! What a session changed: the diff of its start against its end (or its live tree), each
//! changed path with the session's audit records that touched it and, for deletions, the
//! trash items to restore it from.

use crate::base::error::Result;
use crate::base::path::covers;
use crate::manifest::{audit, trash};
use crate::model::audit::{AuditQuery, Order};
use crate::model::diff::{ChangedPath, SessionChanges};
use crate::model::session::{Session, Status};
use crate::model::trash::{RestoredFilter, TrashFilter};
use crate::object::RandomKeyMap;
use crate::repo::Repo;

use super::DiffOptions;

/// At most this many of a session's audit records are attached to its changes.
pub const MAX_SESSION_RECORDS: usize = 100_000;

/// The ancestors of `path` and `path` itself, shortest first.
fn self_and_ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter().enumerate().filter(|(_, &b)| b == b'/').map(|(i, _)| &path[..i]).chain(std::iter::once(path))
}

impl Repo {
    /// What session `s` changed, as `opts` selects it.
    pub fn session_changes(&self, s: &Session, opts: &DiffOptions) -> Result<SessionChanges> {
        let from = self.session_start(s)?;
        let to = self.session_now(s)?;
        let report = self.diff(&from, &to, opts)?;
        let conn = self.manifest.conn();
        let q = AuditQuery {
            session: Some(s.id.clone()),
            order: Order::After(0),
            limit: MAX_SESSION_RECORDS,
            ..AuditQuery::default()
        };
        let records: Vec<_> = audit::query(conn, &q)?
            .into_iter()
            .filter(|r| r.record.path.as_deref().is_some_and(|p| opts.scope.can_read(p)))
            .collect();
        // Each record under the paths it names (its path and a move's destination). A change
        // of a directory (a delete, a move) touched everything below it; a refusal changed
        // nothing, so it belongs to the path it named only, never to the files below it.
        let mut by_path: RandomKeyMap<&[u8], Vec<usize>> = RandomKeyMap::default();
        let mut refused_at: RandomKeyMap<&[u8], Vec<usize>> = RandomKeyMap::default();
        for (i, r) in records.iter().enumerate() {
            let index = if r.record.outcome == "ok" { &mut by_path } else { &mut refused_at };
            for p in [&r.record.path, &r.record.dest_path].into_iter().flatten() {
                index.entry(p.as_slice()).or_default().push(i);
            }
        }
        let filter =
            TrashFilter { session: Some(s.id.clone()), restored: RestoredFilter::All, ..TrashFilter::default() };
        let items: Vec<_> =
            trash::page(conn, &filter)?.into_iter().map(|(t, _)| t).filter(|t| opts.scope.can_read(&t.path)).collect();

        let mut entries = Vec::with_capacity(report.entries.len());
        for change in report.entries {
            let mut touched: Vec<usize> = Vec::new();
            for p in std::iter::once(change.raw_path.as_slice()).chain(change.raw_old_path.as_deref()) {
                for a in self_and_ancestors(p) {
                    touched.extend(by_path.get(a).into_iter().flatten());
                }
                touched.extend(refused_at.get(p).into_iter().flatten());
            }
            touched.sort_unstable();
            touched.dedup();
            let gone = change.new.is_none() || change.raw_old_path.is_some();
            let old_path = change.raw_old_path.as_deref().unwrap_or(&change.raw_path);
            let trash = match gone {
                true => items.iter().filter(|t| covers(&t.path, old_path)).map(|t| t.record()).collect(),
                false => Vec::new(),
            };
            entries.push(ChangedPath { records: touched.iter().map(|&i| records[i].entry()).collect(), trash, change });
        }
        Ok(SessionChanges {
            session: s.id.clone(),
            workspace: s.workspace.clone(),
            active: s.status != Status::Ended,
            from: report.from,
            to: report.to,
            entries,
            stats: report.stats,
            truncated: report.truncated,
            renames_skipped: report.renames_skipped,
            trash: items.iter().map(|t| t.record()).collect(),
            records: records.len() as u64,
            warnings: report.warnings,
        })
    }
}
