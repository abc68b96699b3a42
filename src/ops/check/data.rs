//! Reading data: the objects of every pack (or of a random subset of the packs) decompressed
//! and hashed against their ids, blobs of a pack in parallel over the cores. Reading all, the
//! chunks of big files are read once, through their lists: each content's chunks in order,
//! each chunk hashed against its id and the whole against the content's, contents in parallel.

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::base::error::Result;
use crate::base::time::now_ns;
use crate::manifest::gc;
use crate::object::{blob, ObjectId};

use super::meta::PackState;
use super::{Checking, Problem, ProblemKind, ReadData};

/// The packs a read covers: all of them, or a random share (by count or by bytes).
fn choose(packs: &BTreeMap<String, PackState>, mode: ReadData) -> Vec<&PackState> {
    let mut all: Vec<&PackState> = packs.values().filter(|p| p.problem.is_none()).collect();
    if mode == ReadData::All {
        return all;
    }
    let seed = now_ns().to_le_bytes();
    all.sort_by_key(|p| {
        let mut h = blake3::Hasher::new();
        h.update(&seed);
        h.update(p.name.as_bytes());
        *h.finalize().as_bytes()
    });
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let total = all.len();
    for p in all {
        let enough = match mode {
            ReadData::Fraction(f) => out.len() as f64 >= (f * total as f64).ceil(),
            ReadData::Bytes(b) => bytes >= b,
            _ => false,
        };
        if enough {
            break;
        }
        bytes += p.size;
        out.push(p);
    }
    out
}

/// The bytes a blob's objects hold, or each damaged object with why.
type Verified = std::result::Result<u64, Vec<(ObjectId, String)>>;

/// Decompresses the blob at `offset` of `pack` and verifies each of its objects; returns the
/// bytes verified, or the damaged objects with why.
fn verify_blob(backend: &dyn crate::object::Backend, pack: &str, (offset, stored_len, members): &gc::Blob) -> Verified {
    let all_bad = |why: String| members.iter().map(|m| (m.0, why.clone())).collect::<Vec<_>>();
    let bytes = backend.get_range(pack, *offset, *stored_len).map_err(|e| all_bad(e.message().to_string()))?;
    match members.as_slice() {
        [(id, _, None)] => {
            blob::decode(id, &bytes).map(|raw| raw.len() as u64).map_err(|e| all_bad(e.message().to_string()))
        }
        _ => {
            // The bundle's own id covers its bytes; what matters is each member's.
            let (header, raw) = blob::decode_unverified(&bytes)
                .map_err(|e| all_bad(format!("its bundle is corrupt: {}", e.message())))?;
            if header.kind != blob::Kind::Bundle {
                return Err(all_bad("its blob is no bundle".into()));
            }
            let mut bad = Vec::new();
            let mut n = 0u64;
            for &(id, len, inner) in members {
                let range = usize::try_from(inner.unwrap_or(0)).ok().zip(usize::try_from(len).ok());
                match range.and_then(|(s, l)| raw.get(s..s.checked_add(l)?)) {
                    Some(m) if ObjectId::of(m) == id => n += len,
                    Some(_) => bad.push((id, "its bytes do not hash to its id".to_string())),
                    None => bad.push((id, "it lies outside its bundle".to_string())),
                }
            }
            if bad.is_empty() {
                Ok(n)
            } else {
                Err(bad)
            }
        }
    }
}

impl Checking<'_> {
    /// Reads and verifies the objects of the packs `mode` covers: the index is streamed once,
    /// pack by pack, and each chosen pack's blobs are verified in parallel as its rows end.
    pub(super) fn read_data(&mut self, packs: &BTreeMap<String, PackState>, mode: ReadData) -> Result<()> {
        let chosen: std::collections::BTreeSet<&str> =
            choose(packs, mode).into_iter().map(|p| p.name.as_str()).collect();
        let conn = self.repo.manifest.conn();
        // Chunks are read by their lists when all is read: not twice.
        let chunks = if mode == ReadData::All { self.reassemble_all()? } else { Default::default() };
        let mut current: Option<(String, Vec<gc::Blob>)> = None;
        self.repo.manifest.read(|| {
            crate::manifest::objects::for_each_location(conn, |raw_id, loc| {
                // Malformed rows were reported by the metadata check.
                let (Ok(id), Ok(loc)) = (ObjectId::from_slice(&raw_id), loc) else { return Ok(()) };
                if !chosen.contains(loc.pack.as_str()) || self.reported.contains(&id) || chunks.contains(&id) {
                    return Ok(());
                }
                if current.as_ref().is_none_or(|(p, _)| *p != loc.pack) {
                    if let Some((pack, blobs)) = current.take() {
                        self.verify_pack(&pack, &blobs)?;
                    }
                    current = Some((loc.pack.clone(), Vec::new()));
                }
                if let Some((_, blobs)) = current.as_mut() {
                    let member = (id, loc.raw_len, loc.inner_offset);
                    match blobs.last_mut() {
                        Some(last) if last.0 == loc.offset => last.2.push(member),
                        _ => blobs.push((loc.offset, loc.stored_len, vec![member])),
                    }
                }
                Ok(())
            })
        })?;
        if let Some((pack, blobs)) = current.take() {
            self.verify_pack(&pack, &blobs)?;
        }
        Ok(())
    }

    /// Verifies the blobs of one pack in parallel and reports what does not verify.
    fn verify_pack(&mut self, pack: &str, blobs: &[gc::Blob]) -> Result<()> {
        self.repo.check_deadline("reading data")?;
        let backend = self.repo.backend.as_ref();
        let results: Vec<(usize, Verified)> =
            blobs.par_iter().map(|b| (b.2.len(), verify_blob(backend, pack, b))).collect();
        self.report.packs_read += 1;
        for (members, r) in results {
            match r {
                Ok(bytes) => {
                    self.report.objects_read += members as u64;
                    self.report.bytes += bytes;
                }
                Err(bad) => {
                    for (object, why) in bad {
                        let p = Problem::new(
                            ProblemKind::ObjectDamaged,
                            format!("object {object} in pack {pack} is corrupt: {why}; `trove repair snapshots` turns what it held into markers"),
                        )
                        .pack(pack);
                        self.object_problem(object, p);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A content's reassembly: its bytes, or the chunk that failed (none: the whole) and why.
type Reassembled = std::result::Result<u64, (Option<ObjectId>, String)>;

/// One chunked content to reassemble: its id, and each chunk with where it lies.
type Reassembly = (ObjectId, Vec<(ObjectId, Option<crate::manifest::objects::Location>)>);

/// The bytes of chunk `id`, verified: packed at `loc`, or loose.
fn chunk_bytes(
    repo_backend: &dyn crate::object::Backend,
    bundles: &crate::object::bundle::BundleCache,
    id: &ObjectId,
    loc: &Option<crate::manifest::objects::Location>,
    loose: &Option<Vec<u8>>,
) -> Result<Vec<u8>> {
    match (loc, loose) {
        (Some(loc), _) => crate::ops::view::fetch(repo_backend, bundles, id, loc),
        (None, Some(encoded)) => blob::decode(id, encoded),
        (None, None) => Err(crate::base::error::Error::corrupt(format!("chunk {id} is not stored"))),
    }
}

impl Checking<'_> {
    /// Reassembles every chunk list (contents in parallel batches), reports what does not
    /// verify, and returns every chunk id read this way.
    fn reassemble_all(&mut self) -> Result<std::collections::BTreeSet<ObjectId>> {
        let conn = self.repo.manifest.conn();
        let mut lists: Vec<Reassembly> = Vec::new();
        let mut loose: BTreeMap<ObjectId, Vec<u8>> = BTreeMap::new();
        self.repo.manifest.read(|| {
            crate::manifest::objects::for_each_chunk_row(conn, |row| {
                // Malformed rows and lists were reported by the metadata check.
                let Ok((content, _, chunk, _)) = row else { return Ok(()) };
                let loc = crate::manifest::objects::locate(conn, &chunk)?;
                if loc.is_none() {
                    if let Some(encoded) = crate::manifest::loose::get(conn, &chunk)? {
                        // A delta (an object stored by the tools whose bytes are also some
                        // file's chunk) is resolved here, where its bases can be looked up,
                        // and handed on as the whole blob of its verified bytes.
                        let encoded = match crate::ops::view::is_delta(&encoded) {
                            true => match self.repo.read_object(&chunk) {
                                Ok(raw) => blob::encode(&chunk, &raw, 1)?,
                                Err(_) => encoded,
                            },
                            false => encoded,
                        };
                        loose.insert(chunk, encoded);
                    }
                }
                match lists.last_mut() {
                    Some((c, parts)) if *c == content => parts.push((chunk, loc)),
                    _ => lists.push((content, vec![(chunk, loc)])),
                }
                Ok(())
            })
        })?;
        let read: std::collections::BTreeSet<ObjectId> =
            lists.iter().flat_map(|(_, p)| p.iter().map(|c| c.0)).collect();
        let (backend, bundles) = (self.repo.backend.as_ref(), &self.repo.caches.bundles);
        for batch in lists.chunks(64) {
            self.repo.check_deadline("reading data")?;
            let outcomes: Vec<(ObjectId, Reassembled)> = batch
                .par_iter()
                .filter(|(content, _)| !self.reported.contains(content))
                .map(|(content, parts)| {
                    let mut whole = blake3::Hasher::new();
                    let mut n = 0u64;
                    for (chunk, loc) in parts {
                        match chunk_bytes(backend, bundles, chunk, loc, &loose.get(chunk).cloned()) {
                            Ok(bytes) => {
                                whole.update(&bytes);
                                n += bytes.len() as u64;
                            }
                            Err(e) => return (*content, Err((Some(*chunk), e.message().to_string()))),
                        }
                    }
                    if ObjectId(*whole.finalize().as_bytes()) == *content {
                        (*content, Ok(n))
                    } else {
                        (*content, Err((None, "its chunks hash to another content".to_string())))
                    }
                })
                .collect();
            for (content, outcome) in outcomes {
                match outcome {
                    Ok(n) => {
                        self.report.bytes += n;
                    }
                    Err((Some(chunk), why)) => {
                        let p = Problem::new(
                            ProblemKind::ObjectDamaged,
                            format!("chunk {chunk} of content {content}: {why}"),
                        );
                        self.object_problem(chunk, p);
                    }
                    Err((None, why)) => {
                        let p = Problem::new(
                            ProblemKind::ChunkList,
                            format!("the chunk list of content {content} does not reassemble to it: {why}"),
                        );
                        self.object_problem(content, p);
                    }
                }
            }
        }
        self.report.objects_read += read.len() as u64;
        Ok(read)
    }
}
