//! Packs: many blobs appended into one immutable file, written with one put (one fsync).
//!
//! Layout: an 8-byte header (`TRVP`, format version u32 LE = 1), then blobs back to back
//! (`blob.rs`). The key is `packs/<hex[..2]>/<hex>.pack` where `hex` is the BLAKE3 of the whole
//! pack, so a pack names its own content. Writers fill an in-memory buffer and seal it once it
//! passes the target size; the manifest learns of a pack only after it is durable.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

use crate::base::error::{Error, Result};
use crate::object::{blob, Backend, ObjectId};

/// The first four bytes of every pack.
pub const MAGIC: &[u8; 4] = b"TRVP";
/// The pack format this build writes and reads.
pub const VERSION: u32 = 1;
/// The pack header's length in bytes (magic and version).
pub const HEADER_LEN: u64 = 8;

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

struct Open {
    buf: Vec<u8>,
    objects: Vec<PackedObject>,
}

impl Open {
    fn new(mut buf: Vec<u8>) -> Open {
        buf.clear();
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        Open { buf, objects: Vec::new() }
    }
}

/// Room for a full pack plus the largest blob that can tip it over (a 4 MiB chunk, or a bundle
/// of up to 256 KiB + 16 KiB, with headers): without it the buffer would double when one lands.
fn capacity(target_size: usize) -> usize {
    target_size + (4 << 20) + (1 << 20)
}

fn seal(backend: &dyn Backend, pack: &Open) -> Result<SealedPack> {
    let hex = blake3::hash(&pack.buf).to_hex();
    let key = format!("packs/{}/{}.pack", &hex[..2], hex);
    backend.put(&key, &pack.buf)?;
    Ok(SealedPack { key, size: pack.buf.len() as u64, objects: pack.objects.clone() })
}

/// Accepts encoded blobs from many threads; full packs go to a sealing thread so the workers
/// keep hashing and compressing while a pack is written and fsynced. The hand-off is a
/// rendezvous and at most one spare buffer is kept, which bounds memory to about four packs
/// (filling, handed over, being sealed, spare) whatever the workspace size.
pub struct PackWriter {
    target_size: usize,
    open: Mutex<Open>,
    full: SyncSender<Open>,
    /// Buffers the sealer is done with, reused so each pack does not fault in fresh pages.
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl PackWriter {
    /// Runs `work` with a writer over `backend`, then seals the last pack and returns every
    /// pack written, all durable, with `work`'s result.
    pub fn run<T>(
        backend: &dyn Backend,
        target_size: usize,
        work: impl FnOnce(&PackWriter) -> Result<T>,
    ) -> Result<(T, Vec<SealedPack>)> {
        std::thread::scope(|scope| {
            let (full, rx) = sync_channel::<Open>(0);
            let spare = Arc::new(Mutex::new(Vec::new()));
            let sealer_spare = spare.clone();
            let sealer = scope.spawn(move || -> Result<Vec<SealedPack>> {
                let mut sealed = Vec::new();
                for pack in rx {
                    sealed.push(seal(backend, &pack)?);
                    if let Ok(mut s) = sealer_spare.lock() {
                        if s.is_empty() {
                            s.push(pack.buf);
                        }
                    }
                }
                Ok(sealed)
            });
            let writer = PackWriter {
                target_size,
                open: Mutex::new(Open::new(Vec::with_capacity(capacity(target_size)))),
                full,
                spare,
            };
            let result = work(&writer).and_then(|t| writer.flush().map(|_| t));
            drop(writer);
            let sealed = sealer.join().map_err(|_| Error::internal("the pack sealing thread panicked"))?;
            // A sealing failure explains any "sealer stopped" error the workers saw.
            let sealed = sealed?;
            Ok((result?, sealed))
        })
    }

    fn fresh(&self) -> Open {
        let buf = self.spare.lock().ok().and_then(|mut s| s.pop());
        Open::new(buf.unwrap_or_else(|| Vec::with_capacity(capacity(self.target_size))))
    }

    fn send(&self, pack: Open) -> Result<()> {
        self.full.send(pack).map_err(|_| Error::new(crate::base::error::ErrorKind::Io, "the pack sealer stopped"))
    }

    /// Appends one encoded blob (header + payload) for object `id` of `raw_len` bytes.
    pub fn add(&self, id: ObjectId, raw_len: u64, encoded: &[u8]) -> Result<()> {
        self.append(encoded, std::iter::once((id, raw_len, None)))
    }

    /// Appends an encoded bundle whose members are (id, raw length, offset in the bundle).
    pub fn add_bundle(&self, members: &[(ObjectId, u64, u64)], encoded: &[u8]) -> Result<()> {
        self.append(encoded, members.iter().map(|&(id, raw_len, inner)| (id, raw_len, Some(inner))))
    }

    /// Appends one blob holding `objects` (id, raw length, offset inside a bundle), sealing the
    /// pack when it passes the target size.
    fn append(&self, encoded: &[u8], objects: impl Iterator<Item = (ObjectId, u64, Option<u64>)>) -> Result<()> {
        let full = {
            let mut open = self.open.lock().map_err(|_| Error::internal("pack writer poisoned"))?;
            let offset = open.buf.len() as u64;
            let stored_len = encoded.len() as u64;
            open.buf.extend_from_slice(encoded);
            for (id, raw_len, inner_offset) in objects {
                open.objects.push(PackedObject { id, offset, stored_len, raw_len, inner_offset });
            }
            if open.buf.len() >= self.target_size {
                Some(std::mem::replace(&mut *open, self.fresh()))
            } else {
                None
            }
        };
        match full {
            Some(pack) => self.send(pack),
            None => Ok(()),
        }
    }

    fn flush(&self) -> Result<()> {
        let last = {
            let mut open = self.open.lock().map_err(|_| Error::internal("pack writer poisoned"))?;
            std::mem::replace(&mut *open, Open::new(Vec::new()))
        };
        if last.objects.is_empty() {
            return Ok(());
        }
        self.send(last)
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
}
