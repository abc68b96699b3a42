//! Applying an Update's chunks to one file's text.

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;

use serde_json::json;

use super::ast::Chunk;
use crate::base::error::{Error, ErrorKind, Result};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Applies the `chunks` of an Update to the file bytes `original` and returns the new bytes.
///
/// A UTF-8 byte order mark, each untouched line's terminator and the presence of a final newline
/// are kept; lines the patch writes get the file's majority terminator. `path` is only used in
/// messages. Failures are `NotText` (the file is not UTF-8) and `PatchFailed` (a chunk could not
/// be placed), the latter with `path`, `chunk`, `patchLine` and `closest` details.
pub fn apply_chunks(path: &str, original: &[u8], chunks: &[Chunk]) -> Result<Vec<u8>> {
    let (bom, body) = match original.strip_prefix(BOM) {
        Some(body) => (BOM, body),
        None => (&[][..], original),
    };
    let text = std::str::from_utf8(body).map_err(|e| {
        let offset = bom.len() + e.valid_up_to();
        Error::new(
            ErrorKind::NotText,
            format!("'{path}' is not UTF-8 text (invalid byte at offset {offset}), so a patch cannot edit it"),
        )
        .with_detail("path", path)
    })?;
    let file = FileText::split(text);
    let edits = locate(path, &file.lines, chunks)?;
    let mut out = bom.to_vec();
    file.render(&edits, &mut out);
    Ok(out)
}

/// A file's lines with the terminator each one had, so that untouched lines come back byte for
/// byte even in a file that mixes line endings.
struct FileText<'a> {
    lines: Vec<&'a str>,
    /// "\r\n" or "\n"; "" for a last line without one.
    ends: Vec<&'a str>,
    /// The terminator of lines the patch writes: the file's majority.
    newline: &'static str,
    final_newline: bool,
}

impl<'a> FileText<'a> {
    fn split(text: &'a str) -> FileText<'a> {
        let (mut lines, mut ends) = (Vec::new(), Vec::new());
        let mut rest = text;
        while !rest.is_empty() {
            let (line, end, next) = match rest.find('\n') {
                Some(i) => match rest[..i].strip_suffix('\r') {
                    Some(line) => (line, &rest[i - 1..=i], &rest[i + 1..]),
                    None => (&rest[..i], &rest[i..=i], &rest[i + 1..]),
                },
                None => (rest, "", ""),
            };
            lines.push(line);
            ends.push(end);
            rest = next;
        }
        let crlf = ends.iter().filter(|e| **e == "\r\n").count();
        let lf = ends.iter().filter(|e| **e == "\n").count();
        FileText {
            lines,
            ends,
            newline: if crlf > lf { "\r\n" } else { "\n" },
            // An empty file has no last line to keep bare: what the patch adds gets a newline.
            final_newline: text.is_empty() || text.ends_with('\n'),
        }
    }

    fn render(&self, edits: &[Edit], out: &mut Vec<u8>) {
        let original = |i: usize| (self.lines[i], self.ends[i]);
        // (text, terminator), where an empty terminator means the file's newline
        let mut lines: Vec<(&str, &str)> = Vec::with_capacity(self.lines.len());
        let mut next = 0;
        for edit in edits {
            lines.extend((next..edit.start).map(original));
            lines.extend(edit.lines.iter().map(|line| match *line {
                NewLine::Kept(i) => original(i),
                NewLine::Written(text) => (text, ""),
            }));
            next = edit.start + edit.len;
        }
        lines.extend((next..self.lines.len()).map(original));
        let count = lines.len();
        for (n, (text, end)) in lines.into_iter().enumerate() {
            out.extend_from_slice(text.as_bytes());
            if n + 1 == count && !self.final_newline {
                break;
            }
            out.extend_from_slice(if end.is_empty() { self.newline } else { end }.as_bytes());
        }
    }
}

/// One chunk's effect: lines `start..start + len` of the original become `lines`.
struct Edit<'p> {
    start: usize,
    len: usize,
    lines: Vec<NewLine<'p>>,
    /// 1-based, for messages.
    chunk: usize,
}

enum NewLine<'p> {
    /// The original file's line at this index, kept as it was.
    Kept(usize),
    Written(&'p str),
}

/// Places every chunk, in order, without producing output: a failure leaves nothing half done.
fn locate<'p>(path: &str, lines: &[&str], chunks: &'p [Chunk]) -> Result<Vec<Edit<'p>>> {
    let mut edits: Vec<Edit> = Vec::with_capacity(chunks.len());
    // Chunks follow the file's order: each is searched for after the lines of the one before,
    // which is also what keeps two chunks from claiming the same lines.
    let mut cursor = 0;
    let found = Index::new(lines);
    for (index, chunk) in chunks.iter().enumerate() {
        let site = Site { path, chunk: index + 1, patch_line: chunk.line };
        for anchor in &chunk.anchors {
            let at = seek(&found, std::slice::from_ref(anchor), cursor, false)
                .ok_or_else(|| site.missing_anchor(&found, anchor, cursor))?;
            cursor = at + 1;
        }
        let edit = if chunk.old_lines.is_empty() {
            // Nothing to find: insert after the anchor when there is one, else at the end.
            let start = if chunk.anchors.is_empty() || chunk.eof { lines.len() } else { cursor };
            let written = chunk.new_lines.iter().map(|l| NewLine::Written(l)).collect();
            Edit { start, len: 0, lines: written, chunk: index + 1 }
        } else {
            let (start, old, new) = find_old(&found, &chunk.old_lines, &chunk.new_lines, chunk.eof, cursor)
                .ok_or_else(|| site.missing_context(&found, chunk, cursor, &edits))?;
            Edit { start, len: old.len(), lines: keep_context(start, old, new), chunk: index + 1 }
        };
        cursor = edit.start + edit.len;
        edits.push(edit);
    }
    Ok(edits)
}

/// Where `old` (with `new`, trimmed alike) matches at or after `from`.
fn find_old<'p>(
    index: &Index<'_>,
    mut old: &'p [String],
    mut new: &'p [String],
    eof: bool,
    from: usize,
) -> Option<(usize, &'p [String], &'p [String])> {
    loop {
        if let Some(at) = seek(index, old, from, eof) {
            return Some((at, old, new));
        }
        // Agents end chunks with a blank line the file often lacks there; codex retries
        // without it, and agents count on that.
        match old {
            [rest @ .., last] if last.is_empty() && !rest.is_empty() => {
                old = rest;
                if let [kept @ .., last] = new {
                    if last.is_empty() {
                        new = kept;
                    }
                }
            }
            _ => return None,
        }
    }
}

/// How strictly a file line must equal a patch line, from strictest to loosest.
#[derive(Debug, Clone, Copy)]
enum Fuzz {
    Exact,
    TrimEnd,
    Trim,
    /// Trimmed, with typographic quotes, dashes and spaces read as their ASCII forms: agents
    /// often type `"` where the file has `“`, or the reverse.
    Punctuation,
}

const PASSES: [Fuzz; 4] = [Fuzz::Exact, Fuzz::TrimEnd, Fuzz::Trim, Fuzz::Punctuation];

impl Fuzz {
    /// The form of a line two lines must share to be equal under this pass (borrowed unless
    /// typographic punctuation had to be replaced).
    fn key(self, line: &str) -> Cow<'_, str> {
        match self {
            Fuzz::Exact => Cow::Borrowed(line),
            Fuzz::TrimEnd => Cow::Borrowed(line.trim_end()),
            Fuzz::Trim => Cow::Borrowed(line.trim()),
            Fuzz::Punctuation if line.chars().all(|c| plain(c) == c) => Cow::Borrowed(line.trim()),
            Fuzz::Punctuation => Cow::Owned(line.trim().chars().map(plain).collect()),
        }
    }

    fn eq(self, file: &str, patch: &str) -> bool {
        match self {
            Fuzz::Exact => file == patch,
            Fuzz::TrimEnd => file.trim_end() == patch.trim_end(),
            Fuzz::Trim => file.trim() == patch.trim(),
            Fuzz::Punctuation => file.trim().chars().map(plain).eq(patch.trim().chars().map(plain)),
        }
    }
}

fn plain(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// The file's lines indexed by their normalized content, one index per pass, built the first
/// time a pass is needed: finding a chunk is then a lookup of its rarest line, not a scan of
/// the file, so a patch costs about its own size whatever the file's (a scan per chunk and pass
/// made big patches with loosely quoted context cost lines x chunks).
struct Index<'a> {
    lines: &'a [&'a str],
    /// For each pass: every normalized line and where it occurs, in order.
    by_pass: [std::cell::OnceCell<HashMap<Cow<'a, str>, Vec<usize>>>; 4],
}

/// Lines scanned one by one from the cursor before the index is consulted: a patch's chunks
/// usually follow each other closely, and a short scan is cheaper than building the index.
const NEAR: usize = 256;

impl<'a> Index<'a> {
    fn new(lines: &'a [&'a str]) -> Index<'a> {
        Index { lines, by_pass: Default::default() }
    }

    fn positions(&self, pass: usize, fuzz: Fuzz) -> &HashMap<Cow<'a, str>, Vec<usize>> {
        self.by_pass[pass].get_or_init(|| {
            let mut map: HashMap<Cow<'a, str>, Vec<usize>> = HashMap::new();
            for (i, l) in self.lines.iter().enumerate() {
                map.entry(fuzz.key(l)).or_default().push(i);
            }
            map
        })
    }

    /// The first start in `from..=last` where `pattern` matches under `fuzz`: a short scan from
    /// `from`, then the candidates where the pattern's rarest line occurs, shifted to where the
    /// pattern would begin.
    fn first_match(&self, pass: usize, fuzz: Fuzz, pattern: &[String], from: usize, last: usize) -> Option<usize> {
        let matches_at = |start: usize| pattern.iter().zip(&self.lines[start..]).all(|(p, l)| fuzz.eq(l, p));
        let near_end = last.min(from.saturating_add(NEAR));
        if let Some(start) = (from..=near_end).find(|&s| matches_at(s)) {
            return Some(start);
        }
        let from = near_end + 1;
        if from > last {
            return None;
        }
        let map = self.positions(pass, fuzz);
        let mut rarest: Option<(usize, &Vec<usize>)> = None;
        for (j, p) in pattern.iter().enumerate() {
            let at = map.get(&fuzz.key(p))?;
            if rarest.is_none_or(|(_, r)| at.len() < r.len()) {
                rarest = Some((j, at));
            }
        }
        let (j, at) = rarest?;
        // Positions are sorted: start at the first that can begin at or after `from`.
        let first = at.partition_point(|&p| p < from + j);
        at[first..].iter().map(|&p| p - j).take_while(|&start| start <= last).find(|&start| matches_at(start))
    }
}

/// The first index at or after `from` where `pattern` matches, trying each pass over the whole
/// range before loosening; with `eof`, the end of the file is tried first with every pass.
fn seek(index: &Index<'_>, pattern: &[String], from: usize, eof: bool) -> Option<usize> {
    let lines = index.lines;
    let last = lines.len().checked_sub(pattern.len())?;
    if pattern.is_empty() || from > last {
        return None;
    }
    let matches_at = |start: usize, fuzz: Fuzz| pattern.iter().zip(&lines[start..]).all(|(p, l)| fuzz.eq(l, p));
    if eof && PASSES.iter().any(|&fuzz| matches_at(last, fuzz)) {
        return Some(last);
    }
    PASSES.iter().enumerate().find_map(|(pass, &fuzz)| index.first_match(pass, fuzz, pattern, from, last))
}

/// The new lines of a placed chunk, with each context line taken from the file rather than the
/// patch: a fuzzy match must not rewrite the whitespace, quotes or terminator of lines the agent
/// only quoted. Context lines are found as the longest common subsequence of old and new.
fn keep_context<'p>(start: usize, old: &'p [String], new: &'p [String]) -> Vec<NewLine<'p>> {
    // The table is old × new; past this size (a rewrite of thousands of lines) write it all.
    if old.len().saturating_mul(new.len()) > 1_000_000 {
        return new.iter().map(|l| NewLine::Written(l)).collect();
    }
    let width = new.len() + 1;
    // common[i * width + j]: the longest common subsequence of old[i..] and new[j..]
    let mut common = vec![0u32; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i * width + j] = if old[i] == new[j] {
                common[(i + 1) * width + j + 1] + 1
            } else {
                common[(i + 1) * width + j].max(common[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(new.len());
    while j < new.len() {
        if i < old.len() && old[i] == new[j] {
            out.push(NewLine::Kept(start + i));
            i += 1;
            j += 1;
        } else if i < old.len() && common[(i + 1) * width + j] >= common[i * width + j + 1] {
            i += 1;
        } else {
            out.push(NewLine::Written(&new[j]));
            j += 1;
        }
    }
    out
}

/// Which chunk of which file a failure is about.
struct Site<'s> {
    path: &'s str,
    chunk: usize,
    patch_line: usize,
}

impl Site<'_> {
    fn failure(&self, message: String, closest: &[Window]) -> Error {
        let candidates: Vec<_> = closest.iter().map(|w| json!({ "line": w.line, "text": w.text })).collect();
        Error::new(
            ErrorKind::PatchFailed,
            format!("'{}', chunk {} (patch line {}): {message}", self.path, self.chunk, self.patch_line),
        )
        .with_detail("path", self.path)
        .with_detail("chunk", self.chunk)
        .with_detail("patchLine", self.patch_line)
        .with_detail("closest", candidates)
    }

    fn missing_anchor(&self, index: &Index<'_>, anchor: &str, cursor: usize) -> Error {
        let pattern = [anchor.to_string()];
        let closest = closest(index.lines, &pattern);
        let mut message = format!("could not find the anchor line '@@ {anchor}'");
        match seek(index, &pattern, 0, false) {
            Some(at) if cursor > 0 => message.push_str(&format!(
                " after line {cursor}: it is at line {}, before the lines of the previous chunk or anchor; \
                 chunks and anchors must be in file order",
                at + 1
            )),
            _ => message.push_str(&describe(&closest)),
        }
        self.failure(message, &closest)
    }

    fn missing_context(&self, index: &Index<'_>, chunk: &Chunk, cursor: usize, edits: &[Edit]) -> Error {
        let closest = closest(index.lines, &chunk.old_lines);
        let expected = chunk.old_lines.join("\n");
        let message = match find_old(index, &chunk.old_lines, &chunk.new_lines, false, 0) {
            // Found only before the cursor: the chunks are out of order or overlap.
            Some((at, old, _)) => {
                let end = at + old.len();
                match edits.iter().find(|e| at < e.start + e.len && e.start < end) {
                    Some(e) => format!(
                        "the context lines:\n{expected}\nare at line {} and overlap lines {}-{} changed by chunk {}; \
                         merge the two chunks into one",
                        at + 1,
                        e.start + 1,
                        e.start + e.len,
                        e.chunk
                    ),
                    None => format!(
                        "the context lines:\n{expected}\nare at line {}, before line {} where the search for this \
                         chunk started; chunks must be in file order, each after its '@@' anchors",
                        at + 1,
                        cursor + 1
                    ),
                }
            }
            None => format!("could not find the context lines:\n{expected}{}", describe(&closest)),
        };
        self.failure(message, &closest)
    }
}

/// A stretch of the file offered as the likely intended target of a chunk that did not match.
struct Window {
    /// 1-based.
    line: usize,
    text: String,
}

fn describe(closest: &[Window]) -> String {
    match closest.first() {
        Some(best) => format!("\nclosest match at line {}:\n{}", best.line, best.text),
        None => "\nno similar lines in the file".to_string(),
    }
}

/// Up to three non-overlapping windows of the file most like `expected`: first by the number of
/// lines equal under the loosest pass, then by character bigram similarity.
fn closest(lines: &[&str], expected: &[String]) -> Vec<Window> {
    let width = expected.len().min(lines.len());
    if width == 0 {
        return Vec::new();
    }
    let file: Vec<_> = lines.iter().map(|l| bigrams(l)).collect();
    let want: Vec<_> = expected.iter().map(|l| bigrams(l)).collect();
    // Comparing every line of every window costs lines × width merges; past this budget only
    // the first line of each window is compared by bigrams.
    let every_line = lines.len().saturating_mul(width) <= 400_000;
    let mut scored: Vec<(usize, usize, usize)> = (0..=lines.len() - width)
        .map(|start| {
            let (mut equal, mut similar) = (0, 0);
            for j in 0..width {
                if Fuzz::Punctuation.eq(lines[start + j], &expected[j]) {
                    equal += 1;
                    similar += 1000;
                } else if every_line || j == 0 {
                    similar += dice(&file[start + j], &want[j]);
                }
            }
            (equal, similar, start)
        })
        .filter(|&(equal, similar, _)| equal > 0 || similar >= 500)
        .collect();
    scored.sort_by_key(|&(equal, similar, start)| (Reverse(equal), Reverse(similar), start));
    let mut chosen: Vec<usize> = Vec::new();
    for (_, _, start) in scored {
        if chosen.len() == 3 {
            break;
        }
        if chosen.iter().all(|&c| start.abs_diff(c) >= width) {
            chosen.push(start);
        }
    }
    chosen.into_iter().map(|start| Window { line: start + 1, text: lines[start..start + width].join("\n") }).collect()
}

/// The sorted character pairs of a trimmed, punctuation-normalized line.
fn bigrams(line: &str) -> Vec<(char, char)> {
    let chars: Vec<char> = line.trim().chars().map(plain).collect();
    let mut pairs: Vec<_> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    pairs.sort_unstable();
    pairs
}

/// The Dice coefficient of two sorted bigram lists, in thousandths.
fn dice(a: &[(char, char)], b: &[(char, char)]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2000 * common / (a.len() + b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn passes_go_from_strict_to_loose() {
        assert!(Fuzz::Exact.eq("a ", "a ") && !Fuzz::Exact.eq("a ", "a"));
        assert!(Fuzz::TrimEnd.eq("a  ", "a\t") && !Fuzz::TrimEnd.eq(" a", "a"));
        assert!(Fuzz::Trim.eq("  a ", "a") && !Fuzz::Trim.eq("“a”", "\"a\""));
        assert!(Fuzz::Punctuation.eq("\u{a0}say “hi” – ‘now’\u{2011}ok", "say \"hi\" - 'now'-ok"));
    }

    #[test]
    fn seek_prefers_an_exact_match_anywhere_over_a_loose_one_earlier() {
        let lines = ["  x", "x"];
        let index = Index::new(&lines);
        assert_eq!(seek(&index, &strings(&["x"]), 0, false), Some(1));
        assert_eq!(seek(&index, &strings(&["x"]), 0, true), Some(1));
        assert_eq!(seek(&index, &strings(&["  x"]), 1, false), Some(1));
        assert_eq!(seek(&index, &strings(&["x", "x", "x"]), 0, false), None);
        assert_eq!(seek(&index, &strings(&["x"]), 2, false), None);
    }

    /// `seek` as it was before the index: every start, pass by pass. The oracle.
    fn scan(lines: &[&str], pattern: &[String], from: usize, eof: bool) -> Option<usize> {
        let last = lines.len().checked_sub(pattern.len())?;
        if pattern.is_empty() || from > last {
            return None;
        }
        let matches_at = |start: usize, fuzz: Fuzz| pattern.iter().zip(&lines[start..]).all(|(p, l)| fuzz.eq(l, p));
        if eof && PASSES.iter().any(|&fuzz| matches_at(last, fuzz)) {
            return Some(last);
        }
        PASSES.iter().find_map(|&fuzz| (from..=last).find(|&start| matches_at(start, fuzz)))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// The index finds exactly what a scan finds, on files long enough to go past the short
        /// scan, made of few distinct lines in strict and loose spellings.
        #[test]
        fn the_index_finds_what_a_scan_finds(
            file in proptest::collection::vec(0usize..400, 0..1500),
            pattern in proptest::collection::vec(0usize..8, 1..3),
            from in 0usize..1500,
            eof in proptest::bool::ANY,
        ) {
            const WORDS: [&str; 8] = ["x", "x ", "  x", "y", "“q”", "\"q\"", "", "}"];
            // Mostly filler, so matches are far apart: past the short scan, the index answers.
            let lines: Vec<&str> = file.iter().map(|&i| WORDS.get(i).copied().unwrap_or("filler")).collect();
            let pattern: Vec<String> = pattern.iter().map(|&i| WORDS[i].to_string()).collect();
            let index = Index::new(&lines);
            proptest::prop_assert_eq!(seek(&index, &pattern, from, eof), scan(&lines, &pattern, from, eof));
        }
    }

    #[test]
    fn the_index_is_exact_at_its_edges() {
        // "a" is everywhere, "b" once: the lookup goes by "b" and shifts back to "a".
        let mut lines = vec!["a"; 2000];
        lines[1200] = "b";
        let index = Index::new(&lines);
        assert_eq!(seek(&index, &strings(&["a", "b"]), 0, false), Some(1199));
        assert_eq!(seek(&index, &strings(&["a", "b"]), 1199, false), Some(1199));
        assert_eq!(seek(&index, &strings(&["a", "b"]), 1200, false), None);
        // A match exactly where the short scan ends, and just after it.
        let mut lines = vec!["filler"; 2000];
        for at in [NEAR, NEAR + 1] {
            lines[10 + at] = "x";
            let index = Index::new(&lines);
            assert_eq!(seek(&index, &strings(&["x"]), 10, false), Some(10 + at), "at {at}");
            lines[10 + at] = "filler";
        }
    }

    #[test]
    fn context_lines_are_kept_from_the_file() {
        let old = strings(&["a", "b", "c"]);
        let new = strings(&["a", "B", "c", "d"]);
        let kept: Vec<String> = keep_context(10, &old, &new)
            .iter()
            .map(|l| match l {
                NewLine::Kept(i) => format!("kept {i}"),
                NewLine::Written(t) => format!("wrote {t}"),
            })
            .collect();
        assert_eq!(kept, ["kept 10", "wrote B", "kept 12", "wrote d"]);
    }

    #[test]
    fn closest_ranks_equal_lines_then_similarity_and_skips_overlaps() {
        let lines = ["fn alpha() {", "    one();", "}", "fn beta() {", "    two();", "}", "fn gamma() {", "}"];
        let found = closest(&lines, &strings(&["fn beta() {", "    twoo();", "}"]));
        let starts: Vec<usize> = found.iter().map(|w| w.line).collect();
        assert_eq!(starts, [4, 1]);
        assert_eq!(found[0].text, "fn beta() {\n    two();\n}");
        assert!(closest(&lines, &strings(&["zzzz qqqq"])).is_empty());
        assert!(closest(&[], &strings(&["x"])).is_empty());
    }

    #[test]
    fn a_big_patch_with_loosely_quoted_context_applies_chunk_by_chunk() {
        // 20,000 lines with typographic quotes; 400 chunks quoting them with ASCII ones, far
        // apart (past the short scan), each changing one line.
        let line = |i: usize| format!("    let v{i} = f(“{}”);", i % 7);
        let file: String = (0..20_000).map(|i| line(i) + "\n").collect();
        let chunks: Vec<Chunk> = (0..400)
            .map(|c| {
                let at = c * 50 + 25;
                let ascii = |i: usize| line(i).replace(['“', '”'], "\"");
                Chunk {
                    anchors: Vec::new(),
                    old_lines: vec![ascii(at - 1), ascii(at), ascii(at + 1)],
                    new_lines: vec![ascii(at - 1), format!("    let changed{at} = 0;"), ascii(at + 1)],
                    eof: false,
                    line: c + 1,
                }
            })
            .collect();
        let out = String::from_utf8(apply_chunks("big.rs", file.as_bytes(), &chunks).expect("applies")).expect("utf-8");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 20_000);
        for c in 0..400 {
            let at = c * 50 + 25;
            assert_eq!(lines[at], format!("    let changed{at} = 0;"));
            assert_eq!(lines[at - 1], line(at - 1), "context is kept as the file has it");
        }
        assert_eq!(lines[0], line(0));
    }

    #[test]
    fn dice_is_symmetric_and_bounded() {
        let (a, b) = (bigrams("hello world"), bigrams("hello word"));
        assert_eq!(dice(&a, &b), dice(&b, &a));
        assert_eq!(dice(&a, &a), 1000);
        assert!(dice(&a, &b) > 700 && dice(&a, &b) < 1000);
        assert_eq!(dice(&a, &bigrams("x")), 0);
    }
}
