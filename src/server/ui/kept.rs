//! What the review pages keep between requests, held by the server's state: the browsers
//! logged in and the last verification of the audit log. Its own file, importing neither the
//! routes nor the server's state, so that the state can hold it without a cycle.

use super::audit::Verified;
use super::logins::Logins;

/// The pages' own state.
#[derive(Default)]
pub struct UiState {
    /// The browsers logged in.
    pub(super) logins: Logins,
    /// The last verification of the audit log, reused for a few seconds.
    pub(super) verified: Verified,
}
