//! The in-memory backend: the test twin of the local one, passing the same contract.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::Backend;

/// Objects in memory: the backend of `Repo::in_memory`, for tests.
#[derive(Default)]
pub struct MemoryBackend {
    blobs: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>>> {
        self.blobs.lock().map_err(|_| Error::internal("memory backend poisoned"))
    }

    /// Flips one byte of a stored value: lets tests damage a pack the way a disk would.
    pub fn corrupt_byte(&self, key: &str, offset: usize) -> Result<()> {
        let mut blobs = self.lock()?;
        let value = blobs.get_mut(key).ok_or_else(|| Error::not_found(format!("no key {key}")))?;
        let byte = value.get_mut(offset).ok_or_else(|| Error::invalid_argument("offset past the end"))?;
        *byte ^= 0x40;
        Ok(())
    }
}

impl Backend for MemoryBackend {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let mut blobs = self.lock()?;
        match blobs.get(key) {
            Some(there) if there != bytes => Err(crate::object::backend::other_bytes("memory", key)),
            Some(_) => Ok(()),
            None => {
                blobs.insert(key.to_string(), bytes.to_vec());
                Ok(())
            }
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let blobs = self.lock()?;
        let value = blobs.get(key).ok_or_else(|| Error::not_found(format!("pack {key} does not exist")))?;
        let range = usize::try_from(offset).ok().zip(usize::try_from(len).ok());
        match range.and_then(|(start, len)| value.get(start..start.checked_add(len)?)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(Error::new(
                ErrorKind::Corrupt,
                format!("pack {key} has {} bytes: a read of {len} bytes at {offset} runs past its end", value.len()),
            )),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self.lock()?.keys().filter(|k| k.starts_with(prefix)).cloned().collect())
    }

    fn size(&self, key: &str) -> Result<u64> {
        let blobs = self.lock()?;
        blobs.get(key).map(|v| v.len() as u64).ok_or_else(|| Error::not_found(format!("pack {key} does not exist")))
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.lock()?.remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passes_the_backend_contract() {
        crate::object::backend::contract(&super::MemoryBackend::new());
    }
}
