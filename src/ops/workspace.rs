//! Workspaces: named live trees, and their exclusion settings.

use crate::base::error::{Error, Result};
use crate::base::time::now_ns;
use crate::fs::walk::{Excludes, DEFAULT_EXCLUDES};
use crate::manifest::{self, workspaces};
use crate::model::audit::AuditRecord;
use crate::model::session::check_workspace_name;
use crate::model::workspace::Workspace;
use crate::repo::Repo;

impl Repo {
    /// Every workspace the manifest records, by name.
    pub fn workspaces(&self) -> Result<Vec<Workspace>> {
        workspaces::list(self.manifest.conn())
    }

    /// The live directory of workspace `name` as far as the repository knows it: the directory
    /// it was last snapshotted from, else that of its newest session.
    pub fn workspace_dir(&self, name: &str) -> Result<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        check_workspace_name(name)?;
        let ws = workspaces::get(self.manifest.conn(), name)?.ok_or_else(|| {
            Error::not_found(format!("workspace '{name}' not found: list them with `trove workspace list`"))
        })?;
        if let Some(root) = ws.root {
            return Ok(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&root)));
        }
        let newest = self.sessions(true)?.into_iter().filter(|s| s.workspace == name).max_by_key(|s| s.created_ns);
        newest.map(|s| s.live_dir).ok_or_else(|| {
            Error::not_found(format!(
                "workspace '{name}' has no known directory: snapshot it once (`trove snapshot DIR --workspace {name}`)"
            ))
        })
    }

    /// Changes the exclusion list of workspace `name` (created if missing) and returns the
    /// effective list. `no_defaults` drops the default list; `defaults` restores it and clears
    /// additions; `add` and `remove` then edit the additions (or the replacing list).
    pub fn set_workspace_excludes(
        &self,
        name: &str,
        add: &[String],
        remove: &[String],
        no_defaults: bool,
        defaults: bool,
        actor: &str,
    ) -> Result<Vec<String>> {
        check_workspace_name(name)?;
        // Validate the patterns before anything is written.
        Excludes::new(add)?;
        self.manifest.write(|tx| {
            let ws = workspaces::ensure(tx, name, now_ns())?;
            let mut replace = ws.excludes.clone();
            let mut extra = ws.extra_excludes.clone();
            if defaults {
                replace = None;
                extra.clear();
            }
            if no_defaults {
                replace = Some(Vec::new());
            }
            for a in add {
                if !extra.contains(a) {
                    extra.push(a.clone());
                }
            }
            for r in remove {
                extra.retain(|e| e != r);
                if let Some(list) = &mut replace {
                    list.retain(|e| e != r);
                } else if DEFAULT_EXCLUDES.contains(&r.as_str()) {
                    // Removing a default turns the defaults into an explicit list without it.
                    replace = Some(DEFAULT_EXCLUDES.iter().filter(|d| **d != r).map(|d| d.to_string()).collect());
                }
            }
            workspaces::set_excludes(tx, ws.id, replace.as_deref(), &extra)?;
            let effective = Excludes::effective(replace.as_deref(), &extra)?.patterns().to_vec();
            let mut record = AuditRecord::ok(now_ns(), actor, "workspace_excludes");
            record.workspace = Some(name.to_string());
            record.details = serde_json::json!({ "excludes": effective });
            manifest::audit::append(tx, &record)?;
            Ok(effective)
        })
    }
}
