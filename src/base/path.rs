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

/// A sandbox root (the absolute directory the sandbox file API maps onto a workspace): absolute,
/// no `..`, `.` or empty component, no backslash or NUL, at most 1 KiB.
pub fn check_sandbox_root(root: &str) -> Result<()> {
    let bad =
        |why: &str| Error::new(ErrorKind::InvalidArgument, format!("sandbox_root '{}' {why}", root.escape_debug()));
    if root.len() > 1024 {
        return Err(bad("is over 1 KiB"));
    }
    let Some(rest) = root.strip_prefix('/') else { return Err(bad("is not an absolute path")) };
    if root.contains('\\') || root.contains('\0') {
        return Err(bad("holds a backslash or a NUL byte"));
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if !rest.is_empty() && rest.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(bad("has an empty, `.` or `..` component"));
    }
    Ok(())
}

/// A workspace path given as text in a request (a query parameter, a scope entry): a
/// backslash is `invalid_path` as in a URL path, then the path rules apply; the root (`""`,
/// `.`) is allowed.
pub fn from_text(text: &str) -> Result<Vec<u8>> {
    if text.contains('\\') {
        return Err(invalid(text.as_bytes(), "it contains a backslash: separate components with '/'"));
    }
    Ok(components(text.as_bytes())?.join(&b'/'))
}

/// One component the path rules take, as a JSON Schema (ECMA 262) regex over characters: not
/// `.` or `..`, no `/`, NUL or backslash. The 255-byte limit of a name is in bytes, which a
/// pattern cannot count; 255 characters bound it from above.
const COMPONENT: &str = r"(?:[^./\x00\\]|\.[^./\x00\\]|[^./\x00\\][^/\x00\\]|[^/\x00\\]{3,255})";

/// The JSON Schema pattern of a path naming something below the root: what [`from_url`] and
/// [`from_text`] take (with a leading `./` and trailing `/` forgiven), the root excepted.
pub fn pattern_nonempty() -> String {
    format!(r"^(?:\./)*{COMPONENT}(?:/{COMPONENT})*/*$")
}

/// The JSON Schema pattern of a path that may also be the root (`""`, `.`, `./`).
pub fn pattern_rooted() -> String {
    format!(r"^(?:(?:\./)*\.?|(?:\./)+/+|(?:\./)*{COMPONENT}(?:/{COMPONENT})*/*)$")
}

/// The schema of an optional request field or parameter holding a path the root may be.
pub fn rooted_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "pattern": pattern_rooted()})
}

/// The schema of an optional request field holding a path below the root.
pub fn nonempty_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "pattern": pattern_nonempty()})
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
/// exact bytes in a `pathBase64` field beside it (see docs/src/cli.md, "Names that are not UTF-8").
pub fn display(path: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path)
}

/// The pattern of standard base64 (padded), as request schemas state an exact path's bytes.
pub const BASE64_PATTERN: &str = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$";

/// Standard base64 that takes a last symbol with stray low bits (`00==`): those bits lie past
/// the last byte and carry nothing, and the documents' base64 pattern cannot rule them out.
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// The bytes a request's path stands for: `text`, unless `exact` (standard base64 of the
/// exact bytes, as a `…Base64` field of an answer gives a name that is not UTF-8) is given.
/// The path rules apply to the result wherever it is used, as to any path.
pub fn exact_or_text<'a>(text: &'a str, exact: Option<&str>) -> Result<std::borrow::Cow<'a, [u8]>> {
    use base64::Engine;
    match exact {
        None => Ok(std::borrow::Cow::Borrowed(text.as_bytes())),
        Some(b64) => LENIENT_BASE64.decode(b64.trim()).map(std::borrow::Cow::Owned).map_err(|e| {
            Error::new(ErrorKind::InvalidPath, format!("'{}' is not standard base64: {e}", b64.escape_debug()))
        }),
    }
}

/// A path as a typed JSON answer carries it: the text (lossy UTF-8) and, only when the bytes
/// are not UTF-8, their exact value in standard base64 for a `…Base64` field beside it.
pub fn for_json(bytes: &[u8]) -> (String, Option<String>) {
    use base64::Engine;
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), None),
        Err(_) => {
            (String::from_utf8_lossy(bytes).into_owned(), Some(base64::engine::general_purpose::STANDARD.encode(bytes)))
        }
    }
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

/// Whether `prefix` is `path` or one of its ancestors (the empty prefix covers everything).
pub fn covers(prefix: &[u8], path: &[u8]) -> bool {
    prefix.is_empty() || path == prefix || (path.starts_with(prefix) && path.get(prefix.len()) == Some(&b'/'))
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
        assert_eq!(from_text(".").expect("root"), b"");
        assert_eq!(from_text("./a/").expect("ok"), b"a");
        assert_eq!(from_text("a\\b").expect_err("backslash").kind(), ErrorKind::InvalidPath);
    }

    proptest::proptest! {
        /// The patterns the API document gives for paths take exactly what the rules take,
        /// so a client that follows the document is never refused and one that does not is.
        #[test]
        fn the_documented_patterns_are_the_rules(parts in proptest::collection::vec(
            proptest::sample::select(vec!["a", "é", ".", "..", "...", ".a", "a.", "/", "\\", "\0", "./", "b/"]), 0..7)) {
            let text: String = parts.concat();
            let nonempty = regex::Regex::new(&pattern_nonempty()).expect("pattern");
            let rooted = regex::Regex::new(&pattern_rooted()).expect("pattern");
            let taken = from_text(&text);
            proptest::prop_assert_eq!(rooted.is_match(&text), taken.is_ok(), "rooted {:?}", text);
            let below = taken.as_ref().is_ok_and(|p| !p.is_empty());
            proptest::prop_assert_eq!(nonempty.is_match(&text), below, "nonempty {:?}", text);
            let encoded = text.replace('%', "%25").replace('\0', "%00").replace('\\', "%5C");
            proptest::prop_assert_eq!(from_url(&encoded).is_ok(), below, "url {:?}", text);
        }
    }
}
