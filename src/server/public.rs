//! The routes that need no token: liveness (`/healthz`), the API document (`/openapi.json`) and
//! the tool catalogue (`/v1/tools`), which says what the tools are, never what a workspace holds.

/// (method, path) of every route served without a token.
pub(super) const PUBLIC: &[(&str, &str)] = &[("GET", "/healthz"), ("GET", "/openapi.json"), ("GET", "/v1/tools")];

/// The answer of `GET /v1/tools`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(super) struct ToolList {
    /// Every tool, with the JSON Schemas of its parameters and of its answer.
    pub(super) tools: Vec<crate::tools::catalog::ToolSpec>,
}

/// The tool catalogue, generated once.
pub(super) fn tool_list() -> &'static ToolList {
    static LIST: std::sync::OnceLock<ToolList> = std::sync::OnceLock::new();
    LIST.get_or_init(|| ToolList { tools: crate::tools::catalog::list() })
}

/// The answer of `GET /healthz`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(super) struct Health {
    /// Always true: the server answers.
    pub(super) ok: bool,
}
