//! Purging another node's trash items (in a fleet): the purge is recorded in the acting node's
//! own log, naming the item's node, and the item's rows are deleted in that node's log as a
//! collector deletes there (`Owner::Collector`, a segment of format 4 its writers write after).
//!
//! Two logs, so two writes, made whole by a note of this node's: before the records, the batch
//! is written to `<cache>/<repository id>/purging/<random>.json` (synced, and held with a
//! `flock` while it is worked on; written under a temporary name and renamed); after the
//! deletion, the note is removed, and only then: a purge that failed between the two keeps it.
//! A note found by a later open (the process was killed, or the deletion failed) is settled:
//! each item still in its node's trash whose purge this node's log records is deleted now; one
//! whose purge was never recorded was never acknowledged, and stays. So a purge is whole once
//! its records are in the log.
//!
//! The records name the item's content in their details (`object`), not in their object
//! columns: those point into this node's store, where `check` would look for it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::purge::{purge_record, purged, PurgeReason, BATCH};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{NodeName, TrashId};
use crate::manifest;
use crate::model::trash::{PurgeReport, TrashItem};
use crate::repo::Repo;

/// Where this node's notes of purges in flight are, in its cache directory of the repository.
const PURGING: &str = "purging";

/// A batch of another node's items being purged.
#[derive(Serialize, Deserialize)]
struct Note {
    node: String,
    ids: Vec<TrashId>,
}

/// A note held (locked) while its purge is worked on. It is removed only once the purge is
/// whole ([`Held::settled`]): dropped otherwise (an error), it stays for the next open.
struct Held {
    path: PathBuf,
    _file: std::fs::File,
}

impl Held {
    /// The purge is whole: the note goes.
    fn settled(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "a settled purge's note was not removed; the next open settles it again, which changes nothing");
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
            let note = recorder.note_purge(&node, present.iter().map(|(t, _)| t.id.clone()).collect())?;
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

    /// Writes (synced) and holds the note of purging `ids` of node `node`: written and locked
    /// under a temporary name, then renamed, so an open settling notes never finds one empty
    /// or unheld.
    fn note_purge(&self, node: &NodeName, ids: Vec<TrashId>) -> Result<Held> {
        let root = self.root().ok_or_else(|| Error::internal("a fleet node without a cache directory"))?;
        let dir = root.join(PURGING);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        let name = crate::base::random::random_hex()?;
        let (temp, path) = (dir.join(format!("{name}.writing")), dir.join(format!("{name}.json")));
        let bytes = serde_json::to_vec(&Note { node: node.to_string(), ids })
            .map_err(|e| Error::internal(format!("encoding a purge's note: {e}")))?;
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

    /// Settles the purges of other nodes' items a killed process left half done (see the
    /// module docs). Each note's failure is logged and the note kept for the next open.
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
                tracing::warn!(path = %path.display(), error = %e, "a purge of another node's trash items a killed process left was not settled; tried again at the next open");
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
        let purger = self.opener()?.open_purging(&node)?;
        let conn = self.manifest.conn();
        let mut due = Vec::new();
        for id in &note.ids {
            if !manifest::audit::purge_recorded(conn, id.as_ref(), node.as_str())? {
                continue;
            }
            match purger.trash_item(id) {
                Ok(_) => due.push(id.clone()),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !due.is_empty() {
            purger.manifest.write(|tx| due.iter().try_for_each(|id| manifest::trash::delete(tx, id).map(|_| ())))?;
            tracing::info!(node = %node, items = due.len(), "a purge of another node's trash items a killed process left is finished");
        }
        held.settled();
        Ok(())
    }
}
