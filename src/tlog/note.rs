//! Signed notes and checkpoints: the C2SP `signed-note` format (a text, a blank line, then one
//! `— <name> <base64(key id || signature)>` line per signature) with Ed25519 keys, and the
//! `tlog-checkpoint` body it signs (origin, tree size, base64 root hash).
//!
//! Keys are written as Go's `golang.org/x/mod/sumdb/note` writes them, so its tools and the
//! witnesses built on it read ours: a verifier key is `<name>+<hex key id>+<base64(0x01 ||
//! public key)>`, a signer key `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || seed)>`, and the
//! key id is the first four bytes of SHA-256(name || "\n" || 0x01 || public key).

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::base::error::{Error, ErrorKind, Result};

use super::merkle::Hash;

/// The algorithm byte of Ed25519 keys and key ids.
const ED25519: u8 = 0x01;
/// The most signatures a note may carry (as Go's reader allows).
const MAX_SIGNATURES: usize = 100;

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

fn malformed(what: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, what)
}

/// A key name: non-empty, no whitespace and no `+` (the separator of the key's text).
fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(malformed(format!("'{name}' cannot name a note key: no spaces or '+', not empty")));
    }
    Ok(())
}

/// The key id of an Ed25519 public key under `name`.
pub fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update([ED25519]);
    h.update(public);
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// A signing key: its name and its Ed25519 seed.
pub struct SignerKey {
    name: String,
    key: SigningKey,
}

impl SignerKey {
    /// A new key called `name`, from the kernel's random source.
    pub fn generate(name: &str) -> Result<SignerKey> {
        check_name(name)?;
        let mut seed = [0u8; 32];
        crate::base::random::fill_random(&mut seed)?;
        Ok(SignerKey { name: name.to_string(), key: SigningKey::from_bytes(&seed) })
    }

    /// Parses `PRIVATE+KEY+<name>+<hex id>+<base64(0x01 || seed)>`.
    pub fn parse(text: &str) -> Result<SignerKey> {
        let bad = || malformed("not a signer key: expected PRIVATE+KEY+<name>+<key id>+<key>");
        let rest = text.trim().strip_prefix("PRIVATE+KEY+").ok_or_else(bad)?;
        let mut parts = rest.splitn(3, '+');
        let (name, id, key) =
            (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
        check_name(name)?;
        let raw = b64().decode(key).map_err(|_| bad())?;
        let seed: [u8; 32] = match raw.split_first() {
            Some((&ED25519, seed)) => seed.try_into().map_err(|_| bad())?,
            _ => return Err(bad()),
        };
        let signer = SignerKey { name: name.to_string(), key: SigningKey::from_bytes(&seed) };
        if hex::encode(signer.id()) != id {
            return Err(malformed("the signer key's id does not match its key"));
        }
        Ok(signer)
    }

    /// The key as text, as [`SignerKey::parse`] reads it.
    pub fn to_text(&self) -> String {
        let mut raw = vec![ED25519];
        raw.extend_from_slice(self.key.as_bytes());
        format!("PRIVATE+KEY+{}+{}+{}", self.name, hex::encode(self.id()), b64().encode(raw))
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key id.
    pub fn id(&self) -> [u8; 4] {
        key_id(&self.name, self.key.verifying_key().as_bytes())
    }

    /// The matching verifier key.
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey { name: self.name.clone(), id: self.id(), key: self.key.verifying_key() }
    }

    /// Signs `text` (which must end in a newline, without blank lines) into a note.
    pub fn sign(&self, text: &str) -> Result<String> {
        check_text(text)?;
        let sig = self.key.sign(text.as_bytes());
        let mut blob = self.id().to_vec();
        blob.extend_from_slice(&sig.to_bytes());
        Ok(format!("{text}\n\u{2014} {} {}\n", self.name, b64().encode(blob)))
    }
}

/// A verifier key: a name, a key id and an Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    id: [u8; 4],
    key: VerifyingKey,
}

impl VerifierKey {
    /// Parses `<name>+<hex id>+<base64(0x01 || public key)>`.
    pub fn parse(text: &str) -> Result<VerifierKey> {
        let bad = || malformed(format!("'{}' is not a verifier key: expected <name>+<key id>+<key>", text.trim()));
        let mut parts = text.trim().splitn(3, '+');
        let (name, id, key) =
            (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
        check_name(name).map_err(|_| bad())?;
        let raw = b64().decode(key).map_err(|_| bad())?;
        let public: [u8; 32] = match raw.split_first() {
            Some((&ED25519, k)) => k.try_into().map_err(|_| bad())?,
            _ => return Err(bad()),
        };
        let key = VerifyingKey::from_bytes(&public).map_err(|_| bad())?;
        let want = key_id(name, &public);
        if id.len() != 8 || hex::encode(want) != id {
            return Err(malformed(format!("the key id of '{}' does not match its key", text.trim())));
        }
        Ok(VerifierKey { name: name.to_string(), id: want, key })
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `note` carries a signature line naming this key (its name and key id), valid or
    /// not: which of several keys to check a note with.
    pub fn signed_by(&self, note: &str) -> bool {
        let Ok((_, sigs)) = split_note(note) else { return false };
        sigs.lines()
            .filter_map(|l| parse_signature_line(l).ok())
            .any(|(name, blob)| name == self.name && blob.get(..4) == Some(&self.id[..]))
    }

    /// Checks `note`: at least this key's signature, and it is valid. Returns the note's text.
    /// Signatures of other keys (a witness's) are left aside.
    pub fn open<'n>(&self, note: &'n str) -> Result<&'n str> {
        let (text, sigs) = split_note(note)?;
        let mut found = false;
        for line in sigs.lines() {
            let (name, blob) = parse_signature_line(line)?;
            if name != self.name || blob.len() < 4 || blob[..4] != self.id {
                continue;
            }
            let sig: [u8; 64] = blob[4..].try_into().map_err(|_| malformed("a note signature has the wrong length"))?;
            let sig = ed25519_dalek::Signature::from_bytes(&sig);
            self.key.verify_strict(text.as_bytes(), &sig).map_err(|_| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!("the note's signature by '{}+{}' does not verify", self.name, hex::encode(self.id)),
                )
            })?;
            found = true;
        }
        if !found {
            return Err(Error::new(ErrorKind::Corrupt, format!("the note carries no signature by '{}'", self.name)));
        }
        Ok(text)
    }
}

impl std::fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut raw = vec![ED25519];
        raw.extend_from_slice(self.key.as_bytes());
        write!(f, "{}+{}+{}", self.name, hex::encode(self.id), b64().encode(raw))
    }
}

/// The keys a note's signature lines name, as `<name>+<key id>` (none if it does not parse).
pub fn signers(note: &str) -> Vec<String> {
    let Ok((_, sigs)) = split_note(note) else { return Vec::new() };
    sigs.lines()
        .filter_map(|l| parse_signature_line(l).ok())
        .map(|(name, blob)| format!("{name}+{}", hex::encode(blob.get(..4).unwrap_or(&[]))))
        .collect()
}

/// A note's text must end in a newline, be free of control characters but newlines, and have
/// no blank line (the blank line separates the signatures).
fn check_text(text: &str) -> Result<()> {
    if !text.ends_with('\n') || text.contains("\n\n") || text.starts_with('\n') {
        return Err(malformed("a note's text ends in a newline and has no blank line"));
    }
    if text.chars().any(|c| c.is_control() && c != '\n') {
        return Err(malformed("a note's text has no control characters"));
    }
    Ok(())
}

/// A note as (text with its final newline, signature lines).
fn split_note(note: &str) -> Result<(&str, &str)> {
    let at = note.rfind("\n\n").ok_or_else(|| malformed("a note has its signatures after a blank line"))?;
    let (text, sigs) = (&note[..=at], &note[at + 2..]);
    check_text(text)?;
    if sigs.is_empty() || !sigs.ends_with('\n') {
        return Err(malformed("a note's signature lines end in newlines"));
    }
    if sigs.lines().count() > MAX_SIGNATURES {
        return Err(malformed(format!("a note carries more than {MAX_SIGNATURES} signatures")));
    }
    Ok((text, sigs))
}

/// `— <name> <base64>` as (name, decoded blob).
fn parse_signature_line(line: &str) -> Result<(&str, Vec<u8>)> {
    let bad = || malformed(format!("'{line}' is not a note signature line"));
    let rest = line.strip_prefix("\u{2014} ").ok_or_else(bad)?;
    let (name, blob) = rest.split_once(' ').ok_or_else(bad)?;
    if name.is_empty() || blob.contains(' ') {
        return Err(bad());
    }
    Ok((name, b64().decode(blob).map_err(|_| bad())?))
}

/// A checkpoint: the log's origin, its size and its root (C2SP `tlog-checkpoint`), and when it
/// was signed (an extension line, `time <RFC 3339 UTC, nanoseconds>`; absent from checkpoints
/// written before it existed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's name.
    pub origin: String,
    /// How many records the log held.
    pub size: u64,
    /// The Merkle root of those records.
    pub root: Hash,
    /// When it was signed (ns since the Unix epoch), inside the signed text.
    pub time_ns: Option<i64>,
}

/// The extension line that carries a checkpoint's time.
const TIME_LINE: &str = "time ";

impl Checkpoint {
    /// The note text: origin, size and base64 root, a line each, then the time line if there
    /// is a time.
    pub fn text(&self) -> String {
        let mut text = format!("{}\n{}\n{}\n", self.origin, self.size, b64().encode(self.root));
        if let Some(ns) = self.time_ns {
            text.push_str(&format!("{TIME_LINE}{}\n", crate::base::time::rfc3339_nanos(ns)));
        }
        text
    }

    /// Parses a checkpoint's text. Lines after the third are extensions: a `time` line is read
    /// (at most one, and it must parse); any other is allowed and ignored, as C2SP says.
    pub fn parse(text: &str) -> Result<Checkpoint> {
        let bad = |what: &str| malformed(format!("not a checkpoint: {what}"));
        let mut lines = text.lines();
        let origin = lines.next().filter(|o| !o.is_empty()).ok_or_else(|| bad("no origin line"))?;
        let size = lines.next().ok_or_else(|| bad("no size line"))?;
        if size.is_empty()
            || size.len() > 20
            || !size.bytes().all(|b| b.is_ascii_digit())
            || (size.len() > 1 && size.starts_with('0'))
        {
            return Err(bad("the size is not a decimal number"));
        }
        let size = size.parse().map_err(|_| bad("the size is too large"))?;
        let root = lines.next().ok_or_else(|| bad("no root line"))?;
        let root: Hash = b64()
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the root is not a base64 SHA-256"))?;
        let mut time_ns = None;
        for line in lines {
            let Some(t) = line.strip_prefix(TIME_LINE) else { continue };
            if time_ns.is_some() {
                return Err(bad("two time lines"));
            }
            time_ns = Some(crate::base::time::parse_rfc3339(t).ok_or_else(|| bad("the time is not RFC 3339"))?);
        }
        Ok(Checkpoint { origin: origin.to_string(), size, root, time_ns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example key and note of golang.org/x/mod/sumdb/note: Ed25519 is deterministic, so a
    // correct implementation reproduces the published signature byte for byte.
    const VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const SKEY: &str = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const TEXT: &str =
        "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const SIGNED: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

    #[test]
    fn the_reference_key_signs_the_reference_note_byte_for_byte() {
        let signer = SignerKey::parse(SKEY).expect("signer");
        assert_eq!(signer.to_text(), SKEY);
        assert_eq!(signer.verifier().to_string(), VKEY);
        assert_eq!(signer.sign(TEXT).expect("sign"), SIGNED);
        let v = VerifierKey::parse(VKEY).expect("verifier");
        assert_eq!(v.open(SIGNED).expect("open"), TEXT);
        // A changed text, signature or key is refused.
        assert!(v.open(&SIGNED.replace("cryptography", "cryptographY")).is_err());
        assert!(v.open(&SIGNED.replace("x08go", "x08gp")).is_err());
        let other = SignerKey::generate("PeterNeumann").expect("key");
        assert!(other.verifier().open(SIGNED).is_err());
        for bad in [&VKEY[1..], "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "a+b", ""] {
            assert!(VerifierKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn checkpoints_round_trip_and_refuse_malformed_text() {
        let c = Checkpoint { origin: "trove.example/log".into(), size: 42, root: [7; 32], time_ns: None };
        assert_eq!(Checkpoint::parse(&c.text()).expect("parse"), c);
        // The time line reads back to the nanosecond; other extension lines are ignored.
        let timed = Checkpoint { time_ns: Some(1_764_000_000_123_456_789), ..c.clone() };
        assert!(timed.text().ends_with("\ntime 2025-11-24T16:00:00.123456789Z\n"), "{}", timed.text());
        assert_eq!(Checkpoint::parse(&timed.text()).expect("parse"), timed);
        assert_eq!(Checkpoint::parse(&format!("{}other extension\n", timed.text())).expect("parse"), timed);
        for bad in ["time yesterday\n", "time 2025-11-24T16:00:00Z\ntime 2025-11-24T16:00:01Z\n"] {
            assert!(Checkpoint::parse(&format!("{}{bad}", c.text())).is_err(), "{bad:?}");
        }
        for bad in ["", "o\n", "o\n-1\nAA==\n", "o\n01\nBwcH\n", "o\n1\nnot base64\n", "o\n1\nAAAA\n"] {
            assert!(Checkpoint::parse(bad).is_err(), "{bad:?}");
        }
        let key = SignerKey::generate("trove.example/log").expect("key");
        let note = key.sign(&c.text()).expect("sign");
        assert_eq!(Checkpoint::parse(key.verifier().open(&note).expect("open")).expect("parse"), c);
        assert!(key.sign("no newline").is_err() && key.sign("a\n\nb\n").is_err());
    }
}
