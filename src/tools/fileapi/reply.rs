//! The sandbox file API's answers: `{"success", "message", "data"}`, and for an expected
//! failure the seed's error data (`error_type`, `errno`, `errno_name`, `exception_type`,
//! `retryable`, `operation`), decided from the error's kind in one place.

use serde::Serialize;

use crate::base::error::{Error, ErrorKind};

/// What a failed operation answers in `data`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FileError {
    /// The path the request named.
    pub path: String,
    /// The operation (`read`, `write`, `replace`, ...).
    pub operation: String,
    /// What went wrong, and what to do.
    pub message: String,
    /// `not_found`, `permission_denied`, `invalid_target`, `already_exists`, `invalid_path`,
    /// `read_only_filesystem`, `no_space_left`, `decode_error`, `io_error`, or trove's
    /// `stale_file` and `unauthorized` (no live session token; HTTP 401).
    pub error_type: String,
    /// Whether the same call may succeed later.
    pub retryable: bool,
    /// The POSIX error number.
    pub errno: i32,
    /// Its name (`ENOENT`, ...).
    pub errno_name: String,
    /// The Python exception a sandbox would have raised (`FileNotFoundError`, ...).
    pub exception_type: String,
    /// trove's own error kind.
    pub kind: ErrorKind,
}

/// An answer of the sandbox file API.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "FileReply_{T}")]
pub struct FileReply<T> {
    /// Whether the operation succeeded.
    pub success: bool,
    /// What happened, in words.
    pub message: String,
    /// The operation's result, or a `FileError`.
    pub data: FileData<T>,
}

/// `data`: the result, or what went wrong.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "FileData_{T}")]
pub enum FileData<T> {
    /// The operation's result.
    Ok(T),
    /// Why it failed.
    Err(FileError),
}

/// (error_type, errno, errno_name, exception_type, retryable) of an error kind; an I/O error
/// with an OS error number keeps it.
fn classify(e: &Error) -> (&'static str, i32, &'static str, &'static str, bool) {
    let os = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error);
    match (e.kind(), os) {
        (_, Some(libc::ENOSPC)) => ("no_space_left", libc::ENOSPC, "ENOSPC", "OSError", true),
        (_, Some(libc::EROFS)) => ("read_only_filesystem", libc::EROFS, "EROFS", "OSError", false),
        (ErrorKind::NotFound, _) => ("not_found", libc::ENOENT, "ENOENT", "FileNotFoundError", false),
        (ErrorKind::PermissionDenied, _) => ("permission_denied", libc::EACCES, "EACCES", "PermissionError", false),
        // No (live) session token: nothing on disk was tried, so no I/O error.
        (ErrorKind::Unauthorized, _) => ("unauthorized", libc::EACCES, "EACCES", "PermissionError", false),
        (ErrorKind::AlreadyExists, _) => ("already_exists", libc::EEXIST, "EEXIST", "FileExistsError", false),
        (ErrorKind::IsDirectory, _) => ("invalid_target", libc::EISDIR, "EISDIR", "IsADirectoryError", false),
        (ErrorKind::TooLarge, _) => ("invalid_target", libc::EFBIG, "EFBIG", "OSError", false),
        (ErrorKind::NotText, _) => ("decode_error", libc::EILSEQ, "EILSEQ", "UnicodeDecodeError", false),
        (ErrorKind::ReadOnly, _) => ("read_only_filesystem", libc::EROFS, "EROFS", "OSError", false),
        (ErrorKind::StaleFile, _) => ("stale_file", libc::ESTALE, "ESTALE", "OSError", true),
        (ErrorKind::InvalidPath | ErrorKind::TooDeep | ErrorKind::NameTooLong, _) => {
            ("invalid_path", libc::EINVAL, "EINVAL", "ValueError", false)
        }
        (ErrorKind::InvalidArgument | ErrorKind::PatchFailed, _) => {
            ("invalid_target", libc::EINVAL, "EINVAL", "ValueError", false)
        }
        (ErrorKind::Conflict, _) => ("io_error", libc::EBUSY, "EBUSY", "OSError", true),
        (ErrorKind::Timeout, _) => ("io_error", libc::ETIMEDOUT, "ETIMEDOUT", "TimeoutError", true),
        (ErrorKind::Busy, _) => ("io_error", libc::EAGAIN, "EAGAIN", "BlockingIOError", true),
        _ => ("io_error", libc::EIO, "EIO", "OSError", false),
    }
}

impl<T> FileReply<T> {
    /// A success.
    pub fn ok(message: impl Into<String>, data: T) -> FileReply<T> {
        FileReply { success: true, message: message.into(), data: FileData::Ok(data) }
    }

    /// The failure of `operation` on `path`.
    pub fn err(operation: &str, path: &str, e: &Error) -> FileReply<T> {
        let (error_type, errno, errno_name, exception_type, retryable) = classify(e);
        // The seed's form (Python's OSError text), then what trove knows.
        let strerror = std::io::Error::from_raw_os_error(errno).to_string();
        let strerror = strerror.split(" (os error").next().unwrap_or(&strerror).to_string();
        let message = format!("Failed to {operation} file: [Errno {errno}] {strerror}: '{path}': {}", e.message());
        FileReply {
            success: false,
            message: message.clone(),
            data: FileData::Err(FileError {
                path: path.to_string(),
                operation: operation.to_string(),
                message,
                error_type: error_type.to_string(),
                retryable,
                errno,
                errno_name: errno_name.to_string(),
                exception_type: exception_type.to_string(),
                kind: e.kind(),
            }),
        }
    }

    /// The reply of a result.
    pub fn of(operation: &str, path: &str, ok: &str, r: crate::base::error::Result<T>) -> FileReply<T> {
        match r {
            Ok(data) => FileReply::ok(ok, data),
            Err(e) => FileReply::err(operation, path, &e),
        }
    }
}
