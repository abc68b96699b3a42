//! Deltas: one version of a file stored against another (blob codec 2), and the walk down a
//! chain of them to a whole blob and back up.
//!
//! The blob layout is in [`crate::object::blob`]. A delta names its base by id only; where the
//! base lies (loose, packed, inside a bundle) is the reader's business, so [`resolve`] asks the
//! caller for each link. The walk is a loop bounded by [`blob::MAX_DEPTH`], never recursion,
//! and each link's depth must be below the one before it, so a damaged or hostile chain (a
//! cycle, a claimed depth of 255) ends in `corrupt` after at most that many reads.

use crate::base::error::{Error, Result};
use crate::object::blob::{self, Codec, Header, Kind, DELTA_VERSION, HEADER_LEN, MAX_DELTA_RAW, MAX_DEPTH};
use crate::object::ObjectId;

/// The largest zstd window a delta's frame may ask for: its base and itself, each at most
/// [`MAX_DELTA_RAW`], fit in 2^21 bytes.
const MAX_WINDOW_LOG: u32 = 21;

/// What a reader found for one id of a chain.
pub enum Link {
    /// The object's raw bytes, verified against its id (a bundle member, a whole blob decoded).
    Raw(Vec<u8>),
    /// A stored blob, not decoded yet: whole (decoded and verified here) or a delta.
    Blob(Vec<u8>),
}

/// Whether `depth`, a base's, leaves room for one more delta on top of it.
pub fn can_extend(depth: u8) -> bool {
    depth < MAX_DEPTH
}

/// Encodes version `raw` (id `id`) as a delta against `base` (id `base_id`, depth
/// `base_depth`) at zstd `level`, or None when storing it that way is not worth it: either is
/// over [`MAX_DELTA_RAW`], the chain is full, or the delta takes over a quarter of the
/// version's size (a rewrite, which compresses about as well whole).
pub fn encode(
    id: &ObjectId,
    raw: &[u8],
    base_id: &ObjectId,
    base: &[u8],
    base_depth: u8,
    level: i32,
) -> Result<Option<Vec<u8>>> {
    if raw.len() as u64 > MAX_DELTA_RAW || base.len() as u64 > MAX_DELTA_RAW || !can_extend(base_depth) || id == base_id
    {
        return Ok(None);
    }
    let internal = |what: &'static str| move |code: usize| Error::internal(format!("{what}: zstd error {code}"));
    // A context per delta: a reference prefix is borrowed for the context's lifetime, so the
    // thread's long-lived compressor cannot take one. Deltas are written one file at a time.
    let mut cctx = zstd::zstd_safe::CCtx::create();
    cctx.set_parameter(zstd::zstd_safe::CParameter::CompressionLevel(level))
        .map_err(internal("cannot set the zstd level"))?;
    cctx.ref_prefix(base).map_err(internal("cannot give zstd the delta's base"))?;
    let mut out = Vec::with_capacity(blob::DELTA_FRAME_AT + zstd::zstd_safe::compress_bound(raw.len()));
    out.extend_from_slice(blob::MAGIC);
    out.extend_from_slice(&[DELTA_VERSION, Codec::Delta as u8, Kind::Object as u8, base_depth + 1]);
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(base_id.as_bytes());
    let mut frame = std::io::Cursor::new(&mut out);
    frame.set_position(blob::DELTA_FRAME_AT as u64);
    cctx.compress2(&mut frame, raw).map_err(internal("zstd delta compression failed"))?;
    let payload_len = (out.len() - HEADER_LEN) as u64;
    // A delta that saves little against the whole object's own compression costs a chain step
    // on every read for nothing: a rewritten file is stored whole.
    if payload_len as usize > raw.len() / 4 + 64 {
        return Ok(None);
    }
    out[16..24].copy_from_slice(&payload_len.to_le_bytes());
    Ok(Some(out))
}

/// The header and base id of a delta blob; `corrupt` when `bytes` is not one.
pub fn base_of(bytes: &[u8]) -> Result<(Header, ObjectId)> {
    let header = blob::parse_header(bytes)?;
    if header.codec != Codec::Delta {
        return Err(Error::corrupt("it is not a delta"));
    }
    let base =
        bytes.get(blob::DELTA_BASE_AT..blob::DELTA_FRAME_AT).ok_or_else(|| Error::corrupt("its base id is cut off"))?;
    Ok((header, ObjectId::from_slice(base)?))
}

/// Decodes delta `bytes` against its base's raw bytes `base` (whose id the caller verified is
/// `base_id`) and verifies the result is the object `expected`.
pub fn decode(expected: &ObjectId, bytes: &[u8], base_id: &ObjectId, base: &[u8]) -> Result<Vec<u8>> {
    decode_step(expected, bytes, base_id, base, true)
}

/// [`decode`], hashing the result only with `verify`: a version in the middle of a chain is
/// vouched for by the version read, whose bytes cannot hash right from a wrong base.
fn decode_step(expected: &ObjectId, bytes: &[u8], base_id: &ObjectId, base: &[u8], verify: bool) -> Result<Vec<u8>> {
    let damaged = |what: &str| Error::corrupt(format!("object {expected} is corrupt: {what}; run `trove check`"));
    let (header, named) = base_of(bytes).map_err(|e| damaged(e.message()))?;
    if header.id != *expected {
        return Err(damaged("its header names another object"));
    }
    if named != *base_id {
        return Err(damaged("it is a delta against another base"));
    }
    if header.payload_len != (bytes.len() - HEADER_LEN) as u64 {
        return Err(damaged("its payload length does not match its header"));
    }
    // Checked before it sizes the output.
    if header.raw_len > MAX_DELTA_RAW {
        return Err(damaged(&format!("its header claims {} bytes, more than a delta holds", header.raw_len)));
    }
    let mut dctx = zstd::zstd_safe::DCtx::create();
    let zstd_failed = |_| damaged("its zstd frame does not decode against its base");
    dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW_LOG)).map_err(zstd_failed)?;
    dctx.ref_prefix(base).map_err(zstd_failed)?;
    let mut raw = Vec::with_capacity(header.raw_len as usize);
    dctx.decompress(&mut raw, &bytes[blob::DELTA_FRAME_AT..]).map_err(zstd_failed)?;
    if raw.len() as u64 != header.raw_len {
        return Err(damaged("its content is not as long as its header says"));
    }
    if verify && ObjectId::of(&raw) != *expected {
        return Err(damaged("its content does not hash to its id"));
    }
    Ok(raw)
}

/// The raw bytes of object `id`, verified against `id`, following its chain of deltas: `fetch` gives what
/// is stored for each id asked (the object itself first, then each base). At most
/// [`MAX_DEPTH`] deltas are read, each shallower than the one before, then one whole object.
pub fn resolve(id: &ObjectId, mut fetch: impl FnMut(&ObjectId) -> Result<Link>) -> Result<Vec<u8>> {
    // The deltas met on the way down, the object's first: (id, blob).
    let mut chain: Vec<(ObjectId, Vec<u8>)> = Vec::new();
    let mut current = *id;
    let mut above = u16::from(MAX_DEPTH) + 1;
    let mut raw = loop {
        let bytes = match fetch(&current)? {
            Link::Raw(raw) => break raw,
            Link::Blob(bytes) => bytes,
        };
        let header = blob::parse_header(&bytes)
            .map_err(|e| Error::corrupt(format!("object {current} is corrupt: {e}; run `trove check`")))?;
        if header.codec != Codec::Delta {
            break blob::decode(&current, &bytes)?;
        }
        let (_, base) = base_of(&bytes)?;
        // Strictly shallower at every step: a cycle or an endless chain cannot be written down.
        if u16::from(header.depth) >= above {
            return Err(Error::corrupt(format!(
                "object {current} is corrupt: its delta depth {} is not below the version stored against it; run `trove check`",
                header.depth
            )));
        }
        above = u16::from(header.depth);
        chain.push((current, bytes));
        current = base;
    };
    // Only the version asked for is hashed (a damaged link on the way makes it fail, and
    // `trove check` reads every delta as a version of its own): hashing every step cost a
    // third of a long chain's read.
    while let Some((version, bytes)) = chain.pop() {
        raw = decode_step(&version, &bytes, &current, &raw, chain.is_empty())?;
        current = version;
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;

    fn versions() -> Vec<Vec<u8>> {
        let mut text: Vec<String> = (0..2000).map(|i| format!("line {i}: let value_{i} = compute({i});")).collect();
        let mut out = Vec::new();
        for k in 0..40 {
            out.push(text.join("\n").into_bytes());
            text.insert((k * 37) % text.len(), format!("// edit {k}"));
        }
        out
    }

    #[test]
    fn a_chain_of_deltas_resolves_every_version_and_is_small() {
        let vs = versions();
        let mut stored: std::collections::HashMap<ObjectId, Vec<u8>> = Default::default();
        let first = ObjectId::of(&vs[0]);
        stored.insert(first, blob::encode(&first, &vs[0], 3).expect("whole"));
        let (mut base_id, mut depth, mut total) = (first, 0u8, 0usize);
        for v in &vs[1..] {
            let id = ObjectId::of(v);
            let base = resolve(&base_id, |i| Ok(Link::Blob(stored[i].clone()))).expect("base");
            let d = encode(&id, v, &base_id, &base, depth, 3).expect("encode").expect("worth it");
            total += d.len();
            depth = blob::parse_header(&d).expect("header").depth;
            stored.insert(id, d);
            base_id = id;
        }
        assert_eq!(depth, 39);
        // These lines differ only in their numbers, which zstd's level 3 matches poorly (a few
        // hundred bytes a delta, against under a hundred for real source).
        assert!(total < vs[0].len() / 2, "39 one-line deltas take {total} bytes");
        for v in &vs {
            let got = resolve(&ObjectId::of(v), |i| Ok(Link::Blob(stored[i].clone()))).expect("resolve");
            assert_eq!(&got, v);
        }
        // A chain is refused whole blob or not once it is too deep to write.
        assert!(encode(&ObjectId::of(b"x"), b"x", &first, &vs[0], MAX_DEPTH, 3).expect("encode").is_none());
    }

    #[test]
    fn a_damaged_chain_is_corrupt_and_never_loops() {
        let vs = versions();
        let (a, b) = (ObjectId::of(&vs[0]), ObjectId::of(&vs[1]));
        let mut db = encode(&b, &vs[1], &a, &vs[0], 0, 3).expect("encode").expect("delta");
        // A delta whose base is itself (a cycle) with the deepest depth.
        let mut cycle = db.clone();
        cycle[7] = MAX_DEPTH;
        cycle[blob::DELTA_BASE_AT..blob::DELTA_FRAME_AT].copy_from_slice(b.as_bytes());
        let mut reads = 0;
        let err = resolve(&b, |_| {
            reads += 1;
            Ok(Link::Blob(cycle.clone()))
        })
        .expect_err("a cycle");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(reads <= 2);
        // The wrong base's bytes: the frame decodes to something else, which fails its hash.
        let other = crate::fs::sample::Rng::new(3).bytes(vs[0].len());
        assert!(matches!(decode(&b, &db, &a, &other), Err(e) if e.kind() == ErrorKind::Corrupt));
        // A flipped byte in the frame.
        let last = db.len() - 1;
        db[last] ^= 0x55;
        assert_eq!(decode(&b, &db, &a, &vs[0]).expect_err("flipped").kind(), ErrorKind::Corrupt);
        // A whole decoder refuses a delta instead of misreading it.
        let good = encode(&b, &vs[1], &a, &vs[0], 0, 3).expect("encode").expect("delta");
        assert!(blob::decode(&b, &good).is_err());
        assert!(blob::decode_any(&good).is_err());
    }

    #[test]
    fn unrelated_contents_are_stored_whole() {
        let a = crate::fs::sample::Rng::new(1).bytes(50_000);
        let b = crate::fs::sample::Rng::new(2).bytes(50_000);
        assert!(encode(&ObjectId::of(&b), &b, &ObjectId::of(&a), &a, 0, 3).expect("encode").is_none());
    }
}
