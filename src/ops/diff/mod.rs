//! Diffs between two states of a workspace (snapshots, the live tree, or nothing): which paths
//! changed and how, renames, line counts and unified patches. `tree` finds the changed paths,
//! `renames` pairs deletions with additions, `content` compares one file's bytes.

pub mod content;
pub mod renames;
pub mod session;
pub mod tree;

use std::path::{Path, PathBuf};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::SessionId;
use crate::base::time::{iso_time, now_ns};
use crate::fs::walk::{self, WalkOptions};
use crate::manifest::{snapshots, workspaces};
use crate::model::diff::{ChangeStatus, DiffEntry, DiffReport, DiffStats, Endpoint, EndpointKind};
use crate::model::scope::Scope;
use crate::model::session::{Session, Status};
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::{Entry, EntryKind};
use crate::ops::live_read::{read_whole, LiveTree};
use crate::ops::scan::Built;
use crate::ops::snapshot::SnapshotOptions;
use crate::repo::Repo;

use self::content::Side;
use self::tree::{diff_trees, PathSelect, Trees};

/// The rename threshold when none is given, in percent (git's default).
pub const DEFAULT_RENAME_THRESHOLD: u8 = 50;

/// One side of a diff.
#[derive(Debug, Clone)]
pub enum DiffTarget {
    /// A snapshot.
    Snapshot(Box<SnapshotInfo>),
    /// The live directory `dir` of `workspace`, read now (the workspace's exclusions apply).
    Live {
        /// The directory.
        dir: PathBuf,
        /// Its workspace, whose exclusions and directory cache are used.
        workspace: String,
    },
    /// The empty tree: what there was before a workspace's first snapshot.
    Empty,
}

impl DiffTarget {
    fn endpoint(&self, read_ns: i64) -> Endpoint {
        match self {
            DiffTarget::Snapshot(s) => Endpoint {
                kind: EndpointKind::Snapshot,
                snapshot: Some(s.id.clone()),
                at: Some(iso_time(s.created_ns)),
            },
            DiffTarget::Live { .. } => {
                Endpoint { kind: EndpointKind::Live, snapshot: None, at: Some(iso_time(read_ns)) }
            }
            DiffTarget::Empty => Endpoint { kind: EndpointKind::Empty, snapshot: None, at: None },
        }
    }
}

/// What a diff looks at and how much it says.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Workspace-relative paths to limit the diff to (files or directories); empty: all.
    pub paths: Vec<Vec<u8>>,
    /// What the caller may read; paths outside it are not shown.
    pub scope: Scope,
    /// Rename detection: `None` off, `Some(t)` pairs identical content and text at least `t`
    /// percent similar (100: identical only).
    pub renames: Option<u8>,
    /// Count lines added and removed in text files.
    pub lines: bool,
    /// Write the unified patch of each entry.
    pub patch: bool,
    /// Lines of context around each hunk.
    pub context: usize,
    /// At most this many entries (the totals still count every change).
    pub limit: Option<usize>,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            paths: Vec::new(),
            scope: Scope::whole(),
            renames: Some(DEFAULT_RENAME_THRESHOLD),
            lines: true,
            patch: false,
            context: 3,
            limit: None,
        }
    }
}

/// A raw change: (path, old entry, new entry).
type Change = (Vec<u8>, Option<Entry>, Option<Entry>);

fn status_of(old: Option<&Entry>, new: Option<&Entry>) -> ChangeStatus {
    match (old, new) {
        (None, _) => ChangeStatus::Added,
        (_, None) => ChangeStatus::Deleted,
        (Some(o), Some(n)) if o.kind != n.kind => ChangeStatus::TypeChanged,
        (Some(o), Some(n)) => {
            let same = match o.kind {
                EntryKind::File => o.content == n.content,
                _ => o.target == n.target,
            };
            if same {
                ChangeStatus::ModeChanged
            } else {
                ChangeStatus::Modified
            }
        }
    }
}

impl Repo {
    /// Resolves one side of a diff named on a command line or in a URL: `live` (the directory
    /// `dir`, else the workspace's last snapshotted directory), `empty`, a session id (its
    /// live tree while it runs, else its last snapshot), or a snapshot (`latest`, an id or a
    /// unique prefix) of `workspace`.
    pub fn diff_target(&self, reference: &str, workspace: Option<&str>, dir: Option<&Path>) -> Result<DiffTarget> {
        match reference {
            "live" => self.live_target(workspace, dir),
            "empty" => Ok(DiffTarget::Empty),
            r => {
                let session = SessionId::parse(r).ok();
                if let Some(id) = &session {
                    if let Some(s) = crate::manifest::sessions::get(self.manifest.conn(), id)? {
                        return self.session_now(&s);
                    }
                }
                match self.resolve_snapshot(r, workspace) {
                    Ok(snap) => Ok(DiffTarget::Snapshot(Box::new(snap))),
                    // A session id that names no session here (another node's, in a fleet).
                    Err(e) if session.is_some() && e.kind() == ErrorKind::InvalidArgument => {
                        Err(Error::not_found(format!("no session or snapshot '{r}' here")))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn live_target(&self, workspace: Option<&str>, dir: Option<&Path>) -> Result<DiffTarget> {
        let conn = self.manifest.conn();
        let ws = match workspace {
            Some(w) => workspaces::get(conn, w)?,
            None => None,
        };
        let dir = match (dir, ws.as_ref().and_then(|w| w.root.clone())) {
            (Some(d), _) => d.to_path_buf(),
            (None, Some(_)) if !self.reads_live_trees() => {
                return Err(Error::invalid_argument(format!(
                    "workspace '{}' is another node's: its live tree is on that node's host; compare with one of its snapshots, or pass --dir DIR",
                    workspace.unwrap_or_default()
                )))
            }
            (None, Some(root)) => {
                PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(root))
            }
            (None, None) => {
                return Err(Error::invalid_argument(
                    "`live` needs a directory: pass --dir DIR (or --workspace W of a workspace snapshotted before)",
                ))
            }
        };
        let workspace = match workspace {
            Some(w) => w.to_string(),
            None => dir.file_name().and_then(|n| n.to_str()).map(str::to_string).ok_or_else(|| {
                Error::invalid_argument(format!("name the workspace of {}: pass --workspace W", dir.display()))
            })?,
        };
        Ok(DiffTarget::Live { dir, workspace })
    }

    /// A session's state now: its live tree while it runs, else its last snapshot (else what
    /// it started from).
    pub fn session_now(&self, s: &Session) -> Result<DiffTarget> {
        if s.status != Status::Ended && self.reads_live_trees() && s.live_dir.is_dir() {
            return Ok(DiffTarget::Live { dir: s.live_dir.clone(), workspace: s.workspace.clone() });
        }
        match crate::manifest::sessions::latest_snapshot(self.manifest.conn(), &s.id)? {
            Some(id) => Ok(DiffTarget::Snapshot(Box::new(self.resolve_snapshot(id.as_str(), Some(&s.workspace))?))),
            None => self.session_start(s),
        }
    }

    /// What a session started from: the snapshot taken when it was created, else the
    /// workspace's newest snapshot from before it, else nothing.
    pub fn session_start(&self, s: &Session) -> Result<DiffTarget> {
        let all = snapshots::list(self.manifest.conn(), Some(&s.workspace))?;
        let own = all.iter().find(|x| x.session.as_ref() == Some(&s.id) && x.reason == SESSION_START);
        let before = || all.iter().rev().find(|x| x.created_ns <= s.created_ns);
        Ok(match own.or_else(before) {
            Some(snap) => DiffTarget::Snapshot(Box::new(snap.clone())),
            None => DiffTarget::Empty,
        })
    }

    /// What changed from `from` to `to`.
    pub fn diff(&self, from: &DiffTarget, to: &DiffTarget, opts: &DiffOptions) -> Result<DiffReport> {
        let read_ns = now_ns();
        if let (DiffTarget::Live { dir: a, .. }, DiffTarget::Live { dir: b, .. }) = (from, to) {
            if a == b {
                // One live tree against itself differs in nothing (as `git diff HEAD HEAD`):
                // nothing to read.
                return Ok(DiffReport {
                    from: from.endpoint(read_ns),
                    to: to.endpoint(read_ns),
                    entries: Vec::new(),
                    stats: DiffStats::default(),
                    truncated: false,
                    renames_skipped: false,
                    warnings: Vec::new(),
                });
            }
        }
        let (old_live, new_live) = (self.read_side(from)?, self.read_side(to)?);
        let root_of = |t: &DiffTarget, live: &Option<LiveTree>| match (t, live) {
            (_, Some(l)) => Some(l.root),
            (DiffTarget::Snapshot(s), None) => Some(s.root),
            _ => None,
        };
        let (old_root, new_root) = (root_of(from, &old_live), root_of(to, &new_live));
        let empty = Built::default();
        let built = match (&old_live, &new_live) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid_argument(
                    "both sides are live trees of different directories: compare one of them with a snapshot",
                ))
            }
            (Some(l), None) | (None, Some(l)) => &*l.built,
            (None, None) => &empty,
        };
        let select = PathSelect { paths: &opts.paths, scope: &opts.scope };
        let mut changes: Vec<Change> = Vec::new();
        diff_trees(&Trees { conn: self.manifest.conn(), built }, old_root, new_root, &select, |p, o, n| {
            changes.push((p, o, n));
            Ok(())
        })?;
        let live_dir = [(from, &old_live), (to, &new_live)].into_iter().find_map(|(t, l)| match (t, l) {
            (DiffTarget::Live { dir, .. }, Some(_)) => Some(dir.as_path()),
            _ => None,
        });
        if let Some(dir) = live_dir {
            self.leave_out_temporaries(dir, &mut changes)?;
        }
        changes.sort_unstable_by(|a, b| a.0.cmp(&b.0));

        let sides = (side_of(&old_live), side_of(&new_live));
        let (mut entries, renames_skipped) = self.pair_renames(&changes, sides, opts.renames)?;
        entries.sort_by(|a, b| a.0.raw_path.cmp(&b.0.raw_path));
        let truncated = opts.limit.is_some_and(|l| entries.len() > l);
        let mut stats = DiffStats::default();
        let mut shown = Vec::with_capacity(entries.len().min(opts.limit.unwrap_or(usize::MAX)));
        for (i, (mut d, (o, n))) in entries.into_iter().enumerate() {
            let keep = opts.limit.is_none_or(|l| i < l);
            if keep && (opts.lines || opts.patch) {
                let (o, n) = (
                    o.map(|k| &changes[k].1).and_then(Option::as_ref),
                    n.map(|k| &changes[k].2).and_then(Option::as_ref),
                );
                let gone = content::compare(self, sides, &mut d, (o, n), opts.patch, opts.context)?;
                // A temporary of trove's gone by the time its content was read was a change in
                // flight the check above missed (it began and ended while the tree was read).
                if gone && temporary_id(&d.raw_path).is_some() {
                    continue;
                }
            }
            stats.add(&d);
            if keep {
                shown.push(d);
            }
        }
        let mut warnings = Vec::new();
        for l in [old_live, new_live].into_iter().flatten() {
            warnings.extend(l.warnings);
        }
        Ok(DiffReport {
            from: from.endpoint(read_ns),
            to: to.endpoint(read_ns),
            entries: shown,
            stats,
            truncated,
            renames_skipped,
            warnings,
        })
    }

    /// Leaves out of `changes` in live tree `dir` trove's own temporaries of a change in flight:
    /// a file (never a directory) named as a journaled plan's or a restore's temporary whose
    /// plan or restore is still pending, or an upload's temporary recorded at the root. A file
    /// an agent gives such a name, with nothing of trove's in flight, is the agent's and stays.
    fn leave_out_temporaries(&self, dir: &Path, changes: &mut Vec<Change>) -> Result<()> {
        let named =
            |p: &[u8]| temporary_id(p).is_some() || (!p.contains(&b'/') && crate::ops::notices::is_temporary(p));
        if !changes.iter().any(|(p, ..)| named(p)) {
            return Ok(());
        }
        let conn = self.manifest.conn();
        let mut pending: std::collections::HashSet<String> =
            crate::manifest::journal::pending(conn)?.into_iter().map(|(id, _)| id).collect();
        pending.extend(crate::manifest::restores::pending(conn)?.into_iter().map(|r| r.id));
        let uploads = self.upload_temps(dir)?;
        changes.retain(|(p, o, n)| {
            let dir_either = [o, n].into_iter().flatten().any(|e| e.kind == EntryKind::Dir);
            let in_flight = temporary_id(p).is_some_and(|id| pending.contains(&id)) || uploads.iter().any(|u| u == p);
            dir_either || !in_flight
        });
        Ok(())
    }

    /// Turns raw changes into entries, pairing deletions and additions into renames. Each
    /// entry comes with the indexes of the changes its old and new sides are from.
    #[allow(clippy::type_complexity)]
    fn pair_renames(
        &self,
        changes: &[Change],
        sides: (Side<'_>, Side<'_>),
        threshold: Option<u8>,
    ) -> Result<(Vec<(DiffEntry, (Option<usize>, Option<usize>))>, bool)> {
        let mut out = Vec::with_capacity(changes.len());
        let mut del_idx = Vec::new();
        let mut add_idx = Vec::new();
        for (k, (p, o, n)) in changes.iter().enumerate() {
            let is_file = |e: &Option<Entry>| e.as_ref().is_some_and(|e| e.kind == EntryKind::File);
            match (o.is_some(), n.is_some()) {
                (true, false) if threshold.is_some() && is_file(o) => del_idx.push(k),
                (false, true) if threshold.is_some() && is_file(n) => add_idx.push(k),
                _ => out.push((
                    DiffEntry::new(status_of(o.as_ref(), n.as_ref()), p, o.as_ref(), n.as_ref()),
                    (Some(k), Some(k)),
                )),
            }
        }
        let entry = |k: usize, old: bool| -> Option<&Entry> {
            match old {
                true => changes[k].1.as_ref(),
                false => changes[k].2.as_ref(),
            }
        };
        let deleted: Vec<renames::Side<'_>> =
            del_idx.iter().filter_map(|&k| entry(k, true).map(|e| (changes[k].0.as_slice(), e))).collect();
        let added: Vec<renames::Side<'_>> =
            add_idx.iter().filter_map(|&k| entry(k, false).map(|e| (changes[k].0.as_slice(), e))).collect();
        let mut taken_old = vec![false; deleted.len()];
        let mut taken_new = vec![false; added.len()];
        let mut pairs = renames::exact(&deleted, &added, &mut taken_old, &mut taken_new);
        let mut skipped = false;
        if let Some(t) = threshold.filter(|&t| t < 100) {
            let left_old = taken_old.iter().filter(|&&t| !t).count();
            let left_new = taken_new.iter().filter(|&&t| !t).count();
            if left_old > 0 && left_new > 0 {
                if left_old.max(left_new) > renames::MAX_SIMILAR_CANDIDATES {
                    skipped = true;
                } else {
                    pairs.extend(renames::similar(
                        &deleted,
                        &added,
                        &mut taken_old,
                        &mut taken_new,
                        t,
                        |new_side, i| {
                            let (path, e) = if new_side { added[i] } else { deleted[i] };
                            let side = if new_side { sides.1 } else { sides.0 };
                            Ok(content::text(self, side, path, e)?.map(|t| renames::fingerprint(&t)))
                        },
                    )?);
                }
            }
        }
        for &(i, j, sim) in &pairs {
            let (ko, kn) = (del_idx[i], add_idx[j]);
            let d = DiffEntry::new(ChangeStatus::Renamed, &changes[kn].0, entry(ko, true), entry(kn, false))
                .renamed_from(&changes[ko].0, sim);
            out.push((d, (Some(ko), Some(kn))));
        }
        for (i, &k) in del_idx.iter().enumerate() {
            if !taken_old[i] {
                out.push((DiffEntry::new(ChangeStatus::Deleted, &changes[k].0, entry(k, true), None), (Some(k), None)));
            }
        }
        for (j, &k) in add_idx.iter().enumerate() {
            if !taken_new[j] {
                out.push((DiffEntry::new(ChangeStatus::Added, &changes[k].0, None, entry(k, false)), (None, Some(k))));
            }
        }
        Ok((out, skipped))
    }

    fn read_side(&self, t: &DiffTarget) -> Result<Option<LiveTree>> {
        match t {
            DiffTarget::Live { dir, workspace } => self.read_live(dir, workspace).map(Some),
            _ => Ok(None),
        }
    }

    /// Reads the live tree `dir` into trees in memory, as a snapshot would see it but storing
    /// nothing: patched from a change feed when this handle shares a server's
    /// ([`Repo::set_live_feeds`]), else whole.
    fn read_live(&self, dir: &Path, workspace: &str) -> Result<LiveTree> {
        let conn = self.manifest.conn();
        let excludes = self.effective_excludes(workspace, &SnapshotOptions::default())?;
        let fd = walk::open_root(dir)?;
        let records = self.node_cache().map(|c| (c, workspace));
        let walk_opts = WalkOptions::new(&excludes, self.deadline());
        if let Some(feeds) = &self.live_feeds {
            return feeds.read(conn, records, fd, dir, &walk_opts);
        }
        Ok(read_whole(conn, records, &fd, dir, &walk_opts)?.into_live(fd))
    }
}

/// The plan or restore whose temporary the last component of `path` is named as, if it is.
fn temporary_id(path: &[u8]) -> Option<String> {
    let name = path.rsplit(|b| *b == b'/').next()?;
    crate::ops::notices::temporary(name).map(|(id, _)| id)
}

/// The reason recorded on the snapshot a session takes when it is created.
pub const SESSION_START: &str = "session_start";

fn side_of(live: &Option<LiveTree>) -> Side<'_> {
    match live {
        Some(l) => Side::Live(&l.fd),
        None => Side::Store,
    }
}
