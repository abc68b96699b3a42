//! Workspace paths: relative, `/`-separated byte strings, checked once at the edge.
//!
//! Rules (DESIGN.md, "Path rules"): a leading `/`, a `..` component, a NUL byte, an empty
//! component (`a//b`) or a `.` component inside the path is `invalid_path`. A leading `./` and
//! a trailing `/` are forgiven, as shells produce them. The empty path means the root, and only
//! operations on directories accept it.

use crate::base::error::{Error, ErrorKind, Result};

/// The most directories deep a path or a walked tree may go: walks leave deeper directories out
/// (with a `too_deep` warning) and paths with more components are `too_deep`. Deep enough for
/// any real tree; it bounds the memory of the paths a walk holds (quadratic in depth).
pub const MAX_DEPTH: usize = 4096;
/// The longest name of one component, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME: usize = 255;
/// The longest path trove takes, in bytes (paths past the kernel's 4096 are opened a run of
/// components at a time).
pub const MAX_PATH: usize = 65_535;

fn invalid(path: &[u8], why: &str) -> Error {
    Error::new(
        ErrorKind::InvalidPath,
        format!("invalid path '{}': {why}; give a path relative to the workspace root", String::from_utf8_lossy(path)),
    )
}

/// Normalizes and checks `path`; returns its components (empty for the root).
pub fn components(path: &[u8]) -> Result<Vec<&[u8]>> {
    if path.contains(&0) {
        return Err(invalid(path, "it contains a NUL byte"));
    }
    if path.len() > MAX_PATH {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!(
                "path '{}…' is {} bytes long, over the {MAX_PATH}-byte limit: use a shorter path",
                String::from_utf8_lossy(&path[..60]),
                path.len()
            ),
        ));
    }
    if path.first() == Some(&b'/') {
        return Err(invalid(path, "it starts with '/'"));
    }
    let mut p = path;
    while let Some(rest) = p.strip_prefix(b"./") {
        p = rest;
    }
    while let Some(rest) = p.strip_suffix(b"/") {
        p = rest;
    }
    if p.is_empty() || p == b"." {
        return Ok(Vec::new());
    }
    let parts: Vec<&[u8]> = p.split(|&b| b == b'/').collect();
    if parts.len() > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::TooDeep,
            format!(
                "path '{}…' has {} components, more than the {MAX_DEPTH} trove walks: use a shorter path",
                String::from_utf8_lossy(&path[..path.len().min(60)]),
                parts.len()
            ),
        ));
    }
    for part in &parts {
        if part.len() > MAX_NAME {
            return Err(Error::new(
                ErrorKind::NameTooLong,
                format!(
                    "name '{}…' in path '{}…' is {} bytes long, over the {MAX_NAME}-byte limit of a file name: use a shorter name",
                    String::from_utf8_lossy(&part[..40]),
                    String::from_utf8_lossy(&path[..path.len().min(40)]),
                    part.len()
                ),
            ));
        }
        match *part {
            b"" => return Err(invalid(path, "it has an empty component ('//')")),
            b".." => return Err(invalid(path, "it contains '..'")),
            b"." => return Err(invalid(path, "it contains a '.' component")),
            _ => {}
        }
    }
    Ok(parts)
}

/// A workspace path as a URL carries it (still percent-encoded): decoded to bytes, so a name
/// that is not UTF-8 can be named (`%FF`); a backslash, raw or encoded, is `invalid_path`
/// (`..\\..\\etc` must not mean one thing to trove and another to a client), as is a malformed
/// escape; then the path rules apply. An encoded `/` (`%2F`) separates components like `/`.
pub fn from_url(encoded: &str) -> Result<Vec<u8>> {
    let out = percent_decode(encoded)?;
    if out.contains(&b'\\') {
        return Err(invalid(&out, "it contains a backslash: separate components with '/'"));
    }
    normalize_nonempty(&out)
}

/// The bytes a percent-encoded URL component stands for; a '%' not followed by two hex digits
/// is `invalid_path`.
pub fn percent_decode(encoded: &str) -> Result<Vec<u8>> {
    let raw = encoded.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' {
            let hex = raw.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| {
                invalid(raw, "it has a '%' that does not start a two-digit hex escape (write '%25' for '%')")
            })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// The normalized form of a path that must name something below the root.
pub fn normalize_nonempty(path: &[u8]) -> Result<Vec<u8>> {
    let parts = components(path)?;
    if parts.is_empty() {
        return Err(invalid(path, "it is empty"));
    }
    Ok(parts.join(&b'/'))
}

/// How paths appear in text and JSON: UTF-8 as is; other bytes as U+FFFD in `path`, with the
/// exact bytes in a `pathBase64` field beside it (see README, "Names that are not UTF-8").
pub fn display(path: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path)
}

/// Adds `key` (lossy UTF-8) and, when the bytes are not UTF-8, `keyBase64` with the exact
/// bytes: the one documented way names that are not UTF-8 appear in JSON (CLI and HTTP alike).
pub fn put_json(map: &mut serde_json::Map<String, serde_json::Value>, key: &str, bytes: &[u8]) {
    use base64::Engine;
    use serde_json::Value;
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            map.insert(key.into(), Value::String(s.into()));
        }
        Err(_) => {
            map.insert(key.into(), Value::String(String::from_utf8_lossy(bytes).into_owned()));
            map.insert(format!("{key}Base64"), Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(components(b"a/b").expect("ok"), vec![&b"a"[..], b"b"]);
        assert_eq!(components(b"./a/b/").expect("ok"), vec![&b"a"[..], b"b"]);
        assert!(components(b"").expect("root").is_empty());
        for bad in [&b"/etc"[..], b"a/../b", b"..", b"a//b", b"a/./b", b"a\0b"] {
            assert_eq!(components(bad).expect_err("bad").kind(), ErrorKind::InvalidPath, "{bad:?}");
        }
        assert!(normalize_nonempty(b"").is_err());
        let long = vec![b'n'; MAX_NAME + 1];
        assert_eq!(components(&long).expect_err("long name").kind(), ErrorKind::NameTooLong);
        assert!(components(&vec![b'n'; MAX_NAME]).is_ok());
        let deep = vec!["a"; MAX_DEPTH + 1].join("/");
        assert_eq!(components(deep.as_bytes()).expect_err("deep").kind(), ErrorKind::TooDeep);
        assert_eq!(from_url("src/a%20b.rs").expect("ok"), b"src/a b.rs");
        assert_eq!(from_url("caf%E9.txt").expect("not UTF-8 is fine"), b"caf\xe9.txt");
        assert_eq!(from_url("a%2Fb").expect("an encoded slash separates"), b"a/b");
        for bad in ["%2e%2e/etc", "a/%2E%2E/b", "%00", "a%5Cb", "a\\b", "%", "%zz", "%4", "/etc", "", "a//b"] {
            assert_eq!(from_url(bad).expect_err(bad).kind(), ErrorKind::InvalidPath, "{bad}");
        }
        let huge = vec!["abcdefgh"; 8000].join("/");
        assert_eq!(components(huge.as_bytes()).expect_err("huge").kind(), ErrorKind::NameTooLong);
    }
}
