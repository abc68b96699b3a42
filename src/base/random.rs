//! Random ids: session and trash ids drawn from the kernel's random source.

use crate::base::error::{Error, Result};
use crate::base::id::{PlanId, SessionId, TrashId};

/// A fresh session id: a random UUID (version 4), as the Files API seed says; ids of the
/// earlier form (`sess_` and 12 hex digits) stay valid.
pub fn new_session_id() -> Result<SessionId> {
    let mut b = [0u8; 16];
    fill_random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    SessionId::parse(&format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]))
}

/// A fresh session token: `trs_` and 32 random hex digits (128 bits).
pub fn new_session_token() -> Result<String> {
    let mut b = [0u8; 16];
    fill_random(&mut b)?;
    Ok(format!("trs_{}", hex::encode(b)))
}

/// Fills `buf` from the kernel's random source.
pub fn fill_random(buf: &mut [u8]) -> Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty())
            .map_err(|e| Error::internal(format!("reading random bytes: {e}")))?;
        filled += n;
    }
    Ok(())
}

/// A fresh trash id: `trash_` and 12 random hex digits.
pub fn new_trash_id() -> Result<TrashId> {
    TrashId::parse(&format!("trash_{}", random_hex()?))
}

/// A fresh journal plan id: `op_` and 12 random hex digits.
pub fn new_plan_id() -> Result<PlanId> {
    PlanId::parse(&format!("op_{}", random_hex()?))
}

/// A fresh file watcher id: `w_` and 12 random hex digits.
pub fn new_watcher_id() -> Result<String> {
    Ok(format!("w_{}", random_hex()?))
}

/// 12 random hex digits: 48 bits, ample for ids that are also checked for uniqueness on insert
/// (and for scratch names, such as a store's probe object or a temporary file).
pub fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 6];
    fill_random(&mut bytes)?;
    Ok(hex::encode(bytes))
}
