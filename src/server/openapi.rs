//! The OpenAPI 3.1 document served at `/openapi.json`, built from one table of operations
//! whose parameters, bodies and answers are the schemas of the handlers' own types (derived
//! with schemars), so the document cannot drift from the code. A test checks the table against
//! the routes the server registers, both ways.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::error::ErrorBody;
use crate::model::audit::{CheckpointRecord, ConsistencyProof, HistoryEntry, InclusionProof};
use crate::model::diff::{DiffReport, SessionChanges};
use crate::model::history::{FindResult, PathLog};
use crate::model::session::{SessionRecord, SessionSpec};
use crate::model::snapshot::SnapshotRecord;
use crate::model::trash::{BulkRestore, TrashPage};
use crate::ops::search::SnapshotSearch;
use crate::ops::source::FileListing;
use crate::tools::fileapi::ops as fileops;
use crate::tools::fileapi::watch as watchops;
use crate::tools::fileapi::FileReply;
use crate::tools::output as out;

/// What an operation takes as its body.
#[derive(Clone, Copy)]
enum Body {
    /// Nothing.
    None,
    /// JSON of this schema (an empty body stands for `{}`).
    Json(Make),
    /// The bytes of a file.
    Bytes,
    /// The tool's parameters: one documented path per tool.
    Tool,
    /// `multipart/form-data` with a `file` part and a `path` part.
    Multipart,
}

/// What an operation answers when it succeeds.
#[derive(Clone, Copy)]
enum Reply {
    /// JSON of this schema, with this status.
    Json(u16, Make),
    /// 200 or 201 (created) with JSON of this schema.
    Written(Make),
    /// Nothing, with this status.
    Empty(u16),
    /// A file: JSON of this schema, or its bytes with `download`; 304 for a matching ETag.
    File(Make),
    /// A tar archive, plain or in one zstd frame.
    Tar,
    /// Server-Sent Events.
    Events,
    /// A file's bytes; 304 for a matching ETag.
    Stream,
    /// The tool's answer in its envelope: one documented path per tool.
    Tool,
    /// The sandbox file API's wrapper around this schema's data, 200 even for an expected
    /// failure; its error statuses answer in the same wrapper.
    Wrapped(Make),
}

/// One documented operation: method, path (axum syntax), summary, the query struct its handler
/// deserializes, the headers it reads, its body, its answer and the error statuses it can give.
struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: Option<fn() -> Schema>,
    headers: &'static [Header],
    body: Body,
    reply: Reply,
    errors: &'static [u16],
}

/// A request header an operation reads.
struct Header {
    name: &'static str,
    description: &'static str,
    pattern: Option<&'static str>,
}

const IF_MATCH: Header = Header {
    name: "If-Match",
    description:
        "`*` (anything there) or the file's sha256, as its ETag gives it: the change happens only if the file is that",
    pattern: Some(super::tools::IF_MATCH_PATTERN),
};
const IF_NONE_MATCH_CREATE: Header = Header {
    name: "If-None-Match",
    description: "`*`: create only, if nothing is there",
    pattern: Some(super::tools::IF_NONE_MATCH_PATTERN),
};
const LAST_EVENT_ID: Header = Header {
    name: "Last-Event-ID",
    description: "The seq of the last record received: the stream goes on after it",
    pattern: Some("^[0-9]{1,19}$"),
};
const WATCH_EVENT_ID: Header = Header {
    name: "Last-Event-ID",
    description: "The id of the last event received (`{watcher_id}:{seq}`): the stream goes on after it",
    pattern: Some("^w_[0-9a-f]{12}:[0-9]{1,19}$"),
};
const MCP_SESSION: Header = Header {
    name: "Mcp-Session-Id",
    description: "The MCP session, as `initialize` answered it: every request after `initialize` sends it",
    pattern: None,
};
const IF_NONE_MATCH_READ: Header = Header {
    name: "If-None-Match",
    description: "ETags (or `*`): 304 without a body if the file's matches one",
    pattern: None,
};

/// What the document cannot state, by operation: rules between fields, or against state, that
/// the server checks when the request arrives. Each goes into its operation's `description`,
/// so that a client (and a conformance run) knows which refusals valid-looking data can meet.
const RULES: &[(&str, &str, &str)] = &[
    ("PUT", "/v1/sessions/{id}/files/{*path}", PRECONDITION),
    ("DELETE", "/v1/sessions/{id}/files/{*path}", PRECONDITION),
    ("GET", "/v1/file/download", DIRECTORY),
    ("GET", "/v1/sessions/{id}/file/download", DIRECTORY),
    ("POST", "/v1/file/upload", MULTIPART),
    ("POST", "/v1/sessions/{id}/file/upload", MULTIPART),
    ("GET", "/v1/snapshots/{snap}/search", GLOBS),
    ("GET", "/v1/find", FIND),
    ("POST", "/v1/file/watch", GLOBS),
    ("POST", "/v1/sessions/{id}/file/watch", GLOBS),
    ("DELETE", "/v1/sessions", "At least one filter is required: with none the request is refused with 400 rather than ending every session."),
    ("POST", "/v1/trash/restore", RESTORE),
    ("POST", "/v1/sessions/{id}/trash/restore", RESTORE),
    ("GET", "/v1/trash/export", "Items are chosen by `ids` or by the filters, not both; a request that mixes them is refused with 400 naming the rule."),
    ("GET", "/v1/audit/proof/{seq}", PROOF),
    ("GET", "/v1/audit/consistency", PROOF),
    ("GET", "/v1/audit", AUDIT_QUERY),
    ("GET", "/v1/audit/stream", AUDIT_QUERY),
    ("POST", "/v1/file/watch/{watcher_id}/poll", CURSOR),
    ("POST", "/v1/sessions/{id}/file/watch/{watcher_id}/poll", CURSOR),
    ("GET", "/v1/file/watch/{watcher_id}/events", CURSOR),
    ("GET", "/v1/sessions/{id}/file/watch/{watcher_id}/events", CURSOR),
    ("POST", "/v1/mcp", MCP),
    ("GET", "/v1/mcp", MCP),
    ("DELETE", "/v1/mcp", MCP),
    ("POST", "/v1/sessions/{id}/mcp", MCP),
    ("GET", "/v1/sessions/{id}/mcp", MCP),
    ("DELETE", "/v1/sessions/{id}/mcp", MCP),
];
const PRECONDITION: &str = "A conditional change whose `If-Match` or `If-None-Match` does not hold is refused with 412 and what the file is now: a precondition met against the file's state, not a malformed request.";
const DIRECTORY: &str = "A path that names a directory is refused with 400 (`is_directory`): which paths are directories is state the document cannot state.";
const MULTIPART: &str = "Every part of the form is text: a `path` part `true` is the file name \"true\".";
const GLOBS: &str = "Globs are compiled when the request arrives, and a `path_base64` decoded: an unclosed `{` or `[`, or base64 of no path, is refused with 400 naming it.";
const RESTORE: &str = "Items are named one way: `ids`, `path` or `prefix`; `before` only with `path`; `to` with one id or a prefix; a path or prefix with its workspace. A request that breaks one of these rules is refused with 400 naming it.";
const PROOF: &str = "Proofs are between sizes the log has (1 <= from <= to <= its size; a record's seq at most its size): others are refused with 400 naming the log's size.";
const FIND: &str = "The pattern is a name, a workspace-relative path or a glob, checked when the request arrives: one starting with `/`, or with an unclosed `{` or `[`, is refused with 400 naming it.";
const AUDIT_QUERY: &str = "A query takes `path` or `prefix`, not both: both are refused with 400.";
const CURSOR: &str =
    "A cursor is a seq this watcher has reached: one past its newest event is refused with 400 naming the newest.";
const MCP: &str = "A JSON-RPC 2.0 message of the Model Context Protocol (streamable HTTP). A session starts with `initialize`, whose answer carries the `Mcp-Session-Id` header every later request sends, and the client accepts `application/json, text/event-stream`. A message out of that order, without that session id, or not JSON-RPC is refused with 400, and a request without that `Accept` with 406: a protocol the document can name but not state.";

/// The schema of `T` with every subschema inlined: a query type, whose properties become
/// the operation's parameters.
fn schema_of<T: JsonSchema>() -> Schema {
    crate::tools::catalog::schema_of::<T>()
}

/// A body's or an answer's schema, made with the document's generator.
type Make = fn(&mut SchemaGenerator) -> Schema;

/// `T` as the document names it: a `$ref` into `components.schemas` (its definition, and those
/// of the types it holds, gathered by `g`) for a named type, the schema itself for a plain one.
fn named<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// The generator of the document's named schemas: JSON Schema 2020-12 (OpenAPI 3.1's
/// dialect), definitions under `components.schemas`.
fn generator() -> SchemaGenerator {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.into_generator()
}

/// The error statuses every file read can give.
const READ_ERRORS: &[u16] = &[400, 401, 403, 404, 409];

const OPS: &[Op] = &[
    Op {
        method: "GET",
        path: "/api/sessions/{id}/files",
        summary: "List a session's files (live tree, else its latest snapshot)",
        query: Some(schema_of::<super::files::FilesQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<FileListing<'static>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/api/sessions/{id}/files/{*path}",
        summary: "Read one file of a session (1 MiB limit as JSON)",
        query: Some(schema_of::<super::files::FilesQuery>),
        headers: &[IF_NONE_MATCH_READ],
        body: Body::None,
        reply: Reply::File(named::<super::files::FileRead<'static>>),
        errors: READ_ERRORS,
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/files",
        summary: "Same as /api/sessions/{id}/files",
        query: Some(schema_of::<super::files::FilesQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<FileListing<'static>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Same as /api/sessions/{id}/files/{path}",
        query: Some(schema_of::<super::files::FilesQuery>),
        headers: &[IF_NONE_MATCH_READ],
        body: Body::None,
        reply: Reply::File(named::<super::files::FileRead<'static>>),
        errors: READ_ERRORS,
    },
    Op {
        method: "PUT",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Write the body to the file: `If-Match: <sha256>` overwrites that content only, `If-None-Match: *` creates only; 412 otherwise",
        query: None,
        headers: &[IF_MATCH, IF_NONE_MATCH_CREATE],
        body: Body::Bytes,
        reply: Reply::Written(named::<out::WriteResult>),
        errors: &[400, 401, 403, 404, 409, 412, 413],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Move the file or directory to the trash; `If-Match: <sha256>` makes it conditional",
        query: None,
        headers: &[IF_MATCH],
        body: Body::None,
        reply: Reply::Json(200, named::<out::DeleteResult>),
        errors: &[400, 401, 403, 404, 409, 412],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/tools/{tool}",
        summary: "Run an agent file tool; answers 200 with {ok, data | error}",
        query: None,
        headers: &[],
        body: Body::Tool,
        reply: Reply::Tool,
        errors: &[400, 401, 404, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions",
        summary: "Create a session (persistent, ttl, metadata, file_access, workspace)",
        query: None,
        headers: &[],
        body: Body::Json(named::<SessionSpec>),
        reply: Reply::Json(201, named::<SessionRecord>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "GET",
        path: "/v1/sessions",
        summary: "List sessions",
        query: Some(schema_of::<super::sessions::ListQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<Vec<SessionRecord>>),
        errors: &[401],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions",
        summary: "End sessions in bulk: at least one filter, or all=true",
        query: Some(schema_of::<super::sessions::BulkQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::sessions::BulkDeleted>),
        errors: &[400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}",
        summary: "Get a session record (404 once ended)",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SessionRecord>),
        errors: &[401, 404],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}",
        summary: "End a session: final snapshot, data kept",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Empty(204),
        errors: &[401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/pause",
        summary: "Snapshot a session and stop serving its live tree",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SessionRecord>),
        errors: &[401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/resume",
        summary: "Serve a paused session's live tree again",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SessionRecord>),
        errors: &[401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/snapshots",
        summary: "Take a snapshot of a session's live tree",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(201, named::<SnapshotRecord<'static>>),
        errors: &[401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/snapshots",
        summary: "List the snapshots of a session's workspace",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<Vec<SnapshotRecord<'static>>>),
        errors: &[401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots",
        summary: "List snapshots",
        query: Some(schema_of::<super::snapshots::ListQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<Vec<SnapshotRecord<'static>>>),
        errors: &[401],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}",
        summary: "Get one snapshot (id, unique prefix, or `latest`)",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SnapshotRecord<'static>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/diff/{other}",
        summary: "What changed from one snapshot to another of the same workspace",
        query: Some(schema_of::<super::review::DiffQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<DiffReport>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/search",
        summary: "Search the contents (literal or regex) or paths (glob) of a snapshot's files",
        query: Some(schema_of::<super::review::SearchQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SnapshotSearch>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/diff",
        summary: "A diff of a session's workspace within its scope (default: its start against now)",
        query: Some(schema_of::<super::review::SessionDiffQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<DiffReport>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/changes",
        summary: "What a session changed, each path with its audit records and trash items",
        query: Some(schema_of::<super::review::DiffQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<SessionChanges>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/log",
        summary: "The versions of a path across a workspace's snapshots, newest first",
        query: Some(schema_of::<super::review::LogQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<PathLog>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/find",
        summary: "Which snapshots hold a path matching a name or glob",
        query: Some(schema_of::<super::review::FindQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<FindResult>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/files",
        summary: "List the files of a snapshot",
        query: Some(schema_of::<super::snapshots::FilesQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<FileListing<'static>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/files/{*path}",
        summary: "Read one file of a snapshot",
        query: Some(schema_of::<super::snapshots::ReadQuery>),
        headers: &[IF_NONE_MATCH_READ],
        body: Body::None,
        reply: Reply::File(named::<super::files::FileRead<'static>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/export",
        summary: "Export a snapshot (or a path in it) as a tar stream",
        query: Some(schema_of::<super::snapshots::ExportQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Tar,
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/trash",
        summary: "List the trash of every workspace, newest first, filtered and paged",
        query: Some(schema_of::<super::trash::TrashQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<TrashPage>),
        errors: &[400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/trash",
        summary: "List the trash of a session's workspace that its scope can read, newest first",
        query: Some(schema_of::<super::trash::SessionTrashQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<TrashPage>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/trash/{trash}",
        summary: "Show one trash item, with a directory's members",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::trash::ShownItem>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/trash/restore",
        summary: "Restore trash items (ids, the newest deletion of a path, or a prefix) into their workspaces; every item's outcome",
        query: None,
        headers: &[],
        body: Body::Json(named::<super::trash::RestoreBody>),
        reply: Reply::Json(200, named::<BulkRestore>),
        errors: &[400, 401, 404, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/trash/restore",
        summary: "Restore trash items of a session's workspace into its live tree, within its scope; every item's outcome",
        query: None,
        headers: &[],
        body: Body::Json(named::<super::trash::RestoreBody>),
        reply: Reply::Json(200, named::<BulkRestore>),
        errors: &[400, 401, 403, 404, 413],
    },
    Op {
        method: "GET",
        path: "/v1/trash/export",
        summary: "Export trash items (by ids, or the listing's filters) as a tar archive, plain or zstd",
        query: Some(schema_of::<super::trash::ExportQuery>),
        headers: &[],
        body: Body::None,
        reply: Reply::Tar,
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/audit",
        summary: "Audit records, oldest first: the newest `limit`, or those after `after`; filtered by time, actor, session, workspace, operation, outcome, path or prefix",
        query: Some(schema_of::<super::audit::AuditParams>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::audit::AuditPage>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/audit/stream",
        summary: "Audit records as Server-Sent Events (`record`, the seq as the event id), from `after`, `Last-Event-ID` or now, then live",
        query: Some(schema_of::<super::audit::AuditParams>),
        headers: &[LAST_EVENT_ID],
        body: Body::None,
        reply: Reply::Events,
        errors: &[400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/audit/history",
        summary: "Every recorded change to a path of a workspace, newest first, renames followed",
        query: Some(schema_of::<super::audit::HistoryParams>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<Vec<HistoryEntry>>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/audit/checkpoint",
        summary: "The latest signed checkpoint of the audit log (C2SP signed note)",
        query: Some(schema_of::<super::audit::CheckpointParams>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<CheckpointRecord>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/audit/proof/{seq}",
        summary: "The inclusion proof of an audit record (against the latest checkpoint, or `size`)",
        query: Some(schema_of::<super::audit::ProofParams>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<InclusionProof>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/audit/consistency",
        summary: "The proof that the audit log of `to` records extends the log of `from` records",
        query: Some(schema_of::<super::audit::ConsistencyParams>),
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<ConsistencyProof>),
        errors: &[400, 401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/file/read",
        summary: "Read a text file, optionally a 0-based line range (end_line exclusive) (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ReadRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ReadData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/write",
        summary: "Write text, base64 or raw (Latin-1) content; a blind overwrite keeps the old content as a pre-image (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::WriteRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::WriteData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/replace",
        summary: "Replace text in a file (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ReplaceRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ReplaceData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/search",
        summary: "Search one file with a regular expression (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::SearchRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::SearchData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/find",
        summary: "Find files by a simple glob (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::FindRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::FilesData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/grep",
        summary: "Search a file tree with include/exclude filters (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::GrepRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::GrepData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/glob",
        summary: "List files by an advanced glob (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::GlobRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::FilesData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/list",
        summary: "List a directory (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ListRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ListData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/upload",
        summary: "Upload a file (multipart/form-data), stored as it streams (session token)",
        query: None,
        headers: &[],
        body: Body::Multipart,
        reply: Reply::Wrapped(named::<FileReply<fileops::WriteData>>),
        errors: &[400, 401, 413],
    },
    Op {
        method: "GET",
        path: "/v1/file/download",
        summary: "Download a file as a stream; change_policy=abort answers 409 if it changes (session token)",
        query: Some(schema_of::<super::fileapi::DownloadQuery>),
        headers: &[IF_NONE_MATCH_READ],
        body: Body::None,
        reply: Reply::Stream,
        errors: READ_ERRORS,
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/read",
        summary: "Read a text file, optionally a 0-based line range (end_line exclusive) (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ReadRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ReadData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/write",
        summary: "Write text, base64 or raw (Latin-1) content; a blind overwrite keeps the old content as a pre-image (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::WriteRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::WriteData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/replace",
        summary: "Replace text in a file (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ReplaceRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ReplaceData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/search",
        summary: "Search one file with a regular expression (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::SearchRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::SearchData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/find",
        summary: "Find files by a simple glob (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::FindRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::FilesData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/grep",
        summary: "Search a file tree with include/exclude filters (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::GrepRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::GrepData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/glob",
        summary: "List files by an advanced glob (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::GlobRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::FilesData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/list",
        summary: "List a directory (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<fileops::ListRequest>),
        reply: Reply::Wrapped(named::<FileReply<fileops::ListData>>),
        errors: &[400, 401, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/upload",
        summary: "Upload a file (multipart/form-data), stored as it streams (operator token)",
        query: None,
        headers: &[],
        body: Body::Multipart,
        reply: Reply::Wrapped(named::<FileReply<fileops::WriteData>>),
        errors: &[400, 401, 404, 413],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/file/download",
        summary: "Download a file as a stream; change_policy=abort answers 409 if it changes (operator token)",
        query: Some(schema_of::<super::fileapi::DownloadQuery>),
        headers: &[IF_NONE_MATCH_READ],
        body: Body::None,
        reply: Reply::Stream,
        errors: READ_ERRORS,
    },
    Op {
        method: "POST",
        path: "/v1/file/watch",
        summary: "Start a file watcher (recursive, debounce, include_patterns, exclude, event_types) (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::WatchRequest>),
        reply: Reply::Json(201, named::<super::watch::Data<watchops::WatchInfo>>),
        errors: &[400, 401, 403, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/watch/wait",
        summary: "Wait for one event on a path (create answers at once if it exists); `event: null, timed_out: true` when the time runs out (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::WaitRequest>),
        reply: Reply::Json(200, named::<super::watch::WaitData>),
        errors: &[400, 401, 403, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/file/watch/{watcher_id}/poll",
        summary: "Long-poll a watcher's events after `cursor`; `overflow` when some were lost (session token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::PollRequest>),
        reply: Reply::Json(200, named::<watchops::PollData>),
        errors: &[400, 401, 404, 413],
    },
    Op {
        method: "GET",
        path: "/v1/file/watch/{watcher_id}/events",
        summary: "A watcher's events as Server-Sent Events (`watch_started`, `file_change` with id `{watcher_id}:{seq}`, `overflow`) (session token)",
        query: Some(schema_of::<super::watch::EventsQuery>),
        headers: &[WATCH_EVENT_ID],
        body: Body::None,
        reply: Reply::Events,
        errors: &[400, 401, 404],
    },
    Op {
        method: "DELETE",
        path: "/v1/file/watch/{watcher_id}",
        summary: "Stop a watcher (session token)",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::watch::Data<watchops::Stopped>>),
        errors: &[401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/watch",
        summary: "Start a file watcher (recursive, debounce, include_patterns, exclude, event_types) (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::WatchRequest>),
        reply: Reply::Json(201, named::<super::watch::Data<watchops::WatchInfo>>),
        errors: &[400, 401, 403, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/watch/wait",
        summary: "Wait for one event on a path (create answers at once if it exists); `event: null, timed_out: true` when the time runs out (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::WaitRequest>),
        reply: Reply::Json(200, named::<super::watch::WaitData>),
        errors: &[400, 401, 403, 404, 409, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/file/watch/{watcher_id}/poll",
        summary: "Long-poll a watcher's events after `cursor`; `overflow` when some were lost (operator token)",
        query: None,
        headers: &[],
        body: Body::Json(named::<watchops::PollRequest>),
        reply: Reply::Json(200, named::<watchops::PollData>),
        errors: &[400, 401, 404, 413],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/file/watch/{watcher_id}/events",
        summary: "A watcher's events as Server-Sent Events (`watch_started`, `file_change` with id `{watcher_id}:{seq}`, `overflow`) (operator token)",
        query: Some(schema_of::<super::watch::EventsQuery>),
        headers: &[WATCH_EVENT_ID],
        body: Body::None,
        reply: Reply::Events,
        errors: &[400, 401, 404],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}/file/watch/{watcher_id}",
        summary: "Stop a watcher (operator token)",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::watch::Data<watchops::Stopped>>),
        errors: &[401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/mcp",
        summary: "Model Context Protocol (streamable HTTP): a JSON-RPC message (initialize, tools/list, tools/call) answered as an event stream or JSON (session token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::Json(named::<serde_json::Map<String, Value>>),
        reply: Reply::Events,
        errors: &[400, 401, 404, 406, 413],
    },
    Op {
        method: "GET",
        path: "/v1/mcp",
        summary: "Model Context Protocol: the stream of server messages of an MCP session (`Mcp-Session-Id`) (session token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::None,
        reply: Reply::Events,
        errors: &[400, 401, 404, 405, 406],
    },
    Op {
        method: "DELETE",
        path: "/v1/mcp",
        summary: "Model Context Protocol: end an MCP session (`Mcp-Session-Id`) (session token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::None,
        reply: Reply::Empty(200),
        errors: &[400, 401, 404, 405],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/mcp",
        summary: "Model Context Protocol (streamable HTTP): a JSON-RPC message (initialize, tools/list, tools/call) answered as an event stream or JSON (operator token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::Json(named::<serde_json::Map<String, Value>>),
        reply: Reply::Events,
        errors: &[400, 401, 404, 406, 413],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/mcp",
        summary: "Model Context Protocol: the stream of server messages of an MCP session (`Mcp-Session-Id`) (operator token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::None,
        reply: Reply::Events,
        errors: &[400, 401, 404, 405, 406],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}/mcp",
        summary: "Model Context Protocol: end an MCP session (`Mcp-Session-Id`) (operator token)",
        query: None,
        headers: &[MCP_SESSION],
        body: Body::None,
        reply: Reply::Empty(200),
        errors: &[400, 401, 404, 405],
    },
    Op {
        method: "GET",
        path: "/v1/tools",
        summary: "Every agent tool with the JSON Schemas of its parameters and its answer, as function-calling APIs take them; no token needed",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::public::ToolList>),
        errors: &[],
    },
    Op {
        method: "GET",
        path: "/healthz",
        summary: "Liveness; no token needed",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, named::<super::public::Health>),
        errors: &[],
    },
    Op {
        method: "GET",
        path: "/openapi.json",
        summary: "This document; no token needed",
        query: None,
        headers: &[],
        body: Body::None,
        reply: Reply::Json(200, |_| schemars::json_schema!({"type": "object"})),
        errors: &[],
    },
];

/// (method, path) of every documented operation, in axum's path syntax.
pub fn documented() -> Vec<(&'static str, &'static str)> {
    OPS.iter().map(|o| (o.method, o.path)).collect()
}

fn description(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        304 => "Not Modified (If-None-Match matched the ETag)",
        400 => "invalid_path, invalid_argument, too_large, too_deep, name_too_long, is_directory or not_text",
        401 => "unauthorized: missing or unknown bearer token",
        403 => "permission_denied: outside the session's scope",
        404 => "not_found",
        409 => "conflict: the file changed while read, or a write's target changed; read_only: in a fleet, the session is another node's",
        412 => "stale_file: the file is not what If-Match names, or If-None-Match: * found one",
        413 => "too_large: the body is over the limit",
        _ => "error",
    }
}

/// The schema of a path parameter, by name: the same rules the extractors apply.
fn path_schema(name: &str) -> Value {
    match name {
        // `SessionId::parse`.
        "id" => json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}),
        // A snapshot reference: `latest`, or an id or a prefix of one.
        "snap" | "other" => json!({"type": "string", "pattern": "^(latest|[0-9a-fA-F]{1,64})$"}),
        // An audit record's seq.
        "seq" => json!({"type": "integer", "minimum": 1, "maximum": i64::MAX}),
        // `random::new_watcher_id`.
        "watcher_id" => json!({"type": "string", "pattern": "^w_[0-9a-f]{12}$"}),
        // `TrashId::parse`.
        "trash" => json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}),
        // `path::from_url`, after percent-decoding.
        "path" => json!({"type": "string", "pattern": crate::base::path::pattern_nonempty()}),
        _ => json!({"type": "string"}),
    }
}

/// The query parameters a query struct's derived schema describes: each property one optional
/// (unless required) parameter, its `null` alternative dropped (an absent parameter is the
/// `None`), its doc comment the description.
fn query_params(schema: &Schema) -> Vec<Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, prop)| {
            let mut prop = prop.clone();
            let description = prop.as_object_mut().and_then(|p| p.remove("description")).unwrap_or(Value::Null);
            // An absent parameter is the `None`: a `null` default would not be of its type.
            if prop.get("default").is_some_and(Value::is_null) {
                prop.as_object_mut().map(|p| p.remove("default"));
            }
            if let Some(types) = prop.get_mut("type").and_then(Value::as_array_mut) {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    prop["type"] = only;
                }
            }
            if let Some(values) = prop.get_mut("enum").and_then(Value::as_array_mut) {
                values.retain(|v| !v.is_null());
            }
            // `Option<Enum>`: one alternative besides `null`, which is the parameter's schema.
            let alternatives = prop.get("anyOf").and_then(Value::as_array).map(|alts| {
                alts.iter()
                    .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect::<Vec<_>>()
            });
            if let Some([only]) = alternatives.as_deref() {
                prop = only.clone();
            }
            json!({"name": name, "in": "query", "required": required.contains(&name.as_str()),
                   "description": description, "schema": prop})
        })
        .collect()
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

/// The success answers of `reply`; `tool_answer` is the tool's envelope for `Reply::Tool`.
fn success(reply: Reply, tool_answer: Option<Schema>, g: &mut SchemaGenerator) -> Map<String, Value> {
    let mut r = Map::new();
    let mut put = |status: u16, content: Option<Value>| {
        let mut answer = json!({"description": description(status)});
        if let Some(c) = content {
            answer["content"] = c;
        }
        r.insert(status.to_string(), answer);
    };
    let bytes = json!({"type": "string", "format": "binary"});
    match reply {
        Reply::Json(status, schema) => put(status, Some(json_content(schema(g).into()))),
        Reply::Written(schema) => {
            let schema: Value = schema(g).into();
            put(200, Some(json_content(schema.clone())));
            put(201, Some(json_content(schema)));
        }
        Reply::Empty(status) => put(status, None),
        Reply::File(schema) => {
            let mut content = json_content(schema(g).into());
            content["application/octet-stream"] = json!({"schema": bytes});
            put(200, Some(content));
            put(304, None);
        }
        Reply::Tar => {
            put(200, Some(json!({"application/x-tar": {"schema": bytes}, "application/zstd": {"schema": bytes}})))
        }
        Reply::Stream => {
            put(200, Some(json!({"application/octet-stream": {"schema": bytes}})));
            put(304, None);
        }
        // Each event of the stream, as an SSE reader parses it (what clients and schemathesis
        // check each event against): its fields, `data` one line of JSON.
        Reply::Events => put(
            200,
            Some(json!({"text/event-stream": {"schema": {
                "type": "object",
                "required": ["data"],
                "properties": {
                    "id": {"type": "string"},
                    "event": {"type": "string"},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "retry": {"type": "integer", "minimum": 0}
                }
            }}})),
        ),
        Reply::Tool => put(200, tool_answer.map(|s| json_content(s.into()))),
        Reply::Wrapped(schema) => put(200, Some(json_content(schema(g).into()))),
    }
    r
}

/// The schema `schema` stands for: the definition a `$ref` into `components.schemas` names.
fn resolved<'a>(schema: &'a Value, g: &'a SchemaGenerator) -> &'a Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| g.definitions().get(name))
        .unwrap_or(schema)
}

/// A unique name for the operation `method path`, for generated clients' functions: the method
/// and the path's words in camel case, a parameter as `By` and its name
/// (`GET /v1/sessions/{id}/files` is `getV1SessionsByIdFiles`).
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_ascii_lowercase();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        let name = match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(param) => {
                id.push_str("By");
                param.trim_start_matches('*')
            }
            None => segment,
        };
        for word in name.split(['_', '-', '.']).filter(|w| !w.is_empty()) {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                id.extend(first.to_uppercase());
                id.push_str(chars.as_str());
            }
        }
    }
    id
}

/// One operation of the document at `path`; for a tool, `tool` holds its parameters' and its
/// answer's schemas.
fn operation(op: &Op, path: &str, tool: Option<(Schema, Schema)>, g: &mut SchemaGenerator) -> Value {
    let mut params: Vec<Value> = path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": path_schema(name)}))
        .collect();
    if let Some(query) = op.query {
        params.extend(query_params(&query()));
    }
    for h in op.headers {
        let mut schema = json!({"type": "string"});
        if let Some(p) = h.pattern {
            schema["pattern"] = json!(p);
        }
        params.push(
            json!({"name": h.name, "in": "header", "required": false, "description": h.description, "schema": schema}),
        );
    }
    let (tool_body, tool_answer) = tool.unzip();
    let mut responses = success(op.reply, tool_answer, g);
    // A malformed path parameter, or an unknown or malformed query parameter, is a 400.
    let mut errors = op.errors.to_vec();
    if (op.query.is_some() || path.contains('{')) && !errors.contains(&400) {
        errors.push(400);
        errors.sort_unstable();
    }
    for s in errors {
        // The operator's token is checked before any route, with the common error body.
        let operator_refused = s == 401 && !op.path.starts_with("/v1/file/");
        let error = match op.reply {
            Reply::Wrapped(_) if !operator_refused => Value::from(named::<FileReply<()>>(g)),
            _ => json!({"$ref": "#/components/schemas/Error"}),
        };
        responses.insert(s.to_string(), json!({"description": description(s), "content": json_content(error)}));
    }
    let mut operation = json!({"operationId": operation_id(op.method, path), "summary": op.summary,
                               "parameters": params, "responses": responses});
    if let Some((_, _, rule)) = RULES.iter().find(|(m, p, _)| *m == op.method && *p == op.path) {
        operation["description"] = json!(rule);
    }
    if !super::public::PUBLIC.contains(&(op.method, op.path)) {
        operation["security"] = json!([{"bearer": []}]);
    }
    let body = match op.body {
        Body::None => None,
        Body::Json(schema) => Some(schema(g)),
        Body::Tool => tool_body,
        Body::Multipart => {
            let form = json!({"type": "object", "required": ["file", "path"], "additionalProperties": false, "properties": {
                "file": {"type": "string", "format": "binary", "description": "The file's bytes"},
                "path": {"type": "string", "description": "Where to store it: workspace-relative, or absolute under the sandbox root"},
            }});
            operation["requestBody"] = json!({"required": true, "content": {"multipart/form-data": {"schema": form}}});
            None
        }
        Body::Bytes => {
            let bytes = json!({"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}});
            operation["requestBody"] = json!({"required": false, "content": bytes});
            None
        }
    };
    if let Some(body) = body {
        let body = Value::from(body);
        // A missing body is the empty object: required only when some field is.
        let required = resolved(&body, g).get("required").and_then(Value::as_array).is_some_and(|r| !r.is_empty());
        operation["requestBody"] = json!({"required": required, "content": json_content(body)});
    }
    operation
}

/// Closed sets of strings as `enum`, which every client generator reads, where schemars writes
/// `oneOf` of `const`s to keep each value's doc comment: the docs go into the description.
fn closed_sets_as_enums(doc: &mut Value) {
    let mut stack: Vec<&mut Value> = vec![doc];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                let values: Option<Vec<(Value, Option<String>)>> =
                    o.get("oneOf").and_then(Value::as_array).and_then(|alts| {
                        alts.iter()
                            .map(|a| {
                                let a = a.as_object()?;
                                let value = a.get("const").filter(|c| c.is_string())?.clone();
                                a.keys()
                                    .all(|k| matches!(k.as_str(), "const" | "description" | "type"))
                                    .then(|| (value, a.get("description").and_then(Value::as_str).map(String::from)))
                            })
                            .collect()
                    });
                if let Some(values) = values.filter(|v| !v.is_empty()) {
                    o.remove("oneOf");
                    let docs: Vec<String> = values
                        .iter()
                        .filter_map(|(v, d)| d.as_ref().map(|d| format!("`{}`: {d}", v.as_str().unwrap_or_default())))
                        .collect();
                    if !docs.is_empty() {
                        let before = o.get("description").and_then(Value::as_str).map(String::from);
                        let joined = docs.join("; ");
                        o.insert(
                            "description".into(),
                            Value::from(before.map_or(joined.clone(), |b| format!("{b} ({joined})"))),
                        );
                    }
                    o.insert("type".into(), Value::from("string"));
                    o.insert("enum".into(), Value::Array(values.into_iter().map(|(v, _)| v).collect()));
                }
                stack.extend(o.values_mut());
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut g = generator();
    let mut paths = Map::new();
    for op in OPS {
        // One route runs every tool; each is documented on its own path, with its parameters
        // as the body's schema and its answer as the response's.
        let expanded: Vec<(String, Option<(Schema, Schema)>)> = if matches!(op.body, Body::Tool) {
            crate::tools::catalog::names()
                .map(|t| (op.path.replace("{tool}", t), crate::tools::catalog::schemas_in(t, &mut g)))
                .collect()
        } else {
            vec![(op.path.replace("{*", "{"), None)]
        };
        for (path, tool) in expanded {
            let operation = operation(op, &path, tool, &mut g);
            let entry = paths.entry(path).or_insert_with(|| json!({}));
            entry[op.method.to_ascii_lowercase()] = operation;
        }
    }
    let mut schemas = g.take_definitions(true);
    schemas.insert("Error".into(), Value::from(schema_of::<ErrorBody>()));
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "trove", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Sessions, their files (live or from snapshots), and snapshots."},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas
        }
    });
    closed_sets_as_enums(&mut doc);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition a `$ref` names in `doc`, or the schema itself.
    fn named_schema<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
            Some(name) => &doc["components"]["schemas"][name],
            None => schema,
        }
    }

    #[test]
    fn operations_have_unique_ids_and_types_are_named_schemas_with_closed_sets_as_enums() {
        let doc = document();
        let mut ids = std::collections::HashSet::new();
        for (path, ops) in doc["paths"].as_object().expect("paths") {
            for (method, op) in ops.as_object().expect("operations") {
                let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
                assert!(ids.insert(id.to_string()), "{id} is given twice");
            }
        }
        for (method, path, _) in RULES {
            assert!(
                OPS.iter().any(|o| o.method == *method && o.path == *path),
                "a rule for {method} {path}, no operation"
            );
        }
        assert!(ids.contains("getV1SessionsByIdFiles") && ids.contains("postV1SessionsByIdToolsReadFile"), "{ids:?}");
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        assert!(schemas.len() > 50, "types are named once, not inlined at every use: {}", schemas.len());
        let list = &doc["paths"]["/v1/sessions"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
        assert_eq!(list["items"]["$ref"], "#/components/schemas/SessionRecord", "{list}");
        // No `oneOf` of `const`s is left anywhere; `null` defaults are gone from parameters.
        let mut stack = vec![&doc];
        while let Some(v) = stack.pop() {
            match v {
                Value::Object(o) => {
                    let alts = o.get("oneOf").and_then(Value::as_array);
                    assert!(!alts.is_some_and(|a| a.iter().all(|a| a.get("const").is_some())), "not an enum: {v}");
                    assert_ne!(o.get("items"), Some(&Value::Bool(true)), "arrays say what they hold");
                    stack.extend(o.values());
                }
                Value::Array(a) => stack.extend(a),
                _ => {}
            }
        }
        // An event stream's schema describes each event as an SSE reader parses it.
        let stream = &doc["paths"]["/v1/audit/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"];
        assert_eq!(stream["schema"]["properties"]["data"]["type"], "string", "{stream}");
        let status = &named_schema(&doc, &schemas["SessionRecord"]["properties"]["status"])["enum"];
        assert!(status.as_array().is_some_and(|v| v.contains(&json!("ended"))), "{status}");
        for ops in doc["paths"].as_object().expect("paths").values() {
            for op in ops.as_object().expect("operations").values() {
                for p in op["parameters"].as_array().into_iter().flatten() {
                    assert!(!p["schema"]["default"].is_null() || p["schema"].get("default").is_none(), "{p}");
                }
            }
        }
    }

    #[test]
    fn every_route_is_documented_and_every_operation_routed() {
        // `…/files/` without a file only answers 400 `invalid_path`: not an operation.
        let mut routed: Vec<_> =
            crate::server::route_list().into_iter().filter(|(_, p)| !p.ends_with("/files/")).collect();
        let mut documented = documented();
        routed.sort();
        documented.sort();
        assert_eq!(routed, documented);
        let doc = document();
        for (method, path) in routed {
            let p = path.replace("{*", "{");
            let each: Vec<String> = if p.ends_with("/tools/{tool}") {
                crate::tools::catalog::names().map(|t| p.replace("{tool}", t)).collect()
            } else {
                vec![p]
            };
            for p in each {
                assert!(doc["paths"][&p][method.to_ascii_lowercase()].is_object(), "{method} {p}");
            }
        }
    }

    #[test]
    fn every_tool_name_is_a_tool_and_no_other_is() {
        for name in crate::tools::TOOLS {
            let parsed = crate::tools::ToolCall::parse(name, json!({}));
            assert!(
                parsed
                    .as_ref()
                    .map_or_else(|e| e.kind() != crate::base::error::ErrorKind::NotFound, |c| c.name() == *name),
                "{name}"
            );
        }
        let unknown = crate::tools::ToolCall::parse("rm_rf", json!({})).expect_err("unknown");
        assert_eq!(unknown.kind(), crate::base::error::ErrorKind::NotFound);
    }

    #[test]
    fn query_parameters_come_from_the_query_types_with_their_constraints() {
        let doc = document();
        let params =
            |path: &str, method: &str| doc["paths"][path][method]["parameters"].as_array().cloned().unwrap_or_default();
        let find = |list: &[Value], name: &str| list.iter().find(|p| p["name"] == name).cloned().unwrap_or(Value::Null);
        let read = params("/v1/sessions/{id}/files/{path}", "get");
        // A closed set comes out as `enum`, or as `oneOf` consts when its values are documented.
        let values = |schema: &Value| -> Vec<Value> {
            match (schema["enum"].as_array(), schema["oneOf"].as_array()) {
                (Some(e), _) => e.clone(),
                (None, Some(alts)) => alts.iter().map(|a| a["const"].clone()).collect(),
                _ => Vec::new(),
            }
        };
        assert_eq!(values(&find(&read, "change_policy")["schema"]), [json!("retry"), json!("abort")]);
        assert_eq!(values(&find(&read, "download")["schema"]).len(), 4);
        let restore = &doc["paths"]["/v1/sessions/{id}/tools/restore_file"]["post"]["requestBody"];
        let body = named_schema(&doc, &restore["content"]["application/json"]["schema"]);
        assert_eq!(body["additionalProperties"], false, "unknown fields are refused, and documented so");
        assert!(body["properties"]["trashId"].is_object() && body["properties"]["onConflict"].is_object(), "{body}");
        assert!(find(&read, "source")["schema"]["pattern"].is_string());
        assert_eq!(find(&read, "id")["schema"]["pattern"], "^[A-Za-z0-9_-]{1,64}$");
        let list = params("/v1/sessions", "get");
        assert_eq!(find(&list, "include_ended")["schema"]["type"], "boolean");
        let bulk = params("/v1/sessions", "delete");
        assert_eq!(find(&bulk, "all")["schema"]["type"], "boolean", "every field of the query type is documented");
        assert_eq!(
            doc["paths"]["/v1/sessions"]["get"]["responses"]["400"]["description"].as_str().map(|_| ()),
            Some(())
        );
    }

    #[test]
    fn counts_take_integral_numbers_as_json_schema_does_and_refuse_the_rest_by_name() {
        let parse = |v: Value| crate::tools::ToolCall::parse("read_file", v);
        assert!(parse(json!({"path": "a", "maxLines": 3.0, "offset": 0})).is_ok());
        for bad in [json!(1e300), json!(2.5), json!(-1)] {
            let e = parse(json!({"path": "a", "maxLines": bad})).expect_err("refused");
            assert_eq!(e.kind(), crate::base::error::ErrorKind::InvalidArgument, "{e}");
        }
        let doc = document();
        let body = &doc["paths"]["/v1/sessions/{id}/tools/read_file"]["post"]["requestBody"];
        assert_eq!(body["required"], true, "read_file needs a path");
        let max_lines = &named_schema(&doc, &body["content"]["application/json"]["schema"])["properties"]["maxLines"];
        assert!(max_lines.to_string().contains("\"maximum\":18446744073709551615"), "{max_lines}");
        let list = &doc["paths"]["/v1/sessions/{id}/tools/list_directory"]["post"]["requestBody"];
        assert_eq!(list["required"], false, "every list_directory parameter has a default");
    }
}
