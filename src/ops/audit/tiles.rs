//! A node's audit log published in its bucket in the C2SP `tlog-tiles` layout, under
//! `nodes/<node>/tlog/`: hash tiles and entry bundles (each created once), then the checkpoint
//! (the node's newest signed note, the one value replaced in place); and the verification of
//! what is published there with nothing but the bucket and the node's public key.
//!
//! What is published is plain, not sealed: a C2SP reader (a witness, a monitor, an auditor's
//! own tool) must read it without the repository's key. So a fleet's audit records (paths,
//! actors, hashes; never file contents) are readable by whoever can read the bucket.

use std::collections::HashMap;
use std::path::Path;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::NodeName;
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::manifest::log::Owner;
use crate::model::audit::{AuditRecord, Checkpointed, VerifyReport};
use crate::object::{Backend, Location, S3Backend, S3Settings};
use crate::repo::Repo;
use crate::tlog::merkle::{self, Frontier, Hash, Nodes};
use crate::tlog::note::VerifierKey;
use crate::tlog::tiles::{self, Tile, CHECKPOINT, HEIGHT, MAX_CHECKPOINT, MAX_ENTRY};

use super::verify::{open_checkpoint, Checker, Opened};

/// Where node `node`'s log is published in its bucket.
pub fn published_prefix(node: &str) -> String {
    format!("nodes/{node}/tlog/")
}

impl Repo {
    /// Publishes this node's log as far as checkpoint `c`: the tiles a reader of the checkpoint
    /// published before lacks, then `c` in its place. Nothing outside a bucket of a log per
    /// node, and nothing when the published checkpoint is as large already.
    pub(crate) fn publish_tiles(&self, c: &Checkpointed) -> Result<()> {
        let Some(keys) = self.bucket_keys.as_deref() else { return Ok(()) };
        let Owner::Node { node, .. } = &keys.owner else { return Ok(()) };
        let store = keys.store.inner().inner();
        let prefix = published_prefix(node);
        let at = format!("{prefix}{CHECKPOINT}");
        let published = published_size(store, &at, &self.signer()?.verifier(), c.size)?;
        if published >= c.size {
            return Ok(());
        }
        for tile in tiles::tiles(published, c.size) {
            let (hashes, bundle) = self.manifest.read(|| tile_bytes(self.manifest.conn(), tile))?;
            if let Some(bundle) = bundle {
                store.put(&format!("{prefix}{}", tile.entries_path()), &bundle)?;
            }
            store.put(&format!("{prefix}{}", tile.path()), &hashes)?;
        }
        store.replace(&at, c.note.as_bytes())?;
        tracing::debug!(node = %node, from = published, to = c.size, "published the audit log's tiles");
        // A full tile supersedes its partial ones, which C2SP lets a log delete (a reader of
        // an older checkpoint that misses one reads the full tile): so a tile's bytes are kept
        // about once, however often the log was checkpointed while it filled.
        for tile in tiles::tiles(published, c.size).into_iter().filter(|t| t.width == tiles::WIDTH) {
            let mut paths = vec![tile.path()];
            if tile.level == 0 {
                paths.push(tile.entries_path());
            }
            for path in paths {
                remove_partials(store, &format!("{prefix}{path}.p/"));
            }
        }
        Ok(())
    }
}

/// Deletes every partial tile under `under` (`…/<N>.p/`), each failure logged: one left
/// behind is only bytes (it is not looked for again), never a wrong answer.
fn remove_partials(store: &S3Backend, under: &str) {
    let keys = match store.list(under) {
        Ok(keys) => keys,
        Err(e) => {
            tracing::warn!(prefix = under, error = %e, "superseded partial tiles were not listed; left in the bucket");
            return;
        }
    };
    for key in keys {
        if let Err(e) = store.delete(&key) {
            tracing::warn!(key, error = %e, "a superseded partial tile was not deleted; left in the bucket");
        }
    }
}

/// The size of the checkpoint published at `at`: 0 when there is none, or when it is not one
/// `key` signed of a log no larger than `size`, what this node stores (logged: someone wrote
/// it who is not this node; every tile is then written again, which changes none that is
/// right, and the checkpoint replaced).
fn published_size(store: &S3Backend, at: &str, key: &VerifierKey, size: u64) -> Result<u64> {
    let bytes = match store.get_whole(at, MAX_CHECKPOINT) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    match open_checkpoint(std::slice::from_ref(key), &text) {
        Ok(c) if c.size <= size => Ok(c.size),
        Ok(c) => {
            tracing::warn!(
                key = at,
                published = c.size,
                stored = size,
                "the published checkpoint signs more records than this node stores; publishing every tile again"
            );
            Ok(0)
        }
        Err(e) => {
            tracing::warn!(key = at, error = %e, "the published checkpoint is not this node's; publishing every tile again");
            Ok(0)
        }
    }
}

/// Tile `tile`'s hashes and, at level 0, its entry bundle, from the manifest.
fn tile_bytes(conn: &rusqlite::Connection, tile: Tile) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    let mut hashes = Vec::with_capacity(tile.width as usize * 32);
    if tile.level > 0 {
        let nodes = StoredNodes(conn);
        for i in 0..tile.width {
            hashes.extend_from_slice(&nodes.node(tile.level * HEIGHT, tile.first() + i)?);
        }
        return Ok((hashes, None));
    }
    let mut bundle = Vec::new();
    let (from, to) = (tile.first() as i64 + 1, (tile.first() + tile.width) as i64);
    manifest::audit::each_checked_to(conn, from, to, |full, stored, _| {
        let entry = stored.unwrap_or_else(|| full.record.encode(full.seq));
        tiles::push_entry(&mut bundle, &entry)
            .map_err(|e| Error::corrupt(format!("audit record {}: {}", full.seq, e.message())))?;
        hashes.extend_from_slice(&merkle::leaf_hash(&entry));
        Ok(())
    })?;
    if hashes.len() as u64 != tile.width * 32 {
        return Err(Error::corrupt(format!(
            "the audit log lacks records {from} to {to}, which its checkpoint covers: run `trove audit verify`"
        )));
    }
    Ok((hashes, Some(bundle)))
}

/// Verifies node `node`'s log as published in the bucket at `path` (`s3://BUCKET/PREFIX`),
/// reading nothing else: no passphrase, no cache, no replica. The checkpoint must be signed by
/// one of `keys` over the node's own log; every entry must be a record in its canonical
/// encoding, in seq order from 1; the hashes of every tile must be those of the entries and
/// the tree they make; and the entries must hash to the signed root.
pub fn verify_published(path: &Path, node: &NodeName, keys: &[VerifierKey]) -> Result<VerifyReport> {
    let Location::Bucket { bucket, prefix } = Location::parse(path.as_os_str())? else {
        return Err(Error::invalid_argument(format!(
            "{} is a directory: only a bucket of a log per node publishes its nodes' logs (--node)",
            path.display()
        )));
    };
    let store = S3Backend::open(&bucket, &prefix, &S3Settings::default())?;
    verify_in(&store, node, keys)
}

/// [`verify_published`] over `store`, the bucket beneath any sealing.
pub(crate) fn verify_in(store: &dyn Backend, node: &NodeName, keys: &[VerifierKey]) -> Result<VerifyReport> {
    if keys.is_empty() {
        return Err(Error::invalid_argument(
            "a node's published log verifies with its public key: give it with --pubkey",
        ));
    }
    let prefix = published_prefix(node.as_str());
    let at = format!("{prefix}{CHECKPOINT}");
    let note = store.get_whole(&at, MAX_CHECKPOINT).map_err(|e| match e.kind() {
        ErrorKind::NotFound => Error::not_found(format!(
            "node {node} has published no checkpoint ({at}): it has written no checkpoint yet, or it is no node of this bucket"
        )),
        _ => e,
    })?;
    let note = String::from_utf8(note).map_err(|_| Error::corrupt(format!("{at} is not text: not a checkpoint")))?;
    let c = open_checkpoint(keys, &note).map_err(|e| e.context(at.clone()))?;
    if !c.origin.ends_with(&format!("/{node}")) {
        return Err(Error::corrupt(format!("{at} is a checkpoint of log '{}', not of node {node}'s", c.origin)));
    }
    let opened = Opened { size: c.size, root: c.root, time_ns: c.time_ns };
    let mut check = Checker::new(Frontier::new(), vec![opened], 1);
    // The nodes at every eighth level of the tree, as the entries make them: what the hash
    // tiles above level 0 must hold (about 1/256 of the entries' count, 40 bytes each).
    let mut made: HashMap<(u32, u64), Hash> = HashMap::new();
    let mut tree = Frontier::new();
    // Tile by tile as they are read: the size is the signer's word, which a dishonest node can
    // make any number, so nothing is sized by it.
    'entries: for tile in tiles::level_tiles(c.size, 0) {
        let tile = &tile;
        let bundle_at = format!("{prefix}{}", tile.entries_path());
        let hashes_at = format!("{prefix}{}", tile.path());
        let fetched = read_tile(store, &prefix, *tile, true)
            .and_then(|b| read_tile(store, &prefix, *tile, false).map(|h| (b, h)));
        let (bundle, hashes) = match fetched {
            Ok(f) => f,
            Err(e) => {
                check.problem(
                    Some(tile.first() as i64 + 1),
                    format!("the tiles of records from {} cannot be read: {e}", tile.first() + 1),
                );
                break;
            }
        };
        let parsed = tiles::split_bundle(&bundle_at, &bundle, tile.width)
            .and_then(|entries| tiles::split_hashes(&hashes_at, &hashes, tile.width).map(|h| (entries, h)));
        let (entries, hashes) = match parsed {
            Ok(p) => p,
            Err(e) => {
                check.problem(Some(tile.first() as i64 + 1), e.message().to_string());
                break;
            }
        };
        for (i, (entry, hash)) in entries.iter().zip(&hashes).enumerate() {
            let index = tile.first() + i as u64;
            let (seq, record): (i64, AuditRecord) = match AuditRecord::decode(entry) {
                Ok(d) => d,
                Err(e) => {
                    check.problem(Some(index as i64 + 1), format!("entry {index} of {bundle_at}: {}", e.message()));
                    break 'entries;
                }
            };
            let leaf = merkle::leaf_hash(entry);
            if leaf != *hash {
                check.problem(Some(seq), format!("{hashes_at} holds another hash for record {seq} than its entry's"));
            }
            for (level, i, h) in tree.push(leaf) {
                // The leaves themselves are checked above, against the level-0 tile.
                if level > 0 && level % HEIGHT == 0 {
                    made.insert((level / HEIGHT, i), h);
                }
            }
            // The entry must be the record's canonical encoding, as the signer's log keeps it.
            if !check.record(seq, entry, Some(&record.encode(seq)), None, record.time_ns) {
                break 'entries;
            }
        }
    }
    if tree.size() == c.size {
        for tile in (1..64 / HEIGHT).flat_map(|level| tiles::level_tiles(c.size, level)) {
            let tile = &tile;
            let at = format!("{prefix}{}", tile.path());
            let hashes = read_tile(store, &prefix, *tile, false).and_then(|h| tiles::split_hashes(&at, &h, tile.width));
            match hashes {
                Ok(hashes) => {
                    let wrong = (0..tile.width)
                        .find(|&i| made.get(&(tile.level, tile.first() + i)) != Some(&hashes[i as usize]));
                    if let Some(i) = wrong {
                        check.problem(
                            None,
                            format!("{at} holds another hash for node {} than the entries make", tile.first() + i),
                        );
                    }
                }
                Err(e) => check.problem(None, format!("tile {at} cannot be read: {e}")),
            }
        }
    }
    Ok(check.finish())
}

/// Tile `tile`'s bytes (its entry bundle with `entries`, else its hashes); a partial tile that
/// is gone (superseded by its full tile since the checkpoint was read) is the full tile's first
/// `width` hashes or entries.
fn read_tile(store: &dyn Backend, prefix: &str, tile: Tile, entries: bool) -> Result<Vec<u8>> {
    let limit = |t: Tile| if entries { t.width * (2 + MAX_ENTRY as u64) } else { t.width * 32 };
    let path = |t: Tile| format!("{prefix}{}", if entries { t.entries_path() } else { t.path() });
    match store.get_whole(&path(tile), limit(tile)) {
        Err(e) if e.kind() == ErrorKind::NotFound && tile.width < tiles::WIDTH => {
            let full = Tile { width: tiles::WIDTH, ..tile };
            let bytes = store.get_whole(&path(full), limit(full)).map_err(|_| e)?;
            if !entries {
                return Ok(bytes.get(..tile.width as usize * 32).unwrap_or(&bytes).to_vec());
            }
            // The first `width` entries of the full bundle.
            let mut end = 0usize;
            for _ in 0..tile.width {
                let Some(len) = bytes.get(end..end + 2) else { break };
                end = (end + 2 + u16::from_be_bytes([len[0], len[1]]) as usize).min(bytes.len());
            }
            Ok(bytes[..end].to_vec())
        }
        other => other,
    }
}
