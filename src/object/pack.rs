//! Packs: many blobs appended into one immutable file, written as a stream and named when sealed.
//!
//! Layout: an 8-byte header (`TRVP`, format version u32 LE = 1), then blobs back to back
//! (`blob.rs`). The key is `packs/<hex[..2]>/<hex>.pack` where `hex` is the BLAKE3 of the whole
//! pack, so a pack names its own content. Writers append blobs to a small buffer; full buffers
//! go, in order, to a writing thread that hashes them and writes them to a staged value
//! (`Backend::stage`, a temporary file), and a sealed pack goes to a syncing thread that makes
//! it durable under its name. Memory is a few buffers whatever the pack or workspace size; the
//! manifest learns of a pack only after it is durable.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::backend::Staged;
use crate::object::{blob, Backend, ObjectId};

/// The first four bytes of every pack.
pub const MAGIC: &[u8; 4] = b"TRVP";
/// The pack format this build writes and reads.
pub const VERSION: u32 = 1;
/// The pack header's length in bytes (magic and version).
pub const HEADER_LEN: u64 = 8;
/// The bytes gathered before they go to the writing thread: big enough that writes and hash
/// updates are few, small enough that the buffers in flight stay a few MiB.
const PIECE: usize = 1 << 20;
/// Pieces queued for the writing thread before appenders wait (bounds the memory in flight).
const QUEUED_PIECES: usize = 4;
/// Where packs are staged while being written (`Backend::stage`).
const STAGING_DIR: &str = "packs";

/// Where one object lies in a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedObject {
    /// The object's id.
    pub id: ObjectId,
    /// Offset and length of the blob holding the object (a bundle, for bundle members).
    pub offset: u64,
    /// The blob's length in the pack, header included.
    pub stored_len: u64,
    /// The object's own length once decoded.
    pub raw_len: u64,
    /// For a bundle member: where it starts in the bundle's raw bytes.
    pub inner_offset: Option<u64>,
}

/// A sealed, durable pack and what it holds, ready to be indexed by the manifest.
#[derive(Debug, Clone)]
pub struct SealedPack {
    /// The pack's key in the backend.
    pub key: String,
    /// The pack's size in bytes.
    pub size: u64,
    /// Where each object lies in it.
    pub objects: Vec<PackedObject>,
}

/// What the appenders send the writing thread, in pack order.
enum Piece {
    /// The next bytes of the open pack.
    Bytes(Vec<u8>),
    /// The open pack is complete and holds these objects.
    Seal(Vec<PackedObject>),
}

/// The pack being filled, as the appenders see it.
struct Open {
    /// Bytes not yet sent to the writing thread.
    buf: Vec<u8>,
    /// Bytes of this pack already sent.
    sent: u64,
    objects: Vec<PackedObject>,
}

impl Open {
    fn len(&self) -> u64 {
        self.sent + self.buf.len() as u64
    }
}

/// Hashes and writes pieces as they come; hands each sealed pack to the syncing thread.
fn write_pieces<'a>(
    backend: &'a dyn Backend,
    dir: &'a str,
    pieces: Receiver<Piece>,
    spare: &Spare,
    done: SyncSender<Staging<'a>>,
) -> Result<()> {
    let mut staging: Option<Staging<'a>> = None;
    for piece in pieces {
        match piece {
            Piece::Bytes(bytes) => {
                let s = match &mut staging {
                    Some(s) => s,
                    None => staging.insert(Staging {
                        value: backend.stage(STAGING_DIR)?,
                        dir,
                        hasher: backend.content_hasher(),
                        size: 0,
                        objects: Vec::new(),
                    }),
                };
                s.hasher.update(&bytes);
                s.value.write(&bytes)?;
                s.size += bytes.len() as u64;
                spare.give_back(bytes);
            }
            Piece::Seal(objects) => {
                let Some(mut s) = staging.take() else {
                    return Err(Error::internal("a pack was sealed before any of its bytes were written"));
                };
                s.objects = objects;
                done.send(s).map_err(|_| Error::new(ErrorKind::Io, "the pack syncing thread stopped"))?;
            }
        }
    }
    Ok(())
}

/// Where a repository's packs are: `packs/<2 hex>/<name>.pack`.
pub const PACKS: &str = "packs/";

/// A pack written whole but not yet durable under its name.
struct Staging<'a> {
    value: Box<dyn Staged + 'a>,
    /// Where it goes: `packs/`, or a node's `nodes/<node>/packs/`.
    dir: &'a str,
    hasher: blake3::Hasher,
    size: u64,
    objects: Vec<PackedObject>,
}

impl Staging<'_> {
    fn commit(self) -> Result<SealedPack> {
        let hex = self.hasher.finalize().to_hex();
        let key = format!("{}{}/{}.pack", self.dir, &hex[..2], hex);
        self.value.commit(&key)?;
        Ok(SealedPack { key, size: self.size, objects: self.objects })
    }
}

/// Buffers the writing thread is done with, reused so each piece does not fault in fresh pages.
#[derive(Default)]
struct Spare(Mutex<Vec<Vec<u8>>>);

impl Spare {
    fn take(&self) -> Vec<u8> {
        let buf = self.0.lock().ok().and_then(|mut s| s.pop());
        let mut buf = buf.unwrap_or_else(|| Vec::with_capacity(PIECE + blob::HEADER_LEN));
        buf.clear();
        buf
    }

    fn give_back(&self, buf: Vec<u8>) {
        // A buffer grown by a big blob (a 4 MiB chunk) is not kept: memory stays a few pieces.
        if buf.capacity() > 2 * PIECE {
            return;
        }
        if let Ok(mut s) = self.0.lock() {
            if s.len() < QUEUED_PIECES + 2 {
                s.push(buf);
            }
        }
    }
}

/// Accepts encoded blobs from many threads and streams them into packs of about the target
/// size: the workers keep hashing and compressing while a pack is written and fsynced. The
/// hand-offs are bounded, so memory is a few 1 MiB pieces whatever the pack or workspace size.
pub struct PackWriter {
    target_size: u64,
    open: Mutex<Open>,
    pieces: SyncSender<Piece>,
    spare: Arc<Spare>,
}

impl PackWriter {
    /// Runs `work` with a writer over `backend`, then seals the last pack and returns every
    /// pack written, all durable, with `work`'s result.
    pub fn run<T>(
        backend: &dyn Backend,
        target_size: usize,
        work: impl FnOnce(&PackWriter) -> Result<T>,
    ) -> Result<(T, Vec<SealedPack>)> {
        PackWriter::run_in(backend, PACKS, target_size, work)
    }

    /// [`PackWriter::run`] writing the packs under `dir` (`packs/`, or a node's of a fleet,
    /// `nodes/<node>/packs/`).
    pub fn run_in<T>(
        backend: &dyn Backend,
        dir: &str,
        target_size: usize,
        work: impl FnOnce(&PackWriter) -> Result<T>,
    ) -> Result<(T, Vec<SealedPack>)> {
        std::thread::scope(|scope| {
            let (pieces, to_write) = sync_channel::<Piece>(QUEUED_PIECES);
            // One sealed pack may wait while the next is written: the pipeline never stops for
            // a pack's fsync, and a pack waiting is a file, not memory.
            let (sealed_tx, to_sync) = sync_channel::<Staging<'_>>(1);
            let spare = Arc::new(Spare::default());
            let writer_spare = spare.clone();
            let writing = scope.spawn(move || write_pieces(backend, dir, to_write, &writer_spare, sealed_tx));
            let syncing = scope.spawn(move || -> Result<Vec<SealedPack>> {
                let mut sealed = Vec::new();
                for staging in to_sync {
                    sealed.push(staging.commit()?);
                }
                Ok(sealed)
            });
            let writer =
                PackWriter { target_size: target_size as u64, open: Mutex::new(Open::fresh(&spare)), pieces, spare };
            let result = work(&writer).and_then(|t| writer.flush().map(|_| t));
            drop(writer);
            let written = writing.join().map_err(|_| Error::internal("the pack writing thread panicked"))?;
            let sealed = syncing.join().map_err(|_| Error::internal("the pack syncing thread panicked"))?;
            // A writing or syncing failure explains any "stopped" error the workers saw.
            written?;
            let sealed = sealed?;
            Ok((result?, sealed))
        })
    }

    fn send(&self, piece: Piece) -> Result<()> {
        self.pieces.send(piece).map_err(|_| Error::new(ErrorKind::Io, "the pack writing thread stopped"))
    }

    /// Appends one encoded blob (header + payload) for object `id` of `raw_len` bytes.
    pub fn add(&self, id: ObjectId, raw_len: u64, encoded: &[u8]) -> Result<()> {
        self.append(&[encoded], std::iter::once((id, raw_len, None)))
    }

    /// Appends one blob given as its header and its raw payload (`blob::encode_parts`).
    pub fn add_raw(&self, id: ObjectId, header: &[u8], raw: &[u8]) -> Result<()> {
        self.append(&[header, raw], std::iter::once((id, raw.len() as u64, None)))
    }

    /// Appends an encoded bundle whose members are (id, raw length, offset in the bundle).
    pub fn add_bundle(&self, members: &[(ObjectId, u64, u64)], encoded: &[u8]) -> Result<()> {
        self.append(&[encoded], members.iter().map(|&(id, raw_len, inner)| (id, raw_len, Some(inner))))
    }

    /// Appends one blob holding `objects` (id, raw length, offset inside a bundle), passing
    /// full pieces on and sealing the pack when it passes the target size. Pieces are sent
    /// under the lock: that keeps them in pack order, and a full queue holds every appender.
    fn append(&self, parts: &[&[u8]], objects: impl Iterator<Item = (ObjectId, u64, Option<u64>)>) -> Result<()> {
        let mut open = self.open.lock().map_err(|_| Error::internal("pack writer poisoned"))?;
        let offset = open.len();
        let stored_len = parts.iter().map(|p| p.len() as u64).sum();
        for (id, raw_len, inner_offset) in objects {
            open.objects.push(PackedObject { id, offset, stored_len, raw_len, inner_offset });
        }
        // A big blob (a whole chunk) is cut across pieces: what waits in the queue stays a few
        // MiB whatever the blob sizes.
        for part in parts {
            let mut rest = *part;
            while !rest.is_empty() {
                let room = PIECE.saturating_sub(open.buf.len()).max(1);
                let (now, later) = rest.split_at(room.min(rest.len()));
                open.buf.extend_from_slice(now);
                rest = later;
                if open.buf.len() >= PIECE {
                    self.pass_on(&mut open)?;
                }
            }
        }
        if open.len() >= self.target_size {
            let full = std::mem::replace(&mut *open, Open::fresh(&self.spare));
            self.seal(full)?;
        }
        Ok(())
    }

    /// Sends the buffered bytes of the open pack to the writing thread.
    fn pass_on(&self, open: &mut Open) -> Result<()> {
        if open.buf.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::replace(&mut open.buf, self.spare.take());
        open.sent += bytes.len() as u64;
        self.send(Piece::Bytes(bytes))
    }

    fn seal(&self, mut pack: Open) -> Result<()> {
        self.pass_on(&mut pack)?;
        // A sealed pack's index is held until the snapshot records it: without the room its
        // doubling left (up to half of it), a 100,000-file snapshot held 3 MB less.
        pack.objects.shrink_to_fit();
        self.send(Piece::Seal(pack.objects))
    }

    fn flush(&self) -> Result<()> {
        let last = {
            let mut open = self.open.lock().map_err(|_| Error::internal("pack writer poisoned"))?;
            std::mem::replace(&mut *open, Open { buf: Vec::new(), sent: 0, objects: Vec::new() })
        };
        if last.objects.is_empty() {
            return Ok(());
        }
        self.seal(last)
    }
}

impl Open {
    /// An empty pack: its header, nothing sent.
    fn fresh(spare: &Spare) -> Open {
        let mut buf = spare.take();
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        Open { buf, sent: 0, objects: Vec::new() }
    }
}

/// Reads every blob of a pack and lists the objects it holds: the index a pack carries within
/// itself. Bundles are decoded to hash their members.
pub fn scan(backend: &dyn Backend, key: &str, size: u64) -> Result<Vec<PackedObject>> {
    let head = backend.get_range(key, 0, HEADER_LEN)?;
    if &head[..4] != MAGIC {
        return Err(Error::corrupt(format!("pack {key} does not start with the pack magic")));
    }
    let mut out = Vec::new();
    let mut offset = HEADER_LEN;
    while offset < size {
        let at = |e: Error| Error::corrupt(format!("pack {key} at byte {offset}: {e}"));
        let header = blob::parse_header(&backend.get_range(key, offset, blob::HEADER_LEN as u64)?).map_err(at)?;
        if header.payload_len > blob::MAX_RAW + (1 << 20) {
            return Err(at(Error::corrupt(format!("a blob claims {} bytes", header.payload_len))));
        }
        let stored_len = blob::HEADER_LEN as u64 + header.payload_len;
        if offset + stored_len > size {
            return Err(at(Error::corrupt("a blob runs past the end of the pack")));
        }
        match header.kind {
            blob::Kind::Object => out.push(PackedObject {
                id: header.id,
                offset,
                stored_len,
                raw_len: header.raw_len,
                inner_offset: None,
            }),
            blob::Kind::Bundle => {
                let (_, raw) = blob::decode_any(&backend.get_range(key, offset, stored_len)?).map_err(at)?;
                for (inner, len) in blob::bundle_members(&raw).map_err(at)? {
                    let member = &raw[inner as usize..(inner + len) as usize];
                    out.push(PackedObject {
                        id: ObjectId::of(member),
                        offset,
                        stored_len,
                        raw_len: len,
                        inner_offset: Some(inner),
                    });
                }
            }
        }
        offset += stored_len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::MemoryBackend;

    #[test]
    fn seals_when_full_and_scans_back() {
        let backend = MemoryBackend::new();
        let (ids, packs) = PackWriter::run(&backend, 200, |writer| {
            let mut ids = Vec::new();
            for i in 0..10u8 {
                let raw = vec![i; 50];
                let id = ObjectId::of(&raw);
                writer.add(id, 50, &blob::encode(&id, &raw, 3).expect("encode")).expect("add");
                ids.push(id);
            }
            let members: [&[u8]; 2] = [b"first member", b"second"];
            let (enc, offsets) = blob::encode_bundle(&members, 3).expect("bundle");
            let rows: Vec<(ObjectId, u64, u64)> =
                members.iter().zip(offsets).map(|(m, o)| (ObjectId::of(m), m.len() as u64, o)).collect();
            writer.add_bundle(&rows, &enc).expect("add bundle");
            ids.extend(rows.iter().map(|r| r.0));
            Ok(ids)
        })
        .expect("run");
        assert!(packs.len() > 1, "a 200-byte target must split ten blobs");
        let mut seen = Vec::new();
        for p in &packs {
            let scanned = scan(&backend, &p.key, p.size).expect("scan");
            assert_eq!(scanned, p.objects);
            for o in scanned {
                let bytes = backend.get_range(&p.key, o.offset, o.stored_len).expect("read");
                let (_, raw) = blob::decode_any(&bytes).expect("decode");
                let member = match o.inner_offset {
                    Some(i) => &raw[i as usize..(i + o.raw_len) as usize],
                    None => &raw[..],
                };
                assert_eq!(ObjectId::of(member), o.id);
                seen.push(o.id);
            }
        }
        assert_eq!(seen, ids);
    }

    #[test]
    fn streams_big_and_small_blobs_to_files_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let backend = crate::object::LocalBackend::new(dir.path());
        // Blobs of every size around a piece, one bigger than a piece, across several packs.
        let sizes = [10usize, PIECE - 100, 300, 2 * PIECE + 5, 7, PIECE, 1];
        let (ids, packs) = PackWriter::run(&backend, 3 * PIECE, |writer| {
            let mut ids = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let raw = crate::sample::Rng::new(i as u64).bytes(n); // incompressible: sizes hold
                let id = ObjectId::of(&raw);
                writer.add(id, n as u64, &blob::encode(&id, &raw, 1).expect("encode")).expect("add");
                ids.push(id);
            }
            Ok(ids)
        })
        .expect("run");
        assert!(packs.len() >= 2, "{} packs", packs.len());
        let mut seen = Vec::new();
        for p in &packs {
            assert_eq!(backend.size(&p.key).expect("size"), p.size);
            let whole = backend.get_range(&p.key, 0, p.size).expect("read");
            assert!(p.key.contains(&blake3::hash(&whole).to_hex().to_string()), "a pack is named by its bytes");
            assert_eq!(scan(&backend, &p.key, p.size).expect("scan"), p.objects);
            seen.extend(p.objects.iter().map(|o| o.id));
        }
        assert_eq!(seen, ids);
        let stray: Vec<_> = walkdir::WalkDir::new(dir.path())
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "tmp"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    }

    #[test]
    fn a_sealed_store_names_packs_by_a_keyed_hash_of_their_bytes_salted_per_write() {
        use crate::object::{MemoryBackend, SealKey, SealedBackend};
        let write = |backend: &dyn Backend| {
            let raw = b"a file an observer of the bucket might know".to_vec();
            let id = ObjectId::of(&raw);
            let encoded = blob::encode(&id, &raw, 1).expect("encode");
            let ((), packs) = PackWriter::run(backend, PIECE, |w| w.add(id, raw.len() as u64, &encoded)).expect("run");
            let [pack] = &packs[..] else { panic!("{packs:?}") };
            let whole = backend.get_range(&pack.key, 0, pack.size).expect("read");
            (pack.key.clone(), whole)
        };
        let (plain_key, plain_bytes) = write(&MemoryBackend::new());
        assert!(plain_key.contains(&blake3::hash(&plain_bytes).to_hex().to_string()));
        let (a, b) = (SealKey::from_bytes([1; 32]), SealKey::from_bytes([2; 32]));
        let sealed_a = SealedBackend::new(MemoryBackend::new(), a.clone());
        let (key_a, bytes_a) = write(&sealed_a);
        let (key_b, _) = write(&SealedBackend::new(MemoryBackend::new(), b));
        // The same pack: its name is keyed and salted, so it tells nothing to one who can hash
        // what they know, links no two repositories holding it, and the same bytes written
        // again (by another host, or after a collection retired them) get a name of their own.
        assert_eq!(bytes_a, plain_bytes);
        assert_ne!(key_a, format!("packs/{}/{}.pack", &a.keyed_name(&bytes_a)[..2], a.keyed_name(&bytes_a)));
        assert_ne!(key_a, plain_key);
        assert_ne!(key_a, key_b);
        let (again, bytes_again) = write(&sealed_a);
        assert_eq!(bytes_again, bytes_a);
        assert_ne!(again, key_a);
    }
}
