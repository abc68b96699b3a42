//! The trash of a repository (DESIGN.md, "Trash"): reading items back, deleting into it
//! (`remove.rs`) and restoring from it (`restore.rs`).

pub mod remove;
pub mod restore;

use crate::base::error::{Error, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::manifest;
use crate::model::scope::Scope;
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

    /// The trash item of `workspace` a restore names: `id`, or the newest deletion at `path`
    /// that is not restored yet, which `scope` must be able to read.
    pub(crate) fn trash_item_to_restore(
        &self,
        workspace: &str,
        scope: &Scope,
        id: Option<&TrashId>,
        at: Option<&str>,
    ) -> Result<TrashItem> {
        match (id, at) {
            (Some(id), _) => {
                let item = self.trash_item(id)?;
                if item.workspace != workspace {
                    return Err(Error::not_found(format!("trash item '{id}' is not in this session's workspace")));
                }
                Ok(item)
            }
            (None, Some(pth)) => {
                let rel = path::normalize_nonempty(pth.as_bytes())?;
                scope.check_read(&rel)?;
                self.trash(workspace, Some(&rel))?
                    .into_iter()
                    .find(|t| t.restored_ns.is_none())
                    .map(|t| self.trash_item(&t.id))
                    .transpose()?
                    .ok_or_else(|| {
                        Error::not_found(format!("nothing deleted at '{}' is in the trash", path::display(&rel)))
                    })
            }
            (None, None) => Err(Error::invalid_argument("give trashId, or the path that was deleted")),
        }
    }
}
