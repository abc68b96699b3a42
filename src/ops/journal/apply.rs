//! Carrying out one step of a plan on the tree (step 3 of `journal`'s order of work): each
//! checks the file's sha256 immediately before its rename; and the refusals it answers with.

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::fs::workdir::{Kind, WorkDir};
use crate::model::trash::TrashItem;
use crate::model::tree::EntryKind;

use super::plan::{hex_sha, Plan, Step};

/// The stale-file refusal for `path`, whose sha256 is now `current` (`None`: nothing there),
/// where the caller expected `expected`: one message per situation, and the facts an agent
/// needs to retry (`currentSha256`, `suggestedAction`).
pub fn stale(path: &[u8], current: Option<String>, expected: Option<&str>) -> Error {
    let shown = path::display(path);
    let msg = match (expected, &current) {
        (None, Some(_)) => format!(
            "'{shown}' exists and no expectedSha256 was given: read the file first and pass its sha256 as expectedSha256"
        ),
        (_, None) => format!("'{shown}' does not exist (any more): re-read the directory, and use create_file to make it"),
        (Some(_), Some(_)) => format!(
            "'{shown}' has changed since you read it (sha256 differs): re-read the file to get its current sha256 and re-apply your edit"
        ),
    };
    Error::new(ErrorKind::StaleFile, msg)
        .with_detail("path", shown.as_ref())
        .with_detail("currentSha256", current)
        .with_detail("expectedSha256", expected.map(str::to_string))
        .with_detail("suggestedAction", "Re-read the file to obtain the current sha256 and re-apply your edit.")
}

/// Checks that `path` holds what `before` says (`None`: nothing), right now.
pub(super) fn verify(wd: &WorkDir, path: &[u8], before: Option<&str>) -> Result<()> {
    let now = wd.current(path);
    match (before, now) {
        (Some(want), Ok(Some(cur))) if hex_sha(&cur.sha256) == want => Ok(()),
        (Some(want), Ok(Some(cur))) => Err(stale(path, Some(hex_sha(&cur.sha256)), Some(want))),
        (Some(want), Ok(None)) => Err(stale(path, None, Some(want))),
        (None, Ok(None)) => Ok(()),
        (None, Ok(Some(_))) => Err(already_exists(path)),
        (None, Err(e)) if e.kind() == ErrorKind::IsDirectory => Err(already_exists(path)),
        (_, Err(e)) => Err(e),
    }
}

pub fn already_exists(path: &[u8]) -> Error {
    let shown = path::display(path);
    Error::new(
        ErrorKind::AlreadyExists,
        format!("'{shown}' already exists: read it and use write_file or edit_file, or choose another path"),
    )
    .with_detail("path", shown.as_ref())
}

/// What a removal checks before its rename: a file still has `before`; a directory still
/// holds exactly what was recorded in the trash (names, kinds, file hashes), so nothing
/// written into it since is thrown away unrecorded.
pub(super) fn apply_check_remove(wd: &WorkDir, path: &[u8], before: Option<&str>, trash: &TrashItem) -> Result<()> {
    if before.is_some() {
        return verify(wd, path, before);
    }
    let mut walked = Vec::new();
    match wd.stat(path)? {
        Some(m) if m.kind == Kind::Dir => wd.walk(path, &mut walked)?,
        Some(_) => return Err(stale(path, None, None)),
        None => return Err(stale(path, None, None)),
    }
    let mut now = Vec::with_capacity(walked.len());
    for (child, m) in walked {
        let Some(rel) = child.get(path.len() + 1..).map(<[u8]>::to_vec) else {
            return Err(Error::internal(format!(
                "'{}' was walked under '{}'",
                path::display(&child),
                path::display(path)
            )));
        };
        let sha = match m.kind {
            Kind::File => wd.current(&child)?.map(|c| c.sha256),
            _ => None,
        };
        let kind = match m.kind {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink,
            Kind::Other => continue,
        };
        now.push((rel, kind, sha));
    }
    let recorded: Vec<_> = trash.entries.iter().map(|e| (e.rel.clone(), e.kind, e.sha256)).collect();
    if now != recorded {
        let shown = path::display(path);
        return Err(Error::new(
            ErrorKind::StaleFile,
            format!("directory '{shown}' changed while it was being deleted: list it again and retry"),
        )
        .with_detail("path", shown.as_ref()));
    }
    Ok(())
}

/// Step 3 for one step: check, then rename.
pub(super) fn apply(wd: &WorkDir, s: &Step) -> Result<()> {
    let mut made = Vec::new();
    match s {
        Step::Write { path, tmp, before, .. } => {
            verify(wd, path, before.as_deref())?;
            wd.rename(tmp, path, before.is_none(), &mut made)
        }
        Step::Remove { path, grave, before, trash } => {
            apply_check_remove(wd, path, before.as_deref(), trash)?;
            wd.rename(path, grave, true, &mut made)
        }
        Step::Move { from, to, sha256, .. } => {
            match sha256 {
                Some(_) => verify(wd, from, sha256.as_deref())?,
                None if wd.stat(from)?.is_none() => return Err(stale(from, None, None)),
                None => {}
            }
            wd.rename(from, to, true, &mut made)
        }
        // Staging a restored directory's files may have made it and its parents already.
        Step::Mkdir { path, mode } => {
            match wd.stat(path)? {
                Some(m) if m.kind == Kind::Dir => {}
                Some(_) => return Err(already_exists(path)),
                None => wd.mkdirs(path, &mut made)?,
            }
            match mode {
                Some(mode) => wd.set_dir_mode(path, mode | 0o700),
                None => Ok(()),
            }
        }
        Step::Symlink { path, target } => wd.symlink(path, target, &mut made).map_err(|e| match e.kind() {
            ErrorKind::AlreadyExists => already_exists(path),
            _ => e,
        }),
    }
}

/// Step 4: deletes what removals set aside.
pub(super) fn bury(wd: &WorkDir, plan: &Plan) -> Result<()> {
    for s in &plan.steps {
        if let Step::Remove { grave, .. } = s {
            wd.remove(grave)?;
        }
    }
    Ok(())
}
