//! The fleet as a server sees it (a bucket of a log per node): handles over this host's
//! replicas of the other nodes' logs, pooled as the server's own are and caught up at most once
//! a second before a request, and the fleet's nodes read again every few seconds, so records
//! another node writes show within `NODES_EVERY` (a new node) or a second (a known one).
//!
//! Listings answer every node's rows, each with its `node`; a route naming a snapshot, a
//! session or a trash item reads it on the node that holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::state::AppState;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::NodeName;
use crate::repo::Repo;

/// How long the list of the fleet's nodes is used before `fleet/` is listed again.
const NODES_EVERY: Duration = Duration::from_secs(3);
/// Idle handles kept per other node.
const KEEP_PER_NODE: usize = 4;
/// How often a handle catches up with its node's log before a request (as the server's own).
const REFRESH: Duration = Duration::from_secs(1);

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
    fn others(&self, repo: &Repo) -> Result<Vec<NodeName>> {
        let Some(me) = repo.node() else { return Ok(Vec::new()) };
        let mut kept = lock(&self.nodes);
        let fresh = kept.as_ref().is_some_and(|(at, _)| at.elapsed() < NODES_EVERY);
        if !fresh {
            *kept = Some((Instant::now(), repo.fleet_nodes()?));
        }
        let all = kept.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        Ok(all.into_iter().filter(|n| n.as_str() != me).collect())
    }

    /// A handle on node `node`'s replica, caught up: an idle one, else opened over `repo`.
    fn take(&self, repo: &Repo, node: &NodeName) -> Result<Repo> {
        let idle = lock(&self.idle).get_mut(node).and_then(Vec::pop);
        let handle = match idle {
            Some(h) => h,
            None => repo.foreign(node)?,
        };
        handle.manifest().refresh(REFRESH)?;
        Ok(handle)
    }

    fn give_back(&self, handles: Vec<(NodeName, Repo)>) {
        let mut idle = lock(&self.idle);
        for (node, h) in handles {
            let kept = idle.entry(node).or_default();
            if kept.len() < KEEP_PER_NODE {
                kept.push(h);
            }
        }
    }
}

/// This node's handle and every other node's, each with its name (None outside a fleet).
pub(crate) type Views<'r> = [(Option<&'r str>, &'r Repo)];

impl AppState {
    /// [`AppState::blocking`] with every node's handle: this node's first, then the others'.
    pub async fn blocking_fleet<T, E, F>(self: &Arc<Self>, f: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&AppState, &Views<'_>) -> std::result::Result<T, E> + Send + 'static,
    {
        self.blocking(move |st, repo| {
            let mut taken = Vec::new();
            let out = (|| {
                for node in st.fleet.others(repo)? {
                    let h = st.fleet.take(repo, &node)?;
                    taken.push((node, h));
                }
                let mut views: Vec<(Option<&str>, &Repo)> = vec![(repo.node(), repo)];
                views.extend(taken.iter().map(|(n, h)| (Some(n.as_str()), h)));
                f(st, &views)
            })();
            st.fleet.give_back(taken);
            out
        })
        .await
    }

    /// [`AppState::blocking`] on the node whose handle `find` finds something on: this one
    /// first, then the others (the one with the greatest `newest` among theirs). Found nowhere,
    /// this node's `not_found`, made the answer's error by `missing`.
    pub async fn blocking_found<T, U: 'static, E, F, G>(
        self: &Arc<Self>,
        (find, missing_as): (F, fn(Error) -> E),
        newest: fn(&U) -> i64,
        f: G,
    ) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: Fn(&Repo) -> Result<U> + Send + 'static,
        G: FnOnce(&AppState, &Repo, U) -> std::result::Result<T, E> + Send + 'static,
    {
        self.blocking_fleet(move |st, views| {
            let mut missing = None;
            let mut best: Option<(&Repo, U)> = None;
            for (i, (_, repo)) in views.iter().enumerate() {
                match find(repo) {
                    Ok(u) if i == 0 => return f(st, repo, u),
                    Ok(u) if best.as_ref().is_none_or(|(_, b)| newest(&u) > newest(b)) => best = Some((repo, u)),
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        missing.get_or_insert(e);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            match best {
                Some((repo, u)) => f(st, repo, u),
                None => Err(missing_as(missing.unwrap_or_else(|| Error::not_found("not found on any node")))),
            }
        })
        .await
    }
}
