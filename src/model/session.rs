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
use serde_json::{Map, Value};

use crate::base::error::{Error, Result};
use crate::base::id::{SessionId, SnapshotId};
use crate::model::scope::{FileAccess, Scope};

/// The seed's default hard lifetime: 4 hours.
pub const DEFAULT_TTL_S: i64 = 14_400;
/// A non-persistent session ends this long after its last activity.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Where a session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Active: the live tree is served.
    Ready,
    /// Snapshotted and not served live until resumed.
    Paused,
    /// Over; its files are served from its snapshots.
    Ended,
}

impl Status {
    /// The name the API and the manifest use.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::Paused => "paused",
            Status::Ended => "ended",
        }
    }

    /// The status a name stands for, `None` for any other text.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// Ended by a caller (`DELETE`, `trove session end`).
    Deleted,
    /// Its hard lifetime ran out.
    Ttl,
    /// Not persistent and idle for longer than the idle timeout.
    Idle,
}

impl EndReason {
    /// The name the API and the manifest use.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Deleted => "deleted",
            EndReason::Ttl => "ttl",
            EndReason::Idle => "idle",
        }
    }

    /// The reason a manifest row names, `None` for text that names none.
    pub fn parse(s: &str) -> Option<EndReason> {
        match s {
            "deleted" => Some(EndReason::Deleted),
            "ttl" => Some(EndReason::Ttl),
            "idle" => Some(EndReason::Idle),
            _ => None,
        }
    }
}

/// A session as recorded in the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The session's id.
    pub id: SessionId,
    /// The name of the workspace it works on.
    pub workspace: String,
    /// The absolute path of the workspace's live tree.
    pub live_dir: PathBuf,
    /// A persistent session does not end when idle, only at its ttl or when ended.
    pub persistent: bool,
    /// Hard lifetime in seconds from creation.
    pub ttl_s: i64,
    /// The caller's metadata, kept as given.
    pub metadata: Map<String, Value>,
    /// The scope as given at creation.
    pub file_access: FileAccess,
    /// Where it is in its lifecycle.
    pub status: Status,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// Last recorded activity, nanoseconds since the Unix epoch.
    pub last_activity_ns: i64,
    /// When it ended, nanoseconds since the Unix epoch.
    pub ended_ns: Option<i64>,
    /// Why it ended.
    pub end_reason: Option<EndReason>,
    /// The snapshot taken when it ended (none if its live tree was gone).
    pub final_snapshot: Option<SnapshotId>,
    /// What it was created with besides its scope.
    pub options: SessionOptions,
}

/// What a session was created with besides its scope and lifetime, fixed for its life.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SessionOptions {
    /// The seed's model name (agent platforms choose it; trove keeps and shows it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The seed's tool definitions (likewise kept and shown): OpenAI-shape function
    /// definitions, each an object.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<Map<String, Value>>>")]
    pub tools: Option<Vec<Value>>,
    /// The absolute directory the sandbox file API's absolute paths map onto the workspace
    /// from (`/workspace` unless the session or the server says otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_root: Option<String>,
    /// Refuse writes over an existing file that do not name its current sha256 (the
    /// stale-file error), where the sandbox file API would allow them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_sha256: bool,
    /// The `files` tool answers typed results by default (else the seed's strings).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub typed_results: bool,
}

/// What a caller may set when creating a session (the body of `POST /v1/sessions`). Fields the
/// seed defines for agent platforms (`model`, `tools`) are accepted and ignored; any other
/// field is refused by name, so a typo (`fileAccess`) cannot silently widen the scope.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Whether the session survives idling (default false).
    #[serde(default)]
    pub persistent: bool,
    /// Hard lifetime in seconds (default 4 hours; at most 100 years).
    #[serde(default, deserialize_with = "crate::base::count::de_u64")]
    #[schemars(schema_with = "ttl_schema")]
    pub ttl: Option<u64>,
    /// The caller's metadata, kept as given.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The scope (default: the whole workspace, read and write).
    #[serde(default)]
    pub file_access: FileAccess,
    /// The workspace's name; defaults to the session's id. 1-200 bytes of printable
    /// characters without `/`, not `.` or `..`.
    #[serde(default)]
    #[schemars(schema_with = "workspace_name_schema")]
    pub workspace: Option<String>,
    /// The seed's model name (for agent platforms; trove keeps it and shows it).
    #[serde(default)]
    pub model: Option<String>,
    /// The seed's tool definitions (likewise kept and shown): OpenAI-shape function
    /// definitions, each an object.
    #[serde(default)]
    pub tools: Option<Vec<Map<String, Value>>>,
    /// The absolute directory the sandbox file API's absolute paths map onto the workspace from
    /// (default: the server's, `/workspace`).
    #[serde(default)]
    #[schemars(regex(pattern = r"^/[^\u0000]{0,1023}$"))]
    pub sandbox_root: Option<String>,
    /// Refuse blind overwrites through the sandbox file API: a write over an existing file
    /// must name its current sha256 (`expected_sha256`), as the agent tools require.
    #[serde(default)]
    pub require_sha256: bool,
    /// The `files` tool answers typed results unless a call says otherwise.
    #[serde(default)]
    pub typed_results: bool,
}

/// A session in the seed's shape (`sessions-and-file-access.md`: snake_case, times in seconds
/// since the Unix epoch as numbers), plus trove's own `status` and `workspace`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionRecord {
    /// The session's id.
    pub id: SessionId,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: f64,
    /// Last activity, seconds since the Unix epoch.
    pub last_activity: f64,
    /// Whether a request is working on it now.
    pub busy: bool,
    /// Whether it survives idling.
    pub persistent: bool,
    /// Hard lifetime in seconds.
    pub ttl: i64,
    /// Where it is in its lifecycle.
    pub status: Status,
    /// The caller's metadata.
    pub metadata: Map<String, Value>,
    /// Its scope as given.
    pub file_access: FileAccess,
    /// Its workspace's name.
    pub workspace: String,
    /// What it was created with besides its scope (`model`, `tools`, `sandbox_root`,
    /// `require_sha256`, `typed_results`; each only when set).
    #[serde(flatten)]
    pub options: SessionOptions,
    /// The session token, in the answer to its creation only: the bearer for `/v1/file/*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
    /// How it ended, present only once it has.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
    /// In a fleet (a bucket of a log per node), the node whose record it is; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The end of a session, as its record shows it.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Ended {
    /// When, seconds since the Unix epoch.
    pub ended_at: f64,
    /// Why.
    pub end_reason: Option<EndReason>,
    /// The snapshot taken as it ended.
    pub final_snapshot: Option<SnapshotId>,
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

impl Session {
    /// The session's checked scope.
    pub fn scope(&self) -> Result<Scope> {
        Scope::new(self.id.as_str(), &self.file_access)
    }

    /// The live directory while the session serves it (ready), else `None`.
    pub fn serving_dir(&self) -> Option<&Path> {
        (self.status == Status::Ready).then_some(self.live_dir.as_path())
    }

    /// The session as the API and `trove session --json` show it; `busy` says whether a
    /// request is working on it now.
    pub fn record(&self, busy: bool) -> SessionRecord {
        SessionRecord {
            node: None,
            id: self.id.clone(),
            created_at: secs(self.created_ns),
            last_activity: secs(self.last_activity_ns),
            busy,
            persistent: self.persistent,
            ttl: self.ttl_s,
            status: self.status,
            metadata: self.metadata.clone(),
            file_access: self.file_access.clone(),
            workspace: self.workspace.clone(),
            options: self.options.clone(),
            session_token: None,
            ended: self.ended_ns.map(|ended| Ended {
                ended_at: secs(ended),
                end_reason: self.end_reason,
                final_snapshot: self.final_snapshot.clone(),
            }),
        }
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

/// The longest ttl a session may ask for: 100 years, so its end is a time `i64` nanoseconds hold.
pub const MAX_TTL_S: u64 = 100 * 365 * 86_400;

fn ttl_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["integer", "null"], "minimum": 1, "maximum": MAX_TTL_S})
}

/// The schema of an optional workspace name: the rules of [`check_workspace_name`], with the
/// length in characters where the rule counts bytes.
fn workspace_name_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "null"],
        "pattern": "^[^/\\x00-\\x1f\\x7f-\\x9f]{1,200}$",
        "not": {"enum": [".", ".."]}
    })
}

/// Checks a workspace name: printable, no `/`, not empty, not `.` or `..` (it names a directory).
pub fn check_workspace_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > 200
        || name.contains('/')
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid_argument(format!(
            "workspace name '{name}' is not usable: give 1-200 printable characters without '/' (--workspace NAME)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;
    use crate::base::random::new_session_id;

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
            id: SessionId::parse("sess_000000000001").expect("id"),
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
            options: SessionOptions::default(),
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
    fn ids_are_uuids_as_the_seeds_say() {
        let id = new_session_id().expect("id");
        let id = id.as_str();
        let groups: Vec<&str> = id.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{id}");
        assert!(groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())), "{id}");
        assert!(groups[2].starts_with('4'), "version 4: {id}");
        assert!(matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'), "the RFC 9562 variant: {id}");
        assert_ne!(id, new_session_id().expect("id").as_str());
    }
}
