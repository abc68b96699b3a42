//! What the tests and fuzzers reach below the public API, with the `testing` feature only: the
//! manifest's rows (to damage or inspect them), the journal's plans (to stage an interrupted
//! change), the work directory and its lock, and the tree codec.

pub use crate::fs::live::READ_LIMIT;
pub use crate::fs::lock::Locked;
pub use crate::fs::workdir::WorkDir;
pub use crate::manifest::{audit, journal, loose, objects, trash, workspaces};
pub use crate::model::tree;
pub use crate::ops::journal::{Plan, Step};
pub use crate::tools::read::sha256_hex;

use crate::repo::Repo;

/// The repository's manifest connection, for raw SQL in a test.
pub fn conn(repo: &Repo) -> &rusqlite::Connection {
    repo.manifest().conn()
}

/// Takes the workspace lock of `live_dir` as a change through `repo` would.
pub fn lock(repo: &Repo, live_dir: &std::path::Path) -> crate::base::error::Result<Locked> {
    repo.lock_live(live_dir)
}
