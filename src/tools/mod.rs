//! The agent file tools (DESIGN.md, "Agent file tools and the stale-file protocol"): one
//! entry point, [`run`], used alike by the library, `trove tool` and
//! `POST /v1/sessions/{id}/tools/{tool}`.
//!
//! Reads come from the live tree while the session is active and from its latest snapshot
//! after (as the Files API does). Writes need an active session, go through the stale-file
//! protocol (`mutate.rs`) and the journal (`ops/journal/`), and every refusal is audited.

mod apply_patch;
pub(crate) mod caller;
pub mod catalog;
pub mod edit;
pub mod fileapi;
pub mod files;
pub mod mcp;
pub mod mutate;
pub mod output;
pub mod read;
pub mod slice;

use caller::Caller;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use output::{envelope, suggested_action, ToolOutput, ToolReply};

use crate::base::error::{Error, ErrorKind, Result};
use crate::model::session::Session;
use crate::repo::Repo;

/// Every tool, by name.
pub const TOOLS: &[&str] = &[
    "read_file",
    "list_directory",
    "search_files",
    "glob",
    "create_file",
    "write_file",
    "edit_file",
    "delete_file",
    "restore_file",
    "move_file",
    "apply_patch",
];

/// A parsed call.
#[derive(Debug)]
pub enum ToolCall {
    /// `read_file`
    ReadFile(read::ReadFile),
    /// `list_directory`
    ListDirectory(read::ListDirectory),
    /// `search_files`
    Search(read::Search),
    /// `glob`: a search of paths only.
    Glob(read::Search),
    /// `create_file`
    CreateFile(mutate::CreateFile),
    /// `write_file`
    WriteFile(mutate::WriteFile),
    /// `edit_file`
    EditFile(mutate::EditFile),
    /// `delete_file`
    DeleteFile(mutate::DeleteFile),
    /// `restore_file`
    RestoreFile(mutate::RestoreFile),
    /// `move_file`
    MoveFile(mutate::MoveFile),
    /// `apply_patch`
    ApplyPatch(mutate::ApplyPatch),
}

/// The parameters of `tool`: a JSON object (serde would also take an array of the fields in
/// order, which the API does not document).
fn params<T: DeserializeOwned>(tool: &str, v: Value) -> Result<T> {
    if !v.is_object() {
        return Err(Error::invalid_argument(format!("bad parameters for {tool}: give them as a JSON object")));
    }
    serde_json::from_value(v).map_err(|e| Error::invalid_argument(format!("bad parameters for {tool}: {e}")))
}

impl ToolCall {
    /// Parses `params` for tool `name`: an unknown tool is `not_found`, bad parameters
    /// `invalid_argument` (both request-level: HTTP answers them with a status code).
    pub fn parse(name: &str, v: Value) -> Result<ToolCall> {
        Ok(match name {
            "read_file" => ToolCall::ReadFile(params(name, v)?),
            "list_directory" => ToolCall::ListDirectory(params(name, v)?),
            "search_files" => {
                let s: read::Search = params(name, v)?;
                s.check_patterns()?;
                ToolCall::Search(s)
            }
            "glob" => {
                let mut s: read::Search = params(name, v)?;
                s.mode = read::SearchMode::Glob;
                s.check_patterns()?;
                ToolCall::Glob(s)
            }
            "create_file" => ToolCall::CreateFile(params(name, v)?),
            "write_file" => ToolCall::WriteFile(params(name, v)?),
            "edit_file" => ToolCall::EditFile(params(name, v)?),
            "delete_file" => ToolCall::DeleteFile(params(name, v)?),
            "restore_file" => ToolCall::RestoreFile(params(name, v)?),
            "move_file" => ToolCall::MoveFile(params(name, v)?),
            "apply_patch" => ToolCall::ApplyPatch(params(name, v)?),
            // `files` is the unified tool (`files.rs`), called through its own entry point.
            _ => return Err(Error::not_found(format!("no tool '{name}': the tools are {}, files", TOOLS.join(", ")))),
        })
    }

    /// The tool's name, as called.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::ReadFile(_) => "read_file",
            ToolCall::ListDirectory(_) => "list_directory",
            ToolCall::Search(_) => "search_files",
            ToolCall::Glob(_) => "glob",
            ToolCall::CreateFile(_) => "create_file",
            ToolCall::WriteFile(_) => "write_file",
            ToolCall::EditFile(_) => "edit_file",
            ToolCall::DeleteFile(_) => "delete_file",
            ToolCall::RestoreFile(_) => "restore_file",
            ToolCall::MoveFile(_) => "move_file",
            ToolCall::ApplyPatch(_) => "apply_patch",
        }
    }

    /// Whether the tool changes files (and so takes the workspace lock).
    pub fn mutates(&self) -> bool {
        !matches!(self, ToolCall::ReadFile(_) | ToolCall::ListDirectory(_) | ToolCall::Search(_) | ToolCall::Glob(_))
    }

    /// The path a refusal record names.
    fn path(&self) -> Option<&str> {
        match self {
            ToolCall::CreateFile(p) => Some(&p.path),
            ToolCall::WriteFile(p) => Some(&p.path),
            ToolCall::EditFile(p) => Some(&p.path),
            ToolCall::DeleteFile(p) => Some(&p.path),
            ToolCall::RestoreFile(p) => p.path.as_deref().or(p.to.as_deref()),
            ToolCall::MoveFile(p) => Some(&p.from),
            ToolCall::ReadFile(p) => Some(&p.path),
            ToolCall::ListDirectory(p) => Some(&p.path),
            _ => None,
        }
    }
}

/// Runs one tool call for session `s` of `repo` on behalf of `actor`. Mutations and refusals
/// of mutations are audited; the result goes to agents through [`envelope`].
pub fn run(repo: &Repo, s: &Session, call: ToolCall, actor: &str) -> Result<ToolOutput> {
    let caller = Caller { repo, session: s, scope: s.scope()?, actor };
    let name = call.name();
    let path = call.path().map(str::to_string);
    if !call.mutates() {
        let result = match call {
            ToolCall::ReadFile(p) => read::read_file(&caller, &p).map(ToolOutput::ReadFile),
            ToolCall::ListDirectory(p) => read::list_directory(&caller, &p).map(ToolOutput::ListDirectory),
            ToolCall::Search(p) | ToolCall::Glob(p) => read::search(&caller, &p),
            _ => Err(Error::internal("a mutating tool took the read path")),
        };
        // A read outside the scope is a refusal like any other: audited.
        if let Err(e) = &result {
            if e.kind() == ErrorKind::PermissionDenied {
                repo.audit_refusal(&s.workspace, Some(&s.id), actor, name, path.as_deref(), e)?;
            }
        }
        return result;
    }
    let result = repo.lock_writable(s).and_then(|l| match call {
        ToolCall::CreateFile(p) => mutate::create_file(&caller, &l, &p).map(ToolOutput::Write),
        ToolCall::WriteFile(p) => mutate::write_file(&caller, &l, &p).map(ToolOutput::Write),
        ToolCall::EditFile(p) => mutate::edit_file(&caller, &l, &p).map(ToolOutput::Edit),
        ToolCall::DeleteFile(p) => mutate::delete_file(&caller, &l, &p).map(ToolOutput::Delete),
        ToolCall::RestoreFile(p) => mutate::restore_file(&caller, &l, &p).map(ToolOutput::Restore),
        ToolCall::MoveFile(p) => mutate::move_file(&caller, &l, &p).map(ToolOutput::Move),
        ToolCall::ApplyPatch(p) => apply_patch::apply_patch(&caller, &l, &p).map(ToolOutput::ApplyPatch),
        _ => Err(Error::internal("a reading tool took the write path")),
    });
    // A change that reached the tree is no refusal: its own records come with its recovery.
    if let Some(e) = result.as_ref().err().filter(|e| !e.made_the_change()) {
        repo.audit_refusal(&s.workspace, Some(&s.id), actor, name, path.as_deref(), e)?;
    }
    result
}
