//! The review pages' logins: a browser that typed an operator token gets a random cookie that
//! stands for the token's id on this server (never the token itself), and a form token for
//! its state-changing posts; both end when the token is revoked, at logout, or after
//! [`LOGIN_TTL`]. Held in memory: a restarted server asks for the token again.
//!
//! Cross-site requests are refused three ways, any one enough: the cookie is `SameSite=Strict`,
//! a post must come from the page's own origin (`Sec-Fetch-Site`, `Origin`), and it must carry
//! the login's form token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use subtle::ConstantTimeEq;

use crate::base::error::Result;
use crate::base::id::TokenId;

/// The cookie's name; its path is `/ui`, so no API route ever sees it.
pub const COOKIE: &str = "trove_ui";
/// How long a login lasts, however active.
pub const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// The most logins a server keeps: past it the oldest goes (a flood of logins cannot grow it).
const MAX_LOGINS: usize = 1024;

/// One browser's login.
#[derive(Clone)]
pub struct Login {
    /// The operator token it was made with, by id: the audit log's actor for what it does.
    pub token: TokenId,
    /// The token its forms carry.
    pub form_token: String,
    made: Instant,
}

/// The logins of this server, by cookie value.
#[derive(Default)]
pub struct Logins {
    by_cookie: Mutex<HashMap<String, Login>>,
}

fn random_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    crate::base::random::fill_random(&mut bytes)?;
    Ok(hex::encode(bytes))
}

impl Logins {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Login>> {
        self.by_cookie.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new login for `token`: its cookie value and the login.
    pub fn start(&self, token: TokenId) -> Result<(String, Login)> {
        let cookie = random_token()?;
        let login = Login { token, form_token: random_token()?, made: Instant::now() };
        let mut all = self.lock();
        all.retain(|_, l| l.made.elapsed() < LOGIN_TTL);
        if all.len() >= MAX_LOGINS {
            if let Some(oldest) = all.iter().min_by_key(|(_, l)| l.made).map(|(c, _)| c.clone()) {
                all.remove(&oldest);
            }
        }
        all.insert(cookie.clone(), login.clone());
        Ok((cookie, login))
    }

    /// The login `headers`' cookie stands for, if it is still one: not expired, and its token
    /// not revoked (`live` says which tokens are).
    pub fn of(&self, headers: &HeaderMap, live: impl Fn(&TokenId) -> Result<bool>) -> Result<Option<(String, Login)>> {
        // Every cookie of the name is tried: one planted for a narrower path comes first.
        let found = cookie_values(headers).find_map(|c| self.lock().get(&c).cloned().map(|l| (c, l)));
        let Some((cookie, login)) = found else { return Ok(None) };
        if login.made.elapsed() >= LOGIN_TTL || !live(&login.token)? {
            self.lock().remove(&cookie);
            return Ok(None);
        }
        Ok(Some((cookie, login)))
    }

    /// Ends the login of `cookie`.
    pub fn end(&self, cookie: &str) {
        self.lock().remove(cookie);
    }
}

/// The well-formed values of the login cookie among `headers`' cookies.
fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = String> + '_ {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` of a login: `HttpOnly` (no script reads it), `SameSite=Strict` (no other
/// site's page sends it), scoped to the pages.
pub fn set_cookie(value: &str) -> String {
    format!("{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}", LOGIN_TTL.as_secs())
}

/// The `Set-Cookie` that ends it in the browser.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Whether a post with `headers` comes from a page of this server: a browser says where a
/// request comes from in `Sec-Fetch-Site` (only `same-origin`, or `none` for one the user
/// typed, may post) and `Origin` (the scheme, host and port of the page, which must be this
/// `Host`'s). A client that sends neither (not a browser) passes here and still needs the
/// form token.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|s| s != "same-origin" && s != "none") {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let origin = origin.to_str().unwrap_or_default();
    !host.is_empty() && (origin == format!("http://{host}") || origin == format!("https://{host}"))
}

/// Whether `presented` is `login`'s form token, compared in constant time.
pub fn form_token_matches(login: &Login, presented: &str) -> bool {
    bool::from(login.form_token.as_bytes().ct_eq(presented.as_bytes()))
}

/// Whether a state-changing form was posted by this login's own page: from this server's
/// origin, carrying the login's form token.
pub fn posted(headers: &HeaderMap, login: &Login, form_token: &str) -> bool {
    same_origin(headers) && form_token_matches(login, form_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_the_pages_own_origin_may_post() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:4100")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:4100"),
            ("origin", "http://127.0.0.1:4100"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:4100"), ("sec-fetch-site", "same-site")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:4100"), ("origin", "http://127.0.0.1:9999")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:4100"), ("origin", "null")])));
    }

    #[test]
    fn a_login_ends_with_its_token() {
        let logins = Logins::default();
        let id = TokenId::parse("tok_a").expect("id");
        let (cookie, login) = logins.start(id.clone()).expect("login");
        let h = {
            let mut h = HeaderMap::new();
            h.insert(header::COOKIE, HeaderValue::from_str(&format!("x=1; {COOKIE}={cookie}")).expect("value"));
            h
        };
        let found = logins.of(&h, |_| Ok(true)).expect("of").expect("a login");
        assert!(form_token_matches(&found.1, &login.form_token));
        assert!(!form_token_matches(&found.1, "0"));
        assert!(logins.of(&h, |_| Ok(false)).expect("of").is_none(), "revoked");
        assert!(logins.of(&h, |_| Ok(true)).expect("of").is_none(), "and gone for good");
    }
}
