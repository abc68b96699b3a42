//! Object ids: the BLAKE3-256 hash of an object's uncompressed bytes.

use std::fmt;

use crate::base::error::{Error, Result};

/// The address of an object, and of trees and chunked file contents, which hash the same way.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    pub fn of(bytes: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(s: &str) -> Result<ObjectId> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out)
            .map_err(|_| Error::invalid_argument(format!("'{s}' is not a 64-character hex object id")))?;
        Ok(ObjectId(out))
    }

    /// From a 32-byte manifest column; any other length means the manifest is damaged.
    pub fn from_slice(bytes: &[u8]) -> Result<ObjectId> {
        let arr: [u8; 32] =
            bytes.try_into().map_err(|_| Error::corrupt(format!("manifest holds a {}-byte object id", bytes.len())))?;
        Ok(ObjectId(arr))
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", &self.to_hex()[..12])
    }
}

/// A SHA-256 digest, carried beside every file for the stale-file protocol.
pub type Sha256 = [u8; 32];

/// Hashes keys that are already uniformly random (BLAKE3 ids, path keys) by taking their
/// bytes as they are: SipHash over them is wasted work on the snapshot's hot path.
#[derive(Default, Clone, Copy)]
pub struct RandomKeyHasher(u64);

impl std::hash::Hasher for RandomKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Arrays hash as a length prefix then their bytes: fold every 8-byte word in.
        for word in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..word.len()].copy_from_slice(word);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(w);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by random bytes (see [`RandomKeyHasher`]).
pub type RandomKeyMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<RandomKeyHasher>>;
/// A set of random keys (see [`RandomKeyHasher`]).
pub type RandomKeySet<K> = std::collections::HashSet<K, std::hash::BuildHasherDefault<RandomKeyHasher>>;
