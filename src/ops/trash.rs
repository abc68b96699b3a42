//! Reading the trash of a repository: one item by id, or a workspace's items.

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::manifest;
use crate::model::trash::TrashItem;
use crate::repo::Repo;

impl Repo {
    /// One trash item by id.
    pub fn trash_item(&self, id: &TrashId) -> Result<TrashItem> {
        manifest::trash::get(self.manifest.conn(), id)?.ok_or_else(|| {
            Error::not_found(format!("trash item '{id}' not found: list the trash with `trove trash list`"))
        })
    }

    /// Trash items of `workspace`, newest first, optionally only those at `path`.
    pub fn trash(&self, workspace: &str, path: Option<&[u8]>) -> Result<Vec<TrashItem>> {
        manifest::trash::list(self.manifest.conn(), workspace, path)
    }
}
