//! `edit_file`'s exact-string edits: each `oldText` must match exactly once (or every match
//! is replaced with `replaceAll`), applied in order, all or none.

use serde::Deserialize;

use crate::base::error::{Error, ErrorKind, Result};

/// One replacement of `edit_file`: `old_text` must match exactly once unless `replace_all`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// The text to find, exactly.
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
    /// Replace every match instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Applies `edits` to `text` in order; returns the new text and the replacements made. A file
/// with CRLF line endings also matches an `oldText` written with LF, and gets CRLF back.
pub fn apply(path: &str, text: &str, edits: &[Edit]) -> Result<(String, usize)> {
    if edits.is_empty() {
        return Err(Error::invalid_argument("edits is empty: give at least one {oldText, newText}"));
    }
    let crlf = text.contains("\r\n");
    let mut out = text.to_string();
    let mut total = 0;
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(Error::invalid_argument(format!(
                "edit {} has an empty oldText: to add text, include the lines around it",
                i + 1
            )));
        }
        let (old, new) = match (out.matches(e.old_text.as_str()).count(), crlf && !e.old_text.contains("\r\n")) {
            (0, true) => (e.old_text.replace('\n', "\r\n"), e.new_text.replace('\n', "\r\n")),
            _ => (e.old_text.clone(), e.new_text.clone()),
        };
        let n = out.matches(old.as_str()).count();
        let fail = |what: String| {
            Error::new(ErrorKind::PatchFailed, format!("'{path}', edit {}: {what}", i + 1))
                .with_detail("path", path)
                .with_detail("edit", i + 1)
                .with_detail("matches", n)
        };
        if n == 0 {
            return Err(fail(
                "oldText matches nothing in the file (after the edits before it): re-read the file and copy the text exactly"
                    .into(),
            ));
        }
        if n > 1 && !e.replace_all {
            return Err(fail(format!(
                "oldText matches {n} times: add surrounding lines to make it unique, or set replaceAll"
            )));
        }
        out = out.replace(old.as_str(), &new);
        total += n;
    }
    Ok((out, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str, all: bool) -> Edit {
        Edit { old_text: old.into(), new_text: new.into(), replace_all: all }
    }

    #[test]
    fn exactly_once_unless_replace_all() {
        let (t, n) = apply("a", "x = 1\ny = 1\n", &[edit("x = 1", "x = 2", false)]).expect("one match");
        assert_eq!((t.as_str(), n), ("x = 2\ny = 1\n", 1));
        let e = apply("a", "x = 1\ny = 1\n", &[edit("= 1", "= 2", false)]).expect_err("two matches");
        assert_eq!(e.kind(), ErrorKind::PatchFailed);
        assert!(e.message().contains("matches 2 times"), "{e}");
        let (t, n) = apply("a", "x = 1\ny = 1\n", &[edit("= 1", "= 2", true)]).expect("replace all");
        assert_eq!((t.as_str(), n), ("x = 2\ny = 2\n", 2));
        let e = apply("a", "x\n", &[edit("x", "y", false), edit("nope", "z", false)]).expect_err("second fails");
        assert!(e.message().contains("edit 2"), "{e}");
        assert_eq!(e.details().and_then(|d| d.get("matches")).and_then(|v| v.as_u64()), Some(0));
    }

    #[test]
    fn crlf_files_take_lf_edits() {
        let (t, _) = apply("a", "one\r\ntwo\r\n", &[edit("one\ntwo", "uno\ndos", false)]).expect("crlf");
        assert_eq!(t, "uno\r\ndos\r\n");
    }
}
