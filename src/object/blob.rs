//! The blob codec: one object as stored in a pack, a self-describing header then the payload.
//!
//! Header (56 bytes, little-endian): magic `TRVB`, format version (1), codec (0 raw, 1 zstd),
//! two reserved zero bytes, raw length u64, payload length u64, object id (32 bytes). The
//! header makes a pack scannable without the manifest (`check --repair-index` territory), and
//! the id in it lets a reader catch a misplaced index entry as well as flipped bytes.

use crate::error::{Error, Result};
use crate::object::ObjectId;

pub const MAGIC: &[u8; 4] = b"TRVB";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 56;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Raw = 0,
    Zstd = 1,
}

/// Compression saving below this fraction is not worth a decompression on every read.
const MIN_SAVING: f64 = 0.10;

thread_local! {
    // A compression context per thread: building one per object costs more than compressing
    // a typical small source file.
    static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

fn compress(raw: &[u8], level: i32) -> Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().map(|(l, _)| *l) != Some(level) {
            let c = zstd::bulk::Compressor::new(level)
                .map_err(|e| Error::with_source(crate::ErrorKind::Internal, "cannot create a zstd compressor", e))?;
            *slot = Some((level, c));
        }
        let (_, c) = slot.as_mut().ok_or_else(|| Error::internal("zstd compressor missing"))?;
        c.compress(raw).map_err(|e| Error::with_source(crate::ErrorKind::Internal, "zstd compression failed", e))
    })
}

/// Objects at least this large are first judged by a sample: compressing megabytes of random
/// bytes only to throw the result away costs as much as compressing text.
const SAMPLE_FROM: usize = 64 << 10;
const SAMPLE_SLICE: usize = 8 << 10;

/// Whether `raw` looks worth compressing: three slices (start, middle, end) compressed together
/// must save at least half the required margin.
fn worth_compressing(raw: &[u8], level: i32) -> Result<bool> {
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
    let compressed = if raw.len() >= 64 && worth_compressing(raw, level)? { Some(compress(raw, level)?) } else { None };
    let (codec, payload): (Codec, &[u8]) = match &compressed {
        Some(c) if (c.len() as f64) <= raw.len() as f64 * (1.0 - MIN_SAVING) => (Codec::Zstd, c),
        _ => (Codec::Raw, raw),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(codec as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// A parsed blob header.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub codec: Codec,
    pub raw_len: u64,
    pub payload_len: u64,
    pub id: ObjectId,
}

pub fn parse_header(bytes: &[u8]) -> Result<Header> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(Error::corrupt("blob header is missing or has a wrong magic"));
    }
    if bytes[4] != VERSION {
        return Err(Error::corrupt(format!("blob format version {} is not known", bytes[4])));
    }
    let codec = match bytes[5] {
        0 => Codec::Raw,
        1 => Codec::Zstd,
        c => return Err(Error::corrupt(format!("blob codec {c} is not known"))),
    };
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let id = ObjectId::from_slice(&bytes[24..56])?;
    Ok(Header { codec, raw_len: u64_at(8), payload_len: u64_at(16), id })
}

/// Decodes a whole blob and verifies it is the object `expected`.
pub fn decode(expected: &ObjectId, bytes: &[u8]) -> Result<Vec<u8>> {
    let damaged = |what: &str| Error::corrupt(format!("object {expected} is corrupt: {what}; run `trove check`"));
    let header = parse_header(bytes).map_err(|e| damaged(e.message()))?;
    if header.id != *expected {
        return Err(damaged("its header names another object"));
    }
    let payload = &bytes[HEADER_LEN..];
    if payload.len() as u64 != header.payload_len {
        return Err(damaged("its payload length does not match its header"));
    }
    let raw = match header.codec {
        Codec::Raw => payload.to_vec(),
        Codec::Zstd => zstd::bulk::decompress(payload, header.raw_len as usize)
            .map_err(|_| damaged("its zstd payload does not decompress"))?,
    };
    if raw.len() as u64 != header.raw_len || ObjectId::of(&raw) != *expected {
        return Err(damaged("its content does not hash to its id"));
    }
    Ok(raw)
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

    #[test]
    fn flipped_byte_is_corrupt() {
        let raw = b"hello world, hello world, hello world".repeat(10);
        let id = ObjectId::of(&raw);
        let mut blob = encode(&id, &raw, 3).expect("encode");
        let last = blob.len() - 1;
        blob[last] ^= 1;
        let err = decode(&id, &blob).expect_err("must fail");
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.message().contains(&id.to_hex()));
    }
}
