//! Repairs: the object index rebuilt from the packs themselves (each blob's header names its
//! object, each bundle lists its members), and snapshots whose files lost their content
//! rewritten so that every such file becomes an explicit marker and the rest stays readable.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::base::id::SnapshotId;
use crate::base::time::{iso_time, now_ns};
use crate::manifest::{self, gc, trees};
use crate::model::audit::AuditRecord;
use crate::model::snapshot::Warning;
use crate::model::tree::{self, Entry, EntryKind};
use crate::object::{blob, pack, ObjectId, PackWriter, SealedPack, Sha256};
use crate::ops::check::{CheckOptions, ProblemKind, ReadData};
use crate::repo::Repo;

/// What rebuilding the index found.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepairIndexReport {
    /// Pack files scanned.
    pub packs: u64,
    /// Objects indexed from them.
    pub objects: u64,
    /// Index rows before, and after.
    pub rows_before: u64,
    /// Index rows after.
    pub rows_after: u64,
    /// Pack files that could not be scanned (damaged): their objects are left out.
    pub unreadable: Vec<String>,
}

/// What repairing snapshots did.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepairReport {
    /// Snapshots rewritten.
    pub snapshots: Vec<SnapshotId>,
    /// Files whose content was lost, each now a marker, as `SNAPSHOT:PATH`.
    pub files: Vec<String>,
    /// Directories whose tree was lost, each now an empty directory holding a marker.
    pub dirs: Vec<String>,
}

/// The name of the marker file a lost directory is replaced by (inside it).
pub const LOST_DIR_MARKER: &str = "TROVE-LOST.txt";

impl Repo {
    /// Rebuilds the object index from the pack files (see the module docs). Packs the index
    /// retired are left out: their objects live in the packs that replaced them.
    pub fn repair_index(&self, actor: &str) -> Result<RepairIndexReport> {
        self.refuse_foreign("repair the index")?;
        let _lock = self.gc_lock()?;
        // In a fleet, other hosts collect this node's packs: none may while they are listed.
        let _run = self.hold_fleet_run()?;
        let conn = self.manifest.conn();
        let retired: BTreeSet<String> = gc::retired_packs(conn)?.into_iter().map(|p| p.1).collect();
        let mut report = RepairIndexReport {
            rows_before: conn
                .query_row("SELECT COUNT(*) FROM objects", [], |r| r.get::<_, i64>(0))
                .map_err(|e| Error::db("counting", e))? as u64,
            ..Default::default()
        };
        let mut sealed = Vec::new();
        for key in self.backend.list(&self.packs_dir())? {
            if !key.ends_with(".pack") || retired.contains(&key) {
                continue;
            }
            self.check_deadline("rebuilding the index")?;
            let size = self.backend.size(&key)?;
            match pack::scan(self.backend.as_ref(), &key, size) {
                Ok(found) => {
                    report.packs += 1;
                    report.objects += found.len() as u64;
                    sealed.push(SealedPack { key, size, objects: found });
                }
                Err(e) => {
                    tracing::warn!(pack = %key, error = %e, "a pack cannot be scanned; its objects are left out of the index");
                    report.unreadable.push(key);
                }
            }
        }
        self.manifest.write(|tx| {
            // Every member of every bundle is indexed again, dead ones too: the dead counts
            // would now count rows that exist.
            tx.execute_batch("DELETE FROM objects; DELETE FROM bundle_dead;")
                .map_err(|e| Error::db("rebuilding the index", e))?;
            // Each delta's base, as its blob names it (blob format 2: the base id follows the
            // 56-byte header); deltas are only ever loose.
            // SQL's substr counts from 1; the offsets are blob.rs's.
            let (version, codec) = (blob::DELTA_VERSION, blob::Codec::Delta as u8);
            tx.execute_batch(&format!(
                "DELETE FROM object_bases;
                 INSERT INTO object_bases (id, base)
                     SELECT id, substr(encoded, {base}, 32) FROM loose_objects
                     WHERE substr(encoded, 5, 2) = x'{version:02x}{codec:02x}' AND length(encoded) >= {frame};",
                base = blob::DELTA_BASE_AT + 1,
                frame = blob::DELTA_FRAME_AT,
            ))
            .map_err(|e| Error::db("rebuilding the deltas' bases", e))?;
            let known: BTreeMap<String, i64> = {
                let mut stmt = tx.prepare("SELECT name, id FROM packs").map_err(|e| Error::db("rebuilding the index", e))?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| Error::db("rebuilding the index", e))?;
                rows.collect::<rusqlite::Result<_>>().map_err(|e| Error::db("rebuilding the index", e))?
            };
            // Packs the index lost are recorded anew; packs it names that are gone or
            // unreadable keep their row only while retired (garbage collection ends those).
            for name in known.keys() {
                if !sealed.iter().any(|p| &p.key == name) && !retired.contains(name) {
                    tx.execute("DELETE FROM packs WHERE name = ?1", [name]).map_err(|e| Error::db("rebuilding the index", e))?;
                }
            }
            self.record_packs(tx, &sealed, now_ns())?;
            let mut rec = AuditRecord::ok(now_ns(), actor, "repair_index");
            rec.details = serde_json::json!({ "packs": report.packs, "objects": report.objects, "unreadable": report.unreadable });
            manifest::audit::append(tx, &rec)?;
            Ok(())
        })?;
        report.rows_after = conn
            .query_row("SELECT COUNT(*) FROM objects", [], |r| r.get::<_, i64>(0))
            .map_err(|e| Error::db("counting", e))? as u64;
        Ok(report)
    }

    /// Rewrites every snapshot that holds a file whose content is lost (not stored, or found
    /// damaged by the check `read_data` asks for) or a directory whose tree is lost: each such
    /// file becomes a marker file saying what was lost, each such directory an empty one
    /// holding a marker; the snapshot keeps its id, gets a warning, and is audited. This
    /// machine's directory cache is emptied, so no snapshot reuses what was lost.
    pub fn repair_snapshots(&self, read_data: ReadData, actor: &str) -> Result<RepairReport> {
        self.refuse_foreign("repair snapshots")?;
        let check = self.check_with(&CheckOptions { read_data })?;
        let mut lost_objects = BTreeSet::new();
        let mut lost_trees = BTreeSet::new();
        for p in &check.problems {
            let Some(id) = p.object.as_deref().and_then(|h| ObjectId::from_hex(h).ok()) else { continue };
            match p.kind {
                ProblemKind::TreeDamaged | ProblemKind::TreeMissing => {
                    lost_trees.insert(id);
                }
                ProblemKind::ObjectDamaged | ProblemKind::ObjectMissing | ProblemKind::ChunkList | ProblemKind::Row => {
                    lost_objects.insert(id);
                }
                ProblemKind::PackMissing
                | ProblemKind::PackDamaged
                | ProblemKind::AuditLog
                | ProblemKind::RecordLog => {}
            }
        }
        // Objects of a missing or truncated pack are lost too, and chunks make their contents so.
        let conn = self.manifest.conn();
        let backend = self.backend.as_ref();
        for p in &check.problems {
            if let (ProblemKind::PackMissing | ProblemKind::PackDamaged, Some(name)) = (p.kind, &p.pack) {
                let size = backend.size(name).unwrap_or(0);
                let mut stmt = conn
                    .prepare("SELECT o.id FROM objects o JOIN packs k ON k.id = o.pack WHERE k.name = ?1 AND o.offset + o.stored_len > ?2")
                    .map_err(|e| Error::db("finding lost objects", e))?;
                let rows = stmt
                    .query_map(rusqlite::params![name, size as i64], |r| r.get::<_, Vec<u8>>(0))
                    .map_err(|e| Error::db("finding lost objects", e))?;
                for r in rows {
                    if let Ok(id) = ObjectId::from_slice(&r.map_err(|e| Error::db("finding lost objects", e))?) {
                        lost_objects.insert(id);
                    }
                }
            }
        }
        let mut stmt = conn
            .prepare("SELECT DISTINCT content FROM chunk_lists WHERE chunk = ?1")
            .map_err(|e| Error::db("finding lost contents", e))?;
        for chunk in lost_objects.clone() {
            let rows = stmt
                .query_map([&chunk.as_bytes()[..]], |r| r.get::<_, Vec<u8>>(0))
                .map_err(|e| Error::db("finding lost contents", e))?;
            for r in rows {
                if let Ok(id) = ObjectId::from_slice(&r.map_err(|e| Error::db("finding lost contents", e))?) {
                    lost_objects.insert(id);
                }
            }
        }
        drop(stmt);
        let mut report = RepairReport::default();
        if lost_objects.is_empty() && lost_trees.is_empty() {
            return Ok(report);
        }
        let _lease = self.lease("repair")?;
        // Every snapshot's rewrite first, in memory; then the markers packed; then one
        // transaction records it all.
        let mut rewrites = Vec::new();
        for snap in crate::manifest::snapshots::list(conn, None)? {
            let mut rewrite = Rewrite {
                lost_objects: &lost_objects,
                lost_trees: &lost_trees,
                memo: BTreeMap::new(),
                trees: Vec::new(),
                markers: Vec::new(),
                files: Vec::new(),
                dirs: Vec::new(),
            };
            let root = self.manifest.read(|| rewrite.tree(self, snap.root))?;
            if root != snap.root {
                rewrites.push((snap, root, rewrite));
            }
        }
        let mut markers: BTreeMap<ObjectId, Vec<u8>> = BTreeMap::new();
        for (_, _, r) in &mut rewrites {
            markers.extend(std::mem::take(&mut r.markers));
        }
        let level = self.config.zstd_level;
        let ((), packs) =
            PackWriter::run_in(self.backend.as_ref(), &self.packs_dir(), self.config.pack_target as usize, |w| {
                for (id, raw) in &markers {
                    w.add(*id, raw.len() as u64, &crate::object::blob::encode(id, raw, level)?)?;
                }
                Ok(())
            })?;
        self.manifest.write(|tx| {
            self.record_packs(tx, &packs, now_ns())?;
            // A directory record may name a lost content or tree, which the next snapshot would
            // reuse as it is: every cache, on every machine, is emptied before its next use
            // (`scan::load_records`), so every workspace reads its files again instead.
            crate::manifest::dir_cache::bump_generation(tx)?;
            for (snap, root, rewrite) in &rewrites {
                for (id, encoded) in &rewrite.trees {
                    trees::insert_encoded(tx, id, encoded)?;
                }
                let mut warnings = snap.warnings.clone();
                warnings.push(Warning {
                    path: String::new(),
                    message: format!(
                        "repaired {}: {} files and {} directories lost their content and hold markers",
                        iso_time(now_ns()),
                        rewrite.files.len(),
                        rewrite.dirs.len()
                    ),
                });
                let json = serde_json::to_string(&warnings).map_err(|e| Error::internal(e.to_string()))?;
                tx.execute(
                    "UPDATE snapshots SET root = ?1, warnings = ?2 WHERE id = ?3",
                    rusqlite::params![&root.as_bytes()[..], json, snap.id.as_str()],
                )
                .map_err(|e| Error::db("repairing a snapshot", e))?;
                let mut rec = AuditRecord::ok(now_ns(), actor, "repair_snapshot");
                rec.workspace = Some(snap.workspace.clone());
                rec.details = serde_json::json!({
                    "snapshot": snap.id, "oldRoot": snap.root.to_hex(), "newRoot": root.to_hex(),
                    "files": rewrite.files, "dirs": rewrite.dirs,
                });
                manifest::audit::append(tx, &rec)?;
            }
            Ok(())
        })?;
        for (snap, _, rewrite) in rewrites {
            let short = crate::ops::view::short_id(&snap.id).to_string();
            report.files.extend(rewrite.files.iter().map(|p| format!("{short}:{p}")));
            report.dirs.extend(rewrite.dirs.iter().map(|p| format!("{short}:{p}")));
            report.snapshots.push(snap.id);
        }
        Ok(report)
    }
}

/// One snapshot's rewrite: old tree id -> new, the trees and marker objects to store, and the
/// paths that lost their content.
struct Rewrite<'a> {
    lost_objects: &'a BTreeSet<ObjectId>,
    lost_trees: &'a BTreeSet<ObjectId>,
    memo: BTreeMap<ObjectId, ObjectId>,
    trees: Vec<(ObjectId, Vec<u8>)>,
    markers: Vec<(ObjectId, Vec<u8>)>,
    files: Vec<String>,
    dirs: Vec<String>,
}

/// A directory being rewritten: its entries, the next to look at, its path, whether any
/// entry changed.
struct Frame {
    id: ObjectId,
    entries: Vec<Entry>,
    next: usize,
    path: Vec<u8>,
    changed: bool,
}

impl Rewrite<'_> {
    fn marker(&mut self, text: String) -> (ObjectId, Sha256, u64) {
        use sha2::Digest;
        let raw = text.into_bytes();
        let id = ObjectId::of(&raw);
        let sha: Sha256 = sha2::Sha256::digest(&raw).into();
        let len = raw.len() as u64;
        self.markers.push((id, raw));
        (id, sha, len)
    }

    fn store(&mut self, entries: &[Entry]) -> ObjectId {
        let encoded = tree::encode(entries);
        let id = tree::id_of_encoding(&encoded);
        self.trees.push((id, encoded));
        id
    }

    /// An empty directory holding a marker, for a lost tree at `path`.
    fn lost_dir(&mut self, lost: ObjectId, path: &[u8]) -> ObjectId {
        self.dirs.push(String::from_utf8_lossy(path).into_owned());
        let (id, sha, len) = self.marker(format!(
            "trove: the contents of this directory (tree {lost}) were lost; `trove repair snapshots` left this marker\n"
        ));
        let entry = Entry {
            name: LOST_DIR_MARKER.as_bytes().to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: len,
            mtime_ns: now_ns(),
            content: Some(id),
            sha256: Some(sha),
            target: None,
        };
        self.store(&[entry])
    }

    /// The rewritten id of tree `root`, post-order with an explicit stack.
    fn tree(&mut self, repo: &Repo, root: ObjectId) -> Result<ObjectId> {
        if self.lost_trees.contains(&root) {
            return Ok(self.lost_dir(root, b"/"));
        }
        let conn = repo.manifest.conn();
        let mut stack =
            vec![Frame { id: root, entries: trees::entries(conn, &root)?, next: 0, path: Vec::new(), changed: false }];
        loop {
            let Some(top) = stack.last_mut() else { return Err(Error::internal("the rewrite lost its root")) };
            if top.next == top.entries.len() {
                let Some(done) = stack.pop() else { break };
                let new = if done.changed { self.store(&done.entries) } else { done.id };
                self.memo.insert(done.id, new);
                match stack.last_mut() {
                    Some(parent) => {
                        if new != done.id {
                            parent.entries[parent.next - 1].content = Some(new);
                            parent.changed = true;
                        }
                    }
                    None => return Ok(new),
                }
                continue;
            }
            let i = top.next;
            top.next += 1;
            let path = crate::fs::walk::join_rel(&top.path, &top.entries[i].name);
            let e = top.entries[i].clone();
            match (e.kind, e.content) {
                (EntryKind::File, Some(c)) if self.lost_objects.contains(&c) => {
                    let sha = e.sha256.map(|s| s.to_hex()).unwrap_or_default();
                    let (id, new_sha, len) = self.marker(format!(
                        "trove: the content of this file was lost (content {c}, sha256 {sha}, {} bytes); `trove repair snapshots` left this marker\n",
                        e.size
                    ));
                    self.files.push(String::from_utf8_lossy(&path).into_owned());
                    let top = stack.last_mut().ok_or_else(|| Error::internal("the rewrite lost its frame"))?;
                    let entry = &mut top.entries[i];
                    (entry.content, entry.sha256, entry.size) = (Some(id), Some(new_sha), len);
                    top.changed = true;
                }
                (EntryKind::Dir, Some(child)) => {
                    let replaced = if self.lost_trees.contains(&child) {
                        Some(self.lost_dir(child, &path))
                    } else {
                        self.memo.get(&child).copied()
                    };
                    match replaced {
                        Some(new) => {
                            let top = stack.last_mut().ok_or_else(|| Error::internal("the rewrite lost its frame"))?;
                            if new != child {
                                top.entries[i].content = Some(new);
                                top.changed = true;
                            }
                        }
                        None => {
                            let entries = trees::entries(conn, &child)?;
                            stack.push(Frame { id: child, entries, next: 0, path, changed: false });
                        }
                    }
                }
                _ => {}
            }
        }
        Err(Error::internal("the rewrite ended without its root"))
    }
}
