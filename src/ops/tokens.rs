//! API tokens: creating, revoking and listing them, and checking a presented one. Tokens are
//! stored as SHA-256 hashes; a presented token is hashed and compared with every known hash in
//! constant time, so neither a stored secret nor response timing gives one away.

use std::sync::Mutex;

use rusqlite::Connection;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::base::error::{Error, Result};
use crate::base::id::{SessionId, TokenId};
use crate::base::random::fill_random;
use crate::base::time::now_ns;
use crate::manifest;
use crate::manifest::tokens as rows;
use crate::model::audit::AuditRecord;
use crate::model::token::Token;
use crate::repo::Repo;

/// The SHA-256 a token is stored and compared as.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The id of the known token `token` hashes to, if any. Every hash is compared, whatever
/// matched, so the time taken says nothing of which.
pub fn token_matches(token: &str, known: &[([u8; 32], TokenId)]) -> Option<TokenId> {
    let presented = hash_token(token);
    let mut found = None;
    for (h, id) in known {
        if bool::from(h.ct_eq(&presented)) {
            found = Some(id.clone());
        }
    }
    found
}

/// Creates a token, stores its hash under `label` with an audit record, and returns the token
/// (the only time it is ever seen in the clear) and its id.
pub fn create_token(repo: &Repo, label: &str, actor: &str) -> Result<(String, TokenId)> {
    let mut bytes = [0u8; 24];
    fill_random(&mut bytes)?;
    let token = format!("trove_{}", hex::encode(bytes));
    let hash = hash_token(&token);
    let id = repo.manifest().write(|tx| {
        let id = rows::add_token(tx, &hash, label, now_ns())?;
        let mut rec = AuditRecord::ok(now_ns(), actor, "token_create");
        rec.details = serde_json::json!({"id": id, "label": label});
        manifest::audit::append(tx, &rec)?;
        Ok(id)
    })?;
    Ok((token, id))
}

/// Revokes token `id` (effective at once for running servers), with an audit record.
pub fn revoke_token(repo: &Repo, id: &TokenId, actor: &str) -> Result<()> {
    repo.manifest().write(|tx| {
        if !rows::revoke_token(tx, id, now_ns())? {
            return Err(Error::not_found(format!("no live token '{id}': list them with `trove token list`")));
        }
        let mut rec = AuditRecord::ok(now_ns(), actor, "token_revoke");
        rec.details = serde_json::json!({"id": id});
        manifest::audit::append(tx, &rec)
    })?;
    Ok(())
}

/// Every token of the repository, revoked ones included.
pub fn list_tokens(repo: &Repo) -> Result<Vec<Token>> {
    rows::tokens(repo.manifest().conn())
}

/// The hashes and ids of the live tokens stored in the repository.
pub fn stored_tokens(repo: &Repo) -> Result<Vec<([u8; 32], TokenId)>> {
    rows::token_hashes(repo.manifest().conn())
}

/// Token hashes and ids.
type Known = Vec<([u8; 32], TokenId)>;

/// Session token hashes and the sessions they stand for.
type SessionKeys = Vec<([u8; 32], SessionId)>;

/// What [`Tokens`] read from the manifest, on a connection of its own.
struct Stored {
    conn: Connection,
    /// `PRAGMA data_version` at the last read.
    seen: i64,
    operators: Known,
    sessions: SessionKeys,
}

/// The tokens a server accepts: the manifest's, read again when it changed, and the ones it was
/// started with (`TROVE_API_TOKEN`).
pub struct Tokens {
    fixed: Known,
    /// The operators' and the live session tokens, as last read.
    stored: Mutex<Stored>,
}

impl Tokens {
    /// Watches the tokens of `repo`, accepting `fixed` (hashes and ids) besides them.
    pub fn new(repo: &Repo, fixed: Known) -> Result<Tokens> {
        let conn = repo.manifest().reader()?;
        let stored = Stored { conn, seen: -1, operators: Vec::new(), sessions: Vec::new() };
        Ok(Tokens { fixed, stored: Mutex::new(stored) })
    }

    /// The id of the token `presented` is, if it is a live one now.
    pub fn check(&self, presented: &str) -> Result<Option<TokenId>> {
        self.with_fresh(|stored, _| {
            let found = token_matches(presented, stored);
            found.or_else(|| token_matches(presented, &self.fixed))
        })
    }

    /// Whether the operator token `id` is still live (not revoked): what keeps a browser's
    /// login to the review pages, which holds the id and never the token, tied to the token.
    pub fn is_live(&self, id: &TokenId) -> Result<bool> {
        self.with_fresh(|stored, _| stored.iter().chain(self.fixed.iter()).any(|(_, known)| known == id))
    }

    /// The session a session token `presented` stands for, while it is live (its session has
    /// not ended).
    pub fn check_session(&self, presented: &str) -> Result<Option<SessionId>> {
        let hash = hash_token(presented);
        self.with_fresh(|_, sessions| {
            sessions.iter().find(|(h, _)| bool::from(h.ct_eq(&hash))).map(|(_, id)| id.clone())
        })
    }

    /// Runs `f` on the tokens, read again if the manifest changed since the last read.
    fn with_fresh<T>(&self, f: impl FnOnce(&Known, &SessionKeys) -> T) -> Result<T> {
        let mut guard = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        let version: i64 = s
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| Error::db("checking for new tokens", e))?;
        if version != s.seen {
            s.operators = rows::token_hashes(&s.conn)?;
            s.sessions = crate::manifest::sessions::live_tokens(&s.conn)?;
            s.seen = version;
        }
        Ok(f(&s.operators, &s.sessions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_known_token_matches() {
        let id = |s: &str| TokenId::parse(s).expect("id");
        let known = [(hash_token("a"), id("tok_a")), (hash_token("secret"), id("tok_s"))];
        assert_eq!(token_matches("secret", &known), Some(id("tok_s")));
        assert_eq!(token_matches("secreT", &known), None);
        assert_eq!(token_matches("", &known), None);
        assert_eq!(token_matches("secret", &[]), None);
    }
}
