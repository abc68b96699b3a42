//! The audit log as a transparency log: its Merkle tree (RFC 6962 / RFC 9162) and the signed
//! checkpoints of its size and root (C2SP `signed-note` and `tlog-checkpoint`), and the tiles it
//! is published as (C2SP `tlog-tiles`). Pure algorithms and formats: nothing here reads the
//! repository.

pub mod merkle;
pub mod note;
pub mod tiles;
