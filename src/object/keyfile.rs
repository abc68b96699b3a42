//! Key files: a repository's sealing key wrapped by a passphrase, as restic's `keys/` hold its
//! master key. The passphrase is stretched with Argon2id and the key sealed with
//! XChaCha20-Poly1305 under the result; several key files may wrap one key, so a passphrase is
//! added or removed without touching anything sealed. Format in ARCHITECTURE.md ("Key files").

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::seal::SealKey;

/// The largest key file read: a few hundred bytes are expected.
pub const MAX_KEY_FILE: u64 = 4096;
/// Bounds on a key file's stretching costs, so that a key file from a bucket cannot make
/// opening it take gigabytes or hours.
const MAX_MEMORY_KIB: u32 = 1 << 20;
const MAX_ITERATIONS: u32 = 64;
const MAX_PARALLELISM: u32 = 16;

/// How hard a passphrase is stretched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    /// Argon2id's memory, in KiB.
    pub memory_kib: u32,
    /// Argon2id's passes.
    pub iterations: u32,
    /// Argon2id's lanes.
    pub parallelism: u32,
}

impl Stretch {
    /// What new key files use: 64 MiB, 3 passes, 1 lane (OWASP's Argon2id floor, about a
    /// quarter of a second here).
    pub const DEFAULT: Stretch = Stretch { memory_kib: 64 << 10, iterations: 3, parallelism: 1 };
}

/// A key file as stored (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyFile {
    /// The format's version: 1.
    pub version: u32,
    /// The stretching function: `argon2id`.
    pub kdf: String,
    /// Argon2id's memory, in KiB.
    pub memory_kib: u32,
    /// Argon2id's passes.
    pub iterations: u32,
    /// Argon2id's lanes.
    pub parallelism: u32,
    /// 16 random bytes, hex.
    pub salt: String,
    /// The 24-byte nonce of the wrapping, hex.
    pub nonce: String,
    /// The sealing key wrapped: 32 bytes and a 16-byte tag, hex.
    pub wrapped: String,
    /// When it was made, RFC 3339 UTC.
    pub created: String,
    /// Who made it: the host name, for `trove key list`.
    pub host: String,
}

/// A fresh random sealing key.
pub fn new_seal_key() -> Result<SealKey> {
    let mut k = [0u8; 32];
    crate::base::random::fill_random(&mut k)?;
    Ok(SealKey::from_bytes(k))
}

fn stretch(passphrase: &[u8], salt: &[u8], s: Stretch) -> Result<[u8; 32]> {
    let params = Params::new(s.memory_kib, s.iterations, s.parallelism, Some(32))
        .map_err(|e| Error::invalid_argument(format!("key stretching parameters refused: {e}")))?;
    let mut out = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase, salt, &mut out)
        .map_err(|e| Error::invalid_argument(format!("the passphrase cannot be stretched: {e}")))?;
    Ok(out)
}

/// What the wrapping authenticates besides the key: the format and the stretching, so that a
/// key file edited to stretch less fails to open rather than opening more cheaply.
fn associated(f: &KeyFile) -> Vec<u8> {
    format!("trove key file {} {} {} {} {} {}", f.version, f.kdf, f.memory_kib, f.iterations, f.parallelism, f.salt)
        .into_bytes()
}

/// Wraps `key` under `passphrase`.
pub fn wrap(key: &SealKey, passphrase: &[u8], s: Stretch, host: &str) -> Result<KeyFile> {
    if passphrase.is_empty() {
        return Err(Error::invalid_argument(
            "an empty passphrase protects nothing: give one in TROVE_PASSWORD or a file named by TROVE_PASSWORD_FILE",
        ));
    }
    let (mut salt, mut nonce) = ([0u8; 16], [0u8; 24]);
    crate::base::random::fill_random(&mut salt)?;
    crate::base::random::fill_random(&mut nonce)?;
    let mut file = KeyFile {
        version: 1,
        kdf: "argon2id".into(),
        memory_kib: s.memory_kib,
        iterations: s.iterations,
        parallelism: s.parallelism,
        salt: hex::encode(salt),
        nonce: hex::encode(nonce),
        wrapped: String::new(),
        created: crate::base::time::iso_time(crate::base::time::now_ns()),
        host: host.to_owned(),
    };
    let kek = stretch(passphrase, &salt, s)?;
    let aad = associated(&file);
    let wrapped = XChaCha20Poly1305::new(Key::from_slice(&kek))
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: key.as_bytes(), aad: &aad })
        .map_err(|_| Error::internal("wrapping the repository key failed"))?;
    file.wrapped = hex::encode(wrapped);
    Ok(file)
}

impl KeyFile {
    /// Parses key file `name` from its stored bytes, refusing a malformed one or one whose
    /// stretching exceeds the bounds above.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<KeyFile> {
        if bytes.len() as u64 > MAX_KEY_FILE {
            return Err(Error::corrupt(format!(
                "key file {name} holds {} bytes, more than a key file does",
                bytes.len()
            )));
        }
        let f: KeyFile = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(format!("key file {name} is not a trove key file: {e}")))?;
        let sane = f.version == 1
            && f.kdf == "argon2id"
            && f.memory_kib <= MAX_MEMORY_KIB
            && (1..=MAX_ITERATIONS).contains(&f.iterations)
            && (1..=MAX_PARALLELISM).contains(&f.parallelism)
            && f.memory_kib >= 8 * f.parallelism;
        if !sane {
            return Err(Error::corrupt(format!(
                "key file {name} asks for a version, function or cost this trove does not use (version {}, {}, {} KiB, {} passes, {} lanes)",
                f.version, f.kdf, f.memory_kib, f.iterations, f.parallelism
            )));
        }
        Ok(f)
    }

    /// The sealing key, if `passphrase` opens this key file (`name` for messages); a wrong
    /// passphrase is `unauthorized`.
    pub fn unwrap(&self, name: &str, passphrase: &[u8]) -> Result<SealKey> {
        let field = |v: &str, len: usize, what: &str| -> Result<Vec<u8>> {
            hex::decode(v)
                .ok()
                .filter(|b| b.len() == len)
                .ok_or_else(|| Error::corrupt(format!("key file {name}: its {what} is not {len} bytes of hex")))
        };
        let salt = field(&self.salt, 16, "salt")?;
        let nonce = field(&self.nonce, 24, "nonce")?;
        let wrapped = field(&self.wrapped, 48, "wrapped key")?;
        let s = Stretch { memory_kib: self.memory_kib, iterations: self.iterations, parallelism: self.parallelism };
        let kek =
            stretch(passphrase, &salt, s).map_err(|e| Error::corrupt(format!("key file {name}: {}", e.message())))?;
        let aad = associated(self);
        let key = XChaCha20Poly1305::new(Key::from_slice(&kek))
            .decrypt(XNonce::from_slice(&nonce), Payload { msg: &wrapped, aad: &aad })
            .map_err(|_| {
                Error::new(
                    ErrorKind::Unauthorized,
                    format!("the passphrase does not open key file {name}: set TROVE_PASSWORD (or TROVE_PASSWORD_FILE) to a passphrase of this repository"),
                )
            })?;
        let mut k = [0u8; 32];
        k.copy_from_slice(&key);
        Ok(SealKey::from_bytes(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Stretch = Stretch { memory_kib: 64, iterations: 1, parallelism: 1 };

    #[test]
    fn a_passphrase_opens_its_key_file_and_nothing_else_does() {
        let key = new_seal_key().expect("key");
        let file = wrap(&key, b"correct horse", FAST, "host-a").expect("wrap");
        let stored = serde_json::to_vec(&file).expect("json");
        let parsed = KeyFile::parse("keys/1", &stored).expect("parse");
        assert_eq!(parsed.unwrap("keys/1", b"correct horse").expect("open").as_bytes(), key.as_bytes());
        let wrong = parsed.unwrap("keys/1", b"battery staple").expect_err("wrong passphrase");
        assert_eq!(wrong.kind(), ErrorKind::Unauthorized);
        assert!(wrong.to_string().contains("keys/1") && wrong.to_string().contains("TROVE_PASSWORD"), "{wrong}");
        // Edited to stretch less: refused by the wrapping, not opened more cheaply.
        let mut cheaper = parsed.clone();
        cheaper.memory_kib = 32;
        assert_eq!(cheaper.unwrap("keys/1", b"correct horse").expect_err("edited").kind(), ErrorKind::Unauthorized);
        // Stretching past the bounds, or garbage, is refused before any work.
        let mut costly = parsed.clone();
        costly.memory_kib = u32::MAX;
        let costly = serde_json::to_vec(&costly).expect("json");
        assert_eq!(KeyFile::parse("keys/2", &costly).expect_err("costly").kind(), ErrorKind::Corrupt);
        assert_eq!(KeyFile::parse("keys/3", b"{}").expect_err("garbage").kind(), ErrorKind::Corrupt);
        assert_eq!(wrap(&key, b"", FAST, "h").expect_err("empty").kind(), ErrorKind::InvalidArgument);
    }
}
