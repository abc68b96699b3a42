//! A snapshot of a workspace a server watches: the live tree as its change feed keeps it
//! ([`LiveFeeds`](crate::ops::live_read::LiveFeeds): only the directories changed since the last read are listed again, only the
//! files changed in them hashed), then only the contents the repository lacks read again and
//! stored, and only the trees it lacks recorded. A one-file change of a 100,000-file workspace
//! costs that file, its directory and their ancestors, not a walk.
//!
//! A feed relies on a whole walk by the same server: none yet, one before `repair snapshots`
//! (the feed would reuse live trees naming content the repair found lost), one ten minutes old
//! (a few changes escape inotify), or a session's last snapshot, and the snapshot walks.
//! Whatever else the feed cannot vouch for gives the snapshot back to the whole walk too: the
//! feed lost notices or started just now (it reads the tree whole itself, then), a file changed
//! between the feed's hash and the read that stores it, a tree it names is condemned, uploads are
//! in flight. The snapshot's counts are its parent's, moved by what differs between the two roots;
//! the sockets, FIFOs and devices it skipped are the feed's count of them, kept per directory.

use std::os::fd::OwnedFd;

use rusqlite::Connection;

use crate::base::error::Result;
use crate::base::time::now_ns;
use crate::fs::walk::{self, DirNode, Node, Stat, WalkOptions, WalkReport, Walked};
use crate::manifest::{self, loose, trees};
use crate::model::snapshot::{Counts, SnapshotInfo};
use crate::model::tree::{Entry, EntryKind};
use crate::object::{ObjectId, RandomKeySet};
use crate::ops::diff::tree::{totals_change, Trees};
use crate::ops::live_read::LiveTree;
use crate::ops::scan::{tree_entries, Built, FileOutcome, Outcome, Outcomes};
use crate::repo::Repo;

use super::{diff_counts, stored_trees, ReadOf, SnapshotOptions, Taken, Watched};

/// The longest a served workspace goes without a whole walk: a few changes escape inotify (a
/// write through a hard link from another directory or a shared mapping, a change made by
/// another machine on a network filesystem), and a walk's `lstat` of every file catches them.
const WALK_EVERY: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Snapshots that always walk the tree whole: a session's last ones, which outlive it.
const WALKED_REASONS: [&str; 2] = ["session_end", "pause"];

/// What the live tree holds that the repository does not: trees, and files (path, entry) whose
/// content is not stored.
struct Fresh {
    trees: Built,
    files: Vec<(Vec<u8>, Entry)>,
}

impl Repo {
    /// Snapshots the served workspace `dir` from its change feed, after `parent`. `Ok(None)`:
    /// the feed could not vouch for the tree (logged), and the caller walks it whole; anything it
    /// stored first is recorded, so that walk finds it stored.
    pub(super) fn snapshot_watched(&self, w: &Watched<'_>, opts: &SnapshotOptions<'_>) -> Result<Option<SnapshotInfo>> {
        let Watched { feeds, dir, name, .. } = *w;
        let generation = manifest::dir_cache::generation(self.manifest.conn())?;
        let walked = feeds.walked_at(dir, name);
        let due = match walked {
            None => Some("no whole walk by this server yet"),
            Some((_, g)) if g != generation => Some("the repository was repaired since the last whole walk"),
            Some((at, _)) if at.elapsed() >= WALK_EVERY => Some("the last whole walk is ten minutes old"),
            _ if WALKED_REASONS.contains(&opts.reason.as_str()) => Some("a session's last snapshot walks the tree"),
            _ => None,
        };
        if let Some(why) = due {
            tracing::debug!(workspace = name, why, "the snapshot walks the tree whole");
            return Ok(None);
        }
        // Before anything is stored, a failure of the feed's path costs only the walk; after,
        // a failure is the snapshot's, as on the walk's path.
        let found = match self.changes_from_feed(w, opts) {
            Err(e) if e.kind() != crate::base::error::ErrorKind::Timeout => {
                tracing::warn!(workspace = name, error = %e, "the snapshot could not be taken from the change feed; it walks the tree whole");
                return Ok(None);
            }
            found => found?,
        };
        match found {
            Some(found) => self.store_from_feed(w, found, opts),
            None => Ok(None),
        }
    }

    /// The live tree from the feed, what of it the repository lacks, and the files to read for
    /// that as a walk of their own. `None` (logged): the feed cannot vouch for it.
    fn changes_from_feed(&self, w: &Watched<'_>, opts: &SnapshotOptions<'_>) -> Result<Option<Found>> {
        let Watched { feeds, dir, name, excludes, .. } = *w;
        let conn = self.manifest.conn();
        opts.progress.start("scanning", 0);
        let fd = walk::open_root(dir)?;
        let records = self.node_cache().map(|c| (c, name));
        let live = feeds.read(conn, records, fd, dir, &WalkOptions::new(excludes, self.deadline()))?;
        let Some(fresh) = fresh_parts(conn, &live)? else { return Ok(None) };
        let Some((walked, outcomes)) = to_read(&live.fd, &fresh.files) else {
            tracing::debug!(
                workspace = name,
                "files changed since the change feed read them; the snapshot walks the tree whole"
            );
            return Ok(None);
        };
        Ok(Some(Found { live, fresh, walked, outcomes }))
    }

    /// Reads and stores what `found` lacks, and commits the snapshot. `None` (logged): a file
    /// was not read as the feed hashed it.
    fn store_from_feed(
        &self,
        w: &Watched<'_>,
        found: Found,
        opts: &SnapshotOptions<'_>,
    ) -> Result<Option<SnapshotInfo>> {
        let Watched { dir, name, parent, scan_start, .. } = *w;
        let conn = self.manifest.conn();
        let Found { live, fresh, mut walked, mut outcomes } = found;
        let (read_warnings, stored) =
            self.read_pending(&ReadOf::new(&live.fd, scan_start, Some(parent), opts), &mut walked, &mut outcomes)?;
        if !read_warnings.is_empty() || !read_as_hashed(&fresh.files, &outcomes) {
            tracing::debug!(workspace = name, "files changed while the snapshot read them; it walks the tree whole");
            if !stored.packs.is_empty() {
                // Indexed, so the whole walk finds them stored; garbage collection takes what
                // no snapshot names.
                self.manifest.write(|tx| self.record_packs(tx, &stored.packs, now_ns()))?;
            }
            return Ok(None);
        }

        let trees_both = Trees { conn, built: &live.built };
        let change = totals_change(&trees_both, parent.root, live.root)?;
        let moved = |was: u64, by: i64| u64::try_from(was as i64 + by).ok();
        let totals = (
            moved(parent.counts.files, change.files),
            moved(parent.counts.bytes, change.bytes),
            moved(parent.counts.dirs, change.dirs),
            moved(parent.counts.symlinks, change.symlinks),
        );
        let (Some(files), Some(bytes), Some(dirs), Some(symlinks)) = totals else {
            tracing::warn!(workspace = name, parent = %parent.id, "the parent snapshot's counts do not match its tree; the snapshot walks the tree whole");
            return Ok(None);
        };
        let mut counts = Counts { files, bytes, dirs, symlinks, skipped: live.skipped, ..Counts::default() };
        diff_counts(conn, &parent.root, &live.root, &live.built, &mut counts)?;
        let trees_stored = stored_trees(&fresh.trees)?;
        let warnings = live.warnings.clone();
        let taken = Taken { dir, name, parent: Some(parent), root: live.root, counts, warnings, staged: None };
        let info = self.commit(taken, &stored, &outcomes, &trees_stored, opts)?;
        tracing::debug!(workspace = name, snapshot = %info.id, files_read = fresh.files.len(), trees = fresh.trees.len(),
            "snapshot taken from the change feed");
        self.checkpoint_if_due();
        Ok(Some(info))
    }
}

/// What a snapshot from a feed found to store: the live tree, what the repository lacks of it,
/// and the files to read as a walk of their own.
struct Found {
    live: LiveTree,
    fresh: Fresh,
    walked: Walked,
    outcomes: Outcomes,
}

/// The trees of `live` the manifest lacks (walked down from the root, stopping at every tree it
/// holds live) and the files in them whose content is not stored. `None` (logged): a tree it
/// names is neither built nor live in the manifest (condemned since), so the tree must be read
/// whole.
fn fresh_parts(conn: &Connection, live: &LiveTree) -> Result<Option<Fresh>> {
    let mut fresh = Fresh { trees: Built::default(), files: Vec::new() };
    let mut seen: RandomKeySet<ObjectId> = RandomKeySet::default();
    let mut stack: Vec<(Vec<u8>, ObjectId)> = vec![(Vec::new(), live.root)];
    while let Some((rel, id)) = stack.pop() {
        if !seen.insert(id) || trees::has_live(conn, &id)? {
            continue;
        }
        let Some(encoded) = live.built.get(&id) else {
            tracing::debug!(tree = %id, dir = %String::from_utf8_lossy(&rel), "a tree of the live tree is no longer stored; the snapshot walks the tree whole");
            return Ok(None);
        };
        fresh.trees.insert(id, encoded.clone());
        for e in tree_entries(conn, &id, &live.built)? {
            let path = walk::join_rel(&rel, &e.name);
            match (e.kind, e.content) {
                (EntryKind::Dir, Some(sub)) => stack.push((path, sub)),
                (EntryKind::File, Some(content)) if loose::content_stored(conn, &content)? => {}
                (EntryKind::File, _) => fresh.files.push((path, e)),
                _ => {}
            }
        }
    }
    Ok(Some(fresh))
}

/// The files to store as a walk of their own (a directory per parent, each file's status as it
/// is now), for the snapshot's reader. `None`: one of them is no longer the file the feed
/// hashed (gone, replaced, or its size, mtime or mode changed).
fn to_read(fd: &OwnedFd, files: &[(Vec<u8>, Entry)]) -> Option<(Walked, Outcomes)> {
    let mut walked = Walked { dirs: Vec::new(), report: WalkReport::default() };
    let mut outcomes = Outcomes::new();
    for (rel, entry) in files {
        let stat = walk::open_beneath(fd, rel).and_then(|f| f.metadata()).ok().filter(|m| m.is_file())?;
        let stat = Stat::of(&stat);
        if stat.size != entry.size || stat.mtime_ns != entry.mtime_ns || stat.perm() != entry.mode {
            return None;
        }
        let parent = rel.iter().rposition(|b| *b == b'/').map_or(&rel[..0], |i| &rel[..i]);
        if walked.dirs.last().is_none_or(|d: &DirNode| d.rel != parent) {
            walked.dirs.push(DirNode { rel: parent.to_vec(), stat: Stat::default(), children: Vec::new() });
            outcomes.push(Vec::new());
        }
        let (dir, outs) = (walked.dirs.last_mut()?, outcomes.last_mut()?);
        dir.children.push(Node::File { name: entry.name.clone(), stat });
        outs.push(FileOutcome { stat, outcome: Outcome::Pending { recheck: false } });
    }
    Some((walked, outcomes))
}

/// Whether every file was read as the feed hashed it (the same content), so the trees that name
/// them hold what was stored.
fn read_as_hashed(files: &[(Vec<u8>, Entry)], outcomes: &Outcomes) -> bool {
    let read = outcomes.iter().flatten();
    files.len() == read.clone().count()
        && files.iter().zip(read).all(|((_, e), f)| match &f.outcome {
            Outcome::Done(c) => Some(c.id) == e.content && Some(c.sha256) == e.sha256 && c.size == e.size,
            _ => false,
        })
}
