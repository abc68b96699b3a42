//! A git-style patch as the review page draws it: rows with both line numbers, and within a
//! changed line paired with its replacement, the part that differs marked (the words changed,
//! not the whole line).

/// A piece of a line, marked when it is what changed.
pub struct Segment {
    pub text: String,
    pub mark: bool,
}

/// One row of a drawn diff.
pub struct Row {
    /// `hunk`, `ctx`, `add` or `del`.
    pub kind: &'static str,
    /// A hunk's header.
    pub text: String,
    /// The line's number before and after (empty on the side it is not on).
    pub old_n: String,
    pub new_n: String,
    pub sign: &'static str,
    pub segments: Vec<Segment>,
}

fn plain(text: &str) -> Vec<Segment> {
    vec![Segment { text: text.to_string(), mark: false }]
}

/// The start lines a hunk header `@@ -a,b +c,d @@` gives.
fn hunk_starts(header: &str) -> Option<(u64, u64)> {
    let mut parts = header.split_whitespace().skip(1);
    let old = parts.next()?.strip_prefix('-')?.split(',').next()?.parse().ok()?;
    let new = parts.next()?.strip_prefix('+')?.split(',').next()?.parse().ok()?;
    Some((old, new))
}

/// One side of a side-by-side row: its kind (`ctx`, `add`, `del`), number and text.
pub struct Half {
    pub kind: &'static str,
    pub n: String,
    pub segments: Vec<Segment>,
}

/// A row of the side-by-side view: a hunk's header across, or the line before on the left and
/// the line after on the right (either may be missing).
pub struct SplitRow {
    pub hunk: Option<String>,
    pub left: Option<Half>,
    pub right: Option<Half>,
}

/// `rows` side by side: context on both sides, and each run of removed lines beside the run of
/// added lines after it, pair by pair.
pub fn split(rows: Vec<Row>) -> Vec<SplitRow> {
    let mut out = Vec::new();
    let (mut dels, mut adds): (Vec<Half>, Vec<Half>) = (Vec::new(), Vec::new());
    let flush = |out: &mut Vec<SplitRow>, dels: &mut Vec<Half>, adds: &mut Vec<Half>| {
        let (mut d, mut a) = (std::mem::take(dels).into_iter(), std::mem::take(adds).into_iter());
        loop {
            let (left, right) = (d.next(), a.next());
            if left.is_none() && right.is_none() {
                break;
            }
            out.push(SplitRow { hunk: None, left, right });
        }
    };
    for r in rows {
        match r.kind {
            "del" => {
                if !adds.is_empty() {
                    flush(&mut out, &mut dels, &mut adds);
                }
                dels.push(Half { kind: "del", n: r.old_n, segments: r.segments });
            }
            "add" => adds.push(Half { kind: "add", n: r.new_n, segments: r.segments }),
            _ => {
                flush(&mut out, &mut dels, &mut adds);
                match r.kind {
                    "hunk" => out.push(SplitRow { hunk: Some(r.text), left: None, right: None }),
                    "note" => {
                        let note = Half { kind: "note", n: String::new(), segments: r.segments };
                        out.push(SplitRow { hunk: None, left: None, right: Some(note) });
                    }
                    _ => {
                        let text: String = r.segments.iter().map(|s| s.text.as_str()).collect();
                        let left = Half { kind: "ctx", n: r.old_n, segments: plain(&text) };
                        let right = Half { kind: "ctx", n: r.new_n, segments: plain(&text) };
                        out.push(SplitRow { hunk: None, left: Some(left), right: Some(right) });
                    }
                }
            }
        }
    }
    flush(&mut out, &mut dels, &mut adds);
    out
}

/// The rows of `patch` (its file headers left out: the card names the file).
pub fn rows(patch: &str) -> Vec<Row> {
    let mut out = Vec::new();
    let (mut old_n, mut new_n) = (0u64, 0u64);
    let mut in_hunk = false;
    // Split on `\n` alone: a `\r` stays in its line (and is drawn), so a change of line
    // endings is seen.
    for line in patch.split_terminator('\n') {
        if line.starts_with("@@") {
            if let Some((o, n)) = hunk_starts(line) {
                (old_n, new_n) = (o, n);
            }
            in_hunk = true;
            out.push(Row {
                kind: "hunk",
                text: line.to_string(),
                old_n: String::new(),
                new_n: String::new(),
                sign: "",
                segments: Vec::new(),
            });
            continue;
        }
        if !in_hunk {
            continue;
        }
        let (kind, sign, text) = match line.as_bytes().first() {
            Some(b'+') => ("add", "+", &line[1..]),
            Some(b'-') => ("del", "-", &line[1..]),
            Some(b' ') => ("ctx", " ", &line[1..]),
            // "\ No newline at end of file" and the like: a note, not a line of the file.
            _ => ("note", "", line),
        };
        let (o, n) = match kind {
            "add" => {
                new_n += 1;
                (String::new(), (new_n - 1).to_string())
            }
            "del" => {
                old_n += 1;
                ((old_n - 1).to_string(), String::new())
            }
            "note" => (String::new(), String::new()),
            _ => {
                old_n += 1;
                new_n += 1;
                ((old_n - 1).to_string(), (new_n - 1).to_string())
            }
        };
        let shown = match text.strip_suffix('\r') {
            Some(rest) => format!("{rest}\u{240d}"),
            None => text.to_string(),
        };
        out.push(Row { kind, text: String::new(), old_n: o, new_n: n, sign, segments: plain(&shown) });
    }
    mark_changed_words(&mut out);
    out
}

/// In every run of removed lines followed by as many added ones, pairs them in order and marks
/// in each pair what lies between the common start and the common end.
fn mark_changed_words(rows: &mut [Row]) {
    let mut i = 0;
    while i < rows.len() {
        let dels = rows[i..].iter().take_while(|r| r.kind == "del").count();
        let adds = rows[i + dels..].iter().take_while(|r| r.kind == "add").count();
        if dels > 0 && dels == adds {
            for k in 0..dels {
                let old = rows[i + k].segments.iter().map(|s| s.text.as_str()).collect::<String>();
                let new = rows[i + dels + k].segments.iter().map(|s| s.text.as_str()).collect::<String>();
                let (a, b) = split_changed(&old, &new);
                rows[i + k].segments = a;
                rows[i + dels + k].segments = b;
            }
        }
        i += (dels + adds).max(1);
    }
}

/// `old` and `new` cut into their common start, the part that differs (marked) and their
/// common end, on character boundaries and widened to whole words.
fn split_changed(old: &str, new: &str) -> (Vec<Segment>, Vec<Segment>) {
    if old == new {
        return (plain(old), plain(new));
    }
    let prefix: usize = old.chars().zip(new.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a.len_utf8()).sum();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix: usize = old[prefix..]
        .chars()
        .rev()
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>()
        .min(max_suffix);
    // Whole words: a change that begins or ends inside a word marks all of that word (a
    // change at a word's edge marks only what changed).
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let before = old[..prefix].chars().next_back().is_some_and(word);
    let inside = |s: &str| s[prefix..].chars().next().is_some_and(word);
    let start = if before && (inside(old) || inside(new)) {
        old[..prefix].rfind(|c: char| !word(c)).map_or(0, |p| p + old[p..].chars().next().map_or(1, char::len_utf8))
    } else {
        prefix
    };
    let cut = |s: &str| -> Vec<Segment> {
        let end_common = s.len() - suffix;
        let after = s[end_common..].chars().next().is_some_and(word);
        let last_changed = s[start..end_common].chars().next_back().is_some_and(word);
        let end = if after && last_changed {
            s[end_common..].find(|c: char| !word(c)).map_or(s.len(), |p| end_common + p)
        } else {
            end_common
        };
        let (head, mid, tail) = (&s[..start], &s[start..end], &s[end..]);
        if mid.is_empty() {
            return plain(s);
        }
        [(head, false), (mid, true), (tail, false)]
            .into_iter()
            .filter(|(t, _)| !t.is_empty())
            .map(|(t, mark)| Segment { text: t.to_string(), mark })
            .collect()
    };
    (cut(old), cut(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(r: &Row) -> String {
        r.segments.iter().map(|s| if s.mark { format!("[{}]", s.text) } else { s.text.clone() }).collect()
    }

    #[test]
    fn rows_carry_both_line_numbers_and_mark_the_changed_words() {
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -3,3 +3,3 @@ fn f\n keep\n-    token.len() > 8\n+    token.len() > 12\n tail\n";
        let rows = rows(patch);
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, ["hunk", "ctx", "del", "add", "ctx"]);
        assert_eq!((rows[1].old_n.as_str(), rows[1].new_n.as_str()), ("3", "3"));
        assert_eq!((rows[2].old_n.as_str(), rows[2].new_n.as_str()), ("4", ""));
        assert_eq!((rows[3].old_n.as_str(), rows[3].new_n.as_str()), ("", "4"));
        assert_eq!((rows[4].old_n.as_str(), rows[4].new_n.as_str()), ("5", "5"));
        assert_eq!(shown(&rows[2]), "    token.len() > [8]");
        assert_eq!(shown(&rows[3]), "    token.len() > [12]");
    }

    #[test]
    fn line_endings_notes_and_equal_pairs_are_drawn_as_they_are() {
        let rows = rows("@@ -1,2 +1,2 @@\n-same\r\n-x y\n+same\n+x y\n\\ No newline at end of file\n");
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, ["hunk", "del", "del", "add", "add", "note"]);
        assert_eq!(shown(&rows[1]), "same[\u{240d}]", "a lost carriage return is seen");
        assert_eq!(shown(&rows[2]), "x y", "equal lines mark nothing");
        assert_eq!((rows[5].old_n.as_str(), rows[5].new_n.as_str()), ("", ""));
    }

    #[test]
    fn side_by_side_pairs_removed_lines_with_the_added_ones_after_them() {
        let rows = rows("@@ -1,4 +1,4 @@\n a\n-b\n-c\n+B\n d\n+e\n");
        let split = split(rows);
        let shown: Vec<(String, String)> = split
            .iter()
            .map(|r| {
                let side =
                    |h: &Option<Half>| h.as_ref().map(|h| format!("{}{}", h.n, shown_half(h))).unwrap_or_default();
                (r.hunk.clone().unwrap_or_else(|| side(&r.left)), side(&r.right))
            })
            .collect();
        let want = [("@@ -1,4 +1,4 @@", ""), ("1a", "1a"), ("2b", "2B"), ("3c", ""), ("4d", "3d"), ("", "4e")];
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(shown, want);
    }

    fn shown_half(h: &Half) -> String {
        h.segments.iter().map(|s| if s.mark { format!("[{}]", s.text) } else { s.text.clone() }).collect()
    }

    #[test]
    fn unpaired_lines_and_multibyte_text_are_drawn_whole() {
        let rows = rows("@@ -1 +1,2 @@\n-é1\n+é2\n+new\n");
        assert_eq!(rows.iter().map(shown).collect::<Vec<_>>(), ["", "é1", "é2", "new"]);
        let rows = self::rows("@@ -1 +1 @@\n-naïve café\n+naïve thé\n");
        assert_eq!(shown(&rows[1]), "naïve [café]");
        assert_eq!(shown(&rows[2]), "naïve [thé]");
    }
}
