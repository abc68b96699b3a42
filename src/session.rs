//! Sessions: a period of work on one workspace, with a lifecycle, a ttl, idle expiry and a
//! file-access scope (`sessions-and-file-access.md`, DESIGN.md "Sessions and scope").
//!
//! Lifecycle: `ready` (the live tree is served) -> `paused` (snapshotted, served from the
//! snapshot) -> `ready` again, or -> `ended` from either. Ending (DELETE, ttl, or 5 minutes idle
//! for a non-persistent session) takes a final snapshot and deletes nothing: the row stays, so the
//! Files API keeps serving the session's files from that snapshot. Time is passed in (`now_ns`),
//! so expiry is decided by the caller's clock and tests need not wait.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::audit::AuditRecord;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{self, snapshots::SnapshotInfo};
use crate::progress::NoProgress;
use crate::repo::{now_ns, Repo};
use crate::scope::{FileAccess, Scope};
use crate::snapshot::{check_workspace_name, SnapshotOptions};

/// The seed's default hard lifetime: 4 hours.
pub const DEFAULT_TTL_S: i64 = 14_400;
/// A non-persistent session ends this long after its last activity.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Active: the live tree is served.
    Ready,
    /// Snapshotted and not served live until resumed.
    Paused,
    /// Over; its files are served from its snapshots.
    Ended,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::Paused => "paused",
            Status::Ended => "ended",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "ready" => Some(Status::Ready),
            "paused" => Some(Status::Paused),
            "ended" => Some(Status::Ended),
            _ => None,
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    Deleted,
    Ttl,
    Idle,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Deleted => "deleted",
            EndReason::Ttl => "ttl",
            EndReason::Idle => "idle",
        }
    }
}

/// A session as recorded in the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    pub workspace: String,
    pub live_dir: PathBuf,
    pub persistent: bool,
    pub ttl_s: i64,
    pub metadata: Map<String, Value>,
    pub file_access: FileAccess,
    pub status: Status,
    pub created_ns: i64,
    pub last_activity_ns: i64,
    pub ended_ns: Option<i64>,
    pub end_reason: Option<String>,
    pub final_snapshot: Option<String>,
}

/// What a caller may set when creating a session (the body of `POST /v1/sessions`). Fields the
/// seed defines for agent platforms (`model`, `tools`) are accepted and ignored; any other
/// field is refused by name, so a typo (`fileAccess`) cannot silently widen the scope.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    #[serde(default)]
    pub persistent: bool,
    pub ttl: Option<i64>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default)]
    pub file_access: FileAccess,
    /// The workspace's name; defaults to the session's id.
    pub workspace: Option<String>,
    /// The seed's model name (for agent platforms; trove keeps files, not conversations).
    #[serde(default)]
    pub model: Option<String>,
    /// The seed's tool definitions (likewise accepted, not used).
    #[serde(default)]
    pub tools: Option<Vec<serde_json::Value>>,
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

impl Session {
    pub fn scope(&self) -> Result<Scope> {
        Scope::new(&self.id, &self.file_access)
    }

    /// The live directory while the session serves it (ready), else `None`.
    pub fn serving_dir(&self) -> Option<&Path> {
        (self.status == Status::Ready).then_some(self.live_dir.as_path())
    }

    /// The session record in the seed's shape, plus trove's own fields.
    pub fn record(&self, busy: bool) -> Value {
        let mut v = json!({
            "id": self.id,
            "created_at": secs(self.created_ns),
            "last_activity": secs(self.last_activity_ns),
            "busy": busy,
            "persistent": self.persistent,
            "ttl": self.ttl_s,
            "status": self.status.as_str(),
            "metadata": self.metadata,
            "file_access": self.file_access,
            "workspace": self.workspace,
        });
        if let (Some(obj), Some(ended)) = (v.as_object_mut(), self.ended_ns) {
            obj.insert("ended_at".into(), json!(secs(ended)));
            obj.insert("end_reason".into(), json!(self.end_reason));
            obj.insert("final_snapshot".into(), json!(self.final_snapshot));
        }
        v
    }

    /// Whether the session is due to end at `now_ns`, and why: its ttl has run out, or it is not
    /// persistent and has been idle for `idle`. `last_activity_ns` may be newer than the row's.
    pub fn due(&self, now_ns: i64, last_activity_ns: i64, idle: Duration) -> Option<EndReason> {
        if self.status == Status::Ended {
            return None;
        }
        if now_ns >= self.created_ns.saturating_add(self.ttl_s.saturating_mul(1_000_000_000)) {
            return Some(EndReason::Ttl);
        }
        let last = last_activity_ns.max(self.last_activity_ns);
        let idle_ns = i64::try_from(idle.as_nanos()).unwrap_or(i64::MAX);
        (!self.persistent && now_ns >= last.saturating_add(idle_ns)).then_some(EndReason::Idle)
    }
}

/// A fresh session id: `sess_` and 12 random hex digits, as in the seed.
pub fn new_session_id() -> Result<String> {
    let mut bytes = [0u8; 6];
    fill_random(&mut bytes)?;
    Ok(format!("sess_{}", hex::encode(bytes)))
}

/// Fills `buf` from the kernel's random source.
pub fn fill_random(buf: &mut [u8]) -> Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty())
            .map_err(|e| Error::internal(format!("reading random bytes: {e}")))?;
        filled += n;
    }
    Ok(())
}

/// Parses an age such as `90s`, `5m`, `2h` or `1h30m` (`older_than`); a bare number is seconds.
pub fn parse_age(s: &str) -> Result<Duration> {
    let bad =
        || Error::invalid_argument(format!("'{s}' is not a duration: give a number with s, m or h (e.g. 2h or 1h30m)"));
    if s.is_empty() {
        return Err(bad());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(Duration::from_secs).map_err(|_| bad());
    }
    let (mut total, mut num) = (0u64, String::new());
    for c in s.chars() {
        match c {
            '0'..='9' => num.push(c),
            's' | 'm' | 'h' if !num.is_empty() => {
                let n: u64 = num.parse().map_err(|_| bad())?;
                let unit = match c {
                    's' => 1,
                    'm' => 60,
                    _ => 3600,
                };
                total = n.checked_mul(unit).and_then(|v| total.checked_add(v)).ok_or_else(bad)?;
                num.clear();
            }
            _ => return Err(bad()),
        }
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// The live directory of workspace `name` under `workspaces`, created if missing. The name is
/// one path component, so no name reaches outside `workspaces`.
pub fn workspace_dir(workspaces: &Path, name: &str) -> Result<PathBuf> {
    check_workspace_name(name)?;
    let dir = workspaces.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create workspace directory", &dir, e))?;
    Ok(dir)
}

fn ended(id: &str) -> Error {
    Error::not_found(format!("session '{id}' has ended; its files stay readable"))
}

fn unknown(id: &str) -> Error {
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
        let ttl_s = spec.ttl.unwrap_or(DEFAULT_TTL_S);
        if ttl_s <= 0 {
            return Err(Error::invalid_argument(format!("ttl {ttl_s} is not a positive number of seconds")));
        }
        let id = new_session_id()?;
        Scope::new(&id, &spec.file_access)?;
        let workspace = spec.workspace.clone().unwrap_or_else(|| id.clone());
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
        };
        self.manifest.write(|tx| {
            manifest::workspaces::ensure(tx, &session.workspace, now)?;
            manifest::sessions::insert(tx, &session)?;
            let mut rec = AuditRecord::ok(now, actor, "session_create");
            rec.workspace = Some(session.workspace.clone());
            rec.session = Some(session.id.clone());
            rec.details = json!({"persistent": session.persistent, "ttl": ttl_s, "file_access": session.file_access});
            manifest::audit::append(tx, &rec)
        })?;
        Ok(session)
    }

    /// A session in any state; `not_found` if there never was one.
    pub fn session(&self, id: &str) -> Result<Session> {
        manifest::sessions::get(self.manifest.conn(), id)?.ok_or_else(|| unknown(id))
    }

    /// A session that has not ended: what GET and DELETE answer 404 for otherwise.
    pub fn active_session(&self, id: &str) -> Result<Session> {
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
    pub fn touch_sessions(&self, seen: &[(String, i64)]) -> Result<()> {
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
    fn lock_workspace(&self, s: &Session) -> Result<Option<crate::tools::mutate::Locked>> {
        if !s.live_dir.is_dir() {
            return Ok(None);
        }
        crate::tools::mutate::Locked::acquire(self, &s.live_dir).map(Some)
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
    pub fn end_session(&self, id: &str, reason: EndReason, actor: &str) -> Result<Session> {
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
            let final_snapshot = snap.as_ref().map(|i| i.id.as_str());
            manifest::sessions::end(tx, id, now, reason.as_str(), final_snapshot)?;
            let mut rec = AuditRecord::ok(now, actor, "session_end");
            rec.workspace = Some(s.workspace.clone());
            rec.session = Some(id.to_string());
            rec.details = json!({"reason": reason.as_str(), "final_snapshot": final_snapshot});
            manifest::audit::append(tx, &rec)
        })?;
        self.session(id)
    }

    /// Pauses a ready session: snapshots it and stops serving its live tree. Pausing a paused
    /// session changes nothing.
    pub fn pause_session(&self, id: &str, actor: &str) -> Result<Session> {
        let s = self.active_session(id)?;
        if s.status == Status::Paused {
            return Ok(s);
        }
        let _lock = self.lock_workspace(&s)?;
        let snap = self.snapshot_locked(&s, "pause", actor)?;
        self.set_status(&s, Status::Paused, "session_pause", json!({"snapshot": snap.map(|i| i.id)}), actor)
    }

    /// Resumes a paused session: its live tree is served again.
    pub fn resume_session(&self, id: &str, actor: &str) -> Result<Session> {
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
            rec.details = details;
            manifest::audit::append(tx, &rec)
        })?;
        self.session(&s.id)
    }

    /// The newest snapshot session `id` took, if any.
    pub fn session_snapshot(&self, id: &str) -> Result<Option<String>> {
        manifest::sessions::latest_snapshot(self.manifest.conn(), id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_combinable_suffixes() {
        assert_eq!(parse_age("2h").expect("2h"), Duration::from_secs(7200));
        assert_eq!(parse_age("1h30m").expect("1h30m"), Duration::from_secs(5400));
        assert_eq!(parse_age("90s").expect("90s"), Duration::from_secs(90));
        assert_eq!(parse_age("45").expect("bare"), Duration::from_secs(45));
        for bad in ["", "h", "1x", "1h30", "-5m", "1.5h"] {
            assert_eq!(parse_age(bad).err().map(|e| e.kind()), Some(ErrorKind::InvalidArgument), "{bad}");
        }
    }

    #[test]
    fn ttl_and_idle_decide_the_end() {
        let s = Session {
            id: "sess_000000000001".into(),
            workspace: "w".into(),
            live_dir: PathBuf::from("/nonexistent"),
            persistent: false,
            ttl_s: 3600,
            metadata: Map::new(),
            file_access: FileAccess::default(),
            status: Status::Ready,
            created_ns: 0,
            last_activity_ns: 0,
            ended_ns: None,
            end_reason: None,
            final_snapshot: None,
        };
        let min = 60_000_000_000i64;
        assert_eq!(s.due(4 * min, 0, IDLE_TIMEOUT), None);
        assert_eq!(s.due(5 * min, 0, IDLE_TIMEOUT), Some(EndReason::Idle));
        assert_eq!(s.due(5 * min, 2 * min, IDLE_TIMEOUT), None, "newer activity counts");
        let persistent = Session { persistent: true, ..s.clone() };
        assert_eq!(persistent.due(59 * min, 0, IDLE_TIMEOUT), None);
        assert_eq!(persistent.due(60 * min, 0, IDLE_TIMEOUT), Some(EndReason::Ttl));
        let ended = Session { status: Status::Ended, ..s };
        assert_eq!(ended.due(600 * min, 0, IDLE_TIMEOUT), None);
    }

    #[test]
    fn ids_look_like_the_seed() {
        let id = new_session_id().expect("id");
        assert!(id.starts_with("sess_") && id.len() == 17 && id[5..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, new_session_id().expect("id"));
    }
}
