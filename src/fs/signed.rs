//! What the audit log's signing key signed last, kept beside the key (`<key file>.signed`) and
//! out of the manifest's reach: the size, root, time and Merkle frontier of the last checkpoint,
//! so the signer signs only a log that extends it (issue 36); and the lock that keeps two
//! processes from signing at once.
//!
//! The file is one JSON object (ARCHITECTURE.md, "Audit log"), replaced whole through a
//! temporary file, fsync and rename, so a crash leaves the old state or the new one.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::tlog::merkle::{Frontier, Hash};

/// The format name the file carries.
const FORMAT: &str = "trove-audit-signed/1";
/// The file is a few hundred bytes (at most 64 frontier hashes); anything far larger is not it.
const MAX_LEN: u64 = 64 << 10;

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// The last checkpoint a key signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The log's name (the key's).
    pub origin: String,
    /// Records it signs.
    pub size: u64,
    /// Their Merkle root.
    pub root: Hash,
    /// When it was signed (ns).
    pub time_ns: i64,
    /// The right edge of the tree of those records: what the next checkpoint's root is grown
    /// from, without trusting the manifest's copy of the tree.
    pub frontier: Frontier,
}

/// The file as stored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Stored {
    format: String,
    origin: String,
    size: u64,
    root: String,
    time_ns: i64,
    /// The frontier's perfect subtrees, left to right: (level, base64 hash).
    frontier: Vec<(u32, String)>,
}

/// Where the state of the key at `key` is kept: `<key>.signed`.
pub fn state_path(key: &Path) -> PathBuf {
    let mut name = key.as_os_str().to_owned();
    name.push(".signed");
    PathBuf::from(name)
}

/// The state kept at `path`, or `None` if there is none yet (a key from before the state was
/// kept, or one that never signed).
pub fn read_signed(path: &Path) -> Result<Option<Signed>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open the audit signer's state", path, e)),
    };
    let mut text = Vec::new();
    f.take(MAX_LEN + 1).read_to_end(&mut text).map_err(|e| Error::io("read the audit signer's state", path, e))?;
    let bad = |what: &str| {
        Error::corrupt(format!(
            "{} is not the audit signer's state ({what}): restore it from a backup, or move it aside once `trove audit verify` passes",
            path.display()
        ))
    };
    if text.len() as u64 > MAX_LEN {
        return Err(bad("it is too long"));
    }
    let s: Stored = serde_json::from_slice(&text).map_err(|_| bad("it does not parse"))?;
    if s.format != FORMAT {
        return Err(bad("an unknown format"));
    }
    let hash =
        |h: &str| -> Result<Hash> { b64().decode(h).ok().and_then(|h| h.try_into().ok()).ok_or_else(|| bad("a hash")) };
    let root = hash(&s.root)?;
    let edge = s.frontier.iter().map(|(l, h)| Ok((*l, hash(h)?))).collect::<Result<Vec<_>>>()?;
    let frontier = Frontier::from_edge(edge).map_err(|_| bad("its frontier"))?;
    if frontier.size() != s.size || frontier.root() != root {
        return Err(bad("its frontier is not of its size and root"));
    }
    Ok(Some(Signed { origin: s.origin, size: s.size, root, time_ns: s.time_ns, frontier }))
}

/// Replaces the state at `path` with `signed`: a temporary file beside it, synced, renamed over
/// it, and the directory synced, readable by its owner only.
pub fn write_signed(path: &Path, signed: &Signed) -> Result<()> {
    let stored = Stored {
        format: FORMAT.into(),
        origin: signed.origin.clone(),
        size: signed.size,
        root: b64().encode(signed.root),
        time_ns: signed.time_ns,
        frontier: signed.frontier.edge().iter().map(|(l, h)| (*l, b64().encode(h))).collect(),
    };
    let mut text =
        serde_json::to_vec(&stored).map_err(|e| Error::internal(format!("encoding the signer's state: {e}")))?;
    text.push(b'\n');
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(&text).map_err(|e| Error::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename into place", path, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync", dir, e))?;
    }
    Ok(())
}

/// The key file held exclusively (`flock`): one signer at a time, across processes, from
/// reading the state to writing it. Released when dropped, or by the kernel if the process dies.
pub struct KeyLock {
    _file: File,
}

/// Waits for the lock of the key at `key`.
pub fn lock_key(key: &Path) -> Result<KeyLock> {
    let file = File::open(key).map_err(|e| Error::io("open the audit key", key, e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| Error::io("lock the audit key", key, e.into()))?;
    Ok(KeyLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlog::merkle::leaf_hash;

    #[test]
    fn the_state_round_trips_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let key = dir.path().join("audit.key");
        let path = state_path(&key);
        assert_eq!(path, dir.path().join("audit.key.signed"));
        assert_eq!(read_signed(&path).expect("read"), None);
        let mut frontier = Frontier::new();
        for i in 0..11u8 {
            frontier.push(leaf_hash(&[i]));
        }
        let s = Signed { origin: "trove/x".into(), size: 11, root: frontier.root(), time_ns: 42, frontier };
        write_signed(&path, &s).expect("write");
        assert_eq!(read_signed(&path).expect("read"), Some(s.clone()));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        // A root that is not the frontier's, or a size that is not, is refused.
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.replace("\"size\":11", "\"size\":12")).expect("write");
        assert!(read_signed(&path).is_err());
        std::fs::write(&path, "{}").expect("write");
        assert!(read_signed(&path).is_err());
    }
}
