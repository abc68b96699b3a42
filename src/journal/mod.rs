//! Mutations of the live tree as journaled plans: every file tool that changes files builds a
//! [`Plan`] of steps, and [`Repo::execute`] carries it out so that it lands whole or not at all,
//! even across a crash (ARCHITECTURE.md, "Tool journal").
//!
//! The order of work:
//! 1. journal: pre-images and new contents are stored as objects and the plan is committed to
//!    the manifest: from here on the mutation is decided, and recovery rolls it forward;
//! 2. stage: every new content goes to a temporary file beside its target, fsynced;
//! 3. apply: each step checks the file's sha256 immediately before its rename, then renames;
//!    a deleted path is renamed to a grave name beside it. A step that finds the file changed
//!    by someone outside trove undoes the steps before it and the plan fails `stale_file`;
//! 4. bury: the graves are removed;
//! 5. finish: one transaction appends an audit record per step, records trash items, and
//!    deletes the journal row. It may commit without an fsync: if it is lost, the journal row
//!    is still there and recovery writes the same records.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::failpoint::failpoint;
use crate::base::id::{PlanId, SessionId, TrashId};
use crate::base::path;
use crate::base::time::now_ns;
use crate::fs::lock::Locked;
use crate::fs::walk;
use crate::fs::workdir::{self, Kind, WorkDir};
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::model::trash::TrashItem;
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};
use crate::repo::Repo;

/// One change to the tree. Paths are workspace-relative; hashes and object ids are hex.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Step {
    /// Puts the staged `tmp` at `path`; `before` is the sha256 the file must still have, or
    /// `None` when nothing may be there.
    Write {
        path: Vec<u8>,
        tmp: Vec<u8>,
        before: Option<String>,
        after: String,
        before_object: Option<String>,
        /// The new content, so recovery can stage it again.
        after_object: Option<String>,
        mode: u32,
    },
    /// Moves the file (with sha256 `before`) or directory at `path` into the trash.
    Remove { path: Vec<u8>, grave: Vec<u8>, before: Option<String>, trash: Box<TrashItem> },
    /// Renames `from` to `to`, never over anything; `sha256` is the file's, if it is one.
    Move { from: Vec<u8>, to: Vec<u8>, sha256: Option<String>, object: Option<String> },
    /// Creates an empty directory (a restored directory's).
    Mkdir { path: Vec<u8> },
    /// Creates a symlink (a restored directory's).
    Symlink { path: Vec<u8>, target: Vec<u8> },
}

/// A decided mutation: what the journal row holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub id: PlanId,
    pub tool: String,
    pub actor: String,
    pub workspace: String,
    pub session: Option<SessionId>,
    pub root: PathBuf,
    pub created_ns: i64,
    pub steps: Vec<Step>,
    /// Facts for the audit records' details (the tool's own, e.g. the restored trash id).
    #[serde(default)]
    pub details: serde_json::Value,
}

/// A step being drafted. Pre-images are described (`Current`), not held: their bytes are
/// streamed from the tree into the store when the plan is journaled.
pub enum Draft {
    Write {
        path: Vec<u8>,
        content: NewContent,
        mode: u32,
        before: Option<workdir::Current>,
    },
    /// `members` are the files of a deleted directory (workspace-relative, with the sha256 they
    /// were found with), stored with it.
    Remove {
        path: Vec<u8>,
        before: Option<workdir::Current>,
        trash: Box<TrashItem>,
        members: Vec<(Vec<u8>, Sha256)>,
    },
    Move {
        from: Vec<u8>,
        to: Vec<u8>,
        before: Option<workdir::Current>,
    },
    Mkdir {
        path: Vec<u8>,
    },
    Symlink {
        path: Vec<u8>,
        target: Vec<u8>,
    },
}

/// What a write puts in place.
pub enum NewContent {
    /// Bytes the caller holds (a request body, an edited text): bounded by what a request or
    /// an in-memory edit may carry.
    Bytes(Vec<u8>),
    /// A content already in the store (a trash item, a pre-image), staged by streaming it.
    Stored { id: ObjectId, sha256: Sha256 },
}

impl NewContent {
    fn hashes(&self) -> (Sha256, ObjectId) {
        match self {
            NewContent::Bytes(b) => (<sha2::Sha256 as sha2::Digest>::digest(b).into(), ObjectId::of(b)),
            NewContent::Stored { id, sha256 } => (*sha256, *id),
        }
    }
}

/// Something the journal must store before the plan commits.
enum ToStore {
    /// Step `i`'s new content, held in memory.
    Bytes(usize),
    /// The file at this path, which must still have this sha256.
    Tree(Vec<u8>, Sha256),
}

/// The outcome of a plan: each write's new sha256, each removal's trash id.
#[derive(Debug)]
pub struct Done {
    pub plan: PlanId,
    pub written: Vec<(Vec<u8>, String)>,
    pub trashed: Vec<(Vec<u8>, TrashId)>,
    pub audit_seqs: Vec<i64>,
}

pub fn hex_sha(s: &crate::object::Sha256) -> String {
    hex::encode(s)
}

/// A SHA-256 a plan records in hex; one that does not decode is a damaged plan, said so.
fn plan_sha(plan: &Plan, h: &str) -> Result<Sha256> {
    Sha256::from_hex(h).map_err(|e| {
        Error::with_source(ErrorKind::Corrupt, format!("journal plan {} records '{h}' as a SHA-256", plan.id), e)
    })
}

/// An object id a plan records in hex; one that does not decode is a damaged plan, said so.
fn plan_object(plan: &Plan, h: &str) -> Result<ObjectId> {
    ObjectId::from_hex(h)
        .map_err(|e| Error::corrupt(format!("journal plan {} records '{h}' as an object id: {}", plan.id, e.message())))
}

/// The stale-file refusal for `path`, whose sha256 is now `current` (`None`: nothing there),
/// where the caller expected `expected`: one message per situation, and the facts an agent
/// needs to retry (`currentSha256`, `suggestedAction`).
pub fn stale(path: &[u8], current: Option<String>, expected: Option<&str>) -> Error {
    let shown = path::display(path);
    let msg = match (expected, &current) {
        (None, Some(_)) => format!(
            "'{shown}' exists and no expectedSha256 was given: read the file first and pass its sha256 as expectedSha256"
        ),
        (_, None) => format!("'{shown}' does not exist (any more): re-read the directory, and use create_file to make it"),
        (Some(_), Some(_)) => format!(
            "'{shown}' has changed since you read it (sha256 differs): re-read the file to get its current sha256 and re-apply your edit"
        ),
    };
    Error::new(ErrorKind::StaleFile, msg)
        .with_detail("path", shown.as_ref())
        .with_detail("currentSha256", current)
        .with_detail("expectedSha256", expected.map(str::to_string))
        .with_detail("suggestedAction", "Re-read the file to obtain the current sha256 and re-apply your edit.")
}

/// Checks that `path` holds what `before` says (`None`: nothing), right now.
fn verify(wd: &WorkDir, path: &[u8], before: Option<&str>) -> Result<()> {
    let now = wd.current(path);
    match (before, now) {
        (Some(want), Ok(Some(cur))) if hex_sha(&cur.sha256) == want => Ok(()),
        (Some(want), Ok(Some(cur))) => Err(stale(path, Some(hex_sha(&cur.sha256)), Some(want))),
        (Some(want), Ok(None)) => Err(stale(path, None, Some(want))),
        (None, Ok(None)) => Ok(()),
        (None, Ok(Some(_))) => Err(already_exists(path)),
        (None, Err(e)) if e.kind() == ErrorKind::IsDirectory => Err(already_exists(path)),
        (_, Err(e)) => Err(e),
    }
}

pub fn already_exists(path: &[u8]) -> Error {
    let shown = path::display(path);
    Error::new(
        ErrorKind::AlreadyExists,
        format!("'{shown}' already exists: read it and use write_file or edit_file, or choose another path"),
    )
    .with_detail("path", shown.as_ref())
}

fn tmp_name(plan: &PlanId, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.tmp").into_bytes()
}

fn grave_name(plan: &PlanId, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.del").into_bytes()
}

/// `name` beside `path`.
fn beside(path: &[u8], name: &[u8]) -> Vec<u8> {
    walk::join_rel(workdir::split(path).0, name)
}

/// The context every step of a plan shares.
pub struct Ctx<'a> {
    pub tool: &'a str,
    pub actor: &'a str,
    pub workspace: &'a str,
    pub session: Option<&'a SessionId>,
    pub details: serde_json::Value,
}

impl Repo {
    /// Carries out `drafts` on the tree in `wd` as one journaled plan.
    pub fn execute(&self, wd: &WorkDir, ctx: Ctx<'_>, drafts: Vec<Draft>) -> Result<Done> {
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
        };
        // New contents (to stage) by step; they and the pre-images are stored as objects
        // before the plan commits (undo and recovery read the pre-images back from there).
        let mut contents: Vec<Option<(NewContent, u32)>> = Vec::with_capacity(drafts.len());
        let mut store: Vec<ToStore> = Vec::new();
        for (i, d) in drafts.into_iter().enumerate() {
            let (step, content, before_path) = match d {
                Draft::Write { path, content, mode, before } => {
                    let (after_sha, after_id) = content.hashes();
                    if let NewContent::Bytes(_) = content {
                        store.push(ToStore::Bytes(i));
                    }
                    let step = Step::Write {
                        tmp: beside(&path, &tmp_name(&id, i)),
                        before: before.as_ref().map(|c| hex_sha(&c.sha256)),
                        after: hex_sha(&after_sha),
                        before_object: before.as_ref().map(|c| c.content.to_hex()),
                        after_object: Some(after_id.to_hex()),
                        mode,
                        path: path.clone(),
                    };
                    (step, Some((content, mode)), before.map(|c| (path, c.sha256)))
                }
                Draft::Remove { path, before, trash, members } => {
                    // A directory's files were found by the builder; they are stored as members.
                    store.extend(members.into_iter().map(|(p, sha)| ToStore::Tree(p, sha)));
                    let grave = beside(&path, &grave_name(&id, i));
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
                Draft::Mkdir { path } => (Step::Mkdir { path }, None, None),
                Draft::Symlink { path, target } => (Step::Symlink { path, target }, None, None),
            };
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
        failpoint(&format!("{}:drafted", plan.tool));
        // 1. Journal: every object the plan needs, then the plan, before the tree is touched.
        // Pre-images stream from the tree into the store in transactions of their own, so a
        // big file never holds the manifest's write lock for long; the plan's commit, which is
        // fsynced, makes them durable with it (the WAL is written in order).
        for item in &store {
            self.check_deadline("storing the files' previous contents")?;
            match item {
                ToStore::Bytes(i) => {
                    if let Some((NewContent::Bytes(b), _)) = &contents[*i] {
                        self.store_stream(&mut &b[..])?;
                    }
                }
                ToStore::Tree(p, sha) => {
                    let (mut file, _) = wd.open_file(p)?.ok_or_else(|| stale(p, None, Some(&hex_sha(sha))))?;
                    let stored = self.store_stream(&mut file)?;
                    if stored.0 != *sha {
                        return Err(stale(p, Some(hex_sha(&stored.0)), Some(&hex_sha(sha))));
                    }
                }
            }
        }
        let encoded = serde_json::to_string(&plan).map_err(|e| Error::internal(format!("encoding a plan: {e}")))?;
        self.check_deadline("journaling the change")?;
        self.manifest.write(|tx| manifest::journal::insert(tx, &plan.id, plan.created_ns, &encoded))?;
        failpoint(&format!("{}:journaled", plan.tool));
        // 2. Stage.
        let mut made = Vec::new();
        let staged = plan.steps.iter().zip(&contents).try_for_each(|(s, c)| match (s, c) {
            (Step::Write { path, tmp, .. }, Some((content, mode))) => {
                self.check_deadline("writing the new contents")?;
                match content {
                    NewContent::Bytes(b) => {
                        wd.write_temp(path, workdir::split(tmp).1, &mut &b[..], *mode, &mut made)?
                    }
                    NewContent::Stored { id, .. } => {
                        let mut reader = self.open_object(*id, None)?;
                        wd.write_temp(path, workdir::split(tmp).1, &mut reader, *mode, &mut made)?
                    }
                }
                failpoint(&format!("{}:temp-written", plan.tool));
                Ok(())
            }
            _ => Ok(()),
        });
        if let Err(e) = staged {
            self.discard_staged(wd, &plan, &made);
            self.manifest.write(|tx| manifest::journal::remove(tx, &plan.id))?;
            return Err(e);
        }
        failpoint(&format!("{}:staged", plan.tool));
        // 3. Apply.
        for i in 0..plan.steps.len() {
            if let Err(e) = apply(wd, &plan.steps[i]) {
                let undone = (0..i).rev().try_for_each(|j| self.roll_back(wd, &plan.steps[j]));
                self.discard_staged(wd, &plan, &made);
                if undone.is_ok() {
                    // The caller records the refusal, as for any refused call.
                    self.manifest.write(|tx| manifest::journal::remove(tx, &plan.id))?;
                }
                // Otherwise the row stays, and recovery settles the tree on the next open.
                return Err(e);
            }
            failpoint(&format!("{}:step:{i}", plan.tool));
        }
        // 4. Bury: every change has landed, so a grave that cannot be removed is only litter.
        let _ = bury(wd, &plan);
        failpoint(&format!("{}:buried", plan.tool));
        // 5. Finish.
        self.finish(&plan, false)
    }

    /// Stores what `reader` yields as a file content and returns its (sha256, content id,
    /// size): over 1 MiB it is cut into chunks with a chunk list, as snapshots store big files,
    /// and held in memory a chunk at a time. Each object commits in a transaction of its own
    /// without an fsync (see `execute`); an object already stored is not stored again.
    pub(crate) fn store_stream(&self, reader: &mut dyn std::io::Read) -> Result<(Sha256, ObjectId, u64)> {
        use sha2::Digest;
        let (level, chunking) = (self.config.zstd_level, self.config.chunking);
        let limit = manifest::loose::WHOLE_LIMIT;
        let mut head = Vec::with_capacity(limit.min(64 << 10));
        std::io::Read::take(&mut *reader, limit as u64 + 1)
            .read_to_end(&mut head)
            .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot read a file to store it: {e}"), e))?;
        if head.len() <= limit {
            let id = ObjectId::of(&head);
            self.manifest.write_relaxed(|tx| manifest::loose::insert(tx, &id, &head, level))?;
            return Ok((sha2::Sha256::digest(&head).into(), id, head.len() as u64));
        }
        let (mut sha, mut whole, mut size) = (sha2::Sha256::new(), blake3::Hasher::new(), 0u64);
        let mut chunks = Vec::new();
        chunking.for_each_chunk(std::io::Read::chain(&head[..], reader), |offset, data| {
            self.check_deadline("storing a file")?;
            sha.update(&data);
            whole.update(&data);
            size += data.len() as u64;
            let id = ObjectId::of(&data);
            self.manifest.write_relaxed(|tx| manifest::loose::insert(tx, &id, &data, level))?;
            chunks.push((offset, id));
            Ok(())
        })?;
        let id = ObjectId(*whole.finalize().as_bytes());
        self.manifest.write_relaxed(|tx| manifest::objects::insert_chunk_list(tx, &id, &chunks))?;
        Ok((sha.finalize().into(), id, size))
    }

    /// Removes staged temporaries and the directories staging created (if still empty).
    fn discard_staged(&self, wd: &WorkDir, plan: &Plan, made: &[Vec<u8>]) {
        for s in &plan.steps {
            if let Step::Write { tmp, .. } = s {
                let _ = wd.remove(tmp);
            }
        }
        for dir in made.iter().rev() {
            let _ = wd.rmdir(dir);
        }
    }

    /// Reverses one step that happened, from the stored pre-images; refuses (`stale_file`)
    /// when the path no longer holds what the step left there.
    fn roll_back(&self, wd: &WorkDir, s: &Step) -> Result<()> {
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
            Step::Mkdir { path } => wd.rmdir(path),
            Step::Symlink { path, .. } => match wd.stat(path)? {
                Some(m) if m.kind == Kind::Symlink => wd.remove(path),
                _ => Ok(()),
            },
        }
    }

    /// Step 5: the records of a plan whose steps all happened, in one transaction.
    fn finish(&self, plan: &Plan, recovered: bool) -> Result<Done> {
        let mut done = Done { plan: plan.id.clone(), written: Vec::new(), trashed: Vec::new(), audit_seqs: Vec::new() };
        let now = now_ns();
        let mut records = Vec::with_capacity(plan.steps.len());
        for (i, s) in plan.steps.iter().enumerate() {
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
                Step::Mkdir { path } => {
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
            records.push(rec);
        }
        done.audit_seqs = self.manifest.write_relaxed(|tx| {
            let mut seqs = Vec::with_capacity(records.len());
            for (rec, s) in records.iter().zip(&plan.steps) {
                let seq = manifest::audit::append(tx, rec)?;
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
        Ok(done)
    }

    /// Settles every mutation a crash interrupted; run when a repository is opened. A plan whose
    /// workspace lock is held belongs to a live writer and is left to it. Otherwise, if every
    /// step is either done or still possible, the plan is rolled forward; if any step finds its
    /// path changed by someone else, the steps that happened are rolled back from the stored
    /// pre-images, so the tree is fully old or fully new, and the audit log says which. A plan
    /// that cannot be settled now (an I/O error) stays for the next open: opening never fails
    /// on recovery. Returns how many plans were settled.
    pub fn recover_journal(&self) -> Result<usize> {
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
        let Some(wd) = wd else {
            return self.abandon(plan, "not_found", "the workspace directory is gone", &[]);
        };
        // Steps are judged in order: a step still to do sees the tree as the pending steps
        // before it will leave it (a write after a move finds the moved file).
        let mut predicted: HashMap<Vec<u8>, Option<String>> = HashMap::new();
        let mut states = Vec::with_capacity(plan.steps.len());
        for s in &plan.steps {
            let st = state(wd, s, &predicted)?;
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
        let conflicts: Vec<String> = plan
            .steps
            .iter()
            .zip(&states)
            .filter(|(_, st)| **st == State::Conflict)
            .map(|(s, _)| path::display(s.path()).into_owned())
            .collect();
        if conflicts.is_empty() {
            for (s, st) in plan.steps.iter().zip(&states) {
                if *st == State::Pending {
                    self.redo(wd, s)?;
                }
            }
            let _ = bury(wd, plan);
            self.finish(plan, true).map(|_| ())
        } else {
            for (s, st) in plan.steps.iter().zip(&states).rev() {
                if *st == State::Done {
                    self.roll_back(wd, s)?;
                }
            }
            for s in &plan.steps {
                if let Step::Write { tmp, .. } = s {
                    wd.remove(tmp)?;
                }
            }
            self.abandon(plan, "conflict", "changed by someone else before the interrupted change finished", &conflicts)
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

    /// Does one pending step during recovery; a write is staged again from its stored content,
    /// since a temporary the crash left may be torn.
    fn redo(&self, wd: &WorkDir, s: &Step) -> Result<()> {
        if let Step::Write { path, tmp, after_object, mode, .. } = s {
            wd.remove(tmp)?;
            let obj = after_object.as_deref().ok_or_else(|| Error::corrupt("a journaled write lost its content"))?;
            let mut reader = self.open_object(ObjectId::from_hex(obj)?, None)?;
            wd.write_temp(path, workdir::split(tmp).1, &mut reader, *mode, &mut Vec::new())?;
        }
        apply(wd, s)
    }
}

/// Where a journaled step stands after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Done,
    Pending,
    /// The path holds neither what the step found nor what it left: someone else's change.
    Conflict,
}

impl Step {
    /// The path a step changes (its source, for a move).
    pub fn path(&self) -> &[u8] {
        match self {
            Step::Write { path, .. }
            | Step::Remove { path, .. }
            | Step::Mkdir { path }
            | Step::Symlink { path, .. } => path,
            Step::Move { from, .. } => from,
        }
    }
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
        Step::Mkdir { path } => match wd.stat(path)? {
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

/// What a removal checks before its rename: a file still has `before`; a directory still
/// holds exactly what was recorded in the trash (names, kinds, file hashes), so nothing
/// written into it since is thrown away unrecorded.
fn apply_check_remove(wd: &WorkDir, path: &[u8], before: Option<&str>, trash: &TrashItem) -> Result<()> {
    if before.is_some() {
        return verify(wd, path, before);
    }
    let mut walked = Vec::new();
    match wd.stat(path)? {
        Some(m) if m.kind == Kind::Dir => wd.walk(path, &mut walked)?,
        Some(_) => return Err(stale(path, None, None)),
        None => return Err(stale(path, None, None)),
    }
    let mut now = Vec::with_capacity(walked.len());
    for (child, m) in walked {
        let rel = child[path.len() + 1..].to_vec();
        let sha = match m.kind {
            Kind::File => wd.current(&child)?.map(|c| c.sha256),
            _ => None,
        };
        let kind = match m.kind {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink,
            Kind::Other => continue,
        };
        now.push((rel, kind, sha));
    }
    let recorded: Vec<_> = trash.entries.iter().map(|e| (e.rel.clone(), e.kind, e.sha256)).collect();
    if now != recorded {
        let shown = path::display(path);
        return Err(Error::new(
            ErrorKind::StaleFile,
            format!("directory '{shown}' changed while it was being deleted: list it again and retry"),
        )
        .with_detail("path", shown.as_ref()));
    }
    Ok(())
}

fn base_record(plan: &Plan, now: i64) -> AuditRecord {
    let mut rec = AuditRecord::ok(now, &plan.actor, &plan.tool);
    rec.workspace = Some(plan.workspace.clone());
    rec.session = plan.session.clone();
    rec
}

/// Step 3 for one step: check, then rename.
fn apply(wd: &WorkDir, s: &Step) -> Result<()> {
    let mut made = Vec::new();
    match s {
        Step::Write { path, tmp, before, .. } => {
            verify(wd, path, before.as_deref())?;
            wd.rename(tmp, path, before.is_none(), &mut made)
        }
        Step::Remove { path, grave, before, trash } => {
            apply_check_remove(wd, path, before.as_deref(), trash)?;
            wd.rename(path, grave, true, &mut made)
        }
        Step::Move { from, to, sha256, .. } => {
            match sha256 {
                Some(_) => verify(wd, from, sha256.as_deref())?,
                None if wd.stat(from)?.is_none() => return Err(stale(from, None, None)),
                None => {}
            }
            wd.rename(from, to, true, &mut made)
        }
        // Staging a restored directory's files already made it and its parents.
        Step::Mkdir { path } => match wd.stat(path)? {
            Some(m) if m.kind == Kind::Dir => Ok(()),
            Some(_) => Err(already_exists(path)),
            None => wd.mkdirs(path, &mut made),
        },
        Step::Symlink { path, target } => wd.symlink(path, target, &mut made).map_err(|e| match e.kind() {
            ErrorKind::AlreadyExists => already_exists(path),
            _ => e,
        }),
    }
}

/// Step 4: deletes what removals set aside.
fn bury(wd: &WorkDir, plan: &Plan) -> Result<()> {
    for s in &plan.steps {
        if let Step::Remove { grave, .. } = s {
            wd.remove(grave)?;
        }
    }
    Ok(())
}
