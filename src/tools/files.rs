//! The unified `files` tool (`unified-files-tool.md`): one tool whose `params.command` is `ls`,
//! `read`, `write`, `edit` or `delete`, answering a string (a list for `ls`) by default and a
//! typed result (`FileListResult`, `FileReadResult`, ...) when asked, per call or per session
//! (the seed's `INSPECT_AGENTS_TYPED_RESULTS` toggle). It is carried out by the agent tools
//! through the sandbox file API's context, so paths, scope, journaling, audit and the trash are
//! theirs; a write or edit without a sha256 (the seed has none) keeps the pre-image, and a
//! session created with `require_sha256` refuses it with the stale-file error.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::edit::Edit;
use super::fileapi::ops::{tool_path, WriteRequest};
use super::fileapi::Sandbox;
use super::output::ToolOutput;
use super::read::{ListDirectory, ReadFile};
use super::{mutate, run, ToolCall};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::model::tree::EntryKind;

/// The name the tool is called by.
pub const NAME: &str = "files";
/// Lines a read answers unless `limit` says otherwise.
pub const READ_LINES: usize = 2000;
/// Characters kept of each line read.
pub const LINE_CHARS: usize = 2000;
/// Paths `ls` lists at most.
pub const LS_MAX: usize = 10_000;
/// How long one call may run.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// A call: `{"params": {"command": ...}}`, and whether to answer typed results.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesCall {
    /// The command and its parameters.
    pub params: FilesParams,
    /// Answer a typed result (`true`) or the default string (`false`); unset follows the
    /// session's `typed_results`.
    #[serde(default)]
    pub typed_results: Option<bool>,
}

/// The command, by its `command` field.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "command", rename_all = "lowercase", deny_unknown_fields)]
pub enum FilesParams {
    /// Every file of the workspace the session may read, by path.
    Ls {
        /// Accepted for compatibility: a session has one sandbox.
        instance: Option<String>,
    },
    /// A file's lines, numbered from 1 (`cat -n` style), from `offset` (0-based), at most
    /// `limit` (default 2000), each cut at 2000 characters.
    Read {
        /// The file: workspace-relative, or absolute under the sandbox root.
        file_path: String,
        /// The first line, 0-based.
        #[serde(default, deserialize_with = "crate::base::count::de")]
        #[schemars(range(min = 0))]
        offset: Option<usize>,
        /// The most lines (default 2000).
        #[serde(default, deserialize_with = "crate::base::count::de_positive")]
        #[schemars(range(min = 1))]
        limit: Option<usize>,
        /// Accepted for compatibility.
        instance: Option<String>,
    },
    /// Writes the file whole (made if missing).
    Write {
        /// The file.
        file_path: String,
        /// Its new content.
        content: String,
        /// Accepted for compatibility.
        instance: Option<String>,
    },
    /// Replaces `old_string` with `new_string`: exactly one occurrence, or every one with
    /// `replace_all`.
    Edit {
        /// The file.
        file_path: String,
        /// The text to replace.
        old_string: String,
        /// What replaces it.
        new_string: String,
        /// Replace every occurrence (default: `old_string` must occur once).
        #[serde(default)]
        replace_all: bool,
        /// Accepted for compatibility.
        instance: Option<String>,
    },
    /// Moves the file to the trash, from where it can be restored.
    Delete {
        /// The file.
        file_path: String,
        /// Accepted for compatibility.
        instance: Option<String>,
    },
}

/// `ls`, typed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileListResult {
    /// Every file's workspace-relative path, sorted.
    pub files: Vec<String>,
    /// Present and true when more than 10,000 files were there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// `read`, typed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileReadResult {
    /// The numbered lines (`"     1\tfirst line"`).
    pub lines: Vec<String>,
    /// What was read.
    pub summary: String,
    /// The whole file's sha256, for the stale-file tools (`expectedSha256`).
    pub sha256: String,
}

/// `write`, typed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileWriteResult {
    /// The file.
    pub path: String,
    /// What was done.
    pub summary: String,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `edit`, typed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileEditResult {
    /// The file.
    pub path: String,
    /// Occurrences replaced.
    pub replaced: usize,
    /// What was done.
    pub summary: String,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `delete`, typed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileDeleteResult {
    /// The file.
    pub path: String,
    /// What was done.
    pub summary: String,
    /// The trash item it became (restore it with `restore_file`).
    pub trash_id: Option<String>,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// What a call answers: the seed's default (a string; a list of paths for `ls`) or a typed
/// result.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum FilesResult {
    /// `read`, `write`, `edit`, `delete` by default.
    Text(String),
    /// `ls` by default.
    Paths(Vec<String>),
    /// `ls`, typed.
    List(FileListResult),
    /// `read`, typed.
    Read(FileReadResult),
    /// `write`, typed.
    Write(FileWriteResult),
    /// `edit`, typed.
    Edit(FileEditResult),
    /// `delete`, typed.
    Delete(FileDeleteResult),
}

/// One line as `read` shows it: its number right-aligned in six columns, a tab, and at most
/// 2000 characters of it.
fn numbered(n: usize, line: &str) -> String {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    match line.char_indices().nth(LINE_CHARS) {
        Some((cut, _)) => format!("{n:6}\t{}", &line[..cut]),
        None => format!("{n:6}\t{line}"),
    }
}

/// Runs `call` in `sb`'s session, within 15 s (or the caller's sooner deadline).
pub fn files(sb: &Sandbox<'_>, call: &FilesCall) -> Result<FilesResult> {
    let typed = call.typed_results.unwrap_or(sb.session.options.typed_results);
    let limit = Instant::now() + TIMEOUT;
    let previous = sb.repo.deadline();
    sb.repo.set_deadline(Some(previous.map_or(limit, |d| d.min(limit))));
    let out = carry_out(sb, &call.params, typed);
    sb.repo.set_deadline(previous);
    out
}

fn tool(sb: &Sandbox<'_>, call: ToolCall) -> Result<ToolOutput> {
    run(sb.repo, sb.session, call, sb.actor)
}

fn carry_out(sb: &Sandbox<'_>, params: &FilesParams, typed: bool) -> Result<FilesResult> {
    match params {
        FilesParams::Ls { .. } => {
            let call = ToolCall::ListDirectory(ListDirectory {
                path: String::new(),
                recursive: true,
                max_depth: None,
                limit: Some(LS_MAX),
                source: None,
            });
            let ToolOutput::ListDirectory(l) = tool(sb, call)? else {
                return Err(Error::internal("list_directory answered another shape"));
            };
            let mut files: Vec<String> =
                l.entries.into_iter().filter(|e| e.kind != EntryKind::Dir).map(|e| e.path).collect();
            files.sort();
            Ok(if typed {
                FilesResult::List(FileListResult { files, truncated: l.truncated })
            } else {
                FilesResult::Paths(files)
            })
        }
        FilesParams::Read { file_path, offset, limit, .. } => {
            let (rel, _) = sb.rel(file_path)?;
            let offset = offset.unwrap_or(0);
            let limit = limit.unwrap_or(READ_LINES);
            if limit == 0 {
                return Err(Error::invalid_argument("limit must be at least 1 line"));
            }
            let (path, path_base64) = tool_path(&rel);
            let call = ToolCall::ReadFile(ReadFile {
                path,
                path_base64,
                start_line: Some(offset.saturating_add(1)),
                // Bounded here, not by `max_lines`, which would append a note to continue.
                end_line: Some(offset.saturating_add(limit)),
                max_bytes: None,
                max_lines: Some(limit),
                max_line_length: Some(LINE_CHARS),
                encoding: None,
                offset: None,
                source: None,
            });
            let shown = path::display(&rel).into_owned();
            let f = match tool(sb, call) {
                Ok(ToolOutput::ReadFile(f)) => f,
                Ok(_) => return Err(Error::internal("read_file answered another shape")),
                Err(e) if e.kind() == ErrorKind::InvalidArgument && e.message().contains("past the end") => {
                    return Err(Error::invalid_argument(format!(
                        "line offset {offset} is past the end of '{shown}': read from a smaller offset"
                    ))
                    .with_detail("path", shown.as_str()));
                }
                Err(e) => return Err(e),
            };
            let lines: Vec<String> =
                f.content.split_inclusive('\n').enumerate().map(|(i, l)| numbered(offset + i + 1, l)).collect();
            let summary = match (lines.len(), f.total_lines) {
                (0, _) => format!("'{shown}' exists but is empty"),
                (n, Some(total)) => format!("Read lines {}-{} of {total} from '{shown}'", offset + 1, offset + n),
                (n, None) => format!("Read {n} lines from '{shown}'"),
            };
            Ok(if typed {
                FilesResult::Read(FileReadResult { lines, summary, sha256: f.sha256 })
            } else if lines.is_empty() {
                FilesResult::Text(format!("System reminder: '{shown}' exists but has empty contents"))
            } else {
                FilesResult::Text(lines.join("\n"))
            })
        }
        FilesParams::Write { file_path, content, .. } => {
            let w = sb.write(&WriteRequest {
                file: file_path.clone(),
                file_base64: None,
                content: content.clone(),
                encoding: None,
                append: false,
                leading_newline: false,
                trailing_newline: false,
                sudo: None,
                expected_sha256: None,
            })?;
            let (rel, _) = sb.rel(file_path)?;
            let shown = path::display(&rel).into_owned();
            let summary = format!("Wrote {} bytes to '{shown}'", w.bytes_written);
            Ok(if typed {
                FilesResult::Write(FileWriteResult { path: shown, summary, audit_seq: w.audit_seq })
            } else {
                FilesResult::Text(summary)
            })
        }
        FilesParams::Edit { file_path, old_string, new_string, replace_all, .. } => {
            let (rel, style) = sb.rel(file_path)?;
            if old_string.is_empty() {
                return Err(Error::invalid_argument("old_string is empty: give the text to replace"));
            }
            let edit = Edit { old_text: old_string.clone(), new_text: new_string.clone(), replace_all: *replace_all };
            let e = sb.edit(&rel, style, edit, None)?;
            let shown = path::display(&rel).into_owned();
            let summary = format!("Replaced {} occurrence(s) in '{shown}'", e.replaced_count);
            Ok(if typed {
                FilesResult::Edit(FileEditResult {
                    path: shown,
                    replaced: e.replaced_count,
                    summary,
                    audit_seq: e.audit_seq,
                })
            } else {
                FilesResult::Text(summary)
            })
        }
        FilesParams::Delete { file_path, .. } => {
            let (rel, _) = sb.rel(file_path)?;
            let shown = path::display(&rel).into_owned();
            // The content goes to the trash whatever it is, so nothing is lost without a
            // sha256; a session that requires one refuses, as for any blind change.
            let current = match sb.session.serving_dir() {
                Some(dir) => crate::fs::workdir::WorkDir::open(dir)?.current(&rel)?,
                None => None,
            };
            let expected = sb.expected(&rel, current.is_some(), None)?.or(current.map(|c| hex::encode(c.sha256)));
            let (path, path_base64) = tool_path(&rel);
            let call = ToolCall::DeleteFile(mutate::DeleteFile { path, path_base64, expected_sha256: expected });
            let ToolOutput::Delete(d) = tool(sb, call)? else {
                return Err(Error::internal("delete_file answered another shape"));
            };
            let trash_id = d.trash_id.map(|t| t.to_string());
            let summary = match &trash_id {
                Some(t) => format!("Deleted '{shown}' (trash item {t}: restore it with restore_file)"),
                None => format!("Deleted '{shown}'"),
            };
            Ok(if typed {
                FilesResult::Delete(FileDeleteResult { path: shown, summary, trash_id, audit_seq: d.audit_seq })
            } else {
                FilesResult::Text(summary)
            })
        }
    }
}
