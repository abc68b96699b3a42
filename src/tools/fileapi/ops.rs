//! The sandbox file API's operations: each a request type (the seed's fields, snake_case), a
//! result type, and a function carrying it out through the agent tools.

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{Sandbox, Style};
use crate::base::count;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::ops::search::{Matcher, SearchMode, SearchSpec};
use crate::tools::edit::Edit;
use crate::tools::read::{ListDirectory, ReadFile, Search};
use crate::tools::{mutate, run, ToolCall, ToolOutput};

/// The largest text `read` answers whole; a bigger file is read by line range.
pub const READ_MAX_BYTES: usize = 16 << 20;

/// `POST /v1/file/read`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The file: workspace-relative, or absolute under the sandbox root.
    pub file: String,
    /// The file's exact workspace-relative path bytes in standard base64, for a name that is
    /// not UTF-8 (answers show such names in `path_base64`); given, it is the file, not `file`.
    #[serde(default)]
    pub file_base64: Option<String>,
    /// The first line, 0-based.
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub start_line: Option<usize>,
    /// The line after the last, 0-based (exclusive).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub end_line: Option<usize>,
    /// Refused when true: the API acts as the session only.
    #[serde(default)]
    pub sudo: Option<bool>,
}

/// What `read` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReadData {
    /// The lines read, each with its line ending.
    pub content: String,
    /// How many lines `content` holds.
    pub line_count: usize,
    /// The file, as the request named it.
    pub file: String,
    /// The whole file's sha256 (the stale-file protocol's `expected_sha256`).
    pub sha256: String,
    /// The file's number of lines.
    pub total_lines: usize,
}

/// `POST /v1/file/write`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The file: workspace-relative, or absolute under the sandbox root.
    pub file: String,
    /// The file's exact workspace-relative path bytes in standard base64, for a name that is
    /// not UTF-8 (answers show such names in `path_base64`); given, it is the file, not `file`.
    #[serde(default)]
    pub file_base64: Option<String>,
    /// What to write, encoded as `encoding` says.
    pub content: String,
    /// `utf-8` (default), `base64`, or `raw` (each character one byte, U+0000 to U+00FF);
    /// any case, and `utf8`, `latin-1`, `latin1` too.
    #[serde(default, deserialize_with = "de_encoding")]
    #[schemars(schema_with = "encoding_schema")]
    pub encoding: Option<String>,
    /// Add to the end of the file instead of replacing it.
    #[serde(default)]
    pub append: bool,
    /// Put a newline before the content.
    #[serde(default)]
    pub leading_newline: bool,
    /// Put a newline after the content.
    #[serde(default)]
    pub trailing_newline: bool,
    /// Refused when true.
    #[serde(default)]
    pub sudo: Option<bool>,
    /// The file's sha256 as last read: the write is refused if it changed since (required by
    /// sessions created with `require_sha256`; `""`: the file must not exist).
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

/// What `write` and `upload` answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WriteData {
    /// The file, as the request named it.
    pub file: String,
    /// Bytes written (with `append`, the bytes added).
    pub bytes_written: u64,
    /// The file's size now.
    pub size: u64,
    /// Its sha256 now.
    pub sha256: Option<String>,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `POST /v1/file/replace`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceRequest {
    /// The file: workspace-relative, or absolute under the sandbox root.
    pub file: String,
    /// The file's exact workspace-relative path bytes in standard base64, for a name that is
    /// not UTF-8 (answers show such names in `path_base64`); given, it is the file, not `file`.
    #[serde(default)]
    pub file_base64: Option<String>,
    /// The text to replace, every occurrence.
    pub old_str: String,
    /// What replaces it.
    pub new_str: String,
    /// Refused when true.
    #[serde(default)]
    pub sudo: Option<bool>,
    /// The file's sha256 as last read (required by sessions created with `require_sha256`).
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

/// What `replace` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReplaceData {
    /// The file, as the request named it.
    pub file: String,
    /// Occurrences replaced.
    pub replaced_count: usize,
    /// Its sha256 now.
    pub sha256: Option<String>,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `POST /v1/file/search`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// The file: workspace-relative, or absolute under the sandbox root.
    pub file: String,
    /// The file's exact workspace-relative path bytes in standard base64, for a name that is
    /// not UTF-8 (answers show such names in `path_base64`); given, it is the file, not `file`.
    #[serde(default)]
    pub file_base64: Option<String>,
    /// A regular expression, matched line by line.
    pub regex: String,
    /// Refused when true.
    #[serde(default)]
    pub sudo: Option<bool>,
}

/// One matching line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LineHit {
    /// The file, as the request named its base.
    pub file: String,
    /// The exact workspace-relative path bytes in base64, when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_base64: Option<String>,
    /// The line number, 1-based.
    pub line_number: usize,
    /// The line (500 characters at most).
    pub line: String,
}

/// What `search` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchData {
    /// The file searched.
    pub file: String,
    /// The matching lines, in order.
    pub matches: Vec<LineHit>,
    /// How many.
    pub match_count: usize,
}

/// `POST /v1/file/find`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindRequest {
    /// The directory to look in (and below).
    pub path: String,
    /// A file name pattern (`*.py`); a pattern with `/` matches paths below `path`.
    pub glob: String,
}

/// What `find` and `glob` answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FilesData {
    /// The directory looked in, as the request named it.
    pub path: String,
    /// The matching files, named as `path` was (absolute or relative).
    pub files: Vec<String>,
    /// With `include_metadata`: each file's size and modification time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<FileMeta>>,
    /// How many files matched (at most `max_results` listed).
    pub total: usize,
    /// Whether `max_results` cut the list short.
    pub truncated: bool,
}

/// A file with its metadata.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FileMeta {
    /// The file, named as the request's `path` was.
    pub path: String,
    /// The exact workspace-relative path bytes in base64, when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 UTC.
    pub modified_at: String,
}

/// `POST /v1/file/grep`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepRequest {
    /// The directory to search (and below).
    pub path: String,
    /// A regular expression, matched line by line.
    pub pattern: String,
    /// Only files matching one of these (`*.py`: by name at any depth).
    #[serde(default)]
    pub include: Vec<String>,
    /// Never files or directories matching one of these (`node_modules`: by name at any depth).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Match regardless of case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// The most matching lines returned (default 200, at most 10,000).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_results: Option<usize>,
}

/// What `grep` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GrepData {
    /// The directory searched, as the request named it.
    pub path: String,
    /// The matching lines, by file in path order.
    pub matches: Vec<LineHit>,
    /// How many are listed.
    pub total: usize,
    /// Whether `max_results` cut the list short.
    pub truncated: bool,
    /// Files read.
    pub files_searched: usize,
}

/// `POST /v1/file/glob`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobRequest {
    /// The directory to match below.
    pub path: String,
    /// A glob over paths below `path` (`**/*.json`).
    pub pattern: String,
    /// Paths matching one of these are left out (`node_modules/**`).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Include names starting with `.` (and what lies below them).
    #[serde(default)]
    pub include_hidden: bool,
    /// Files only (the default); `false` lists the directories that match as well.
    #[serde(default)]
    pub files_only: Option<bool>,
    /// Each file's size and modification time in `entries`.
    #[serde(default)]
    pub include_metadata: bool,
    /// The most files returned (default 1,000, at most 100,000).
    #[serde(default, deserialize_with = "count::de")]
    #[schemars(with = "Option<count::Count>")]
    pub max_results: Option<usize>,
    /// `path` (default), `name`, `size` (largest first) or `mtime` (newest first).
    #[serde(default)]
    pub sort_by: Option<SortBy>,
}

/// How `glob` orders its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortBy {
    /// By path.
    Path,
    /// By file name, then path.
    Name,
    /// Largest first.
    Size,
    /// Newest first.
    Mtime,
}

/// `POST /v1/file/list`
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// The directory.
    pub path: String,
    /// Everything below, not only its own entries.
    #[serde(default)]
    pub recursive: bool,
    /// Names starting with `.` too.
    #[serde(default)]
    pub show_hidden: bool,
    /// Each entry's size.
    #[serde(default)]
    pub include_size: bool,
}

/// One entry of `list`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListEntry {
    /// Its name.
    pub name: String,
    /// Its path, named as the request's `path` was.
    pub path: String,
    /// The exact workspace-relative path bytes in base64, when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Whether it is a symlink.
    pub is_symlink: bool,
    /// Size in bytes, with `include_size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Modification time, RFC 3339 UTC.
    pub modified_at: String,
}

/// What `list` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListData {
    /// The directory, as the request named it.
    pub path: String,
    /// Its entries (and with `recursive`, everything below), in path order.
    pub entries: Vec<ListEntry>,
    /// How many.
    pub total: usize,
    /// Whether the listing stopped at 10,000 entries.
    pub truncated: bool,
}

/// Cut at this many entries, so an answer stays a reasonable size.
const LIST_MAX: usize = 10_000;

fn hidden(rel: &str) -> bool {
    rel.split('/').any(|c| c.starts_with('.'))
}

/// A name pattern without `/` matches at any depth, as find's and grep's users expect.
fn anywhere(p: &str) -> Vec<String> {
    if p.contains('/') {
        vec![p.to_string()]
    } else {
        vec![p.to_string(), format!("**/{p}"), format!("{p}/**"), format!("**/{p}/**")]
    }
}

impl Sandbox<'_> {
    fn tool(&self, call: ToolCall) -> Result<ToolOutput> {
        run(self.repo, self.session, call, self.actor)
    }

    /// `read`: lines `start_line..end_line` (0-based, end exclusive), whole lines with their
    /// endings; a range past the end reads nothing; a file over 16 MiB of text is read by range.
    pub fn read(&self, r: &ReadRequest) -> Result<ReadData> {
        self.no_sudo(r.sudo, &r.file)?;
        let (rel, style) = self.rel_exact(&r.file, r.file_base64.as_deref())?;
        let start = r.start_line.unwrap_or(0);
        if let Some(end) = r.end_line {
            if end < start {
                return Err(Error::invalid_argument(format!("end_line {end} is before start_line {start}")));
            }
        }
        let empty = |sha256: String, total_lines: usize| ReadData {
            content: String::new(),
            line_count: 0,
            file: self.show(&rel, style),
            sha256,
            total_lines,
        };
        let read = |first: usize, last: Option<usize>, lines: usize| -> Result<crate::tools::output::ReadFileResult> {
            // The tool's advice (an `encoding` this route does not take) is not this route's.
            let binary = |e: Error| match e.kind() {
                ErrorKind::NotText => Error::new(
                    ErrorKind::NotText,
                    format!(
                        "'{}' is not UTF-8 text: download its bytes with GET /v1/file/download?path=...",
                        r.file.escape_debug()
                    ),
                )
                .with_detail("path", r.file.as_str()),
                _ => e,
            };
            match self.tool(ToolCall::ReadFile(read_call(&rel, first, last, lines))).map_err(binary)? {
                ToolOutput::ReadFile(f) => Ok(f),
                _ => Err(Error::internal("read_file answered another shape")),
            }
        };
        let past_end = |e: &Error| e.kind() == ErrorKind::InvalidArgument && e.message().contains("past the end");
        if r.end_line == Some(start) {
            let f = read(1, Some(1), 1)?;
            return Ok(empty(f.sha256, f.total_lines.unwrap_or(0)));
        }
        let last = r.end_line;
        let lines = last.map_or(usize::MAX / 2, |e| e - start);
        let f = match read(start.saturating_add(1), last, lines) {
            Err(e) if past_end(&e) => {
                let f = read(1, Some(1), 1)?;
                return Ok(empty(f.sha256, f.total_lines.unwrap_or(0)));
            }
            other => other?,
        };
        if f.next_start_line.is_some() {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("'{}' holds over 16 MiB of text in that range: read it by smaller line ranges", r.file),
            ));
        }
        let line_count = f.content.split_inclusive('\n').count();
        Ok(ReadData {
            content: f.content,
            line_count,
            file: self.show(&rel, style),
            sha256: f.sha256,
            total_lines: f.total_lines.unwrap_or(line_count),
        })
    }

    /// `write`: the content decoded, framed by newlines if asked, appended or replacing.
    pub fn write(&self, r: &WriteRequest) -> Result<WriteData> {
        self.no_sudo(r.sudo, &r.file)?;
        let (rel, style) = self.rel_exact(&r.file, r.file_base64.as_deref())?;
        let mut bytes = decode(&r.content, r.encoding.as_deref())?;
        if r.leading_newline {
            bytes.insert(0, b'\n');
        }
        if r.trailing_newline {
            bytes.push(b'\n');
        }
        let added = bytes.len() as u64;
        let shown = path::display(&rel).into_owned();
        let wd = crate::fs::workdir::WorkDir::open(&self.session.live_dir)?;
        let cur = wd.current(&rel)?;
        let expected = self.expected(&rel, cur.is_some(), r.expected_sha256.as_deref())?;
        if r.append {
            if let Some(c) = &cur {
                let held = self.repo.hold(c.size.saturating_add(added))?;
                let (now, mut old) = wd
                    .read_whole(&rel, crate::tools::read::READ_LIMIT)?
                    .ok_or_else(|| Error::not_found(format!("'{shown}' vanished while it was appended to")))?;
                // Appending to what was read: a write meanwhile makes this a stale write.
                let expected = expected.or_else(|| Some(hex::encode(now.sha256)));
                old.extend_from_slice(&bytes);
                let out = self.write_bytes(&rel, old, expected, false)?;
                drop(held);
                return Ok(WriteData { file: self.show(&rel, style), bytes_written: added, ..out });
            }
        }
        let blind = expected.is_none() && cur.is_some();
        let out = self.write_bytes(&rel, bytes, expected, blind)?;
        Ok(WriteData { file: self.show(&rel, style), bytes_written: added, ..out })
    }

    /// The sha256 a write over `rel` must match: the one given, else none (a blind write the
    /// seed allows), unless the session requires it for a file that exists.
    pub(crate) fn expected(&self, rel: &[u8], exists: bool, given: Option<&str>) -> Result<Option<String>> {
        match given {
            Some(e) => Ok(Some(e.to_string())),
            None if exists && self.session.options.require_sha256 => Err(Error::new(
                ErrorKind::StaleFile,
                format!(
                    "'{}' exists and this session requires its sha256 to overwrite it: read it, then pass \
                     expected_sha256",
                    path::display(rel)
                ),
            )),
            None => Ok(None),
        }
    }

    fn write_bytes(&self, rel: &[u8], bytes: Vec<u8>, expected: Option<String>, blind: bool) -> Result<WriteData> {
        let size = bytes.len() as u64;
        let content = base64::engine::general_purpose::STANDARD.encode(&bytes);
        drop(bytes);
        let (path, path_base64) = tool_path(rel);
        let call = ToolCall::WriteFile(mutate::WriteFile {
            path,
            path_base64,
            content,
            encoding: Some("base64".into()),
            // A new file (no expectation, not blind): nothing may be there.
            expected_sha256: if blind { None } else { Some(expected.unwrap_or_default()) },
            blind,
        });
        let ToolOutput::Write(w) = self.tool(call)? else {
            return Err(Error::internal("write_file answered another shape"));
        };
        Ok(WriteData { file: w.path, bytes_written: size, size, sha256: w.sha256, audit_seq: w.audit_seq })
    }

    /// `replace`: every occurrence of `old_str`.
    pub fn replace(&self, r: &ReplaceRequest) -> Result<ReplaceData> {
        self.no_sudo(r.sudo, &r.file)?;
        let (rel, style) = self.rel_exact(&r.file, r.file_base64.as_deref())?;
        if r.old_str.is_empty() {
            return Err(Error::invalid_argument("old_str is empty: give the text to replace"));
        }
        let edit = Edit { old_text: r.old_str.clone(), new_text: r.new_str.clone(), replace_all: true };
        self.edit(&rel, style, edit, r.expected_sha256.as_deref())
    }

    /// One edit of the file at `rel`, without its sha256 unless `given` (the seed allows it;
    /// the pre-image is kept), unless the session requires it.
    pub fn edit(&self, rel: &[u8], style: Style, edit: Edit, given: Option<&str>) -> Result<ReplaceData> {
        let expected = self.expected(rel, true, given)?;
        let (path, path_base64) = tool_path(rel);
        let call = ToolCall::EditFile(mutate::EditFile {
            path,
            path_base64,
            blind: expected.is_none(),
            expected_sha256: expected,
            edits: vec![edit],
        });
        let ToolOutput::Edit(e) = self.tool(call)? else {
            return Err(Error::internal("edit_file answered another shape"));
        };
        Ok(ReplaceData {
            file: self.show(rel, style),
            replaced_count: e.replacements,
            sha256: e.sha256,
            audit_seq: e.audit_seq,
        })
    }

    /// `search`: one file's lines matching a regex.
    pub fn search(&self, r: &SearchRequest) -> Result<SearchData> {
        self.no_sudo(r.sudo, &r.file)?;
        let (rel, style) = self.rel_exact(&r.file, r.file_base64.as_deref())?;
        let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&[][..], &rel[..]),
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let spec = Search {
            pattern: r.regex.clone(),
            mode: SearchMode::Regex,
            path: path::display(dir).into_owned(),
            include: vec![crate::base::pattern::glob_escape(&name)],
            exclude: Vec::new(),
            case_insensitive: false,
            context: None,
            max_results: Some(10_000),
            source: None,
        };
        // Scope first: whether an out-of-scope file exists is not the session's to learn.
        self.session.scope()?.check_read(&rel)?;
        // The file must be there (a search that finds no file is not "no matches").
        let wd = crate::fs::workdir::WorkDir::open(&self.session.live_dir)?;
        if wd.stat(&rel)?.is_none() {
            return Err(Error::not_found(format!("'{}' not found", r.file)).with_detail("path", r.file.as_str()));
        }
        let hits = self.lines(spec, style, &rel)?;
        let matches: Vec<LineHit> = hits.0.into_iter().filter(|h| h.file == self.show(&rel, style)).collect();
        Ok(SearchData { file: self.show(&rel, style), match_count: matches.len(), matches })
    }

    /// The matching lines of a search, named as `style` says; (lines, truncated, files read).
    fn lines(&self, spec: Search, style: Style, _base: &[u8]) -> Result<(Vec<LineHit>, bool, usize)> {
        spec.check_patterns()?;
        let out = self.tool(ToolCall::Search(spec))?;
        let ToolOutput::Search(s) = out else { return Err(Error::internal("search_files answered another shape")) };
        let hits = s
            .matches
            .into_iter()
            .map(|m| {
                let rel =
                    path::exact_or_text(&m.path, m.path_base64.as_deref()).map(|p| p.into_owned()).unwrap_or_default();
                LineHit { file: self.show(&rel, style), file_base64: m.path_base64, line_number: m.line, line: m.text }
            })
            .collect();
        Ok((hits, s.truncated, s.files_searched))
    }

    /// Refuses a place to look in that is not there (`not_found`): a search that finds no
    /// directory is not "no matches". Only where the session may see: whether something out
    /// of its sight exists is not the session's to learn (a search there finds nothing). Only
    /// in a live tree: a session no longer served is searched in its latest snapshot, whatever
    /// is (or is no longer) on disk.
    fn must_exist(&self, rel: &[u8], given: &str) -> Result<()> {
        let Some(live) = self.session.serving_dir() else { return Ok(()) };
        if rel.is_empty() || !self.session.scope()?.dir_visible(rel) {
            return Ok(());
        }
        let wd = crate::fs::workdir::WorkDir::open(live)?;
        match wd.stat(rel)? {
            Some(_) => Ok(()),
            None => Err(Error::not_found(format!("'{given}' not found: give a directory that exists"))
                .with_detail("path", given)),
        }
    }

    /// `grep`: lines matching a regex in the files below `path`.
    pub fn grep(&self, r: &GrepRequest) -> Result<GrepData> {
        let (rel, style) = self.rel(&r.path)?;
        self.must_exist(&rel, &r.path)?;
        let max = r.max_results.unwrap_or(200);
        if !(1..=10_000).contains(&max) {
            return Err(Error::invalid_argument(format!("max_results {max} is not from 1 to 10000")));
        }
        let spec = Search {
            pattern: r.pattern.clone(),
            mode: SearchMode::Regex,
            path: path::display(&rel).into_owned(),
            include: r.include.iter().flat_map(|p| anywhere(p)).collect(),
            exclude: r.exclude.iter().flat_map(|p| anywhere(p)).collect(),
            case_insensitive: r.case_insensitive,
            context: None,
            max_results: Some(max),
            source: None,
        };
        let (matches, truncated, files_searched) = self.lines(spec, style, &rel)?;
        Ok(GrepData { path: self.show(&rel, style), total: matches.len(), matches, truncated, files_searched })
    }

    /// The files below `rel` matching glob `pattern` (over paths below `rel`).
    fn glob_files(
        &self,
        rel: &[u8],
        pattern: String,
        exclude: Vec<String>,
        max: usize,
    ) -> Result<(Vec<crate::ops::source::ListedFile<'static>>, bool)> {
        let spec = Search {
            pattern,
            mode: SearchMode::Glob,
            path: path::display(rel).into_owned(),
            include: Vec::new(),
            exclude,
            case_insensitive: false,
            context: None,
            max_results: Some(max),
            source: None,
        };
        spec.check_patterns()?;
        let ToolOutput::Glob(g) = self.tool(ToolCall::Glob(spec))? else {
            return Err(Error::internal("glob answered another shape"));
        };
        Ok((g.files, g.truncated))
    }

    /// The directories below `rel` whose path below it matches glob `pattern` and none of
    /// `exclude` (`glob` with `files_only: false`); and whether the listing was cut short.
    fn glob_dirs(
        &self,
        rel: &[u8],
        pattern: &str,
        exclude: &[String],
    ) -> Result<(Vec<crate::ops::source::ListedFile<'static>>, bool)> {
        let dir = path::display(rel).into_owned();
        let m = Matcher::new(&SearchSpec {
            pattern: pattern.to_string(),
            mode: SearchMode::Glob,
            path: dir.clone(),
            exclude: exclude.to_vec(),
            ..SearchSpec::default()
        })?;
        let call = ToolCall::ListDirectory(ListDirectory {
            path: dir,
            recursive: true,
            max_depth: None,
            limit: Some(LIST_MAX),
            source: None,
        });
        let ToolOutput::ListDirectory(l) = self.tool(call)? else {
            return Err(Error::internal("list_directory answered another shape"));
        };
        let mut dirs = Vec::new();
        for e in l.entries {
            if e.kind != crate::model::tree::EntryKind::Dir {
                continue;
            }
            let full = path::exact_or_text(&e.path, e.path_base64.as_deref())?.into_owned();
            if m.selects(&full).is_some_and(|rel_in| m.path_matches(&rel_in) == Some(true)) {
                dirs.push(crate::ops::source::ListedFile {
                    path: e.path.into(),
                    path_base64: e.path_base64,
                    size: e.size,
                    modified_at: e.modified_at,
                });
            }
        }
        Ok((dirs, l.truncated))
    }

    /// `find`: files by name pattern below `path`.
    pub fn find(&self, r: &FindRequest) -> Result<FilesData> {
        let (rel, style) = self.rel(&r.path)?;
        self.must_exist(&rel, &r.path)?;
        let pattern = if r.glob.contains('/') { r.glob.clone() } else { format!("**/{}", r.glob) };
        let (files, truncated) = self.glob_files(&rel, pattern, Vec::new(), 100_000)?;
        let files: Vec<String> = files.iter().map(|f| self.show(&listed_rel(f), style)).collect();
        Ok(FilesData { path: self.show(&rel, style), total: files.len(), files, entries: None, truncated })
    }

    /// `glob`: files by path pattern below `path`, filtered and sorted.
    pub fn glob(&self, r: &GlobRequest) -> Result<FilesData> {
        let (rel, style) = self.rel(&r.path)?;
        self.must_exist(&rel, &r.path)?;
        let max = r.max_results.unwrap_or(1000);
        if !(1..=100_000).contains(&max) {
            return Err(Error::invalid_argument(format!("max_results {max} is not from 1 to 100000")));
        }
        // Hidden files are filtered after the match, so ask for more than will be shown.
        let (mut files, mut truncated) = self.glob_files(&rel, r.pattern.clone(), r.exclude.clone(), 100_000)?;
        let mut dirs = std::collections::HashSet::new();
        if r.files_only == Some(false) {
            let (found, cut) = self.glob_dirs(&rel, &r.pattern, &r.exclude)?;
            truncated |= cut;
            dirs.extend(found.iter().map(|d| d.path.to_string()));
            files.extend(found);
            files.sort_by(|a, b| a.path.cmp(&b.path));
        }
        let base = path::display(&rel).into_owned();
        if !r.include_hidden {
            files.retain(|f| {
                let below = f.path.strip_prefix(base.as_str()).unwrap_or(&f.path).trim_start_matches('/');
                !hidden(below)
            });
        }
        match r.sort_by.unwrap_or(SortBy::Path) {
            SortBy::Path => {}
            SortBy::Name => files.sort_by(|a, b| {
                let name = |p: &str| p.rsplit('/').next().unwrap_or("").to_string();
                name(&a.path).cmp(&name(&b.path)).then(a.path.cmp(&b.path))
            }),
            SortBy::Size => files.sort_by(|a, b| b.size.cmp(&a.size).then(a.path.cmp(&b.path))),
            SortBy::Mtime => files.sort_by(|a, b| b.modified_at.cmp(&a.modified_at).then(a.path.cmp(&b.path))),
        }
        let total = files.len();
        if files.len() > max {
            files.truncate(max);
            truncated = true;
        }
        let entries = r.include_metadata.then(|| {
            files
                .iter()
                .map(|f| FileMeta {
                    path: self.show(&listed_rel(f), style),
                    path_base64: f.path_base64.clone(),
                    is_dir: dirs.contains(f.path.as_ref()),
                    size: f.size,
                    modified_at: f.modified_at.clone(),
                })
                .collect()
        });
        let files: Vec<String> = files.iter().map(|f| self.show(&listed_rel(f), style)).collect();
        Ok(FilesData { path: self.show(&rel, style), files, entries, total, truncated })
    }

    /// `list`: a directory's entries (everything below with `recursive`).
    pub fn list(&self, r: &ListRequest) -> Result<ListData> {
        let (rel, style) = self.rel(&r.path)?;
        let call = ToolCall::ListDirectory(ListDirectory {
            path: path::display(&rel).into_owned(),
            recursive: r.recursive,
            max_depth: None,
            limit: Some(LIST_MAX),
            source: None,
        });
        let ToolOutput::ListDirectory(l) = self.tool(call)? else {
            return Err(Error::internal("list_directory answered another shape"));
        };
        let base = path::display(&rel).into_owned();
        let mut entries = Vec::with_capacity(l.entries.len());
        for e in l.entries {
            let full = path::exact_or_text(&e.path, e.path_base64.as_deref())?.into_owned();
            let below = e.path.strip_prefix(base.as_str()).unwrap_or(&e.path).trim_start_matches('/');
            if !r.show_hidden && hidden(below) {
                continue;
            }
            use crate::model::tree::EntryKind;
            entries.push(ListEntry {
                name: e.name,
                path: self.show(&full, style),
                path_base64: e.path_base64,
                is_dir: e.kind == EntryKind::Dir,
                is_symlink: e.kind == EntryKind::Symlink,
                size: r.include_size.then_some(e.size),
                modified_at: e.modified_at,
            });
        }
        Ok(ListData { path: self.show(&rel, style), total: entries.len(), entries, truncated: l.truncated })
    }
}

/// The exact path bytes of a listed file.
fn listed_rel(f: &crate::ops::source::ListedFile<'_>) -> Vec<u8> {
    path::exact_or_text(&f.path, f.path_base64.as_deref()).map(|p| p.into_owned()).unwrap_or_default()
}

/// `rel` as a tool call names it: its text, and its exact bytes when they are not UTF-8.
pub(crate) fn tool_path(rel: &[u8]) -> (String, Option<String>) {
    path::for_json(rel)
}

fn read_call(rel: &[u8], start: usize, end: Option<usize>, lines: usize) -> ReadFile {
    let (path, path_base64) = tool_path(rel);
    ReadFile {
        path,
        path_base64,
        start_line: Some(start),
        end_line: end,
        max_bytes: Some(READ_MAX_BYTES),
        max_lines: Some(lines.max(1)),
        max_line_length: Some(usize::MAX / 2),
        encoding: None,
        offset: None,
        source: None,
    }
}

/// An encoding [`decode`] takes, refused when the request is read (a 400, as its schema says).
fn de_encoding<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let given = Option::<String>::deserialize(d)?;
    match given.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("utf-8" | "utf8" | "base64" | "raw" | "latin-1" | "latin1") => Ok(given),
        Some(_) => Err(serde::de::Error::custom(format!(
            "encoding '{}' is not one of: utf-8, base64, raw",
            given.as_deref().unwrap_or_default()
        ))),
    }
}

/// The encodings [`decode`] takes, in any case.
fn encoding_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "null"],
        "pattern": "^([Uu][Tt][Ff]-?8|[Bb][Aa][Ss][Ee]64|[Rr][Aa][Ww]|[Ll][Aa][Tt][Ii][Nn]-?1)$"
    })
}

/// `content` as bytes: `utf-8`, `base64`, or `raw` (each character one byte).
pub fn decode(content: &str, encoding: Option<&str>) -> Result<Vec<u8>> {
    match encoding.map(str::to_ascii_lowercase).as_deref() {
        None | Some("utf-8") | Some("utf8") => Ok(content.as_bytes().to_vec()),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|e| Error::new(ErrorKind::NotText, format!("content is not valid base64: {e}"))),
        Some("raw") | Some("latin-1") | Some("latin1") => content
            .chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| c))
            .collect::<std::result::Result<Vec<u8>, char>>()
            .map_err(|c| {
                Error::new(ErrorKind::NotText, format!("raw content holds {c:?}, past U+00FF: use base64 for bytes"))
            }),
        Some(other) => Err(Error::invalid_argument(format!("encoding '{other}' is not one of: utf-8, base64, raw"))),
    }
}

/// A matcher's check that a regex compiles, for `search` and `grep` errors before any walk.
pub fn check_regex(pattern: &str) -> Result<()> {
    Matcher::new(&SearchSpec { pattern: pattern.to_string(), mode: SearchMode::Regex, ..SearchSpec::default() })
        .map(|_| ())
}

impl Sandbox<'_> {
    /// `upload`: a content already stored (as it arrived) written at `given`, over whatever is
    /// there unless the session requires the sha256; the pre-image kept, the change journaled
    /// and audited as the tools' are.
    pub fn write_stored(
        &self,
        given: &str,
        stored: (crate::ops::journal::NewContent, u64),
        expected_sha256: Option<&str>,
    ) -> Result<WriteData> {
        let size = stored.1;
        let (rel, style) = self.rel(given)?;
        let caller = crate::tools::caller::Caller {
            repo: self.repo,
            session: self.session,
            scope: self.session.scope()?,
            actor: self.actor,
        };
        let shown = path::display(&rel).into_owned();
        let result = caller.author().writable(&shown).and_then(|rel| {
            let wd = crate::fs::workdir::WorkDir::open(&self.session.live_dir)?;
            let exists = wd.stat(&rel)?.is_some();
            let expected = self.expected(&rel, exists, expected_sha256)?;
            let l = self.repo.lock_writable(self.session)?;
            mutate::write_stored(&caller, &l, &rel, stored, expected.as_deref(), expected.is_none())
        });
        match result {
            Ok(w) => Ok(WriteData {
                file: self.show(&rel, style),
                bytes_written: size,
                size,
                sha256: w.sha256,
                audit_seq: w.audit_seq,
            }),
            Err(e) => {
                self.audit_refused_upload(&shown, &e)?;
                Err(e)
            }
        }
    }

    /// `upload` refused before its content was received (the session is not live): `e`, or
    /// the path's own problem if it has one, audited as a refused upload.
    pub fn refuse_upload(&self, given: &str, e: Error) -> Result<WriteData> {
        let (rel, _) = self.rel(given)?;
        let caller = crate::tools::caller::Caller {
            repo: self.repo,
            session: self.session,
            scope: self.session.scope()?,
            actor: self.actor,
        };
        let shown = path::display(&rel).into_owned();
        let e = caller.author().writable(&shown).err().unwrap_or(e);
        self.audit_refused_upload(&shown, &e)?;
        Err(e)
    }

    /// Records that the upload to `shown` was refused with `e`.
    fn audit_refused_upload(&self, shown: &str, e: &Error) -> Result<()> {
        self.repo.audit_refusal(
            &self.session.workspace,
            Some(&self.session.id),
            self.actor,
            "upload",
            Some(shown),
            e,
        )?;
        Ok(())
    }
}
