//! Parsing the apply_patch envelope into a [`Patch`] of file operations.

use std::fmt::Display;

use super::ast::{Chunk, FileOp, Patch};
use crate::base::error::{Error, Result};

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
            add_body_line(&mut chunk, line.text, line.no, path)?;
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

/// One line of a chunk's body: context (`' '`, or an empty line, as agents drop the single
/// space of an empty context line), removed (`-`) or added (`+`).
fn add_body_line(chunk: &mut Chunk, text: &str, no: usize, path: &str) -> Result<()> {
    match text.as_bytes().first() {
        None => {
            chunk.old_lines.push(String::new());
            chunk.new_lines.push(String::new());
        }
        Some(b' ') => {
            chunk.old_lines.push(text[1..].to_string());
            chunk.new_lines.push(text[1..].to_string());
        }
        Some(b'-') => chunk.old_lines.push(text[1..].to_string()),
        Some(b'+') => chunk.new_lines.push(text[1..].to_string()),
        Some(_) => {
            return Err(bad(
                no,
                format!(
                    "expected a line starting with ' ', '+' or '-' in the chunk for '{path}', found {}",
                    found(text)
                ),
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;

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
}
