//! Object ids: the BLAKE3-256 hash of an object's uncompressed bytes.

use std::fmt;

use crate::error::{Error, Result};

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
