//! The operations layer: one file per operation on a [`crate::Repo`] (snapshot, restore,
//! export, check, views, sources, sessions, trash, workspaces). Together with `repo.rs`, the
//! only place with `impl Repo`.

pub mod audit;
pub mod check;
pub mod export;
pub mod restore;
pub mod session;
pub mod snapshot;
pub mod source;
pub mod tokens;
pub mod trash;
pub mod view;
pub mod workspace;
