//! Reading a snapshot back: resolving references, looking up paths, listing trees, and a
//! verifying reader over a file's content.

use std::io::{self, Read};

use crate::base::error::{from_io, Error, ErrorKind, Result};
use crate::base::path;
use crate::fs::walk::join_rel;
use crate::manifest::objects::Location;
use crate::manifest::snapshots;
use crate::manifest::{objects, trees};
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::{Entry, EntryKind};
use crate::object::bundle::BundleCache;
use crate::object::delta::{self, Link};
use crate::object::{blob, Backend, ObjectId};
use crate::repo::Repo;

impl Repo {
    /// Snapshots oldest first, of one workspace or all.
    pub fn snapshots(&self, workspace: Option<&str>) -> Result<Vec<SnapshotInfo>> {
        snapshots::list(self.manifest.conn(), workspace)
    }

    /// Resolves `latest`, a full snapshot id or a unique prefix.
    pub fn resolve_snapshot(&self, reference: &str, workspace: Option<&str>) -> Result<SnapshotInfo> {
        snapshots::resolve(self.manifest.conn(), reference, workspace)
    }

    /// The entry at `path` in `snap`; the empty path is the root directory.
    pub fn lookup(&self, snap: &SnapshotInfo, path: &[u8]) -> Result<Entry> {
        let parts = path::components(path)?;
        let mut entry = Entry {
            name: Vec::new(),
            kind: EntryKind::Dir,
            mode: 0o755,
            size: 0,
            mtime_ns: snap.created_ns,
            content: Some(snap.root),
            sha256: None,
            target: None,
        };
        for (i, part) in parts.iter().enumerate() {
            let tree = match (entry.kind, entry.content) {
                (EntryKind::Dir, Some(t)) => t,
                _ => {
                    return Err(Error::not_found(format!(
                        "'{}' is not a directory in snapshot {}",
                        path::display(&parts[..i].join(&b'/')),
                        short_id(snap.id.as_str())
                    )))
                }
            };
            entry = self.caches.trees.entry(self.manifest.conn(), &tree, part)?.ok_or_else(|| {
                Error::not_found(format!(
                    "'{}' is not in snapshot {}: list it with `trove ls {} --recursive`",
                    path::display(path),
                    short_id(snap.id.as_str()),
                    short_id(snap.id.as_str())
                ))
            })?;
        }
        Ok(entry)
    }

    /// Calls `each(path, entry)` for the entries under directory `path` of `snap`, in path
    /// order; all levels below when `recursive`. A file path lists that one file.
    pub fn list(
        &self,
        snap: &SnapshotInfo,
        path: &[u8],
        recursive: bool,
        each: &mut dyn FnMut(&[u8], &Entry) -> Result<()>,
    ) -> Result<()> {
        self.manifest.read(|| {
            let entry = self.lookup(snap, path)?;
            let prefix = path::components(path)?.join(&b'/');
            match (entry.kind, entry.content) {
                (EntryKind::Dir, Some(tree)) => self.list_tree(&tree, &prefix, recursive, each),
                _ => each(&prefix, &entry),
            }
        })
    }

    /// Pre-order listing below `tree`, with an explicit stack of open directories, so depth
    /// costs heap, never thread stack.
    fn list_tree(
        &self,
        tree: &ObjectId,
        prefix: &[u8],
        recursive: bool,
        each: &mut dyn FnMut(&[u8], &Entry) -> Result<()>,
    ) -> Result<()> {
        let conn = self.manifest.conn();
        let mut stack: Vec<(std::vec::IntoIter<Entry>, Vec<u8>)> =
            vec![(trees::entries(conn, tree)?.into_iter(), prefix.to_vec())];
        while let Some((entries, dir)) = stack.last_mut() {
            let Some(e) = entries.next() else {
                stack.pop();
                continue;
            };
            let p = join_rel(dir, &e.name);
            each(&p, &e)?;
            if let (true, EntryKind::Dir, Some(child)) = (recursive, e.kind, e.content) {
                self.check_deadline("listing a snapshot")?;
                stack.push((trees::entries(conn, &child)?.into_iter(), p));
            }
        }
        Ok(())
    }

    /// Reads and verifies one object, following its chain of deltas if it is stored as one.
    pub fn read_object(&self, id: &ObjectId) -> Result<Vec<u8>> {
        read_stored(self.manifest.conn(), self.backend.as_ref(), &self.caches.bundles, id)
    }

    /// A reader over a file entry's content, verifying every object as it goes.
    pub fn open_content(&self, entry: &Entry) -> Result<ContentReader<'_>> {
        let id = match (entry.kind, entry.content) {
            (EntryKind::File, Some(id)) => id,
            (EntryKind::Dir, _) => {
                return Err(Error::new(
                    ErrorKind::IsDirectory,
                    format!("'{}' is a directory", path::display(&entry.name)),
                ))
            }
            _ => {
                return Err(Error::invalid_argument(format!(
                    "'{}' is a symlink; its target is {}",
                    path::display(&entry.name),
                    path::display(entry.target.as_deref().unwrap_or(b""))
                )))
            }
        };
        self.open_object(id, Some(entry.size))
    }

    /// Whether file content `id` is in the repository (a live file's content may not be, until
    /// a snapshot or a tool stores it).
    pub fn content_stored(&self, id: &ObjectId) -> Result<bool> {
        crate::manifest::loose::content_stored(self.manifest.conn(), id)
    }

    /// A reader over a file content by its id (one object, packed or loose, or a chunk list),
    /// verifying every object as it goes; `size`, when known, must match at the end.
    pub fn open_object(&self, id: ObjectId, size: Option<u64>) -> Result<ContentReader<'_>> {
        let chunks = objects::chunk_list(self.manifest.conn(), &id)?;
        let (parts, whole) = if chunks.is_empty() {
            (vec![id], None)
        } else {
            (chunks.into_iter().map(|(_, c)| c).collect(), Some(blake3::Hasher::new()))
        };
        Ok(ContentReader {
            repo: self,
            content: id,
            parts,
            next: 0,
            buf: Vec::new(),
            pos: 0,
            expected: size,
            read: 0,
            whole,
        })
    }

    /// The bytes of a file content object (loose or packed, whole or chunked), verified.
    pub fn content_bytes(&self, hex_id: &str) -> Result<Vec<u8>> {
        let id = ObjectId::from_hex(hex_id)?;
        let chunks = objects::chunk_list(self.manifest.conn(), &id)?;
        if chunks.is_empty() {
            return self.read_object(&id);
        }
        let mut out = Vec::new();
        for (_, c) in chunks {
            out.extend_from_slice(&self.read_object(&c)?);
        }
        if ObjectId::of(&out) != id {
            return Err(Error::corrupt(format!("the chunks of {id} do not add up to it; run `trove check`")));
        }
        Ok(out)
    }

    /// The whole content of a file entry, verified.
    pub fn read_content(&self, entry: &Entry) -> Result<Vec<u8>> {
        // The entry's size is only a hint: a damaged or huge one must not size an allocation.
        let mut out = Vec::with_capacity(entry.size.min(64 << 20) as usize);
        self.open_content(entry)?.read_to_end(&mut out).map_err(from_io)?;
        Ok(out)
    }
}

/// Loose object `id` as stored in the manifest; one the manifest lacks is corrupt.
fn loose_link(conn: &rusqlite::Connection, id: &ObjectId) -> Result<Link> {
    match crate::manifest::loose::get(conn, id)? {
        Some(encoded) => Ok(Link::Blob(encoded)),
        None => Err(Error::corrupt(format!("object {id} is referenced but not in the index; run `trove check`"))),
    }
}

/// Reads object `id`, verified, wherever the index on `conn` says it lies: packed, or loose
/// in the manifest (a tool's pre-image, a small snapshot's file), its chain of deltas followed
/// wherever each link lies.
pub(crate) fn read_stored(
    conn: &rusqlite::Connection,
    backend: &dyn Backend,
    bundles: &BundleCache,
    id: &ObjectId,
) -> Result<Vec<u8>> {
    delta::resolve(id, |link| match objects::locate(conn, link)? {
        Some(loc) => fetch_link(backend, bundles, link, &loc),
        None => match crate::manifest::loose::get(conn, link)? {
            Some(encoded) => Ok(Link::Blob(encoded)),
            // Garbage collection may have gathered it into a pack between the two lookups
            // (one transaction moves it, so it is in one place or the other).
            None => match objects::locate(conn, link)? {
                Some(loc) => fetch_link(backend, bundles, link, &loc),
                None => loose_link(conn, link),
            },
        },
    })
}

/// Whether stored blob `encoded` is a delta: a reader without the manifest at hand (a search's
/// or a restore's worker) has its locating thread resolve those.
pub(crate) fn is_delta(encoded: &[u8]) -> bool {
    blob::depth_in(encoded) > 0
}

/// Reads object `id` from where the index says it lies, verifying it: for a worker that holds
/// no manifest. A packed object is whole (deltas stay loose: their bases are found through the
/// manifest).
pub(crate) fn fetch(backend: &dyn Backend, bundles: &BundleCache, id: &ObjectId, loc: &Location) -> Result<Vec<u8>> {
    match fetch_link(backend, bundles, id, loc)? {
        Link::Raw(raw) => Ok(raw),
        Link::Blob(bytes) => blob::decode(id, &bytes),
    }
}

/// What the pack holds for object `id` at `loc`: a bundle member's raw bytes, verified, or a
/// blob whose header agrees with the index.
fn fetch_link(backend: &dyn Backend, bundles: &BundleCache, id: &ObjectId, loc: &Location) -> Result<Link> {
    let missing = |e: Error| {
        if e.kind() == ErrorKind::NotFound {
            Error::corrupt(format!("object {id} lives in pack {} which is missing; run `trove check`", loc.pack))
        } else {
            e
        }
    };
    // A damaged index row must not size an allocation or a read.
    if loc.stored_len > blob::MAX_STORED || loc.raw_len > blob::MAX_RAW {
        return Err(Error::corrupt(format!(
            "object {id}'s index row claims {} stored and {} raw bytes, more than any blob holds; run `trove check`",
            loc.stored_len, loc.raw_len
        )));
    }
    match loc.inner_offset {
        Some(inner) => bundles
            .member(backend, id, (&loc.pack, loc.offset, loc.stored_len), inner, loc.raw_len)
            .map(Link::Raw)
            .map_err(missing),
        None => {
            let bytes = backend.get_range(&loc.pack, loc.offset, loc.stored_len).map_err(missing)?;
            // A damaged length field must be refused before it sizes an allocation.
            let header = blob::parse_header(&bytes)
                .map_err(|e| Error::corrupt(format!("object {id} is corrupt: {e}; run `trove check`")))?;
            if header.raw_len != loc.raw_len {
                return Err(Error::corrupt(format!(
                    "object {id} is corrupt: its header gives {} bytes, the index {}; run `trove check`",
                    header.raw_len, loc.raw_len
                )));
            }
            Ok(Link::Blob(bytes))
        }
    }
}

/// The first 8 characters of an id, as listings show it (ids are ASCII, so this cuts no char).
pub fn short_id<S: AsRef<str> + ?Sized>(id: &S) -> &str {
    let id = id.as_ref();
    id.get(..8).unwrap_or(id)
}

/// Streams a file's objects in order; each is verified against its id before a byte of it is
/// returned, and the total must match the entry's size.
pub struct ContentReader<'r> {
    repo: &'r Repo,
    content: ObjectId,
    parts: Vec<ObjectId>,
    next: usize,
    buf: Vec<u8>,
    pos: usize,
    expected: Option<u64>,
    read: u64,
    /// For chunked content: the hash of everything so far, checked against `content` at the end,
    /// so a wrong chunk list cannot pass off other bytes as this file.
    whole: Option<blake3::Hasher>,
}

impl Read for ContentReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            if self.next == self.parts.len() {
                if let Some(expected) = self.expected.filter(|&e| e != self.read) {
                    let e = Error::corrupt(format!(
                        "content {} has {} bytes where its entry says {expected}; run `trove check`",
                        self.content, self.read
                    ));
                    return Err(io::Error::other(e));
                }
                if let Some(h) = self.whole.take() {
                    if ObjectId(*h.finalize().as_bytes()) != self.content {
                        let e = Error::corrupt(format!(
                            "content {} does not match its id after reassembly; run `trove check`",
                            self.content
                        ));
                        return Err(io::Error::other(e));
                    }
                }
                return Ok(0);
            }
            self.buf = self.repo.read_object(&self.parts[self.next]).map_err(io::Error::other)?;
            if let Some(h) = self.whole.as_mut() {
                h.update(&self.buf);
            }
            self.next += 1;
            self.pos = 0;
            self.read += self.buf.len() as u64;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
