//! Object ids: the BLAKE3-256 hash of an object's uncompressed bytes.

use std::fmt;

use crate::base::error::{Error, Result};

/// The address of an object, and of trees and chunked file contents, which hash the same way.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    /// The id of `bytes`: their BLAKE3 hash.
    pub fn of(bytes: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    /// The 32 bytes of the hash.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex digits; anything else is `invalid_argument`, naming the text.
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

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ObjectId, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ObjectId::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", &self.to_hex()[..12])
    }
}

/// A file's SHA-256, carried beside every file for the stale-file protocol, shown and parsed as
/// 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256(pub [u8; 32]);

impl Sha256 {
    /// The SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256 {
        use sha2::Digest;
        Sha256(sha2::Sha256::digest(bytes).into())
    }

    /// The digest a streaming hasher finished with.
    pub fn finish(hasher: sha2::Sha256) -> Sha256 {
        use sha2::Digest;
        Sha256(hasher.finalize().into())
    }

    /// The 32 bytes of the digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex digits; anything else is `invalid_argument`, naming the text.
    pub fn from_hex(s: &str) -> Result<Sha256> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| {
            Error::invalid_argument(format!("'{}' is not a SHA-256: give 64 hex digits", s.escape_debug()))
        })?;
        Ok(Sha256(out))
    }

    /// From a 32-byte manifest column; any other length means the manifest is damaged.
    pub fn from_slice(bytes: &[u8]) -> Result<Sha256> {
        let arr: [u8; 32] =
            bytes.try_into().map_err(|_| Error::corrupt(format!("manifest holds a {}-byte SHA-256", bytes.len())))?;
        Ok(Sha256(arr))
    }
}

impl From<sha2::digest::Output<sha2::Sha256>> for Sha256 {
    fn from(digest: sha2::digest::Output<sha2::Sha256>) -> Sha256 {
        Sha256(digest.into())
    }
}

impl AsRef<[u8]> for Sha256 {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({})", &self.to_hex()[..12])
    }
}

impl std::str::FromStr for Sha256 {
    type Err = Error;
    fn from_str(s: &str) -> Result<Sha256> {
        Sha256::from_hex(s)
    }
}

impl serde::Serialize for Sha256 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Sha256 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Sha256, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Sha256::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

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

impl schemars::JsonSchema for ObjectId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ObjectId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "A BLAKE3 hash in hex."})
    }
}

impl schemars::JsonSchema for Sha256 {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Sha256".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "A SHA-256 in hex."})
    }
}
