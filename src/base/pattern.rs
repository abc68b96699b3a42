//! The patterns users give, globs (exclusions, search filters) and regexes (content search):
//! checked against size and nesting limits before anything parses them, then compiled here
//! and nowhere else. globset turns nested `{…}` into tokens recursively, so a pattern of
//! thousands of nested braces would exhaust a thread's stack; every limit below is far above
//! what a person writes and far below what could hurt.

use globset::{Glob, GlobBuilder};
use regex::Regex;

use crate::base::error::{Error, ErrorKind, Result};

/// The longest glob, in bytes.
pub const MAX_GLOB: usize = 1024;
/// The deepest nesting of `{…}` alternates in one glob.
pub const MAX_GLOB_NESTING: usize = 8;
/// The longest regex, in bytes.
pub const MAX_REGEX: usize = 4096;
/// The deepest nesting of groups, repetitions and classes in one regex.
pub const MAX_REGEX_NESTING: u32 = 64;
/// The compiled size a regex may reach (`regex`'s `size_limit`).
pub const MAX_REGEX_SIZE: usize = 4 << 20;
/// Patterns in one list (`include`, `exclude`, a workspace's exclusions).
pub const MAX_PATTERNS: usize = 256;

/// A pattern as messages show it: its start, so a huge one does not become a huge message.
fn shown(p: &str) -> String {
    match p.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &p[..i]),
        None => p.to_string(),
    }
}

/// Checks a glob's length and the nesting of its alternates, honoring backslash escapes.
pub fn check_glob(p: &str) -> Result<()> {
    if p.len() > MAX_GLOB {
        return Err(Error::invalid_argument(format!(
            "glob '{}' is {} bytes, over the {MAX_GLOB}-byte limit: shorten it",
            shown(p),
            p.len()
        )));
    }
    let (mut depth, mut deepest, mut escaped) = (0usize, 0usize, false);
    for c in p.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_GLOB_NESTING {
        return Err(Error::invalid_argument(format!(
            "glob '{}' nests '{{' {deepest} deep, more than {MAX_GLOB_NESTING}: flatten its alternatives",
            shown(p)
        )));
    }
    Ok(())
}

/// Checks the number of patterns in one list.
pub fn check_list<S: AsRef<str>>(what: &str, patterns: &[S]) -> Result<()> {
    if patterns.len() > MAX_PATTERNS {
        return Err(Error::invalid_argument(format!(
            "{} {what} patterns given, more than {MAX_PATTERNS}: combine them",
            patterns.len()
        )));
    }
    Ok(())
}

/// Checks a regex's length (the nesting is bounded by the parser itself, see `regex`).
pub fn check_regex(p: &str) -> Result<()> {
    if p.len() > MAX_REGEX {
        return Err(Error::invalid_argument(format!(
            "regex '{}' is {} bytes, over the {MAX_REGEX}-byte limit: shorten it",
            shown(p),
            p.len()
        )));
    }
    Ok(())
}

/// `name` as a glob that matches exactly it: every metacharacter escaped.
pub fn glob_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Compiles a glob within the limits: `literal_separator` keeps `*` from crossing `/`.
pub fn glob(p: &str, case_insensitive: bool, literal_separator: bool) -> Result<Glob> {
    check_glob(p)?;
    GlobBuilder::new(p)
        .case_insensitive(case_insensitive)
        .literal_separator(literal_separator)
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            // The kind alone: the error's own text repeats the whole pattern.
            let why = e.kind().to_string();
            Error::with_source(ErrorKind::InvalidArgument, format!("'{}' is not a valid glob: {why}", shown(p)), e)
        })
}

/// Compiles a regex within the limits, its parser bounded in nesting and its automaton in size.
pub fn regex(p: &str, case_insensitive: bool) -> Result<Regex> {
    check_regex(p)?;
    regex::RegexBuilder::new(p)
        .case_insensitive(case_insensitive)
        .nest_limit(MAX_REGEX_NESTING)
        .size_limit(MAX_REGEX_SIZE)
        .dfa_size_limit(MAX_REGEX_SIZE)
        .build()
        .map_err(|e| {
            // The last line says what is wrong; the lines before repeat the pattern.
            let text = e.to_string();
            let why = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            Error::with_source(ErrorKind::InvalidArgument, format!("regex '{}' is not valid: {why}", shown(p)), e)
        })
}

/// Compiles a content pattern for line-by-line search (`grep-regex`), within the same limits as
/// [`regex`]; `literal` takes it as a fixed string.
pub fn line_matcher(p: &str, case_insensitive: bool, literal: bool) -> Result<grep_regex::RegexMatcher> {
    check_regex(p)?;
    grep_regex::RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .fixed_strings(literal)
        .nest_limit(MAX_REGEX_NESTING)
        .size_limit(MAX_REGEX_SIZE)
        .dfa_size_limit(MAX_REGEX_SIZE)
        .line_terminator(Some(b'\n'))
        .build(p)
        .map_err(|e| {
            let text = e.to_string();
            let why = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            Error::with_source(ErrorKind::InvalidArgument, format!("regex '{}' is not valid: {why}", shown(p)), e)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_braces_long_patterns_and_long_lists_are_refused_before_parsing() {
        for depth in [MAX_GLOB_NESTING + 1, 10_000, 30_000] {
            let p = "{".repeat(depth) + &"}".repeat(depth);
            let e = glob(&p, false, true).expect_err("too deep");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.message().len() < 300, "the message stays short: {}", e.message());
        }
        let ok = "{a,{b,{c,d}}}";
        assert!(glob(ok, false, true).is_ok());
        assert!(glob(&"{a,".repeat(MAX_GLOB_NESTING).to_string(), false, true).is_err(), "unclosed: invalid, no panic");
        assert!(glob(r"\{\{\{\{\{\{\{\{\{\{x", false, true).is_ok(), "escaped braces are literal");
        assert!(glob(&"a".repeat(MAX_GLOB + 1), false, true).is_err());
        assert!(check_list("include", &vec!["*"; MAX_PATTERNS + 1]).is_err());
        assert!(regex(&"(".repeat(10_000), false).is_err(), "regex nesting is bounded by its parser");
        assert!(regex(&"a".repeat(MAX_REGEX + 1), false).is_err());
        assert!(regex("fn \\w+\\(", false).is_ok());
        // Errors are short and name the pattern once.
        let long = "(".repeat(MAX_REGEX);
        let e = regex(&long, false).expect_err("unbalanced");
        assert!(e.message().len() < 200 && std::error::Error::source(&e).is_some(), "{}", e.message());
        let e = glob(&format!("{}[", "a".repeat(MAX_GLOB - 2)), false, true).expect_err("unclosed class");
        assert!(e.message().len() < 200, "{}", e.message());
    }
}
