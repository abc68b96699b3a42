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

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::workdir::{self, Kind, WorkDir};
use crate::audit::AuditRecord;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest;
use crate::object::ObjectId;
use crate::path;
use crate::repo::{now_ns, Repo};
use crate::trash::TrashItem;
use crate::walk;

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
    pub id: String,
    pub tool: String,
    pub actor: String,
    pub workspace: String,
    pub session: Option<String>,
    pub root: PathBuf,
    pub created_ns: i64,
    pub steps: Vec<Step>,
    /// Facts for the audit records' details (the tool's own, e.g. the restored trash id).
    #[serde(default)]
    pub details: serde_json::Value,
}

/// A step being drafted: new contents are still in memory, pre-images beside them.
pub enum Draft {
    Write { path: Vec<u8>, content: Vec<u8>, mode: u32, before: Option<workdir::Current> },
    Remove { path: Vec<u8>, before: Option<workdir::Current>, trash: Box<TrashItem>, members: Vec<Vec<u8>> },
    Move { from: Vec<u8>, to: Vec<u8>, before: Option<workdir::Current> },
    Mkdir { path: Vec<u8> },
    Symlink { path: Vec<u8>, target: Vec<u8> },
}

/// The outcome of a plan: each write's new sha256, each removal's trash id.
#[derive(Debug, Default)]
pub struct Done {
    pub plan: String,
    pub written: Vec<(Vec<u8>, String)>,
    pub trashed: Vec<(Vec<u8>, String)>,
    pub audit_seqs: Vec<i64>,
}

pub fn hex_sha(s: &crate::object::Sha256) -> String {
    hex::encode(s)
}

fn unhex32(h: &str) -> Option<[u8; 32]> {
    hex::decode(h).ok().and_then(|v| v.try_into().ok())
}

/// Kills the process at a named point when `TROVE_FAILPOINT` names it: how the crash tests
/// stop a mutation between two exact steps. Unset, it costs one cached lookup.
pub fn failpoint(name: &str) {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if POINT.get_or_init(|| std::env::var("TROVE_FAILPOINT").ok()).as_deref() == Some(name) {
        // A crash, not an exit: nothing is flushed, no destructor runs, as with kill -9.
        std::process::abort();
    }
}

fn stale(path: &[u8], current: Option<&str>) -> Error {
    let shown = path::display(path);
    let msg = match current {
        Some(_) => format!(
            "'{shown}' changed since you read it: re-read the file to get its current sha256 and re-apply your edit"
        ),
        None => format!("'{shown}' no longer exists: re-read the directory, then create the file if you still need it"),
    };
    Error::new(ErrorKind::StaleFile, msg)
        .with_detail("path", shown.as_ref())
        .with_detail("currentSha256", current.map(str::to_string))
        .with_detail("suggestedAction", "Re-read the file to obtain the current sha256 and re-apply your edit.")
}

/// Checks that `path` holds what `before` says (`None`: nothing), right now.
fn verify(wd: &WorkDir, path: &[u8], before: Option<&str>) -> Result<()> {
    let now = wd.current(path);
    match (before, now) {
        (Some(want), Ok(Some(cur))) if hex_sha(&cur.sha256) == want => Ok(()),
        (Some(_), Ok(Some(cur))) => Err(stale(path, Some(&hex_sha(&cur.sha256)))),
        (Some(_), Ok(None)) => Err(stale(path, None)),
        (None, Ok(None)) => Ok(()),
        (None, Ok(Some(_))) | (None, Err(_)) => Err(already_exists(path)),
        (Some(_), Err(e)) => Err(e),
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

fn tmp_name(plan: &str, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.tmp").into_bytes()
}

fn grave_name(plan: &str, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.del").into_bytes()
}

/// `name` beside `path`.
fn beside(path: &[u8], name: &[u8]) -> Vec<u8> {
    walk::join_rel(workdir::split(path).0, name)
}

pub fn new_plan_id() -> Result<String> {
    let mut bytes = [0u8; 6];
    crate::session::fill_random(&mut bytes)?;
    Ok(format!("op_{}", hex::encode(bytes)))
}

/// The context every step of a plan shares.
pub struct Ctx<'a> {
    pub tool: &'a str,
    pub actor: &'a str,
    pub workspace: &'a str,
    pub session: Option<&'a str>,
    pub details: serde_json::Value,
}

impl Repo {
    /// Carries out `drafts` on the tree in `wd` as one journaled plan.
    pub fn execute(&self, wd: &WorkDir, ctx: Ctx<'_>, drafts: Vec<Draft>) -> Result<Done> {
        let id = new_plan_id()?;
        let mut plan = Plan {
            id: id.clone(),
            tool: ctx.tool.to_string(),
            actor: ctx.actor.to_string(),
            workspace: ctx.workspace.to_string(),
            session: ctx.session.map(str::to_string),
            root: wd.root().to_path_buf(),
            created_ns: now_ns(),
            steps: Vec::with_capacity(drafts.len()),
            details: ctx.details,
        };
        // New contents (to stage) and pre-images (to undo with) by step; every one of them is
        // stored as an object with the journal row.
        let mut contents: Vec<Option<(Vec<u8>, u32)>> = Vec::with_capacity(drafts.len());
        let mut pre: Vec<Option<Vec<u8>>> = Vec::with_capacity(drafts.len());
        let mut store: Vec<Vec<u8>> = Vec::new();
        for (i, d) in drafts.into_iter().enumerate() {
            let (step, content, before_bytes) = match d {
                Draft::Write { path, content, mode, before } => {
                    let after = crate::tools::read::sha256_hex(&content);
                    let (b, obj, bytes) = match before {
                        Some(cur) => {
                            (Some(hex_sha(&cur.sha256)), Some(ObjectId::of(&cur.bytes).to_hex()), Some(cur.bytes))
                        }
                        None => (None, None, None),
                    };
                    let step = Step::Write {
                        tmp: beside(&path, &tmp_name(&id, i)),
                        path,
                        before: b,
                        after,
                        before_object: obj,
                        after_object: Some(ObjectId::of(&content).to_hex()),
                        mode,
                    };
                    (step, Some((content, mode)), bytes)
                }
                Draft::Remove { path, before, trash, members } => {
                    let before_sha = before.as_ref().map(|c| hex_sha(&c.sha256));
                    // A directory's files were read by the builder; their bytes come as members.
                    store.extend(members);
                    let grave = beside(&path, &grave_name(&id, i));
                    (Step::Remove { path, grave, before: before_sha, trash }, None, before.map(|c| c.bytes))
                }
                Draft::Move { from, to, before } => {
                    let sha = before.as_ref().map(|c| hex_sha(&c.sha256));
                    let obj = before.as_ref().map(|c| ObjectId::of(&c.bytes).to_hex());
                    (Step::Move { from, to, sha256: sha, object: obj }, None, before.map(|c| c.bytes))
                }
                Draft::Mkdir { path } => (Step::Mkdir { path }, None, None),
                Draft::Symlink { path, target } => (Step::Symlink { path, target }, None, None),
            };
            plan.steps.push(step);
            if let Some((c, _)) = &content {
                store.push(c.clone());
            }
            if let Some(b) = &before_bytes {
                store.push(b.clone());
            }
            contents.push(content);
            pre.push(before_bytes);
        }
        failpoint(&format!("{}:drafted", plan.tool));
        // 1. Journal: the plan and every object it needs, before the tree is touched.
        let encoded = serde_json::to_string(&plan).map_err(|e| Error::internal(format!("encoding a plan: {e}")))?;
        let level = self.config.zstd_level;
        let chunking = self.config.chunking;
        self.manifest.write(|tx| {
            for bytes in &store {
                manifest::loose::store(tx, bytes, level, &chunking)?;
            }
            manifest::journal::insert(tx, &plan.id, plan.created_ns, &encoded)
        })?;
        drop(store);
        failpoint(&format!("{}:journaled", plan.tool));
        // 2. Stage.
        let mut made = Vec::new();
        let staged = plan.steps.iter().zip(&contents).try_for_each(|(s, c)| match (s, c) {
            (Step::Write { path, tmp, .. }, Some((bytes, mode))) => {
                wd.write_temp(path, workdir::split(tmp).1, bytes, *mode, &mut made)?;
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
                self.undo(wd, &plan, i, &pre);
                self.discard_staged(wd, &plan, &made);
                // The caller records the refusal, as for any refused call.
                self.manifest.write(|tx| manifest::journal::remove(tx, &plan.id))?;
                return Err(e);
            }
            failpoint(&format!("{}:step:{i}", plan.tool));
        }
        // 4. Bury, 5. finish.
        bury(wd, &plan)?;
        failpoint(&format!("{}:buried", plan.tool));
        self.finish(&plan, false)
    }

    /// Removes staged temporaries and the directories staging created.
    fn discard_staged(&self, wd: &WorkDir, plan: &Plan, made: &[Vec<u8>]) {
        for s in &plan.steps {
            if let Step::Write { tmp, .. } = s {
                let _ = wd.remove(tmp);
            }
        }
        // Deepest first; a directory something else was put in meanwhile stays.
        for dir in made.iter().rev() {
            if wd.stat(dir).ok().flatten().is_some_and(|m| m.kind == Kind::Dir) {
                let mut inside = Vec::new();
                if wd.walk(dir, &mut inside).is_ok() && inside.is_empty() {
                    let _ = wd.remove(dir);
                }
            }
        }
    }

    /// Reverses steps `0..upto` after step `upto` failed.
    fn undo(&self, wd: &WorkDir, plan: &Plan, upto: usize, pre: &[Option<Vec<u8>>]) {
        for i in (0..upto).rev() {
            let mut made = Vec::new();
            let _ = match &plan.steps[i] {
                Step::Write { path, tmp, before: Some(_), .. } => {
                    let mode = wd.stat(path).ok().flatten().map_or(0o644, |m| m.mode);
                    let bytes = pre[i].as_deref().unwrap_or_default();
                    wd.write_temp(path, workdir::split(tmp).1, bytes, mode, &mut made)
                        .and_then(|_| wd.rename(tmp, path, false, &mut made))
                }
                Step::Write { path, .. } | Step::Mkdir { path } | Step::Symlink { path, .. } => wd.remove(path),
                Step::Remove { path, grave, .. } => wd.rename(grave, path, true, &mut made),
                Step::Move { from, to, .. } => wd.rename(to, from, true, &mut made),
            };
        }
    }

    /// Step 5: the records of a plan whose steps all happened, in one transaction.
    fn finish(&self, plan: &Plan, recovered: bool) -> Result<Done> {
        let mut done = Done { plan: plan.id.clone(), ..Done::default() };
        let now = now_ns();
        let mut records = Vec::with_capacity(plan.steps.len());
        for (i, s) in plan.steps.iter().enumerate() {
            let mut rec = base_record(plan, now);
            let mut details = json!({"plan": plan.id, "step": i});
            match s {
                Step::Write { path, before, after, before_object, after_object, .. } => {
                    rec.path = Some(path.clone());
                    rec.before_sha256 = before.as_deref().and_then(unhex32);
                    rec.after_sha256 = unhex32(after);
                    rec.before_object = before_object.as_deref().and_then(|h| ObjectId::from_hex(h).ok());
                    rec.after_object = after_object.as_deref().and_then(|h| ObjectId::from_hex(h).ok());
                    details["change"] = json!(if before.is_some() { "write" } else { "create" });
                    done.written.push((path.clone(), after.clone()));
                }
                Step::Remove { path, before, trash, .. } => {
                    rec.path = Some(path.clone());
                    rec.before_sha256 = before.as_deref().and_then(unhex32);
                    rec.before_object = trash.object.as_deref().and_then(|h| ObjectId::from_hex(h).ok());
                    details["change"] = json!("delete");
                    details["trashId"] = json!(trash.id);
                    details["kind"] = json!(trash.kind);
                    done.trashed.push((path.clone(), trash.id.clone()));
                }
                Step::Move { from, to, sha256, object } => {
                    rec.path = Some(from.clone());
                    rec.dest_path = Some(to.clone());
                    rec.before_sha256 = sha256.as_deref().and_then(unhex32);
                    rec.after_sha256 = rec.before_sha256;
                    rec.before_object = object.as_deref().and_then(|h| ObjectId::from_hex(h).ok());
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
            if let Some(restored) = plan.details.get("restoredTrashId").and_then(|v| v.as_str()) {
                manifest::trash::mark_restored(tx, restored, now)?;
            }
            manifest::journal::remove(tx, &plan.id)?;
            Ok(seqs)
        })?;
        Ok(done)
    }

    /// Rolls forward every mutation a crash interrupted; run when a repository is opened.
    /// Returns how many there were.
    pub fn recover_journal(&self) -> Result<usize> {
        let pending = manifest::journal::pending(self.manifest.conn())?;
        for (id, encoded) in &pending {
            let plan: Plan = serde_json::from_str(encoded)
                .map_err(|e| Error::corrupt(format!("journal entry {id} does not parse: {e}")))?;
            match WorkDir::open(&plan.root) {
                Ok(wd) => {
                    for s in &plan.steps {
                        // A step that cannot be redone (the file changed meanwhile) is left:
                        // recovery must not clobber what someone else wrote.
                        let _ = redo(self, &wd, s);
                    }
                    bury(&wd, &plan)?;
                }
                // The workspace is gone: nothing to roll forward, only the records to keep.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            self.finish(&plan, true)?;
        }
        Ok(pending.len())
    }
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
        Step::Remove { path, grave, before, .. } => {
            if before.is_some() {
                verify(wd, path, before.as_deref())?;
            } else if wd.stat(path)?.is_none() {
                return Err(stale(path, None));
            }
            wd.rename(path, grave, true, &mut made)
        }
        Step::Move { from, to, sha256, .. } => {
            match sha256 {
                Some(_) => verify(wd, from, sha256.as_deref())?,
                None if wd.stat(from)?.is_none() => return Err(stale(from, None)),
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

/// Recovery for one step: done already, or done now if its precondition still holds. A
/// write is staged again from its stored content: a temporary a crash left may be torn.
fn redo(repo: &Repo, wd: &WorkDir, s: &Step) -> Result<()> {
    match s {
        Step::Write { path, tmp, before, after, after_object, mode, .. } => {
            wd.remove(tmp)?;
            let now = wd.current(path).ok().flatten().map(|c| hex_sha(&c.sha256));
            if now.as_deref() == Some(after.as_str()) || now.as_deref() != before.as_deref() {
                // Done already; or changed by someone else since, which recovery must not clobber.
                return Ok(());
            }
            let obj = after_object.as_deref().ok_or_else(|| Error::corrupt("a journaled write lost its content"))?;
            let bytes = repo.content_bytes(obj)?;
            wd.write_temp(path, workdir::split(tmp).1, &bytes, *mode, &mut Vec::new())?;
            let r = apply(wd, s);
            if r.is_err() {
                wd.remove(tmp)?;
            }
            r
        }
        Step::Remove { path, grave, .. } => {
            if wd.stat(grave)?.is_some() || wd.stat(path)?.is_none() {
                return Ok(());
            }
            apply(wd, s)
        }
        Step::Move { from, to, .. } => {
            if wd.stat(to)?.is_some() && wd.stat(from)?.is_none() {
                return Ok(());
            }
            apply(wd, s)
        }
        Step::Mkdir { path } | Step::Symlink { path, .. } => {
            if wd.stat(path)?.is_some() {
                return Ok(());
            }
            apply(wd, s)
        }
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
