//! Where a listing or a read comes from: the live tree (`"source": "sandbox"`) or a snapshot
//! (`"source": "snapshot"` with its id), chosen as DESIGN.md's "Serving listings and reads" says.
//!
//! Automatic choice: the live tree while its directory exists, otherwise the workspace's most
//! recent snapshot, otherwise `not_found` ("No workspace available"). A caller may insist on
//! `live`, `latest` or a snapshot id. Snapshot reads follow the same rules as live ones: files
//! only (a directory is `is_directory`, a symlink is not a file), the size limit, the scope.

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use sha2::Digest;

use crate::live::{self, ChangePolicy, LiveFile};
use crate::manifest::snapshots::SnapshotInfo;
use crate::object::ObjectId;
use crate::path;
use crate::repo::Repo;
use crate::resolve::{self, Found, Resolved};
use crate::scope::Scope;
use crate::session::Session;
use crate::tree::EntryKind;
use crate::walk::{self, Excludes};

/// What a caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The live tree if it is there, else the latest snapshot.
    Auto,
    Live,
    Latest,
    /// A snapshot id or unique prefix.
    Snapshot(String),
}

impl Source {
    /// Parses the `source` query value: `live`, `latest`, or a snapshot id.
    pub fn parse(s: &str) -> Source {
        match s {
            "" | "auto" => Source::Auto,
            "live" | "sandbox" => Source::Live,
            "latest" | "snapshot" => Source::Latest,
            id => Source::Snapshot(id.to_string()),
        }
    }
}

/// What answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Sandbox,
    Snapshot(String),
}

impl Origin {
    /// The `source` field of the Files API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Sandbox => "sandbox",
            Origin::Snapshot(_) => "snapshot",
        }
    }

    pub fn snapshot_id(&self) -> Option<&str> {
        match self {
            Origin::Snapshot(id) => Some(id),
            Origin::Sandbox => None,
        }
    }
}

/// A workspace as a session sees it: its name (for snapshots) and its live directory, if any.
pub struct WorkspaceView<'a> {
    pub name: &'a str,
    /// The session whose snapshots come first when falling back (DESIGN.md: the session's most
    /// recent snapshot, or if it took none, the workspace's).
    pub session: Option<&'a str>,
    pub live_dir: Option<&'a Path>,
    pub excludes: &'a Excludes,
    pub scope: Option<&'a Scope>,
}

impl<'a> WorkspaceView<'a> {
    /// What session `s` sees: its live tree while it is served, its snapshots first, its scope.
    pub fn of_session(s: &'a Session, excludes: &'a Excludes, scope: &'a Scope) -> WorkspaceView<'a> {
        WorkspaceView {
            name: &s.workspace,
            session: Some(&s.id),
            live_dir: s.serving_dir(),
            excludes,
            scope: Some(scope),
        }
    }
}

fn no_workspace() -> Error {
    Error::new(ErrorKind::NotFound, "No workspace available for this session")
}

impl Repo {
    /// The snapshot to serve from, or `None` for the live tree.
    pub(crate) fn choose_source(&self, view: &WorkspaceView<'_>, want: &Source) -> Result<Option<SnapshotInfo>> {
        let live = view.live_dir.filter(|d| d.is_dir());
        let latest = || -> Result<Option<SnapshotInfo>> {
            let reference = match view.session.map(|s| self.session_snapshot(s)).transpose()?.flatten() {
                Some(id) => id,
                None => "latest".to_string(),
            };
            self.resolve_snapshot(&reference, Some(view.name)).map(Some).map_err(|_| no_workspace())
        };
        match want {
            Source::Auto => match live {
                Some(_) => Ok(None),
                None => latest(),
            },
            Source::Live => live.map(|_| None).ok_or_else(no_workspace),
            Source::Latest => latest(),
            Source::Snapshot(id) => self.resolve_snapshot(id, Some(view.name)).map(Some),
        }
    }

    /// Every file the session may see, from the chosen source.
    pub fn list_files(&self, view: &WorkspaceView<'_>, want: &Source) -> Result<(Vec<LiveFile>, Origin)> {
        let chosen = self.choose_source(view, want)?;
        let files = match &chosen {
            None => {
                live::list_files(view.live_dir.ok_or_else(no_workspace)?, view.excludes, view.scope, self.deadline())?
            }
            Some(snap) => {
                let mut out = Vec::new();
                self.list(snap, b"", true, &mut |p, e| {
                    if e.kind == EntryKind::File && view.scope.is_none_or(|s| s.can_read(p)) {
                        out.push(LiveFile { path: p.to_vec(), size: e.size, mtime_ns: e.mtime_ns });
                    }
                    Ok(())
                })?;
                out
            }
        };
        Ok((files, origin_of(chosen)))
    }

    /// One file's bytes from the chosen source, within the scope and the size limit. Symlinks
    /// inside the workspace are followed, in the live tree and in snapshots alike, and the
    /// scope is checked on every link followed and on the path finally read.
    pub fn read_file_from(
        &self,
        view: &WorkspaceView<'_>,
        want: &Source,
        rel: &[u8],
        limit: u64,
        policy: ChangePolicy,
    ) -> Result<(live::LiveRead, Origin)> {
        let rel = path::normalize_nonempty(rel)?;
        if let Some(scope) = view.scope {
            scope.check_read(&rel)?;
        }
        let chosen = self.choose_source(view, want)?;
        let read = match &chosen {
            None => {
                let fd = walk::open_root(view.live_dir.ok_or_else(no_workspace)?)?;
                let resolved = live::resolve(&fd, &rel)?;
                check_resolved(view.scope, &rel, &resolved)?;
                live::read_resolved(&fd, &rel, &resolved, limit, policy)?
            }
            Some(snap) => {
                let shown = path::display(&rel).into_owned();
                let resolved = self.resolve_in_snapshot(snap, &rel)?;
                check_resolved(view.scope, &rel, &resolved)?;
                match resolved.kind {
                    Found::Dir => {
                        return Err(Error::new(
                            ErrorKind::IsDirectory,
                            format!("'{shown}' is a directory: list it instead"),
                        ))
                    }
                    Found::File => {}
                    _ => return Err(Error::new(ErrorKind::NotFound, format!("file '{shown}' not found"))),
                }
                let entry = self.lookup(snap, &resolved.path)?;
                if entry.size > limit {
                    return Err(Error::new(
                        ErrorKind::TooLarge,
                        format!("'{shown}' is {} bytes, over the {limit}-byte limit", entry.size),
                    ));
                }
                let bytes = self.read_content(&entry)?;
                let sha256 = entry.sha256.unwrap_or_else(|| sha2::Sha256::digest(&bytes).into());
                live::LiveRead { path: rel.clone(), bytes, mtime_ns: entry.mtime_ns, sha256 }
            }
        };
        Ok((read, origin_of(chosen)))
    }

    /// Where `rel` leads in snapshot `snap`, following its symlinks as the live tree would.
    pub fn resolve_in_snapshot(&self, snap: &SnapshotInfo, rel: &[u8]) -> Result<Resolved> {
        let conn = self.manifest.conn();
        // The directory looked in last and its tree: most lookups go one level below it.
        let mut at: Option<(Vec<u8>, Option<ObjectId>)> = None;
        let mut look = |dir: &[u8], name: &[u8]| -> Result<Found> {
            if at.as_ref().is_none_or(|(p, _)| p != dir) {
                let tree = match self.lookup(snap, dir) {
                    Ok(e) if e.kind == EntryKind::Dir => e.content,
                    Ok(_) => None,
                    Err(e) if e.kind() == ErrorKind::NotFound => None,
                    Err(e) => return Err(e),
                };
                at = Some((dir.to_vec(), tree));
            }
            let Some((_, Some(tree))) = at.as_ref() else { return Ok(Found::Missing) };
            Ok(match self.trees.entry(conn, tree, name)? {
                None => Found::Missing,
                Some(e) => match e.kind {
                    EntryKind::Dir => Found::Dir,
                    EntryKind::File => Found::File,
                    EntryKind::Symlink => Found::Symlink(e.target.unwrap_or_default()),
                },
            })
        };
        resolve::resolve(rel, &mut look)
    }
}

/// The scope applied to what a read really touches: every link it followed and the path it
/// reaches must be readable, so no link carries a session outside its scope (or into another
/// session's `.sessions/` directory). The denial names the path asked for, not where it leads.
fn check_resolved(scope: Option<&Scope>, rel: &[u8], resolved: &Resolved) -> Result<()> {
    let Some(scope) = scope else { return Ok(()) };
    let escapes = resolved.links.iter().chain(std::iter::once(&resolved.path)).any(|p| !scope.can_read(p));
    if escapes {
        return Err(Error::new(ErrorKind::PermissionDenied, format!("'{}' not in session scope", path::display(rel)))
            .with_detail("reason", "it is a symlink that leads outside the session's scope"));
    }
    Ok(())
}

fn origin_of(chosen: Option<SnapshotInfo>) -> Origin {
    chosen.map_or(Origin::Sandbox, |s| Origin::Snapshot(s.id))
}
