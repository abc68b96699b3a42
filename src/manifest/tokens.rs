//! Manifest rows of API tokens: a token's hash, id and label, and when it was revoked.

use rusqlite::{params, Connection};

use super::db;
use crate::base::error::{Error, Result};
use crate::base::id::TokenId;
use crate::model::token::Token;

/// A token's id: `tok_` and the first 12 hex digits of its SHA-256 (schema version 4).
pub fn token_id(hash: &[u8; 32]) -> Result<TokenId> {
    TokenId::parse(&format!("tok_{}", hex::encode(&hash[..6])))
}

pub fn add_token(conn: &Connection, hash: &[u8; 32], label: &str, now_ns: i64) -> Result<TokenId> {
    let id = token_id(hash)?;
    conn.execute(
        "INSERT INTO api_tokens (hash, label, created_ns, id) VALUES (?1, ?2, ?3, ?4)",
        params![&hash[..], label, now_ns, id],
    )
    .map_err(db("storing an API token"))?;
    Ok(id)
}

/// The hashes and ids of the tokens that are not revoked.
pub fn token_hashes(conn: &Connection) -> Result<Vec<([u8; 32], TokenId)>> {
    let mut stmt = conn
        .prepare_cached("SELECT hash, id FROM api_tokens WHERE revoked_ns IS NULL")
        .map_err(db("reading API tokens"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, TokenId>(1)?)))
        .map_err(db("reading API tokens"))?;
    let mut out = Vec::new();
    for r in rows {
        let (h, id) = r.map_err(db("reading API tokens"))?;
        out.push((h.try_into().map_err(|_| Error::corrupt("an API token hash is not 32 bytes"))?, id));
    }
    Ok(out)
}

/// Every token, oldest first, revoked ones included.
pub fn tokens(conn: &Connection) -> Result<Vec<Token>> {
    let mut stmt = conn
        .prepare("SELECT id, label, created_ns, revoked_ns FROM api_tokens ORDER BY created_ns, id")
        .map_err(db("listing API tokens"))?;
    let rows = stmt
        .query_map([], |r| Ok(Token { id: r.get(0)?, label: r.get(1)?, created_ns: r.get(2)?, revoked_ns: r.get(3)? }))
        .map_err(db("listing API tokens"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db("listing API tokens"))
}

/// Marks token `id` revoked; returns whether a live token had that id.
pub fn revoke_token(conn: &Connection, id: &TokenId, now_ns: i64) -> Result<bool> {
    let n = conn
        .execute("UPDATE api_tokens SET revoked_ns = ?2 WHERE id = ?1 AND revoked_ns IS NULL", params![id, now_ns])
        .map_err(db("revoking an API token"))?;
    Ok(n == 1)
}
