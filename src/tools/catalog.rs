//! Every tool as function-calling APIs and MCP list them (`GET /v1/tools`, `trove mcp`): its
//! name, description, and the JSON Schemas of its parameters and of its result envelope,
//! generated from the same types the tools parse and answer; and one call by name with JSON
//! arguments, for adapters that carry tools over another protocol.

use schemars::{JsonSchema, Schema, SchemaGenerator};
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

/// A tool's schemas: its parameters, its answer in its envelope, and the answer's data alone.
struct Schemas {
    params: Schema,
    reply: Schema,
    data: Schema,
}

/// How a type's schema is made: whole ([`schema_of`], for function-calling APIs), or as a
/// reference into a generator's definitions (the OpenAPI document's named schemas).
trait Maker {
    fn make<T: JsonSchema>(&mut self) -> Schema;
}

/// Every schema whole.
struct Whole;

impl Maker for Whole {
    fn make<T: JsonSchema>(&mut self) -> Schema {
        schema_of::<T>()
    }
}

impl Maker for SchemaGenerator {
    fn make<T: JsonSchema>(&mut self) -> Schema {
        self.subschema_for::<T>()
    }
}

fn of<P: JsonSchema, T: JsonSchema>(m: &mut impl Maker) -> Schemas {
    Schemas { params: m.make::<P>(), reply: m.make::<ToolReply<T>>(), data: m.make::<T>() }
}

fn schemas_with(name: &str, m: &mut impl Maker) -> Option<Schemas> {
    Some(match name {
        "read_file" => of::<read::ReadFile, out::ReadFileResult>(m),
        "list_directory" => of::<read::ListDirectory, out::ListDirectoryResult>(m),
        "search_files" => of::<read::Search, out::SearchAnswer>(m),
        "glob" => of::<read::Search, out::GlobResult>(m),
        "create_file" => of::<mutate::CreateFile, out::WriteResult>(m),
        "write_file" => of::<mutate::WriteFile, out::WriteResult>(m),
        "edit_file" => of::<mutate::EditFile, out::EditResult>(m),
        "delete_file" => of::<mutate::DeleteFile, out::DeleteResult>(m),
        "restore_file" => of::<mutate::RestoreFile, out::RestoreResult>(m),
        "move_file" => of::<mutate::MoveFile, out::MoveResult>(m),
        "apply_patch" => of::<mutate::ApplyPatch, out::ApplyPatchResult>(m),
        files::NAME => of::<FilesCall, FilesResult>(m),
        _ => return None,
    })
}

fn schemas_of(name: &str) -> Option<Schemas> {
    schemas_with(name, &mut Whole)
}

/// As [`schemas`], each named type a `$ref` into `generator`'s definitions, which gathers
/// them (the OpenAPI document's `components.schemas`).
pub fn schemas_in(name: &str, generator: &mut SchemaGenerator) -> Option<(Schema, Schema)> {
    schemas_with(name, generator).map(|s| (s.params, s.reply))
}

/// The schemas of tool `name`'s parameters and of its answer in its envelope; `None` for a
/// name that is no tool.
pub fn schemas(name: &str) -> Option<(Schema, Schema)> {
    schemas_of(name).map(|s| (s.params, s.reply))
}

/// The schema of what tool `name` answers when it succeeds, without the envelope (MCP's
/// `outputSchema`, which the structured content of every successful call must match). `None`
/// for `files`, whose answer is a string unless typed results are asked for, and for a name
/// that is no tool.
pub fn output_schema(name: &str) -> Option<Schema> {
    if name == files::NAME {
        return None;
    }
    schemas_of(name).map(|s| s.data)
}

/// How tool `name` treats the workspace, as MCP's annotations say it: (read-only, destructive).
/// Reads change nothing; a change that replaces or removes what is there is destructive to the
/// workspace, even though trove keeps the old content (a pre-image, the trash) to undo it.
pub fn hints(name: &str) -> (bool, bool) {
    match name {
        "read_file" | "list_directory" | "search_files" | "glob" => (true, false),
        "create_file" | "restore_file" => (false, false),
        _ => (false, true),
    }
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
