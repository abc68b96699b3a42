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
    /// Feeds `reader` to `each` chunk by chunk, in order, with the chunk's offset. The cut
    /// points are FastCDC's (normalization level 1, seed 0) over a window of `max` bytes,
    /// exactly those of `fastcdc::v2020::StreamCDC` (a test keeps them equal).
    pub fn for_each_chunk(&self, reader: impl Read, each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        self.for_each_chunk_in(&mut Vec::new(), reader, each)
    }

    /// [`Chunking::for_each_chunk`] cutting from `window`, grown to `max` bytes if smaller: a
    /// caller chunking many files keeps one window instead of faulting in a fresh `max` bytes
    /// per file (and, freed, each pushed glibc's heap to keep more memory resident).
    pub fn for_each_chunk_in(
        &self,
        window: &mut Vec<u8>,
        mut reader: impl Read,
        mut each: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let max = self.max as usize;
        // The window chunks are cut from: each chunk is handed out as a slice of it, not a
        // copy, so one chunk's bytes are in memory per file being chunked instead of two.
        if window.len() < max {
            window.resize(max, 0);
        }
        let window = &mut window[..max];
        let (mut len, mut offset, mut eof) = (0usize, 0u64, false);
        loop {
            while !eof && len < max {
                match reader.read(&mut window[len..]) {
                    Ok(0) => eof = true,
                    Ok(n) => len += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(Error::with_source(ErrorKind::Io, format!("cannot read while chunking: {e}"), e))
                    }
                }
            }
            if len == 0 {
                return Ok(());
            }
            let fastcdc = fastcdc::v2020::FastCDC::new(&window[..len], self.min, self.avg, self.max);
            let (_, cut) = fastcdc.cut(0, len);
            // A window of at least one byte always yields a chunk (the whole window when it is
            // shorter than `min`); an empty cut would loop forever.
            let cut = if cut == 0 { len } else { cut };
            each(offset, &window[..cut])?;
            offset += cut as u64;
            window.copy_within(cut..len, 0);
            len -= cut;
        }
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
                out.push((off, blake3::hash(c)));
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

    #[test]
    fn cuts_exactly_where_the_stream_chunker_does() {
        for (len, seed) in
            [(0usize, 1u64), (1, 2), (300 << 10, 3), (4 << 20, 4), ((9 << 20) + 12_345, 5), (13 << 20, 6)]
        {
            let data = noise(len, seed);
            let c = Chunking::default();
            let expected: Vec<(u64, blake3::Hash)> = fastcdc::v2020::StreamCDC::new(&data[..], c.min, c.avg, c.max)
                .map(|r| r.map(|ch| (ch.offset, blake3::hash(&ch.data))).expect("stream chunk"))
                .collect();
            assert_eq!(chunks(&data), expected, "{len} bytes");
        }
        // A reader handing out a few bytes at a time cuts the same.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(7919);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let data = noise(6 << 20, 8);
        let mut trickled = Vec::new();
        Chunking::default()
            .for_each_chunk(Trickle(&data), |off, c| {
                trickled.push((off, blake3::hash(c)));
                Ok(())
            })
            .expect("chunk");
        assert_eq!(trickled, chunks(&data));
    }

    #[test]
    fn a_window_reused_across_files_cuts_each_as_a_fresh_one() {
        let c = Chunking::default();
        // Longer than `max` to begin with, and left holding the previous file's bytes.
        let mut window = vec![0xAB; 2 * c.max as usize];
        for (len, seed) in [(9 << 20, 11u64), (3 << 20, 12), (0, 13), ((5 << 20) + 7, 14)] {
            let data = noise(len, seed);
            let mut cut = Vec::new();
            c.for_each_chunk_in(&mut window, &data[..], |off, chunk| {
                cut.push((off, blake3::hash(chunk)));
                Ok(())
            })
            .expect("chunk");
            assert_eq!(cut, chunks(&data), "{len} bytes");
        }
    }
}
