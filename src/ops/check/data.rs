//! Reading data: the objects of every pack (or of a random subset of the packs) decompressed
//! and hashed against their ids, blobs of a pack in parallel over the cores.

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
            let (_, raw) =
                blob::decode_any(&bytes).map_err(|e| all_bad(format!("its bundle is corrupt: {}", e.message())))?;
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
        let mut current: Option<(String, Vec<gc::Blob>)> = None;
        self.repo.manifest.read(|| {
            crate::manifest::objects::for_each_location(conn, |raw_id, loc| {
                // Malformed rows were reported by the metadata check.
                let (Ok(id), Ok(loc)) = (ObjectId::from_slice(&raw_id), loc) else { return Ok(()) };
                if !chosen.contains(loc.pack.as_str()) || self.reported.contains(&id) {
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
