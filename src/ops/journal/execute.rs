//! Carrying out a plan (`Repo::execute`): journal, stage, apply, bury, finish, in the order
//! `journal`'s documentation gives, and undoing the steps that happened when one is refused.

use std::io::Read;

use serde_json::json;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::failpoint::failpoint;
use crate::base::id::{PlanId, TrashId};
use crate::base::path;
use crate::base::time::now_ns;
use crate::fs::workdir::{self, Kind, WorkDir};
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::object::{ObjectId, Sha256};
use crate::repo::Repo;

use super::apply::{apply, bury, stale, verify};
use super::plan::{
    base_record, beside, grave_name, hex_sha, plan_object, plan_sha, tmp_name, Ctx, Done, Draft, NewContent, Plan,
    Step, ToStore,
};

/// A file content the store now holds.
pub(crate) struct StoredContent {
    /// Its SHA-256, what the stale-file protocol compares.
    pub sha256: Sha256,
    /// Its content id.
    pub id: ObjectId,
    /// Its bytes, when it is one object (at most `loose::WHOLE_LIMIT`): what the next version
    /// of the same path is stored against.
    pub whole: Option<Vec<u8>>,
}

/// A new content held in memory (an edited text, a request body), stored in the transaction of
/// the plan's records instead of before the plan: one transaction, so a bucket's log gets one
/// segment per change. Until then its temporary, synced beside its target before any step,
/// is where recovery finds it.
pub(super) struct Fresh<'a> {
    id: ObjectId,
    raw: &'a [u8],
    /// A delta against the pre-image it replaces, and that base's depth, when one pays.
    delta: Option<(Vec<u8>, u8)>,
}

impl Repo {
    /// Carries out `drafts` on the tree in `wd` as one journaled plan.
    pub(crate) fn execute(&self, wd: &WorkDir, ctx: Ctx<'_>, drafts: Vec<Draft>) -> Result<Done> {
        // Before any object is looked up or stored: garbage collection must not take what this
        // change relies on until it is recorded.
        let _lease = self.lease(ctx.tool)?;
        let (plan, contents, store) = draft_plan(wd, ctx, drafts)?;
        failpoint(&format!("{}:drafted", plan.tool));
        let fresh = self.journal(wd, &plan, &contents, &store)?;
        failpoint(&format!("{}:journaled", plan.tool));
        // In a bucket, a collection on another host cannot see this host's journal: stopped
        // here, before the tree changes, if one swept what this change may rely on (the plan
        // then dropped, as one refused before its first step).
        if let Err(e) = self.manifest.check_fence() {
            self.drop_plan(wd, &plan)?;
            return Err(e);
        }
        // A big plan (a directory restored) is synced once after staging and once after its
        // renames instead of file by file: thousands of fsyncs would take seconds. Recovery
        // needs no more: the plan is journaled before either, and a rename lost in a crash
        // leaves its temporary, which recovery stages again from the store (or, for a content
        // not stored yet, syncs and goes on from when it is whole).
        let bulk = plan.steps.len() > BULK_STEPS;
        if bulk {
            wd.defer_syncs();
        }
        let applied = self.stage_and_apply(wd, &plan, &contents, bulk);
        wd.resume_syncs();
        applied?;
        // 4. Bury: every change has landed, so a grave that cannot be removed is only litter.
        if let Err(e) = bury(wd, &plan) {
            tracing::warn!(plan = %plan.id, error = %e, "a deleted path's grave could not be removed; left beside it");
        }
        failpoint(&format!("{}:buried", plan.tool));
        // 5. Finish.
        self.finish_applied(wd, &plan, &fresh)
    }

    /// Step 5 for a plan this call applied: the tree has changed, so its records must land,
    /// and an error now must say so. In a bucket, a record refused by a fence (a sweep another
    /// host recorded while the change ran, past the epoch it began at) or by other writers
    /// taking the log's next segments again and again is no reason to leave the change
    /// unrecorded, nor to tell the caller to run it again over a tree that holds it: the
    /// refused write caught this replica up, so the change secures again every stored content
    /// its records name (`secure`) under fences as new as that state, and writes them again.
    /// The handle's fences are as they were afterwards (an outer lease's included). Any other
    /// error, or refusals past `FINISH_TRIES`, reaches the caller as a change made but not yet
    /// recorded (`changed`), which the journal keeps for recovery.
    fn finish_applied(&self, wd: &WorkDir, plan: &Plan, fresh: &[Fresh<'_>]) -> Result<Done> {
        let fences = self.manifest.fences();
        let out = self.record_applied(wd, plan, fresh);
        self.manifest.set_fences(fences);
        out.map_err(|e| {
            let kind = e.kind();
            let message = format!(
                "change {} reached the tree, but its record could not be written ({}): it stays journaled, and this host records it when it next opens the repository (a server: within a reaper tick); do not run it again",
                plan.id,
                e.message()
            );
            Error::with_source(kind, message, e).with_detail("changed", true)
        })
    }

    /// `finish`, run again after each refusal a fence or the log's races made, securing first.
    fn record_applied(&self, wd: &WorkDir, plan: &Plan, fresh: &[Fresh<'_>]) -> Result<Done> {
        let mut refused = 0;
        loop {
            match self.finish(plan, false, fresh) {
                Err(e) if e.kind() == ErrorKind::Conflict && self.manifest.is_replica() && refused < FINISH_TRIES => {
                    failpoint(&format!("{}:record-refused", plan.tool));
                    tracing::warn!(plan = %plan.id, error = %e, "an applied change's record was refused: its stored contents are secured again before it is written again");
                    refused += 1;
                    let seen = self.manifest.read(|| manifest::gc::seen_epoch(self.manifest.conn()))?;
                    self.manifest.renew_fences(seen);
                    self.secure(wd, plan, fresh)?;
                }
                // The manifest's lock held past its timeout (a long write of another handle):
                // nothing was written, and the record is tried again as it is.
                Err(e) if e.is_busy() && refused < FINISH_TRIES => {
                    tracing::warn!(plan = %plan.id, error = %e, "an applied change's record waited too long for the manifest's lock: written again");
                    refused += 1;
                }
                out => return out,
            }
        }
    }

    /// Makes every stored content the records of `plan` name (pre-images, trash items, new
    /// contents not in `fresh`, which its record stores itself) live in this replica's view:
    /// one condemned is stored again from the store, and one the store no longer holds from
    /// the tree where the change put it. A content neither holds (a pre-image a sweep deleted
    /// while the change outlived the collection's grace) is logged, and the record names it
    /// all the same, for `check` to report. Any other failure (the store unreachable, the
    /// deadline) is returned: nothing may then be written under the renewed fences.
    fn secure(&self, wd: &WorkDir, plan: &Plan, fresh: &[Fresh<'_>]) -> Result<()> {
        let mut wanted: Vec<(ObjectId, Option<&[u8]>)> = Vec::new();
        for s in &plan.steps {
            match s {
                Step::Write { path, before_object, after_object, .. } => {
                    if let Some(h) = after_object {
                        wanted.push((plan_object(plan, h)?, Some(path)));
                    }
                    if let Some(h) = before_object {
                        wanted.push((plan_object(plan, h)?, None));
                    }
                }
                Step::Remove { trash, .. } => {
                    wanted.extend(
                        trash
                            .object
                            .into_iter()
                            .chain(trash.entries.iter().filter_map(|e| e.object))
                            .map(|id| (id, None)),
                    );
                }
                Step::Move { to, object: Some(h), .. } => wanted.push((plan_object(plan, h)?, Some(to))),
                Step::Move { .. } | Step::Mkdir { .. } | Step::Symlink { .. } => {}
            }
        }
        let mut done = std::collections::HashSet::new();
        for (id, at) in wanted {
            if fresh.iter().any(|f| f.id == id) || !done.insert(id) {
                continue;
            }
            if self.manifest.read(|| manifest::loose::content_stored(self.manifest.conn(), &id))? {
                continue;
            }
            // Condemned but still stored (every part of it): stored again from the store, where
            // a failure is the store's, returned.
            if self.manifest.read(|| stored_whole(self.manifest.conn(), &id))? {
                let stored = self.open_object(id, None).and_then(|mut r| self.store_stream(&mut r, None))?;
                if stored.id == id {
                    continue;
                }
                return Err(Error::corrupt(format!("object {id} reads back as {}: run `trove check`", stored.id)));
            }
            // Gone from the store: the tree holds a new content where the change put it, unless
            // something changed it since.
            if let Some(p) = at {
                if let Ok(Some((mut file, _))) = wd.open_file(p) {
                    if self.store_stream(&mut file, None)?.id == id {
                        tracing::info!(plan = %plan.id, object = %id, "a content gone from the store was stored again from the tree");
                        continue;
                    }
                }
            }
            tracing::error!(plan = %plan.id, object = %id, "a content this change's record names is gone (the change outlived a collection's grace); its record names it all the same");
        }
        Ok(())
    }

    /// Steps 2 and 3, stage and apply; with `bulk`, each followed by one sync of the tree.
    fn stage_and_apply(&self, wd: &WorkDir, plan: &Plan, contents: &[Staged], bulk: bool) -> Result<()> {
        let made = self.stage(wd, plan, contents)?;
        if bulk {
            wd.sync_all()?;
        }
        failpoint(&format!("{}:staged", plan.tool));
        self.apply_all(wd, plan, &made)?;
        if bulk {
            wd.sync_all()?;
        }
        Ok(())
    }

    /// Step 1, journal: every object the plan needs, then the plan, before the tree is touched.
    /// Pre-images stream from the tree into the store in transactions of their own, so a big
    /// file never holds the manifest's write lock for long; the plan's commit, which is
    /// fsynced, makes them durable with it (the WAL is written in order). New contents held in
    /// memory that are one object are returned instead, encoded, for `finish` to store.
    fn journal<'c>(
        &self,
        wd: &WorkDir,
        plan: &Plan,
        contents: &'c [Staged],
        store: &[ToStore],
    ) -> Result<Vec<Fresh<'c>>> {
        // Pre-images first: a new content is then stored as a delta against the pre-image it
        // replaces, held here (by its sha256, hex) when it is small enough to be one object.
        // Only those a new content replaces are held: a deleted directory's thousands of
        // members stream through one at a time.
        let replaced: Vec<&str> = plan
            .steps
            .iter()
            .zip(contents)
            .filter_map(|(s, c)| match (s, c) {
                (Step::Write { before: Some(before), .. }, Some((NewContent::Bytes(_), _))) => Some(before.as_str()),
                _ => None,
            })
            .collect();
        let roots = self.roots_to_log(plan)?;
        let mut pre_images: Vec<(String, ObjectId, Vec<u8>)> = Vec::new();
        for item in store {
            self.check_deadline("storing the files' previous contents")?;
            if let ToStore::Tree(p, sha) = item {
                let (mut file, _) = wd.open_file(p)?.ok_or_else(|| stale(p, None, Some(&hex_sha(sha))))?;
                let stored = self.store_stream(&mut file, None)?;
                if stored.sha256 != *sha {
                    return Err(stale(p, Some(hex_sha(&stored.sha256)), Some(&hex_sha(sha))));
                }
                let hex = hex_sha(sha);
                if let (Some(whole), true) = (stored.whole, replaced.contains(&hex.as_str())) {
                    pre_images.push((hex, stored.id, whole));
                }
            }
        }
        let mut fresh = Vec::new();
        for item in store {
            self.check_deadline("storing the files' new contents")?;
            if let ToStore::Bytes(i) = item {
                if let Some((NewContent::Bytes(b), _)) = &contents[*i] {
                    let base = match &plan.steps[*i] {
                        Step::Write { before: Some(before), .. } => {
                            pre_images.iter().find(|(sha, ..)| sha == before).map(|(_, id, raw)| (id, &raw[..]))
                        }
                        _ => None,
                    };
                    if b.len() > manifest::loose::WHOLE_LIMIT {
                        self.store_stream(&mut &b[..], base)?;
                    } else {
                        let id = ObjectId::of(b);
                        let delta = base.and_then(|(base_id, base_raw)| self.delta_or_whole(&id, b, base_id, base_raw));
                        fresh.push(Fresh { id, raw: b, delta });
                    }
                }
            }
        }
        let encoded = serde_json::to_string(plan).map_err(|e| Error::internal(format!("encoding a plan: {e}")))?;
        self.check_deadline("journaling the change")?;
        let fresh_ids: std::collections::HashSet<ObjectId> = fresh.iter().map(|f| f.id).collect();
        let roots: Vec<ObjectId> = roots.into_iter().filter(|o| !fresh_ids.contains(o)).collect();
        let host = if roots.is_empty() { None } else { self.host_id()? };
        self.manifest.write(|tx| {
            manifest::journal::insert(tx, &plan.id, plan.created_ns, &encoded)?;
            match &host {
                Some(host) => manifest::journal::insert_roots(tx, &plan.id, host, plan.created_ns, &roots),
                None => Ok(()),
            }
        })?;
        Ok(fresh)
    }

    /// In a bucket, the objects of `plan` not stored yet: stored by this change (pre-images
    /// and trash items read from the tree), they are reached by nothing but this host's
    /// journal until its record, which a collection on another host cannot see. Logged with
    /// the journal row (`plan_roots`), they stay roots there until the plan is closed, also
    /// while this host is down (killed mid-change, back after the grace period). None in a
    /// directory, where the journal itself is a root of every collection.
    fn roots_to_log(&self, plan: &Plan) -> Result<Vec<ObjectId>> {
        if !self.manifest.is_replica() {
            return Ok(Vec::new());
        }
        let conn = self.manifest.conn();
        // A directory's removal names thousands of members: each looked up once.
        let mut seen = std::collections::HashSet::new();
        let mut roots = Vec::new();
        for o in plan.objects()? {
            if seen.insert(o) && !manifest::loose::content_stored(conn, &o)? {
                roots.push(o);
            }
        }
        Ok(roots)
    }

    /// `raw` (id `id`) as a delta against `base_raw`, an earlier version of the same path, and
    /// that base's depth; None when it is better whole or already stored. A delta is an
    /// economy, never a condition of the write: a chain that cannot be followed (damaged, or a
    /// base condemned meanwhile) means this version is whole.
    fn delta_or_whole(&self, id: &ObjectId, raw: &[u8], base_id: &ObjectId, base_raw: &[u8]) -> Option<(Vec<u8>, u8)> {
        match self.delta_against(id, raw, base_id, base_raw, self.config.zstd_level) {
            Ok(delta) => delta,
            Err(e) => {
                tracing::warn!(object = %id, base = %base_id, error = %e, "stored whole: its previous version's chain could not be followed");
                None
            }
        }
    }

    /// Step 2, stage: every new content to a temporary beside its target, fsynced. Returns the
    /// directories staging created; on failure nothing staged is left and the plan is dropped.
    fn stage(&self, wd: &WorkDir, plan: &Plan, contents: &[Staged]) -> Result<Vec<Vec<u8>>> {
        let mut made = Vec::new();
        // One read transaction for the objects' lookups: a lock per query would cost more than
        // the copying for a directory of small files.
        let staged = self.manifest.read(|| {
            plan.steps.iter().zip(contents).try_for_each(|(s, c)| match (s, c) {
                (Step::Write { path, tmp, .. }, Some((content, mode))) => {
                    self.check_deadline("writing the new contents")?;
                    let name = workdir::split(tmp).1;
                    match content {
                        NewContent::Bytes(b) => wd.write_temp(path, name, &mut &b[..], *mode, &mut made)?,
                        NewContent::Stored { id, .. } => {
                            let mut reader = self.open_object(*id, None)?;
                            wd.write_temp(path, name, &mut reader, *mode, &mut made)?
                        }
                        // Written and synced by the caller: given the file's mode through
                        // its descriptor (never a path a swap could redirect), and moved
                        // beside its target.
                        NewContent::Staged { from, seen, .. } => {
                            let (file, meta) = wd
                                .open_file(from)?
                                .ok_or_else(|| Error::not_found("an upload's staged content is gone"))?;
                            let now = {
                                use std::os::unix::fs::MetadataExt;
                                (meta.ino(), meta.size(), meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()))
                            };
                            if now != *seen {
                                return Err(Error::new(
                                    ErrorKind::Conflict,
                                    "an upload's staged content was changed by someone else before it was put in place: upload it again",
                                ));
                            }
                            rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(*mode & 0o777)).map_err(
                                |e| Error::with_source(ErrorKind::Io, "cannot set an upload's mode", std::io::Error::from(e)),
                            )?;
                            drop(file);
                            wd.rename(from, tmp, true, &mut made)?
                        }
                    }
                    failpoint(&format!("{}:temp-written", plan.tool));
                    Ok(())
                }
                _ => Ok(()),
            })
        });
        if let Err(e) = staged {
            self.discard_staged(wd, plan, &made);
            self.drop_plan(wd, plan)?;
            return Err(e);
        }
        Ok(made)
    }

    /// Removes the journal row of a plan that was refused and undone. With syncs deferred (a
    /// bulk plan), the undo is made durable first: the row must outlive anything a power cut
    /// could still take back, or nothing would settle it.
    fn drop_plan(&self, wd: &WorkDir, plan: &Plan) -> Result<()> {
        if wd.syncs_deferred() {
            wd.sync_all()?;
        }
        self.close_unrecorded(plan)
    }

    /// Closes `plan` with no record (dropped before its apply, or found recorded already):
    /// its journal row first, in a write that publishes nothing, so that neither a fence nor
    /// the store can leave journaled a plan the caller was told did not happen (recovery would
    /// roll it forward); then its roots, if it logged any, in a write of their own, unfenced
    /// (letting go is never unsafe). Roots that could not be let go of are logged and kept
    /// until a collection drops them as abandoned.
    pub(super) fn close_unrecorded(&self, plan: &Plan) -> Result<()> {
        self.manifest.write(|tx| manifest::journal::remove_entry(tx, &plan.id))?;
        if self.manifest.is_replica() {
            if let Err(e) = self.manifest.write_unfenced(|tx| manifest::journal::drop_roots(tx, plan.id.as_str())) {
                tracing::warn!(plan = %plan.id, error = %e, "a closed change's roots were not let go of: kept until a collection drops them a week after it began");
            }
        }
        Ok(())
    }

    /// Step 3, apply, one step after another; a refused step undoes the ones before it and the plan fails.
    fn apply_all(&self, wd: &WorkDir, plan: &Plan, made: &[Vec<u8>]) -> Result<()> {
        for i in 0..plan.steps.len() {
            if let Err(e) = apply(wd, &plan.steps[i]) {
                let undone = (0..i).rev().try_for_each(|j| self.roll_back(wd, &plan.steps[j]));
                self.discard_staged(wd, plan, made);
                match undone {
                    // The caller records the refusal, as for any refused call.
                    Ok(()) => self.drop_plan(wd, plan)?,
                    // The row stays, and recovery settles the tree on the next open.
                    Err(u) => {
                        tracing::error!(plan = %plan.id, error = %u, "a refused change could not be undone; recovery settles it at the next open")
                    }
                }
                return Err(e);
            }
            failpoint(&format!("{}:step:{i}", plan.tool));
        }
        Ok(())
    }

    /// Stores what `reader` yields as a file content: over 1 MiB it is cut into chunks with a
    /// chunk list, as snapshots store big files, and held in memory a chunk at a time; up to
    /// that, one object, stored as a delta against `base` (an earlier version of the same
    /// path: its id and bytes) where that is worth it. Each object commits in a transaction of
    /// its own without an fsync (see `execute`); an object already stored is not stored again.
    pub(crate) fn store_stream(
        &self,
        reader: &mut dyn std::io::Read,
        base: Option<(&ObjectId, &[u8])>,
    ) -> Result<StoredContent> {
        use sha2::Digest;
        let (level, chunking) = (self.config.zstd_level, self.config.chunking);
        let limit = manifest::loose::WHOLE_LIMIT;
        let mut head = Vec::with_capacity(limit.min(64 << 10));
        std::io::Read::take(&mut *reader, limit as u64 + 1)
            .read_to_end(&mut head)
            .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot read a file to store it: {e}"), e))?;
        if head.len() <= limit {
            let id = ObjectId::of(&head);
            self.store_version(&id, &head, base, level)?;
            return Ok(StoredContent { sha256: sha2::Sha256::digest(&head).into(), id, whole: Some(head) });
        }
        let (mut sha, mut whole) = (sha2::Sha256::new(), blake3::Hasher::new());
        let mut chunks = Vec::new();
        chunking.for_each_chunk(std::io::Read::chain(&head[..], reader), |offset, data| {
            self.check_deadline("storing a file")?;
            sha.update(data);
            whole.update(data);
            let id = ObjectId::of(data);
            self.manifest.write_relaxed(|tx| manifest::loose::insert(tx, &id, data, level))?;
            chunks.push((offset, id));
            Ok(())
        })?;
        let id = ObjectId(*whole.finalize().as_bytes());
        self.manifest.write_relaxed(|tx| manifest::objects::insert_chunk_list(tx, &id, &chunks))?;
        Ok(StoredContent { sha256: sha.finalize().into(), id, whole: None })
    }

    /// Stores one whole object `raw` (id `id`): as a delta against `base` when one is given
    /// and the delta is worth it, else whole.
    fn store_version(&self, id: &ObjectId, raw: &[u8], base: Option<(&ObjectId, &[u8])>, level: i32) -> Result<()> {
        let delta = base.and_then(|(base_id, base_raw)| self.delta_or_whole(id, raw, base_id, base_raw));
        let fresh = Fresh { id: *id, raw, delta };
        self.manifest.write_relaxed(|tx| insert_fresh(tx, &fresh, level))
    }

    /// Removes staged temporaries and the directories staging created (if still empty).
    fn discard_staged(&self, wd: &WorkDir, plan: &Plan, made: &[Vec<u8>]) {
        // A temporary that was never written is not there; anything else left is reported.
        for s in &plan.steps {
            if let Step::Write { tmp, staged, .. } = s {
                for t in std::iter::once(tmp).chain(staged) {
                    if let Err(e) = wd.remove(t) {
                        if e.kind() != ErrorKind::NotFound {
                            tracing::warn!(plan = %plan.id, path = %path::display(t), error = %e, "a staged temporary could not be removed");
                        }
                    }
                }
            }
        }
        for dir in made.iter().rev() {
            if let Err(e) = wd.rmdir(dir) {
                tracing::debug!(plan = %plan.id, path = %path::display(dir), error = %e, "a directory staging made is kept");
            }
        }
    }

    /// Reverses one step that happened, from the stored pre-images; refuses (`stale_file`)
    /// when the path no longer holds what the step left there.
    pub(super) fn roll_back(&self, wd: &WorkDir, s: &Step) -> Result<()> {
        let mut made = Vec::new();
        match s {
            Step::Write { path, tmp, before: Some(_), after, before_object, mode, .. } => {
                verify(wd, path, Some(after))?;
                let obj =
                    before_object.as_deref().ok_or_else(|| Error::corrupt("a journaled write lost its pre-image"))?;
                let mut reader = self.open_object(ObjectId::from_hex(obj)?, None)?;
                wd.remove(tmp)?;
                wd.write_temp(path, workdir::split(tmp).1, &mut reader, *mode, &mut made)?;
                wd.rename(tmp, path, false, &mut made)
            }
            Step::Write { path, after, .. } => {
                verify(wd, path, Some(after))?;
                wd.remove(path)
            }
            Step::Remove { path, grave, .. } => wd.rename(grave, path, true, &mut made),
            Step::Move { from, to, .. } => wd.rename(to, from, true, &mut made),
            Step::Mkdir { path, .. } => wd.rmdir(path),
            Step::Symlink { path, .. } => match wd.stat(path)? {
                Some(m) if m.kind == Kind::Symlink => wd.remove(path),
                _ => Ok(()),
            },
        }
    }

    /// Step 5: the new contents `fresh` and the records of a plan whose steps all happened, in
    /// one transaction. A recovered plan's records name only the contents the store holds.
    pub(super) fn finish(&self, plan: &Plan, recovered: bool, fresh: &[Fresh<'_>]) -> Result<Done> {
        let mut done = Done { plan: plan.id.clone(), written: Vec::new(), trashed: Vec::new(), audit_seqs: Vec::new() };
        let now = now_ns();
        let mut records = Vec::with_capacity(plan.steps.len());
        for (i, s) in plan.steps.iter().enumerate() {
            records.push(step_record(plan, i, s, now, recovered, &mut done)?);
        }
        let level = self.config.zstd_level;
        done.audit_seqs = self.manifest.write_relaxed(|tx| {
            for f in fresh {
                insert_fresh(tx, f, level)?;
            }
            let mut seqs = Vec::with_capacity(records.len());
            for (rec, s) in records.iter().zip(&plan.steps) {
                let unstored = match rec.after_object {
                    Some(id) if recovered => !manifest::loose::content_stored(tx, &id)?,
                    _ => false,
                };
                let seq = if unstored {
                    let mut rec = rec.clone();
                    rec.after_object = None;
                    manifest::audit::append(tx, &rec)?
                } else {
                    manifest::audit::append(tx, rec)?
                };
                if let Step::Remove { trash, .. } = s {
                    let mut t = (**trash).clone();
                    t.audit_seq = Some(seq);
                    manifest::trash::insert(tx, &t)?;
                }
                seqs.push(seq);
            }
            if let Some(restored) = plan.details.get("restoredTrashId") {
                let id = restored.as_str().map(TrashId::parse).transpose()?.ok_or_else(|| {
                    Error::corrupt(format!(
                        "plan {} names a restored trash item that is not an id: {restored}",
                        plan.id
                    ))
                })?;
                manifest::trash::mark_restored(tx, &id, now)?;
            }
            manifest::journal::remove(tx, &plan.id)?;
            Ok(seqs)
        })?;
        // Watchers seeing this plan's renames name the records they became.
        let created = plan.steps.iter().map(|s| matches!(s, Step::Write { before: None, .. }));
        let steps = done.audit_seqs.iter().zip(created).enumerate();
        crate::ops::notices::publish(
            plan.id.as_str(),
            steps.map(|(i, (&seq, created))| (i, crate::ops::notices::Published { seq, created })),
        );
        self.checkpoint_if_due();
        Ok(done)
    }
}

/// Whether content `id` can still be read from the store, condemned or not: the object, or
/// every chunk of its chunk list, has a row.
fn stored_whole(conn: &rusqlite::Connection, id: &ObjectId) -> Result<bool> {
    let chunks = manifest::objects::chunk_list(conn, id)?;
    let parts: Vec<ObjectId> = if chunks.is_empty() { vec![*id] } else { chunks.into_iter().map(|(_, c)| c).collect() };
    for p in &parts {
        if !manifest::loose::contains(conn, p)? && manifest::objects::locate(conn, p)?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Stores `f` in `tx`: as its delta when the base still takes it, else whole.
fn insert_fresh(tx: &rusqlite::Transaction<'_>, f: &Fresh<'_>, level: i32) -> Result<()> {
    if let Some((delta, base_depth)) = &f.delta {
        if manifest::loose::insert_delta(tx, &f.id, f.raw.len() as u64, delta, *base_depth)? {
            return Ok(());
        }
    }
    manifest::loose::insert(tx, &f.id, f.raw, level)
}

/// How many times an applied change's record is secured and written again after a refusal
/// (so at most one more write than this).
const FINISH_TRIES: u32 = 3;

/// Plans of more steps than this are synced as a whole (see `execute`).
const BULK_STEPS: usize = 16;

/// A write's new content and mode, by step (`None` for the other steps).
type Staged = Option<(NewContent, u32)>;

/// Turns the drafts into the plan to journal: each step, with hashes and object ids; the new
/// contents to stage; and what must be stored first (new contents held in memory, pre-images
/// read from the tree), each content once.
fn draft_plan(wd: &WorkDir, ctx: Ctx<'_>, drafts: Vec<Draft>) -> Result<(Plan, Vec<Staged>, Vec<ToStore>)> {
    let id = crate::base::random::new_plan_id()?;
    let mut plan = Plan {
        id: id.clone(),
        tool: ctx.tool.to_string(),
        actor: ctx.actor.to_string(),
        workspace: ctx.workspace.to_string(),
        session: ctx.session.cloned(),
        root: wd.root().to_path_buf(),
        created_ns: now_ns(),
        steps: Vec::with_capacity(drafts.len()),
        details: ctx.details,
        new_dirs: Vec::new(),
    };
    let mut contents: Vec<Staged> = Vec::with_capacity(drafts.len());
    let mut store: Vec<ToStore> = Vec::new();
    for (i, d) in drafts.into_iter().enumerate() {
        let (step, content, before_path) = draft_step(&id, i, d, &mut store);
        plan.steps.push(step);
        // A content is stored once: a file moved and then rewritten has one pre-image, taken
        // from where it was.
        if let Some((p, sha)) = before_path {
            if !store.iter().any(|s| matches!(s, ToStore::Tree(_, h) if *h == sha)) {
                store.push(ToStore::Tree(p, sha));
            }
        }
        contents.push(content);
    }
    plan.new_dirs = missing_parents(wd, &plan.steps);
    Ok((plan, contents, store))
}

/// The parents of the writes' targets that do not exist, shallowest first, each once.
fn missing_parents(wd: &WorkDir, steps: &[Step]) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut missing = Vec::new();
    for s in steps {
        let Step::Write { path, .. } = s else { continue };
        let mut parents = Vec::new();
        let mut at = workdir::split(path).0;
        // Upward until a directory known or found to exist: a restored tree of thousands of
        // files costs a lookup per directory, not per file.
        while !at.is_empty() && seen.insert(at.to_vec()) {
            // Only a directory known missing counts: anything else is left to staging to judge.
            if !matches!(wd.stat(at), Ok(None)) {
                break;
            }
            parents.push(at.to_vec());
            at = workdir::split(at).0;
        }
        missing.extend(parents.into_iter().rev());
    }
    missing.sort_by_key(|d| d.iter().filter(|&&b| b == b'/').count());
    missing
}

/// One draft as a step of plan `id` (its `i`th), its content to stage, and the path and sha256
/// of the pre-image it needs stored.
fn draft_step(id: &PlanId, i: usize, d: Draft, store: &mut Vec<ToStore>) -> (Step, Staged, Option<(Vec<u8>, Sha256)>) {
    match d {
        Draft::Write { path, content, mode, before } => {
            let (after_sha, after_id) = content.hashes();
            if let NewContent::Bytes(_) = content {
                store.push(ToStore::Bytes(i));
            }
            let staged = match &content {
                NewContent::Staged { from, .. } => Some(from.clone()),
                _ => None,
            };
            let step = Step::Write {
                tmp: beside(&path, &tmp_name(id, i)),
                before: before.as_ref().map(|c| hex_sha(&c.sha256)),
                after: hex_sha(&after_sha),
                before_object: before.as_ref().map(|c| c.content.to_hex()),
                after_object: after_id.map(|id| id.to_hex()),
                mode,
                path: path.clone(),
                staged,
            };
            (step, Some((content, mode)), before.map(|c| (path, c.sha256)))
        }
        Draft::Remove { path, before, trash, members } => {
            // A directory's files were found by the builder; they are stored as members.
            store.extend(members.into_iter().map(|(p, sha)| ToStore::Tree(p, sha)));
            let grave = beside(&path, &grave_name(id, i));
            let before_sha = before.as_ref().map(|c| hex_sha(&c.sha256));
            let pre = before.map(|c| (path.clone(), c.sha256));
            (Step::Remove { path, grave, before: before_sha, trash }, None, pre)
        }
        Draft::Move { from, to, before } => {
            let sha = before.as_ref().map(|c| hex_sha(&c.sha256));
            let obj = before.as_ref().map(|c| c.content.to_hex());
            let pre = before.map(|c| (from.clone(), c.sha256));
            (Step::Move { from, to, sha256: sha, object: obj }, None, pre)
        }
        Draft::Mkdir { path, mode } => (Step::Mkdir { path, mode }, None, None),
        Draft::Symlink { path, target } => (Step::Symlink { path, target }, None, None),
    }
}

/// The audit record of step `i` of `plan`, done at `now`; notes what it wrote or trashed in
/// `done`.
fn step_record(plan: &Plan, i: usize, s: &Step, now: i64, recovered: bool, done: &mut Done) -> Result<AuditRecord> {
    let mut rec = base_record(plan, now);
    let mut details = json!({"plan": plan.id, "step": i});
    match s {
        Step::Write { path, before, after, before_object, after_object, .. } => {
            rec.path = Some(path.clone());
            rec.before_sha256 = before.as_deref().map(|h| plan_sha(plan, h)).transpose()?;
            rec.after_sha256 = Some(plan_sha(plan, after)?);
            rec.before_object = before_object.as_deref().map(|h| plan_object(plan, h)).transpose()?;
            rec.after_object = after_object.as_deref().map(|h| plan_object(plan, h)).transpose()?;
            details["change"] = json!(if before.is_some() { "write" } else { "create" });
            done.written.push((path.clone(), after.clone()));
        }
        Step::Remove { path, before, trash, .. } => {
            rec.path = Some(path.clone());
            rec.before_sha256 = before.as_deref().map(|h| plan_sha(plan, h)).transpose()?;
            rec.before_object = trash.object;
            details["change"] = json!("delete");
            details["trashId"] = json!(trash.id);
            details["kind"] = json!(trash.kind);
            done.trashed.push((path.clone(), trash.id.clone()));
        }
        Step::Move { from, to, sha256, object } => {
            rec.path = Some(from.clone());
            rec.dest_path = Some(to.clone());
            rec.before_sha256 = sha256.as_deref().map(|h| plan_sha(plan, h)).transpose()?;
            rec.after_sha256 = rec.before_sha256;
            rec.before_object = object.as_deref().map(|h| plan_object(plan, h)).transpose()?;
            details["change"] = json!("move");
        }
        Step::Mkdir { path, .. } => {
            rec.path = Some(path.clone());
            details["change"] = json!("mkdir");
        }
        Step::Symlink { path, target } => {
            rec.path = Some(path.clone());
            details["change"] = json!("symlink");
            details["target"] = json!(path::display(target));
        }
    }
    if recovered {
        details["recovered"] = json!(true);
    }
    if let (Some(extra), Some(d)) = (plan.details.as_object(), details.as_object_mut()) {
        d.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    rec.details = details;
    Ok(rec)
}
