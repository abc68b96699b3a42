//! Records spilled to an unnamed temporary file while a snapshot in batches runs, read back
//! after its commit: a fixed-size key, the record's length (u32 LE) and the record, in the
//! order written. The directory records of the batches (`batched.rs`) and their trees
//! (`staged.rs`) are spilled this way, so that memory stays flat however big the tree.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::base::error::{Error, Result};

/// An unnamed temporary file in `dir` when it is a directory (the node-local cache), else in
/// the system's temporary directory, and the directory; gone with its descriptor.
pub(super) fn temp_file(dir: Option<&Path>) -> Result<(File, PathBuf)> {
    let dir = match dir.filter(|d| d.is_dir()) {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir(),
    };
    let file = tempfile::tempfile_in(&dir).map_err(|e| Error::io("create a temporary file in", &dir, e))?;
    Ok((file, dir))
}

/// Records with keys of `K` bytes, each at most `cap` bytes long: a longer one read back is
/// damage, refused before it sizes an allocation.
pub(super) struct Spill<const K: usize> {
    file: BufWriter<File>,
    dir: PathBuf,
    /// What the records are, for errors.
    what: &'static str,
    cap: usize,
}

impl<const K: usize> Spill<K> {
    /// An empty spill of `what`, in `dir` as [`temp_file`] chooses it.
    pub(super) fn new(dir: Option<&Path>, what: &'static str, cap: usize) -> Result<Spill<K>> {
        let (file, dir) = temp_file(dir)?;
        Ok(Spill { file: BufWriter::new(file), dir, what, cap })
    }

    /// Appends one record.
    pub(super) fn push(&mut self, key: &[u8; K], record: &[u8]) -> Result<()> {
        let len = u32::try_from(record.len()).ok().filter(|l| *l as usize <= self.cap).ok_or_else(|| {
            Error::internal(format!("a {} of {} bytes is over the spill's cap", self.what, record.len()))
        })?;
        let failed = |e| Error::io("write spilled records in", &self.dir, e);
        self.file.write_all(key).map_err(failed)?;
        self.file.write_all(&len.to_le_bytes()).map_err(failed)?;
        self.file.write_all(record).map_err(failed)
    }

    /// Writes out what is buffered, so that [`Spill::replay`] may read through a shared reference.
    pub(super) fn flush(&mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io("write spilled records in", &self.dir, e))
    }

    /// Every record from the first, in order, to `f`. The spill must be flushed.
    pub(super) fn replay(&self, mut f: impl FnMut([u8; K], Vec<u8>) -> Result<()>) -> Result<()> {
        if !self.file.buffer().is_empty() {
            return Err(Error::internal(format!("spilled {}s were not flushed", self.what)));
        }
        let failed = |e| Error::io("read spilled records in", &self.dir, e);
        let mut file: &File = self.file.get_ref();
        file.rewind().map_err(failed)?;
        let mut input = BufReader::new(file);
        loop {
            let mut key = [0u8; K];
            match input.read_exact(&mut key) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(failed(e)),
            }
            let mut len = [0u8; 4];
            input.read_exact(&mut len).map_err(failed)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > self.cap {
                return Err(Error::corrupt(format!("a spilled {} claims {len} bytes, over {}", self.what, self.cap)));
            }
            let mut record = vec![0; len];
            input.read_exact(&mut record).map_err(failed)?;
            f(key, record)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_in_order_and_a_length_over_the_cap_is_refused() {
        let mut s: Spill<2> = Spill::new(None, "record", 8).expect("spill");
        s.push(b"ab", b"one").expect("push");
        s.push(b"cd", b"").expect("push");
        assert!(s.push(b"ef", b"far too long").is_err(), "over the cap");
        s.flush().expect("flush");
        for _ in 0..2 {
            let mut got = Vec::new();
            s.replay(|k, r| {
                got.push((k, r));
                Ok(())
            })
            .expect("replay");
            assert_eq!(got, vec![(*b"ab", b"one".to_vec()), (*b"cd", Vec::new())]);
        }
        // A length past the cap in the file is damage.
        s.file.write_all(b"gh").expect("write");
        s.file.write_all(&100u32.to_le_bytes()).expect("write");
        s.flush().expect("flush");
        assert!(s.replay(|_, _| Ok(())).is_err());
    }
}
