//! Slicing a text for `read_file` as it streams by: UTF-8 checked across buffer edges, lines
//! counted, and only the requested lines kept (each cut to a number of characters), so reading
//! lines 1-2000 of a file of any size holds those lines, not the file.

/// Bytes searched for a NUL to call a file binary (git and ripgrep look at the start too).
const BINARY_PROBE: u64 = 8192;

/// One kept line: the characters kept, how many more it had, and whether a `\n` ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The characters kept.
    pub text: String,
    /// How many more characters the line had.
    pub more: usize,
    /// Whether a `\n` ended it.
    pub eol: bool,
}

/// The state of one pass over a text.
#[derive(Debug)]
pub struct Slicer {
    /// 1-based numbers of the first and last line to keep.
    first: usize,
    last: usize,
    max_chars: usize,
    /// The line being read (1-based) and its characters so far.
    line: usize,
    line_chars: usize,
    current: String,
    /// The characters of `current` (kept of the line being read).
    current_chars: usize,
    kept: Vec<Line>,
    /// The bytes of a character cut by a buffer edge.
    carry: Vec<u8>,
    seen: u64,
    binary: bool,
}

impl Slicer {
    /// Keeps lines `first..=last` (1-based), each to at most `max_chars` characters.
    pub fn new(first: usize, last: usize, max_chars: usize) -> Slicer {
        Slicer {
            first,
            last,
            max_chars,
            line: 1,
            line_chars: 0,
            current: String::new(),
            current_chars: 0,
            kept: Vec::new(),
            carry: Vec::new(),
            seen: 0,
            binary: false,
        }
    }

    /// Whether the text is binary so far: a NUL near the start, or bytes that are not UTF-8.
    pub fn is_binary(&self) -> bool {
        self.binary
    }

    /// Takes the next bytes of the text.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.binary {
            return;
        }
        if self.seen < BINARY_PROBE {
            let probe = (BINARY_PROBE - self.seen).min(bytes.len() as u64) as usize;
            if bytes[..probe].contains(&0) {
                self.binary = true;
                return;
            }
        }
        self.seen += bytes.len() as u64;
        // First the character the last buffer's edge cut, completed from this one.
        if !self.carry.is_empty() {
            let need = utf8_width(self.carry[0]).saturating_sub(self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..need]);
            bytes = &bytes[need..];
            let carry = std::mem::take(&mut self.carry);
            match std::str::from_utf8(&carry) {
                Ok(c) => self.text(c),
                // Still cut: this buffer was shorter than the character.
                Err(e) if e.error_len().is_none() => {
                    self.carry = carry;
                    return;
                }
                Err(_) => {
                    self.binary = true;
                    return;
                }
            }
        }
        let (text, rest) = match std::str::from_utf8(bytes) {
            Ok(text) => (text, &[][..]),
            // Cut at the end: the rest comes with the next buffer.
            Err(e) if e.error_len().is_none() => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                // Checked just above: the part before the cut is valid.
                (std::str::from_utf8(valid).unwrap_or_default(), rest)
            }
            Err(_) => {
                self.binary = true;
                return;
            }
        };
        self.text(text);
        self.carry.extend_from_slice(rest);
    }

    /// Takes valid text: whole lines end where a `\n` is (found with memchr, not char by char).
    fn text(&mut self, mut text: &str) {
        // Past the last line to keep, only the count of lines matters.
        if self.line > self.last {
            let bytes = text.as_bytes();
            let ends = memchr::memchr_iter(b'\n', bytes).count();
            self.line += ends;
            let tail = memchr::memrchr(b'\n', bytes).map_or(bytes.len(), |i| bytes.len() - i - 1);
            self.line_chars = if ends > 0 { tail } else { self.line_chars + tail };
            return;
        }
        while let Some(i) = memchr::memchr(b'\n', text.as_bytes()) {
            self.take(&text[..i]);
            self.end_line(true);
            text = &text[i + 1..];
            if self.line > self.last {
                return self.text(text);
            }
        }
        if !text.is_empty() {
            self.take(text);
        }
    }

    fn wanted(&self) -> bool {
        self.line >= self.first && self.line <= self.last
    }

    fn take(&mut self, part: &str) {
        if !self.wanted() {
            // Only whether the line has anything matters (a last line without `\n`).
            self.line_chars += part.len();
            return;
        }
        let chars = part.chars().count();
        if self.current_chars < self.max_chars {
            let room = self.max_chars - self.current_chars;
            let cut =
                if chars <= room { part.len() } else { part.char_indices().nth(room).map_or(part.len(), |(i, _)| i) };
            self.current.push_str(&part[..cut]);
            self.current_chars += chars.min(room);
        }
        self.line_chars += chars;
    }

    fn end_line(&mut self, eol: bool) {
        if self.wanted() {
            let text = std::mem::take(&mut self.current);
            self.kept.push(Line { text, more: self.line_chars - self.current_chars, eol });
        }
        self.line += 1;
        self.line_chars = 0;
        self.current_chars = 0;
    }

    /// Ends the text: the lines kept and the number of lines it has; `None` if it is binary.
    pub fn finish(mut self) -> Option<(Vec<Line>, usize)> {
        if self.binary || !self.carry.is_empty() {
            return None;
        }
        // A last line without a newline is a line too.
        if self.line_chars > 0 {
            self.end_line(false);
        }
        Some((self.kept, self.line - 1))
    }
}

/// The length of the UTF-8 sequence a leading byte starts (1 for a byte that starts none, so
/// the check that follows finds it invalid).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice read whole, as `read_file` did before it streamed: the oracle.
    fn whole(text: &str, first: usize, last: usize, max: usize) -> (Vec<Line>, usize) {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let kept = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i + 1 >= first && *i < last)
            .map(|(_, l)| {
                let (body, eol) = match l.strip_suffix('\n') {
                    Some(b) => (b, true),
                    None => (*l, false),
                };
                let text: String = body.chars().take(max).collect();
                Line { more: body.chars().count() - text.chars().count(), text, eol }
            })
            .collect();
        (kept, lines.len())
    }

    #[test]
    fn streaming_in_any_buffer_size_matches_reading_whole() {
        let texts = [
            "".to_string(),
            "one".to_string(),
            "\n".to_string(),
            "a\nb\n\nc".to_string(),
            "héllo wörld\r\nçà ⚙ ✓ 🦀\nlast line without newline".to_string(),
            "🦀".repeat(700) + "\n" + &"x".repeat(3000) + "\né\n",
        ];
        for text in &texts {
            for (first, last, max) in [(1, usize::MAX, 2000), (2, 3, 5), (1, 1, 1), (3, 10, 2000)] {
                let expected = whole(text, first, last, max);
                for buf in [1, 2, 3, 5, 7, 64, 4096] {
                    let mut s = Slicer::new(first, last, max);
                    for part in text.as_bytes().chunks(buf) {
                        s.feed(part);
                    }
                    assert_eq!(
                        s.finish(),
                        Some(expected.clone()),
                        "{text:?} lines {first}-{last} in {buf}-byte buffers"
                    );
                }
            }
        }
    }

    #[test]
    fn nul_early_or_bad_utf8_anywhere_is_binary() {
        for bytes in [&b"abc\0def"[..], b"valid then \xff\xfe", b"cut at the end \xe2\x82"] {
            let mut s = Slicer::new(1, usize::MAX, 2000);
            for part in bytes.chunks(3) {
                s.feed(part);
            }
            assert!(s.finish().is_none(), "{bytes:?}");
        }
        let mut late = vec![b'a'; 9000];
        late.push(0);
        let mut s = Slicer::new(1, 1, 10);
        s.feed(&late);
        assert!(s.finish().is_some(), "a NUL past the probe is text, as before");
    }
}
