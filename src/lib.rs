#![deny(missing_docs)]
//! trove: a content-addressed snapshot and trash store for the workspaces AI agents work in.
//!
//! The library does the work; the `trove` binary and (later) the HTTP server are thin shells
//! over it. Nothing here prints or exits. Start at [`Repo`]: `Repo::init` / `Repo::open`, then
//! [`Repo::snapshot`], and the read-back operations in `view`, `restore` and `export`.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use trove::{Repo, SnapshotOptions};
//!
//! let tmp = tempfile::tempdir()?;
//! let (workspace, repository) = (tmp.path().join("ws"), tmp.path().join("repo"));
//! std::fs::create_dir_all(workspace.join("src"))?;
//! std::fs::write(workspace.join("src/main.rs"), "fn main() {}\n")?;
//!
//! let mut repo = Repo::init(&repository, "docs:example")?;
//! repo.set_cache_dir(&tmp.path().join("cache"));
//! let options = SnapshotOptions { workspace: Some("demo".into()), ..Default::default() };
//! let first = repo.snapshot(&workspace, &options)?;
//!
//! // Every version stays readable from the repository, whatever happens to the workspace.
//! std::fs::remove_dir_all(&workspace)?;
//! let entry = repo.lookup(&first, b"src/main.rs")?;
//! assert_eq!(repo.read_content(&entry)?, b"fn main() {}\n");
//! assert_eq!(repo.snapshots(Some("demo"))?.len(), 1);
//! # Ok(())
//! # }
//! ```

// No panic is reachable from a request: library code neither unwraps (`Cargo.toml` denies it
// everywhere), expects nor panics; unit tests may.
#![cfg_attr(
    not(test),
    deny(clippy::expect_used, clippy::panic, clippy::unreachable, clippy::todo, clippy::unimplemented)
)]

// The layers, lowest first (ARCHITECTURE.md, "Layers"; `tests/layers.rs` keeps them one-way).
mod base;
mod fs;
mod manifest;
mod model;
pub mod object;
mod ops;
pub mod patch;
mod repo;
pub mod server;
pub mod tlog;
pub mod tools;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use base::budget::Budget;
pub use base::descriptors::{
    raise_limit as raise_open_file_limit, reserve as reserve_descriptors, RESERVED as RESERVED_DESCRIPTORS,
};
pub use base::error::{from_io, Error, ErrorKind, Result};
pub use base::id::{NodeName, PlanId, SessionId, SnapshotId, TokenId, TrashId};
pub use base::path;
pub use base::pattern;
pub use base::progress::{NoProgress, Progress};
pub use base::time::{iso_time, now_ns, parse_rfc3339, rfc3339};
pub use fs::live::{ChangePolicy, LiveFile, READ_LIMIT as FILES_READ_LIMIT};
pub use fs::sample;
pub use fs::walk::Excludes;
pub use model::audit::{
    AuditEntry, AuditKeyInfo, AuditQuery, AuditRecord, CheckpointRecord, CheckpointSeen, Checkpointed,
    ConsistencyProof, FullRecord, HistoryEntry, InclusionProof, Order, SeqRange, VerifyReport,
};
pub use model::diff::{
    ChangeStatus, ChangedPath, DiffEntry, DiffReport, DiffStats, Endpoint, EndpointKind, SessionChanges, Version,
};
pub use model::history::{FindResult, LogEntry, PathLog, PathVersion, VersionOrigin};
pub use model::retention::RetentionPolicy;
pub use model::scope::{FileAccess, Scope};
pub use model::session::{EndReason, Ended, Session, SessionRecord, SessionSpec, Status};
pub use model::snapshot::{Counts, SnapshotInfo, SnapshotRecord, Warning};
pub use model::token::{Token, TokenRecord};
pub use model::trash::{
    BulkRestore, ItemError, OnConflict, PurgeReport, PurgedItem, RestoreOutcome, RestoreResult, RestoredFilter,
    Retention, TrashCursor, TrashEntry, TrashFilter, TrashItem, TrashMember, TrashPage, TrashRecord,
};
pub use model::tree::{Entry, EntryKind};
pub use model::workspace::{Workspace, DEFAULT_TRASH_AGE_S};
pub use ops::audit::appender::AuditAppender;
pub use ops::audit::bundle::{verify_bundle, BundleSummary};
pub use ops::audit::tiles::verify_published;
pub use ops::bucket::KeyInfo;
pub use ops::check::{CheckOptions, CheckReport, Problem, ProblemKind, ReadData};
pub use ops::diff::{DiffOptions, DiffTarget, DEFAULT_RENAME_THRESHOLD};
pub use ops::fleet::{fleet_audit, fleet_trash_page, unique_snapshot, NodeView};
pub use ops::fleet_lease::let_go_of_leases;
pub use ops::forget::{ForgetReport, ForgottenSnapshot, KeptSnapshot, PinResult, WorkspaceForget};
pub use ops::gc::{
    GcOptions, GcReport, KindCounts, Marked, NodeCollected, DEFAULT_GRACE, DEFAULT_RECOMPRESS,
    DEFAULT_REPACK_THRESHOLD, MAX_RECOMPRESS,
};
pub use ops::live_read::LiveFeeds;
pub use ops::repair::{RepairIndexReport, RepairReport, LOST_DIR_MARKER};
pub use ops::restore::{RestoreOptions, RestoreReport};
pub use ops::revert::RevertResult;
pub use ops::search::{LineMatch, Matcher, SearchMode, SearchSpec, SnapshotSearch};
pub use ops::snapshot::SnapshotOptions;
pub use ops::source::{FileListing, ListedFile, Origin, Source, WorkspaceView};
pub use ops::tokens;
pub use ops::trash::copy_out::{check_copy_targets, CopiedOut};
pub use ops::trash::elsewhere::{restore_trash_in_fleet, trash_by_node, FleetItems};
pub use ops::trash::export::export_trash_of;
pub use ops::trash::purge::{PurgeReason, TrashSet};
pub use ops::trash::restore::{RestoreRequest, Restorer, TrashSelection};
pub use ops::view::{short_id, ContentReader};
pub use repo::{read_password_file, BucketAccess};
pub use repo::{AuditSettings, Config, Layout, Repo, Shared, CONFIG_FILE};
