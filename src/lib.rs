//! trove: a content-addressed snapshot and trash store for the workspaces AI agents work in.
//!
//! The library does the work; the `trove` binary and (later) the HTTP server are thin shells
//! over it. Nothing here prints or exits. Start at [`Repo`]: `Repo::init` / `Repo::open`, then
//! [`Repo::snapshot`], and the read-back operations in `view`, `restore` and `export`.

// No panic is reachable from a request: library code neither unwraps (`Cargo.toml` denies it
// everywhere), expects nor panics; unit tests may.
#![cfg_attr(
    not(test),
    deny(clippy::expect_used, clippy::panic, clippy::unreachable, clippy::todo, clippy::unimplemented)
)]

pub mod audit;
pub mod budget;
pub mod check;
pub mod error;
pub mod export;
pub mod live;
pub mod manifest;
pub mod object;
pub mod patch;
pub mod path;
pub mod pattern;
pub mod progress;
pub mod repo;
pub mod resolve;
pub mod restore;
pub mod sample;
pub mod scope;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod source;
pub mod tools;
pub mod trash;
pub mod tree;
pub mod view;
pub mod walk;
pub mod workspace;

pub use error::{Error, ErrorKind, Result};
pub use manifest::snapshots::{Counts, SnapshotInfo, Warning};
pub use progress::{NoProgress, Progress};
pub use repo::Repo;
pub use snapshot::SnapshotOptions;
pub use tree::{Entry, EntryKind};
