//! The tools that change files, and `revert`: each checks the stale-file protocol against the
//! file as it is now, drafts its steps, and hands them to the journal (`journal.rs`), which
//! checks again immediately before each rename.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::edit::{self, Edit};
use super::journal::{self, already_exists, hex_sha, Ctx, Done, Draft, NewContent};
use super::workdir::{Current, Kind, WorkDir};
use super::Caller;
use crate::error::{Error, ErrorKind, Result};
use crate::object::ObjectId;
use crate::path;
use crate::repo::{now_ns, Repo};
use crate::session::Session;
use crate::trash::{new_trash_id, TrashEntry, TrashItem};

/// The live tree of one workspace, held exclusively: every mutation through trove, in this
/// process or another, takes this lock first, so two writes to one path are serialized and
/// the second sees the first's result. A `flock` on a file per workspace directory: released
/// by the kernel when the process dies, so a crash never leaves it held.
pub struct Locked {
    pub wd: WorkDir,
    _lock: File,
}

impl Locked {
    /// Waits for the lock of the workspace at `live_dir`.
    pub fn acquire(repo: &Repo, live_dir: &Path) -> Result<Locked> {
        Locked::take(repo, live_dir, true)?.ok_or_else(|| Error::internal("a blocking lock returned without the lock"))
    }

    /// The lock if nobody holds it: how recovery tells a plan whose process died from one that
    /// is still running.
    pub fn try_acquire(repo: &Repo, live_dir: &Path) -> Result<Option<Locked>> {
        Locked::take(repo, live_dir, false)
    }

    fn take(repo: &Repo, live_dir: &Path, wait: bool) -> Result<Option<Locked>> {
        let wd = WorkDir::open(live_dir)?;
        let dir = match repo.root() {
            Some(r) => r.join("locks"),
            None => std::env::temp_dir().join("trove-locks"),
        };
        // Keyed on the directory itself, not its spelling (`ws`, `ws/`, a symlink to it).
        let (dev, ino) = wd.identity()?;
        let file_path = dir.join(format!("{dev:x}-{ino:x}.lock"));
        let open = || File::options().create(true).truncate(false).write(true).open(&file_path);
        let file = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
                open().map_err(|e| Error::io("open", &file_path, e))?
            }
            Err(e) => return Err(Error::io("open", &file_path, e)),
        };
        use rustix::fs::FlockOperation;
        // With a deadline, waiting is polling, so a request gives up in time instead of
        // queueing behind a long change (and its answer can say that nothing changed).
        let deadline = repo.deadline().filter(|_| wait);
        let op = if wait && deadline.is_none() {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::NonBlockingLockExclusive
        };
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&file, op) {
                Ok(()) => return Ok(Some(Locked { wd, _lock: file })),
                Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    if deadline.is_some_and(|d| std::time::Instant::now() + pause >= d) {
                        return Err(Error::timeout("waiting for another change to the workspace to finish", false));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(Error::io("lock", &file_path, e.into())),
            }
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateFile {
    pub path: String,
    pub content: String,
    pub encoding: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteFile {
    pub path: String,
    pub content: String,
    pub encoding: Option<String>,
    pub expected_sha256: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFile {
    pub path: String,
    pub expected_sha256: Option<String>,
    pub edits: Vec<Edit>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteFile {
    pub path: String,
    pub expected_sha256: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    #[default]
    Fail,
    Rename,
    Overwrite,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreFile {
    pub trash_id: Option<String>,
    pub path: Option<String>,
    pub to: Option<String>,
    #[serde(default)]
    pub on_conflict: OnConflict,
    /// The target's sha256, for `overwrite`.
    pub expected_sha256: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MoveFile {
    pub from: String,
    pub to: String,
    pub expected_sha256: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyPatch {
    pub patch: String,
    #[serde(default)]
    pub expected_sha256_by_path: BTreeMap<String, String>,
}

/// The largest text `edit_file` and `apply_patch` rewrite in memory (all files of one patch
/// together); bigger files are replaced whole with `write_file`.
pub const EDIT_LIMIT: u64 = 32 << 20;

/// A content in the store, from a trash row's hex object id and sha256.
fn stored(object: &str, sha256: Option<&str>) -> Result<NewContent> {
    let id = ObjectId::from_hex(object)?;
    let sha = sha256
        .and_then(|h| hex::decode(h).ok())
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .ok_or_else(|| Error::corrupt(format!("the trash row of content {object} has no valid sha256")))?;
    Ok(NewContent::Stored { id, sha256: sha })
}

/// The most one `delete_file` of a directory may take into the trash.
const DELETE_DIR_ENTRIES: usize = 20_000;
const DELETE_DIR_BYTES: u64 = 256 << 20;

/// A path a tool may write: normalized, inside the scope.
fn writable(c: &Caller<'_>, p: &str) -> Result<Vec<u8>> {
    let rel = path::normalize_nonempty(p.as_bytes())?;
    c.scope.check_write(&rel)?;
    Ok(rel)
}

fn decode(content: &str, encoding: Option<&str>) -> Result<Vec<u8>> {
    match encoding {
        None | Some("utf-8") | Some("utf8") => Ok(content.as_bytes().to_vec()),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(content)
            .map_err(|e| Error::invalid_argument(format!("content is not valid base64: {e}"))),
        Some(other) => Err(Error::invalid_argument(format!("encoding '{other}' is not one of: utf-8, base64"))),
    }
}

fn stale(rel: &[u8], cur: Option<&Current>, expected: Option<&str>) -> Error {
    journal::stale(rel, cur.map(|c| hex_sha(&c.sha256)), expected)
}

/// The stale-file protocol for a file that must exist: `expected` must be its sha256.
fn check_expected(rel: &[u8], cur: Option<Current>, expected: Option<&str>) -> Result<Current> {
    match (cur, expected) {
        (Some(c), Some(e)) if hex_sha(&c.sha256).eq_ignore_ascii_case(e) => Ok(c),
        (cur, e) => Err(stale(rel, cur.as_ref(), e)),
    }
}

fn ctx<'a>(c: &'a Caller<'a>, tool: &'a str, details: Value) -> Ctx<'a> {
    Ctx { tool, actor: c.actor, workspace: &c.session.workspace, session: Some(&c.session.id), details }
}

fn trash_file(c: &Caller<'_>, rel: &[u8], cur: &Current, reason: &str) -> Result<TrashItem> {
    Ok(TrashItem {
        id: new_trash_id()?,
        workspace: c.session.workspace.clone(),
        session: Some(c.session.id.clone()),
        path: rel.to_vec(),
        kind: "file".into(),
        size: cur.size,
        sha256: Some(hex_sha(&cur.sha256)),
        mode: cur.mode,
        object: Some(cur.content.to_hex()),
        deleted_by: c.actor.to_string(),
        deleted_ns: now_ns(),
        reason: reason.into(),
        audit_seq: None,
        restored_ns: None,
        entries: Vec::new(),
    })
}

/// Drafts moving whatever is at `rel` (file or directory) to the trash.
fn draft_remove(c: &Caller<'_>, wd: &WorkDir, rel: &[u8], expected: Option<&str>, reason: &str) -> Result<Draft> {
    let meta = wd.stat(rel)?.ok_or_else(|| {
        Error::not_found(format!("'{}' not found", path::display(rel))).with_detail("path", path::display(rel).as_ref())
    })?;
    match meta.kind {
        Kind::File => {
            let cur = wd.current(rel)?;
            let cur = match expected {
                Some(e) => check_expected(rel, cur, Some(e))?,
                None => cur.ok_or_else(|| Error::not_found(format!("'{}' not found", path::display(rel))))?,
            };
            let trash = trash_file(c, rel, &cur, reason)?;
            Ok(Draft::Remove { path: rel.to_vec(), before: Some(cur), trash: Box::new(trash), members: Vec::new() })
        }
        Kind::Dir => {
            if expected.is_some() {
                return Err(Error::invalid_argument(format!(
                    "'{}' is a directory: expectedSha256 applies to files only; leave it out",
                    path::display(rel)
                )));
            }
            let mut walked = Vec::new();
            wd.walk(rel, &mut walked)?;
            // Every file is read and stored in one transaction: bound what one call may take.
            let total: u64 = walked.iter().filter(|(_, m)| m.kind == Kind::File).map(|(_, m)| m.size).sum();
            if walked.len() > DELETE_DIR_ENTRIES || total > DELETE_DIR_BYTES {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!(
                        "directory '{}' holds {} entries and {total} bytes, over the {DELETE_DIR_ENTRIES}-entry / {DELETE_DIR_BYTES}-byte limit of one delete: delete its subdirectories one at a time",
                        path::display(rel),
                        walked.len()
                    ),
                ));
            }
            let mut entries = Vec::new();
            let mut members = Vec::new();
            let mut size = 0;
            for (child, m) in walked {
                let inner = child[rel.len() + 1..].to_vec();
                if !c.scope.can_write(&child) {
                    return Err(crate::scope::Scope::denied_path(&child));
                }
                let e = match m.kind {
                    Kind::File => {
                        let cur = wd.current(&child)?.ok_or_else(|| Error::not_found(path::display(&child)))?;
                        size += cur.size;
                        members.push((child.clone(), cur.sha256));
                        TrashEntry {
                            rel: inner,
                            kind: "file".into(),
                            size: cur.size,
                            sha256: Some(hex_sha(&cur.sha256)),
                            mode: cur.mode,
                            object: Some(cur.content.to_hex()),
                            target: None,
                        }
                    }
                    Kind::Dir => TrashEntry {
                        rel: inner,
                        kind: "dir".into(),
                        size: 0,
                        sha256: None,
                        mode: m.mode,
                        object: None,
                        target: None,
                    },
                    Kind::Symlink => TrashEntry {
                        rel: inner,
                        kind: "symlink".into(),
                        size: 0,
                        sha256: None,
                        mode: m.mode,
                        object: None,
                        target: Some(wd.read_link(&child)?),
                    },
                    Kind::Other => continue,
                };
                entries.push(e);
            }
            let trash = TrashItem {
                id: new_trash_id()?,
                workspace: c.session.workspace.clone(),
                session: Some(c.session.id.clone()),
                path: rel.to_vec(),
                kind: "dir".into(),
                size,
                sha256: None,
                mode: meta.mode,
                object: None,
                deleted_by: c.actor.to_string(),
                deleted_ns: now_ns(),
                reason: reason.into(),
                audit_seq: None,
                restored_ns: None,
                entries,
            };
            Ok(Draft::Remove { path: rel.to_vec(), before: None, trash: Box::new(trash), members })
        }
        Kind::Symlink | Kind::Other => Err(Error::invalid_argument(format!(
            "'{}' is a symlink or special file: the tools delete files and directories only",
            path::display(rel)
        ))),
    }
}

fn written(done: &Done, rel: &[u8]) -> Option<String> {
    done.written.iter().rev().find(|(p, _)| p == rel).map(|(_, s)| s.clone())
}

/// `a/b.txt` -> `a/b (restored).txt`, then `(restored 2)`, ... the first that is free.
fn free_name(wd: &WorkDir, rel: &[u8]) -> Result<Vec<u8>> {
    let (dir, name) = super::workdir::split(rel);
    let name = path::display(name).into_owned();
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (&name[..], ""),
    };
    for n in 1..1000 {
        let suffix = if n == 1 { " (restored)".to_string() } else { format!(" (restored {n})") };
        let candidate = crate::walk::join_rel(dir, format!("{stem}{suffix}{ext}").as_bytes());
        if wd.stat(&candidate)?.is_none() {
            return Ok(candidate);
        }
    }
    Err(already_exists(rel))
}

impl Repo {
    /// The file at `rel` whole, for an edit, if it still has `expected`; with the share of the
    /// memory budget its bytes take.
    fn read_to_edit(
        &self,
        wd: &WorkDir,
        rel: &[u8],
        expected: Option<&str>,
    ) -> Result<(Current, Vec<u8>, crate::budget::Permit)> {
        let size = wd.stat(rel)?.map_or(0, |m| m.size);
        let held = self.hold(2 * size.min(EDIT_LIMIT))?;
        let read = wd.read_whole(rel, EDIT_LIMIT)?;
        let (cur, bytes) = match read {
            Some((cur, bytes)) => (Some(cur), bytes),
            None => (None, Vec::new()),
        };
        Ok((check_expected(rel, cur, expected)?, bytes, held))
    }

    /// The bytes of a file content object (loose or packed, whole or chunked), verified.
    pub fn content_bytes(&self, hex_id: &str) -> Result<Vec<u8>> {
        let id = ObjectId::from_hex(hex_id)?;
        let chunks = crate::manifest::objects::chunk_list(self.manifest.conn(), &id)?;
        if chunks.is_empty() {
            return self.read_object(&id);
        }
        let mut out = Vec::new();
        for (_, c) in chunks {
            out.extend_from_slice(&self.read_object(&c)?);
        }
        if ObjectId::of(&out) != id {
            return Err(Error::corrupt(format!("the chunks of {id} do not add up to it; run `trove check`")));
        }
        Ok(out)
    }

    pub(crate) fn tool_create_file(&self, c: &Caller<'_>, l: &Locked, p: &CreateFile) -> Result<Value> {
        let rel = writable(c, &p.path)?;
        let content = decode(&p.content, p.encoding.as_deref())?;
        if l.wd.stat(&rel)?.is_some() {
            return Err(already_exists(&rel));
        }
        let size = content.len();
        let draft = Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None };
        let done = self.execute(&l.wd, ctx(c, "create_file", json!({})), vec![draft])?;
        Ok(json!({"path": path::display(&rel), "sha256": written(&done, &rel), "size": size,
                  "auditSeq": done.audit_seqs.first()}))
    }

    pub(crate) fn tool_write_file(&self, c: &Caller<'_>, l: &Locked, p: &WriteFile) -> Result<Value> {
        let rel = writable(c, &p.path)?;
        let content = decode(&p.content, p.encoding.as_deref())?;
        let size = content.len();
        let cur = l.wd.current(&rel)?;
        let draft = match (cur, p.expected_sha256.as_deref()) {
            // "" asserts there is nothing yet, as in apply_patch.
            (None, Some("")) => {
                Draft::Write { path: rel.clone(), content: NewContent::Bytes(content), mode: 0o644, before: None }
            }
            (Some(c), Some("")) => return Err(stale(&rel, Some(&c), Some(""))),
            (cur, expected) => {
                let cur = check_expected(&rel, cur, expected)?;
                Draft::Write {
                    path: rel.clone(),
                    content: NewContent::Bytes(content),
                    mode: cur.mode,
                    before: Some(cur),
                }
            }
        };
        let done = self.execute(&l.wd, ctx(c, "write_file", json!({})), vec![draft])?;
        Ok(json!({"path": path::display(&rel), "sha256": written(&done, &rel), "size": size,
                  "auditSeq": done.audit_seqs.first()}))
    }

    pub(crate) fn tool_edit_file(&self, c: &Caller<'_>, l: &Locked, p: &EditFile) -> Result<Value> {
        let rel = writable(c, &p.path)?;
        let (cur, bytes, _held) = self.read_to_edit(&l.wd, &rel, p.expected_sha256.as_deref())?;
        let shown = path::display(&rel).into_owned();
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            Error::new(ErrorKind::NotText, format!("'{shown}' is not UTF-8 text: replace it with write_file"))
        })?;
        let (new, replacements) = edit::apply(&shown, text, &p.edits)?;
        drop(bytes);
        let content = NewContent::Bytes(new.into_bytes());
        let draft = Draft::Write { path: rel.clone(), content, mode: cur.mode, before: Some(cur) };
        let done = self.execute(&l.wd, ctx(c, "edit_file", json!({})), vec![draft])?;
        Ok(json!({"path": shown, "sha256": written(&done, &rel), "replacements": replacements,
                  "auditSeq": done.audit_seqs.first()}))
    }

    pub(crate) fn tool_delete_file(&self, c: &Caller<'_>, l: &Locked, p: &DeleteFile) -> Result<Value> {
        let rel = writable(c, &p.path)?;
        let draft = draft_remove(c, &l.wd, &rel, p.expected_sha256.as_deref(), "delete_file")?;
        let (kind, size) = match &draft {
            Draft::Remove { trash, .. } => (trash.kind.clone(), trash.size),
            _ => (String::new(), 0),
        };
        let done = self.execute(&l.wd, ctx(c, "delete_file", json!({})), vec![draft])?;
        let trash_id = done.trashed.first().map(|(_, id)| id.clone());
        Ok(json!({"path": path::display(&rel), "trashId": trash_id, "kind": kind, "size": size,
                  "auditSeq": done.audit_seqs.first()}))
    }

    pub(crate) fn tool_move_file(&self, c: &Caller<'_>, l: &Locked, p: &MoveFile) -> Result<Value> {
        let from = writable(c, &p.from)?;
        let to = writable(c, &p.to)?;
        if to.starts_with(&from) && (to.len() == from.len() || to[from.len()] == b'/') {
            return Err(Error::invalid_argument(format!(
                "cannot move '{}' into itself ('{}')",
                path::display(&from),
                path::display(&to)
            )));
        }
        let meta = l.wd.stat(&from)?.ok_or_else(|| {
            Error::not_found(format!("'{}' not found", path::display(&from)))
                .with_detail("path", path::display(&from).as_ref())
        })?;
        if l.wd.stat(&to)?.is_some() {
            return Err(already_exists(&to));
        }
        let before = match meta.kind {
            Kind::File => {
                let cur = l.wd.current(&from)?;
                Some(match p.expected_sha256.as_deref() {
                    Some(e) => check_expected(&from, cur, Some(e))?,
                    None => cur.ok_or_else(|| Error::not_found(format!("'{}' not found", path::display(&from))))?,
                })
            }
            Kind::Dir if p.expected_sha256.is_some() => {
                return Err(Error::invalid_argument(
                    "expectedSha256 applies to files only; leave it out for a directory",
                ))
            }
            _ => None,
        };
        let sha = before.as_ref().map(|b| hex_sha(&b.sha256));
        let draft = Draft::Move { from: from.clone(), to: to.clone(), before };
        let done = self.execute(&l.wd, ctx(c, "move_file", json!({})), vec![draft])?;
        Ok(json!({"from": path::display(&from), "to": path::display(&to), "sha256": sha,
                  "auditSeq": done.audit_seqs.first()}))
    }

    pub(crate) fn tool_restore_file(&self, c: &Caller<'_>, l: &Locked, p: &RestoreFile) -> Result<Value> {
        let item = match (&p.trash_id, &p.path) {
            (Some(id), _) => {
                let item = self.trash_item(id)?;
                if item.workspace != c.session.workspace {
                    return Err(Error::not_found(format!("trash item '{id}' is not in this session's workspace")));
                }
                item
            }
            (None, Some(pth)) => {
                let rel = path::normalize_nonempty(pth.as_bytes())?;
                c.scope.check_read(&rel)?;
                self.trash(&c.session.workspace, Some(&rel))?
                    .into_iter()
                    .find(|t| t.restored_ns.is_none())
                    .map(|t| self.trash_item(&t.id))
                    .transpose()?
                    .ok_or_else(|| {
                        Error::not_found(format!("nothing deleted at '{}' is in the trash", path::display(&rel)))
                    })?
            }
            (None, None) => return Err(Error::invalid_argument("give trashId, or the path that was deleted")),
        };
        // Restoring elsewhere is a read of what was deleted: the session must be able to see it.
        c.scope.check_read(&item.path)?;
        let target = match &p.to {
            Some(to) => writable(c, to)?,
            None => {
                c.scope.check_write(&item.path)?;
                item.path.clone()
            }
        };
        let mut drafts = Vec::new();
        let mut target = target;
        if l.wd.stat(&target)?.is_some() {
            match p.on_conflict {
                OnConflict::Fail => return Err(already_exists(&target)),
                OnConflict::Rename => {
                    target = free_name(&l.wd, &target)?;
                    c.scope.check_write(&target)?;
                }
                OnConflict::Overwrite => {
                    if item.kind == "dir" {
                        return Err(Error::invalid_argument(
                            "onConflict overwrite restores files only; restore the directory with rename or to another path",
                        ));
                    }
                    let Some(expected) = p.expected_sha256.as_deref() else {
                        let cur = l.wd.current(&target)?;
                        return Err(stale(&target, cur.as_ref(), None));
                    };
                    drafts.push(draft_remove(c, &l.wd, &target, Some(expected), "restore_file")?);
                }
            }
        }
        if item.kind == "dir" {
            drafts.push(Draft::Mkdir { path: target.clone() });
            let mut members = Vec::new();
            for e in &item.entries {
                let rel = crate::walk::join_rel(&target, &e.rel);
                match (e.kind.as_str(), &e.object, &e.target) {
                    ("file", Some(obj), _) => {
                        let content = stored(obj, e.sha256.as_deref())?;
                        members.push(Draft::Write { path: rel, content, mode: e.mode, before: None });
                    }
                    ("dir", _, _) => drafts.push(Draft::Mkdir { path: rel }),
                    ("symlink", _, Some(t)) => members.push(Draft::Symlink { path: rel, target: t.clone() }),
                    _ => {}
                }
            }
            drafts.extend(members);
        } else {
            let obj = item
                .object
                .as_deref()
                .ok_or_else(|| Error::corrupt(format!("trash item {} has no content", item.id)))?;
            let content = stored(obj, item.sha256.as_deref())?;
            drafts.push(Draft::Write { path: target.clone(), content, mode: item.mode, before: None });
        }
        let done = self.execute(&l.wd, ctx(c, "restore_file", json!({"restoredTrashId": item.id})), drafts)?;
        Ok(json!({"path": path::display(&target), "trashId": item.id, "kind": item.kind,
                  "sha256": if item.kind == "file" { written(&done, &target) } else { None },
                  "replacedTrashId": done.trashed.first().map(|(_, id)| id.clone()),
                  "auditSeq": done.audit_seqs.last()}))
    }

    pub(crate) fn tool_apply_patch(&self, c: &Caller<'_>, l: &Locked, p: &ApplyPatch) -> Result<Value> {
        let patch = crate::patch::parse(&p.patch)?;
        let wd = &l.wd;
        // Every path the patch names, once: two operations on one path are ambiguous.
        let mut seen = BTreeSet::new();
        for op in &patch.ops {
            let mut names = vec![op.path().to_string()];
            if let crate::patch::FileOp::Update { move_to: Some(to), .. } = op {
                names.push(to.clone());
            }
            for n in names {
                let rel = writable(c, &n).map_err(|e| e.context(format!("patch line {}", op.line())))?;
                if !seen.insert(rel.clone()) {
                    return Err(Error::invalid_argument(format!(
                        "patch line {}: '{n}' appears in more than one operation of the patch; make one operation per file",
                        op.line()
                    )));
                }
            }
        }
        // The texts to update are held in memory (old and new): bound them, and draw on the
        // memory budget for them, before reading any.
        let mut total = 0u64;
        for op in &patch.ops {
            if let crate::patch::FileOp::Update { path: pth, .. } = op {
                total += wd.stat(&path::normalize_nonempty(pth.as_bytes())?)?.map_or(0, |m| m.size);
            }
        }
        if total > EDIT_LIMIT {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("the files this patch updates hold {total} bytes, over the {EDIT_LIMIT}-byte limit of one patch: split it"),
            ));
        }
        let _held = self.hold(2 * total)?;
        // The hash checked against the map is the one the journal checks again right before the
        // rename.
        let mut reads: BTreeMap<Vec<u8>, Option<Current>> = BTreeMap::new();
        for (pth, expected) in &p.expected_sha256_by_path {
            let rel = path::normalize_nonempty(pth.as_bytes())?;
            c.scope.check_read(&rel)?;
            let cur = wd.current(&rel)?;
            match (expected.as_str(), &cur) {
                ("", None) => {}
                ("", Some(c)) => return Err(stale(&rel, Some(c), Some(""))),
                (e, _) => {
                    reads.insert(rel.clone(), Some(check_expected(&rel, cur, Some(e))?));
                    continue;
                }
            }
            reads.insert(rel, cur);
        }
        let mut drafts = Vec::new();
        let mut report = Vec::new();
        for op in &patch.ops {
            match op {
                crate::patch::FileOp::Add { path: pth, contents, line } => {
                    let rel = path::normalize_nonempty(pth.as_bytes())?;
                    if wd.stat(&rel)?.is_some() {
                        return Err(already_exists(&rel).context(format!("patch line {line}: Add File")));
                    }
                    report.push((rel.clone(), "add", None::<Vec<u8>>));
                    drafts.push(Draft::Write {
                        path: rel,
                        content: NewContent::Bytes(contents.clone().into_bytes()),
                        mode: 0o644,
                        before: None,
                    });
                }
                crate::patch::FileOp::Delete { path: pth, line } => {
                    let rel = path::normalize_nonempty(pth.as_bytes())?;
                    match wd.stat(&rel)? {
                        Some(m) if m.kind == Kind::File => {}
                        Some(_) => {
                            return Err(Error::new(
                                ErrorKind::IsDirectory,
                                format!("patch line {line}: Delete File '{pth}' is not a regular file"),
                            ))
                        }
                        None => {
                            return Err(Error::not_found(format!(
                                "patch line {line}: Delete File '{pth}' does not exist"
                            ))
                            .with_detail("path", pth.as_str()))
                        }
                    }
                    report.push((rel.clone(), "delete", None));
                    let expected = reads.get(&rel).and_then(|r| r.as_ref()).map(|c| hex_sha(&c.sha256));
                    drafts.push(draft_remove(c, wd, &rel, expected.as_deref(), "apply_patch")?);
                }
                crate::patch::FileOp::Update { path: pth, move_to, chunks, line } => {
                    let rel = path::normalize_nonempty(pth.as_bytes())?;
                    let (cur, bytes) = match wd.read_whole(&rel, EDIT_LIMIT) {
                        Ok(Some(read)) => read,
                        Ok(None) => {
                            return Err(Error::not_found(format!(
                                "patch line {line}: Update File '{pth}' does not exist: use Add File to create it"
                            ))
                            .with_detail("path", pth.as_str()))
                        }
                        Err(e) => return Err(e.context(format!("patch line {line}"))),
                    };
                    // The file must still be the one checked against expectedSha256ByPath.
                    if let Some(Some(checked)) = reads.remove(&rel) {
                        if checked.sha256 != cur.sha256 {
                            return Err(stale(&rel, Some(&cur), Some(&hex_sha(&checked.sha256))));
                        }
                    }
                    let new = if chunks.is_empty() {
                        NewContent::Stored { id: cur.content, sha256: cur.sha256 }
                    } else {
                        NewContent::Bytes(crate::patch::apply_chunks(pth, &bytes, chunks)?)
                    };
                    drop(bytes);
                    match move_to {
                        Some(to) => {
                            let to_rel = path::normalize_nonempty(to.as_bytes())?;
                            if wd.stat(&to_rel)?.is_some() {
                                return Err(already_exists(&to_rel).context(format!("patch line {line}: Move to")));
                            }
                            report.push((rel.clone(), "move", Some(to_rel.clone())));
                            let moved = cur.clone();
                            drafts.push(Draft::Move { from: rel, to: to_rel.clone(), before: Some(cur) });
                            drafts.push(Draft::Write {
                                path: to_rel,
                                content: new,
                                mode: moved.mode,
                                before: Some(moved),
                            });
                        }
                        None => {
                            report.push((rel.clone(), "update", None));
                            drafts.push(Draft::Write { path: rel, content: new, mode: cur.mode, before: Some(cur) });
                        }
                    }
                }
            }
        }
        let done = self.execute(wd, ctx(c, "apply_patch", json!({})), drafts)?;
        let files: Vec<Value> = report
            .into_iter()
            .map(|(rel, op, to)| {
                let mut m = Map::new();
                m.insert("path".into(), path::display(&rel).into());
                m.insert("op".into(), op.into());
                match op {
                    "delete" => {
                        let id = done.trashed.iter().find(|(p, _)| *p == rel).map(|(_, id)| id.clone());
                        m.insert("trashId".into(), id.into());
                    }
                    _ => {
                        let at = to.clone().unwrap_or_else(|| rel.clone());
                        m.insert("sha256".into(), written(&done, &at).into());
                    }
                }
                if let Some(to) = to {
                    m.insert("movedTo".into(), path::display(&to).into());
                }
                Value::Object(m)
            })
            .collect();
        Ok(json!({"files": files, "plan": done.plan}))
    }

    /// Undoes the change audit record `seq` made, through the stale-file protocol: refused
    /// (`stale_file`) if the file changed since. The revert is itself a mutation, audited.
    pub fn revert(&self, seq: i64, actor: &str) -> Result<Value> {
        let rec = crate::manifest::audit::get(self.manifest.conn(), seq)?
            .ok_or_else(|| Error::not_found(format!("audit record {seq} not found: list them with `trove audit log`")))?
            .record;
        let change = rec.details.get("change").and_then(Value::as_str).unwrap_or("");
        if rec.outcome != "ok" || change.is_empty() {
            return Err(Error::invalid_argument(format!(
                "audit record {seq} ({} {}) is not a file change a revert can undo",
                rec.operation, rec.outcome
            )));
        }
        let sid =
            rec.session.clone().ok_or_else(|| Error::invalid_argument(format!("audit record {seq} has no session")))?;
        let s = self.session(&sid)?;
        let result = self.revert_record(&s, &rec, change, seq, actor);
        if let Err(e) = &result {
            let p = rec.path.as_deref().map(path::display);
            self.audit_refusal(&s, actor, "revert", p.as_deref(), e)?;
        }
        result
    }

    fn revert_record(
        &self,
        s: &Session,
        rec: &crate::audit::AuditRecord,
        change: &str,
        seq: i64,
        actor: &str,
    ) -> Result<Value> {
        let l = self.check_writable(s)?;
        let c = Caller { session: s, scope: s.scope()?, actor };
        let rel =
            rec.path.clone().ok_or_else(|| Error::invalid_argument(format!("audit record {seq} names no path")))?;
        let after = rec.after_sha256.map(hex::encode);
        let drafts = match change {
            "write" => {
                let cur = check_expected(&rel, l.wd.current(&rel)?, after.as_deref())?;
                let obj =
                    rec.before_object.ok_or_else(|| Error::corrupt(format!("audit record {seq} kept no pre-image")))?;
                let sha = rec
                    .before_sha256
                    .ok_or_else(|| Error::corrupt(format!("audit record {seq} lacks the old sha256")))?;
                let content = NewContent::Stored { id: obj, sha256: sha };
                vec![Draft::Write { path: rel.clone(), content, mode: cur.mode, before: Some(cur) }]
            }
            "create" | "mkdir" | "symlink" => vec![draft_remove(&c, &l.wd, &rel, after.as_deref(), "revert")?],
            "move" => {
                let to = rec
                    .dest_path
                    .clone()
                    .ok_or_else(|| Error::corrupt(format!("audit record {seq} lacks its destination")))?;
                if l.wd.stat(&rel)?.is_some() {
                    return Err(already_exists(&rel));
                }
                let before = match l.wd.stat(&to)? {
                    Some(m) if m.kind == Kind::File => Some(check_expected(&to, l.wd.current(&to)?, after.as_deref())?),
                    Some(_) => None,
                    None => return Err(stale(&to, None, after.as_deref())),
                };
                vec![Draft::Move { from: to, to: rel.clone(), before }]
            }
            "delete" => {
                let trash_id = rec.details.get("trashId").and_then(Value::as_str).unwrap_or("").to_string();
                drop(l);
                let call = RestoreFile {
                    trash_id: Some(trash_id),
                    path: None,
                    to: None,
                    on_conflict: OnConflict::Fail,
                    expected_sha256: None,
                };
                let l = self.check_writable(s)?;
                return self.tool_restore_file(&c, &l, &call);
            }
            other => {
                return Err(Error::invalid_argument(format!("audit record {seq}: a '{other}' cannot be reverted")))
            }
        };
        let done = self.execute(&l.wd, ctx(&c, "revert", json!({"reverts": seq})), drafts)?;
        Ok(json!({"reverted": seq, "path": path::display(&rel), "sha256": written(&done, &rel),
                  "trashId": done.trashed.first().map(|(_, id)| id.clone()), "auditSeq": done.audit_seqs.last()}))
    }
}
