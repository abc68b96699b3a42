//! API tokens as data: what `trove token list` shows of one (never the token itself).

/// An API token as `trove token list` shows it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token's public id.
    pub id: crate::base::id::TokenId,
    /// What its creator called it.
    pub label: String,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// When it was revoked, nanoseconds since the Unix epoch; `None` while it is live.
    pub revoked_ns: Option<i64>,
}

/// A token as `trove token list --json` shows it: camelCase, times in RFC 3339 UTC.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord<'a> {
    /// The token's public id.
    pub id: &'a crate::base::id::TokenId,
    /// What its creator called it.
    pub label: &'a str,
    /// When it was created.
    pub created_at: String,
    /// When it was revoked; `null` while it is live.
    pub revoked_at: Option<String>,
}

impl Token {
    /// The token as it is shown.
    pub fn record(&self) -> TokenRecord<'_> {
        TokenRecord {
            id: &self.id,
            label: &self.label,
            created_at: crate::base::time::iso_time(self.created_ns),
            revoked_at: self.revoked_ns.map(crate::base::time::iso_time),
        }
    }
}
