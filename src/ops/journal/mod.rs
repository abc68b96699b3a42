//! Mutations of the live tree as journaled plans: every file tool that changes files builds a
//! [`Plan`] of steps, and `Repo::execute` carries it out so that it lands whole or not at all,
//! even across a crash (ARCHITECTURE.md, "Tool journal").
//!
//! The order of work:
//! 1. journal: pre-images and new contents are stored as objects and the plan is committed to
//!    the manifest: from here on the mutation is decided, and recovery rolls it forward;
//! 2. stage: every new content goes to a temporary file beside its target, fsynced;
//! 3. apply: each step checks the file's sha256 immediately before its rename, then renames;
//!    a deleted path is renamed to a grave name beside it. A step that finds the file changed
//!    by someone outside trove undoes the steps before it and the plan fails `stale_file`;
//! 4. bury: the graves are removed;
//! 5. finish: one transaction appends an audit record per step, records trash items, and
//!    deletes the journal row. It may commit without an fsync: if it is lost, the journal row
//!    is still there and recovery writes the same records.

mod apply;
mod execute;
mod plan;
mod recover;

pub use apply::{already_exists, stale};
pub use plan::{hex_sha, Author, Done, Draft, NewContent};
// Tests build plans by hand (`trove::testing`); garbage collection reads their objects.
pub use plan::{Plan, Step};
