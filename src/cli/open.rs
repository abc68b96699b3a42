//! Opening the repository with the command line's global settings: `--cache-dir` (or
//! `TROVE_CACHE_DIR`), `--cache-size` (or `TROVE_CACHE_SIZE`) and `--batch-files` (or
//! `TROVE_BATCH_FILES`), read once when the command line is parsed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static CACHE_DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
static BATCH_FILES: OnceLock<Option<u64>> = OnceLock::new();
static CACHE_SIZE: OnceLock<Option<u64>> = OnceLock::new();
static NODE: OnceLock<Option<trove::NodeName>> = OnceLock::new();

/// Keeps `--node` for the commands' opens; the first call wins.
pub(crate) fn set_node(node: Option<trove::NodeName>) {
    let _ = NODE.set(node);
}

/// `--node` (or `TROVE_NODE`), if given.
pub(crate) fn node() -> Option<trove::NodeName> {
    NODE.get().cloned().flatten()
}

/// Keeps `--cache-size` for the commands' opens; the first call wins.
pub(crate) fn set_cache_size(bytes: Option<u64>) {
    let _ = CACHE_SIZE.set(bytes);
}

/// `--cache-size`, if given.
pub(crate) fn cache_size() -> Option<u64> {
    CACHE_SIZE.get().copied().flatten()
}

/// Keeps `--batch-files` for the commands' opens; the first call wins.
pub(crate) fn set_batch_files(files: Option<u64>) {
    let _ = BATCH_FILES.set(files);
}

/// Keeps `--cache-dir` for the commands' opens; the first call wins.
pub(crate) fn set_cache_dir(dir: Option<PathBuf>) {
    let _ = CACHE_DIR.set(dir);
}

/// `--batch-files`, if given.
pub(crate) fn batch_files() -> Option<u64> {
    BATCH_FILES.get().copied().flatten()
}

/// `--cache-dir`, if given.
pub(crate) fn cache_dir() -> Option<&'static Path> {
    CACHE_DIR.get().and_then(|d| d.as_deref())
}

/// Opens the repository at `path` with the command line's cache directory.
pub(crate) fn open_repo(path: &Path) -> trove::Result<trove::Repo> {
    let mut repo = trove::Repo::open_as(path, cache_dir(), cache_size(), node())?;
    if let Some(files) = batch_files() {
        repo.set_batch_files(files);
    }
    Ok(repo)
}
