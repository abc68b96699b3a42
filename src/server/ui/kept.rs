//! What the review pages keep between requests, held by the server's state: the browsers
//! logged in, the last verification of the audit log, and the totals of ended sessions. Its
//! own file, importing neither the routes nor the server's state, so that the state can hold it
//! without a cycle.

use std::collections::HashMap;
use std::sync::Mutex;

use super::audit::Verified;
use super::logins::Logins;
use crate::base::id::{SessionId, SnapshotId};
use crate::model::diff::DiffStats;

/// The pages' own state.
#[derive(Default)]
pub struct UiState {
    /// The browsers logged in.
    pub(super) logins: Logins,
    /// The last verification of the audit log, reused for a few seconds.
    pub(super) verified: Verified,
    /// The totals of ended sessions' changes, for the sessions list.
    pub(super) ended: EndedTotals,
}

/// The most ended sessions whose totals are kept; past it the memory starts over.
const TOTALS_KEPT: usize = 10_000;

/// The totals of ended sessions' changes (their start against their final snapshot), which no
/// longer change: the sessions list counts each once, not at every load (counting reads every
/// changed file's two versions). Keyed by the session and its last snapshot, so a snapshot
/// recorded for it later is counted again.
#[derive(Default)]
pub struct EndedTotals {
    kept: Mutex<HashMap<SessionId, (Option<SnapshotId>, DiffStats)>>,
}

impl EndedTotals {
    /// The totals kept for session `id` ended at snapshot `last`.
    pub fn get(&self, id: &SessionId, last: &Option<SnapshotId>) -> Option<DiffStats> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.get(id).filter(|(at, _)| at == last).map(|(_, stats)| stats.clone())
    }

    /// Keeps `stats` for session `id` ended at snapshot `last`.
    pub fn put(&self, id: &SessionId, last: Option<SnapshotId>, stats: DiffStats) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= TOTALS_KEPT {
            kept.clear();
        }
        kept.insert(id.clone(), (last, stats));
    }
}
