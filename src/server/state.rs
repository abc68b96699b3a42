//! The server's shared state: a pool of `Repo` handles for blocking work, session activity and
//! busy counts held in memory, cached exclusion lists, and the reaper that ends sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::options::ServeOptions;
use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::base::time::now_ns;
use crate::fs::walk::Excludes;
use crate::model::session::{EndReason, Session};
use crate::repo::Repo;

/// Idle `Repo` handles kept for reuse; more may exist while requests run.
const POOL_KEEP: usize = 16;

/// Each pooled handle's SQLite page cache, KiB: with [`POOL_KEEP`] handles, 32 MiB at most.
/// They read without a memory map (`Manifest::one_of_many`): sixteen maps of the manifest made
/// the soak's resident memory swing by 40 MiB with the pages they happened to touch.
const POOLED_CACHE_KIB: u32 = 2048;
/// How stale a pooled handle's replica of a bucket's log may be when a request starts.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

type ExcludesKey = (Option<Vec<String>>, Vec<String>);

/// The most compiled exclusion lists a server keeps (distinct settings, not workspaces).
const EXCLUDES_KEPT: usize = 64;

pub(crate) struct AppState {
    pub opts: ServeOptions,
    pool: Mutex<Vec<Repo>>,
    /// Session id -> time of the latest request, not yet written to the manifest.
    activity: Mutex<HashMap<SessionId, i64>>,
    /// Session id -> requests working on it now (the record's `busy`).
    busy: Mutex<HashMap<SessionId, usize>>,
    /// Session id -> requests made with its session token now in flight, bodies included
    /// (at most `ServeOptions::session_requests`).
    session_requests: Arc<Mutex<HashMap<SessionId, usize>>>,
    /// Exclusion settings -> their compiled list.
    excludes: Mutex<HashMap<ExcludesKey, Arc<Excludes>>>,
    /// For reads and snapshot listings, which never consult exclusions: looking up the
    /// workspace's list for them would be a query per request for nothing.
    pub unused_excludes: Excludes,
    /// The store, its open pack files, the decoded bundles and trees, the memory budget and
    /// the live trees' change feeds (a live diff reads again only what changed since the last
    /// one): one set for every pooled handle.
    shared: crate::repo::Shared,
    /// The tokens that may call, read again when the manifest changes.
    pub tokens: crate::ops::tokens::Tokens,
    /// Reaper ticks so far: trash expiry runs on one in `EXPIRE_EVERY`.
    reaps: std::sync::atomic::AtomicU64,
    /// Audit records that belong to no other transaction (refusals, reads), group-committed.
    pub audit: crate::ops::audit::appender::AuditAppender,
    /// When the last time-driven checkpoint was written.
    last_checkpoint: Mutex<std::time::Instant>,
    /// The file watchers of live sessions (`/v1/file/watch`).
    pub watchers: crate::tools::fileapi::watch::Watchers,
    /// The MCP services of live sessions (`/v1/sessions/{id}/mcp`).
    pub mcp: McpServices,
    /// Failed logins of the current interval, audited a few at a time and then summarized.
    pub refusals: super::refusals::Refusals,
    /// The review pages' own state: the browsers logged in, the last verification of the log.
    pub ui: super::ui::UiState,
    /// In a fleet, the handles on the other nodes' replicas.
    pub(crate) fleet: super::fleet::FleetPool,
    /// Whether the repository is a fleet's (a bucket of a log per node).
    pub(crate) in_fleet: bool,
    /// In a fleet, the node each session looked up lives on (None: this one). A session never
    /// moves, so a route on a session asks the fleet once, not at every request.
    session_nodes: Mutex<HashMap<SessionId, Option<crate::base::id::NodeName>>>,
}

/// The most sessions whose node a fleet's server remembers; past it, the map starts afresh.
const SESSION_NODES_KEPT: usize = 65_536;

/// The MCP service of one session for one caller (streamable HTTP, `mcp.rs`).
pub(crate) type McpService =
    rmcp::transport::StreamableHttpService<crate::tools::mcp::McpTools, super::mcp_sessions::BoundedSessions>;

/// MCP services kept at most (one per trove session and caller): the least recently used
/// goes, its MCP sessions closed (its client initializes again). A session's end removes its
/// own.
const MCP_KEEP: usize = 256;

/// One kept MCP service: what serves requests, its sessions (for their count), what stops
/// them all, and when it was last used.
#[derive(Clone)]
pub(crate) struct KeptService {
    pub service: McpService,
    pub sessions: Arc<super::mcp_sessions::BoundedSessions>,
    stop: tokio_util::sync::CancellationToken,
    used: std::time::Instant,
}

impl KeptService {
    /// A service with its sessions and the token that stops them.
    pub fn new(
        service: McpService,
        sessions: Arc<super::mcp_sessions::BoundedSessions>,
        stop: tokio_util::sync::CancellationToken,
    ) -> KeptService {
        KeptService { service, sessions, stop, used: std::time::Instant::now() }
    }
}

/// The MCP services of live sessions, by (session, actor), and the count of their MCP
/// sessions.
#[derive(Default)]
pub(crate) struct McpServices {
    all: Mutex<HashMap<(SessionId, String), KeptService>>,
    /// MCP sessions open in every service.
    pub open: Arc<super::mcp_sessions::OpenCount>,
}

impl McpServices {
    /// The service of `session` for `actor`, made by `make` on first use.
    pub fn get_or_make(&self, session: &SessionId, actor: &str, make: impl FnOnce() -> KeptService) -> KeptService {
        let key = (session.clone(), actor.to_string());
        let mut all = lock(&self.all);
        if let Some(s) = all.get_mut(&key) {
            s.used = std::time::Instant::now();
            return s.clone();
        }
        if all.len() >= MCP_KEEP {
            let oldest = all.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone());
            if let Some(s) = oldest.and_then(|k| all.remove(&k)) {
                s.stop.cancel();
            }
        }
        let made = make();
        all.insert(key, made.clone());
        made
    }

    /// Stops the services of `session` and their MCP sessions (it ended, or was paused).
    pub fn end_session(&self, session: &SessionId) {
        lock(&self.all).retain(|(s, _), kept| {
            let keep = s != session;
            if !keep {
                kept.stop.cancel();
            }
            keep
        });
    }
}

/// Trash expiry runs on the first reaper tick and every this many after (a minute at the
/// default 5 s interval): retention is counted in days, and a workspace with a quota is
/// scanned whole.
const EXPIRE_EVERY: u64 = 12;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking request cannot leave these maps inconsistent (single inserts and removes).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One of a session's request slots, given back when dropped (with the response's body).
pub(crate) struct SessionSlot {
    all: Arc<Mutex<HashMap<SessionId, usize>>>,
    id: SessionId,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut all = lock(&self.all);
        if let Some(n) = all.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                all.remove(&self.id);
            }
        }
    }
}

/// Marks a session busy until dropped.
pub(crate) struct Busy {
    state: Arc<AppState>,
    id: SessionId,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut busy = lock(&self.state.busy);
        if let Some(n) = busy.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                busy.remove(&self.id);
            }
        }
    }
}

impl AppState {
    pub fn new(opts: ServeOptions) -> Result<AppState> {
        // Opening one handle up front turns a bad --repo into an error before binding.
        let budget = crate::base::budget::Budget::new(opts.memory_budget);
        let opts_refusal_interval = opts.refusal_interval;
        let mut first = Repo::open_as(&opts.repo, opts.cache_dir.as_deref(), opts.cache_size, opts.node.clone())?;
        if let Some(files) = opts.batch_files {
            first.set_batch_files(files);
        }
        first.manifest().one_of_many(POOLED_CACHE_KIB)?;
        first.set_budget(budget);
        // One quota of inotify watches for the live trees' feeds and the file watchers.
        let quota = Arc::new(crate::fs::quota::WatchQuota::for_this_system(opts.session_watches));
        let live_feeds = Arc::new(crate::ops::live_read::LiveFeeds::within(quota.clone()));
        first.set_live_feeds(live_feeds);
        let shared = first.shared();
        let in_fleet = first.node().is_some();
        let tokens = crate::ops::tokens::Tokens::new(&first, opts.token_hashes.clone())?;
        let audit = crate::ops::audit::appender::AuditAppender::over(shared.open_handle()?)?;
        std::fs::create_dir_all(&opts.workspaces)
            .map_err(|e| Error::io("create the workspaces directory", &opts.workspaces, e))?;
        Ok(AppState {
            opts,
            pool: Mutex::new(vec![first]),
            activity: Mutex::new(HashMap::new()),
            busy: Mutex::new(HashMap::new()),
            session_requests: Default::default(),
            excludes: Mutex::new(HashMap::new()),
            unused_excludes: Excludes::effective(Some(&[]), &[])?,
            shared,
            tokens,
            reaps: std::sync::atomic::AtomicU64::new(0),
            audit,
            last_checkpoint: Mutex::new(std::time::Instant::now()),
            watchers: crate::tools::fileapi::watch::Watchers::new(quota),
            mcp: Default::default(),
            refusals: super::refusals::Refusals::new(opts_refusal_interval),
            ui: Default::default(),
            fleet: Default::default(),
            in_fleet,
            session_nodes: Mutex::new(HashMap::new()),
        })
    }

    /// Runs `f` with a pooled `Repo` on a blocking thread, under the request's deadline. A
    /// panic in `f` is logged with the request's id and answered as `internal`, never with
    /// its text.
    pub async fn blocking<T, E, F>(self: &Arc<Self>, f: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&AppState, &Repo) -> std::result::Result<T, E> + Send + 'static,
    {
        let state = self.clone();
        let request = super::request::current();
        let deadline = request.as_ref().map(|r| r.deadline);
        let scope = request.clone();
        let work = move || {
            let run = || state.with_repo(deadline, |repo| f(&state, repo));
            // The request goes along onto the blocking thread: what the work answers there (a
            // tool's error envelope) names the request's id.
            match scope {
                Some(info) => super::request::REQUEST.sync_scope(info, run),
                None => run(),
            }
        };
        tokio::task::spawn_blocking(work).await.map_err(|e| {
            let id = request.map(|r| r.id).unwrap_or_default();
            if e.is_panic() {
                let payload = e.into_panic();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(request = %id, panic = %message, "a request worker panicked");
                E::from(Error::internal("a request worker panicked"))
            } else {
                tracing::error!(request = %id, error = %e, "a request worker was cancelled");
                E::from(Error::internal("a request worker was cancelled"))
            }
        })?
    }

    /// Runs a short read (a file of at most the JSON limit) on the current worker: a hop to the
    /// blocking pool costs more than the read. One manifest read transaction covers it.
    pub fn inline<T, E, F>(&self, f: F) -> std::result::Result<T, E>
    where
        E: From<Error>,
        F: FnOnce(&AppState, &Repo) -> std::result::Result<T, E>,
    {
        let deadline = super::request::current().map(|r| r.deadline);
        self.with_repo(deadline, |repo| repo.manifest().read(|| f(self, repo)))
    }

    /// Runs `f` with a `Repo` from the pool (opened when none is idle), under `deadline`, and
    /// gives it back. Work that would start after the deadline does not start.
    fn with_repo<T, E: From<Error>>(
        &self,
        deadline: Option<std::time::Instant>,
        f: impl FnOnce(&Repo) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let repo = match lock(&self.pool).pop() {
            Some(r) => r,
            None => {
                let mut r = self.shared.open_handle().map_err(E::from)?;
                r.manifest().one_of_many(POOLED_CACHE_KIB).map_err(E::from)?;
                if let Some(files) = self.opts.batch_files {
                    r.set_batch_files(files);
                }
                r
            }
        };
        repo.set_deadline(deadline);
        // A bucket's other hosts write too: what they wrote shows within a second.
        let out = repo
            .manifest()
            .refresh(REFRESH)
            .map_err(E::from)
            .and_then(|_| repo.check_deadline("waiting to start").map_err(E::from))
            .and_then(|()| f(&repo));
        repo.set_deadline(None);
        let mut pool = lock(&self.pool);
        // A handle opened read-only (a full disk) is not kept: the next is opened writable.
        if pool.len() < POOL_KEEP && repo.read_only().is_none() {
            pool.push(repo);
        }
        out
    }

    /// Stops what serves session `id` live (its watchers, its MCP services): it ended or paused.
    pub fn session_ended(&self, id: &SessionId) {
        self.watchers.end_session(id);
        self.mcp.end_session(id);
    }

    pub fn touch(&self, id: &SessionId) {
        let now = now_ns();
        let mut act = lock(&self.activity);
        match act.get_mut(id) {
            Some(t) => *t = now,
            None => {
                act.insert(id.clone(), now);
            }
        }
    }

    /// The newest activity known for `s`, including what is not written yet.
    pub fn last_activity(&self, s: &Session) -> i64 {
        lock(&self.activity).get(&s.id).copied().unwrap_or(0).max(s.last_activity_ns)
    }

    pub fn is_busy(&self, id: &SessionId) -> bool {
        lock(&self.busy).contains_key(id)
    }

    /// A request slot of session `id`, if it has one free: a session's token may not hold more
    /// than `session_requests` requests (uploads, downloads, streams) at once, so no session
    /// takes every connection or worker.
    pub fn session_slot(&self, id: &SessionId) -> Option<SessionSlot> {
        let mut all = lock(&self.session_requests);
        let n = all.entry(id.clone()).or_insert(0);
        if *n >= self.opts.session_requests.max(1) {
            return None;
        }
        *n += 1;
        Some(SessionSlot { all: self.session_requests.clone(), id: id.clone() })
    }

    pub fn mark_busy(self: &Arc<Self>, id: &SessionId) -> Busy {
        *lock(&self.busy).entry(id.clone()).or_insert(0) += 1;
        Busy { state: self.clone(), id: id.clone() }
    }

    /// The session record as the API shows it.
    pub fn record(&self, s: &Session) -> crate::model::session::SessionRecord {
        let mut r = s.record(self.is_busy(&s.id));
        r.last_activity = self.last_activity(s) as f64 / 1e9;
        r
    }

    /// The compiled exclusion list of `workspace`. Lists are kept by their settings, not by
    /// workspace (most workspaces share the defaults, and a server over its life sees
    /// workspaces without number), at most `EXCLUDES_KEPT` of them.
    pub fn excludes(&self, repo: &Repo, workspace: &str) -> Result<Arc<Excludes>> {
        let row = crate::manifest::workspaces::get(repo.manifest().conn(), workspace)?;
        let key: ExcludesKey = row.map(|r| (r.excludes, r.extra_excludes)).unwrap_or_default();
        if let Some(ex) = lock(&self.excludes).get(&key) {
            return Ok(ex.clone());
        }
        let ex = Arc::new(Excludes::effective(key.0.as_deref(), &key.1)?);
        let mut kept = lock(&self.excludes);
        if kept.len() >= EXCLUDES_KEPT {
            kept.clear();
        }
        kept.insert(key, ex.clone());
        Ok(ex)
    }

    /// Purges what each workspace's trash retention expires; a failure is logged and tried
    /// again at the next tick.
    fn expire_trash(&self, repo: &Repo) {
        let expired = repo.expired_trash(None).and_then(|items| repo.purge_trash(&items, false, "trove-serve"));
        match expired {
            Ok(r) if r.purged > 0 => {
                tracing::info!(items = r.purged, bytes = r.bytes, "expired trash items purged")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot expire trash items now; retried at the next tick"),
        }
    }

    /// A checkpoint when `checkpoint_interval` passed since the last one and records came
    /// since; a failure is logged and tried again at the next tick.
    fn checkpoint_on_time(&self, repo: &Repo) {
        let mut last = lock(&self.last_checkpoint);
        if last.elapsed() < self.opts.checkpoint_interval {
            return;
        }
        let behind = repo.latest_checkpoint().and_then(|c| Ok(repo.audit_size()? > c.map_or(0, |c| c.size)));
        match behind.and_then(|b| if b { repo.checkpoint().map(Some) } else { Ok(None) }) {
            Ok(Some(c)) => tracing::debug!(size = c.size, "audit checkpoint written"),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot write an audit checkpoint now; tried again at the next tick"),
        }
        *last = std::time::Instant::now();
    }

    /// Appends the record of a read when reads are audited (`--audit-reads`); a failure is
    /// logged, never the failure of the read.
    pub fn audit_read(&self, record: impl FnOnce() -> crate::model::audit::AuditRecord) {
        if !self.opts.audit_reads {
            return;
        }
        if let Err(e) = self.audit.append(record()) {
            tracing::warn!(error = %e, "a read could not be audited");
        }
    }

    /// Writes gathered activity, ends every session whose ttl or idle time ran out, and
    /// expires trash items.
    fn reap_once(&self, repo: &Repo) -> Result<Vec<(SessionId, EndReason)>> {
        // Leases a full disk kept from being withdrawn would hold every collection back.
        repo.withdraw_leases();
        // A change that reached its tree but whose record failed stays journaled: recorded
        // here, not only at the next start (in a bucket, only this host's journal names its
        // pre-images). A plan of a change in flight is left to it (its workspace is locked).
        if let Err(e) = repo.recover_journal() {
            tracing::warn!(error = %e, "the tool journal could not be read; its changes are settled at the next tick or start");
        }
        // In a fleet, a purge or restore of another node's items left half done (its second
        // write failed, or its plan was still journaled) is finished.
        if let Err(e) = repo.recover_purges() {
            tracing::warn!(error = %e, "purges or restores of other nodes' trash items were not settled; tried again at the next tick");
        }
        let seen: Vec<(SessionId, i64)> = lock(&self.activity).drain().collect();
        repo.touch_sessions(&seen)?;
        let now = now_ns();
        let mut ended = Vec::new();
        let listed = std::time::Instant::now();
        let sessions = repo.sessions(false)?;
        // Watchers of sessions no longer live (ended or paused by another process too) stop.
        let live: Vec<SessionId> =
            sessions.iter().filter(|s| s.serving_dir().is_some()).map(|s| s.id.clone()).collect();
        self.watchers.keep_sessions(&live, listed);
        // In a bucket every host's sessions are in the replica: this server ends only those it
        // serves (ending another host's would snapshot a directory of this one).
        let sessions = match repo.host_id()? {
            Some(host) => {
                let mine = crate::manifest::sessions::hosted_by(repo.manifest().conn(), &host)?;
                sessions.into_iter().filter(|s| mine.contains(&s.id)).collect()
            }
            None => sessions,
        };
        for s in sessions {
            if self.is_busy(&s.id) {
                continue;
            }
            if let Some(reason) = s.due(now, s.last_activity_ns, self.opts.idle_timeout) {
                match repo.end_session(&s.id, reason, "trove-serve") {
                    Ok(_) => {
                        self.session_ended(&s.id);
                        tracing::info!(session = %s.id, reason = reason.as_str(), "session ended");
                        ended.push((s.id, reason));
                    }
                    // Ended meanwhile by a DELETE: nothing left to do.
                    Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => {}
                    // One session that cannot end now (its final snapshot failed) does not keep
                    // the others from ending; it is tried again at the next tick.
                    Err(e) => {
                        tracing::warn!(session = %s.id, reason = reason.as_str(), error = %e, "cannot end an expired session now; retried at the next tick")
                    }
                }
            }
        }
        if self.reaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed).is_multiple_of(EXPIRE_EVERY) {
            self.expire_trash(repo);
        }
        // A flood of failed logins that stopped is summarized without waiting for another.
        if let Some(summary) = self.refusals.due() {
            super::refusals::append_all(vec![summary], |r| self.audit.append(r));
        }
        self.checkpoint_on_time(repo);
        Ok(ended)
    }
}

/// Maintenance: every `maintenance_interval` (the first a whole interval after start), each
/// workspace's retention policy is applied and garbage is collected with `gc_grace`, on the
/// blocking pool; a failure is logged and tried again at the next interval. Stops when told.
pub(crate) async fn maintain(state: Arc<AppState>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let every = state.opts.maintenance_interval;
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let (grace, recompress) = (state.opts.gc_grace, state.opts.maintenance_recompress);
        let done: Result<_> = state
            .blocking(move |_, repo| {
                let forgot = repo.forget(None, false, "trove-serve")?;
                let gone: usize = forgot.workspaces.iter().map(|w| w.forgotten.len()).sum();
                let opts =
                    crate::ops::gc::GcOptions { grace, recompress, actor: "trove-serve".into(), ..Default::default() };
                Ok((gone, repo.gc(&opts)?))
            })
            .await;
        match done {
            Ok((gone, r)) => tracing::info!(
                snapshots_forgotten = gone,
                bytes_reclaimed = r.bytes_reclaimed,
                waiting = r.waiting,
                "maintenance done"
            ),
            Err(e) => tracing::warn!(error = %e, "maintenance failed; tried again at the next interval"),
        }
    }
}

/// The reaper: every `reap_interval`, records activity and ends expired sessions; once more
/// when told to stop, so no acknowledged activity is lost on shutdown.
pub(crate) async fn reap(state: Arc<AppState>, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<()> {
    let mut tick = tokio::time::interval(state.opts.reap_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.changed() => true,
        };
        // A failed tick (a busy disk, a locked manifest) is logged and retried at the next
        // one; the last, at shutdown, is also returned.
        let done: Result<_> = state.blocking(|st, repo| st.reap_once(repo)).await;
        if let Err(e) = &done {
            tracing::warn!(error = %e, "the reaper's tick failed; retried at the next one");
        }
        if stopping {
            if let Some(summary) = state.refusals.flush() {
                super::refusals::append_all(vec![summary], |r| state.audit.append(r));
            }
            return done.map(|_| ());
        }
    }
}

/// How matches on several nodes are told apart: which is newest, and, when a name must be
/// unique across nodes (a snapshot prefix), the id of each.
pub(crate) type Ranking<U> = (fn(&U) -> i64, Option<fn(&U) -> String>);

/// This node's handle and every other node's, each with its name (None outside a fleet).
pub(crate) type Views<'r> = [(Option<&'r str>, &'r Repo)];

impl AppState {
    /// [`AppState::blocking`] on node `node`'s handle (None, or this node's name: this node's).
    pub async fn blocking_on<T, E, F>(
        self: &Arc<Self>,
        node: Option<crate::base::id::NodeName>,
        f: F,
    ) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&AppState, &Repo) -> std::result::Result<T, E> + Send + 'static,
    {
        self.blocking(move |st, repo| match node {
            Some(node) if repo.node() != Some(node.as_str()) => {
                let handle = st.fleet.take(repo, &node, POOLED_CACHE_KIB)?;
                let out = f(st, &handle);
                st.fleet.give_back(vec![(node, handle)]);
                out
            }
            _ => f(st, repo),
        })
        .await
    }

    /// The node a request names (`node=`: one node's log, store or workspaces), parsed at the
    /// edge; None for none (this node's). Outside a fleet's bucket there is no node of that
    /// name (`not_found`), as in a fleet a name that is no node of it is when a handle is asked
    /// for it.
    pub fn named_node(&self, node: Option<crate::base::id::NodeName>) -> Result<Option<crate::base::id::NodeName>> {
        match node {
            Some(node) if !self.in_fleet => Err(Error::not_found(format!(
                "no node {node} here: node= names a node of a fleet's bucket, which this repository is not"
            ))),
            node => Ok(node),
        }
    }

    /// In a fleet, the node holding session `id` (None outside one, or for this node's, which
    /// is looked for first). A route reading another node's session reads it on that node's
    /// handle, which serves its snapshots, never a live tree (that is on the node's host).
    pub async fn session_node(
        self: &Arc<Self>,
        id: crate::base::id::SessionId,
    ) -> std::result::Result<Option<crate::base::id::NodeName>, super::ApiError> {
        if !self.in_fleet {
            return Ok(None);
        }
        if let Some(known) = lock(&self.session_nodes).get(&id) {
            return Ok(known.clone());
        }
        let sid = id.clone();
        let node = self
            .blocking_found(
                (move |repo: &Repo| repo.session(&sid), super::error::session_missing),
                (|s: &crate::model::session::Session| s.created_ns, None),
                |_, repo, _| match repo.node().filter(|_| repo.is_other_node()) {
                    Some(node) => Ok(Some(crate::base::id::NodeName::parse(node)?)),
                    None => Ok(None),
                },
            )
            .await?;
        let mut known = lock(&self.session_nodes);
        if known.len() >= SESSION_NODES_KEPT {
            known.clear();
        }
        known.insert(id, node.clone());
        Ok(node)
    }

    /// In a fleet, refuses a sandbox operation on another node's session (`read_only`, naming
    /// the node): the operations work on a live tree, which is on that node's host. This node's
    /// session, or one found on no node, is the operation's own lookup's to answer.
    pub async fn sandbox_here(self: &Arc<Self>, id: &SessionId) -> Result<()> {
        if !self.in_fleet {
            return Ok(());
        }
        match self.session_node(id.clone()).await {
            Ok(None) => Ok(()),
            Ok(Some(node)) => Err(Error::new(
                crate::base::error::ErrorKind::ReadOnly,
                format!(
                    "session {id} is node {node}'s sandbox: call its file operations on that node's server, or read its files here from its snapshots with GET /api/sessions/{id}/files"
                ),
            )),
            Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::new(e.kind(), e.message())),
        }
    }

    /// In a fleet, the node holding snapshot `snap` (None outside one, or for this node's).
    pub async fn snapshot_node(
        self: &Arc<Self>,
        snap: String,
    ) -> std::result::Result<Option<crate::base::id::NodeName>, super::ApiError> {
        if !self.in_fleet {
            return Ok(None);
        }
        let unique = crate::ops::fleet::unique_snapshot(&snap);
        self.blocking_found(
            (move |repo: &Repo| repo.resolve_snapshot(&snap, None), super::ApiError::from),
            (|s| s.created_ns, unique),
            |_, repo, _| Ok(repo.node().map(crate::base::id::NodeName::parse).transpose()?),
        )
        .await
    }

    /// [`AppState::blocking`] with every node's handle: this node's first, then the others'. A
    /// node whose replica cannot be read now (its log damaged, the store failing) is left out,
    /// logged: one node does not take the fleet's view down.
    pub async fn blocking_fleet<T, E, F>(self: &Arc<Self>, f: F) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&AppState, &Views<'_>) -> std::result::Result<T, E> + Send + 'static,
    {
        self.blocking(move |st, repo| {
            let taken = st.other_handles(repo);
            let mut views: Vec<(Option<&str>, &Repo)> = vec![(repo.node(), repo)];
            views.extend(taken.iter().map(|(n, h)| (Some(n.as_str()), h)));
            let out = f(st, &views);
            drop(views);
            st.fleet.give_back(taken);
            out
        })
        .await
    }

    /// A caught-up handle on every other node of the fleet that can be read now; the others
    /// are logged and left out.
    fn other_handles(&self, repo: &Repo) -> Vec<(crate::base::id::NodeName, Repo)> {
        let nodes = match self.fleet.others(repo) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "the fleet's nodes could not be listed: this node's records only");
                return Vec::new();
            }
        };
        let mut taken = Vec::new();
        for (node, h) in self.fleet.take_all(repo, nodes, POOLED_CACHE_KIB) {
            match h {
                Ok(h) => taken.push((node, h)),
                Err(e) => tracing::warn!(node = %node, error = %e, "a node of the fleet could not be read: left out"),
            }
        }
        taken
    }

    /// [`AppState::blocking`] on the node whose handle `find` finds something on: this one
    /// first (the fleet not asked), then the others (the one with the greatest `newest` among
    /// theirs). With a `unique` id (a snapshot named by a prefix), every node is asked, and
    /// matches of two ids are refused as ambiguous. Found nowhere, this node's `not_found`,
    /// made the answer's error by `missing_as`.
    pub async fn blocking_found<T, U: 'static, E, F, G>(
        self: &Arc<Self>,
        (find, missing_as): (F, fn(Error) -> E),
        (newest, unique): Ranking<U>,
        f: G,
    ) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: Fn(&Repo) -> Result<U> + Send + 'static,
        G: FnOnce(&AppState, &Repo, U) -> std::result::Result<T, E> + Send + 'static,
    {
        let in_fleet = self.in_fleet;
        self.blocking(move |st, repo| {
            let mut missing = None;
            let mut found: Vec<(Option<usize>, U)> = Vec::new();
            match find(repo) {
                Ok(u) if unique.is_none() || !in_fleet => return f(st, repo, u),
                Ok(u) => found.push((None, u)),
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => missing = Some(e),
                Err(e) => return Err(e.into()),
            }
            let taken = if in_fleet { st.other_handles(repo) } else { Vec::new() };
            let out = (|| {
                for (i, (_, h)) in taken.iter().enumerate() {
                    match find(h) {
                        Ok(u) => found.push((Some(i), u)),
                        Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => {}
                        Err(e) => return Err(E::from(e)),
                    }
                }
                let name = |i: &Option<usize>| match i {
                    Some(i) => taken[*i].0.to_string(),
                    None => repo.node().unwrap_or_default().to_owned(),
                };
                let pick = crate::ops::fleet::pick_match(&found, newest, unique, name).map_err(E::from)?;
                match pick {
                    Some(k) => {
                        let (i, u) = found.swap_remove(k);
                        f(st, i.map_or(repo, |i| &taken[i].1), u)
                    }
                    None => Err(missing_as(missing.unwrap_or_else(|| Error::not_found("found on no node")))),
                }
            })();
            st.fleet.give_back(taken);
            out
        })
        .await
    }
}
