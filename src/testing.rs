//! What the tests and fuzzers reach below the public API, with the `testing` feature only: the
//! manifest's rows (to damage or inspect them), the journal's plans (to stage an interrupted
//! change), the work directory and its lock, and the tree, directory record and posting codecs.

pub use crate::base::failpoint::{clear_hooks, set_hook};
pub use crate::fs::live::READ_LIMIT;
pub use crate::fs::lock::Locked;
pub use crate::fs::workdir::WorkDir;
pub use crate::manifest::dir_cache::PART as DIR_CACHE_PART;
pub use crate::manifest::{audit, grams, journal, loose, objects, trash, workspaces};
pub use crate::model::dir_cache;
pub use crate::model::tree;
pub use crate::ops::journal::{Plan, Step};
pub use crate::tools::read::sha256_hex;

use crate::repo::Repo;

/// The connection of the repository's node-local cache (its directory records), for raw SQL in
/// a test; None when it cannot be opened.
pub fn cache_conn(repo: &Repo) -> Option<&rusqlite::Connection> {
    repo.node_cache().map(|c| c.conn())
}

/// The repository's manifest connection, for raw SQL in a test.
pub fn conn(repo: &Repo) -> &rusqlite::Connection {
    repo.manifest().conn()
}

/// Takes a lease as an operation in flight would: garbage collection keeps what was live when
/// it began until it is dropped.
pub fn lease<'r>(repo: &'r Repo, what: &str) -> crate::base::error::Result<crate::ops::lease::Lease<'r>> {
    repo.lease(what)
}

/// How many objects tool changes in flight keep as roots in the log (`plan_roots`).
pub fn plan_roots(repo: &Repo) -> crate::base::error::Result<u64> {
    repo.manifest()
        .conn()
        .query_row("SELECT COUNT(*) FROM plan_roots", [], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
        .map_err(|e| crate::base::error::Error::db("counting plan roots", e))
}

/// Takes the workspace lock of `live_dir` as a change through `repo` would.
pub fn lock(repo: &Repo, live_dir: &std::path::Path) -> crate::base::error::Result<Locked> {
    repo.lock_live(live_dir)
}

/// The file entries of every directory record: (trusted, racy). A trusted file is not read
/// again while its stat holds; a racy one is read at the next snapshot whatever its stat says.
pub fn dir_cache_files(repo: &Repo) -> crate::base::error::Result<(usize, usize)> {
    use crate::model::dir_cache::Record;
    use crate::model::tree::EntryKind;
    let Some(cache) = repo.node_cache() else { return Ok((0, 0)) };
    let mut blobs = Vec::new();
    crate::manifest::dir_cache::for_each(cache.conn(), None, |_, _, blob| {
        blobs.push(blob);
        Ok(())
    })?;
    let (mut trusted, mut racy) = (0, 0);
    for blob in &blobs {
        let record =
            Record::parse(blob).ok_or_else(|| crate::base::error::Error::corrupt("a record does not parse"))?;
        for e in record.entries() {
            let e = e.map_err(|()| crate::base::error::Error::corrupt("a record entry does not parse"))?;
            match (e.kind, e.racy) {
                (EntryKind::File, false) => trusted += 1,
                (EntryKind::File, true) => racy += 1,
                _ => {}
            }
        }
    }
    Ok((trusted, racy))
}
