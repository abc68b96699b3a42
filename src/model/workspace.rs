//! Workspaces as data: a name, the directory last snapshotted, exclusion settings, and how long
//! their trash items and snapshots are kept.

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
/// A named live tree as the manifest records it.
pub struct Workspace {
    /// The manifest's row id.
    pub id: i64,
    /// The workspace's name (one path component).
    pub name: String,
    /// The directory last snapshotted under this name, as raw path bytes.
    #[serde(skip)]
    pub root: Option<Vec<u8>>,
    /// Replaces the default exclusion list when set.
    pub excludes: Option<Vec<String>>,
    /// Added to the effective list.
    pub extra_excludes: Vec<String>,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// Trash items older than this many seconds expire (`None`: [`DEFAULT_TRASH_AGE_S`]).
    pub trash_age_s: Option<i64>,
    /// The most bytes the trash keeps; the oldest items expire past it (`None`: no quota).
    pub trash_quota: Option<u64>,
    /// Which snapshots `forget` keeps (`None`: every one).
    pub snapshot_retention: Option<crate::model::retention::RetentionPolicy>,
}

/// How long trash items are kept unless a workspace says otherwise: 30 days.
pub const DEFAULT_TRASH_AGE_S: i64 = 30 * 86_400;

impl Workspace {
    /// The trash retention in force: the age in seconds and the quota in bytes.
    pub fn retention(&self) -> (i64, Option<u64>) {
        (self.trash_age_s.unwrap_or(DEFAULT_TRASH_AGE_S), self.trash_quota)
    }
}
