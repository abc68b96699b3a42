//! The tools over the Model Context Protocol (the `rmcp` crate): `tools/list` answers every
//! tool of [`super::catalog`] with its parameters' JSON Schema, and `tools/call` runs one in
//! the session the server was opened for. Transport-free: `trove mcp` serves it on stdio, and
//! `trove serve` over streamable HTTP at `/v1/sessions/{id}/mcp`; each supplies the [`Runner`]
//! that carries a call out (on its own blocking thread, or on the server's pool).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::output::ToolError;
use crate::base::error::Result;
use crate::base::id::SessionId;

/// A call on its way: (tool name, JSON arguments) to the tool's JSON result.
pub type Runner = Arc<dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value>> + Send>> + Send + Sync>;

/// The MCP server of one session's tools.
#[derive(Clone)]
pub struct McpTools {
    session: SessionId,
    run: Runner,
}

impl McpTools {
    /// The tools of `session`, each call carried out by `run`.
    pub fn new(session: SessionId, run: Runner) -> McpTools {
        McpTools { session, run }
    }
}

/// What a call answers an MCP client: the result as text (a string as it is, anything else as
/// JSON) and, when it is an object, as structured content too; a refusal is a tool error
/// (`isError`) carrying trove's error, so the model can read it and act.
fn answer(result: Result<Value>) -> CallToolResult {
    match result {
        Ok(Value::String(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Ok(v @ Value::Object(_)) => CallToolResult::structured(v),
        Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
        Err(e) => {
            let error = serde_json::to_value(ToolError::of(&e)).unwrap_or(Value::Null);
            CallToolResult::structured_error(serde_json::json!({ "error": error }))
        }
    }
}

impl ServerHandler for McpTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trove", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The files of trove session {}: read them, then change them with the sha256 you read \
                 (the stale-file protocol); every change is journaled, audited and undoable, and deletions \
                 go to the trash.",
                self.session
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        let tools = super::catalog::list()
            .into_iter()
            .map(|spec| {
                let params = match spec.parameters {
                    Value::Object(o) => o,
                    _ => serde_json::Map::new(),
                };
                let (read_only, destructive) = super::catalog::hints(&spec.name);
                // Every tool reaches the session's workspace and nothing else.
                let hints = ToolAnnotations::new().read_only(read_only).destructive(destructive).open_world(false);
                let output = super::catalog::output_schema(&spec.name).and_then(|s| object_schema(s.into()));
                let tool = Tool::new(spec.name, spec.description, Arc::new(params)).annotate(hints);
                match output {
                    Some(o) => tool.with_raw_output_schema(Arc::new(o)),
                    None => tool,
                }
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        if super::catalog::schemas(&request.name).is_none() {
            return Err(ErrorData::invalid_params(format!("no tool '{}'", request.name), None));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(answer((self.run)(request.name.to_string(), args).await).into())
    }
}

/// `schema` as MCP's `outputSchema` takes it: an object at its root. An answer that is one of
/// several objects (`search_files`: lines, or files for a glob) is an `anyOf` of objects, and
/// says `"type": "object"` beside it; any other shape has no output schema.
fn object_schema(schema: Value) -> Option<serde_json::Map<String, Value>> {
    let Value::Object(mut o) = schema else { return None };
    let object = Value::from("object");
    if o.get("type") == Some(&object) {
        return Some(o);
    }
    let alternatives = o.get("anyOf").or_else(|| o.get("oneOf")).and_then(Value::as_array)?;
    if o.get("type").is_none() && alternatives.iter().all(|a| a.get("type") == Some(&object)) {
        o.insert("type".into(), object);
        return Some(o);
    }
    None
}
