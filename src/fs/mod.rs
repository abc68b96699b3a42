//! The file-system layer: walking a tree, resolving paths beneath a root, the live tree, the
//! work directory the tools change, the workspace lock, and sample workspaces. It imports
//! `base` and `model`, never the repository.

pub mod live;
pub mod lock;
pub mod resolve;
pub mod sample;
pub mod walk;
pub mod workdir;
