//! The search engine behind `search_files`, `trove grep` and `GET .../search`: which files a
//! search selects (directory, include/exclude globs, scope), matching paths against a glob or
//! lines against a literal or regex (`grep-searcher` over `grep-regex`, with context lines),
//! and searching a snapshot's files decompressed in parallel, results in path order. A content
//! search of a snapshot first asks the search index (`index`) which contents can match at all.

mod index;

use std::borrow::Cow;

use globset::{GlobSet, GlobSetBuilder};
use grep_matcher::Matcher as _;
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::grams::{self, GramQuery};
use crate::base::path;
use crate::base::pattern;
use crate::manifest::objects::{self, Location};
use crate::model::scope::Scope;
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::EntryKind;
use crate::object::bundle::BundleCache;
use crate::object::{blob, Backend, ObjectId};
use crate::ops::view::fetch;
use crate::repo::Repo;

/// The biggest file a content search reads; bigger ones are skipped and counted.
pub const READ_LIMIT: u64 = 64 << 20;
/// Characters of a matching (or context) line shown.
pub const MATCH_TEXT_CHARS: usize = 500;
/// The most context lines asked for on either side of a match.
pub const MAX_CONTEXT: usize = 100;
/// Files searched in parallel in the first batch and at most in one, and the raw bytes one
/// batch may hold at most.
const FIRST_BATCH_FILES: usize = 32;
const BATCH_FILES: usize = 1024;
const BATCH_BYTES: u64 = 128 << 20;

/// The next batch of `rest`: at most `files` files and `BATCH_BYTES` bytes (at least one file).
fn take_batch<'a>(rest: &mut &'a [(Vec<u8>, ObjectId, u64)], files: usize) -> &'a [(Vec<u8>, ObjectId, u64)] {
    let (mut n, mut bytes) = (0, 0u64);
    while n < rest.len() && n < files && (n == 0 || bytes + rest[n].2 <= BATCH_BYTES) {
        bytes += rest[n].2;
        n += 1;
    }
    let (batch, tail) = rest.split_at(n);
    *rest = tail;
    batch
}

/// How a search reads its pattern.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// An exact string in file contents.
    #[default]
    Literal,
    /// A regular expression over file contents.
    Regex,
    /// A glob over paths.
    Glob,
}

/// What to look for and where.
#[derive(Debug, Clone, Default)]
pub struct SearchSpec {
    /// The text, regex or glob.
    pub pattern: String,
    /// How to read it.
    pub mode: SearchMode,
    /// Only under this directory (workspace-relative; empty: everywhere).
    pub path: String,
    /// Only files whose path (below `path`) matches one of these globs.
    pub include: Vec<String>,
    /// Never files whose path matches one of these.
    pub exclude: Vec<String>,
    /// Match regardless of case.
    pub case_insensitive: bool,
    /// Lines of context before and after each matching line.
    pub context: usize,
}

/// One matching line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineMatch {
    /// The file's workspace-relative path.
    pub path: String,
    /// The exact path bytes in base64, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_base64: Option<String>,
    /// The line's number (1-based).
    pub line: usize,
    /// The first match's column, in characters (1-based).
    pub column: usize,
    /// The line, cut at 500 characters.
    pub text: String,
    /// Lines just before it, when context was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_before: Vec<String>,
    /// Lines just after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_after: Vec<String>,
}

/// A search compiled: the file selection and the matcher.
pub struct Matcher {
    under: Vec<u8>,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    name_glob: Option<GlobSet>,
    lines: Option<RegexMatcher>,
    /// What a file's trigrams must satisfy for its content to match (`All` for a glob search).
    grams: GramQuery,
    context: usize,
}

fn shown_line(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(MATCH_TEXT_CHARS) {
        Some((i, _)) => text[..i].to_string(),
        None => text.into_owned(),
    }
}

/// Collects matches of one file, attaching context lines to the match they surround.
struct Collect<'m> {
    matcher: &'m RegexMatcher,
    rel: &'m [u8],
    max: usize,
    out: Vec<LineMatch>,
    before: Vec<String>,
    full: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> std::result::Result<bool, std::io::Error> {
        if self.out.len() >= self.max {
            self.full = true;
            return Ok(false);
        }
        let bytes = m.bytes();
        let start = self.matcher.find(bytes).ok().flatten().map_or(0, |found| found.start());
        let column = String::from_utf8_lossy(&bytes[..start]).chars().count() + 1;
        let (p, b64) = path::for_json(self.rel);
        self.out.push(LineMatch {
            path: p,
            path_base64: b64,
            line: m.line_number().unwrap_or(0) as usize,
            column,
            text: shown_line(bytes),
            context_before: std::mem::take(&mut self.before),
            context_after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> std::result::Result<bool, std::io::Error> {
        match c.kind() {
            SinkContextKind::Before => self.before.push(shown_line(c.bytes())),
            SinkContextKind::After => {
                if let Some(last) = self.out.last_mut() {
                    last.context_after.push(shown_line(c.bytes()));
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}

impl Matcher {
    /// Compiles `spec`'s patterns, each within the pattern limits.
    pub fn new(spec: &SearchSpec) -> Result<Matcher> {
        if spec.pattern.is_empty() {
            return Err(Error::invalid_argument("pattern is empty: give the text, regex or glob to look for"));
        }
        if spec.context > MAX_CONTEXT {
            return Err(Error::invalid_argument(format!("context {} is more than {MAX_CONTEXT} lines", spec.context)));
        }
        let under = path::components(spec.path.as_bytes())?.join(&b'/');
        let glob = |p: &str| pattern::glob(p, spec.case_insensitive, false);
        let set = |patterns: &[String]| -> Result<Option<GlobSet>> {
            if patterns.is_empty() {
                return Ok(None);
            }
            pattern::check_list("include/exclude", patterns)?;
            let mut b = GlobSetBuilder::new();
            for p in patterns {
                b.add(glob(p)?);
            }
            b.build().map(Some).map_err(|e| Error::invalid_argument(format!("bad glob: {e}")))
        };
        let name_glob =
            match spec.mode {
                // A set of one, not `compile_matcher`: building a set reports a regex that does not
                // compile as an error, where the matcher would panic.
                SearchMode::Glob => Some(GlobSetBuilder::new().add(glob(&spec.pattern)?).build().map_err(|e| {
                    Error::with_source(ErrorKind::InvalidArgument, format!("bad glob: {}", e.kind()), e)
                })?),
                _ => None,
            };
        let lines = match spec.mode {
            SearchMode::Glob => None,
            SearchMode::Literal => Some(pattern::line_matcher(&spec.pattern, spec.case_insensitive, true)?),
            SearchMode::Regex => Some(pattern::line_matcher(&spec.pattern, spec.case_insensitive, false)?),
        };
        let grams = match spec.mode {
            SearchMode::Glob => GramQuery::All,
            SearchMode::Literal => grams::query_of(&spec.pattern, true, spec.case_insensitive),
            SearchMode::Regex => grams::query_of(&spec.pattern, false, spec.case_insensitive),
        };
        Ok(Matcher {
            under,
            include: set(&spec.include)?,
            exclude: set(&spec.exclude)?,
            name_glob,
            lines,
            grams,
            context: spec.context,
        })
    }

    /// The path below the search's directory, if `rel` is under it and passes the include and
    /// exclude globs (which match that path, cut on the raw bytes). A search whose path is a
    /// file searches that file, as grep given a file does: its name is what the globs match.
    pub fn selects<'r>(&self, rel: &'r [u8]) -> Option<Cow<'r, str>> {
        let under = &self.under;
        let below = if under.is_empty() {
            rel
        } else if rel == under.as_slice() {
            rel.rsplit(|b| *b == b'/').next().unwrap_or(rel)
        } else if rel.starts_with(under) && rel.get(under.len()) == Some(&b'/') {
            &rel[under.len() + 1..]
        } else {
            return None;
        };
        let rel_in = path::display(below);
        let excluded = self.include.as_ref().is_some_and(|g| !g.is_match(rel_in.as_ref()))
            || self.exclude.as_ref().is_some_and(|g| g.is_match(rel_in.as_ref()));
        (!excluded).then_some(rel_in)
    }

    /// The directory searched.
    pub fn under(&self) -> &[u8] {
        &self.under
    }

    /// For a glob search: whether the path below the directory matches. `None` for a content
    /// search.
    pub fn path_matches(&self, rel_in: &str) -> Option<bool> {
        self.name_glob.as_ref().map(|g| g.is_match(rel_in))
    }

    /// Searches `bytes`, the content of `rel`, adding at most `max` matching lines to `out`;
    /// true when it stopped at `max`. Binary content (a NUL byte) is not searched.
    pub fn search_bytes(&self, rel: &[u8], bytes: &[u8], max: usize, out: &mut Vec<LineMatch>) -> Result<bool> {
        let Some(m) = &self.lines else { return Ok(false) };
        if is_binary(bytes) {
            return Ok(false);
        }
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(self.context)
            .after_context(self.context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut sink = Collect {
            matcher: m,
            rel,
            max: max.saturating_sub(out.len()),
            out: Vec::new(),
            before: Vec::new(),
            full: false,
        };
        searcher.search_slice(m, bytes, &mut sink).map_err(|e| {
            Error::with_source(ErrorKind::Internal, format!("searching '{}': {e}", path::display(rel)), e)
        })?;
        out.append(&mut sink.out);
        Ok(sink.full)
    }
}

/// Whether a search takes `bytes` for binary and reports nothing in it: a NUL byte in the first
/// 8 KiB. The search index applies the same rule, so it never rules out a file a search reads.
fn is_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(8192)]).is_some()
}

/// Where one object of a file lies: in a pack, or loose in the manifest (a tool's pre-image, a
/// small snapshot's file).
enum Part {
    Packed(ObjectId, Location),
    Loose(ObjectId, Vec<u8>),
    /// A loose delta, resolved by the locating thread (its bases are looked up in the manifest,
    /// which workers do not hold): the object's verified bytes.
    Resolved(ObjectId, Vec<u8>),
}

/// A file to search and where its bytes are.
struct Job {
    rel: Vec<u8>,
    content: ObjectId,
    chunked: bool,
    parts: Vec<Part>,
}

/// A content or path search of one snapshot.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSearch {
    /// The snapshot searched.
    pub snapshot: crate::base::id::SnapshotId,
    /// Matching lines in path order (a content search).
    pub matches: Vec<LineMatch>,
    /// Matching paths (a glob search).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Files whose content was searched.
    pub files_searched: usize,
    /// Files left out for being larger than 64 MiB.
    pub files_skipped: usize,
    /// Files never read because the search index shows their content cannot match.
    pub files_ruled_out: usize,
    /// Whether the result cap cut the answer short.
    pub truncated: bool,
}

impl Repo {
    /// Searches the files of `snap` that `scope` can read, at most `max` results. Contents
    /// are fetched and searched in parallel, batch by batch in path order, so the answer (and
    /// where it stops at `max`) is the same as a search file by file.
    pub fn search_snapshot(
        &self,
        snap: &SnapshotInfo,
        scope: &Scope,
        m: &Matcher,
        max: usize,
    ) -> Result<SnapshotSearch> {
        let max = max.max(1);
        // Which contents can match at all, when the pattern has trigrams to look up.
        let candidates = match m.grams {
            GramQuery::All => None,
            _ => {
                self.index_for_search(snap)?;
                self.search_candidates(&m.grams)?
            }
        };
        let mut ruled_out = 0usize;
        let mut files: Vec<(Vec<u8>, ObjectId, u64)> = Vec::new();
        let mut paths = Vec::new();
        let mut skipped = 0usize;
        let mut truncated = false;
        let under = m.under().to_vec();
        let listed = self.list(snap, &under, true, &mut |rel, e| {
            if e.kind != EntryKind::File || !scope.can_read(rel) {
                return Ok(());
            }
            let Some(rel_in) = m.selects(rel) else { return Ok(()) };
            match m.path_matches(&rel_in) {
                Some(true) if paths.len() < max => paths.push(path::display(rel).into_owned()),
                Some(true) => truncated = true,
                Some(false) => {}
                None if e.size > READ_LIMIT => skipped += 1,
                None => match e.content {
                    Some(id) if candidates.as_ref().is_some_and(|c| !c.contains(&id)) => ruled_out += 1,
                    Some(id) => files.push((rel.to_vec(), id, e.size)),
                    None => {}
                },
            }
            Ok(())
        });
        match listed {
            // A search under a path the snapshot lacks finds nothing.
            Err(e) if e.kind() == ErrorKind::NotFound && !under.is_empty() => {}
            other => other?,
        }
        let mut out = SnapshotSearch {
            snapshot: snap.id.clone(),
            matches: Vec::new(),
            paths,
            files_searched: 0,
            files_skipped: skipped,
            files_ruled_out: ruled_out,
            truncated,
        };
        // Batches grow from FIRST_BATCH_FILES, so a search that stops early at `max` reads
        // little past it, and a long one waits at few batch ends. The next batch is located
        // (SQLite, this thread) while the pool searches the current one.
        let mut rest = files.as_slice();
        let mut size = FIRST_BATCH_FILES;
        let mut jobs = self.locate_all(take_batch(&mut rest, size))?;
        while !jobs.is_empty() && !out.truncated {
            self.check_deadline("searching a snapshot")?;
            size = (size * 2).min(BATCH_FILES);
            let upcoming = take_batch(&mut rest, size);
            let left = max - out.matches.len();
            let (backend, bundles) = (self.backend.as_ref(), &self.caches.bundles);
            let (mut found, mut located) = (None, None);
            rayon::in_place_scope(|s| {
                s.spawn(|_| {
                    found = Some(
                        jobs.par_iter()
                            .map(|job| {
                                let bytes = fetch_job(backend, bundles, job)?;
                                let mut lines = Vec::new();
                                let full = m.search_bytes(&job.rel, &bytes, left, &mut lines)?;
                                Ok((lines, full))
                            })
                            .collect::<Result<Vec<(Vec<LineMatch>, bool)>>>(),
                    )
                });
                located = Some(self.locate_all(upcoming));
            });
            let found = found.ok_or_else(|| Error::internal("a search batch did not run"))??;
            for (mut lines, full) in found {
                out.files_searched += 1;
                let room = max - out.matches.len();
                if lines.len() > room || (full && lines.len() == room) {
                    lines.truncate(room);
                    out.truncated = true;
                }
                out.matches.append(&mut lines);
                if out.truncated {
                    break;
                }
            }
            jobs = located.ok_or_else(|| Error::internal("a search batch was not located"))??;
        }
        Ok(out)
    }

    /// Where the objects of each file lie, looked up in the manifest (one thread, one read
    /// transaction: a lock per lookup cost a twentieth of a search).
    fn locate_all(&self, batch: &[(Vec<u8>, ObjectId, u64)]) -> Result<Vec<Job>> {
        self.manifest.read(|| self.locate_each(batch))
    }

    fn locate_each(&self, batch: &[(Vec<u8>, ObjectId, u64)]) -> Result<Vec<Job>> {
        let conn = self.manifest.conn();
        let mut jobs = Vec::with_capacity(batch.len());
        for (rel, id, _) in batch {
            let chunks = objects::chunk_list(conn, id)?;
            let ids: Vec<ObjectId> =
                if chunks.is_empty() { vec![*id] } else { chunks.into_iter().map(|(_, c)| c).collect() };
            let mut parts = Vec::with_capacity(ids.len());
            for part in ids {
                parts.push(match objects::locate(conn, &part)? {
                    Some(loc) => Part::Packed(part, loc),
                    None => match crate::manifest::loose::get(conn, &part)? {
                        Some(encoded) if crate::ops::view::is_delta(&encoded) => {
                            Part::Resolved(part, self.read_object(&part)?)
                        }
                        Some(encoded) => Part::Loose(part, encoded),
                        None => {
                            return Err(Error::corrupt(format!(
                                "object {part} of '{}' is referenced but not in the index; run `trove check`",
                                path::display(rel)
                            )))
                        }
                    },
                });
            }
            jobs.push(Job {
                rel: rel.clone(),
                content: *id,
                chunked: parts.len() > 1 || parts_differ(&parts, id),
                parts,
            });
        }
        Ok(jobs)
    }
}

/// A file's bytes, every object verified, and the whole checked against its id. Free of the
/// repository (which is not `Sync`): workers share only the backend and the bundle cache.
fn fetch_job(backend: &dyn Backend, bundles: &BundleCache, job: &Job) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for part in &job.parts {
        let bytes = match part {
            Part::Packed(id, loc) => fetch(backend, bundles, id, loc)?,
            Part::Loose(id, encoded) => blob::decode(id, encoded)?,
            Part::Resolved(_, raw) => raw.clone(),
        };
        if out.is_empty() {
            out = bytes;
        } else {
            out.extend_from_slice(&bytes);
        }
    }
    if job.chunked && ObjectId::of(&out) != job.content {
        return Err(Error::corrupt(format!(
            "the chunks of '{}' do not add up to {}; run `trove check`",
            path::display(&job.rel),
            job.content
        )));
    }
    Ok(out)
}

/// Whether a one-part file's part is not the file itself (a chunk list of one chunk).
fn parts_differ(parts: &[Part], id: &ObjectId) -> bool {
    parts.iter().any(|p| match p {
        Part::Packed(pid, _) | Part::Loose(pid, _) | Part::Resolved(pid, _) => pid != id,
    })
}
