//! The journal's data: a plan's steps as drafted by a tool and as committed to the manifest,
//! the outcome of a plan, and the names of the temporaries and graves it leaves beside files.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{PlanId, SessionId, TrashId};
use crate::fs::walk;
use crate::fs::workdir;
use crate::model::audit::AuditRecord;
use crate::model::scope::Scope;
use crate::model::trash::TrashItem;
use crate::object::{ObjectId, Sha256};

/// One change to the tree. Paths are workspace-relative; hashes and object ids are hex.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Step {
    /// Puts the staged `tmp` at `path`; `before` is the sha256 the file must still have, or
    /// `None` when nothing may be there.
    Write {
        /// The file written.
        path: Vec<u8>,
        /// The temporary staged beside it.
        tmp: Vec<u8>,
        /// The file's sha256 before (hex), or `None` for a new file.
        before: Option<String>,
        /// The new content's sha256 (hex).
        after: String,
        /// The pre-image's object id (hex).
        before_object: Option<String>,
        /// The new content, so recovery can stage it again.
        after_object: Option<String>,
        /// Permission bits of the new file.
        mode: u32,
        /// Where the new content waits when it is not in the store: a temporary the caller
        /// wrote and synced (an upload), renamed to `tmp` when staging; recovery goes on from
        /// whichever of the two holds `after`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        staged: Option<Vec<u8>>,
    },
    /// Moves the file (with sha256 `before`) or directory at `path` into the trash.
    Remove {
        /// What is deleted.
        path: Vec<u8>,
        /// The name it is renamed to beside its place until the plan is buried.
        grave: Vec<u8>,
        /// A file's sha256 (hex); `None` for a directory, checked against `trash` instead.
        before: Option<String>,
        /// The trash row it becomes.
        trash: Box<TrashItem>,
    },
    /// Renames `from` to `to`, never over anything; `sha256` is the file's, if it is one.
    Move {
        /// Where it is.
        from: Vec<u8>,
        /// Where it goes.
        to: Vec<u8>,
        /// A file's sha256 (hex).
        sha256: Option<String>,
        /// A file's content id (hex).
        object: Option<String>,
    },
    /// Creates a directory (a restored directory, or a missing parent of what is restored),
    /// or finds it there.
    Mkdir {
        /// The directory.
        path: Vec<u8>,
        /// Permission bits to give it (owner rwx always kept, so the plan can fill it).
        #[serde(default)]
        mode: Option<u32>,
    },
    /// Creates a symlink (a restored directory's).
    Symlink {
        /// The link.
        path: Vec<u8>,
        /// What it points to.
        target: Vec<u8>,
    },
}

/// A decided mutation: what the journal row holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The plan's id.
    pub id: PlanId,
    /// The tool that drafted it.
    pub tool: String,
    /// Who called the tool.
    pub actor: String,
    /// The workspace's name.
    pub workspace: String,
    /// The session, if any.
    pub session: Option<SessionId>,
    /// The live tree's absolute path.
    pub root: PathBuf,
    /// When it was journaled, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// The changes, in order.
    pub steps: Vec<Step>,
    /// Facts for the audit records' details (the tool's own, e.g. the restored trash id).
    #[serde(default)]
    pub details: serde_json::Value,
    /// The directories staging may create for the writes' temporaries (their targets' parents
    /// missing when the plan was drafted), shallowest first: a plan rolled back removes those
    /// left empty, so the tree is as it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_dirs: Vec<Vec<u8>>,
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
        mode: Option<u32>,
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
    /// A content the caller wrote and synced to the temporary `from` in the tree (an upload,
    /// streamed there as it arrived): staged by a rename, never copied, and not stored.
    /// `seen` is (inode, size, mtime) as the caller left it: anything else there is not it.
    Staged { from: Vec<u8>, sha256: Sha256, seen: (u64, u64, i64) },
}

impl NewContent {
    /// The content's sha256, and its object id when it is (or will be) in the store.
    pub(super) fn hashes(&self) -> (Sha256, Option<ObjectId>) {
        match self {
            NewContent::Bytes(b) => (<sha2::Sha256 as sha2::Digest>::digest(b).into(), Some(ObjectId::of(b))),
            NewContent::Stored { id, sha256 } => (*sha256, Some(*id)),
            NewContent::Staged { sha256, .. } => (*sha256, None),
        }
    }
}

/// Something the journal must store before the plan commits.
pub(super) enum ToStore {
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
pub(super) fn plan_sha(plan: &Plan, h: &str) -> Result<Sha256> {
    Sha256::from_hex(h).map_err(|e| {
        Error::with_source(ErrorKind::Corrupt, format!("journal plan {} records '{h}' as a SHA-256", plan.id), e)
    })
}

/// An object id a plan records in hex; one that does not decode is a damaged plan, said so.
pub(super) fn plan_object(plan: &Plan, h: &str) -> Result<ObjectId> {
    ObjectId::from_hex(h)
        .map_err(|e| Error::corrupt(format!("journal plan {} records '{h}' as an object id: {}", plan.id, e.message())))
}

pub(super) fn tmp_name(plan: &PlanId, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.tmp").into_bytes()
}

pub(super) fn grave_name(plan: &PlanId, i: usize) -> Vec<u8> {
    format!(".trove-{plan}-{i}.del").into_bytes()
}

/// `name` beside `path`.
pub(super) fn beside(path: &[u8], name: &[u8]) -> Vec<u8> {
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

/// Who drafts a change, and where: a session's agent (within the session's scope) or an
/// operator (the whole workspace, no session).
pub struct Author<'a> {
    pub workspace: &'a str,
    pub session: Option<&'a SessionId>,
    pub actor: &'a str,
    pub scope: &'a Scope,
}

impl<'a> Author<'a> {
    /// The context of a plan `tool` drafts for this author, with the tool's own `details`.
    pub fn ctx(&self, tool: &'a str, details: serde_json::Value) -> Ctx<'a> {
        Ctx { tool, actor: self.actor, workspace: self.workspace, session: self.session, details }
    }

    /// `p` as a path this author may change: normalized, inside the scope.
    pub fn writable(&self, p: &str) -> Result<Vec<u8>> {
        self.writable_bytes(p.as_bytes())
    }

    /// [`Author::writable`] for a path given as bytes.
    pub fn writable_bytes(&self, p: &[u8]) -> Result<Vec<u8>> {
        let rel = crate::base::path::normalize_nonempty(p)?;
        self.scope.check_write(&rel)?;
        Ok(rel)
    }
}

impl Step {
    /// The path a step changes (its source, for a move).
    pub fn path(&self) -> &[u8] {
        match self {
            Step::Write { path, .. }
            | Step::Remove { path, .. }
            | Step::Mkdir { path, .. }
            | Step::Symlink { path, .. } => path,
            Step::Move { from, .. } => from,
        }
    }
}

impl Plan {
    /// The object ids the plan refers to (pre-images, new contents, moved files, trash items
    /// and their members): what garbage collection must keep while it is open.
    pub fn objects(&self) -> Result<Vec<ObjectId>> {
        let mut out = Vec::new();
        for step in &self.steps {
            match step {
                Step::Write { before_object, after_object, .. } => {
                    for h in [before_object, after_object].into_iter().flatten() {
                        out.push(ObjectId::from_hex(h)?);
                    }
                }
                Step::Move { object, .. } => {
                    if let Some(h) = object {
                        out.push(ObjectId::from_hex(h)?);
                    }
                }
                Step::Remove { trash, .. } => {
                    out.extend(trash.object.iter().chain(trash.entries.iter().filter_map(|e| e.object.as_ref())));
                }
                Step::Mkdir { .. } | Step::Symlink { .. } => {}
            }
        }
        Ok(out)
    }
}

/// The audit record every step of `plan` starts from.
pub(super) fn base_record(plan: &Plan, now: i64) -> AuditRecord {
    let mut rec = AuditRecord::ok(now, &plan.actor, &plan.tool);
    rec.workspace = Some(plan.workspace.clone());
    rec.session = plan.session.clone();
    rec
}
