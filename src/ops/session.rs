//! Session operations on a repository: create, look up, snapshot, pause, resume and end
//! (the lifecycle `model::session` describes), each recorded in the audit log.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{SessionId, SnapshotId};
use crate::base::progress::NoProgress;
use crate::base::random::new_session_id;
use crate::base::time::now_ns;
use crate::fs::lock::Locked;
use crate::manifest;
use crate::model::audit::AuditRecord;
use crate::model::scope::Scope;
use crate::model::session::{
    check_workspace_name, EndReason, Session, SessionOptions, SessionSpec, Status, DEFAULT_TTL_S, MAX_TTL_S,
};
use crate::model::snapshot::SnapshotInfo;
use crate::ops::diff::SESSION_START;
use crate::ops::snapshot::SnapshotOptions;
use crate::repo::Repo;

/// The live directory of workspace `name` under `workspaces`, created if missing. The name is
/// one path component, so no name reaches outside `workspaces`.
pub fn workspace_dir(workspaces: &Path, name: &str) -> Result<PathBuf> {
    check_workspace_name(name)?;
    let dir = workspaces.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create workspace directory", &dir, e))?;
    Ok(dir)
}

fn ended(id: &SessionId) -> Error {
    Error::not_found(format!("session '{id}' has ended; its files stay readable"))
}

fn unknown(id: &SessionId) -> Error {
    Error::not_found(format!("session '{id}' not found: list them with GET /v1/sessions or `trove session list`"))
}

impl Repo {
    /// Creates a session. `live_dir` maps the workspace name to its directory (created if
    /// missing); the name defaults to the new session's id.
    pub fn create_session(
        &self,
        spec: &SessionSpec,
        live_dir: impl FnOnce(&str) -> Result<PathBuf>,
        actor: &str,
    ) -> Result<Session> {
        self.create_session_with_token(spec, live_dir, actor).map(|(s, _)| s)
    }

    /// [`Repo::create_session`], also returning the session token: the bearer that reaches
    /// this session's files on `/v1/file/*`, and nothing else, until the session ends. Only
    /// its hash is kept; the token itself exists only in this answer.
    pub fn create_session_with_token(
        &self,
        spec: &SessionSpec,
        live_dir: impl FnOnce(&str) -> Result<PathBuf>,
        actor: &str,
    ) -> Result<(Session, String)> {
        let ttl_s = match spec.ttl {
            None => DEFAULT_TTL_S,
            Some(t) if (1..=MAX_TTL_S).contains(&t) => t as i64,
            Some(t) => {
                return Err(Error::invalid_argument(format!(
                    "ttl {t} is not a number of seconds from 1 to {MAX_TTL_S} (100 years)"
                )))
            }
        };
        let id = new_session_id()?;
        // A backslash is refused as in every other path a request gives.
        for entry in spec.file_access.read.iter().chain(&spec.file_access.write) {
            crate::base::path::from_text(entry)
                .map_err(|e| Error::invalid_argument(format!("file_access entry '{entry}': {}", e.message())))?;
        }
        Scope::new(id.as_str(), &spec.file_access)?;
        let workspace = spec.workspace.clone().unwrap_or_else(|| id.to_string());
        check_workspace_name(&workspace)?;
        let dir = live_dir(&workspace)?;
        let dir = std::path::absolute(&dir).map_err(|e| Error::io("resolve", &dir, e))?;
        let now = now_ns();
        let session = Session {
            id,
            workspace,
            live_dir: dir,
            persistent: spec.persistent,
            ttl_s,
            metadata: spec.metadata.clone(),
            file_access: spec.file_access.clone(),
            status: Status::Ready,
            created_ns: now,
            last_activity_ns: now,
            ended_ns: None,
            end_reason: None,
            final_snapshot: None,
            options: SessionOptions {
                model: spec.model.clone(),
                tools: spec.tools.as_ref().map(|t| t.iter().cloned().map(serde_json::Value::Object).collect()),
                sandbox_root: spec.sandbox_root.clone(),
                require_sha256: spec.require_sha256,
                typed_results: spec.typed_results,
            },
        };
        if let Some(root) = &session.options.sandbox_root {
            crate::base::path::check_sandbox_root(root)?;
        }
        let token = crate::base::random::new_session_token()?;
        // What the session starts from, so a review can say what it changed: taken first, so
        // a failure leaves no session behind. An empty new workspace needs none (its baseline
        // is the empty tree).
        let has_files = match std::fs::read_dir(&session.live_dir) {
            Ok(mut d) => d.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io("list", &session.live_dir, e)),
        };
        if has_files || manifest::snapshots::latest(self.manifest.conn(), Some(&session.workspace))?.is_some() {
            self.snapshot_session(&session, SESSION_START, actor)?;
        }
        let host = self.host_id()?;
        self.manifest.write(|tx| {
            manifest::workspaces::ensure(tx, &session.workspace, now)?;
            manifest::sessions::insert(tx, &session, host.as_deref())?;
            manifest::sessions::insert_token(tx, &crate::ops::tokens::hash_token(&token), &session.id, now)?;
            let mut rec = AuditRecord::ok(now, actor, "session_create");
            rec.workspace = Some(session.workspace.clone());
            rec.session = Some(session.id.clone());
            rec.details = json!({"persistent": session.persistent, "ttl": ttl_s, "file_access": session.file_access});
            manifest::audit::append(tx, &rec)
        })?;
        Ok((session, token))
    }

    /// The session a session token stands for while the session has not ended; `None` for an
    /// unknown or revoked token.
    pub fn session_for_token(&self, token: &str) -> Result<Option<SessionId>> {
        manifest::sessions::token_session(self.manifest.conn(), &crate::ops::tokens::hash_token(token))
    }

    /// A session in any state; `not_found` if there never was one.
    pub fn session(&self, id: &SessionId) -> Result<Session> {
        manifest::sessions::get(self.manifest.conn(), id)?.ok_or_else(|| unknown(id))
    }

    /// A session that has not ended: what GET and DELETE answer 404 for otherwise.
    pub fn active_session(&self, id: &SessionId) -> Result<Session> {
        let s = self.session(id)?;
        if s.status == Status::Ended {
            return Err(ended(id));
        }
        Ok(s)
    }

    /// Sessions oldest first; ended ones only when asked.
    pub fn sessions(&self, include_ended: bool) -> Result<Vec<Session>> {
        manifest::sessions::list(self.manifest.conn(), include_ended)
    }

    /// Records activity on sessions (id, time) in one transaction.
    pub fn touch_sessions(&self, seen: &[(SessionId, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        self.manifest.write(|tx| seen.iter().try_for_each(|(id, at)| manifest::sessions::touch(tx, id, *at)))
    }

    /// Snapshots the session's live directory (if it still exists) under its workspace, holding
    /// the workspace's tool lock so no file tool change is caught half done.
    pub fn snapshot_session(&self, s: &Session, reason: &str, actor: &str) -> Result<Option<SnapshotInfo>> {
        let _lock = self.lock_workspace(s)?;
        self.snapshot_locked(s, reason, actor)
    }

    /// The tool lock of `s`'s live tree, if it still exists.
    fn lock_workspace(&self, s: &Session) -> Result<Option<Locked>> {
        if !s.live_dir.is_dir() {
            return Ok(None);
        }
        self.lock_live(&s.live_dir).map(Some)
    }

    fn snapshot_locked(&self, s: &Session, reason: &str, actor: &str) -> Result<Option<SnapshotInfo>> {
        if !s.live_dir.is_dir() {
            return Ok(None);
        }
        let opts = SnapshotOptions {
            workspace: Some(s.workspace.clone()),
            session: Some(s.id.clone()),
            reason: reason.to_string(),
            actor: actor.to_string(),
            progress: &NoProgress,
            ..SnapshotOptions::default()
        };
        self.snapshot(&s.live_dir, &opts).map(Some)
    }

    /// Ends a session: a final snapshot of its live tree, then the row marked `ended`. Nothing
    /// is deleted. An unknown or already ended session is `not_found`.
    pub fn end_session(&self, id: &SessionId, reason: EndReason, actor: &str) -> Result<Session> {
        let s = self.active_session(id)?;
        // Held until the status changes: a tool write waiting for it then sees `ended`.
        let _lock = self.lock_workspace(&s)?;
        let snap = self.snapshot_locked(&s, "session_end", actor)?;
        let now = now_ns();
        self.manifest.write(|tx| {
            // A concurrent end (the reaper and a DELETE) may have won while this one snapshotted.
            let current = manifest::sessions::get(tx, id)?.ok_or_else(|| unknown(id))?;
            if current.status == Status::Ended {
                return Err(ended(id));
            }
            let final_snapshot = snap.as_ref().map(|i| &i.id);
            manifest::sessions::end(tx, id, now, reason, final_snapshot)?;
            manifest::sessions::revoke_tokens(tx, id, now)?;
            let mut rec = AuditRecord::ok(now, actor, "session_end");
            rec.workspace = Some(s.workspace.clone());
            rec.session = Some(id.clone());
            rec.details = json!({"reason": reason.as_str(), "final_snapshot": final_snapshot});
            manifest::audit::append(tx, &rec)
        })?;
        // Every session's end is covered by a signed checkpoint.
        if let Err(e) = self.checkpoint() {
            tracing::warn!(session = %id, error = %e, "the session ended, but its audit checkpoint could not be written");
        }
        self.session(id)
    }

    /// Pauses a ready session: snapshots it and stops serving its live tree. Pausing a paused
    /// session changes nothing.
    pub fn pause_session(&self, id: &SessionId, actor: &str) -> Result<Session> {
        let s = self.active_session(id)?;
        if s.status == Status::Paused {
            return Ok(s);
        }
        let _lock = self.lock_workspace(&s)?;
        let snap = self.snapshot_locked(&s, "pause", actor)?;
        self.set_status(&s, Status::Paused, "session_pause", json!({"snapshot": snap.map(|i| i.id)}), actor)
    }

    /// Resumes a paused session: its live tree is served again.
    pub fn resume_session(&self, id: &SessionId, actor: &str) -> Result<Session> {
        let s = self.active_session(id)?;
        if s.status == Status::Ready {
            return Ok(s);
        }
        self.set_status(&s, Status::Ready, "session_resume", json!({}), actor)
    }

    fn set_status(&self, s: &Session, to: Status, operation: &str, details: Value, actor: &str) -> Result<Session> {
        let now = now_ns();
        self.manifest.write(|tx| {
            let current = manifest::sessions::get(tx, &s.id)?.ok_or_else(|| unknown(&s.id))?;
            if current.status == Status::Ended {
                return Err(Error::new(ErrorKind::Conflict, format!("session '{}' ended meanwhile", s.id)));
            }
            manifest::sessions::set_status(tx, &s.id, to)?;
            manifest::sessions::touch(tx, &s.id, now)?;
            let mut rec = AuditRecord::ok(now, actor, operation);
            rec.workspace = Some(s.workspace.clone());
            rec.session = Some(s.id.clone());
            rec.details = details.clone();
            manifest::audit::append(tx, &rec)
        })?;
        self.session(&s.id)
    }

    /// The live tree of `s`, locked for a change, if `s` may change files at all: it is
    /// active and its directory exists; `read_only` otherwise.
    pub(crate) fn lock_writable(&self, s: &Session) -> Result<Locked> {
        let read_only = |why: &str| {
            Error::new(ErrorKind::ReadOnly, format!("session '{}' is {why}: its files are read-only", s.id))
        };
        let status = |s: &Session| match s.status {
            Status::Ready => Ok(()),
            Status::Paused => Err(read_only("paused")),
            Status::Ended => Err(read_only("ended")),
        };
        status(s)?;
        if !s.live_dir.is_dir() {
            return Err(read_only("without its workspace directory"));
        }
        let locked = self.lock_live(&s.live_dir)?;
        // Ending and pausing hold the same lock: read the status again now that it is ours.
        status(&self.session(&s.id)?)?;
        Ok(locked)
    }

    /// The newest snapshot session `id` took, if any.
    pub fn session_snapshot(&self, id: &SessionId) -> Result<Option<SnapshotId>> {
        manifest::sessions::latest_snapshot(self.manifest.conn(), id)
    }
}
