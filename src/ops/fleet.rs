//! A fleet: the nodes writing one bucket of a log per node (`Layout::Nodes`), each its own
//! log under `nodes/<node>/`, and the view one node (or a review host) has of all of them.
//!
//! A node names itself in the bucket, `fleet/<node>` (sealed JSON, created only if absent),
//! before its log's first segment (`manifest/log.rs`), so that a reader finds every node with
//! one listing of `fleet/` instead of listing every node's segments; a host that only reads
//! (a review host) is no node of it. A reader keeps a replica of each other node's log beside its own,
//! `<cache>/<repository id>/nodes/<node>.db`, caught up as its own is (one `GET` of the next
//! segment when nothing is new), and opened as a handle that reads and never writes: a node's
//! records are written by that node alone (a collection, or a purge or restore of its trash from
//! another node, writes there through a collector's handle, `open_collecting`, `open_purging`).
//!
//! The processes of one node that share its cache directory write under one writer id (16
//! random bytes, `nodes/<node>.writer` there), which every segment they create carries: a
//! segment found under the next key with another writer's id is another process writing as
//! this node from another cache directory, and this one's writes are refused from then on
//! (`manifest/log.rs`, `Owner::Node`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::id::NodeName;
use crate::manifest::log::{open_replica, Log, Owner, FLEET};
use crate::model::audit::{AuditEntry, AuditQuery, Order};
use crate::repo::{BucketKeys, NodeCacheSlot, Repo, Shared};

/// How many other nodes' replicas are opened (and caught up) at once.
const OPEN_AT_ONCE: usize = 16;
/// The directory of the node replicas and writer ids in the node's directory of the repository.
const NODES_DIR: &str = "nodes";

/// Another node of the fleet, as this host reads it: a handle over its replica that reads the
/// bucket's packs and refuses every write.
pub struct NodeView {
    /// Its name.
    pub node: NodeName,
    /// A handle over this host's replica of its log.
    pub repo: Repo,
}

/// The replica of node `node`'s log in the node directory `dir` (this node's own or another's).
pub(crate) fn replica_path(dir: &Path, node: &NodeName) -> PathBuf {
    dir.join(NODES_DIR).join(format!("{node}.db"))
}

/// Where this cache directory keeps `node`'s audit signing key: `<dir>/nodes/<node>.key`.
pub(crate) fn key_path(dir: &Path, node: &str) -> PathBuf {
    dir.join(NODES_DIR).join(format!("{node}.key"))
}

/// The writer id of this cache directory's processes writing as `node`: read from
/// `<dir>/nodes/<node>.writer`, made there first (16 random bytes, hex) if it has none.
pub(crate) fn writer_id(dir: &Path, node: &NodeName) -> Result<[u8; 16]> {
    let nodes = dir.join(NODES_DIR);
    std::fs::create_dir_all(&nodes).map_err(|e| Error::io("create", &nodes, e))?;
    let parse = |text: &str| -> Option<[u8; 16]> { hex::decode(text).ok()?.try_into().ok() };
    let make = || -> Result<String> {
        let mut id = [0u8; 16];
        crate::base::random::fill_random(&mut id)?;
        Ok(hex::encode(id))
    };
    let path = nodes.join(format!("{node}.writer"));
    let advice = format!(
        "a writer id is 32 hex digits; delete the file, and this cache directory writes as node {node} under a new one"
    );
    let id = crate::fs::idfile::read_or_make(&path, |t| parse(t).is_some(), make, &advice)?;
    parse(&id).ok_or_else(|| Error::internal(format!("{} holds no writer id after its check", path.display())))
}

impl Repo {
    /// Where this handle's packs are: `packs/`, or in a fleet its node's own,
    /// `nodes/<node>/packs/`, so that each node's collection, check and repair see only the
    /// packs its own records name (another node's are not its orphans).
    pub(crate) fn packs_dir(&self) -> String {
        match self.bucket_keys.as_deref().map(|k| &k.owner) {
            Some(Owner::Node { node, .. } | Owner::Foreign { node } | Owner::Collector { node, .. }) => {
                format!("{}{node}/{}", crate::manifest::log::NODES, crate::object::pack::PACKS)
            }
            _ => crate::object::pack::PACKS.to_owned(),
        }
    }

    /// Refuses, before anything is written (a pack, a deletion), work that changes a node's
    /// store on a handle over another node's replica: its packs and records are that node's.
    pub(crate) fn refuse_foreign(&self, what: &str) -> Result<()> {
        match (&self.acting, self.node()) {
            (Some(_), Some(node)) => Err(Error::invalid_argument(format!(
                "cannot {what} on node {node}'s records from another node: only node {node} changes them"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether this handle may read a session's live tree at the path its record names: not a
    /// handle over another node's replica, whose directories are that node's host's (a path
    /// here of the same name is another tree).
    pub(crate) fn reads_live_trees(&self) -> bool {
        !self.is_other_node()
    }

    /// Whether this is a handle over another node's log, opened by this node ([`Repo::foreign`],
    /// a server's pool): what it reads is that node's, and anything it links to by a number
    /// (an audit seq, a stored object) is to be read on it.
    pub fn is_other_node(&self) -> bool {
        self.acting.is_some()
    }

    /// The node whose records this handle reads in a bucket of a log per node (its own, or
    /// another's for a handle [`Repo::foreign`] opened); None in any other repository.
    pub fn node(&self) -> Option<&str> {
        match &self.bucket_keys.as_deref()?.owner {
            Owner::Node { node, .. } | Owner::Foreign { node } | Owner::Collector { node, .. } => Some(node),
            Owner::Shared => None,
        }
    }

    /// The nodes that have written to this bucket, by name (one listing of `fleet/`); empty for
    /// a repository that is not a fleet's.
    pub fn fleet_nodes(&self) -> Result<Vec<NodeName>> {
        if self.node().is_none() {
            return Ok(Vec::new());
        }
        let mut nodes = Vec::new();
        for key in self.backend.list(FLEET)? {
            let name = key.strip_prefix(FLEET).unwrap_or_default();
            match NodeName::parse(name) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "an entry under fleet/ does not name a node: skipped")
                }
            }
        }
        Ok(nodes)
    }

    /// Every other node of the fleet, each a handle over this host's replica of its log, caught
    /// up now; empty for a repository that is not a fleet's.
    pub fn fleet(&self) -> Result<Vec<NodeView>> {
        let mine = match self.node() {
            Some(n) => n.to_owned(),
            None => return Ok(Vec::new()),
        };
        let others: Vec<NodeName> = self.fleet_nodes()?.into_iter().filter(|n| n.as_str() != mine).collect();
        // Each opening asks the store for its log's next segment: all at once, a few at a
        // time, so a fleet of many nodes costs a few round trips, not one a node.
        let mut views = Vec::with_capacity(others.len());
        let opener = self.opener()?;
        for batch in others.chunks(OPEN_AT_ONCE) {
            let opened: Vec<Result<Repo>> = std::thread::scope(|s| {
                let handles: Vec<_> = batch.iter().map(|n| s.spawn(|| opener.open(n))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(Error::internal("opening a node's replica panicked"))))
                    .collect()
            });
            for (node, repo) in batch.iter().zip(opened) {
                views.push(NodeView { repo: repo?, node: node.clone() });
            }
        }
        Ok(views)
    }

    /// The snapshot `reference` names (in `workspace`), on this node or another of the fleet
    /// (a prefix must name one across them all), with the other node's handle when it is
    /// another's.
    pub fn snapshot_in_fleet(
        &self,
        reference: &str,
        workspace: Option<&str>,
    ) -> Result<(Option<NodeView>, crate::model::snapshot::SnapshotInfo)> {
        self.find_in_fleet(|r| r.resolve_snapshot(reference, workspace), |s| s.created_ns, unique_snapshot(reference))
    }

    /// A handle over this host's replica of node `node`'s log, caught up, refusing writes.
    pub fn foreign(&self, node: &NodeName) -> Result<Repo> {
        if !self.fleet_nodes()?.contains(node) {
            return Err(not_a_node(node));
        }
        self.opener()?.open(node)
    }

    /// What opening another node's handles takes from this one, to be used from other threads.
    pub(crate) fn opener(&self) -> Result<Opener> {
        let (Some(keys), Some(dir)) = (self.bucket_keys.clone(), self.root()) else {
            return Err(Error::invalid_argument("only a bucket of a log per node has other nodes"));
        };
        Ok(Opener {
            keys,
            dir: dir.to_path_buf(),
            name: self.manifest.log_name().unwrap_or_default().to_owned(),
            backend: self.backend.clone(),
            config: self.config.clone(),
            place: self.node_cache_place(),
            caches: self.caches.clone(),
            budget: self.budget.clone(),
            acting: self.shared(),
        })
    }

    /// `record` with, on a handle over another node's replica, that node in its details.
    pub(crate) fn naming_node(&self, mut record: crate::model::audit::AuditRecord) -> crate::model::audit::AuditRecord {
        if let (Some(_), Some(node), serde_json::Value::Object(details)) =
            (&self.acting, self.node(), &mut record.details)
        {
            details.insert("node".into(), node.into());
        }
        record
    }

    /// The handle that records what this one does: a new handle of the acting node for a
    /// handle over another node's replica (None: this one records its own), under this one's
    /// deadline (a request's).
    pub(crate) fn recorder(&self) -> Result<Option<Repo>> {
        let recorder = self.acting.as_ref().map(Shared::open_handle).transpose()?;
        if let Some(r) = &recorder {
            r.set_deadline(self.deadline());
        }
        Ok(recorder)
    }
}

impl Repo {
    /// What `find` finds on this node, else on the fleet's other nodes, with the node's handle
    /// when it was another's (None: this one). Among other nodes' matches the one with the
    /// greatest `newest` is taken (`latest` is the fleet's newest). With `unique` (a snapshot
    /// named by a prefix), every node is asked, and matches of two ids are refused as
    /// ambiguous. An error other than `not_found` is returned at once; found nowhere, this
    /// node's `not_found`.
    pub fn find_in_fleet<T>(
        &self,
        find: impl Fn(&Repo) -> Result<T>,
        newest: impl Fn(&T) -> i64,
        unique: Option<fn(&T) -> String>,
    ) -> Result<(Option<NodeView>, T)> {
        let missing = match find(self) {
            Ok(t) if unique.is_none() => return Ok((None, t)),
            Ok(t) => Ok(t),
            Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => Err(e),
            Err(e) => return Err(e),
        };
        let mut found: Vec<(Option<NodeView>, T)> = Vec::new();
        let missing = match missing {
            Ok(t) => {
                found.push((None, t));
                None
            }
            Err(e) => Some(e),
        };
        for view in self.fleet()? {
            match find(&view.repo) {
                Ok(t) => found.push((Some(view), t)),
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => {}
                Err(e) => return Err(e.context(format!("reading node {}", view.node))),
            }
        }
        let pick = pick_match(&found, newest, unique, |v| {
            v.as_ref().map_or(self.node().unwrap_or("this node"), |v| v.node.as_str()).to_owned()
        })?;
        match pick {
            Some(k) => Ok(found.swap_remove(k)),
            None => Err(missing.unwrap_or_else(|| Error::not_found("found on no node"))),
        }
    }
}

/// Whether a snapshot reference must name one snapshot across a fleet's nodes: a prefix (a
/// full id names one anywhere; `latest` is the fleet's newest). The id of a match, when so.
pub fn unique_snapshot(reference: &str) -> Option<fn(&crate::model::snapshot::SnapshotInfo) -> String> {
    let whole = reference == "latest" || reference.len() == 64;
    (!whole).then_some(|s: &crate::model::snapshot::SnapshotInfo| s.id.to_string())
}

/// The error of a prefix that names snapshots of more than one node.
pub fn ambiguous(nodes: &[&str]) -> Error {
    Error::invalid_argument(format!(
        "that prefix names snapshots on more than one node ({}): give more of the id's digits",
        nodes.join(", ")
    ))
}

/// The trash items `filter` selects on every node of `views` (each with its node's name),
/// newest first, up to the filter's limit, each with its `node`: one page, whole, since a
/// cursor is one node's row (one given is refused).
pub fn fleet_trash_page(
    views: &[(Option<&str>, &Repo)],
    filter: &crate::model::trash::TrashFilter,
) -> Result<crate::model::trash::TrashPage> {
    if filter.after.is_some() {
        return Err(Error::invalid_argument(
            "a cursor pages one node's trash; in a fleet the listing is every node's: narrow it by workspace, session, time or path prefix instead",
        ));
    }
    let mut items = Vec::new();
    for (node, repo) in views {
        let page = repo.trash_page(filter, |_| true)?;
        items.extend(
            page.items.into_iter().map(|t| crate::model::trash::TrashRecord { node: node.map(str::to_owned), ..t }),
        );
    }
    // RFC 3339 UTC with a fixed number of digits sorts as time does.
    items.sort_by(|a, b| b.deleted_at.cmp(&a.deleted_at));
    if filter.limit != 0 {
        items.truncate(filter.limit);
    }
    Ok(crate::model::trash::TrashPage { items, next_cursor: None })
}

/// What opening a handle over another node's replica takes (`Repo::foreign`): a node's handle's
/// parts, which other threads may use.
pub(crate) struct Opener {
    keys: Arc<BucketKeys>,
    dir: PathBuf,
    name: String,
    backend: Arc<dyn crate::object::Backend>,
    config: crate::repo::Config,
    place: crate::repo::CachePlace,
    caches: crate::repo::Caches,
    budget: Arc<crate::base::budget::Budget>,
    acting: crate::repo::Shared,
}

impl Opener {
    /// A handle over this host's replica of node `node`'s log, caught up, refusing writes.
    pub(crate) fn open(&self, node: &NodeName) -> Result<Repo> {
        self.open_as(node, Owner::Foreign { node: node.to_string() })
    }

    /// A handle over this host's replica of node `node`'s log that a collection of the fleet
    /// writes through, as a collector (`Owner::Collector`): only collection's rows.
    pub(crate) fn open_collecting(&self, node: &NodeName) -> Result<Repo> {
        self.open_writing(node, false)
    }

    /// A handle over this host's replica of node `node`'s log that a purge or a restore of its
    /// trash items from this node writes through: a collector's handle that may delete trash
    /// items and mark them restored.
    pub(crate) fn open_purging(&self, node: &NodeName) -> Result<Repo> {
        self.open_writing(node, true)
    }

    fn open_writing(&self, node: &NodeName, purges: bool) -> Result<Repo> {
        let Owner::Node { writer, .. } = &self.keys.owner else {
            return Err(Error::invalid_argument("only a node of the fleet changes another node's log"));
        };
        self.open_as(node, Owner::Collector { node: node.to_string(), writer: *writer, purges })
    }

    fn open_as(&self, node: &NodeName, owner: Owner) -> Result<Repo> {
        // A collector's runs are recorded under its own node's name; a reader's handle names the
        // node it reads.
        let host = match (&owner, &self.keys.owner) {
            (Owner::Collector { .. }, Owner::Node { node: mine, .. }) => mine.clone(),
            _ => node.to_string(),
        };
        let log = Log::new(self.backend.clone(), self.name.clone()).copy_every(0).of_node(owner.clone());
        let replica = replica_path(&self.dir, node);
        let manifest = open_replica(&replica, log)?;
        let keys = BucketKeys {
            store: self.keys.store.clone(),
            key: self.keys.key.clone(),
            opened_with: self.keys.opened_with.clone(),
            stretch: self.keys.stretch,
            copy_every: 0,
            host: std::sync::OnceLock::from(host),
            owner,
            writers: Default::default(),
        };
        let node_cache = NodeCacheSlot::at(self.place.clone());
        let mut repo =
            Repo::assemble(Some(self.dir.clone()), node_cache, self.config.clone(), self.backend.clone(), manifest);
        repo.bucket_keys = Some(Arc::new(keys));
        repo.replica = Some(replica);
        repo.budget = self.budget.clone();
        // Safe to share: decoded bundles are kept by their pack's whole key (under the node's
        // prefix), trees by their content id.
        repo.caches = self.caches.clone();
        repo.acting = Some(self.acting.clone());
        Ok(repo)
    }
}

/// The error for a name that is no node of the fleet (nothing under `fleet/` names it).
pub(crate) fn not_a_node(node: &NodeName) -> Error {
    Error::not_found(format!(
        "node {node} has written nothing to this bucket: `trove snapshots` lists every node's snapshots with their node"
    ))
}

/// Which of the matches `found` (each with where it was found, `None` for this node) a lookup
/// across a fleet answers: refused as ambiguous when `unique` tells two of them apart (each
/// named by `name`); else this node's, else the one with the greatest `newest`. `None`: found
/// on no node.
pub(crate) fn pick_match<W, T>(
    found: &[(Option<W>, T)],
    newest: impl Fn(&T) -> i64,
    unique: Option<fn(&T) -> String>,
    name: impl Fn(&Option<W>) -> String,
) -> Result<Option<usize>> {
    if let Some(id) = unique {
        let mut ids: Vec<String> = found.iter().map(|(_, t)| id(t)).collect();
        ids.sort();
        ids.dedup();
        if ids.len() > 1 {
            let nodes: Vec<String> = found.iter().map(|(w, _)| name(w)).collect();
            let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
            return Err(ambiguous(&nodes));
        }
    }
    Ok(found
        .iter()
        .position(|(w, _)| w.is_none())
        .or_else(|| found.iter().enumerate().max_by_key(|(_, (_, t))| newest(t)).map(|(k, _)| k)))
}

/// The audit records `q` selects in several nodes' logs (`views`: a node's name, if any, and a
/// handle over its log) as one list: each entry naming its node, oldest first by time (then
/// node, then seq), cut to the newest `q.limit`. A seq is one node's, so a cursor by seq
/// (`after`, `before`) is refused when more than one log is read: ask that node's log alone.
pub fn fleet_audit(views: &[(Option<&str>, &Repo)], q: &AuditQuery) -> Result<Vec<AuditEntry>> {
    let one = |node: Option<&str>, repo: &Repo| -> Result<Vec<(i64, AuditEntry)>> {
        let records = repo.audit_query(q)?;
        Ok(records
            .iter()
            .map(|r| (r.record.time_ns, AuditEntry { node: node.map(str::to_owned), ..r.entry() }))
            .collect())
    };
    if let [(node, repo)] = views {
        return Ok(one(*node, repo)?.into_iter().map(|(_, e)| e).collect());
    }
    if !matches!(q.order, Order::Newest) {
        return Err(Error::invalid_argument(
            "a seq is a position in one node's log: in a fleet, read that node's log alone (`trove audit log --of NODE`, `GET /v1/audit?node=NODE`)",
        ));
    }
    let mut all = Vec::new();
    for (node, repo) in views {
        all.extend(one(*node, repo)?);
    }
    all.sort_by(|(ta, a), (tb, b)| ta.cmp(tb).then_with(|| a.node.cmp(&b.node)).then(a.seq.cmp(&b.seq)));
    let skip = all.len().saturating_sub(q.limit);
    Ok(all.into_iter().skip(skip).map(|(_, e)| e).collect())
}
