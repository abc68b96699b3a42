//! Another node's trash items, purged or restored from this node (in a fleet): the act is
//! recorded in the acting node's own log, naming the item's node, and the item's rows are
//! deleted (a purge) or marked restored (a whole restore) in that node's log as a collector
//! writes there (`Owner::Collector` with `purges`, a segment of format 4 its writers write after).
//! A restore puts the item into a workspace of this node (the item's workspace's name, or one the
//! request names), its content first copied into this node's store, so that the records name
//! content this node holds.
//!
//! Two logs, so two writes, made whole by a note of this node's: before the records, the batch
//! is written to `<cache>/<repository id>/purging/<random>.json` (synced, and held with a
//! `flock` while it is worked on; written under a temporary name and renamed); after the
//! second write, the note is removed, and only then: an act that failed between the two keeps
//! it. A note found by a later open (the process was killed, or the second write failed) is
//! settled: each item still in its node's trash whose purge (or whole restore) this node's log
//! records is deleted (or marked restored) now; one whose act was never recorded was never
//! acknowledged, and stays. So a purge or restore is whole once its records are in the log.
//!
//! A purge's records name the item's content in their details (`object`), not in their object
//! columns: those point into this node's store, where `check` would look for it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::purge::{purge_record, purged, PurgeReason, BATCH};
use super::restore::{
    checked_to, restore_each, target_of, RestoreRequest, RestoreTo, Restorer, TrashSelection, RESTORE_ITEMS,
};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{NodeName, TrashId};
use crate::base::path;
use crate::base::time::now_ns;
use crate::manifest;
use crate::model::scope::Scope;
use crate::model::trash::{BulkRestore, PurgeReport, RestoreOutcome, RestoreResult, TrashItem};
use crate::ops::journal::Author;
use crate::repo::Repo;

/// Where this node's notes of purges and restores in flight are, in its cache directory of the
/// repository (named for the purges, which came first).
const PURGING: &str = "purging";

/// What a note's items are undergoing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Act {
    /// Deleted from their node's trash (notes written before restores existed say nothing).
    #[default]
    Purge,
    /// Restored into this node's workspace, so marked restored in their node's trash.
    Restore,
}

/// A batch of another node's items being purged or restored.
#[derive(Serialize, Deserialize)]
struct Note {
    node: String,
    ids: Vec<TrashId>,
    #[serde(default)]
    act: Act,
}

/// A note held (locked) while its purge is worked on. It is removed only once the purge is
/// whole ([`Held::settled`]): dropped otherwise (an error), it stays for the next open.
struct Held {
    path: PathBuf,
    _file: std::fs::File,
}

impl Held {
    /// The act is whole (or never happened): the note goes.
    fn settled(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "a settled note of another node's trash items was not removed; the next open settles it again, which changes nothing");
        }
    }
}

/// Locks the note at `path`, open as `file` (None: another process holds it).
fn lock(path: &Path, file: std::fs::File) -> Result<Option<Held>> {
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(Held { path: path.to_path_buf(), _file: file })),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(Error::io("lock", path, e.into())),
    }
}

impl Repo {
    /// [`Repo::purge_trash`] on a handle over another node's replica; see the module docs.
    pub(super) fn purge_elsewhere(&self, items: &[(TrashItem, PurgeReason)], actor: &str) -> Result<PurgeReport> {
        let node = NodeName::parse(self.node().unwrap_or_default())?;
        let recorder = self.recorder()?.ok_or_else(|| Error::internal("another node's handle without its own"))?;
        let purger = recorder.opener()?.open_purging(&node)?;
        let mut report = PurgeReport { dry_run: false, purged: 0, bytes: 0, items: Vec::new() };
        for batch in items.chunks(BATCH) {
            // Those still in the node's trash, as its log says now, each once.
            let mut present: Vec<(&TrashItem, PurgeReason)> = Vec::with_capacity(batch.len());
            for (t, why) in batch {
                if present.iter().any(|(p, _)| p.id == t.id) {
                    continue;
                }
                match purger.trash_item(&t.id) {
                    Ok(_) => present.push((t, *why)),
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            if present.is_empty() {
                continue;
            }
            let note = recorder.note(&node, Act::Purge, present.iter().map(|(t, _)| t.id.clone()).collect())?;
            recorder.manifest.write(|tx| {
                present.iter().try_for_each(|(t, why)| {
                    let mut rec = self.naming_node(purge_record(t, *why, actor));
                    if let Some(object) = rec.before_object.take() {
                        rec.details["object"] = object.to_string().into();
                    }
                    manifest::audit::append(tx, &rec).map(|_| ())
                })
            })?;
            crate::base::failpoint::failpoint("trash:purge-recorded");
            // A failure here leaves the note: the next open deletes what the records name.
            purger
                .manifest
                .write(|tx| present.iter().try_for_each(|(t, _)| manifest::trash::delete(tx, &t.id).map(|_| ())))?;
            note.settled();
            for (t, why) in present {
                let p = purged(t, why);
                report.purged += 1;
                report.bytes = report.bytes.saturating_add(p.size);
                report.items.push(p);
            }
        }
        if report.purged > 0 {
            recorder.checkpoint_if_due();
        }
        Ok(report)
    }

    /// Writes (synced) and holds the note of `act` on `ids` of node `node`: written and locked
    /// under a temporary name, then renamed, so an open settling notes never finds one empty
    /// or unheld.
    fn note(&self, node: &NodeName, act: Act, ids: Vec<TrashId>) -> Result<Held> {
        let root = self.root().ok_or_else(|| Error::internal("a fleet node without a cache directory"))?;
        let dir = root.join(PURGING);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        let name = crate::base::random::random_hex()?;
        let (temp, path) = (dir.join(format!("{name}.writing")), dir.join(format!("{name}.json")));
        let bytes = serde_json::to_vec(&Note { node: node.to_string(), ids, act })
            .map_err(|e| Error::internal(format!("encoding a note of another node's trash items: {e}")))?;
        let file = std::fs::File::options()
            .create_new(true)
            .write(true)
            .open(&temp)
            .map_err(|e| Error::io("create", &temp, e))?;
        let held = lock(&path, file.try_clone().map_err(|e| Error::io("open", &temp, e))?)?
            .ok_or_else(|| Error::internal(format!("{} is locked as it is made", temp.display())))?;
        use std::io::Write;
        (&file).write_all(&bytes).and_then(|()| file.sync_all()).map_err(|e| Error::io("write", &temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io("rename", &temp, e))?;
        // The note's name is durable once its directory is.
        std::fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync", &dir, e))?;
        Ok(held)
    }

    /// Settles the purges and restores of other nodes' items a killed process left half done
    /// (see the module docs). Each note's failure is logged and the note kept for the next open.
    pub(crate) fn recover_purges(&self) -> Result<()> {
        let (Some(root), Some(_)) = (self.root(), self.node()) else { return Ok(()) };
        if self.is_other_node() {
            return Ok(());
        }
        let dir = root.join(PURGING);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("read", &dir, e)),
        };
        for entry in entries {
            let path = entry.map_err(|e| Error::io("read", &dir, e))?.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            if let Err(e) = self.settle_note(&path) {
                tracing::warn!(path = %path.display(), error = %e, "a purge or restore of another node's trash items a killed process left was not settled; tried again at the next open");
            }
        }
        Ok(())
    }

    fn settle_note(&self, path: &Path) -> Result<()> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let Some(held) = lock(path, file.try_clone().map_err(|e| Error::io("open", path, e))?)? else {
            return Ok(()); // its process is still at work
        };
        let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
        let note: Note = serde_json::from_slice(&bytes).map_err(|e| {
            Error::corrupt(format!("{} is not a purge's note ({e}): read it, then delete it", path.display()))
        })?;
        let node = NodeName::parse(&note.node)?;
        let conn = self.manifest.conn();
        if note.act == Act::Restore {
            // A restore the journal still holds (its workspace busy, its recovery failed) may
            // yet be recorded: the note waits for it.
            let pending = manifest::journal::pending(conn)?;
            if note.ids.iter().any(|id| pending.iter().any(|(_, plan)| plan.contains(id.as_str()))) {
                return Ok(());
            }
        }
        let mut recorded = Vec::new();
        for id in &note.ids {
            let found = match note.act {
                Act::Purge => manifest::audit::purge_recorded(conn, id.as_ref(), node.as_str())?,
                Act::Restore => manifest::audit::restore_recorded(conn, id.as_ref(), node.as_str())?,
            };
            if found {
                recorded.push(id);
            }
        }
        if recorded.is_empty() {
            // Never acknowledged (a refused restore's note is this): nothing to finish.
            held.settled();
            return Ok(());
        }
        let purger = self.opener()?.open_purging(&node)?;
        let mut due = Vec::new();
        for id in recorded {
            match purger.trash_item(id) {
                Ok(t) if note.act == Act::Purge || t.restored_ns.is_none() => due.push(id.clone()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !due.is_empty() {
            purger.manifest.write(|tx| {
                due.iter().try_for_each(|id| match note.act {
                    Act::Purge => manifest::trash::delete(tx, id).map(|_| ()),
                    Act::Restore => manifest::trash::mark_restored(tx, id, now_ns()),
                })
            })?;
            tracing::info!(node = %node, items = due.len(), act = ?note.act, "a purge or restore of another node's trash items a killed process left is finished");
        }
        held.settled();
        Ok(())
    }

    /// [`Repo::restore_trash`] on a handle over another node's replica: its items, named by id,
    /// restored by the acting node into its workspaces as an operator; see the module docs.
    pub(super) fn restore_elsewhere(&self, req: &RestoreRequest, who: &Restorer<'_>) -> Result<BulkRestore> {
        let node = NodeName::parse(self.node().unwrap_or_default())?;
        let Restorer::Operator { actor, live_dir } = who else {
            return Err(Error::invalid_argument(format!(
                "a session restores its own workspace's items only, and node {node}'s are another's"
            )));
        };
        if !matches!(req.selection, TrashSelection::Ids(_)) {
            return Err(Error::invalid_argument(format!(
                "node {node}'s items are restored by id: list them with `trove trash ls`"
            )));
        }
        let to = checked_to(req)?;
        let recorder = self.recorder()?.ok_or_else(|| Error::internal("another node's handle without its own"))?;
        let keeper = recorder.opener()?.open_purging(&node)?;
        keeper.set_deadline(recorder.deadline());
        let picked = self.pick_for_restore(&req.selection, None, &Scope::whole())?;
        let there = There { node: &node, recorder: &recorder, keeper: &keeper, actor, live_dir };
        Ok(restore_each(
            picked,
            || recorder.check_deadline("restoring from the trash"),
            |row| {
                let shown = path::display(&row.path).into_owned();
                let target = target_of(&req.selection, to.as_deref(), &row);
                let how = RestoreTo {
                    to: target.as_deref(),
                    on_conflict: req.on_conflict,
                    expected_sha256: req.expected_sha256.as_deref(),
                };
                match self.restore_there(&there, &row.id, req.workspace.as_deref(), how) {
                    Ok(r) => RestoreOutcome::done(row.id, shown, r),
                    Err(e) => {
                        // Refused in the workspace it was to go to, naming the item's node.
                        let into = req.workspace.clone().unwrap_or_else(|| row.workspace.clone());
                        let named = Error::new(e.kind(), format!("node {node}'s item: {}", e.message()));
                        recorder.audit_restore_refusal(who, &TrashItem { workspace: into, ..row.clone() }, &named);
                        RestoreOutcome::failed(row.id, Some(shown), &e)
                    }
                }
            },
        ))
    }

    /// Restores this node's item `id` as [`There`] says, into the acting node's workspace
    /// `workspace` (by default the one of the item's workspace's name).
    fn restore_there(
        &self,
        there: &There<'_>,
        id: &TrashId,
        workspace: Option<&str>,
        how: RestoreTo<'_>,
    ) -> Result<RestoreResult> {
        let There { node, recorder, keeper, actor, live_dir } = there;
        let item = self.trash_item(id)?;
        let workspace = workspace.unwrap_or(&item.workspace);
        let dir = live_dir(workspace).map_err(|e| {
            e.context(format!(
                "trash item {id} is node {node}'s: restore it into a workspace of this node (`--workspace W`, `workspace` in a request's body), or copy it out (`trove trash restore {id} --into DIR`)"
            ))
        })?;
        let locked = recorder.lock_live(&dir)?;
        // Leased before the first lookup of stored content, on both nodes, until the plan is
        // done: a collection meanwhile keeps what is read and what is written.
        let _read = self.lease("restoring another node's trash item")?;
        let _written = recorder.lease("restoring another node's trash item")?;
        self.copy_content_into(recorder, &item)?;
        let scope = Scope::whole();
        let by = Author { workspace, session: None, actor, scope: &scope };
        // Kept whatever happens but a whole restore marked: a refusal's is dropped by the next
        // settling (nothing recorded), a plan the journal still holds is waited for.
        let note = recorder.note(node, Act::Restore, vec![item.id.clone()])?;
        let details = serde_json::json!({ "node": node.as_str() });
        let done = recorder.restore_trash_item(&locked.wd, &by, "trash_restore", &item, how, details)?;
        crate::base::failpoint::failpoint("trash:restore-recorded");
        // A merge that left members out does not mark the item restored, as on its own node.
        if !done.collisions.is_empty() {
            note.settled();
            return Ok(done);
        }
        match keeper.manifest.write(|tx| manifest::trash::mark_restored(tx, &item.id, now_ns())) {
            Ok(()) => note.settled(),
            Err(e) => {
                // Restored all the same: the note stays, and the next open marks it.
                tracing::warn!(trash = %item.id, node = %node, error = %e, "a restored item of another node was not marked restored in its trash; the next open does it");
            }
        }
        Ok(done)
    }

    /// Copies every content of `item` (this node's) that `into` (the acting node) does not
    /// hold into its store, streamed: its records of the restore name content it holds.
    fn copy_content_into(&self, into: &Repo, item: &TrashItem) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        let objects = item.object.into_iter().chain(item.entries.iter().filter_map(|e| e.object));
        for id in objects {
            if !seen.insert(id) || manifest::loose::content_stored(into.manifest.conn(), &id)? {
                continue;
            }
            into.check_deadline("copying another node's trash item")?;
            let mut reader = self.open_object(id, None)?;
            let stored = into.store_stream(&mut reader, None)?;
            if stored.id != id {
                return Err(Error::corrupt(format!(
                    "trash item {}'s content {id} read back as {}: check the repository with `trove check --read-data`",
                    item.id, stored.id
                )));
            }
        }
        Ok(())
    }
}

/// Trash items named by id across a fleet: those a node's trash holds, by the index of its view
/// (this node's first), and the ids no node holds.
#[derive(Default)]
pub struct FleetItems {
    /// Each holding view's index, and its items (with a directory's members) in the order named.
    pub groups: Vec<(usize, Vec<TrashItem>)>,
    /// The ids found on no node, in the order named.
    pub missing: Vec<TrashId>,
}

impl FleetItems {
    /// The groups, when every id was found; else the `not_found` of the first one missing.
    pub fn found(self) -> Result<Vec<(usize, Vec<TrashItem>)>> {
        match self.missing.first() {
            Some(id) => Err(Error::not_found(format!(
                "trash item '{id}' is in no node's trash: list the fleet's with `trove trash ls`"
            ))),
            None => Ok(self.groups),
        }
    }
}

/// Finds each of `ids` (once each) on whichever of `views` (a node's name and handle, this
/// node's first, as [`crate::fleet_trash_page`] takes them) holds it: asked in order, the first
/// holding one takes it.
pub fn trash_by_node(views: &[(Option<&str>, &Repo)], ids: &[TrashId]) -> Result<FleetItems> {
    let mut out = FleetItems::default();
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        let mut found = None;
        for (i, (_, repo)) in views.iter().enumerate() {
            match repo.trash_item(id) {
                Ok(item) => {
                    found = Some((i, item));
                    break;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        match found {
            Some((i, item)) => match out.groups.iter_mut().find(|(g, _)| *g == i) {
                Some((_, items)) => items.push(item),
                None => out.groups.push((i, vec![item])),
            },
            None => out.missing.push(id.clone()),
        }
    }
    Ok(out)
}

/// [`Repo::restore_trash`] across a fleet (`views` as [`trash_by_node`] takes them): items named
/// by id are each restored from whichever node holds it (another node's into this node's
/// workspaces), and an id no node holds is reported as not found; a path or a prefix names
/// items of this node's workspace. Every item's outcome is reported, grouped by node.
pub fn restore_trash_in_fleet(
    views: &[(Option<&str>, &Repo)],
    req: &RestoreRequest,
    who: &Restorer<'_>,
) -> Result<BulkRestore> {
    let Some((_, mine)) = views.first() else { return Err(Error::internal("a fleet's views without this node's")) };
    let TrashSelection::Ids(ids) = &req.selection else { return mine.restore_trash(req, who) };
    if views.len() == 1 {
        return mine.restore_trash(req, who);
    }
    // A request refused whole is refused before any node restores anything.
    checked_to(req)?;
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<TrashId> = ids.iter().filter(|id| seen.insert(*id)).cloned().collect();
    if ids.len() > RESTORE_ITEMS {
        return Err(Error::invalid_argument(format!(
            "{} items are more than one restore takes ({RESTORE_ITEMS}): restore in parts",
            ids.len()
        )));
    }
    let found = trash_by_node(views, &ids)?;
    let mut parts: Vec<(usize, Vec<TrashId>)> =
        found.groups.into_iter().map(|(i, items)| (i, items.into_iter().map(|t| t.id).collect())).collect();
    if !found.missing.is_empty() {
        // This node's restore reports each as not found.
        match parts.iter_mut().find(|(i, _)| *i == 0) {
            Some((_, ids)) => ids.extend(found.missing),
            None => parts.push((0, found.missing)),
        }
    }
    let mut out = BulkRestore { restored: 0, failed: 0, items: Vec::new() };
    for (i, ids) in parts {
        let part = RestoreRequest { selection: TrashSelection::Ids(ids.clone()), ..req.clone() };
        match views[i].1.restore_trash(&part, who) {
            Ok(done) => {
                out.restored += done.restored;
                out.failed += done.failed;
                out.items.extend(done.items);
            }
            // Other nodes' items may be restored already: this node's are reported refused.
            Err(e) => {
                out.failed += ids.len();
                out.items.extend(ids.into_iter().map(|id| RestoreOutcome::failed(id, None, &e)));
            }
        }
    }
    Ok(out)
}

/// Who restores another node's items, and through which handles.
struct There<'a> {
    /// The items' node.
    node: &'a NodeName,
    /// The acting node's handle, which restores and records.
    recorder: &'a Repo,
    /// The handle that marks the items restored in their node's log.
    keeper: &'a Repo,
    /// Who, as the audit log names them.
    actor: &'a str,
    /// The acting node's workspaces' live directories, by name.
    live_dir: &'a dyn Fn(&str) -> Result<PathBuf>,
}
