//! File watchers of the sandbox file API (`POST /v1/file/watch`, poll, wait, SSE): each
//! watches part of a session's live tree through [`crate::fs::watch`] on a thread of its own
//! and keeps the events its session may see in a bounded queue, numbered by `seq`. What a
//! client may not see never enters the queue: paths outside the session's scope or the watched
//! path, excluded names, trove's own temporaries. A change trove made itself (a tool's write,
//! a delete into the trash, a restore) is reported as the change it was, with the audit record
//! it became. A queue that overflows drops its oldest events, and the next poll says so
//! (`overflow`), so a client knows to read the tree again.

use std::collections::{HashMap, VecDeque};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{show_path, Sandbox, Style};
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::SessionId;
use crate::base::path;
use crate::base::time::now_ns;
use crate::fs::quota::WatchQuota;
use crate::fs::watch::{ChangeKind, DirWatch, Notice};
use crate::fs::workdir::{Kind, WorkDir};
use crate::model::scope::Scope;
use crate::ops::notices;

/// Events a watcher keeps for its clients; older ones are dropped (and `overflow` said).
pub const QUEUE: usize = 10_000;
/// Bytes of events a watcher keeps (a path may be kilobytes long): older ones are dropped.
pub const QUEUE_BYTES: usize = 1 << 20;
/// Bytes of events every watcher of the server keeps together: past it, the watcher that queues
/// drops its own oldest.
pub const TOTAL_BYTES: usize = 32 << 20;
/// Changes a watcher gathers for its debounce at most; more are queued at once.
const MAX_PENDING: usize = 1000;
/// Watchers one session may have at once (waits included).
pub const PER_SESSION: usize = 16;
/// Watchers the whole server may have at once: each holds a thread, an inotify instance, up to
/// [`QUEUE_BYTES`] of events and its directories' watches (of the server's [`WatchQuota`]).
pub const TOTAL: usize = 256;
/// A watcher nobody polled for this long stops by itself.
pub const IDLE: Duration = Duration::from_secs(600);
/// The longest debounce, in milliseconds.
pub const MAX_DEBOUNCE_MS: u64 = 10_000;
/// The longest wait for one event, in seconds.
pub const MAX_WAIT_S: f64 = 300.0;
/// The longest long-poll, in seconds.
pub const MAX_POLL_S: f64 = 60.0;
/// The most events one poll answers.
pub const MAX_POLL_LIMIT: usize = 1000;
/// Patterns in one watcher's include or exclude list.
const MAX_PATTERNS: usize = 256;
/// How long an event of trove's own change waits for the audit record it becomes: the record
/// is appended right after the change's renames.
const AUDIT_WAIT: Duration = Duration::from_millis(500);
/// How often a watcher's thread looks whether it was stopped or went idle.
const TICK: Duration = Duration::from_millis(100);

/// What kind of change an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// A file or directory appeared.
    Create,
    /// A file's content changed.
    Write,
    /// A file or directory went away.
    Remove,
    /// A file or directory was renamed within the watched tree (`old_path` is where it was).
    Rename,
    /// Its permissions or other metadata changed.
    Chmod,
}

fn yes() -> bool {
    true
}

/// `POST /v1/file/watch`: what to watch.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    /// A directory (or one file): workspace-relative (`""` is the workspace root), or absolute
    /// under the sandbox root.
    #[schemars(schema_with = "super::path_or_root_schema")]
    pub path: String,
    /// The exact workspace-relative path bytes in standard base64, for a name that is not
    /// UTF-8; given, it is the path, not `path`.
    #[schemars(regex(pattern = crate::base::path::BASE64_PATTERN))]
    pub path_base64: Option<String>,
    /// Whether directories below are watched too (default true).
    #[serde(default = "yes")]
    pub recursive: bool,
    /// Milliseconds to gather changes of one path into one event (0, the default, reports each
    /// change; at most 10000).
    #[serde(default, deserialize_with = "crate::base::count::de_u64")]
    #[schemars(range(min = 0, max = 10000))]
    pub debounce: Option<u64>,
    /// Globs a file's name (or, with a `/`, its path below the watched directory) must match
    /// to be reported; none reports every file. Directories are always reported.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub include_patterns: Vec<String>,
    /// Names (or globs) of files and directories whose changes, and everything below them,
    /// are not reported, such as `.git` or `node_modules`.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub exclude: Vec<String>,
    /// The event types reported (default all).
    pub event_types: Option<Vec<EventType>>,
}

/// `POST /v1/file/watch/wait`: the one path to wait on.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// The file (or directory) to wait on; it need not exist yet.
    #[schemars(schema_with = "super::path_schema")]
    pub path: String,
    /// The exact workspace-relative path bytes in standard base64, for a name that is not UTF-8.
    #[schemars(regex(pattern = crate::base::path::BASE64_PATTERN))]
    pub path_base64: Option<String>,
    /// Seconds to wait (default 30, at most 300).
    #[schemars(range(min = 0.0, max = 300.0))]
    pub timeout: Option<f64>,
    /// The event types that end the wait (default all). With `create`, a path that exists
    /// already ends it at once with a create event.
    pub event_types: Option<Vec<EventType>>,
}

/// `POST /v1/file/watch/{watcher_id}/poll`
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// The last seq consumed: the previous answer's `cursor` (default 0, from the start).
    #[serde(default, deserialize_with = "crate::base::count::de_u64")]
    #[schemars(range(min = 0))]
    pub cursor: Option<u64>,
    /// The most events answered (default 100, at most 1000).
    #[serde(default, deserialize_with = "crate::base::count::de")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// Seconds to wait for an event when none is queued (default 0, at most 60).
    #[schemars(range(min = 0.0, max = 60.0))]
    pub timeout: Option<f64>,
}

/// One change, as the seed shows it (times in seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileEvent {
    /// Its number in the watcher's queue, from 1.
    pub seq: u64,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The path, named as the watcher's path was (absolute or relative).
    pub path: String,
    /// The path below the watched directory (below a watched file's directory).
    pub relative_path: String,
    /// For a rename, where it was.
    pub old_path: Option<String>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// When the change was seen.
    pub timestamp: f64,
    /// Its modification time, if it still exists.
    pub mtime: Option<f64>,
    /// Its size in bytes, if it still exists.
    pub size: Option<u64>,
    /// Its inode number, if it still exists.
    pub inode: Option<u64>,
    /// The audit record of the change, when trove made it (a tool, the file API, a restore).
    pub audit_seq: Option<i64>,
    /// The exact workspace-relative path bytes in standard base64, when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
}

/// A watcher, as created.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WatchInfo {
    /// Its id, for poll, events and delete.
    pub watcher_id: String,
    /// The session whose tree it watches.
    pub session_id: SessionId,
    /// The watched path, as given.
    pub path: String,
    /// Whether directories below are watched.
    pub recursive: bool,
    /// Milliseconds changes of one path are gathered for.
    pub debounce: u64,
    /// The include patterns.
    pub include_patterns: Vec<String>,
    /// The exclusions.
    pub exclude: Vec<String>,
    /// The event types reported.
    pub event_types: Vec<EventType>,
    /// When it was created (seconds since the epoch).
    pub created_at: f64,
    /// The newest seq so far (0 before the first event).
    pub cursor: u64,
}

/// A poll's answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PollData {
    /// The watcher polled.
    pub watcher_id: String,
    /// The events after the cursor, oldest first.
    pub events: Vec<FileEvent>,
    /// The seq to pass as the next poll's cursor.
    pub cursor: u64,
    /// Whether events were lost after the cursor: refresh the file tree, then go on from
    /// `cursor`.
    pub overflow: bool,
}

/// What a stopped watcher answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Stopped {
    /// The watcher.
    pub watcher_id: String,
    /// Always true.
    pub stopped: bool,
}

/// One place in a watcher's queue.
#[derive(Debug, Clone)]
enum Entry {
    Event(FileEvent),
    /// Changes were lost here (the kernel's queue overflowed).
    Lost(u64),
}

impl Entry {
    /// The bytes it holds: itself and its strings.
    fn cost(&self) -> usize {
        let strings = match self {
            Entry::Event(e) => {
                e.path.len()
                    + e.relative_path.len()
                    + e.old_path.as_ref().map_or(0, String::len)
                    + e.path_base64.as_ref().map_or(0, String::len)
            }
            Entry::Lost(_) => 0,
        };
        std::mem::size_of::<Entry>() + strings
    }

    fn seq(&self) -> u64 {
        match self {
            Entry::Event(e) => e.seq,
            Entry::Lost(s) => *s,
        }
    }
}

#[derive(Default)]
struct Queue {
    entries: VecDeque<Entry>,
    /// What the entries hold, in bytes (see [`Entry::cost`]).
    bytes: usize,
    /// The newest seq handed out.
    last: u64,
    /// Every seq up to this one was dropped for room.
    dropped_through: u64,
}

/// A running watcher, shared between its thread and the requests that read it.
pub struct Watcher {
    info: WatchInfo,
    queue: Mutex<Queue>,
    /// The newest seq, for clients waiting for one.
    newest: tokio::sync::watch::Sender<u64>,
    stop: AtomicBool,
    used: Mutex<Instant>,
    /// When it started: a sweep by sessions listed before then must not stop it.
    started: Instant,
    /// A wait's watcher: not listed, removed when the wait ends.
    one_shot: bool,
    /// The bytes queued by every watcher of the server.
    queued: Arc<AtomicUsize>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let bytes = lock(&self.queue).bytes;
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every holder changes these whole (a push, a pop): a panic elsewhere leaves them sound.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watcher {
    /// The watcher as created, with the newest seq.
    pub fn info(&self) -> WatchInfo {
        WatchInfo { cursor: lock(&self.queue).last, ..self.info.clone() }
    }

    /// The session it belongs to.
    pub fn session(&self) -> &SessionId {
        &self.info.session_id
    }

    /// Whether it stopped (deleted, its session ended, idle, or its tree went away).
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A receiver that changes whenever an event is queued.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// The events after `cursor`, at most `limit`; `overflow` when some after it were lost.
    pub fn poll(&self, cursor: u64, limit: usize) -> Result<PollData> {
        *lock(&self.used) = Instant::now();
        let q = lock(&self.queue);
        self.check_cursor(cursor, q.last)?;
        let mut overflow = cursor < q.dropped_through;
        let mut last = cursor.max(q.dropped_through);
        let mut events = Vec::new();
        // Seqs are consecutive from the front: skip straight to the first after the cursor.
        let front = q.entries.front().map_or(last + 1, Entry::seq);
        let skip = (last + 1).saturating_sub(front) as usize;
        for entry in q.entries.iter().skip(skip) {
            if events.len() >= limit {
                break;
            }
            match entry {
                Entry::Event(e) => events.push(e.clone()),
                Entry::Lost(_) => overflow = true,
            }
            last = entry.seq();
        }
        Ok(PollData { watcher_id: self.info.watcher_id.clone(), events, cursor: last, overflow })
    }

    /// Refuses a cursor past `last`, the newest seq: no poll answered it.
    fn check_cursor(&self, cursor: u64, last: u64) -> Result<()> {
        if cursor > last {
            return Err(Error::invalid_argument(format!(
                "cursor {cursor} is past the newest seq {last} of watcher {}: pass the cursor a poll answered",
                self.info.watcher_id
            )));
        }
        Ok(())
    }

    /// Checks `cursor` as a poll would, before waiting on it.
    pub fn valid_cursor(&self, cursor: u64) -> Result<()> {
        self.check_cursor(cursor, lock(&self.queue).last)
    }

    fn push(&self, make: impl FnOnce(u64) -> Entry) {
        let seq = {
            let mut q = lock(&self.queue);
            q.last += 1;
            let entry = make(q.last);
            let cost = entry.cost();
            q.bytes += cost;
            let total = self.queued.fetch_add(cost, Ordering::Relaxed) + cost;
            q.entries.push_back(entry);
            // Room is made from this watcher's own oldest events, never another's: whoever
            // fills the server's share pays for it.
            let mut over = total.saturating_sub(TOTAL_BYTES);
            while q.entries.len() > 1 && (q.entries.len() > QUEUE || q.bytes > QUEUE_BYTES || over > 0) {
                let Some(old) = q.entries.pop_front() else { break };
                let cost = old.cost();
                q.bytes -= cost;
                over = over.saturating_sub(cost);
                self.queued.fetch_sub(cost, Ordering::Relaxed);
                q.dropped_through = old.seq();
            }
            q.last
        };
        self.newest.send_replace(seq);
    }

    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes whoever waits, to see it stopped.
        self.newest.send_modify(|_| {});
    }
}

/// Every watcher of a server, the inotify watches they may hold, and the bytes of events they
/// hold.
pub struct Watchers {
    all: Mutex<HashMap<String, Arc<Watcher>>>,
    quota: Arc<WatchQuota>,
    queued: Arc<AtomicUsize>,
}

impl Watchers {
    /// Watchers drawing on `quota` for their directories' watches.
    pub fn new(quota: Arc<WatchQuota>) -> Watchers {
        Watchers { all: Mutex::new(HashMap::new()), quota, queued: Arc::new(AtomicUsize::new(0)) }
    }

    /// Bytes of events queued by every watcher now.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

/// How a watcher reads its tree: from where, what it reports, and how it names paths.
struct Lens {
    work: WorkDir,
    /// The directory watched (workspace-relative): the notices' paths are below it.
    watched: Vec<u8>,
    sight: Arc<Sight>,
    include: Vec<Match>,
    types: Vec<EventType>,
    root: String,
    style: Style,
}

/// What a watcher may see: shared with its watch, which watches only the directories that
/// can hold something to see.
struct Sight {
    /// The watched directory (workspace-relative), or a watched file's directory.
    base: Vec<u8>,
    /// A watched file: only it is reported.
    only: Option<Vec<u8>>,
    scope: Scope,
    exclude: Vec<Match>,
}

/// An include or exclude entry: a plain name, or a glob over names (or, with `/`, paths).
enum Match {
    Name(Vec<u8>),
    Glob(globset::GlobMatcher, bool),
}

impl Match {
    fn new(p: &str) -> Result<Match> {
        if !p.contains(['*', '?', '[', '{', '\\']) && !p.contains('/') {
            return Ok(Match::Name(p.as_bytes().to_vec()));
        }
        Ok(Match::Glob(crate::base::pattern::glob(p, false, true)?.compile_matcher(), p.contains('/')))
    }

    fn name(&self, name: &[u8]) -> bool {
        match self {
            Match::Name(n) => n == name,
            Match::Glob(g, false) => g.is_match(Path::new(std::ffi::OsStr::from_bytes(name))),
            Match::Glob(_, true) => false,
        }
    }

    fn path(&self, rel: &[u8]) -> bool {
        match self {
            Match::Glob(g, true) => g.is_match(Path::new(std::ffi::OsStr::from_bytes(rel))),
            _ => false,
        }
    }
}

/// A change on its way to the queue.
struct Pending {
    kind: EventType,
    rel: Vec<u8>,
    old: Option<Vec<u8>>,
    is_dir: Option<bool>,
    audit_seq: Option<i64>,
    seen_ns: i64,
    due: Instant,
}

fn base_name(rel: &[u8]) -> &[u8] {
    crate::fs::workdir::split(rel).1
}

/// Whether `rel` is, or is inside, one of trove's own temporaries: exactly the names trove
/// makes, so an agent's `.trove-notes` is reported like any file.
fn internal(rel: &[u8]) -> bool {
    rel.split(|b| *b == b'/').any(notices::is_temporary)
}

impl Sight {
    /// The part of `rel` below the base, if it is below it.
    fn below<'r>(&self, rel: &'r [u8]) -> Option<&'r [u8]> {
        if self.base.is_empty() {
            return Some(rel);
        }
        rel.strip_prefix(self.base.as_slice())?.strip_prefix(b"/")
    }

    fn excluded(&self, below: &[u8]) -> bool {
        self.exclude.iter().any(|m| m.path(below) || below.split(|b| *b == b'/').any(|c| m.name(c)))
    }

    /// Whether a change at `rel` is the watcher's to report (before include patterns).
    fn sees(&self, rel: &[u8]) -> bool {
        if rel.is_empty() || internal(rel) || !self.scope.can_read(rel) {
            return false;
        }
        if let Some(only) = &self.only {
            return rel == only.as_slice();
        }
        let Some(below) = self.below(rel) else { return false };
        !self.excluded(below)
    }

    /// Whether directory `dir` may hold something the watcher sees: only those are watched.
    fn may_hold(&self, dir: &[u8]) -> bool {
        if internal(dir) || !self.scope.dir_visible(dir) {
            return false;
        }
        let inside = |outer: &[u8], inner: &[u8]| {
            outer.is_empty() || inner == outer || (inner.starts_with(outer) && inner.get(outer.len()) == Some(&b'/'))
        };
        if let Some(only) = &self.only {
            // The file's directory, or one on the way to it (a wait on a path not made yet).
            return inside(dir, only) && dir != only.as_slice();
        }
        match self.below(dir) {
            Some(below) => !self.excluded(below),
            // Above the base: on the way to it.
            None => inside(dir, &self.base),
        }
    }
}

impl Lens {
    /// The workspace-relative path of a notice's path below the watched directory.
    fn rel_of(&self, p: &[u8]) -> Vec<u8> {
        match (self.watched.is_empty(), p.is_empty()) {
            (true, _) => p.to_vec(),
            (false, true) => self.watched.clone(),
            (false, false) => crate::fs::walk::join_rel(&self.watched, p),
        }
    }

    fn below<'r>(&self, rel: &'r [u8]) -> Option<&'r [u8]> {
        self.sight.below(rel)
    }

    fn sees(&self, rel: &[u8]) -> bool {
        self.sight.sees(rel)
    }

    fn included(&self, rel: &[u8], is_dir: bool) -> bool {
        if is_dir || self.include.is_empty() || self.sight.only.is_some() {
            return true;
        }
        let below = self.below(rel).unwrap_or(rel);
        self.include.iter().any(|m| m.name(base_name(rel)) || m.path(below))
    }

    fn show(&self, rel: &[u8]) -> String {
        show_path(&self.root, rel, self.style)
    }

    fn event(&self, p: &Pending, seq: u64) -> FileEvent {
        let meta = match p.kind {
            EventType::Remove => None,
            _ => self.work.stat(&p.rel).ok().flatten(),
        };
        let is_dir = p.is_dir.or(meta.as_ref().map(|m| m.kind == Kind::Dir)).unwrap_or(false);
        let relative = self.below(&p.rel).unwrap_or(&p.rel);
        FileEvent {
            seq,
            kind: p.kind,
            path: self.show(&p.rel),
            relative_path: path::display(relative).into_owned(),
            old_path: p.old.as_deref().map(|o| self.show(o)),
            is_dir,
            timestamp: p.seen_ns as f64 / 1e9,
            mtime: meta.as_ref().map(|m| m.mtime_ns as f64 / 1e9),
            size: meta.as_ref().map(|m| m.size),
            inode: meta.as_ref().map(|m| m.inode),
            audit_seq: p.audit_seq,
            path_base64: std::str::from_utf8(&p.rel)
                .is_err()
                .then(|| base64::engine::general_purpose::STANDARD.encode(&p.rel)),
        }
    }
}

/// The audit record a change of trove's, named by one of its temporaries, became.
fn audit_of(temp: &[u8]) -> Option<notices::Published> {
    let (key, step) = notices::temporary(base_name(temp))?;
    let until = Instant::now() + AUDIT_WAIT;
    loop {
        if let Some(p) = notices::published(&key, step) {
            return Some(p);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A watcher's thread: turns notices into events until stopped.
struct Runner {
    lens: Lens,
    watch: DirWatch,
    debounce: Duration,
    pending: Vec<Pending>,
}

impl Runner {
    fn run(mut self, w: Arc<Watcher>) {
        loop {
            if w.stopped() {
                return;
            }
            if lock(&w.used).elapsed() >= IDLE {
                tracing::info!(watcher = %w.info.watcher_id, "a watcher nobody polled for 10 minutes stopped");
                w.halt();
                return;
            }
            let wait =
                self.pending.iter().map(|p| p.due).min().map_or(TICK, |d| {
                    d.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(1), TICK)
                });
            let Some(notices) = self.watch.next(wait) else {
                tracing::info!(watcher = %w.info.watcher_id, "the watched tree went away; the watcher stopped");
                w.push(Entry::Lost);
                w.halt();
                return;
            };
            for n in notices {
                match n {
                    Notice::Overflow => {
                        self.flush(&w, true);
                        w.push(Entry::Lost);
                    }
                    Notice::Change(c) => self.take(c),
                }
            }
            // A debounce gathering more changes than that queues them now: what waits here
            // is not bounded by the queue's limits.
            let all = self.pending.len() > MAX_PENDING;
            self.flush(&w, all);
        }
    }

    /// Turns one change into at most one pending event.
    fn take(&mut self, c: crate::fs::watch::Change) {
        let rel = self.lens.rel_of(&c.path);
        let old = c.old_path.as_deref().map(|p| self.lens.rel_of(p));
        let mut kind = match c.kind {
            ChangeKind::Create => EventType::Create,
            ChangeKind::Write => EventType::Write,
            ChangeKind::Remove => EventType::Remove,
            ChangeKind::Chmod => EventType::Chmod,
            ChangeKind::Rename => EventType::Rename,
        };
        let mut audit_seq = None;
        let (mut rel, mut old) = (rel, old);
        if kind == EventType::Rename {
            let from = old.clone().unwrap_or_default();
            match (internal(&from), internal(&rel)) {
                // A temporary of trove's put in place: the write (or creation) it was.
                (true, false) => {
                    let published = audit_of(&from);
                    audit_seq = published.map(|p| p.seq);
                    kind = match published {
                        Some(p) if p.created => EventType::Create,
                        _ => EventType::Write,
                    };
                    old = None;
                }
                // A file moved to its grave on the way to the trash: a removal.
                (false, true) => {
                    audit_seq = audit_of(&rel).map(|p| p.seq);
                    kind = EventType::Remove;
                    rel = from;
                    old = None;
                }
                (true, true) => return,
                (false, false) => {}
            }
        }
        let sees = self.lens.sees(&rel);
        if let Some(o) = old.take() {
            match (self.lens.sees(&o), sees) {
                (true, true) => old = Some(o),
                // Renamed onto a waited-for path: the rename, from where it was when the
                // session may see that; a creation still to a wait that wants no renames (an
                // atomic save is the file's creation or write to whoever waits for those).
                (false, true)
                    if self.lens.sight.only.is_some() && !internal(&o) && self.lens.sight.scope.can_read(&o) =>
                {
                    if self.lens.types.contains(&EventType::Rename) {
                        kind = EventType::Rename;
                    } else {
                        kind = EventType::Create;
                    }
                    old = Some(o);
                }
                (false, true) => kind = EventType::Create,
                (true, false) => {
                    kind = EventType::Remove;
                    rel = o;
                }
                (false, false) => return,
            }
        } else if !sees {
            return;
        }
        let is_dir = c.is_dir;
        let now = Instant::now();
        let p = Pending { kind, rel, old, is_dir, audit_seq, seen_ns: now_ns(), due: now + self.debounce };
        if self.debounce.is_zero() || p.kind == EventType::Rename {
            self.pending.push(p);
            return;
        }
        self.merge(p);
    }

    /// Gathers `p` with a pending change of the same path.
    fn merge(&mut self, p: Pending) {
        let Some(i) = self.pending.iter().position(|q| q.rel == p.rel && q.old.is_none()) else {
            self.pending.push(p);
            return;
        };
        use EventType::*;
        let q = &mut self.pending[i];
        let kind = match (q.kind, p.kind) {
            // Made and gone again within the window: nothing to report.
            (Create, Remove) => {
                self.pending.remove(i);
                return;
            }
            (Create, _) => Create,
            (Remove, Create) => Write,
            (Write, Chmod) => Write,
            (_, k) => k,
        };
        q.kind = kind;
        q.due = p.due;
        q.seen_ns = p.seen_ns;
        q.audit_seq = p.audit_seq.or(q.audit_seq);
        q.is_dir = p.is_dir.or(q.is_dir);
    }

    /// Queues the pending events that are due (all with `all`), in their order.
    fn flush(&mut self, w: &Watcher, all: bool) {
        let now = Instant::now();
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            if !all && p.due > now {
                keep.push(p);
                continue;
            }
            let is_dir = p.is_dir.unwrap_or(false);
            if !self.lens.types.contains(&p.kind) || !self.lens.included(&p.rel, is_dir) {
                continue;
            }
            w.push(|seq| Entry::Event(self.lens.event(&p, seq)));
        }
        self.pending = keep;
    }
}

fn check_patterns(what: &str, list: &[String]) -> Result<Vec<Match>> {
    if list.len() > MAX_PATTERNS {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("{} {what} entries given; at most {MAX_PATTERNS} are allowed", list.len()),
        ));
    }
    list.iter().map(|p| Match::new(p)).collect()
}

fn seconds(what: &str, given: Option<f64>, default: f64, max: f64) -> Result<Duration> {
    let s = given.unwrap_or(default);
    if !s.is_finite() || !(0.0..=max).contains(&s) {
        return Err(Error::invalid_argument(format!("{what} {s} is out of range: give 0 to {max} seconds")));
    }
    Ok(Duration::from_secs_f64(s))
}

const ALL: [EventType; 5] =
    [EventType::Create, EventType::Write, EventType::Remove, EventType::Rename, EventType::Chmod];

impl Watchers {
    /// Starts a watcher of `r.path` in the session's live tree.
    pub fn create(&self, sb: &Sandbox<'_>, r: &WatchRequest) -> Result<Arc<Watcher>> {
        let debounce = r.debounce.unwrap_or(0);
        if debounce > MAX_DEBOUNCE_MS {
            return Err(Error::invalid_argument(format!(
                "debounce {debounce} ms is too long: at most {MAX_DEBOUNCE_MS}"
            )));
        }
        let (rel, style) = sb.rel_exact(&r.path, r.path_base64.as_deref())?;
        let (work, scope) = live_of(sb)?;
        let shown = sb.show(&rel, style);
        // Before anything is looked at: whether an out-of-scope path exists is not the
        // session's to learn. A directory leading to the scope may be watched (its events are
        // filtered); anything else outside it is denied, there or not.
        if !rel.is_empty() && !scope.dir_visible(&rel) {
            return Err(Scope::denied_path(&rel));
        }
        match work.stat(&rel)? {
            None => Err(Error::new(
                    ErrorKind::NotFound,
                    format!("'{shown}' does not exist: watch an existing directory, or wait for a path to appear with /v1/file/watch/wait"),
                )
                .with_detail("path", shown.as_str())),
            Some(m) if m.kind == Kind::Symlink || m.kind == Kind::Other => Err(Error::invalid_argument(format!(
                "'{shown}' is not a directory or regular file: watch the directory it is in"
            ))
            .with_detail("path", shown.as_str())),
            Some(m) => {
                if !rel.is_empty() && !scope.can_read(&rel) && m.kind != Kind::Dir {
                    return Err(Scope::denied_path(&rel));
                }
                let (base, only, dir, recursive) = if m.kind == Kind::Dir {
                    (rel.clone(), None, rel.clone(), r.recursive)
                } else {
                    let parent = crate::fs::workdir::split(&rel).0.to_vec();
                    (parent.clone(), Some(rel.clone()), parent, false)
                };
                let sight = Sight { base, only, scope, exclude: check_patterns("exclude", &r.exclude)? };
                let lens = Lens {
                    work,
                    watched: dir.clone(),
                    sight: Arc::new(sight),
                    include: check_patterns("include_patterns", &r.include_patterns)?,
                    types: r.event_types.clone().unwrap_or(ALL.to_vec()),
                    root: sb.root().to_string(),
                    style,
                };
                let info = WatchInfo {
                    watcher_id: String::new(),
                    session_id: sb.session.id.clone(),
                    path: shown,
                    recursive,
                    debounce,
                    include_patterns: r.include_patterns.clone(),
                    exclude: r.exclude.clone(),
                    event_types: lens.types.clone(),
                    created_at: now_ns() as f64 / 1e9,
                    cursor: 0,
                };
                self.start_with(lens, &dir, recursive, Duration::from_millis(debounce), info, false, None)
            }
        }
    }

    /// Starts the one-shot watcher of a wait on `r.path`, which need not exist: its nearest
    /// existing directory is watched. With `create` wanted and the path there already, the
    /// create event is queued at once.
    pub fn wait(&self, sb: &Sandbox<'_>, r: &WaitRequest) -> Result<(Arc<Watcher>, Duration)> {
        let timeout = seconds("timeout", r.timeout, 30.0, MAX_WAIT_S)?;
        let (rel, style) = sb.rel_exact(&r.path, r.path_base64.as_deref())?;
        // An empty `path` is refused even beside a `path_base64`, as the document's pattern says.
        if rel.is_empty() || r.path.is_empty() {
            return Err(Error::invalid_argument("wait needs a path below the workspace root, not the root itself"));
        }
        let (work, scope) = live_of(sb)?;
        scope.check_read(&rel)?;
        // The nearest directory that exists, with nothing but directories on the way.
        let mut dir = crate::fs::workdir::split(&rel).0.to_vec();
        loop {
            match work.stat(&dir)? {
                Some(m) if m.kind == Kind::Dir => break,
                _ if dir.is_empty() => return Err(Error::internal("the workspace root is not a directory")),
                _ => dir = crate::fs::workdir::split(&dir).0.to_vec(),
            }
        }
        let parent = crate::fs::workdir::split(&rel).0.to_vec();
        let recursive = dir != parent;
        let types = r.event_types.clone().unwrap_or(ALL.to_vec());
        let exists = work.stat(&rel)?;
        let sight = Sight { base: parent, only: Some(rel.clone()), scope, exclude: Vec::new() };
        let lens = Lens {
            work,
            watched: dir.clone(),
            sight: Arc::new(sight),
            include: Vec::new(),
            types: types.clone(),
            root: sb.root().to_string(),
            style,
        };
        let info = WatchInfo {
            watcher_id: String::new(),
            session_id: sb.session.id.clone(),
            path: sb.show(&rel, style),
            recursive,
            debounce: 0,
            include_patterns: Vec::new(),
            exclude: Vec::new(),
            event_types: types.clone(),
            created_at: now_ns() as f64 / 1e9,
            cursor: 0,
        };
        let first = exists.filter(|_| types.contains(&EventType::Create)).map(|m| Pending {
            kind: EventType::Create,
            rel: rel.clone(),
            old: None,
            is_dir: Some(m.kind == Kind::Dir),
            audit_seq: None,
            seen_ns: now_ns(),
            due: Instant::now(),
        });
        let w = self.start_with(lens, &dir, recursive, Duration::ZERO, info, true, first)?;
        Ok((w, timeout))
    }

    #[allow(clippy::too_many_arguments)]
    fn start_with(
        &self,
        lens: Lens,
        dir: &[u8],
        recursive: bool,
        debounce: Duration,
        mut info: WatchInfo,
        one_shot: bool,
        first: Option<Pending>,
    ) -> Result<Arc<Watcher>> {
        let session = info.session_id.clone();
        {
            let all = lock(&self.all);
            let mine = all.values().filter(|w| w.session() == &session && !w.stopped()).count();
            if mine >= PER_SESSION {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("session {session} has {PER_SESSION} watchers already: delete one it no longer needs"),
                ));
            }
            if all.len() >= TOTAL {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("the server runs {TOTAL} watchers already: try again when some are stopped"),
                ));
            }
        }
        let shown = Path::new(std::ffi::OsStr::from_bytes(&lens.watched)).to_path_buf();
        let root = lens.work.open_dir(dir)?;
        let (sight, watched) = (lens.sight.clone(), lens.watched.clone());
        let filter = Box::new(move |below: &[u8]| sight.may_hold(&crate::fs::walk::join_rel(&watched, below)));
        let watch = DirWatch::start(root, &shown, recursive, filter, self.quota.clone(), session.as_str())?;
        info.watcher_id = crate::base::random::new_watcher_id()?;
        let (newest, _) = tokio::sync::watch::channel(0);
        let w = Arc::new(Watcher {
            info,
            queue: Mutex::new(Queue::default()),
            newest,
            stop: AtomicBool::new(false),
            used: Mutex::new(Instant::now()),
            started: Instant::now(),
            one_shot,
            queued: self.queued.clone(),
        });
        let mut runner = Runner { lens, watch, debounce, pending: Vec::new() };
        if let Some(p) = first {
            runner.pending.push(p);
            runner.flush(&w, true);
        }
        let thread_w = w.clone();
        std::thread::Builder::new()
            .name(format!("watch-{}", w.info.watcher_id))
            .spawn(move || runner.run(thread_w))
            .map_err(|e| Error::with_source(ErrorKind::Io, "cannot start a watcher's thread", e))?;
        let mut all = lock(&self.all);
        all.retain(|_, w| !w.stopped());
        all.insert(w.info.watcher_id.clone(), w.clone());
        Ok(w)
    }

    /// Watcher `id` of `session`; another session's is as unknown as one that never was.
    pub fn get(&self, session: &SessionId, id: &str) -> Result<Arc<Watcher>> {
        lock(&self.all).get(id).filter(|w| w.session() == session && !w.stopped() && !w.one_shot).cloned().ok_or_else(
            || {
                Error::new(
                    ErrorKind::NotFound,
                    format!("no watcher '{}' in this session: create one with POST /v1/file/watch", id.escape_debug()),
                )
                .with_detail("watcher_id", id)
            },
        )
    }

    /// Stops watcher `id` of `session`.
    pub fn remove(&self, session: &SessionId, id: &str) -> Result<Stopped> {
        let w = self.get(session, id)?;
        self.drop_watcher(&w);
        Ok(Stopped { watcher_id: w.info.watcher_id.clone(), stopped: true })
    }

    /// Stops `w` (a wait's watcher once the wait is over).
    pub fn drop_watcher(&self, w: &Watcher) {
        w.halt();
        lock(&self.all).remove(&w.info.watcher_id);
    }

    /// Stops every watcher of sessions that are not `live` (they ended, or were paused), as
    /// listed at `listed`: a watcher started since may belong to a session made since.
    pub fn keep_sessions(&self, live: &[SessionId], listed: Instant) {
        let mut all = lock(&self.all);
        all.retain(|_, w| {
            let keep = !w.stopped() && (w.started >= listed || live.contains(w.session()));
            if !keep {
                w.halt();
            }
            keep
        });
    }

    /// Stops every watcher of `session`.
    pub fn end_session(&self, session: &SessionId) {
        let mut all = lock(&self.all);
        all.retain(|_, w| {
            let keep = w.session() != session;
            if !keep {
                w.halt();
            }
            keep
        });
    }
}

/// The session's live tree: its directory, opened, and the session's scope. A session that
/// is not live has nothing to watch.
fn live_of(sb: &Sandbox<'_>) -> Result<(WorkDir, Scope)> {
    let Some(dir) = sb.session.serving_dir() else {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "session {} is {}: only a live session's files can be watched (resume it first)",
                sb.session.id,
                sb.session.status.as_str()
            ),
        ));
    };
    Ok((WorkDir::open(dir)?, sb.session.scope()?))
}

/// The poll parameters, checked: (cursor, limit, timeout).
pub fn poll_params(r: &PollRequest) -> Result<(u64, usize, Duration)> {
    let limit = r.limit.unwrap_or(100);
    if !(1..=MAX_POLL_LIMIT).contains(&limit) {
        return Err(Error::invalid_argument(format!("limit {limit} is out of range: give 1 to {MAX_POLL_LIMIT}")));
    }
    Ok((r.cursor.unwrap_or(0), limit, seconds("timeout", r.timeout, 0.0, MAX_POLL_S)?))
}
