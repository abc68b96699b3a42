//! What each agent file tool answers, one type per tool, and the envelope (`{ok, data | error}`)
//! agents receive it in. The same types give the OpenAPI document its response schemas.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{PlanId, TrashId};
pub use crate::model::trash::RestoreResult;
use crate::model::tree::EntryKind;
use crate::ops::source::ListedFile;
pub use crate::ops::source::{Answered, SourceKind};

/// How `content` is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum Encoding {
    /// Text, as is.
    #[serde(rename = "utf-8")]
    Utf8,
    /// Bytes, in standard base64.
    #[serde(rename = "base64")]
    Base64,
}

/// `read_file`: a slice of the file and the sha256 of all of it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadFileResult {
    /// The file's workspace-relative path.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, RFC 3339 UTC.
    pub modified_at: String,
    /// What answered.
    #[serde(flatten)]
    pub answered: Answered,
    /// How `content` is encoded.
    pub encoding: Encoding,
    /// The lines (text) or bytes (base64) read.
    pub content: String,
    /// Whether `content` is less than the whole file.
    pub truncated: bool,
    /// Base64 reads: the offset to read from next, while bytes are left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// Text reads: the file's number of lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// Text reads: the first line shown (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<usize>,
    /// Text reads: the last line shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<usize>,
    /// Text reads: the line to read from next, while lines are left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_start_line: Option<usize>,
    /// Text reads: how many lines were cut at `maxLineLength`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated_lines: Option<usize>,
    /// The sha256 of the whole file, to pass as `expectedSha256`.
    pub sha256: String,
}

/// One entry of a `list_directory` answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    /// The workspace-relative path.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// The last component.
    pub name: String,
    /// The exact name bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_base64: Option<String>,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 UTC.
    pub modified_at: String,
}

/// `list_directory`: the entries below a directory, in path order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListDirectoryResult {
    /// The directory listed ("" for the root).
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// What the scope shows, at most `limit`.
    pub entries: Vec<DirEntry>,
    /// Whether `limit` cut the listing short.
    pub truncated: bool,
    /// What answered.
    #[serde(flatten)]
    pub answered: Answered,
}

/// `glob`: the files whose path matches.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GlobResult {
    /// The files, in path order.
    pub files: Vec<ListedFile<'static>>,
    /// Whether `maxResults` cut the answer short.
    pub truncated: bool,
    /// What answered.
    #[serde(flatten)]
    pub answered: Answered,
}

pub use crate::ops::search::LineMatch;

/// `search_files`: the matching lines.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// The lines, by file in path order.
    pub matches: Vec<LineMatch>,
    /// How many files were read.
    pub files_searched: usize,
    /// Whether `maxResults` cut the answer short.
    pub truncated: bool,
    /// What answered.
    #[serde(flatten)]
    pub answered: Answered,
}

/// What `search_files` answers: the matching lines, or with `"mode": "glob"` the matching files.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SearchAnswer {
    /// A literal or regex search.
    Lines(SearchResult),
    /// A glob.
    Files(GlobResult),
}

/// `create_file` and `write_file`: the file written.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    /// The file's workspace-relative path.
    pub path: String,
    /// Its new sha256.
    pub sha256: Option<String>,
    /// Its new size in bytes.
    pub size: usize,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `edit_file`: the file edited.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditResult {
    /// The file's workspace-relative path.
    pub path: String,
    /// Its new sha256.
    pub sha256: Option<String>,
    /// How many occurrences the edits replaced.
    pub replacements: usize,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `delete_file`: what went into the trash.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteResult {
    /// The workspace-relative path deleted.
    pub path: String,
    /// The trash item that keeps it, for `restore_file`.
    pub trash_id: Option<TrashId>,
    /// What it was.
    pub kind: Option<EntryKind>,
    /// Its size in bytes (a directory's: its files' total).
    pub size: u64,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// `move_file`: where the file or directory went.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveResult {
    /// The old path.
    pub from: String,
    /// The new path.
    pub to: String,
    /// A file's sha256 (unchanged by the move); absent for a directory.
    pub sha256: Option<String>,
    /// The audit record of the change.
    pub audit_seq: Option<i64>,
}

/// What `apply_patch` did to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PatchOp {
    /// Add File.
    Add,
    /// Delete File.
    Delete,
    /// Update File.
    Update,
    /// Update File with Move to.
    Move,
}

/// One file `apply_patch` changed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchedFile {
    /// The path the patch names.
    pub path: String,
    /// What was done to it.
    pub op: PatchOp,
    /// Its new sha256 (at `movedTo` for a move); absent for a delete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A delete: the trash item that keeps the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trash_id: Option<TrashId>,
    /// A move: where the file went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
}

/// `apply_patch`: every file changed, all in one plan.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyPatchResult {
    /// The files, in the patch's order.
    pub files: Vec<PatchedFile>,
    /// The journal plan that made the change.
    pub plan: PlanId,
}

/// Any tool's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolOutput {
    /// `read_file`
    ReadFile(ReadFileResult),
    /// `list_directory`
    ListDirectory(ListDirectoryResult),
    /// `glob`
    Glob(GlobResult),
    /// `search_files`
    Search(SearchResult),
    /// `create_file`, `write_file`
    Write(WriteResult),
    /// `edit_file`
    Edit(EditResult),
    /// `delete_file`
    Delete(DeleteResult),
    /// `move_file`
    Move(MoveResult),
    /// `restore_file`
    Restore(RestoreResult),
    /// `apply_patch`
    ApplyPatch(ApplyPatchResult),
}

impl ToolOutput {
    /// The answer as a JSON value.
    pub fn to_json(&self) -> Value {
        // Serializing these types cannot fail: string keys, no maps of other keys.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The one path a change names (where it now is), if it names one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ToolOutput::ReadFile(r) => Some(&r.path),
            ToolOutput::Write(r) => Some(&r.path),
            ToolOutput::Edit(r) => Some(&r.path),
            ToolOutput::Delete(r) => Some(&r.path),
            ToolOutput::Move(r) => Some(&r.to),
            ToolOutput::Restore(r) => Some(&r.path),
            _ => None,
        }
    }

    /// The sha256 the answer gives the file it read or wrote, if it gives one.
    pub fn sha256(&self) -> Option<&str> {
        match self {
            ToolOutput::ReadFile(r) => Some(&r.sha256),
            ToolOutput::Write(r) => r.sha256.as_deref(),
            ToolOutput::Edit(r) => r.sha256.as_deref(),
            ToolOutput::Move(r) => r.sha256.as_deref(),
            ToolOutput::Restore(r) => r.sha256.as_deref(),
            _ => None,
        }
    }
}

/// The next step an agent should take after an error of `kind`.
pub fn suggested_action(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::StaleFile => "Re-read the file to obtain the current sha256 and re-apply your edit.",
        ErrorKind::AlreadyExists => "Read the existing file and use write_file or edit_file, or choose another path.",
        ErrorKind::NotFound => "Check the path with list_directory or glob.",
        ErrorKind::PatchFailed => "Re-read the file and rebuild the edit or chunk from its current lines.",
        ErrorKind::ReadOnly => "The session is not active: resume it, or start a new session, to change files.",
        ErrorKind::PermissionDenied => "Stay within the session's file_access scope.",
        ErrorKind::NotText => "Pass \"encoding\": \"base64\" to read binary content.",
        ErrorKind::TooLarge => "Read a slice with startLine/endLine or maxBytes.",
        ErrorKind::IsDirectory => "Use list_directory for a directory.",
        ErrorKind::InvalidPath | ErrorKind::InvalidArgument => "Fix the parameters as the message says.",
        ErrorKind::TooDeep | ErrorKind::NameTooLong => "Use a shorter path: the message gives the limit.",
        ErrorKind::Timeout => "Nothing was changed: retry, or split the work into smaller calls.",
        ErrorKind::Busy => "Nothing was done: the server is at a limit; retry in a few seconds.",
        ErrorKind::Conflict => "The file changed while it was read: try again.",
        _ => "Try again later; if it persists, report the message to an operator.",
    }
}

/// A refusal or failure as agents receive it: the kind, the message, the next step, and the
/// error's structured details (`currentSha256`, `closest`...) beside them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// One sentence for people.
    pub message: String,
    /// What to do next.
    pub suggested_action: String,
    /// Set when the server failed: the id its log names the details under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The error's structured details.
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl ToolError {
    /// `e` as agents see it. Details never override the fields above, except that a detail
    /// may give a more precise `suggestedAction`.
    pub fn of(e: &Error) -> ToolError {
        let mut details = e.details().cloned().unwrap_or_default();
        let suggested = details.remove("suggestedAction").and_then(|v| v.as_str().map(str::to_string));
        for own in ["kind", "message", "requestId"] {
            details.remove(own);
        }
        ToolError {
            kind: e.kind(),
            message: e.message().to_string(),
            suggested_action: suggested.unwrap_or_else(|| suggested_action(e.kind()).to_string()),
            request_id: None,
            details,
        }
    }
}

/// A tool's answer as agents receive it: `{"ok": true, "data": ...}` or `{"ok": false, "error": ...}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ToolReply_{T}")]
pub struct ToolReply<T> {
    /// Whether the tool did what was asked.
    pub ok: bool,
    /// The answer, when `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<T>,
    /// Why not, when not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

/// The envelope of `result`.
pub fn envelope<T>(result: Result<T>) -> ToolReply<T> {
    match result {
        Ok(data) => ToolReply { ok: true, data: Some(data), error: None },
        Err(e) => ToolReply { ok: false, data: None, error: Some(ToolError::of(&e)) },
    }
}
