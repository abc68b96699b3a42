//! The fleet as a server sees it (a bucket of a log per node): handles over this host's
//! replicas of the other nodes' logs, pooled as the server's own are and caught up at most once
//! a second before a request, and the fleet's nodes read again every few seconds, so records
//! another node writes show within `NODES_EVERY` (a new node) or a second (a known one).
//!
//! Listings answer every node's rows, each with its `node`; a route naming a snapshot, a
//! session or a trash item reads it on the node that holds it (`AppState::blocking_fleet`,
//! `AppState::blocking_found`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::base::error::{Error, Result};
use crate::base::id::NodeName;
use crate::repo::Repo;

/// How long the list of the fleet's nodes is used before `fleet/` is listed again.
const NODES_EVERY: Duration = Duration::from_secs(3);
/// Idle handles kept per other node.
const KEEP_PER_NODE: usize = 4;
/// How often a handle catches up with its node's log before a request (as the server's own).
const REFRESH: Duration = Duration::from_secs(1);
/// How many nodes' handles are caught up at once.
const AT_ONCE: usize = 16;

/// The other nodes' handles, and the fleet's nodes as last listed.
#[derive(Default)]
pub(crate) struct FleetPool {
    nodes: Mutex<Option<(Instant, Vec<NodeName>)>>,
    idle: Mutex<HashMap<NodeName, Vec<Repo>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FleetPool {
    /// The fleet's other nodes (none outside a fleet), listed again once `NODES_EVERY` old.
    pub(crate) fn others(&self, repo: &Repo) -> Result<Vec<NodeName>> {
        let Some(me) = repo.node() else { return Ok(Vec::new()) };
        let mut kept = lock(&self.nodes);
        let fresh = kept.as_ref().is_some_and(|(at, _)| at.elapsed() < NODES_EVERY);
        if !fresh {
            *kept = Some((Instant::now(), repo.fleet_nodes()?));
        }
        let all = kept.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        Ok(all.into_iter().filter(|n| n.as_str() != me).collect())
    }

    /// A handle on node `node`'s replica, caught up, under `repo`'s deadline: as
    /// [`FleetPool::take_all`] takes one.
    pub(crate) fn take(&self, repo: &Repo, node: &NodeName, cache_kib: u32) -> Result<Repo> {
        // A name from a request opens nothing unless it is a node of the fleet: each opening
        // makes a replica file and keeps handles.
        if !self.others(repo)?.contains(node) {
            return Err(crate::ops::fleet::not_a_node(node));
        }
        match self.take_all(repo, vec![node.clone()], cache_kib).pop() {
            Some((_, handle)) => handle,
            None => Err(Error::internal(format!("no handle came back for node {node}"))),
        }
    }

    /// A caught-up handle on each of `nodes` (an idle one, else one opened over `repo`, its
    /// connection's page cache `cache_kib` as pooled handles'), under `repo`'s deadline, all at
    /// once (a few at a time): one round trip to the store for the fleet, not one a node. A
    /// node that cannot be read now comes back as its error.
    pub(crate) fn take_all(&self, repo: &Repo, nodes: Vec<NodeName>, cache_kib: u32) -> Vec<(NodeName, Result<Repo>)> {
        let opener = match repo.opener() {
            Ok(o) => o,
            Err(e) => return nodes.into_iter().map(|n| (n, Err(Error::new(e.kind(), e.message())))).collect(),
        };
        let wanted: Vec<(NodeName, Option<Repo>)> = {
            let mut idle = lock(&self.idle);
            nodes
                .into_iter()
                .map(|n| {
                    let h = idle.get_mut(&n).and_then(Vec::pop);
                    (n, h)
                })
                .collect()
        };
        let mut out = Vec::with_capacity(wanted.len());
        let mut wanted = wanted.into_iter().peekable();
        while wanted.peek().is_some() {
            let batch: Vec<(NodeName, Option<Repo>)> = wanted.by_ref().take(AT_ONCE).collect();
            let done: Vec<(NodeName, Result<Repo>)> = std::thread::scope(|s| {
                let running: Vec<_> = batch
                    .into_iter()
                    .map(|(node, idle)| {
                        let opener = &opener;
                        let name = node.clone();
                        let h = s.spawn(move || -> Result<Repo> {
                            let handle = match idle {
                                Some(h) => h,
                                None => {
                                    let h = opener.open(&name)?;
                                    h.manifest().one_of_many(cache_kib)?;
                                    h
                                }
                            };
                            handle.manifest().refresh(REFRESH)?;
                            Ok(handle)
                        });
                        (node, h)
                    })
                    .collect();
                running
                    .into_iter()
                    .map(|(node, h)| {
                        let r =
                            h.join().unwrap_or_else(|_| Err(Error::internal("catching up a node's replica panicked")));
                        (node, r)
                    })
                    .collect()
            });
            out.extend(done);
        }
        for (_, h) in &out {
            if let Ok(h) = h {
                h.set_deadline(repo.deadline());
            }
        }
        out
    }

    pub(crate) fn give_back(&self, handles: Vec<(NodeName, Repo)>) {
        let mut idle = lock(&self.idle);
        for (node, h) in handles {
            h.set_deadline(None);
            let kept = idle.entry(node).or_default();
            if kept.len() < KEEP_PER_NODE {
                kept.push(h);
            }
        }
    }
}
