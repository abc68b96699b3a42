//! Session file-access scopes: which workspace paths a session may read and write.
//!
//! Rules (`sessions-and-file-access.md`, DESIGN.md "Sessions and scope"): entries are
//! workspace-relative prefixes matched by whole path components (`src` covers `src/a.rs`, not
//! `src2/x`); `""` is the whole workspace; write implies read; the session's own directory
//! `.sessions/<id>/` is always in scope. A scope is fixed when the session is created.

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;

/// The `file_access` of a session as given at creation. Absent, it is the whole workspace;
/// given, a list it leaves out is empty, so `{"read": ["src"]}` cannot write (and so read)
/// everything by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileAccess {
    /// Workspace-relative prefixes the session may read.
    #[serde(default)]
    #[schemars(schema_with = "prefixes_schema")]
    pub read: Vec<String>,
    /// Workspace-relative prefixes the session may write (and so read).
    #[serde(default)]
    #[schemars(schema_with = "prefixes_schema")]
    pub write: Vec<String>,
}

/// A list of scope entries: paths under the path rules, `""` for the whole workspace.
fn prefixes_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "string", "pattern": path::pattern_rooted()}})
}

fn whole() -> Vec<String> {
    vec![String::new()]
}

impl Default for FileAccess {
    fn default() -> FileAccess {
        FileAccess { read: whole(), write: whole() }
    }
}

/// A checked, normalized scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    read: Vec<Vec<u8>>,
    write: Vec<Vec<u8>>,
    own: Vec<u8>,
}

/// Whether `prefix` covers `path` by whole components (`""` covers everything).
use crate::base::path::covers;

fn normalize(list: &[String]) -> Result<Vec<Vec<u8>>> {
    list.iter()
        .map(|p| {
            path::components(p.as_bytes()).map(|c| c.join(&b'/')).map_err(|e| {
                Error::new(ErrorKind::InvalidArgument, format!("file_access entry '{p}': {}", e.message()))
            })
        })
        .collect()
}

impl Scope {
    /// The scope of session `session_id` with `access`; bad entries are `invalid_argument`.
    pub fn new(session_id: &str, access: &FileAccess) -> Result<Scope> {
        let own = path::components(format!(".sessions/{session_id}").as_bytes())
            .map_err(|_| Error::invalid_argument(format!("session id '{session_id}' cannot name a directory")))?
            .join(&b'/');
        Ok(Scope { read: normalize(&access.read)?, write: normalize(&access.write)?, own })
    }

    /// The whole workspace, read and write: an operator's scope.
    pub fn whole() -> Scope {
        Scope { read: vec![Vec::new()], write: vec![Vec::new()], own: Vec::new() }
    }

    /// Whether the session may change `path` (workspace-relative).
    pub fn can_write(&self, path: &[u8]) -> bool {
        covers(&self.own, path) || self.write.iter().any(|p| covers(p, path))
    }

    /// Write implies read.
    pub fn can_read(&self, path: &[u8]) -> bool {
        self.can_write(path) || self.read.iter().any(|p| covers(p, path))
    }

    /// Whether a listing should show directory `dir`: it is readable, or it leads to something
    /// readable (an ancestor of a scope entry). Anything else is invisible.
    pub fn dir_visible(&self, dir: &[u8]) -> bool {
        self.can_read(dir)
            || std::iter::once(&self.own).chain(&self.read).chain(&self.write).any(|p| covers(dir, p) && p != dir)
    }

    /// The `permission_denied` error for `path`.
    pub fn denied_path(path: &[u8]) -> Error {
        Error::new(ErrorKind::PermissionDenied, format!("'{}' not in session scope", path::display(path)))
    }

    /// `Ok` if the session may read `path`, else `permission_denied` naming it.
    pub fn check_read(&self, path: &[u8]) -> Result<()> {
        if self.can_read(path) {
            Ok(())
        } else {
            Err(Scope::denied_path(path))
        }
    }

    /// `Ok` if the session may write `path`, else `permission_denied` naming it.
    pub fn check_write(&self, path: &[u8]) -> Result<()> {
        if self.can_write(path) {
            Ok(())
        } else {
            Err(Scope::denied_path(path))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(read: &[&str], write: &[&str]) -> Scope {
        let access = FileAccess {
            read: read.iter().map(|s| s.to_string()).collect(),
            write: write.iter().map(|s| s.to_string()).collect(),
        };
        Scope::new("sess_1", &access).expect("scope")
    }

    #[test]
    fn whole_components_write_implies_read_and_own_dir_always() {
        let s = scope(&["projects/my-project", "shared/templates"], &["projects/my-project/output"]);
        assert!(s.can_read(b"projects/my-project/a.rs"));
        assert!(s.can_read(b"projects/my-project"));
        assert!(!s.can_read(b"projects/my-project2/a.rs"), "prefixes match whole components");
        assert!(!s.can_read(b"projects/other.rs"));
        assert!(s.can_write(b"projects/my-project/output/x"));
        assert!(!s.can_write(b"projects/my-project/a.rs"));
        assert!(s.can_read(b".sessions/sess_1/notes.md") && s.can_write(b".sessions/sess_1/notes.md"));
        assert!(!s.can_read(b".sessions/sess_2/notes.md"));
        let only_write = scope(&[], &["out"]);
        assert!(only_write.can_read(b"out/x"), "write implies read");
        assert!(!only_write.can_read(b"src/x"));
    }

    #[test]
    fn the_default_is_the_whole_workspace() {
        let s = Scope::new("sess_1", &FileAccess::default()).expect("scope");
        assert!(s.can_read(b"anything/at/all") && s.can_write(b"x"));
    }

    #[test]
    fn listings_show_only_paths_that_lead_into_scope() {
        let s = scope(&["projects/my-project"], &[]);
        assert!(s.dir_visible(b"projects"), "an ancestor of a scope entry");
        assert!(s.dir_visible(b"projects/my-project/src"));
        assert!(!s.dir_visible(b"projects/secret"));
        assert!(!s.dir_visible(b"other"));
        assert!(s.dir_visible(b".sessions"));
    }

    #[test]
    fn denials_use_the_seed_message_and_bad_entries_are_refused() {
        let s = scope(&["src"], &[]);
        let e = s.check_read(b"secrets/key").expect_err("denied");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert_eq!(e.message(), "'secrets/key' not in session scope");
        for bad in ["/etc", "../up", "a//b"] {
            let access = FileAccess { read: vec![bad.into()], write: vec![] };
            assert_eq!(Scope::new("s", &access).expect_err(bad).kind(), ErrorKind::InvalidArgument);
        }
    }
}
