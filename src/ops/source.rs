//! Where a listing or a read comes from: the live tree (`"source": "sandbox"`) or a snapshot
//! (`"source": "snapshot"` with its id), chosen as DESIGN.md's "Serving listings and reads" says.
//!
//! Automatic choice: the live tree while its directory exists, otherwise the workspace's most
//! recent snapshot, otherwise `not_found` ("No workspace available"). A caller may insist on
//! `live`, `latest` or a snapshot id. Snapshot reads follow the same rules as live ones: files
//! only (a directory is `is_directory`, a symlink is not a file), the size limit, the scope.

use std::path::Path;

use std::io::Read;
use std::os::unix::fs::MetadataExt;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::{SessionId, SnapshotId};
use crate::object::Sha256;
use crate::ops::view::ContentReader;
use sha2::Digest;

use crate::base::path;
use crate::fs::live::{self, ChangePolicy, LiveFile};
use crate::fs::resolve::{self, Found, Resolved};
use crate::fs::walk::{self, Excludes};
use crate::model::scope::Scope;
use crate::model::session::Session;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::EntryKind;
use crate::object::ObjectId;
use crate::repo::Repo;

/// What a caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The live tree if it is there, else the latest snapshot.
    Auto,
    /// The live tree only; `not_found` when it is not served.
    Live,
    /// The latest snapshot (the session's, else the workspace's).
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
    /// The live tree.
    Sandbox,
    /// This snapshot.
    Snapshot(SnapshotId),
}

impl Origin {
    /// The `source` field of the Files API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Sandbox => "sandbox",
            Origin::Snapshot(_) => "snapshot",
        }
    }

    /// The snapshot that answered, if one did.
    pub fn snapshot_id(&self) -> Option<&SnapshotId> {
        match self {
            Origin::Snapshot(id) => Some(id),
            Origin::Sandbox => None,
        }
    }
}

/// A workspace as a session sees it: its name (for snapshots) and its live directory, if any.
pub struct WorkspaceView<'a> {
    /// The workspace's name.
    pub name: &'a str,
    /// The session whose snapshots come first when falling back (DESIGN.md: the session's most
    /// recent snapshot, or if it took none, the workspace's).
    pub session: Option<&'a SessionId>,
    /// The live tree, while it is served.
    pub live_dir: Option<&'a Path>,
    /// What listings of the live tree leave out.
    pub excludes: &'a Excludes,
    /// The session's scope; `None` for an operator.
    pub scope: Option<&'a Scope>,
}

impl<'a> WorkspaceView<'a> {
    /// What an operator sees of a snapshot: its workspace's name, no live tree, no scope.
    pub fn of_snapshot(snap: &'a SnapshotInfo, excludes: &'a Excludes) -> WorkspaceView<'a> {
        WorkspaceView { name: &snap.workspace, session: None, live_dir: None, excludes, scope: None }
    }

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

/// Who a view belongs to, for a message: its session, else its workspace.
fn whose(view: &WorkspaceView<'_>) -> String {
    match view.session {
        Some(id) => format!("session {id}"),
        None => format!("workspace '{}'", view.name),
    }
}

impl Repo {
    /// The snapshot to serve from, or `None` for the live tree.
    pub(crate) fn choose_source(&self, view: &WorkspaceView<'_>, want: &Source) -> Result<Option<SnapshotInfo>> {
        let live = view.live_dir.filter(|d| self.reads_live_trees() && d.is_dir());
        // Asked for by name, a source that is not there says so and what to ask for instead;
        // the automatic choice answers as the seed does.
        let no_snapshot = || {
            Error::not_found(format!(
                "{} has no snapshot yet: take one first, or read the live tree (source live)",
                whose(view)
            ))
            .with_detail("source", "latest")
        };
        let no_live = || {
            Error::not_found(format!(
                "{} has no live tree (ended, paused or its directory gone): read its latest snapshot (source latest)",
                whose(view)
            ))
            .with_detail("source", "live")
        };
        let latest = |none: &dyn Fn() -> Error| -> Result<Option<SnapshotInfo>> {
            let reference = match view.session.map(|s| self.session_snapshot(s)).transpose()?.flatten() {
                Some(id) => id.to_string(),
                None => "latest".to_string(),
            };
            // Only "no such snapshot" means there is nothing to serve; a damaged manifest or a
            // failed read is reported as itself.
            self.resolve_snapshot(&reference, Some(view.name)).map(Some).map_err(|e| {
                if e.kind() == ErrorKind::NotFound {
                    none()
                } else {
                    e
                }
            })
        };
        match want {
            Source::Auto => match live {
                Some(_) => Ok(None),
                None => latest(&no_workspace),
            },
            Source::Live => live.map(|_| None).ok_or_else(no_live),
            Source::Latest => latest(&no_snapshot),
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

    /// Opens one file of the chosen source for streaming, within the scope. Symlinks inside
    /// the workspace are followed, in the live tree and in snapshots alike, and the scope is
    /// checked on every link followed and on the path finally read.
    pub fn open_file_from(&self, view: &WorkspaceView<'_>, want: &Source, rel: &[u8]) -> Result<(Opened<'_>, Origin)> {
        let rel = path::normalize_nonempty(rel)?;
        if let Some(scope) = view.scope {
            scope.check_read(&rel)?;
        }
        let chosen = self.choose_source(view, want)?;
        let opened = match &chosen {
            None => {
                let fd = walk::open_root(view.live_dir.ok_or_else(no_workspace)?)?;
                let resolved = live::resolve(&fd, &rel)?;
                check_resolved(view.scope, &rel, &resolved)?;
                let (file, meta) = live::open_resolved(&fd, &rel, &resolved)?;
                Opened {
                    size: meta.len(),
                    mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
                    sha256: None,
                    body: Body::Live { at_open: live::fingerprint(&meta), file },
                    path: rel,
                }
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
                Opened {
                    size: entry.size,
                    mtime_ns: entry.mtime_ns,
                    sha256: entry.sha256,
                    body: Body::Snapshot(Box::new(self.open_content(&entry)?)),
                    path: rel,
                }
            }
        };
        Ok((opened, origin_of(chosen)))
    }

    /// One file's bytes from the chosen source, whole, within the scope and the size limit,
    /// holding a share of the memory budget for as long as the bytes are held. A live file
    /// that changes while it is read is never returned torn: `policy` says whether to read it
    /// again.
    pub fn read_file_from(
        &self,
        view: &WorkspaceView<'_>,
        want: &Source,
        rel: &[u8],
        limit: u64,
        policy: ChangePolicy,
    ) -> Result<(live::LiveRead, Origin)> {
        let attempts = if policy == ChangePolicy::Abort { 1 } else { live::READ_ATTEMPTS };
        let shown = || path::display(rel).into_owned();
        for _ in 0..attempts {
            let (mut opened, origin) = self.open_file_from(view, want, rel)?;
            if opened.size > limit {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("'{}' is {} bytes, over the {limit}-byte limit", shown(), opened.size),
                ));
            }
            let held = self.hold(opened.size)?;
            let mut bytes = Vec::with_capacity(opened.size as usize);
            // One byte past the limit tells a file that grew since it was opened.
            (&mut opened).take(limit + 1).read_to_end(&mut bytes).map_err(crate::base::error::from_io)?;
            if bytes.len() as u64 > limit {
                return Err(Error::new(ErrorKind::TooLarge, format!("'{}' grew past the {limit}-byte limit", shown())));
            }
            if opened.unchanged()? && bytes.len() as u64 == opened.size {
                let sha256 = opened.sha256.unwrap_or_else(|| sha2::Sha256::digest(&bytes).into());
                let read =
                    live::LiveRead { path: opened.path, bytes, mtime_ns: opened.mtime_ns, sha256, _held: Some(held) };
                return Ok((read, origin));
            }
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!("'{}' changed while it was read: read it again when its writer is done", shown()),
        ))
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
            Ok(match self.caches.trees.entry(conn, tree, name)? {
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

/// A file opened for streaming from a live tree or a snapshot.
pub struct Opened<'r> {
    /// The path as asked for (a link is read as its target, under its own name).
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime_ns: i64,
    /// Known before reading for a snapshot file; a live file's is the hash of what is read.
    pub sha256: Option<Sha256>,
    body: Body<'r>,
}

enum Body<'r> {
    /// The open file and what it looked like when opened.
    Live { file: std::fs::File, at_open: live::Fingerprint },
    /// A snapshot's content, verified object by object as it is read.
    Snapshot(Box<ContentReader<'r>>),
}

/// Reads `r` to its end a buffer at a time, handing each buffer to `each`; returns the sha256
/// of everything read.
pub fn stream_hashed(r: &mut dyn Read, mut each: impl FnMut(&[u8]) -> Result<()>) -> Result<Sha256> {
    let mut sha = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(crate::base::error::from_io(e)),
        };
        sha.update(&buf[..n]);
        each(&buf[..n])?;
    }
    Ok(sha.finalize().into())
}

impl Opened<'_> {
    /// Whether a live file still looks as it did when opened (a snapshot never changes): a
    /// read that ends with `false` may be torn and must not be served.
    pub fn unchanged(&self) -> Result<bool> {
        match &self.body {
            Body::Live { file, at_open } => {
                let meta = file.metadata().map_err(|e| Error::io("stat", Path::new(&*path::display(&self.path)), e))?;
                Ok(live::fingerprint(&meta) == *at_open)
            }
            Body::Snapshot(_) => Ok(true),
        }
    }

    /// Whether the bytes come from a snapshot (whose reader verifies them) or the live tree.
    pub fn is_live(&self) -> bool {
        matches!(self.body, Body::Live { .. })
    }
}

impl Read for Opened<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.body {
            Body::Live { file, .. } => file.read(buf),
            Body::Snapshot(r) => r.read(buf),
        }
    }
}

fn origin_of(chosen: Option<SnapshotInfo>) -> Origin {
    chosen.map_or(Origin::Sandbox, |s| Origin::Snapshot(s.id))
}

/// What answered a read: the live tree, or a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The session's live tree.
    Sandbox,
    /// A snapshot, named beside it.
    Snapshot,
}

/// The `source` and `snapshot` fields of every read.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Answered {
    /// What answered.
    pub source: SourceKind,
    /// The snapshot that answered, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotId>,
}

impl From<&Origin> for Answered {
    fn from(origin: &Origin) -> Answered {
        match origin {
            Origin::Sandbox => Answered { source: SourceKind::Sandbox, snapshot: None },
            Origin::Snapshot(id) => Answered { source: SourceKind::Snapshot, snapshot: Some(id.clone()) },
        }
    }
}

/// A listing of files as the Files API (`files-api.md`) and `trove session files --json` show
/// it: `{"files": [{path, pathBase64?, size, modifiedAt}], "source", "snapshot"?}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct FileListing<'a> {
    /// The files, in path order.
    pub files: Vec<ListedFile<'a>>,
    /// What answered.
    pub source: SourceKind,
    /// The snapshot that answered, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<&'a SnapshotId>,
}

/// One file of a [`FileListing`].
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListedFile<'a> {
    /// The workspace-relative path, with U+FFFD for bytes that are not UTF-8.
    pub path: std::borrow::Cow<'a, str>,
    /// The exact path bytes in standard base64, only when the path is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 UTC.
    pub modified_at: String,
}

impl<'a> FileListing<'a> {
    /// The listing of `files`, as `origin` answered them.
    pub fn of(files: &'a [LiveFile], origin: &'a Origin) -> FileListing<'a> {
        let files = files.iter().map(ListedFile::of).collect();
        FileListing { files, source: Answered::from(origin).source, snapshot: origin.snapshot_id() }
    }
}

impl<'a> ListedFile<'a> {
    /// How `f` is listed.
    pub fn of(f: &'a LiveFile) -> ListedFile<'a> {
        use base64::Engine;
        ListedFile {
            path: String::from_utf8_lossy(&f.path),
            path_base64: std::str::from_utf8(&f.path)
                .is_err()
                .then(|| base64::engine::general_purpose::STANDARD.encode(&f.path)),
            size: f.size,
            modified_at: crate::base::time::iso_time(f.mtime_ns),
        }
    }

    /// The same entry, owning its path.
    pub fn into_owned(self) -> ListedFile<'static> {
        ListedFile { path: std::borrow::Cow::Owned(self.path.into_owned()), ..self }
    }
}
