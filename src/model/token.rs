//! API tokens as data: what `trove token list` shows of one (never the token itself).

/// An API token as `trove token list` shows it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    /// The token's public id.
    pub id: crate::base::id::TokenId,
    /// What its creator called it.
    pub label: String,
    /// Creation time, nanoseconds since the Unix epoch.
    #[serde(skip)]
    pub created_ns: i64,
    /// When it was revoked, nanoseconds since the Unix epoch; `None` while it is live.
    #[serde(skip)]
    pub revoked_ns: Option<i64>,
}
