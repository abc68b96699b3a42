//! The file-system layer: walking a tree, resolving paths beneath a root, the live tree, the
//! work directory the tools change, watching a tree for changes (one set of inotify calls, within
//! a quota of watches), the workspace lock, sample workspaces, the audit log's key file and what
//! that key signed last. It imports `base`, `tlog` and `model`, never the repository.

pub(crate) mod idfile;
pub mod inotify;
pub mod keyfile;
pub mod live;
pub mod lock;
pub mod notify;
pub mod quota;
pub mod resolve;
pub mod sample;
pub mod signed;
pub mod walk;
pub mod watch;
pub mod workdir;
