//! The routes that need no token: liveness (`/healthz`) and the API document (`/openapi.json`).

/// (method, path) of every route served without a token.
pub(super) const PUBLIC: &[(&str, &str)] = &[("GET", "/healthz"), ("GET", "/openapi.json")];

/// The answer of `GET /healthz`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(super) struct Health {
    /// Always true: the server answers.
    pub(super) ok: bool,
}
