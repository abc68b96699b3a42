//! Copying trash items out into a directory of this host: any node's items, for a host that is
//! not their workspace's (a review host after the sandbox and its host are gone). Each item is
//! written whole under a temporary name beside its path and renamed into place, so a kill
//! leaves it absent or whole, never half there; an existing path is never replaced. The item
//! stays in its trash (its workspace did not get it back), and the copy is recorded in the
//! acting node's audit log, naming the item's node.

use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::TrashId;
use crate::base::path;
use crate::base::progress::NoProgress;
use crate::fs::workdir::{split, WorkDir};
use crate::model::audit::AuditRecord;
use crate::model::trash::TrashItem;
use crate::ops::export::EntrySink;
use crate::repo::Repo;

/// One item copied out.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopiedOut {
    /// The item.
    pub trash_id: TrashId,
    /// Its workspace-relative path, which it now has under the directory.
    pub path: String,
    /// Where it is now.
    pub to: String,
    /// In a fleet, the node whose trash holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Writes an item's entries under `into`, at `to` in place of the item's own path `from`.
struct DirSink<'a> {
    wd: &'a WorkDir,
    from: &'a [u8],
    to: Vec<u8>,
    /// Directories and the modes they get once their members are in.
    dirs: Vec<(Vec<u8>, u32)>,
}

impl DirSink<'_> {
    /// Where entry `rel` of the item goes. The records may be another node's: a path that is not
    /// plainly below the directory (`..`, `/`, `//`) is refused, not followed.
    fn place(&self, rel: &[u8]) -> Result<Vec<u8>> {
        below(rel)?;
        let rest = rel.strip_prefix(self.from).ok_or_else(|| {
            Error::internal(format!("'{}' is not in trash item '{}'", path::display(rel), path::display(self.from)))
        })?;
        let mut out = self.to.clone();
        out.extend_from_slice(rest);
        Ok(out)
    }
}

impl EntrySink for DirSink<'_> {
    fn dir(&mut self, rel: &[u8], mode: u32, _mtime_ns: i64) -> Result<()> {
        let at = self.place(rel)?;
        self.wd.mkdirs(&at, &mut Vec::new())?;
        self.dirs.push((at, mode));
        Ok(())
    }

    fn symlink(&mut self, rel: &[u8], target: &[u8], _mode: u32, _mtime_ns: i64) -> Result<()> {
        let at = self.place(rel)?;
        self.wd.symlink(&at, target, &mut Vec::new())
    }

    fn file(&mut self, rel: &[u8], mode: u32, _mtime_ns: i64, _size: u64, content: &mut dyn Read) -> Result<()> {
        let at = self.place(rel)?;
        let (_, name) = split(&at);
        self.wd.write_temp(&at, name, content, mode, &mut Vec::new())
    }
}

/// Refuses a path that is not plainly below a directory (its normal form differs: `..`, a
/// leading `/`, an empty component, `./`).
fn below(rel: &[u8]) -> Result<()> {
    if path::normalize_nonempty(rel)? != rel {
        return Err(Error::new(
            ErrorKind::InvalidPath,
            format!("trash path '{}' is not a plain relative path: it is not copied", path::display(rel)),
        ));
    }
    Ok(())
}

/// Checks, before anything is written, that `items` (of any nodes) can all be copied into
/// `into`: each path plainly relative, none taken there, none the same as or inside another's.
pub fn check_copy_targets(items: &[&TrashItem], into: &Path) -> Result<()> {
    let mut paths: Vec<&[u8]> = Vec::with_capacity(items.len());
    for item in items {
        below(&item.path)?;
        let inside = |a: &[u8], b: &[u8]| a == b || (a.starts_with(b) && a.get(b.len()) == Some(&b'/'));
        if let Some(other) = paths.iter().find(|p| inside(&item.path, p) || inside(p, &item.path)) {
            return Err(Error::invalid_argument(format!(
                "trash items at '{}' and '{}' would land on one another: copy them into two directories",
                path::display(&item.path),
                path::display(other)
            )));
        }
        paths.push(&item.path);
    }
    if !into.exists() {
        return Ok(());
    }
    let wd = WorkDir::open(into)?;
    for item in items {
        if wd.stat(&item.path)?.is_some() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "'{}' is already in {}: nothing was copied; choose an empty directory",
                    path::display(&item.path),
                    into.display()
                ),
            ));
        }
    }
    Ok(())
}

impl Repo {
    /// Copies `items` (this handle's) into directory `into` (made if missing), each at its
    /// workspace-relative path; refused whole, before anything is written, when
    /// [`check_copy_targets`] refuses them. Each copy is recorded (`trash_restore`, details
    /// `into`, and `node` for another node's item) in the acting node's log.
    pub fn copy_trash_out(&self, items: &[TrashItem], into: &Path, actor: &str) -> Result<Vec<CopiedOut>> {
        check_copy_targets(&items.iter().collect::<Vec<_>>(), into)?;
        std::fs::create_dir_all(into).map_err(|e| Error::io("create", into, e))?;
        let wd = WorkDir::open(into)?;
        let _lease = self.lease("trash copy")?;
        let recorder = self.recorder()?;
        let mut copied = Vec::with_capacity(items.len());
        for item in items {
            let (parent, name) = split(&item.path);
            let mut temp = parent.to_vec();
            if !temp.is_empty() {
                temp.push(b'/');
            }
            temp.extend_from_slice(format!(".trove-copy-{}-", crate::base::random::random_hex()?).as_bytes());
            temp.extend_from_slice(name);
            let mut sink = DirSink { wd: &wd, from: &item.path, to: temp.clone(), dirs: Vec::new() };
            let written = self.export_item(&mut sink, item, &NoProgress).and_then(|()| {
                // Modes last, deepest first: a directory without write permission takes no
                // more members.
                for (dir, mode) in sink.dirs.iter().rev() {
                    wd.set_dir_mode(dir, *mode)?;
                }
                wd.rename(&temp, &item.path, true, &mut Vec::new())
            });
            if let Err(e) = written {
                if let Err(r) = wd.remove(&temp) {
                    tracing::warn!(path = %path::display(&temp), error = %r, "a partly written copy was not removed");
                }
                return Err(e.context(format!("copying trash item {} into {}", item.id, into.display())));
            }
            let to = into.join(path::display(&item.path).to_string());
            let mut rec = AuditRecord::ok(crate::base::time::now_ns(), actor, "trash_restore");
            rec.workspace = Some(item.workspace.clone());
            rec.path = Some(item.path.clone());
            rec.after_sha256 = item.sha256;
            rec.details = serde_json::json!({ "trashId": item.id.to_string(), "into": to.display().to_string() });
            match (self.is_other_node(), item.object) {
                // Another node's object is not in this node's store, where the record's object
                // columns point (`check` looks it up there): named in the details instead.
                (true, Some(object)) => rec.details["object"] = object.to_string().into(),
                (_, object) => rec.after_object = object,
            }
            let rec = self.naming_node(rec);
            recorder.as_ref().unwrap_or(self).audit(rec)?;
            copied.push(CopiedOut {
                trash_id: item.id.clone(),
                path: path::display(&item.path).to_string(),
                to: to.display().to_string(),
                node: self.node().map(str::to_owned),
            });
        }
        Ok(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_copied() {
        for bad in [&b"a/../b"[..], b"../b", b"/etc/x", b"a//b", b"./a", b"a/.", b""] {
            assert!(below(bad).is_err(), "{}", path::display(bad));
        }
        below(b"a/b c/d.txt").expect("a plain path");
    }

    #[test]
    fn a_directory_made_component_by_component_never_climbs_out() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).expect("root");
        let wd = WorkDir::open(&root).expect("open");
        let e = wd.mkdirs(b"q/../../escaped", &mut Vec::new()).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidPath, "{e}");
        assert!(!tmp.path().join("escaped").exists());
    }
}
