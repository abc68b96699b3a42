//! The sandbox file API (`sandbox-file-operations.md`): `/v1/file/*` for a session's files, as
//! a client written against that seed expects them: paths relative to the workspace or
//! absolute under the session's sandbox root, 0-based line ranges, the `success` / `message` /
//! `data` wrapper with the seed's error fields. Every operation goes through the agent tools
//! underneath (`tools::run`), so scope, exclusions, limits, journaling, audit and the trash
//! apply exactly as for them; what the seed allows and the tools do not (a write without the
//! file's sha256) keeps the pre-image and is audited all the same, unless the session was
//! created with `require_sha256`.

pub mod ops;
pub mod reply;
pub mod watch;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;
use crate::model::session::Session;
use crate::repo::Repo;

pub use reply::{FileError, FileReply};

/// Where absolute paths map onto a workspace unless a session or the server says otherwise.
pub const DEFAULT_SANDBOX_ROOT: &str = "/workspace";

/// The JSON Schema of a path the file API takes: relative, or absolute (under the sandbox
/// root, which a schema cannot know), with the path rules' components.
pub fn path_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let relative = path::pattern_nonempty();
    let pattern = format!("^/?{}", relative.trim_start_matches('^'));
    schemars::json_schema!({"type": "string", "pattern": pattern})
}

/// As [`path_schema`], or empty for the workspace root.
pub fn path_or_root_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let relative = path::pattern_nonempty();
    let pattern = format!("^/?$|^/?{}", relative.trim_start_matches('^'));
    schemars::json_schema!({"type": "string", "pattern": pattern})
}

/// Workspace path `rel` shown under sandbox root `root` (absolute) or as it is (relative).
pub fn show_path(root: &str, rel: &[u8], style: Style) -> String {
    let shown = path::display(rel);
    match (style, rel.is_empty()) {
        (Style::Relative, _) => shown.into_owned(),
        (Style::Absolute, true) => root.to_string(),
        (Style::Absolute, false) if root == "/" => format!("/{shown}"),
        (Style::Absolute, false) => format!("{root}/{shown}"),
    }
}

/// How a request named a path, so answers name paths the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Under the sandbox root.
    Absolute,
    /// Workspace-relative.
    Relative,
}

/// One call's context: the repository, the session, who calls, and the sandbox root.
pub struct Sandbox<'a> {
    /// The repository.
    pub repo: &'a Repo,
    /// The session whose workspace is served.
    pub session: &'a Session,
    /// Who calls (the audit actor).
    pub actor: &'a str,
    root: String,
}

impl<'a> Sandbox<'a> {
    /// The context of a call on `session`; its sandbox root is the session's, else `default`.
    pub fn new(repo: &'a Repo, session: &'a Session, actor: &'a str, default: &str) -> Sandbox<'a> {
        let root = session.options.sandbox_root.as_deref().unwrap_or(default);
        let root = root.strip_suffix('/').filter(|r| !r.is_empty()).unwrap_or(root).to_string();
        Sandbox { repo, session, actor, root }
    }

    /// The sandbox root, without a trailing `/` (`/` itself stays `/`).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The workspace-relative path `given` names: relative as it is, or absolute at or below
    /// the sandbox root. Another absolute path is `permission_denied` (outside what the
    /// session may reach), naming the path and the root; `..`, a backslash or NUL is
    /// `invalid_path`.
    pub fn rel(&self, given: &str) -> Result<(Vec<u8>, Style)> {
        let Some(stripped) = given.strip_prefix('/') else {
            return Ok((path::from_text(given)?, Style::Relative));
        };
        let rest = if self.root == "/" {
            Some(stripped)
        } else {
            let root = self.root.trim_start_matches('/');
            stripped
                .strip_prefix(root)
                .filter(|r| r.is_empty() || r.starts_with('/'))
                .map(|r| r.trim_start_matches('/'))
        };
        match rest {
            Some(r) => Ok((path::from_text(r)?, Style::Absolute)),
            // Outside what the session may reach: refused as a scope is.
            None => Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "'{}' is outside the sandbox: give a path under {} or one relative to the workspace",
                    given.escape_debug(),
                    self.root
                ),
            )
            .with_detail("path", given)),
        }
    }

    /// As [`Sandbox::rel`], unless `exact` (standard base64 of the workspace-relative bytes, for
    /// a name that is not UTF-8) is given: then those bytes, under the same path rules.
    pub fn rel_exact(&self, given: &str, exact: Option<&str>) -> Result<(Vec<u8>, Style)> {
        let Some(b64) = exact else { return self.rel(given) };
        // `given` is only shown: the lossy text of a name that is not UTF-8 may break the path
        // rules (U+FFFD takes three bytes) where the exact bytes do not.
        let bytes = path::exact_or_text(given, Some(b64))?;
        Ok((path::normalize_nonempty(&bytes)?, Style::Relative))
    }

    /// A workspace path shown as the request named its base.
    pub fn show(&self, rel: &[u8], style: Style) -> String {
        show_path(&self.root, rel, style)
    }

    /// Refuses `sudo: true`: trove serves the session's workspace as the session, nothing more.
    pub fn no_sudo(&self, sudo: Option<bool>, given: &str) -> Result<()> {
        match sudo {
            Some(true) => Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "sudo is not available for '{}': the file API acts within the session's scope only",
                    given.escape_debug()
                ),
            )
            .with_detail("path", given)),
            _ => Ok(()),
        }
    }
}
