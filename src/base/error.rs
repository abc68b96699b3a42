//! The one error taxonomy of trove: every failure is an [`Error`] with an [`ErrorKind`].
//!
//! Policy: the message names the verb and the path or id, and says what to do when there is
//! something to do; the kind alone decides the CLI exit code (`main.rs`) and, later, the HTTP
//! status (the server's error mapping). Sources are kept for logs, never parsed.

use std::fmt;
use std::path::Path;

/// What went wrong, coarsely: enough for a caller to decide what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A path that is malformed or reaches outside its root (`..`, NUL, a backslash...).
    InvalidPath,
    /// A parameter, id, pattern or body that is malformed or out of range.
    InvalidArgument,
    /// A path or tree deeper than trove walks (`path::MAX_DEPTH` components).
    TooDeep,
    /// A file name over 255 bytes, or a path over the length the filesystem takes.
    NameTooLong,
    /// More than a limit allows (a read, a body, a patch, a directory to delete).
    TooLarge,
    /// A file was expected and a directory is there.
    IsDirectory,
    /// The content is not UTF-8 text and was asked for as text.
    NotText,
    /// No valid token was presented.
    Unauthorized,
    /// Outside the session's scope, or refused by the file system.
    PermissionDenied,
    /// No such file, session, snapshot, trash item or token.
    NotFound,
    /// Something is already at a path that must be free.
    AlreadyExists,
    /// The state changed under the operation (a session ended meanwhile, a file changed while read).
    Conflict,
    /// The target cannot be written now (a paused or ended session).
    ReadOnly,
    /// The file is not what the caller last read: its sha256 differs (the stale-file protocol).
    StaleFile,
    /// A patch's context was not found in the file.
    PatchFailed,
    /// The request's deadline passed; the work was stopped before it changed anything
    /// (`details.changed` says so).
    Timeout,
    /// A limit the server keeps for everyone's sake was reached (connections, requests of one
    /// session, MCP sessions, watchers): nothing was done; retry shortly.
    Busy,
    /// Stored data fails its checks: a hash, a length, a row that does not decode.
    Corrupt,
    /// The operating system refused or failed an I/O operation.
    Io,
    /// A bug or a failure trove cannot attribute to the caller.
    Internal,
}

impl ErrorKind {
    /// The snake_case name used in JSON bodies and audit outcomes.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidPath => "invalid_path",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::NameTooLong => "name_too_long",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::IsDirectory => "is_directory",
            ErrorKind::NotText => "not_text",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::Conflict => "conflict",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::StaleFile => "stale_file",
            ErrorKind::PatchFailed => "patch_failed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Busy => "busy",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Io => "io",
            ErrorKind::Internal => "internal",
        }
    }
}

impl ErrorKind {
    /// Every kind, in the order they are declared.
    pub const ALL: [ErrorKind; 20] = [
        ErrorKind::InvalidPath,
        ErrorKind::InvalidArgument,
        ErrorKind::TooDeep,
        ErrorKind::NameTooLong,
        ErrorKind::TooLarge,
        ErrorKind::IsDirectory,
        ErrorKind::NotText,
        ErrorKind::Unauthorized,
        ErrorKind::PermissionDenied,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Conflict,
        ErrorKind::ReadOnly,
        ErrorKind::StaleFile,
        ErrorKind::PatchFailed,
        ErrorKind::Timeout,
        ErrorKind::Busy,
        ErrorKind::Corrupt,
        ErrorKind::Io,
        ErrorKind::Internal,
    ];
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl schemars::JsonSchema for ErrorKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A trove error: a kind, a one-sentence message for people, and the underlying cause.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// Structured facts a caller can act on (`currentSha256`, `suggestedAction`, candidate
    /// lines...): a JSON object merged into tool error results, absent for most errors.
    details: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

/// The result of every fallible trove operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with a message for people and no source.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into(), source: None, details: None }
    }

    /// An error of `kind` that keeps `source`, its cause, for logs.
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error { kind, message: message.into(), source: Some(Box::new(source)), details: None }
    }

    /// An I/O failure while doing `verb` on `path`; a missing file becomes `not_found`.
    pub fn io(verb: &str, path: &Path, source: std::io::Error) -> Error {
        let kind = match source.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
            _ if source.raw_os_error() == Some(libc::ENAMETOOLONG) => ErrorKind::NameTooLong,
            _ => ErrorKind::Io,
        };
        let message = format!("cannot {verb} {}: {source}", path.display());
        Error::with_source(kind, message, source)
    }

    /// A manifest (SQLite) failure while doing `verb`. A value of the wrong type or range in a
    /// row, a malformed page or a file that is no database is damage (`corrupt`), not an I/O
    /// failure: `check` reports it and goes on, and the CLI exits 3.
    pub fn db(verb: &str, source: rusqlite::Error) -> Error {
        let kind = match &source {
            rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..) => ErrorKind::Corrupt,
            e if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ) =>
            {
                ErrorKind::Corrupt
            }
            _ => ErrorKind::Io,
        };
        Error::with_source(kind, format!("manifest error while {verb}: {source}"), source)
    }

    /// The request's deadline passed during `stage`; `changed` says whether anything had been
    /// changed by then (it never has: work stops only before its commit point).
    pub fn timeout(stage: &str, changed: bool) -> Error {
        let what = if changed { "the change was made" } else { "nothing was changed" };
        Error::new(ErrorKind::Timeout, format!("the request ran out of time while {stage}; {what}: try again"))
            .with_detail("changed", changed)
    }

    /// Whether this is the manifest's write lock held by another writer past the busy timeout
    /// (`database is locked`): nothing of the refused transaction happened.
    pub fn is_busy(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = self.source.as_deref().map(|e| e as _);
        while let Some(e) = cause {
            if let Some(db) = e.downcast_ref::<rusqlite::Error>() {
                return db.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy);
            }
            cause = e.source();
        }
        false
    }

    /// Whether the error says the change it reports was made all the same (detail `changed`:
    /// true): a tool's change that reached the tree before its record failed, which must not
    /// be run again.
    pub fn made_the_change(&self) -> bool {
        self.details.as_ref().and_then(|d| d.get("changed")).and_then(serde_json::Value::as_bool) == Some(true)
    }

    /// Whether this is storage refusing to grow: a full disk or an exhausted quota, as the
    /// operating system (`ENOSPC`, `EDQUOT`) or SQLite (`SQLITE_FULL`) reports it.
    pub fn is_storage_full(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = self.source.as_deref().map(|e| e as _);
        while let Some(e) = cause {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                    return true;
                }
            }
            if let Some(db) = e.downcast_ref::<rusqlite::Error>() {
                if db.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
                    return true;
                }
            }
            cause = e.source();
        }
        false
    }

    /// A `corrupt` error.
    pub fn corrupt(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, message)
    }

    /// A `not_found` error.
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }

    /// An `invalid_argument` error.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// An `internal` error.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Internal, message)
    }

    /// What went wrong, coarsely.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message for people, without the source.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Adds one structured fact (see `details`).
    pub fn with_detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> Error {
        self.details.get_or_insert_with(Default::default).insert(key.to_string(), value.into());
        self
    }

    /// Structured facts for a caller to act on (`currentSha256`, `suggestedAction`...), if any.
    pub fn details(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.details.as_deref()
    }

    /// The same error with `context: ` put before its message (the file a patch chunk was for...).
    pub fn context(mut self, context: impl std::fmt::Display) -> Error {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Turns an error that crossed a `Read` boundary back into ours (an OS error stays one, with
/// its message).
pub fn from_io(e: std::io::Error) -> Error {
    if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        return Error::with_source(ErrorKind::Io, format!("read failed: {e}"), e);
    }
    match e.into_inner().map(|inner| inner.downcast::<Error>()) {
        Some(Ok(ours)) => *ours,
        _ => Error::internal("an error changed type while it was unwrapped"),
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    #[test]
    fn all_lists_every_kind_once() {
        // No wildcard: a new kind fails to compile here until it is placed in `ALL`.
        let index = |k: ErrorKind| match k {
            ErrorKind::InvalidPath => 0,
            ErrorKind::InvalidArgument => 1,
            ErrorKind::TooDeep => 2,
            ErrorKind::NameTooLong => 3,
            ErrorKind::TooLarge => 4,
            ErrorKind::IsDirectory => 5,
            ErrorKind::NotText => 6,
            ErrorKind::Unauthorized => 7,
            ErrorKind::PermissionDenied => 8,
            ErrorKind::NotFound => 9,
            ErrorKind::AlreadyExists => 10,
            ErrorKind::Conflict => 11,
            ErrorKind::ReadOnly => 12,
            ErrorKind::StaleFile => 13,
            ErrorKind::PatchFailed => 14,
            ErrorKind::Timeout => 15,
            ErrorKind::Busy => 16,
            ErrorKind::Corrupt => 17,
            ErrorKind::Io => 18,
            ErrorKind::Internal => 19,
        };
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(index(*k), i, "{k}");
        }
    }
}
