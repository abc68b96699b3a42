//! Small id files a cache directory keeps (a host's id, a node's writer id): read, or made
//! once, whole and synced beside the name, then put in place unless another process made it
//! first (whose id is then the one read).

use std::path::Path;

use crate::base::error::{Error, Result};

/// The id in `path`, which `valid` accepts; made there by `make` first if it has none. A file
/// there holding no valid id is `corrupt`, with `advice` (what to do about it) in the message.
pub(crate) fn read_or_make(
    path: &Path,
    valid: impl Fn(&str) -> bool,
    make: impl FnOnce() -> Result<String>,
    advice: &str,
) -> Result<String> {
    let read = |path: &Path| -> Result<Option<String>> {
        match std::fs::read_to_string(path) {
            Ok(s) if valid(s.trim()) => Ok(Some(s.trim().to_owned())),
            Ok(_) => Err(Error::corrupt(format!("{} does not hold an id: {advice}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", path, e)),
        }
    };
    if let Some(id) = read(path)? {
        return Ok(id);
    }
    let id = make()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io("create a file in", dir, e))?;
    std::io::Write::write_all(&mut tmp, id.as_bytes()).map_err(|e| Error::io("write", tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io("sync", tmp.path(), e))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(id),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            read(path)?.ok_or_else(|| Error::internal(format!("{} vanished as it was made", path.display())))
        }
        Err(e) => Err(Error::io("create", path, e.error)),
    }
}
