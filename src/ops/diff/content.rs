//! Comparing the content of one changed file: loading both sides (from the store or the live
//! tree) with a size cap, telling text from binary, counting lines added and removed, and
//! writing the git-style unified patch.

use std::fmt::Write as _;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use similar::{DiffOp, TextDiff};

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::base::error::{from_io, Error, Result};
use crate::base::path;
use crate::fs::walk;
use crate::model::diff::{ChangeStatus, DiffEntry};
use crate::model::tree::{Entry, EntryKind};
use crate::ops::view::short_id;
use crate::repo::Repo;

/// Files larger than this are not compared line by line (they are still compared by id).
pub const MAX_TEXT_BYTES: u64 = 8 << 20;

/// A line diff that takes longer than this falls back to a coarser (still correct) answer.
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

/// How far a NUL byte is looked for to call a file binary, as git does.
const BINARY_PROBE: usize = 8000;

/// Where one side's file bytes live.
#[derive(Clone, Copy)]
pub(crate) enum Side<'a> {
    /// In the object store (a snapshot).
    Store,
    /// In the live tree opened at this descriptor.
    Live(&'a OwnedFd),
}

/// One side's bytes, as far as a line diff needs them.
enum Text {
    /// No file on this side (added, deleted, or a directory).
    Absent,
    Utf8(String),
    Binary,
    TooLarge,
    /// A live file gone (or replaced by a directory or a link) between the tree's reading and
    /// its content's: it changed while the diff was made.
    Gone,
}

fn load(repo: &Repo, side: Side<'_>, path: &[u8], e: Option<&Entry>) -> Result<Text> {
    let Some(e) = e else { return Ok(Text::Absent) };
    let bytes = match e.kind {
        EntryKind::Dir => return Ok(Text::Absent),
        EntryKind::Symlink => e.target.clone().unwrap_or_default(),
        EntryKind::File => {
            if e.size > MAX_TEXT_BYTES {
                return Ok(Text::TooLarge);
            }
            let mut out = Vec::with_capacity(e.size as usize);
            match side {
                Side::Store => {
                    let reader = repo.open_content(e)?;
                    reader
                        .take(MAX_TEXT_BYTES + 1)
                        .read_to_end(&mut out)
                        .map_err(|err| from_io(err).context(path::display(path)))?;
                }
                Side::Live(root) => {
                    let f = match walk::open_beneath(root, path) {
                        Ok(f) => f,
                        Err(err) if gone(&err) => return Ok(Text::Gone),
                        Err(err) => return Err(live_error("open", path, err)),
                    };
                    match f.take(MAX_TEXT_BYTES + 1).read_to_end(&mut out) {
                        Ok(_) => {}
                        Err(err) if gone(&err) => return Ok(Text::Gone),
                        Err(err) => return Err(live_error("read", path, err)),
                    }
                }
            }
            if out.len() as u64 > MAX_TEXT_BYTES {
                return Ok(Text::TooLarge);
            }
            out
        }
    };
    if memchr::memchr(0, &bytes[..bytes.len().min(BINARY_PROBE)]).is_some() {
        return Ok(Text::Binary);
    }
    Ok(String::from_utf8(bytes).map(Text::Utf8).unwrap_or(Text::Binary))
}

/// Whether opening a live file failed because it is no longer a file there: removed, its
/// directory removed, or a directory or a symlink in its place (never followed).
fn gone(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::NotFound
        || matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP | libc::EISDIR))
}

fn live_error(verb: &str, path: &[u8], err: std::io::Error) -> Error {
    Error::io(verb, Path::new(OsStr::from_bytes(path)), err)
}

/// git's mode word for an entry: `100644`, `100755`, `120000`.
fn git_mode(e: &Entry) -> String {
    match e.kind {
        EntryKind::Symlink => "120000".into(),
        EntryKind::Dir => "040000".into(),
        EntryKind::File => format!("100{:03o}", e.mode & 0o777),
    }
}

fn short_of(e: Option<&Entry>) -> String {
    match e.and_then(|e| e.content.filter(|_| e.kind == EntryKind::File)) {
        Some(id) => short_id(&id.to_hex()).to_string(),
        None => "00000000".into(),
    }
}

/// The lines of a git extended header for `d` (everything before `---`).
fn header(d: &DiffEntry, old: Option<&Entry>, new: Option<&Entry>) -> String {
    let new_path = path::display(&d.raw_path).into_owned();
    let old_path = d.raw_old_path.as_deref().map_or_else(|| new_path.clone(), |p| path::display(p).into_owned());
    let mut h = format!("diff --git a/{old_path} b/{new_path}\n");
    match (old, new) {
        (None, Some(n)) => {
            let _ = writeln!(h, "new file mode {}", git_mode(n));
        }
        (Some(o), None) => {
            let _ = writeln!(h, "deleted file mode {}", git_mode(o));
        }
        (Some(o), Some(n)) => {
            if d.status == ChangeStatus::Renamed {
                let _ = writeln!(h, "similarity index {}%", d.similarity.unwrap_or(100));
                let _ = writeln!(h, "rename from {old_path}\nrename to {new_path}");
            }
            if git_mode(o) != git_mode(n) {
                let _ = writeln!(h, "old mode {}\nnew mode {}", git_mode(o), git_mode(n));
            }
        }
        (None, None) => {}
    }
    let same_content = match (old, new) {
        (Some(o), Some(n)) => o.content == n.content && o.target == n.target,
        _ => false,
    };
    if !same_content {
        let _ = write!(h, "index {}..{}", short_of(old), short_of(new));
        match (old, new) {
            (Some(o), Some(n)) if git_mode(o) == git_mode(n) => {
                let _ = writeln!(h, " {}", git_mode(o));
            }
            _ => h.push('\n'),
        }
    }
    h
}

/// Fills `d`'s binary flag, line counts and, when `patch` is set, its patch (with `context`
/// lines around each hunk). True when a live side was gone by the time it was read (`d` then
/// has a note instead of line counts).
pub(crate) fn compare(
    repo: &Repo,
    sides: (Side<'_>, Side<'_>),
    d: &mut DiffEntry,
    (old, new): (Option<&Entry>, Option<&Entry>),
    patch: bool,
    context: usize,
) -> Result<bool> {
    let old_path = d.raw_old_path.clone().unwrap_or_else(|| d.raw_path.clone());
    let a = load(repo, sides.0, &old_path, old)?;
    let b = load(repo, sides.1, &d.raw_path, new)?;
    let mut out = patch.then(|| header(d, old, new));
    let (a, b) = match (a, b) {
        (Text::Gone, _) | (_, Text::Gone) => {
            d.note = Some("changed while the diff was being read (not counted in the lines): read it again".into());
            d.patch = out;
            return Ok(true);
        }
        (Text::TooLarge, _) | (_, Text::TooLarge) => {
            d.note = Some(format!("larger than {} MiB: not compared line by line", MAX_TEXT_BYTES >> 20));
            d.patch = out;
            return Ok(false);
        }
        (Text::Binary, _) | (_, Text::Binary) => {
            d.binary = true;
            if let Some(p) = &mut out {
                let same = old.zip(new).is_some_and(|(o, n)| o.content == n.content);
                if !same {
                    let shown = |side: &str, e: Option<&Entry>, raw: &[u8]| match e {
                        Some(_) => format!("{side}/{}", path::display(raw)),
                        None => "/dev/null".into(),
                    };
                    let _ = writeln!(
                        p,
                        "Binary files {} and {} differ",
                        shown("a", old, &old_path),
                        shown("b", new, &d.raw_path)
                    );
                }
            }
            d.patch = out;
            return Ok(false);
        }
        (a, b) => (text_of(a), text_of(b)),
    };
    let diff = TextDiff::configure().deadline(Instant::now() + DIFF_DEADLINE).diff_lines(a.as_str(), b.as_str());
    let (mut added, mut removed) = (0u64, 0u64);
    for op in diff.ops() {
        match *op {
            DiffOp::Insert { new_len, .. } => added += new_len as u64,
            DiffOp::Delete { old_len, .. } => removed += old_len as u64,
            DiffOp::Replace { old_len, new_len, .. } => {
                added += new_len as u64;
                removed += old_len as u64;
            }
            DiffOp::Equal { .. } => {}
        }
    }
    d.lines_added = Some(added);
    d.lines_removed = Some(removed);
    if let Some(p) = &mut out {
        let a_name = match old {
            Some(_) => format!("a/{}", path::display(&old_path)),
            None => "/dev/null".into(),
        };
        let b_name = match new {
            Some(_) => format!("b/{}", path::display(&d.raw_path)),
            None => "/dev/null".into(),
        };
        let _ = write!(
            p,
            "{}",
            diff.unified_diff().context_radius(context).missing_newline_hint(true).header(&a_name, &b_name)
        );
    }
    d.patch = out;
    Ok(false)
}

fn text_of(t: Text) -> String {
    match t {
        Text::Utf8(s) => s,
        _ => String::new(),
    }
}

/// A file's content when it is text within `MAX_TEXT_BYTES` (what rename detection compares).
pub(crate) fn text(repo: &Repo, side: Side<'_>, path: &[u8], e: &Entry) -> Result<Option<String>> {
    Ok(match load(repo, side, path, Some(e))? {
        Text::Utf8(s) => Some(s),
        _ => None,
    })
}
