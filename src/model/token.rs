//! API tokens as data: what `trove token list` shows of one (never the token itself).

/// An API token as `trove token list` shows it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub id: String,
    pub label: String,
    #[serde(skip)]
    pub created_ns: i64,
    #[serde(skip)]
    pub revoked_ns: Option<i64>,
}
