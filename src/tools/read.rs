//! The reading tools: `read_file` (line slices, caps, the whole file's sha256),
//! `list_directory`, and `search_files` / `glob` over the live tree or the latest snapshot.

use base64::Engine;
use serde::Deserialize;

use super::caller::Caller;
use super::output::{
    Answered, DirEntry, Encoding, GlobResult, ListDirectoryResult, ReadFileResult, SearchResult, ToolOutput,
};
use super::slice::Slicer;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::base::time::iso_time;
use crate::fs::live::ChangePolicy;
use crate::fs::walk::Excludes;
use crate::fs::workdir::{Kind, WorkDir};
use crate::model::scope::Scope;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::EntryKind;
use crate::object::Sha256;
use crate::ops::search::{Matcher, SearchSpec};
use crate::ops::source::{stream_hashed, ListedFile, Opened, Origin, Source, WorkspaceView};
use crate::repo::Repo;

use crate::base::count;

/// Lines and characters per line `read_file` returns unless asked otherwise.
pub const MAX_LINES: usize = 2000;
/// Characters per line `read_file` returns unless asked otherwise.
pub const MAX_LINE_CHARS: usize = 2000;
/// The biggest file `search_files` reads whole; bigger ones are skipped (`read_file` streams
/// files of any size).
pub use crate::ops::search::READ_LIMIT;
/// The most bytes one base64 `read_file` returns; `offset` reads on from `nextOffset`.
pub const BASE64_MAX: u64 = 8 << 20;
/// `read_file`: a file's lines (or bytes, in base64), with its sha256.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadFile {
    /// The file, workspace-relative.
    pub path: String,
    /// The exact path bytes in standard base64, for a name that is not UTF-8 (as answers'
    /// `pathBase64` give it); given, it is the file and `path` is only shown.
    #[serde(default)]
    pub path_base64: Option<String>,
    /// The first line to return, 1-based.
    #[serde(default, deserialize_with = "count::de_positive")]
    #[schemars(with = "Option<count::LineNumber>")]
    pub start_line: Option<usize>,
    /// The last line to return, inclusive.
    #[serde(default, deserialize_with = "count::de_positive")]
    #[schemars(with = "Option<count::LineNumber>")]
    pub end_line: Option<usize>,
    /// The most bytes of text to return, cut at a whole line.
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_bytes: Option<usize>,
    /// The most lines to return (default 2000).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_lines: Option<usize>,
    /// Characters kept of each line (default 2000).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_line_length: Option<usize>,
    /// `utf-8` (default) or `base64`.
    #[serde(default, deserialize_with = "de_read_encoding")]
    #[schemars(schema_with = "read_encoding_schema")]
    pub encoding: Option<String>,
    /// For base64: the byte to start at (`nextOffset` of the read before).
    #[serde(default, deserialize_with = "count::de_u64")]
    #[schemars(with = "Option<count::Count>")]
    pub offset: Option<u64>,
    /// `live`, `latest` or a snapshot id; the default follows the session.
    pub source: Option<String>,
}

/// `list_directory`: a directory's entries, optionally recursive.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListDirectory {
    /// The directory, workspace-relative; the root by default.
    #[serde(default)]
    pub path: String,
    /// List everything below, not only the directory's own entries.
    #[serde(default)]
    pub recursive: bool,
    /// How deep a recursive listing goes.
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_depth: Option<usize>,
    /// The most entries to return (default 1000); `truncated` says when more were left out.
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub limit: Option<usize>,
    /// `live`, `latest` or a snapshot id; the default follows the session.
    pub source: Option<String>,
}

pub use crate::ops::search::SearchMode;

/// `search_files` and `glob`: matches in contents or paths.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Search {
    /// What to look for, read as `mode` says.
    pub pattern: String,
    /// Literal (default), regex or glob.
    #[serde(default)]
    pub mode: SearchMode,
    /// Only under this directory.
    #[serde(default)]
    pub path: String,
    /// Only files whose path matches one of these globs.
    #[serde(default)]
    pub include: Vec<String>,
    /// Never files whose path matches one of these globs.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Match regardless of case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Lines of context shown before and after each matching line (at most 100).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub context: Option<usize>,
    /// The most matches to return (default 200); `truncated` says when more were left out.
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_results: Option<usize>,
    /// `live`, `latest` or a snapshot id; the default follows the session.
    pub source: Option<String>,
}

const DEFAULT_LIST_LIMIT: usize = 1000;
const DEFAULT_MAX_RESULTS: usize = 200;

fn source_of(s: &Option<String>) -> Source {
    s.as_deref().map_or(Source::Auto, Source::parse)
}

fn not_text(p: &str) -> Error {
    Error::new(ErrorKind::NotText, format!("'{p}' is not UTF-8 text: read it with \"encoding\": \"base64\""))
        .with_detail("path", p)
}

/// The longest prefix of `s` of at most `n` bytes ending on a character boundary.
fn prefix_bytes(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Search {
    /// Checks the patterns against the limits of `pattern.rs` before anything compiles them:
    /// part of parsing the call, so over HTTP a pattern too big or too deep is a 400.
    pub fn check_patterns(&self) -> Result<()> {
        match self.mode {
            SearchMode::Glob => crate::base::pattern::check_glob(&self.pattern)?,
            SearchMode::Regex => crate::base::pattern::check_regex(&self.pattern)?,
            // The literal's own length: escaping it may double it.
            SearchMode::Literal => crate::base::pattern::check_regex(&self.pattern)?,
        }
        for list in [&self.include, &self.exclude] {
            crate::base::pattern::check_list("include/exclude", list)?;
            list.iter().try_for_each(|g| crate::base::pattern::check_glob(g))?;
        }
        Ok(())
    }
}

fn session_view<'a>(c: &'a Caller<'a>, excludes: &'a Excludes) -> WorkspaceView<'a> {
    WorkspaceView::of_session(c.session, excludes, &c.scope)
}

/// An encoding `read_file` answers in, refused when the parameters are read (as its schema
/// says), not after.
fn de_read_encoding<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let given = Option::<String>::deserialize(d)?;
    match given.as_deref() {
        None | Some("utf-8" | "utf8" | "base64") => Ok(given),
        Some(other) => Err(serde::de::Error::custom(format!("encoding '{other}' is not one of: utf-8, base64"))),
    }
}

/// The encodings `read_file` answers in.
fn read_encoding_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "enum": ["utf-8", "utf8", "base64", null]})
}

/// `read_file`.
pub(super) fn read_file(c: &Caller<'_>, p: &ReadFile) -> Result<ReadFileResult> {
    let base64 = match p.encoding.as_deref() {
        None | Some("utf-8") | Some("utf8") => false,
        Some("base64") => true,
        Some(other) => return Err(Error::invalid_argument(format!("encoding '{other}' is not one of: utf-8, base64"))),
    };
    let start = p.start_line.unwrap_or(1);
    if start == 0 {
        return Err(Error::invalid_argument("startLine is 1-based: the first line is 1"));
    }
    if let Some(e) = p.end_line.filter(|&e| e < start) {
        return Err(Error::invalid_argument(format!("endLine {e} is before startLine {start}")));
    }
    let none = Excludes::none();
    let view = session_view(c, &none);
    let want = source_of(&p.source);
    // A live file that changes while it streams by is read again, as whole reads are.
    for _ in 0..crate::fs::live::READ_ATTEMPTS {
        let asked = path::exact_or_text(&p.path, p.path_base64.as_deref())?;
        let (mut opened, origin) = c.repo.open_file_from(&view, &want, &asked)?;
        let shown = path::display(&opened.path).into_owned();
        let mut out = ReadFileResult {
            path: shown.clone(),
            size: opened.size,
            modified_at: iso_time(opened.mtime_ns),
            answered: Answered::from(&origin),
            encoding: Encoding::Utf8,
            content: String::new(),
            truncated: false,
            next_offset: None,
            total_lines: None,
            start_line: None,
            end_line: None,
            next_start_line: None,
            truncated_lines: None,
            sha256: String::new(),
        };
        let read = if base64 {
            read_base64(c.repo, &mut opened, p, &mut out)
        } else {
            read_text(c.repo, &mut opened, p, start, &shown, &mut out)
        };
        let sha256 = read?;
        if opened.unchanged()? {
            out.sha256 = hex::encode(opened.sha256.unwrap_or(sha256));
            return Ok(out);
        }
    }
    Err(Error::new(
        ErrorKind::Conflict,
        format!("'{}' changed while it was read: read it again when its writer is done", p.path),
    ))
}

/// Streams `opened` once: the requested bytes as base64 (at most `BASE64_MAX` a call, from
/// `offset`), and the sha256 of the whole file.
fn read_base64(repo: &Repo, opened: &mut Opened<'_>, p: &ReadFile, out: &mut ReadFileResult) -> Result<Sha256> {
    let offset = p.offset.unwrap_or(0);
    let cap = p.max_bytes.map_or(BASE64_MAX, |b| (b as u64).min(BASE64_MAX));
    let _held = repo.hold(cap.min(opened.size) * 7 / 3)?;
    let (mut kept, mut at) = (Vec::new(), 0u64);
    let sha = stream_hashed(opened, |bytes| {
        let end = at + bytes.len() as u64;
        let from = offset.clamp(at, end);
        let to = offset.saturating_add(cap).clamp(at, end);
        kept.extend_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
        at = end;
        Ok(())
    })?;
    let next = offset + kept.len() as u64;
    out.encoding = Encoding::Base64;
    out.content = base64::engine::general_purpose::STANDARD.encode(&kept);
    out.truncated = next < opened.size || offset > 0;
    out.next_offset = (next < opened.size).then_some(next);
    Ok(sha)
}

/// Streams `opened` once: the requested lines (caps, markers) and the sha256 of the whole
/// file. Binary content is `not_text`.
fn read_text(
    repo: &Repo,
    opened: &mut Opened<'_>,
    p: &ReadFile,
    start: usize,
    shown: &str,
    out: &mut ReadFileResult,
) -> Result<Sha256> {
    let max_lines = p.max_lines.unwrap_or(MAX_LINES).max(1);
    let max_chars = p.max_line_length.unwrap_or(MAX_LINE_CHARS).max(1);
    let last_kept = p.end_line.unwrap_or(usize::MAX).min(start.saturating_add(max_lines - 1));
    // What the kept lines can take at most: four bytes a character, and the markers.
    let per_line = (max_chars as u64).saturating_mul(4).saturating_add(64);
    let bound = (max_lines.min(last_kept - start + 1) as u64).saturating_mul(per_line);
    let _held = repo.hold(bound.min(opened.size.saturating_mul(2)))?;
    let mut slicer = Slicer::new(start, last_kept, max_chars);
    let sha = stream_hashed(opened, |bytes| {
        slicer.feed(bytes);
        Ok(())
    })?;
    let (lines, total) = slicer.finish().ok_or_else(|| not_text(shown))?;
    if start > total.max(1) {
        return Err(Error::invalid_argument(format!(
            "startLine {start} is past the end of '{shown}', which has {total} lines"
        )));
    }
    let end = p.end_line.unwrap_or(total).min(total);
    let shown_end = end.min(start.saturating_add(max_lines - 1));
    let (mut content, cut_lines) = join_lines(&lines[..shown_end.saturating_sub(start - 1).min(lines.len())]);
    let mut last = shown_end;
    let mut truncated = shown_end < end || cut_lines > 0;
    if let Some(max) = p.max_bytes.filter(|&max| content.len() > max) {
        last = cut_to_whole_lines(&mut content, max, start, shown)?;
        truncated = true;
    }
    if last < end {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!(
            "[… truncated: showing lines {start}-{last} of {total}; call read_file with startLine={} to continue]",
            last + 1
        ));
        out.next_start_line = Some(last + 1);
    }
    out.encoding = Encoding::Utf8;
    out.content = content;
    out.total_lines = Some(total);
    out.start_line = Some(start);
    out.end_line = Some(last);
    out.truncated = truncated;
    out.truncated_lines = (cut_lines > 0).then_some(cut_lines);
    Ok(sha)
}

/// `list_directory`.
pub(super) fn list_directory(c: &Caller<'_>, p: &ListDirectory) -> Result<ListDirectoryResult> {
    let dir = path::components(p.path.as_bytes())?.join(&b'/');
    if !dir.is_empty() && !c.scope.dir_visible(&dir) {
        c.scope.check_read(&dir)?;
    }
    let depth = if p.recursive { p.max_depth.unwrap_or(usize::MAX) } else { 1 };
    let mut out = Listing {
        scope: &c.scope,
        dir: &dir,
        depth,
        limit: p.limit.unwrap_or(DEFAULT_LIST_LIMIT),
        entries: Vec::new(),
        truncated: false,
    };
    let none = Excludes::none();
    let view = session_view(c, &none);
    let origin = match c.repo.choose_source(&view, &source_of(&p.source))? {
        None => {
            list_live_dir(c, &mut out)?;
            Origin::Sandbox
        }
        Some(snap) => {
            list_snapshot_dir(c.repo, &snap, &mut out)?;
            Origin::Snapshot(snap.id)
        }
    };
    let (path, path_base64) = path::for_json(&dir);
    Ok(ListDirectoryResult {
        path,
        path_base64,
        entries: out.entries,
        truncated: out.truncated,
        answered: Answered::from(&origin),
    })
}

/// `list_directory` of the live tree, walked with an explicit stack in path order; only
/// this walk skips excluded directories (a snapshot never holds them).
fn list_live_dir(c: &Caller<'_>, out: &mut Listing<'_>) -> Result<()> {
    let excludes = c.repo.effective_excludes(&c.session.workspace, &Default::default())?;
    let wd = WorkDir::open(&c.session.live_dir)?;
    let dir = out.dir;
    match wd.stat(dir)? {
        Some(m) if m.kind == Kind::Dir => {}
        Some(_) => {
            return Err(Error::invalid_argument(format!("'{}' is a file: read it with read_file", path::display(dir))))
        }
        None => return Err(Error::not_found(format!("directory '{}' not found", path::display(dir)))),
    }
    let mut stack = vec![dir.to_vec()];
    while let Some(d) = stack.pop() {
        let mut children = wd.list(&d)?;
        children.sort_by(|a, b| a.0.cmp(&b.0));
        let mut subdirs = Vec::new();
        for (name, meta) in children {
            let rel = crate::fs::walk::join_rel(&d, &name);
            let kind = match meta.kind {
                Kind::File => EntryKind::File,
                Kind::Dir => EntryKind::Dir,
                Kind::Symlink => EntryKind::Symlink,
                Kind::Other => continue,
            };
            if !out.push(&rel, kind, meta.size, meta.mtime_ns) {
                return Ok(());
            }
            let descend = meta.kind == Kind::Dir
                && out.depth_of(&rel) < out.depth
                && !excludes.is_excluded(&rel, &name, true)
                && c.scope.dir_visible(&rel);
            if descend {
                subdirs.push(rel);
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// `list_directory` of a snapshot.
fn list_snapshot_dir(repo: &Repo, snap: &SnapshotInfo, out: &mut Listing<'_>) -> Result<()> {
    let dir = out.dir;
    let mut stop = false;
    repo.list(snap, dir, true, &mut |rel, e| {
        if stop || rel == dir || out.depth_of(rel) > out.depth {
            return Ok(());
        }
        stop = !out.push(rel, e.kind, e.size, e.mtime_ns);
        Ok(())
    })
    .map_err(|e| match e.kind() {
        ErrorKind::NotFound => Error::not_found(format!("directory '{}' not found", path::display(dir))),
        _ => e,
    })
}

/// `search_files` and `glob`: the live tree file by file (each read as `read_file` would), a
/// snapshot through the shared engine, in parallel.
pub(super) fn search(c: &Caller<'_>, p: &Search) -> Result<ToolOutput> {
    let spec = SearchSpec {
        pattern: p.pattern.clone(),
        mode: p.mode,
        path: p.path.clone(),
        include: p.include.clone(),
        exclude: p.exclude.clone(),
        case_insensitive: p.case_insensitive,
        context: p.context.unwrap_or(0),
    };
    let m = Matcher::new(&spec)?;
    let max = p.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1);
    let excludes = c.repo.effective_excludes(&c.session.workspace, &Default::default())?;
    let view = session_view(c, &excludes);
    let want = source_of(&p.source);
    if p.mode != SearchMode::Glob {
        if let Some(snap) = c.repo.choose_source(&view, &want)? {
            let found = c.repo.search_snapshot(&snap, &c.scope, &m, max)?;
            let answered = Answered::from(&Origin::Snapshot(snap.id));
            return Ok(ToolOutput::Search(SearchResult {
                matches: found.matches,
                files_searched: found.files_searched,
                truncated: found.truncated,
                answered,
            }));
        }
    }
    let (files, origin) = c.repo.list_files(&view, &want)?;
    let (mut found, mut matches) = (Vec::new(), Vec::new());
    let mut truncated = false;
    let mut searched = 0usize;
    for f in &files {
        c.repo.check_deadline("searching files")?;
        let Some(rel_in) = m.selects(&f.path) else { continue };
        if found.len() + matches.len() >= max {
            truncated = true;
            break;
        }
        if let Some(hit) = m.path_matches(&rel_in) {
            if hit {
                found.push(ListedFile::of(f).into_owned());
            }
            continue;
        }
        let read = match c.repo.read_file_from(&view, &want, &f.path, READ_LIMIT, ChangePolicy::Retry) {
            Ok((r, _)) => r,
            // Files that vanished or grew past the limit since the listing are skipped.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::TooLarge | ErrorKind::Conflict) => continue,
            Err(e) => return Err(e),
        };
        searched += 1;
        if m.search_bytes(&f.path, &read.bytes, max, &mut matches)? {
            truncated = true;
            break;
        }
    }
    let answered = Answered::from(&origin);
    Ok(if p.mode == SearchMode::Glob {
        ToolOutput::Glob(GlobResult { files: found, truncated, answered })
    } else {
        ToolOutput::Search(SearchResult { matches, files_searched: searched, truncated, answered })
    })
}

/// The kept lines as one text, each cut line marked; and how many were cut.
fn join_lines(lines: &[super::slice::Line]) -> (String, usize) {
    let mut content = String::new();
    let mut cut_lines = 0usize;
    for line in lines {
        content.push_str(&line.text);
        if line.more > 0 {
            cut_lines += 1;
            content.push_str(&format!("… [line truncated: {} more characters]", line.more));
        }
        if line.eol {
            content.push('\n');
        }
    }
    (content, cut_lines)
}

/// Cuts `content` (lines from `start`) to at most `max` bytes of whole lines, so
/// `nextStartLine` resumes exactly where the read stopped; returns the last line kept. A first
/// line longer than `max` is `too_large`.
fn cut_to_whole_lines(content: &mut String, max: usize, start: usize, shown: &str) -> Result<usize> {
    let kept = prefix_bytes(content, max);
    let whole = kept.rfind('\n').map_or(0, |i| i + 1);
    if whole == 0 {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("line {start} of '{shown}' is longer than maxBytes {max}: raise maxBytes or lower maxLineLength"),
        ));
    }
    let last = start - 1 + content[..whole].matches('\n').count();
    content.truncate(whole);
    Ok(last)
}

/// The entries a `list_directory` call gathers: only what the scope shows, at most `limit`.
struct Listing<'a> {
    scope: &'a Scope,
    dir: &'a [u8],
    depth: usize,
    limit: usize,
    entries: Vec<DirEntry>,
    truncated: bool,
}

impl Listing<'_> {
    /// Adds an entry the scope shows; returns false once the limit is reached (`truncated`).
    fn push(&mut self, rel: &[u8], kind: EntryKind, size: u64, mtime_ns: i64) -> bool {
        let visible = if kind == EntryKind::Dir { self.scope.dir_visible(rel) } else { self.scope.can_read(rel) };
        if !visible {
            return true;
        }
        if self.entries.len() >= self.limit {
            self.truncated = true;
            return false;
        }
        let (path, path_base64) = path::for_json(rel);
        let (name, name_base64) = path::for_json(crate::fs::workdir::split(rel).1);
        let modified_at = iso_time(mtime_ns);
        self.entries.push(DirEntry { path, path_base64, name, name_base64, kind, size, modified_at });
        true
    }

    /// How deep `rel` is below the listed directory (its children are 1).
    fn depth_of(&self, rel: &[u8]) -> usize {
        rel[self.dir.len()..].iter().filter(|&&b| b == b'/').count() + usize::from(self.dir.is_empty())
    }
}

/// What `read_file` of `bytes` would report as the content's sha256: the whole file's.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
