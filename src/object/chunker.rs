//! Chunking: files over a threshold are cut with FastCDC so an edit stores only nearby chunks.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};

/// Content-defined chunking parameters, recorded in the repository config: changing them
/// changes chunk boundaries, so a repository keeps the ones it was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// Files of at most this many bytes are one object.
    pub threshold: u64,
    /// The smallest chunk, in bytes (a file's last chunk may be smaller).
    pub min: u32,
    /// The chunk size aimed at, in bytes.
    pub avg: u32,
    /// The largest chunk, in bytes.
    pub max: u32,
}

impl Default for Chunking {
    fn default() -> Chunking {
        Chunking { threshold: 1 << 20, min: 256 << 10, avg: 1 << 20, max: 4 << 20 }
    }
}

impl Chunking {
    /// Feeds `reader` to `each` chunk by chunk, in order, with the chunk's offset.
    pub fn for_each_chunk(&self, reader: impl Read, mut each: impl FnMut(u64, Vec<u8>) -> Result<()>) -> Result<()> {
        let chunker = fastcdc::v2020::StreamCDC::new(reader, self.min, self.avg, self.max);
        for chunk in chunker {
            let chunk = chunk.map_err(|e| match e {
                fastcdc::v2020::Error::IoError(io) => {
                    Error::with_source(ErrorKind::Io, format!("cannot read while chunking: {io}"), io)
                }
                other => Error::internal(format!("chunking failed: {other}")),
            })?;
            each(chunk.offset, chunk.data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn chunks(data: &[u8]) -> Vec<(u64, blake3::Hash)> {
        let mut out = Vec::new();
        Chunking::default()
            .for_each_chunk(data, |off, c| {
                out.push((off, blake3::hash(&c)));
                Ok(())
            })
            .expect("chunk");
        out
    }

    #[test]
    fn an_append_keeps_earlier_chunks() {
        let data = noise(12 << 20, 7);
        let before = chunks(&data);
        let mut appended = data.clone();
        appended.extend_from_slice(&noise(100_000, 9));
        let after = chunks(&appended);
        assert!(before.len() >= 4);
        let shared = before.iter().filter(|c| after.contains(c)).count();
        assert!(shared >= before.len() - 1, "only the last chunk may change");
    }
}
