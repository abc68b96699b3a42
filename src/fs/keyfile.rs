//! The audit log's signing key on disk: one line, `PRIVATE+KEY+<name>+<key id>+<key>`, in a
//! file only its owner can read, kept outside the manifest.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::base::error::{Error, Result};
use crate::tlog::note::SignerKey;

/// Writes a new signing key for log `origin` to `path`, readable by its owner only; an
/// existing key there is kept and used (an operator may provision one).
pub fn create_key(path: &Path, origin: &str) -> Result<SignerKey> {
    if path.exists() {
        return read_key(path);
    }
    let key = SignerKey::generate(origin)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create the directory of", path, e))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("create the audit key", path, e))?;
    f.write_all(format!("{}\n", key.to_text()).as_bytes()).map_err(|e| Error::io("write", path, e))?;
    f.sync_all().map_err(|e| Error::io("sync", path, e))?;
    Ok(key)
}

/// The signing key in `path`.
pub fn read_key(path: &Path) -> Result<SignerKey> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read the audit key", path, e))?;
    SignerKey::parse(&text).map_err(|e| e.context(format!("{} is not an audit signing key", path.display())))
}
