//! The model layer: plain data types (tree entries, snapshots, sessions, scopes, trash items,
//! audit records), with their encodings. It imports only `base` and `object`'s ids.

pub mod audit;
pub mod diff;
pub mod dir_cache;
pub mod history;
pub mod retention;
pub mod scope;
pub mod session;
pub mod snapshot;
pub mod token;
pub mod trash;
pub mod tree;
pub mod workspace;
