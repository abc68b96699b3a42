//! The operations layer: one file (or folder) per operation on a [`crate::Repo`]: snapshot,
//! restore, export, check, views, sources, sessions, trash, revert, workspaces, tokens, the
//! audit log, and the journal that carries out multi-file changes of a live tree. Together
//! with `repo.rs`, the only place with `impl Repo` (`tests/layers.rs` checks it).

pub mod audit;
pub mod bucket;
pub mod check;
pub mod diff;
pub mod export;
pub mod fleet;
pub mod fleet_lease;
pub mod forget;
pub mod gc;
pub mod history;
pub mod journal;
pub mod lease;
pub mod live_read;
pub mod log_dir;
pub mod notices;
pub mod repair;
pub mod restore;
pub mod revert;
pub mod scan;
pub mod search;
pub mod session;
pub mod snapshot;
pub mod source;
pub mod staging;
pub mod tokens;
pub mod trash;
pub mod versions;
pub mod view;
pub mod workspace;
