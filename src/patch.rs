//! apply_patch: parsing the `*** Begin Patch` envelope and applying its chunks to one file's text.
//!
//! The grammar is the one coding agents are trained to write (OpenAI Codex's `apply_patch`):
//!
//! ```text
//! patch  := "*** Begin Patch" NL op+ "*** End Patch"
//! op     := "*** Add File: " path NL ("+" text NL)*
//!         | "*** Delete File: " path NL
//!         | "*** Update File: " path NL ["*** Move to: " path NL] chunk*
//! chunk  := ("@@" [" " anchor] NL)* line+ ["*** End of File" NL]
//! line   := (" " | "-" | "+") text NL
//!         | NL                                  an empty line is an empty context line
//! ```
//!
//! Only the first chunk of an Update may leave out its `@@` line; an anchor is a line to find
//! before the chunk's own lines (`@@ fn main`). The parser is lenient where agents are sloppy in
//! harmless ways (a shell heredoc around the patch, CRLF, blank lines and spaces around the
//! markers, a unified-diff `@@ -1,3 +1,4 @@` header) and strict where a guess could edit the
//! wrong lines. Applying finds every chunk in file order, exactly first and then comparing with
//! looser whitespace and punctuation, and builds the output only once all chunks are placed.

use std::cmp::{Ordering, Reverse};
use std::fmt::Display;

use serde_json::json;

use crate::error::{Error, ErrorKind, Result};

/// A parsed patch: its file operations in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<FileOp>,
}

/// One file section of a patch; `line` is the 1-based patch line of its `***` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File: path` followed by `+` lines.
    Add {
        path: String,
        /// The new file's text: each `+` line without its prefix and with "\n" after it, so a
        /// zero-line Add is the empty file.
        contents: String,
        line: usize,
    },
    /// `*** Delete File: path`
    Delete { path: String, line: usize },
    /// `*** Update File: path`, optional `*** Move to: path`, then chunks.
    Update { path: String, move_to: Option<String>, chunks: Vec<Chunk>, line: usize },
}

impl FileOp {
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path, .. } | FileOp::Update { path, .. } => path,
        }
    }

    pub fn line(&self) -> usize {
        match self {
            FileOp::Add { line, .. } | FileOp::Delete { line, .. } | FileOp::Update { line, .. } => *line,
        }
    }
}

/// One change inside an Update: lines to find in the file and the lines that replace them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The text after each `@@ ` line that opened the chunk: lines to seek, in order, before
    /// looking for `old_lines`.
    pub anchors: Vec<String>,
    /// Context (' ') and removed ('-') lines, without their prefix.
    pub old_lines: Vec<String>,
    /// Context (' ') and added ('+') lines, without their prefix.
    pub new_lines: Vec<String>,
    /// `*** End of File` closed the chunk: `old_lines` are matched at the end of the file first.
    pub eof: bool,
    /// 1-based line number in the patch text where the chunk starts (its first `@@` line, or
    /// its first diff line).
    pub line: usize,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";
const HEADERS: &str = "'*** Add File: <path>', '*** Delete File: <path>', '*** Update File: <path>', \
     '*** Move to: <path>' (right after Update File), '*** End of File' (closing a chunk) and '*** End Patch'";

/// Parses the patch envelope and every file operation in it.
///
/// Errors are `InvalidArgument`, and their message starts with the 1-based patch line.
pub fn parse(text: &str) -> Result<Patch> {
    let lines: Vec<Line> = text
        .split('\n')
        .enumerate()
        .map(|(i, text)| Line { no: i + 1, text: text.strip_suffix('\r').unwrap_or(text) })
        .collect();
    let (body, end) = envelope(&lines)?;
    let mut parser = Parser { lines: body, pos: 0 };
    let mut ops = Vec::new();
    while let Some(op) = parser.op()? {
        ops.push(op);
    }
    if ops.is_empty() {
        return Err(bad(
            end.no,
            format!("the patch has no file operations; put '{ADD} <path>', '{DELETE} <path>' or '{UPDATE} <path>' before '{END}'"),
        ));
    }
    Ok(Patch { ops })
}

/// One line of the patch text, `\r` removed, with its 1-based number for messages.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    no: usize,
    text: &'a str,
}

impl Line<'_> {
    fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// Headers count at column 0 only, so that a context line such as ` *** note` stays text.
    fn is_header(&self) -> bool {
        self.text.starts_with("***")
    }
}

fn bad(no: usize, message: impl Display) -> Error {
    Error::invalid_argument(format!("patch line {no}: {message}"))
}

/// How a patch line is quoted in messages; an empty line would otherwise read as `''`.
fn found(text: &str) -> String {
    if text.is_empty() {
        "an empty line".to_string()
    } else {
        format!("'{text}'")
    }
}

/// The lines between `*** Begin Patch` and `*** End Patch`, and the End line.
fn envelope<'l, 'a>(lines: &'l [Line<'a>]) -> Result<(&'l [Line<'a>], Line<'a>)> {
    let lines = strip_heredoc(trim_blank(lines));
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return Err(bad(1, format!("the patch is empty; it must start with '{BEGIN}'")));
    };
    if first.text.trim() != BEGIN {
        return Err(bad(
            first.no,
            format!("missing '{BEGIN}': the patch must start with it, found {}", found(first.text)),
        ));
    }
    if lines.len() < 2 || last.text.trim() != END {
        return Err(bad(last.no, format!("missing '{END}': the patch must end with it, found {}", found(last.text))));
    }
    Ok((&lines[1..lines.len() - 1], *last))
}

fn trim_blank<'l, 'a>(lines: &'l [Line<'a>]) -> &'l [Line<'a>] {
    let start = lines.iter().position(|l| !l.is_blank()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|l| !l.is_blank()).map_or(start, |i| i + 1);
    &lines[start..end]
}

/// Drops a shell heredoc around the patch (`apply_patch <<'EOF'` ... `EOF`): agents often pass
/// the whole command they would have run in a shell.
fn strip_heredoc<'l, 'a>(lines: &'l [Line<'a>]) -> &'l [Line<'a>] {
    let Some((first, rest)) = lines.split_first() else { return lines };
    let Some(delimiter) = heredoc_delimiter(first.text) else { return lines };
    match rest.split_last() {
        Some((last, inner)) if last.text.trim() == delimiter => trim_blank(inner),
        _ => trim_blank(rest),
    }
}

/// The delimiter word of a line like `apply_patch <<'EOF'`, `<<"PATCH"` or `<<-EOF`.
fn heredoc_delimiter(line: &str) -> Option<&str> {
    let (command, redirect) = line.trim().split_once("<<")?;
    let command = command.trim();
    if !(command.is_empty() || command.ends_with("apply_patch") || command.ends_with("applypatch")) {
        return None;
    }
    let word = redirect.trim_start_matches('-').trim();
    let word = ['\'', '"']
        .iter()
        .find_map(|&quote| word.strip_prefix(quote).and_then(|w| w.strip_suffix(quote)))
        .unwrap_or(word);
    let is_word = !word.is_empty() && word.chars().all(|c| c.is_alphanumeric() || c == '_');
    is_word.then_some(word)
}

/// Checks a path the way the parser can (the caller resolves it against the workspace later).
fn check_path(no: usize, raw: &str) -> Result<String> {
    let path = raw.trim();
    if path.is_empty() {
        return Err(bad(no, "the path is empty"));
    }
    let drive = matches!(path.as_bytes(), [letter, b':', ..] if letter.is_ascii_alphabetic());
    if path.starts_with(['/', '\\']) || drive {
        return Err(bad(no, format!("the path '{path}' is absolute; write it relative to the workspace root")));
    }
    if path.split(['/', '\\']).any(|part| part == "..") {
        return Err(bad(
            no,
            format!("the path '{path}' has a '..' component; write it relative to the workspace root"),
        ));
    }
    Ok(path.to_string())
}

/// The error for a line that cannot start a file operation.
fn misplaced(line: Line) -> Error {
    let text = line.text.trim_end();
    let message = if text.starts_with(MOVE) {
        format!("'{MOVE} <path>' must come right after the '{UPDATE} <path>' line of the file it renames")
    } else if text == END_OF_FILE {
        format!("'{END_OF_FILE}' must close a chunk of an Update File")
    } else if text.trim() == END || text.trim() == BEGIN {
        format!(
            "{} may appear only once, as the patch's {} line",
            found(text.trim()),
            if text.trim() == END { "last" } else { "first" }
        )
    } else if line.is_header() {
        format!("unknown header '{text}'; the valid headers are {HEADERS}")
    } else {
        format!(
            "expected a file header ('{ADD} <path>', '{DELETE} <path>' or '{UPDATE} <path>'), found {}",
            found(text)
        )
    };
    bad(line.no, message)
}

/// The text after `@@`, if it names an anchor.
fn anchor_text(after: &str) -> Option<String> {
    let text = after.strip_prefix(' ').unwrap_or(after);
    let text = unified_range_tail(text).unwrap_or(text);
    (!text.trim().is_empty()).then(|| text.to_string())
}

/// Agents used to unified diffs write `@@ -12,7 +12,8 @@ fn foo`: the numbers mean nothing in
/// this format, and the text after them is the anchor.
fn unified_range_tail(text: &str) -> Option<&str> {
    let (ranges, tail) = text.trim_start().strip_prefix('-')?.split_once("@@")?;
    let (old, new) = ranges.trim().split_once(' ')?;
    let is_range = |range: &str| {
        let mut parts = range.split(',');
        parts.clone().count() <= 2 && parts.all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let new = new.trim().strip_prefix('+')?;
    (is_range(old) && is_range(new)).then(|| tail.strip_prefix(' ').unwrap_or(tail))
}

struct Parser<'l, 'a> {
    lines: &'l [Line<'a>],
    pos: usize,
}

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// Whether only blank lines stand between here and the next header or the end: agents put
    /// blank lines between file sections, and they mean nothing there.
    fn at_separator(&self) -> bool {
        self.lines[self.pos..].iter().find(|l| !l.is_blank()).is_none_or(|l| l.is_header())
    }

    fn op(&mut self) -> Result<Option<FileOp>> {
        while self.peek().is_some_and(|l| l.is_blank()) {
            self.pos += 1;
        }
        let Some(line) = self.peek() else { return Ok(None) };
        self.pos += 1;
        let header = line.text.trim_end();
        if let Some(rest) = header.strip_prefix(ADD) {
            let path = check_path(line.no, rest)?;
            let contents = self.add_contents(&path)?;
            Ok(Some(FileOp::Add { path, contents, line: line.no }))
        } else if let Some(rest) = header.strip_prefix(DELETE) {
            Ok(Some(FileOp::Delete { path: check_path(line.no, rest)?, line: line.no }))
        } else if let Some(rest) = header.strip_prefix(UPDATE) {
            let path = check_path(line.no, rest)?;
            self.update(path, line.no).map(Some)
        } else {
            Err(misplaced(line))
        }
    }

    fn add_contents(&mut self, path: &str) -> Result<String> {
        let mut contents = String::new();
        while let Some(line) = self.peek() {
            if let Some(text) = line.text.strip_prefix('+') {
                contents.push_str(text);
                contents.push('\n');
                self.pos += 1;
            } else if self.at_separator() {
                break;
            } else {
                return Err(bad(
                    line.no,
                    format!(
                        "expected a line starting with '+' in the contents of new file '{path}', found {}",
                        found(line.text)
                    ),
                ));
            }
        }
        Ok(contents)
    }

    fn update(&mut self, path: String, no: usize) -> Result<FileOp> {
        let mut move_to = None;
        if let Some(line) = self.peek() {
            if let Some(rest) = line.text.trim_end().strip_prefix(MOVE) {
                move_to = Some(check_path(line.no, rest)?);
                self.pos += 1;
            }
        }
        let mut chunks = Vec::new();
        while !self.at_separator() {
            let chunk = self.chunk(&path, chunks.is_empty())?;
            chunks.push(chunk);
        }
        if chunks.is_empty() && move_to.is_none() {
            return Err(bad(
                no,
                format!(
                    "'{UPDATE} {path}' has no chunks; follow it with '@@' and lines starting with ' ', '+' or '-', \
                     or with '{MOVE} <path>' to rename the file"
                ),
            ));
        }
        Ok(FileOp::Update { path, move_to, chunks, line: no })
    }

    /// Parses one chunk; the caller has checked that a non-header line lies ahead.
    fn chunk(&mut self, path: &str, first: bool) -> Result<Chunk> {
        // Blank lines in front of an `@@` separate chunks; anywhere else they are context.
        let ahead = self.lines[self.pos..].iter().position(|l| !l.is_blank());
        if let Some(skip) = ahead.filter(|&i| self.lines[self.pos + i].text.starts_with("@@")) {
            self.pos += skip;
        }
        let start = self.lines[self.pos];
        let mut chunk =
            Chunk { anchors: Vec::new(), old_lines: Vec::new(), new_lines: Vec::new(), eof: false, line: start.no };
        let mut opened = false;
        while let Some(rest) = self.peek().and_then(|l| l.text.strip_prefix("@@")) {
            chunk.anchors.extend(anchor_text(rest));
            opened = true;
            self.pos += 1;
        }
        if !opened && !first {
            return Err(bad(
                start.no,
                format!("expected '@@' to start the next chunk for '{path}', found {}", found(start.text)),
            ));
        }
        let mut body = 0;
        while let Some(line) = self.peek() {
            if line.text.trim_end() == END_OF_FILE {
                self.pos += 1;
                chunk.eof = true;
                break;
            }
            if line.is_header() || line.text.starts_with("@@") {
                break;
            }
            match line.text.as_bytes().first() {
                // Agents drop the single space of an empty context line.
                None => {
                    chunk.old_lines.push(String::new());
                    chunk.new_lines.push(String::new());
                }
                Some(b' ') => {
                    chunk.old_lines.push(line.text[1..].to_string());
                    chunk.new_lines.push(line.text[1..].to_string());
                }
                Some(b'-') => chunk.old_lines.push(line.text[1..].to_string()),
                Some(b'+') => chunk.new_lines.push(line.text[1..].to_string()),
                Some(_) => {
                    return Err(bad(
                        line.no,
                        format!(
                            "expected a line starting with ' ', '+' or '-' in the chunk for '{path}', found {}",
                            found(line.text)
                        ),
                    ))
                }
            }
            body += 1;
            self.pos += 1;
        }
        if body == 0 {
            return Err(bad(
                start.no,
                format!("the chunk for '{path}' has no lines; after '@@' put lines starting with ' ', '+' or '-'"),
            ));
        }
        Ok(chunk)
    }
}

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
    for (index, chunk) in chunks.iter().enumerate() {
        let site = Site { path, chunk: index + 1, patch_line: chunk.line };
        for anchor in &chunk.anchors {
            let at = seek(lines, std::slice::from_ref(anchor), cursor, false)
                .ok_or_else(|| site.missing_anchor(lines, anchor, cursor))?;
            cursor = at + 1;
        }
        let edit = if chunk.old_lines.is_empty() {
            // Nothing to find: insert after the anchor when there is one, else at the end.
            let start = if chunk.anchors.is_empty() || chunk.eof { lines.len() } else { cursor };
            let written = chunk.new_lines.iter().map(|l| NewLine::Written(l)).collect();
            Edit { start, len: 0, lines: written, chunk: index + 1 }
        } else {
            let (start, old, new) = find_old(lines, &chunk.old_lines, &chunk.new_lines, chunk.eof, cursor)
                .ok_or_else(|| site.missing_context(lines, chunk, cursor, &edits))?;
            Edit { start, len: old.len(), lines: keep_context(start, old, new), chunk: index + 1 }
        };
        cursor = edit.start + edit.len;
        edits.push(edit);
    }
    Ok(edits)
}

/// Where `old` (with `new`, trimmed alike) matches at or after `from`.
fn find_old<'p>(
    lines: &[&str],
    mut old: &'p [String],
    mut new: &'p [String],
    eof: bool,
    from: usize,
) -> Option<(usize, &'p [String], &'p [String])> {
    loop {
        if let Some(at) = seek(lines, old, from, eof) {
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

/// The first index at or after `from` where `pattern` matches, trying each pass over the whole
/// range before loosening; with `eof`, the end of the file is tried first with every pass.
fn seek(lines: &[&str], pattern: &[String], from: usize, eof: bool) -> Option<usize> {
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

    fn missing_anchor(&self, lines: &[&str], anchor: &str, cursor: usize) -> Error {
        let pattern = [anchor.to_string()];
        let closest = closest(lines, &pattern);
        let mut message = format!("could not find the anchor line '@@ {anchor}'");
        match seek(lines, &pattern, 0, false) {
            Some(at) if cursor > 0 => message.push_str(&format!(
                " after line {cursor}: it is at line {}, before the lines of the previous chunk or anchor; \
                 chunks and anchors must be in file order",
                at + 1
            )),
            _ => message.push_str(&describe(&closest)),
        }
        self.failure(message, &closest)
    }

    fn missing_context(&self, lines: &[&str], chunk: &Chunk, cursor: usize, edits: &[Edit]) -> Error {
        let closest = closest(lines, &chunk.old_lines);
        let expected = chunk.old_lines.join("\n");
        let message = match find_old(lines, &chunk.old_lines, &chunk.new_lines, false, 0) {
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
    fn heredoc_delimiters() {
        assert_eq!(heredoc_delimiter("apply_patch <<'EOF'"), Some("EOF"));
        assert_eq!(heredoc_delimiter("<<\"PATCH\""), Some("PATCH"));
        assert_eq!(heredoc_delimiter("  applypatch <<-END_OF_PATCH "), Some("END_OF_PATCH"));
        assert_eq!(heredoc_delimiter("cat <<EOF"), None);
        assert_eq!(heredoc_delimiter("apply_patch <<'EOF"), None);
        assert_eq!(heredoc_delimiter("*** Begin Patch"), None);
    }

    #[test]
    fn anchors_and_unified_headers() {
        assert_eq!(anchor_text(" fn main() {"), Some("fn main() {".to_string()));
        assert_eq!(anchor_text(""), None);
        assert_eq!(anchor_text("   "), None);
        assert_eq!(anchor_text(" -12,7 +12,8 @@ impl Foo"), Some("impl Foo".to_string()));
        assert_eq!(anchor_text(" -1 +1 @@"), None);
        // A real anchor that merely starts with '-' stays as written.
        assert_eq!(anchor_text(" -- SQL comment"), Some("-- SQL comment".to_string()));
    }

    #[test]
    fn paths_are_checked_on_the_patch_line() {
        assert_eq!(check_path(3, " src/a.rs ").expect("relative"), "src/a.rs");
        for bad_path in ["", "  ", "/etc/passwd", "\\x", "C:\\x", "a/../b", "..", "a\\..\\b"] {
            let err = check_path(3, bad_path).expect_err(bad_path);
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().starts_with("patch line 3: "), "{}", err.message());
        }
        assert!(check_path(1, "a/..b/c..").is_ok());
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
        assert_eq!(seek(&lines, &strings(&["x"]), 0, false), Some(1));
        assert_eq!(seek(&lines, &strings(&["x"]), 0, true), Some(1));
        assert_eq!(seek(&lines, &strings(&["  x"]), 1, false), Some(1));
        assert_eq!(seek(&lines, &strings(&["x", "x", "x"]), 0, false), None);
        assert_eq!(seek(&lines, &strings(&["x"]), 2, false), None);
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
    fn dice_is_symmetric_and_bounded() {
        let (a, b) = (bigrams("hello world"), bigrams("hello word"));
        assert_eq!(dice(&a, &b), dice(&b, &a));
        assert_eq!(dice(&a, &a), 1000);
        assert!(dice(&a, &b) > 700 && dice(&a, &b) < 1000);
        assert_eq!(dice(&a, &bigrams("x")), 0);
    }
}
