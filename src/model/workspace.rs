//! Workspaces as data: a name, the directory last snapshotted, and exclusion settings.

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
/// A named live tree as the manifest records it.
pub struct Workspace {
    pub id: i64,
    pub name: String,
    #[serde(skip)]
    pub root: Option<Vec<u8>>,
    /// Replaces the default exclusion list when set.
    pub excludes: Option<Vec<String>>,
    /// Added to the effective list.
    pub extra_excludes: Vec<String>,
    pub created_ns: i64,
}
