//! A fleet: the nodes writing one bucket of a log per node (`Layout::Nodes`), each its own
//! log under `nodes/<node>/`, and the view one node (or a review host) has of all of them.
//!
//! A node names itself in the bucket, `fleet/<node>` (sealed JSON, created only if absent),
//! before its log's first segment (`manifest/log.rs`), so that a reader finds every node with
//! one listing of `fleet/` instead of listing every node's segments; a host that only reads
//! (a review host) is no node of it. A reader keeps a replica of each other node's log beside its own,
//! `<cache>/<repository id>/nodes/<node>.db`, caught up as its own is (one `GET` of the next
//! segment when nothing is new), and opened as a handle that reads and never writes: a node's
//! records are written by that node alone, so no two nodes ever create one key.
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
use crate::repo::{BucketKeys, NodeCacheSlot, Repo};

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

/// The writer id of this cache directory's processes writing as `node`: read from
/// `<dir>/nodes/<node>.writer`, made there first (16 random bytes, hex) if it has none.
pub(crate) fn writer_id(dir: &Path, node: &NodeName) -> Result<[u8; 16]> {
    let nodes = dir.join(NODES_DIR);
    std::fs::create_dir_all(&nodes).map_err(|e| Error::io("create", &nodes, e))?;
    let path = nodes.join(format!("{node}.writer"));
    let parse = |text: &str| -> Option<[u8; 16]> { hex::decode(text.trim()).ok()?.try_into().ok() };
    let read = |path: &Path| -> Result<Option<[u8; 16]>> {
        match std::fs::read_to_string(path) {
            Ok(text) => parse(&text).map(Some).ok_or_else(|| {
                Error::corrupt(format!(
                    "{} does not hold a writer id (32 hex digits): delete it, and this cache directory writes as node {node} under a new one",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", path, e)),
        }
    };
    if let Some(id) = read(&path)? {
        return Ok(id);
    }
    let mut id = [0u8; 16];
    crate::base::random::fill_random(&mut id)?;
    // Written whole beside it, then put in place unless another process got there first.
    let mut tmp = tempfile::NamedTempFile::new_in(&nodes).map_err(|e| Error::io("create a file in", &nodes, e))?;
    std::io::Write::write_all(&mut tmp, hex::encode(id).as_bytes()).map_err(|e| Error::io("write", tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io("sync", tmp.path(), e))?;
    match tmp.persist_noclobber(&path) {
        Ok(_) => Ok(id),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
            read(&path)?.ok_or_else(|| Error::internal(format!("{} vanished as it was made", path.display())))
        }
        Err(e) => Err(Error::io("create", &path, e.error)),
    }
}

impl Repo {
    /// Where this handle's packs are: `packs/`, or in a fleet its node's own,
    /// `nodes/<node>/packs/`, so that each node's collection, check and repair see only the
    /// packs its own records name (another node's are not its orphans).
    pub(crate) fn packs_dir(&self) -> String {
        match self.bucket_keys.as_deref().map(|k| &k.owner) {
            Some(Owner::Node { node, .. } | Owner::Foreign { node }) => {
                format!("{}{node}/{}", crate::manifest::log::NODES, crate::object::pack::PACKS)
            }
            _ => crate::object::pack::PACKS.to_owned(),
        }
    }

    /// Whether this handle may read a session's live tree at the path its record names: not a
    /// handle over another node's replica, whose directories are that node's host's (a path
    /// here of the same name is another tree).
    pub(crate) fn reads_live_trees(&self) -> bool {
        self.acting.is_none()
    }

    /// The node whose records this handle reads in a bucket of a log per node (its own, or
    /// another's for a handle [`Repo::foreign`] opened); None in any other repository.
    pub fn node(&self) -> Option<&str> {
        match &self.bucket_keys.as_deref()?.owner {
            Owner::Node { node, .. } | Owner::Foreign { node } => Some(node),
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
        let mut views = Vec::new();
        for node in self.fleet_nodes()? {
            if node.as_str() == mine {
                continue;
            }
            views.push(NodeView { repo: self.foreign(&node)?, node });
        }
        Ok(views)
    }

    /// A handle over this host's replica of node `node`'s log, caught up, refusing writes.
    pub fn foreign(&self, node: &NodeName) -> Result<Repo> {
        let (Some(keys), Some(dir)) = (self.bucket_keys.as_deref(), self.root()) else {
            return Err(Error::invalid_argument("only a bucket of a log per node has other nodes"));
        };
        let name = self.manifest.log_name().unwrap_or_default().to_owned();
        let owner = Owner::Foreign { node: node.to_string() };
        let log = Log::new(self.backend.clone(), name).copy_every(0).of_node(owner.clone());
        let replica = replica_path(dir, node);
        let manifest = open_replica(&replica, log)?;
        let keys = BucketKeys {
            store: keys.store.clone(),
            key: keys.key.clone(),
            opened_with: keys.opened_with.clone(),
            stretch: keys.stretch,
            copy_every: 0,
            host: std::sync::OnceLock::from(node.to_string()),
            owner,
        };
        let node_cache = NodeCacheSlot::at(self.node_cache_place());
        let mut repo =
            Repo::assemble(Some(dir.to_path_buf()), node_cache, self.config.clone(), self.backend.clone(), manifest);
        repo.bucket_keys = Some(Arc::new(keys));
        repo.replica = Some(replica);
        repo.budget = self.budget.clone();
        repo.acting = Some(self.shared());
        Ok(repo)
    }

    /// Appends `record` to the audit log of the node that acts: this handle's own, or, on a
    /// handle over another node's replica, the acting node's, naming in its details the node
    /// whose data it read (`node`). Its seq in the log it went to.
    pub(crate) fn audit_acting(&self, mut record: crate::model::audit::AuditRecord) -> Result<i64> {
        let Some(acting) = &self.acting else { return self.audit(record) };
        if let (Some(node), serde_json::Value::Object(details)) = (self.node(), &mut record.details) {
            details.insert("node".into(), node.into());
        }
        acting.open_handle()?.audit(record)
    }
}

impl Repo {
    /// What `find` finds on this node, else on the fleet's other nodes, with the node's handle
    /// when it was another's (None: this one). Among other nodes' matches the one with the
    /// greatest `newest` is taken (a full id matches on one node; `latest` is the fleet's
    /// newest). An error other than `not_found` is returned at once; found nowhere, this
    /// node's `not_found`.
    pub fn find_in_fleet<T>(
        &self,
        find: impl Fn(&Repo) -> Result<T>,
        newest: impl Fn(&T) -> i64,
    ) -> Result<(Option<NodeView>, T)> {
        let missing = match find(self) {
            Ok(t) => return Ok((None, t)),
            Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => e,
            Err(e) => return Err(e),
        };
        let mut best: Option<(NodeView, T)> = None;
        for view in self.fleet()? {
            match find(&view.repo) {
                Ok(t) if best.as_ref().is_none_or(|(_, b)| newest(&t) > newest(b)) => best = Some((view, t)),
                Ok(_) => {}
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => {}
                Err(e) => return Err(e.context(format!("reading node {}", view.node))),
            }
        }
        match best {
            Some((view, t)) => Ok((Some(view), t)),
            None => Err(missing),
        }
    }
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
