//! Recovery: settling, when a repository is opened, every plan a crash interrupted, so each
//! tree is fully old or fully new and the audit log says which.

use std::collections::HashMap;

use serde_json::json;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::base::time::now_ns;
use crate::fs::lock::Locked;
use crate::fs::workdir::{self, Kind, WorkDir};
use crate::manifest;
use crate::object::ObjectId;
use crate::repo::Repo;

use super::apply::{apply, apply_check_remove, bury};
use super::plan::{base_record, hex_sha, Plan, Step};

impl Repo {
    /// Settles every mutation a crash interrupted; run when a repository is opened. A plan whose
    /// workspace lock is held belongs to a live writer and is left to it. Otherwise, if every
    /// step is either done or still possible, the plan is rolled forward; if any step finds its
    /// path changed by someone else, the steps that happened are rolled back from the stored
    /// pre-images, so the tree is fully old or fully new, and the audit log says which. A plan
    /// that cannot be settled now (an I/O error) stays for the next open: opening never fails
    /// on recovery. Returns how many plans were settled.
    pub(crate) fn recover_journal(&self) -> Result<usize> {
        let pending = manifest::journal::pending(self.manifest.conn())?;
        let mut settled = 0;
        for (id, encoded) in &pending {
            let plan = match serde_json::from_str::<Plan>(encoded) {
                Ok(plan) => plan,
                Err(e) => {
                    // Kept, not dropped: `trove check` and the next open see it again.
                    tracing::error!(plan = %id, error = %e, "a journal plan does not decode; left in place");
                    continue;
                }
            };
            let lock = match Locked::try_acquire(&self.locks_dir(), &plan.root) {
                Ok(Some(l)) => Some(l),
                Ok(None) => {
                    tracing::debug!(plan = %id, "workspace locked by a live writer; plan left to it");
                    continue;
                }
                // The workspace is gone: nothing on disk to settle, only the record to write.
                Err(e) if e.kind() == ErrorKind::NotFound => None,
                Err(e) => {
                    tracing::warn!(plan = %id, root = %plan.root.display(), error = %e, "cannot lock the workspace; plan left for the next open");
                    continue;
                }
            };
            // It may have finished between the listing and the lock.
            let still = manifest::journal::pending(self.manifest.conn())?.iter().any(|(p, _)| p == id);
            if !still {
                continue;
            }
            match self.settle(lock.as_ref().map(|l| &l.wd), &plan) {
                Ok(()) => {
                    tracing::info!(plan = %id, tool = %plan.tool, "settled an interrupted change");
                    settled += 1;
                }
                Err(e) => {
                    tracing::warn!(plan = %id, error = %e, "cannot settle an interrupted change now; left for the next open")
                }
            }
        }
        Ok(settled)
    }

    fn settle(&self, wd: Option<&WorkDir>, plan: &Plan) -> Result<()> {
        // In a bucket, a write is in the log once its segment is, before its local commit: a
        // host killed between the two applies the plan's records when it opens, and its
        // journal row (this host's alone) still says the plan is open. Settled already.
        if self.manifest.is_replica() {
            let session = plan.session.as_ref().map(|s| s.as_str());
            let conn = self.manifest.conn();
            if manifest::audit::plan_recorded(conn, plan.id.as_str(), &plan.tool, session, plan.created_ns)? {
                tracing::info!(plan = %plan.id, "an interrupted change was recorded in the log already");
                return self.close_unrecorded(plan);
            }
        }
        let Some(wd) = wd else {
            return self.abandon(plan, "not_found", "the workspace directory is gone", &[]);
        };
        // Steps are judged in order: a step still to do sees the tree as the pending steps
        // before it will leave it (a write after a move finds the moved file).
        let mut predicted: HashMap<Vec<u8>, Option<String>> = HashMap::new();
        let mut states = Vec::with_capacity(plan.steps.len());
        for s in &plan.steps {
            let mut st = state(wd, s, &predicted)?;
            // A write whose content is not in the store can only go on from its temporary:
            // gone or torn (the crash came before staging ended, or someone removed it), the
            // plan rolls back.
            if st == State::Pending && self.staged_content(wd, s)?.is_none() {
                st = State::Unstaged;
            }
            if st == State::Pending {
                match s {
                    Step::Write { path, after, .. } => {
                        predicted.insert(path.clone(), Some(after.clone()));
                    }
                    Step::Remove { path, .. } => {
                        predicted.insert(path.clone(), None);
                    }
                    Step::Move { from, to, sha256, .. } => {
                        predicted.insert(from.clone(), None);
                        predicted.insert(to.clone(), sha256.clone());
                    }
                    Step::Mkdir { .. } | Step::Symlink { .. } => {}
                }
            }
            states.push(st);
        }
        let paths_in = |state: State| -> Vec<String> {
            let steps = plan.steps.iter().zip(&states).filter(|(_, st)| **st == state);
            steps.map(|(s, _)| path::display(s.path()).into_owned()).collect()
        };
        let (conflicts, unstaged) = (paths_in(State::Conflict), paths_in(State::Unstaged));
        if conflicts.is_empty() && unstaged.is_empty() {
            // A temporary recovery goes on from was found whole but may never have been synced
            // (a bulk plan syncs once after staging, and the crash can come first): synced now,
            // before a rename makes it the file and the record says so.
            if states.contains(&State::Pending) {
                wd.sync_all()?;
            }
            for (s, st) in plan.steps.iter().zip(&states) {
                if *st == State::Pending {
                    self.redo(wd, s)?;
                }
            }
            if let Err(e) = bury(wd, plan) {
                tracing::warn!(plan = %plan.id, error = %e, "a deleted path's grave could not be removed; left beside it");
            }
            self.store_written(wd, plan);
            self.finish(plan, true, &[]).map(|_| ())
        } else {
            for (s, st) in plan.steps.iter().zip(&states).rev() {
                if *st == State::Done {
                    self.roll_back(wd, s)?;
                }
            }
            for s in &plan.steps {
                if let Step::Write { tmp, staged, .. } = s {
                    wd.remove(tmp)?;
                    if let Some(from) = staged {
                        wd.remove(from)?;
                    }
                }
            }
            // Deepest first; one someone else filled since is theirs and stays.
            for dir in plan.new_dirs.iter().rev() {
                if let Err(e) = wd.rmdir(dir) {
                    tracing::debug!(plan = %plan.id, path = %path::display(dir), error = %e, "a directory staging made is kept");
                }
            }
            if conflicts.is_empty() {
                self.abandon(
                    plan,
                    "io",
                    "interrupted before its new contents were staged beside their targets; nothing was changed",
                    &unstaged,
                )
            } else {
                self.abandon(
                    plan,
                    "conflict",
                    "changed by someone else before the interrupted change finished",
                    &conflicts,
                )
            }
        }
    }

    /// Closes a plan that was rolled back (or had nothing left to act on) with one record.
    fn abandon(&self, plan: &Plan, outcome: &str, why: &str, paths: &[String]) -> Result<()> {
        let mut rec = base_record(plan, now_ns());
        rec.outcome = outcome.to_string();
        rec.details = json!({"plan": plan.id, "recovered": true, "rolledBack": true, "message": why, "paths": paths});
        self.manifest.write(|tx| {
            manifest::audit::append(tx, &rec)?;
            manifest::journal::remove(tx, &plan.id)
        })
    }

    /// Does one pending step during recovery; a write whose content is stored is staged again
    /// from the store, since a temporary the crash left may be torn; one whose content is not
    /// goes on from its temporary, which `staged_content` found whole.
    fn redo(&self, wd: &WorkDir, s: &Step) -> Result<()> {
        if let Step::Write { path, tmp, mode, .. } = s {
            match self.staged_content(wd, s)? {
                Some(Staging::Stored(id)) => {
                    wd.remove(tmp)?;
                    let mut reader = self.open_object(id, None)?;
                    wd.write_temp(path, workdir::split(tmp).1, &mut reader, *mode, &mut Vec::new())?;
                }
                Some(Staging::Placed) => {}
                Some(Staging::Waiting(from)) => wd.rename(&from, tmp, false, &mut Vec::new())?,
                None => {
                    return Err(Error::corrupt(format!(
                        "{}: a journaled write lost its staged content",
                        path::display(path)
                    )))
                }
            }
        }
        apply(wd, s)
    }

    /// Where a write's new content is to be had: in the store, beside its target, or where
    /// its caller wrote it (an upload); `None` if nowhere. Steps other than writes need none.
    fn staged_content(&self, wd: &WorkDir, s: &Step) -> Result<Option<Staging>> {
        let Step::Write { tmp, after, staged, after_object, .. } = s else { return Ok(Some(Staging::Placed)) };
        if let Some(hex) = after_object {
            let id = ObjectId::from_hex(hex)?;
            if manifest::loose::content_stored(self.manifest.conn(), &id)? {
                return Ok(Some(Staging::Stored(id)));
            }
        }
        if sha_of(wd, tmp)?.as_deref() == Some(after.as_str()) {
            return Ok(Some(Staging::Placed));
        }
        match staged {
            Some(from) if sha_of(wd, from)?.as_deref() == Some(after.as_str()) => {
                Ok(Some(Staging::Waiting(from.clone())))
            }
            _ => Ok(None),
        }
    }

    /// Stores the new contents of a settled plan's writes that the crash kept from the store
    /// (`finish` stores them with the records), read back from the tree, where every write of
    /// the plan now stands. One that is not there as written is logged and left out: the
    /// plan's record then names no content for it.
    fn store_written(&self, wd: &WorkDir, plan: &Plan) {
        for s in &plan.steps {
            let Step::Write { path, after, after_object: Some(hex), .. } = s else { continue };
            let stored = ObjectId::from_hex(hex)
                .and_then(|id| manifest::loose::content_stored(self.manifest.conn(), &id))
                .and_then(|stored| {
                    if stored {
                        return Ok(true);
                    }
                    if sha_of(wd, path)?.as_deref() != Some(after.as_str()) {
                        return Ok(false);
                    }
                    let Some((mut file, _)) = wd.open_file(path)? else { return Ok(false) };
                    Ok(hex_sha(&self.store_stream(&mut file, None)?.sha256) == *after)
                });
            match stored {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(plan = %plan.id, path = %path::display(path), "a recovered write's content changed after it: its record names none")
                }
                Err(e) => {
                    tracing::warn!(plan = %plan.id, path = %path::display(path), error = %e, "a recovered write's content could not be stored: its record names none")
                }
            }
        }
    }
}

/// Where a pending write's content is.
enum Staging {
    /// In the store: staged again from there.
    Stored(ObjectId),
    /// In its temporary beside the target, whole.
    Placed,
    /// Where its caller wrote it (an upload), whole.
    Waiting(Vec<u8>),
}

/// Where a journaled step stands after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Done,
    Pending,
    /// The path holds neither what the step found nor what it left: someone else's change.
    Conflict,
    /// A write still to do whose new content is nowhere whole: not in the store, and its
    /// temporary missing or torn.
    Unstaged,
}

fn sha_of(wd: &WorkDir, path: &[u8]) -> Result<Option<String>> {
    Ok(wd.current(path)?.map(|c| hex_sha(&c.sha256)))
}

fn state(wd: &WorkDir, s: &Step, predicted: &HashMap<Vec<u8>, Option<String>>) -> Result<State> {
    Ok(match s {
        Step::Write { path, before, after, .. } => {
            let now = match predicted.get(path) {
                Some(p) => p.clone(),
                None => match wd.current(path) {
                    Ok(c) => c.map(|c| hex_sha(&c.sha256)),
                    Err(_) => return Ok(State::Conflict),
                },
            };
            if now.as_deref() == Some(after.as_str()) {
                State::Done
            } else if now == *before {
                State::Pending
            } else {
                State::Conflict
            }
        }
        Step::Remove { path, grave, before, trash } => {
            if wd.stat(grave)?.is_some() {
                State::Done
            } else if wd.stat(path)?.is_none() {
                // Removed and buried: bury runs only once every step is done.
                State::Done
            } else if apply_check_remove(wd, path, before.as_deref(), trash).is_ok() {
                State::Pending
            } else {
                State::Conflict
            }
        }
        Step::Move { from, to, sha256, .. } => {
            let (f, t) = (wd.stat(from)?, wd.stat(to)?);
            match (f, t) {
                (None, Some(_)) => State::Done,
                (Some(_), None) if sha256.is_none() || sha_of(wd, from)? == *sha256 => State::Pending,
                _ => State::Conflict,
            }
        }
        Step::Mkdir { path, mode } => match wd.stat(path)? {
            // Staging may have made the directory before the step gave it its mode.
            Some(m) if m.kind == Kind::Dir && mode.is_some_and(|w| m.mode & 0o777 != (w | 0o700) & 0o777) => {
                State::Pending
            }
            Some(m) if m.kind == Kind::Dir => State::Done,
            Some(_) => State::Conflict,
            None => State::Pending,
        },
        Step::Symlink { path, .. } => match wd.stat(path)? {
            Some(m) if m.kind == Kind::Symlink => State::Done,
            Some(_) => State::Conflict,
            None => State::Pending,
        },
    })
}
