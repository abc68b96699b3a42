//! History across snapshots from the path index: `trove log` (the versions of one path, with
//! the change that produced each and, on request, across renames) and `trove find` (which
//! snapshots hold a path matching a name or glob). The index is brought up to date first, from
//! the tree diffs of the snapshots taken since it was last (see `manifest::paths`).

use crate::base::error::{Error, Result};
use crate::base::path;
use crate::base::pattern;
use crate::base::time::iso_time;
use crate::manifest::paths::{self, VersionRow};
use crate::manifest::{audit, snapshots, workspaces};
use crate::model::diff::ChangeStatus;
use crate::model::history::{FindResult, LogEntry, PathLog, PathVersion, VersionOrigin};
use crate::model::scope::Scope;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::EntryKind;
use crate::model::workspace::Workspace;
use crate::ops::diff::tree::{diff_trees, PathSelect, Trees};
use crate::ops::diff::{DiffOptions, DiffTarget};
use crate::ops::scan::Built;
use crate::repo::Repo;

/// At most this many audit records of one path are looked at to explain its versions.
const MAX_PATH_RECORDS: usize = 10_000;

/// Whether `p` has glob syntax (else it is a name or path to match exactly).
fn is_glob(p: &str) -> bool {
    p.contains(['*', '?', '[', '{'])
}

impl Repo {
    /// Brings the path index of workspace `ws` up to date; returns its snapshots in index order.
    fn index_workspace(&self, ws: &Workspace) -> Result<Vec<SnapshotInfo>> {
        let conn = self.manifest.conn();
        let snaps = snapshots::list(conn, Some(&ws.name))?;
        let up_to_date = |done: &[crate::base::id::SnapshotId]| {
            done.len() == snaps.len() && done.iter().zip(&snaps).all(|(d, s)| *d == s.id)
        };
        if up_to_date(&paths::indexed(conn, ws.id)?) {
            return Ok(snaps);
        }
        let whole = Scope::whole();
        let select = PathSelect { paths: &[], scope: &whole };
        let built = Built::default();
        self.manifest.write_relaxed(|tx| {
            // Again under the write lock: another process may have done it meanwhile.
            let mut done = paths::indexed(tx, ws.id)?;
            if up_to_date(&done) {
                return Ok(());
            }
            let prefix_holds = done.len() <= snaps.len() && done.iter().zip(&snaps).all(|(d, s)| *d == s.id);
            if !prefix_holds {
                // A snapshot was forgotten or one sorts before the last indexed: start over.
                tracing::info!(workspace = %ws.name, "rebuilding the path index: its snapshots changed");
                paths::clear(tx, ws.id)?;
                done.clear();
            }
            for k in done.len()..snaps.len() {
                let ord = k as i64;
                let prev = k.checked_sub(1).map(|p| snaps[p].root);
                diff_trees(&Trees { conn: tx, built: &built }, prev, Some(snaps[k].root), &select, |p, old, new| {
                    if old.is_some() {
                        paths::close(tx, ws.id, &p, ord - 1)?;
                    }
                    if let Some(n) = new {
                        paths::open(tx, ws.id, &p, &n, ord)?;
                    }
                    Ok(())
                })?;
                paths::add_snapshot(tx, ws.id, ord, &snaps[k].id)?;
            }
            Ok(())
        })?;
        Ok(snaps)
    }

    fn workspace_named(&self, name: &str) -> Result<Workspace> {
        workspaces::get(self.manifest.conn(), name)?.ok_or_else(|| {
            Error::not_found(format!("workspace '{name}' not found: list them with `trove workspace list`"))
        })
    }

    /// The versions of paths matching `pattern` across the snapshots of `workspace` (all
    /// workspaces when `None`). A pattern without glob syntax is an exact name (the last path
    /// component), or an exact path when it has a `/`; a glob matches names, or whole paths
    /// when it has a `/`.
    pub fn find_paths(
        &self,
        pattern: &str,
        workspace: Option<&str>,
        case_insensitive: bool,
        limit: usize,
    ) -> Result<FindResult> {
        pattern::check_glob(pattern)?;
        let wss = match workspace {
            Some(w) => vec![self.workspace_named(w)?],
            None => workspaces::list(self.manifest.conn())?,
        };
        let mut snaps = Vec::with_capacity(wss.len());
        for ws in &wss {
            snaps.push((ws.clone(), self.index_workspace(ws)?));
        }
        let conn = self.manifest.conn();
        let wanted = |id: i64| snaps.iter().any(|(w, _)| w.id == id);
        let whole_path = pattern.contains('/');
        let mut rows: Vec<VersionRow> = Vec::new();
        if !is_glob(pattern) && !case_insensitive && !whole_path {
            rows = paths::named(conn, pattern.as_bytes())?;
        } else if !is_glob(pattern) && !case_insensitive {
            let p = path::from_text(pattern)?;
            for (ws, _) in &snaps {
                rows.extend(paths::versions_of(conn, ws.id, &p)?);
            }
        } else {
            // A set of one, not `compile_matcher`: building a set reports a glob whose regex
            // does not compile as an error, where the matcher would panic.
            let glob = globset::GlobSetBuilder::new()
                .add(pattern::glob(pattern, case_insensitive, true)?)
                .build()
                .map_err(|e| Error::invalid_argument(format!("bad glob: {}", e.kind())))?;
            let test = |bytes: &[u8]| glob.is_match(path::display(bytes).as_ref());
            if whole_path {
                let mut hits = Vec::new();
                paths::paths(conn, |ws, p| {
                    if wanted(ws) && test(p) {
                        hits.push((ws, p.to_vec()));
                    }
                    Ok(())
                })?;
                for (ws, p) in hits {
                    rows.extend(paths::versions_of(conn, ws, &p)?);
                }
            } else {
                let mut hits = Vec::new();
                paths::names(conn, |n| {
                    if test(n) {
                        hits.push(n.to_vec());
                    }
                    Ok(())
                })?;
                for n in hits {
                    rows.extend(paths::named(conn, &n)?);
                }
            }
        }
        rows.retain(|r| wanted(r.workspace));
        rows.sort_by(|a, b| (a.workspace, &a.path, a.from_ord).cmp(&(b.workspace, &b.path, b.from_ord)));
        let mut distinct = 0u64;
        let mut last: Option<(i64, &[u8])> = None;
        for r in &rows {
            if last != Some((r.workspace, &r.path)) {
                distinct += 1;
                last = Some((r.workspace, &r.path));
            }
        }
        let truncated = rows.len() > limit;
        let mut matches = Vec::with_capacity(rows.len().min(limit));
        for r in rows.iter().take(limit) {
            if let Some((ws, list)) = snaps.iter().find(|(w, _)| w.id == r.workspace) {
                matches.push(version_of(&ws.name, r, list)?);
            }
        }
        Ok(FindResult { pattern: pattern.to_string(), matches, paths: distinct, truncated })
    }

    /// The history of `rel` in `workspace`, newest first; with `follow`, across renames (found
    /// by rename detection between the snapshot a path appeared in and the one before).
    pub fn path_log(&self, workspace: &str, rel: &[u8], follow: bool, scope: &Scope) -> Result<PathLog> {
        scope.check_read(rel)?;
        let ws = self.workspace_named(workspace)?;
        let snaps = self.index_workspace(&ws)?;
        let conn = self.manifest.conn();
        let mut out: Vec<LogEntry> = Vec::new();
        let mut current = rel.to_vec();
        // Follow back only through the snapshots before the earliest seen: never a loop.
        let mut before: Option<i64> = None;
        loop {
            let mut rows = paths::versions_of(conn, ws.id, &current)?;
            if let Some(b) = before {
                rows.retain(|r| r.to_ord.is_some_and(|t| t < b));
            }
            if rows.is_empty() {
                break;
            }
            let records = audit::touching(conn, &ws.name, &current, i64::MAX, MAX_PATH_RECORDS)?;
            let mut entries = Vec::with_capacity(rows.len());
            for (i, r) in rows.iter().enumerate() {
                let k = r.from_ord as usize;
                let origin = match i.checked_sub(1).map(|p| &rows[p]) {
                    Some(p) if p.to_ord == Some(r.from_ord - 1) => VersionOrigin::Modified,
                    _ => VersionOrigin::Added,
                };
                let gone_in = match r.to_ord {
                    Some(t) if rows.get(i + 1).is_none_or(|n| n.from_ord != t + 1) => {
                        snaps.get(t as usize + 1).map(|s| s.id.clone())
                    }
                    _ => None,
                };
                // The change that produced it: a record of this path between the snapshot
                // before and this one, the last that wrote exactly this content if any.
                let (lo, hi) = (k.checked_sub(1).map_or(i64::MIN, |p| snaps[p].created_ns), snaps[k].created_ns);
                let window: Vec<_> =
                    records.iter().filter(|f| f.record.time_ns > lo && f.record.time_ns <= hi).collect();
                let change = window
                    .iter()
                    .find(|f| r.content.is_some() && f.record.after_object == r.content)
                    .or_else(|| window.first())
                    .map(|f| f.entry());
                entries.push(LogEntry {
                    version: version_of(&ws.name, r, &snaps)?,
                    origin,
                    renamed_from: None,
                    gone_in,
                    change,
                });
            }
            let first_ord = rows[0].from_ord;
            entries.reverse();
            out.extend(entries);
            if !follow || first_ord == 0 {
                break;
            }
            // Was the path's first version renamed from somewhere?
            let (prev, this) = (&snaps[first_ord as usize - 1], &snaps[first_ord as usize]);
            let opts = DiffOptions { lines: false, scope: scope.clone(), ..DiffOptions::default() };
            let report = self.diff(
                &DiffTarget::Snapshot(Box::new(prev.clone())),
                &DiffTarget::Snapshot(Box::new(this.clone())),
                &opts,
            )?;
            let from = report
                .entries
                .into_iter()
                .find(|e| e.status == ChangeStatus::Renamed && e.raw_path == current)
                .and_then(|e| e.raw_old_path);
            let Some(from) = from else { break };
            if let Some(last) = out.last_mut() {
                last.origin = VersionOrigin::Renamed;
                last.renamed_from = Some(path::display(&from).into_owned());
            }
            current = from;
            before = Some(first_ord);
        }
        if out.is_empty() {
            return Err(Error::not_found(format!(
                "'{}' is in no snapshot of workspace '{}': look for it with `trove find NAME --workspace {}`",
                path::display(rel),
                ws.name,
                ws.name
            )));
        }
        let (shown, path_base64) = path::for_json(rel);
        Ok(PathLog { workspace: ws.name, path: shown, path_base64, versions: out })
    }
}

/// A version row as shown, its snapshot numbers turned into ids and times.
fn version_of(workspace: &str, r: &VersionRow, snaps: &[SnapshotInfo]) -> Result<PathVersion> {
    let at = |ord: i64| {
        snaps.get(ord as usize).ok_or_else(|| {
            Error::corrupt(format!(
                "the path index names snapshot number {ord} of '{workspace}', which it does not have"
            ))
        })
    };
    let last_ord = r.to_ord.unwrap_or(snaps.len() as i64 - 1);
    let (first, last) = (at(r.from_ord)?, at(last_ord)?);
    let (shown, path_base64) = path::for_json(&r.path);
    Ok(PathVersion {
        workspace: workspace.to_string(),
        path: shown,
        path_base64,
        kind: r.kind,
        mode: format!("{:o}", r.mode),
        size: r.size,
        content: r.content.filter(|_| r.kind == EntryKind::File),
        sha256: r.sha256,
        target: r.target.as_deref().map(|t| path::display(t).into_owned()),
        first_snapshot: first.id.clone(),
        first_at: iso_time(first.created_ns),
        last_snapshot: last.id.clone(),
        last_at: iso_time(last.created_ns),
        snapshots: (last_ord - r.from_ord + 1).max(0) as u64,
        current: r.to_ord.is_none(),
    })
}
