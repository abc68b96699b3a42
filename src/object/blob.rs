//! The blob codec: one object as stored in a pack, a self-describing header then the payload.
//!
//! Header (56 bytes, little-endian): magic `TRVB`, format version (1 or 2), codec (0 raw,
//! 1 zstd, 2 delta), kind (0 object, 1 bundle), the delta depth (0 but for a delta), raw length
//! u64, payload length u64, id (32 bytes). The header makes a pack scannable without the
//! manifest, and the id in it lets a reader catch a misplaced index entry as well as flipped
//! bytes.
//!
//! A delta (version 2, codec 2, always an object) is one version of a file stored against
//! another, its base: the payload is the base's id (32 bytes), then a zstd frame compressed with
//! the base's raw bytes as its reference prefix (zstd's `--patch-from`). Its depth is its base's
//! plus one (a whole blob's is 0), at most [`MAX_DEPTH`], so a reader resolves any version in a
//! bounded number of steps; [`crate::object::delta`] walks the chain. Whole blobs are still
//! written as version 1, so a reader of version 1 reads every blob but a delta.
//!
//! A bundle packs many small objects into one blob so they compress together: its raw bytes
//! are a member count u32, each member's length u32, then the members back to back; its id is
//! the BLAKE3 of those raw bytes. Members are found by the manifest's `inner_offset`.

use crate::base::error::{Error, Result};
use crate::object::ObjectId;

/// The first four bytes of every blob.
pub const MAGIC: &[u8; 4] = b"TRVB";
/// The blob format of whole blobs (codecs 0 and 1), which this build writes and reads.
pub const VERSION: u8 = 1;
/// The blob format of deltas (codec 2): version 1's header with byte 7 the delta depth.
pub const DELTA_VERSION: u8 = 2;
/// The longest chain of deltas: a version's depth is at most this, so reading any version
/// decodes at most this many deltas after one whole blob (git's default `--depth` is 50).
pub const MAX_DEPTH: u8 = 48;
/// Neither a delta nor its base is larger: deltas are for whole-object files (`loose::WHOLE_LIMIT`),
/// and a reference prefix is held in memory whole while the delta decodes.
pub const MAX_DELTA_RAW: u64 = 1 << 20;
/// The header's length in bytes.
pub const HEADER_LEN: usize = 56;
/// No blob is larger: chunks stop at FastCDC's 16 MiB ceiling, bundles at 4 MiB
/// (`bundle::TARGET`), and whole-file objects at the chunking threshold. A header claiming more
/// is damaged.
pub const MAX_RAW: u64 = 64 << 20;
/// The window blobs are compressed with: 4 MiB, a whole bundle (`bundle::TARGET`).
const WINDOW_LOG: u32 = 22;
/// The largest zstd window a blob's frame may ask for: 2^26 bytes, [`MAX_RAW`].
const MAX_WINDOW_LOG: u32 = 26;
/// No stored blob is larger: its payload is stored raw unless compression makes it smaller.
pub const MAX_STORED: u64 = HEADER_LEN as u64 + MAX_RAW;

/// How a blob's payload is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// One zstd frame.
    Zstd = 1,
    /// A base object's id, then one zstd frame compressed against the base's raw bytes.
    Delta = 2,
}

/// What a blob's raw bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One object: a file's content, a chunk, a chunk list or a tree.
    Object = 0,
    /// Many small objects packed together (see the module's documentation).
    Bundle = 1,
}

/// Compression saving below this fraction is not worth a decompression on every read.
const MIN_SAVING: f64 = 0.10;

thread_local! {
    // A compression context per thread: building one per object costs more than compressing
    // a typical small source file.
    static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    // A decompression context per thread: creating one (and clearing its tables) cost a tenth
    // of a search's time over 50 KiB files when each read built its own.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses a payload of exactly `raw_len` bytes (checked against `MAX_RAW` by the caller).
fn decompress(payload: &[u8], raw_len: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(payload, raw_len),
            None => zstd::bulk::decompress(payload, raw_len),
        }
    })
}

/// Compresses `raw` at `level` with this thread's context.
pub(crate) fn compress(raw: &[u8], level: i32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    compress_into(raw, level, &mut out)?;
    Ok(out)
}

/// Compresses `raw` into `out` (cleared first, capacity kept).
fn compress_into(raw: &[u8], level: i32, out: &mut Vec<u8>) -> Result<()> {
    compress_after(raw, level, out, 0)
}

/// Compresses `raw` into `out` from byte `at` on (`out` is `at` bytes long), leaving
/// `out` holding the bytes before `at` and then the frame.
fn compress_after(raw: &[u8], level: i32, out: &mut Vec<u8>, at: usize) -> Result<()> {
    out.truncate(at);
    // Exact: a reused buffer grown by doubling held twice the largest bundle's bound.
    out.reserve_exact(zstd::zstd_safe::compress_bound(raw.len()));
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let internal = |what: &'static str| {
            move |e: std::io::Error| Error::with_source(crate::base::error::ErrorKind::Internal, what, e)
        };
        match slot.as_mut() {
            None => {
                let mut c = zstd::bulk::Compressor::new(level).map_err(internal("cannot create a zstd compressor"))?;
                // A window as long as the longest bundle, so a 4 MiB bundle's last members find
                // matches in its first ones (level 3's own window is 2 MiB). zstd narrows it to
                // the input for anything shorter, and keeps it when the level changes.
                c.set_parameter(zstd::stream::raw::CParameter::WindowLog(WINDOW_LOG))
                    .map_err(internal("cannot set the zstd window"))?;
                *slot = Some((level, c));
            }
            // Objects and bundles alternate levels: the context is kept and its level changed
            // (a new context per switch cost an allocation of megabytes and its set-up).
            Some((current, c)) if *current != level => {
                c.set_compression_level(level).map_err(internal("cannot set the zstd level"))?;
                *current = level;
            }
            Some(_) => {}
        }
        let (_, c) = slot.as_mut().ok_or_else(|| Error::internal("zstd compressor missing"))?;
        let mut tail = std::io::Cursor::new(out);
        tail.set_position(at as u64);
        c.compress_to_buffer(raw, &mut tail)
            .map(|_| ())
            .map_err(|e| Error::with_source(crate::base::error::ErrorKind::Internal, "zstd compression failed", e))
    })
}

/// Objects at least this large are first judged by a sample: compressing megabytes of random
/// bytes only to throw the result away costs as much as compressing text.
const SAMPLE_FROM: usize = 64 << 10;
const SAMPLE_SLICE: usize = 8 << 10;

/// Whether `raw` looks worth compressing: three slices (start, middle, end) compressed together
/// must save at least half the required margin. Objects under 64 KiB are always tried.
pub fn looks_compressible(raw: &[u8], level: i32) -> Result<bool> {
    if raw.len() < SAMPLE_FROM {
        return Ok(true);
    }
    let mid = raw.len() / 2 - SAMPLE_SLICE / 2;
    let mut sample = Vec::with_capacity(3 * SAMPLE_SLICE);
    sample.extend_from_slice(&raw[..SAMPLE_SLICE]);
    sample.extend_from_slice(&raw[mid..mid + SAMPLE_SLICE]);
    sample.extend_from_slice(&raw[raw.len() - SAMPLE_SLICE..]);
    let c = compress(&sample, level)?;
    Ok((c.len() as f64) <= sample.len() as f64 * (1.0 - MIN_SAVING / 2.0))
}

/// Encodes `raw` (whose id the caller computed) into header + payload.
pub fn encode(id: &ObjectId, raw: &[u8], level: i32) -> Result<Vec<u8>> {
    encode_kind(Kind::Object, id, raw, level)
}

/// Encodes a bundle of `members`; returns its encoding and each member's offset in its raw bytes.
pub fn encode_bundle(members: &[&[u8]], level: i32) -> Result<(Vec<u8>, Vec<u64>)> {
    let table = bundle_table_len(members.len());
    let total: usize = table + members.iter().map(|m| m.len()).sum::<usize>();
    let mut raw = Vec::with_capacity(total);
    write_bundle_table(members.iter().map(|m| m.len() as u64), &mut raw);
    let mut offsets = Vec::with_capacity(members.len());
    for m in members {
        offsets.push(raw.len() as u64);
        raw.extend_from_slice(m);
    }
    let id = ObjectId::of(&raw);
    Ok((encode_kind(Kind::Bundle, &id, &raw, level)?, offsets))
}

/// Bytes of the member table of a bundle of `members` members.
pub const fn bundle_table_len(members: usize) -> usize {
    4 + 4 * members
}

/// Appends a bundle's member table to `out`: the member count, then each member's length (u32
/// LE each); the members follow it back to back.
pub fn write_bundle_table(lens: impl ExactSizeIterator<Item = u64>, out: &mut Vec<u8>) {
    out.extend_from_slice(&(lens.len() as u32).to_le_bytes());
    for len in lens {
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
}

/// The (offset, length) of each member in a bundle's raw bytes, from its member table.
pub fn bundle_members(raw: &[u8]) -> Result<Vec<(u64, u64)>> {
    let bad = || Error::corrupt("bundle member table is malformed");
    let u32_at = |at: usize| -> Result<u64> {
        let b: [u8; 4] = raw.get(at..at + 4).and_then(|s| s.try_into().ok()).ok_or_else(bad)?;
        Ok(u64::from(u32::from_le_bytes(b)))
    };
    let count = u32_at(0)? as usize;
    // The count is read from the blob: it must fit the table it claims before it sizes one.
    if count > raw.len().saturating_sub(4) / 4 {
        return Err(bad());
    }
    let mut offset = bundle_table_len(count) as u64;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let len = u32_at(4 + 4 * i)?;
        out.push((offset, len));
        offset += len;
    }
    if offset != raw.len() as u64 {
        return Err(bad());
    }
    Ok(out)
}

fn encode_kind(kind: Kind, id: &ObjectId, raw: &[u8], level: i32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(kind, id, raw, level, &mut out)?;
    Ok(out)
}

/// Encodes into `out` (cleared first), so callers can reuse one buffer for every object:
/// allocating and freeing megabyte buffers per file is what kept a 100,000-file snapshot's
/// resident memory far above its live heap.
pub fn encode_into(kind: Kind, id: &ObjectId, raw: &[u8], level: i32, out: &mut Vec<u8>) -> Result<()> {
    if encode_parts(kind, id, raw, level, out)? {
        out.extend_from_slice(raw);
    }
    Ok(())
}

/// Encodes into `out` (cleared first) the whole blob, or only its header when the payload is
/// `raw` itself (true): the caller appends `raw` after it, where it is going anyway, instead of
/// copying megabytes that do not compress into a buffer first.
pub fn encode_parts(kind: Kind, id: &ObjectId, raw: &[u8], level: i32, out: &mut Vec<u8>) -> Result<bool> {
    raw_header(kind, id, raw.len(), out);
    // A bundle is compressed whatever a sample of it says: its members were sampled one by one
    // before they joined it (the snapshot stores those that sample as incompressible alone).
    let compressed = raw.len() >= 64 && (kind == Kind::Bundle || looks_compressible(raw, level)?);
    // zstd writes straight after the header: no second buffer per thread.
    let used_zstd = compressed && {
        compress_after(raw, level, out, HEADER_LEN)?;
        if ((out.len() - HEADER_LEN) as f64) <= raw.len() as f64 * (1.0 - MIN_SAVING) {
            true
        } else {
            out.truncate(HEADER_LEN);
            false
        }
    };
    let payload_len = if used_zstd {
        out[5] = Codec::Zstd as u8;
        out.len() - HEADER_LEN
    } else {
        raw.len()
    };
    out[16..24].copy_from_slice(&(payload_len as u64).to_le_bytes());
    Ok(!used_zstd)
}

/// Writes into `out` (cleared first) the header of a blob whose payload is its `raw_len` raw
/// bytes, uncompressed: for an object already sampled as incompressible.
pub fn raw_header(kind: Kind, id: &ObjectId, raw_len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(Codec::Raw as u8);
    out.push(kind as u8);
    out.push(0);
    out.extend_from_slice(&(raw_len as u64).to_le_bytes());
    out.extend_from_slice(&(raw_len as u64).to_le_bytes());
    out.extend_from_slice(id.as_bytes());
}

/// The header byte naming the codec, and the one holding a delta's depth.
const CODEC_AT: usize = 5;
const DEPTH_AT: usize = 7;
/// Where a delta blob names its base: the 32 bytes after the header.
pub const DELTA_BASE_AT: usize = HEADER_LEN;
/// Where a delta blob's zstd frame starts, after its base's id.
pub const DELTA_FRAME_AT: usize = DELTA_BASE_AT + 32;

/// A stored blob's depth, read from its first bytes without parsing the rest: 0 for a whole
/// blob (or one too short to say), a delta's place in its chain otherwise. The one reader of
/// these two bytes for callers that hold only a prefix (a manifest row's first bytes); a
/// claimed depth is checked where the blob is decoded.
pub fn depth_in(prefix: &[u8]) -> u8 {
    match prefix.get(CODEC_AT) {
        Some(&c) if c == Codec::Delta as u8 => prefix.get(DEPTH_AT).copied().unwrap_or(0),
        _ => 0,
    }
}

/// A parsed blob header.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// How the payload is encoded.
    pub codec: Codec,
    /// An object or a bundle.
    pub kind: Kind,
    /// The decoded length in bytes.
    pub raw_len: u64,
    /// The stored payload's length in bytes, after the header.
    pub payload_len: u64,
    /// The id of the raw bytes.
    pub id: ObjectId,
    /// A delta's place in its chain (1 = its base is whole); 0 for a whole blob.
    pub depth: u8,
}

/// Reads a blob header; a wrong magic, version, codec or kind is `corrupt`, as is a delta that
/// is not an object or whose depth is out of bounds. Its lengths are checked by the callers,
/// against the blob's real size and [`MAX_RAW`].
pub fn parse_header(bytes: &[u8]) -> Result<Header> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(Error::corrupt("blob header is missing or has a wrong magic"));
    }
    let codec = match (bytes[4], bytes[5]) {
        (VERSION, 0) => Codec::Raw,
        (VERSION, 1) => Codec::Zstd,
        (DELTA_VERSION, 2) => Codec::Delta,
        (VERSION | DELTA_VERSION, c) => {
            return Err(Error::corrupt(format!("blob codec {c} is not known to blob format version {}", bytes[4])))
        }
        (v, _) => return Err(Error::corrupt(format!("blob format version {v} is not known"))),
    };
    let kind = match bytes[6] {
        0 => Kind::Object,
        1 => Kind::Bundle,
        k => return Err(Error::corrupt(format!("blob kind {k} is not known"))),
    };
    let depth = bytes[7];
    let depth_ok = match codec {
        Codec::Delta => kind == Kind::Object && (1..=MAX_DEPTH).contains(&depth),
        Codec::Raw | Codec::Zstd => depth == 0,
    };
    if !depth_ok {
        return Err(Error::corrupt(format!("blob depth {depth} does not fit its codec and kind")));
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let id = ObjectId::from_slice(&bytes[24..56])?;
    Ok(Header { codec, kind, raw_len: u64_at(8), payload_len: u64_at(16), id, depth })
}

/// Decodes a whole blob and verifies it is the object `expected`.
pub fn decode(expected: &ObjectId, bytes: &[u8]) -> Result<Vec<u8>> {
    let damaged = |what: &str| Error::corrupt(format!("object {expected} is corrupt: {what}; run `trove check`"));
    let (header, raw) = decode_any(bytes).map_err(|e| damaged(e.message()))?;
    if header.id != *expected || header.kind != Kind::Object {
        return Err(damaged("its header names another object"));
    }
    Ok(raw)
}

/// Encodes stored blob `bytes` again at `level` into `out` (cleared first): its raw bytes,
/// decoded and verified against its id, encoded as they were, kind and id kept, so every index
/// row pointing into it stays true but for where it lies and its stored length (a bundle's
/// members keep their offsets). Returns whether the new encoding is smaller; when it is not,
/// the caller keeps the blob as it was.
pub fn reencode(bytes: &[u8], level: i32, out: &mut Vec<u8>) -> Result<bool> {
    // A delta is as small as it gets and cannot be checked without its base: kept as it is.
    if parse_header(bytes)?.codec == Codec::Delta {
        return Ok(false);
    }
    let (header, raw) = decode_any(bytes)?;
    encode_into(header.kind, &header.id, &raw, level, out)?;
    Ok(out.len() < bytes.len())
}

/// Decodes a blob of either kind and verifies its bytes hash to the id in its header.
pub fn decode_any(bytes: &[u8]) -> Result<(Header, Vec<u8>)> {
    let (header, raw) = decode_unverified(bytes)?;
    if ObjectId::of(&raw) != header.id {
        return Err(Error::corrupt("its content does not hash to its id"));
    }
    Ok((header, raw))
}

/// Decodes a blob of either kind, its lengths checked but its hash not: for a bundle whose
/// members the caller verifies one by one (hashing the bundle too would hash every byte twice).
pub fn decode_unverified(bytes: &[u8]) -> Result<(Header, Vec<u8>)> {
    let (header, payload) = checked(bytes)?;
    Ok((header, decode_whole(&header, payload)?))
}

/// A blob's header and payload, the header's claims checked against the bytes there are: what
/// both decoders start from.
fn checked(bytes: &[u8]) -> Result<(Header, &[u8])> {
    let header = parse_header(bytes)?;
    if header.raw_len > MAX_RAW {
        return Err(Error::corrupt(format!("its header claims {} bytes", header.raw_len)));
    }
    let payload = &bytes[HEADER_LEN..];
    if payload.len() as u64 != header.payload_len {
        return Err(Error::corrupt("its payload length does not match its header"));
    }
    Ok((header, payload))
}

fn decode_whole(header: &Header, payload: &[u8]) -> Result<Vec<u8>> {
    let raw = match header.codec {
        Codec::Raw => payload.to_vec(),
        Codec::Zstd => decompress(payload, header.raw_len as usize)
            .map_err(|_| Error::corrupt("its zstd payload does not decompress"))?,
        // Callers that may meet a delta ask `crate::object::delta` first.
        Codec::Delta => return Err(Error::corrupt("it is a delta, which decodes only against its base")),
    };
    if raw.len() as u64 != header.raw_len {
        return Err(Error::corrupt("its content is not as long as its header says"));
    }
    Ok(raw)
}

/// The first `want` raw bytes of a blob (all of them if it has fewer), its lengths checked
/// but its hash not: a bundle member's reader verifies the member, and needs the bundle only up
/// to the member's end. A zstd payload is decoded as a stream and left there.
pub fn decode_prefix(bytes: &[u8], want: u64) -> Result<(Header, Vec<u8>)> {
    let (header, payload) = checked(bytes)?;
    if want >= header.raw_len {
        return Ok((header, decode_whole(&header, payload)?));
    }
    // `want` is below `raw_len`, which `checked` keeps under MAX_RAW.
    let want = usize::try_from(want).map_err(|_| Error::corrupt("its length does not fit"))?;
    let raw = match header.codec {
        Codec::Delta => return Err(Error::corrupt("it is a delta, which decodes only against its base")),
        Codec::Raw => {
            payload.get(..want).ok_or_else(|| Error::corrupt("its payload is shorter than its header says"))?.to_vec()
        }
        Codec::Zstd => {
            let mut out = vec![0u8; want];
            let mut decoder = zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|_| Error::corrupt("its zstd payload does not decompress"))?;
            // No blob needs a window over its own size limit; a damaged frame asking for one
            // is refused before zstd allocates it.
            decoder
                .window_log_max(MAX_WINDOW_LOG)
                .map_err(|_| Error::corrupt("its zstd payload does not decompress"))?;
            std::io::Read::read_exact(&mut decoder, &mut out)
                .map_err(|_| Error::corrupt("its zstd payload does not decompress"))?;
            out
        }
    };
    Ok((header, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_compressible_and_random() {
        let text = b"fn main() { println!(\"hi\"); }\n".repeat(100);
        let noise: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for raw in [&text[..], &noise[..], b"", b"x"] {
            let id = ObjectId::of(raw);
            let blob = encode(&id, raw, 3).expect("encode");
            assert_eq!(decode(&id, &blob).expect("decode"), raw);
        }
        let id = ObjectId::of(&text);
        assert_eq!(parse_header(&encode(&id, &text, 3).expect("encode")).expect("header").codec, Codec::Zstd);
    }

    /// A blob given as parts is the same bytes as one encoded whole: a header alone, followed
    /// by the raw bytes, when they do not compress.
    #[test]
    fn a_blob_in_parts_is_the_blob_encoded_whole() {
        let text = b"let x = 1;\n".repeat(20_000);
        let noise = crate::fs::sample::Rng::new(7).bytes(200_000);
        for (raw, stored_raw) in [(&text[..], false), (&noise[..], true)] {
            let id = ObjectId::of(raw);
            let (mut whole, mut parts) = (Vec::new(), Vec::new());
            encode_into(Kind::Object, &id, raw, 3, &mut whole).expect("whole");
            assert_eq!(encode_parts(Kind::Object, &id, raw, 3, &mut parts).expect("parts"), stored_raw);
            if stored_raw {
                assert_eq!(parts.len(), HEADER_LEN);
                let mut header = Vec::new();
                raw_header(Kind::Object, &id, raw.len(), &mut header);
                assert_eq!(header, parts);
                parts.extend_from_slice(raw);
            }
            assert_eq!(parts, whole);
            assert_eq!(decode(&id, &whole).expect("decode"), raw);
        }
    }

    #[test]
    fn bundles_round_trip_and_describe_their_members() {
        let members: Vec<Vec<u8>> = (0..20u8).map(|i| format!("member {i} ").repeat(i as usize).into_bytes()).collect();
        let refs: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
        let (blob, offsets) = encode_bundle(&refs, 3).expect("encode");
        let (header, raw) = decode_any(&blob).expect("decode");
        assert_eq!(header.kind, Kind::Bundle);
        let table = bundle_members(&raw).expect("table");
        for ((m, off), (toff, len)) in members.iter().zip(&offsets).zip(&table) {
            assert_eq!((*off, m.len() as u64), (*toff, *len));
            assert_eq!(&raw[*off as usize..(*off as usize + m.len())], &m[..]);
        }
        assert!(decode(&header.id, &blob).is_err(), "a bundle is not an object");
    }

    #[test]
    fn a_bundle_claiming_more_members_than_it_holds_is_refused_before_allocating() {
        // Found by the `blob_decode` fuzz target: a count of 2^31 sized a 34 GB table.
        let mut raw = 0x8000_0003u32.to_le_bytes().to_vec();
        raw.extend_from_slice(b"firsts\0\0");
        assert_eq!(bundle_members(&raw).expect_err("malformed").kind(), crate::base::error::ErrorKind::Corrupt);
        assert!(bundle_members(&[0, 0, 0]).is_err());
        assert_eq!(bundle_members(&0u32.to_le_bytes()).expect("empty bundle"), vec![]);
    }

    #[test]
    fn flipped_byte_is_corrupt() {
        let raw = b"hello world, hello world, hello world".repeat(10);
        let id = ObjectId::of(&raw);
        let mut blob = encode(&id, &raw, 3).expect("encode");
        let last = blob.len() - 1;
        blob[last] ^= 1;
        let err = decode(&id, &blob).expect_err("must fail");
        assert_eq!(err.kind(), crate::base::error::ErrorKind::Corrupt);
        assert!(err.message().contains(&id.to_hex()));
    }
}
