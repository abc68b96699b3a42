//! Workspaces as data: a name, the directory last snapshotted, and exclusion settings.

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
}
