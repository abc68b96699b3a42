//! Trigrams: the three-byte windows of text that the search index records per file, and the
//! trigram query a content pattern implies — a boolean condition on a file's trigrams that
//! every file holding a match satisfies (Russ Cox, "Regular Expression Matching with a
//! Trigram Index", simplified). Files failing it cannot match and are never decompressed.
//!
//! Both sides fold ASCII letters to lower case, so one index serves case-sensitive and
//! case-insensitive searches; other bytes are kept as they are. A query is only ever a
//! necessary condition: wherever the analysis would have to guess, it answers [`GramQuery::All`]
//! (search every file), never a condition that could rule out a match.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, Hir, HirKind};

/// A trigram: three folded bytes, big-endian in the low 24 bits.
pub type Gram = u32;

/// Strings a pattern node can match exactly, kept while there are at most this many.
const MAX_EXACT: usize = 16;
/// A class of more characters than this matches "anything" as far as trigrams go.
const MAX_CLASS: u32 = 8;
/// A query naming more distinct trigrams than this is not worth its lookups: search everything.
pub const MAX_QUERY_GRAMS: usize = 512;

/// The folding both the index and queries apply.
pub fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

/// The trigram of three bytes (folded here).
#[cfg(test)]
pub fn gram(a: u8, b: u8, c: u8) -> Gram {
    (u32::from(fold(a)) << 16) | (u32::from(fold(b)) << 8) | u32::from(fold(c))
}

/// Calls `f` with every trigram of `bytes`, in order, repeats included.
pub fn for_each_gram(bytes: &[u8], mut f: impl FnMut(Gram)) {
    if bytes.len() < 3 {
        return;
    }
    let mut g = (u32::from(fold(bytes[0])) << 8) | u32::from(fold(bytes[1]));
    for &b in &bytes[2..] {
        g = ((g << 8) | u32::from(fold(b))) & 0x00ff_ffff;
        f(g);
    }
}

/// A condition on the set of trigrams of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GramQuery {
    /// Every file passes (nothing is known).
    All,
    /// The file holds this trigram.
    Gram(Gram),
    /// Every part holds.
    And(Vec<GramQuery>),
    /// At least one part holds.
    Or(Vec<GramQuery>),
}

impl GramQuery {
    fn and(parts: Vec<GramQuery>) -> GramQuery {
        GramQuery::join(parts, true)
    }

    fn or(parts: Vec<GramQuery>) -> GramQuery {
        GramQuery::join(parts, false)
    }

    /// `parts` joined by AND (or OR), flattened and simplified: `All` drops out of an AND and
    /// swallows an OR; a join of one part is that part.
    fn join(parts: Vec<GramQuery>, and: bool) -> GramQuery {
        let mut out = Vec::with_capacity(parts.len());
        for p in parts {
            match (p, and) {
                (GramQuery::All, true) => {}
                (GramQuery::All, false) => return GramQuery::All,
                (GramQuery::And(inner), true) | (GramQuery::Or(inner), false) => out.extend(inner),
                (other, _) => out.push(other),
            }
        }
        out.sort_by_key(GramQuery::order_key);
        out.dedup();
        match (out.len(), and) {
            (0, _) => GramQuery::All,
            (1, _) => out.pop().unwrap_or(GramQuery::All),
            (_, true) => GramQuery::And(out),
            (_, false) => GramQuery::Or(out),
        }
    }

    fn order_key(q: &GramQuery) -> (u8, Gram) {
        match q {
            GramQuery::Gram(g) => (0, *g),
            GramQuery::And(_) => (1, 0),
            GramQuery::Or(_) => (2, 0),
            GramQuery::All => (3, 0),
        }
    }

    /// Every trigram the query names, once each.
    pub fn grams(&self) -> BTreeSet<Gram> {
        let mut out = BTreeSet::new();
        let mut stack = vec![self];
        while let Some(q) = stack.pop() {
            match q {
                GramQuery::All => {}
                GramQuery::Gram(g) => {
                    out.insert(*g);
                }
                GramQuery::And(parts) | GramQuery::Or(parts) => stack.extend(parts),
            }
        }
        out
    }

    /// Whether a file whose trigrams `has` answers passes.
    #[cfg(test)]
    pub fn matches(&self, has: &impl Fn(Gram) -> bool) -> bool {
        match self {
            GramQuery::All => true,
            GramQuery::Gram(g) => has(*g),
            GramQuery::And(parts) => parts.iter().all(|p| p.matches(has)),
            GramQuery::Or(parts) => parts.iter().any(|p| p.matches(has)),
        }
    }
}

/// The trigrams every occurrence of `s` (folded) holds.
fn string_query(s: &[u8]) -> GramQuery {
    let mut grams = Vec::new();
    for_each_gram(s, |g| grams.push(GramQuery::Gram(g)));
    GramQuery::and(grams)
}

/// What is known of the strings a pattern node matches.
struct Info {
    /// All of them, folded, when there are few.
    exact: Option<BTreeSet<Vec<u8>>>,
    /// Otherwise: a condition every one of them meets.
    must: GramQuery,
}

impl Info {
    fn exact(set: BTreeSet<Vec<u8>>) -> Info {
        Info { exact: Some(set), must: GramQuery::All }
    }

    fn anything() -> Info {
        Info { exact: None, must: GramQuery::All }
    }

    /// The condition alone.
    fn into_query(self) -> GramQuery {
        match self.exact {
            Some(set) => GramQuery::or(set.iter().map(|s| string_query(s)).collect()),
            None => self.must,
        }
    }
}

/// The trigram query of a content pattern: a regex, or a literal when `literal`. Case does not
/// matter (the index is folded). A pattern that does not parse is `All`; compiling it for the
/// search reports the error.
pub fn query_of(pattern: &str, literal: bool, case_insensitive: bool) -> GramQuery {
    // A literal search matches within one line: a pattern over several lines matches nothing,
    // and its first line is what a match would have to hold anyway. It goes through the regex
    // parser too, which spells out the case variants of non-ASCII letters (É for é).
    let escaped;
    let pattern = if literal {
        escaped = regex_syntax::escape(pattern.split('\n').next().unwrap_or(""));
        escaped.as_str()
    } else {
        pattern
    };
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .nest_limit(crate::base::pattern::MAX_REGEX_NESTING)
        .build()
        .parse(pattern);
    let Ok(hir) = parsed else { return GramQuery::All };
    let q = info(&hir).into_query();
    if q.grams().len() > MAX_QUERY_GRAMS {
        return GramQuery::All;
    }
    q
}

/// Recursion follows the pattern's nesting, which the parser bounds (`MAX_REGEX_NESTING`), so
/// no input can make it deep.
fn info(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(BTreeSet::from([Vec::new()])),
        HirKind::Literal(lit) => Info::exact(BTreeSet::from([lit.0.iter().map(|&b| fold(b)).collect()])),
        HirKind::Class(class) => class_info(class),
        HirKind::Capture(c) => info(&c.sub),
        HirKind::Repetition(r) => match (r.min, r.max) {
            (0, _) => Info::anything(),
            (1, Some(1)) => info(&r.sub),
            // At least one occurrence: what one holds, every match holds.
            _ => Info { exact: None, must: info(&r.sub).into_query() },
        },
        HirKind::Concat(subs) => {
            let mut acc = Info::exact(BTreeSet::from([Vec::new()]));
            for sub in subs {
                acc = concat(acc, info(sub));
            }
            acc
        }
        HirKind::Alternation(subs) => {
            let infos: Vec<Info> = subs.iter().map(info).collect();
            if infos.iter().all(|i| i.exact.is_some()) {
                let mut set = BTreeSet::new();
                for i in &infos {
                    set.extend(i.exact.iter().flatten().cloned());
                }
                if set.len() <= MAX_EXACT {
                    return Info::exact(set);
                }
            }
            Info { exact: None, must: GramQuery::or(infos.into_iter().map(Info::into_query).collect()) }
        }
    }
}

fn class_info(class: &Class) -> Info {
    let mut set = BTreeSet::new();
    match class {
        Class::Unicode(u) => {
            let mut count = 0u32;
            for r in u.iter() {
                count = count.saturating_add(u32::from(r.end()) - u32::from(r.start()) + 1);
                if count > MAX_CLASS {
                    return Info::anything();
                }
                for c in r.start()..=r.end() {
                    let mut buf = [0u8; 4];
                    set.insert(c.encode_utf8(&mut buf).bytes().map(fold).collect());
                }
            }
        }
        Class::Bytes(b) => {
            let mut count = 0u32;
            for r in b.iter() {
                count = count.saturating_add(u32::from(r.end()) - u32::from(r.start()) + 1);
                if count > MAX_CLASS {
                    return Info::anything();
                }
                for c in r.start()..=r.end() {
                    set.insert(vec![fold(c)]);
                }
            }
        }
    }
    Info::exact(set)
}

/// `a` followed by `b`: the exact strings multiplied out while few, else both conditions.
fn concat(a: Info, b: Info) -> Info {
    if let (Some(x), Some(y)) = (&a.exact, &b.exact) {
        if x.len().saturating_mul(y.len()) <= MAX_EXACT {
            let mut set = BTreeSet::new();
            for s in x {
                for t in y {
                    let mut st = s.clone();
                    st.extend_from_slice(t);
                    set.insert(st);
                }
            }
            return Info::exact(set);
        }
    }
    Info { exact: None, must: GramQuery::and(vec![a.into_query(), b.into_query()]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grams_of(text: &[u8]) -> BTreeSet<Gram> {
        let mut s = BTreeSet::new();
        for_each_gram(text, |g| {
            s.insert(g);
        });
        s
    }

    fn passes(pattern: &str, ci: bool, text: &str) -> bool {
        let set = grams_of(text.as_bytes());
        query_of(pattern, false, ci).matches(&|g| set.contains(&g))
    }

    #[test]
    fn literal_runs_become_required_trigrams() {
        assert_eq!(query_of(r"fn needle_\d+", false, false).grams().len(), 8);
        assert!(passes(r"fn needle_\d+", false, "x fn needle_42() {}"));
        assert!(!passes(r"fn needle_\d+", false, "fn needl_42"));
        assert!(passes(r"FN NEEDLE", true, "fn needle"), "folded");
        assert!(passes(r"(?i)needle", false, "NeEdLe"));
        assert_eq!(query_of(r"\w+", false, false), GramQuery::All);
        assert_eq!(query_of(r"ab", false, false), GramQuery::All, "too short for a trigram");
        assert_eq!(query_of("(", false, false), GramQuery::All, "unparsable: the search reports it");
    }

    #[test]
    fn alternations_and_classes_stay_necessary() {
        assert!(passes("foo|bar", false, "a bar b"));
        assert!(!passes("foo|bar", false, "a baz b"));
        assert!(passes("[bc]at", false, "the cat"));
        assert!(passes("colou?r", false, "color"), "an optional letter breaks the run, never the match");
        assert!(passes("x(abc)+y", false, "xabcabcy"));
        assert!(passes("é+tude", true, "ÉTUDE"), "non-ASCII case folding through the class");
        assert!(passes("key", true, "\u{212a}ey"), "the Kelvin sign matches k case-insensitively");
    }

    #[test]
    fn a_literal_search_uses_its_first_line() {
        assert_eq!(query_of("needle", true, false), string_query(b"needle"));
        let set = grams_of("CAFÉ".as_bytes());
        assert!(query_of("café", true, true).matches(&|g| set.contains(&g)), "non-ASCII case variants");
        assert!(!query_of("café", true, false).matches(&|g| set.contains(&g)));
        assert!(query_of("a.c", true, false).matches(&|g| g == gram(b'a', b'.', b'c')));
    }

    proptest! {
        /// Whatever the pattern and text, a line the regex matches passes the query.
        #[test]
        fn a_match_always_passes_the_query(
            pattern in "[abcAB.|()*+?éÉßkK\u{212a}]{1,12}",
            text in "[abcAB éÉßSskK\u{212a}]{0,40}",
            ci in any::<bool>(),
        ) {
            let Ok(re) = regex::RegexBuilder::new(&pattern).case_insensitive(ci).build() else { return Ok(()) };
            if re.is_match(&text) {
                prop_assert!(passes(&pattern, ci, &text), "pattern {pattern:?} text {text:?}");
            }
        }

        #[test]
        fn a_literal_match_always_passes_the_query(needle in "[abAB]{3,8}", pre in "[ab ]{0,10}", post in "[ab ]{0,10}") {
            let text = format!("{pre}{needle}{post}");
            let set = grams_of(text.to_ascii_uppercase().as_bytes());
            prop_assert!(query_of(&needle, true, true).matches(&|g| set.contains(&g)));
        }
    }
}
