//! Every tool as function-calling APIs and MCP list them (`GET /v1/tools`, `trove mcp`): its
//! name, description, and the JSON Schemas of its parameters and of its result envelope,
//! generated from the same types the tools parse and answer; and one call by name with JSON
//! arguments, for adapters that carry tools over another protocol.

use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde_json::Value;

use super::fileapi::Sandbox;
use super::files::{self, FilesCall, FilesResult};
use super::output::{self as out, ToolReply};
use super::{mutate, read, run, ToolCall};
use crate::base::error::{Error, Result};

/// One tool, in the shape function-calling APIs take (`name`, `description`, `parameters`),
/// with the schema of what it answers.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolSpec {
    /// What it is called.
    pub name: String,
    /// What it does (its parameters' documentation).
    pub description: String,
    /// The JSON Schema of its parameters (an object).
    pub parameters: Value,
    /// The JSON Schema of its answer: `{"ok": true, "data": ...}` or `{"ok": false, "error": ...}`.
    pub result: Value,
}

/// The JSON Schema of `T`, draft 2020-12, subschemas inlined (what function-calling APIs take).
pub fn schema_of<T: JsonSchema>() -> Schema {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<T>();
    if let Some(o) = schema.as_object_mut() {
        o.remove("$schema");
    }
    schema
}

/// The schemas of tool `name`'s parameters and of its answer in its envelope; `None` for a
/// name that is no tool.
pub fn schemas(name: &str) -> Option<(Schema, Schema)> {
    Some(match name {
        "read_file" => (schema_of::<read::ReadFile>(), schema_of::<ToolReply<out::ReadFileResult>>()),
        "list_directory" => (schema_of::<read::ListDirectory>(), schema_of::<ToolReply<out::ListDirectoryResult>>()),
        "search_files" => (schema_of::<read::Search>(), schema_of::<ToolReply<out::SearchAnswer>>()),
        "glob" => (schema_of::<read::Search>(), schema_of::<ToolReply<out::GlobResult>>()),
        "create_file" => (schema_of::<mutate::CreateFile>(), schema_of::<ToolReply<out::WriteResult>>()),
        "write_file" => (schema_of::<mutate::WriteFile>(), schema_of::<ToolReply<out::WriteResult>>()),
        "edit_file" => (schema_of::<mutate::EditFile>(), schema_of::<ToolReply<out::EditResult>>()),
        "delete_file" => (schema_of::<mutate::DeleteFile>(), schema_of::<ToolReply<out::DeleteResult>>()),
        "restore_file" => (schema_of::<mutate::RestoreFile>(), schema_of::<ToolReply<out::RestoreResult>>()),
        "move_file" => (schema_of::<mutate::MoveFile>(), schema_of::<ToolReply<out::MoveResult>>()),
        "apply_patch" => (schema_of::<mutate::ApplyPatch>(), schema_of::<ToolReply<out::ApplyPatchResult>>()),
        files::NAME => (schema_of::<FilesCall>(), schema_of::<ToolReply<FilesResult>>()),
        _ => return None,
    })
}

/// Every tool callable by name: the stale-file tools, then the unified `files` tool.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::TOOLS.iter().copied().chain([files::NAME])
}

/// Every tool, in the order of [`names`].
pub fn list() -> Vec<ToolSpec> {
    names()
        .filter_map(|name| {
            let (params, result) = schemas(name)?;
            let description = params.get("description").and_then(Value::as_str).unwrap_or(name).replace('\n', " ");
            Some(ToolSpec { name: name.to_string(), description, parameters: params.into(), result: result.into() })
        })
        .collect()
}

/// Calls tool `name` with JSON `args` in `sb`'s session: its result as JSON. An unknown tool is
/// `not_found`; arguments that are not its parameters, `invalid_argument`.
pub fn call(sb: &Sandbox<'_>, name: &str, args: Value) -> Result<Value> {
    let as_json = |v: std::result::Result<Value, serde_json::Error>| {
        v.map_err(|e| Error::internal(format!("a result of {name} could not be written as JSON: {e}")))
    };
    if name == files::NAME {
        let call: FilesCall = serde_json::from_value(args)
            .map_err(|e| Error::invalid_argument(format!("bad parameters for files: {e}")))?;
        return as_json(serde_json::to_value(files::files(sb, &call)?));
    }
    let call = ToolCall::parse(name, args)?;
    as_json(serde_json::to_value(run(sb.repo, sb.session, call, sb.actor)?))
}
