//! The OpenAPI 3.1 document served at `/openapi.json`, built from one table of operations.
//! A test checks the table against the routes the server registers, both ways.

use serde_json::{json, Map, Value};

/// One documented operation: method, path (axum syntax), summary, query parameters, and the
/// statuses it answers with.
struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: &'static [(&'static str, &'static str)],
    statuses: &'static [u16],
}

const SOURCE: (&str, &str) = ("source", "`live`, `latest` or a snapshot id; automatic when absent");
const DOWNLOAD: (&str, &str) = ("download", "`1`: the raw bytes with the sha256 as ETag instead of JSON");
const POLICY: (&str, &str) = ("change_policy", "`retry` (default) or `abort`: 409 when the file changes while read");

const OPS: &[Op] = &[
    Op {
        method: "GET",
        path: "/api/sessions/{id}/files",
        summary: "List a session's files (live tree, else its latest snapshot)",
        query: &[SOURCE],
        statuses: &[200, 400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/api/sessions/{id}/files/",
        summary: "Answers 400: the file path is missing",
        query: &[],
        statuses: &[400, 401],
    },
    Op {
        method: "GET",
        path: "/api/sessions/{id}/files/{*path}",
        summary: "Read one file of a session (1 MiB limit as JSON)",
        query: &[SOURCE, DOWNLOAD, POLICY],
        statuses: &[200, 304, 400, 401, 403, 404, 409],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/files",
        summary: "Same as /api/sessions/{id}/files",
        query: &[SOURCE],
        statuses: &[200, 400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/files/",
        summary: "Answers 400: the file path is missing",
        query: &[],
        statuses: &[400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Same as /api/sessions/{id}/files/{path}",
        query: &[SOURCE, DOWNLOAD, POLICY],
        statuses: &[200, 304, 400, 401, 403, 404, 409],
    },
    Op {
        method: "PUT",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Write the body to the file: `If-Match: <sha256>` overwrites that content only, `If-None-Match: *` creates only; 412 otherwise",
        query: &[],
        statuses: &[200, 201, 400, 401, 403, 404, 409, 412, 413],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}/files/{*path}",
        summary: "Move the file or directory to the trash; `If-Match: <sha256>` makes it conditional",
        query: &[],
        statuses: &[200, 400, 401, 403, 404, 409, 412],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/tools/{tool}",
        summary: "Run an agent file tool (read_file, list_directory, search_files, glob, create_file, write_file, edit_file, delete_file, restore_file, move_file, apply_patch); answers 200 with {ok, data | error}",
        query: &[],
        statuses: &[200, 400, 401, 404, 413],
    },
    Op {
        method: "POST",
        path: "/v1/sessions",
        summary: "Create a session (persistent, ttl, metadata, file_access, workspace)",
        query: &[],
        statuses: &[201, 400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/sessions",
        summary: "List sessions",
        query: &[("include_ended", "`true` also lists ended sessions")],
        statuses: &[200, 401],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions",
        summary: "End sessions in bulk; answers {\"deleted\": n}",
        query: &[("status", "`idle`: only sessions with no request in flight"), ("older_than", "e.g. `2h`, `1h30m`")],
        statuses: &[200, 400, 401],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}",
        summary: "Get a session record (404 once ended)",
        query: &[],
        statuses: &[200, 401, 404],
    },
    Op {
        method: "DELETE",
        path: "/v1/sessions/{id}",
        summary: "End a session: final snapshot, data kept",
        query: &[],
        statuses: &[204, 401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/pause",
        summary: "Snapshot a session and stop serving its live tree",
        query: &[],
        statuses: &[200, 401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/resume",
        summary: "Serve a paused session's live tree again",
        query: &[],
        statuses: &[200, 401, 404],
    },
    Op {
        method: "POST",
        path: "/v1/sessions/{id}/snapshots",
        summary: "Take a snapshot of a session's live tree",
        query: &[],
        statuses: &[201, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/sessions/{id}/snapshots",
        summary: "List the snapshots of a session's workspace",
        query: &[],
        statuses: &[200, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots",
        summary: "List snapshots",
        query: &[("workspace", "only this workspace's")],
        statuses: &[200, 401],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}",
        summary: "Get one snapshot (id, unique prefix, or `latest`)",
        query: &[],
        statuses: &[200, 400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/files",
        summary: "List the files of a snapshot",
        query: &[("prefix", "only files under this directory")],
        statuses: &[200, 400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/files/{*path}",
        summary: "Read one file of a snapshot",
        query: &[DOWNLOAD],
        statuses: &[200, 304, 400, 401, 404],
    },
    Op {
        method: "GET",
        path: "/v1/snapshots/{snap}/export",
        summary: "Export a snapshot (or a path in it) as a tar stream",
        query: &[("path", "a file or directory in the snapshot"), ("format", "`tar` (default) or `tar.zst`")],
        statuses: &[200, 400, 401, 404],
    },
    Op { method: "GET", path: "/healthz", summary: "Liveness; no token needed", query: &[], statuses: &[200] },
    Op {
        method: "GET",
        path: "/openapi.json",
        summary: "This document; no token needed",
        query: &[],
        statuses: &[200],
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
        400 => "invalid_path, invalid_argument, too_large, is_directory or not_text",
        401 => "unauthorized: missing or unknown bearer token",
        403 => "permission_denied: outside the session's scope",
        404 => "not_found",
        409 => "conflict: the file changed while read",
        _ => "error",
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in OPS {
        let path = op.path.replace("{*", "{");
        let mut params: Vec<Value> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        params.extend(op.query.iter().map(|(name, what)| {
            json!({"name": name, "in": "query", "required": false, "description": what, "schema": {"type": "string"}})
        }));
        let mut responses = Map::new();
        for s in op.statuses {
            let mut r = json!({"description": description(*s)});
            if *s >= 400 {
                r["content"] = json!({"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}});
            }
            responses.insert(s.to_string(), r);
        }
        let mut operation = json!({"summary": op.summary, "parameters": params, "responses": responses});
        if !op.path.starts_with("/healthz") && !op.path.starts_with("/openapi") {
            operation["security"] = json!([{"bearer": []}]);
        }
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[op.method.to_ascii_lowercase()] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "trove", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Sessions, their files (live or from snapshots), and snapshots."},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": {
                "type": "object",
                "required": ["error", "kind", "statusCode"],
                "properties": {
                    "error": {"type": "string"},
                    "message": {"type": "string"},
                    "kind": {"type": "string"},
                    "statusCode": {"type": "integer"}
                }
            }}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_and_every_operation_routed() {
        let mut routed = crate::server::route_list();
        let mut documented = documented();
        routed.sort();
        documented.sort();
        assert_eq!(routed, documented);
        let doc = document();
        for (method, path) in routed {
            let p = path.replace("{*", "{");
            assert!(doc["paths"][&p][method.to_ascii_lowercase()].is_object(), "{method} {p}");
        }
    }
}
