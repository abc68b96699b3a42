//! The search index in use: bringing it up to date with a snapshot before a content search
//! (every text file's trigrams, written as one segment per run), and answering which file
//! contents can satisfy a trigram query, so the search decompresses only those.
//!
//! The index is derived data, like the path index: built by the first content search of a
//! snapshot whose pattern has trigrams to look up, shared by every snapshot holding the same
//! contents (a document is a content id), and never stale (contents are immutable).

use std::cell::RefCell;
use std::collections::BTreeMap;

use rayon::prelude::*;
use rusqlite::Connection;

use crate::base::error::{Error, Result};
use crate::base::grams::{for_each_gram, Gram, GramQuery};
use crate::manifest::grams::{self, DocKind};
use crate::model::snapshot::SnapshotInfo;
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, RandomKeySet};
use crate::repo::Repo;

use super::{fetch_job, is_binary, take_batch, BATCH_FILES, READ_LIMIT};

/// A document with more distinct trigrams than this (random or minified data) is left out of
/// the postings and always searched: its lists would cost more than searching it.
const MAX_DOC_GRAMS: usize = 1 << 18;
/// (trigram, document) pairs one segment collects before it is written: 16 MiB of pairs.
const SEGMENT_PAIRS: usize = 2 << 20;
/// Document numbers stay below 2^40, so a pair packs into a `u64` beside its 24-bit trigram.
const DOC_LIMIT: u64 = 1 << 40;
/// Segments past which an indexing run merges them all into one.
const MAX_SEGMENTS: u64 = 16;

thread_local! {
    /// One bit per possible trigram (2 MiB), all clear between documents: the distinct
    /// trigrams of a document are found in one pass without a hash set.
    static SEEN: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// What indexing found in one content.
struct Indexed {
    id: ObjectId,
    kind: DocKind,
    grams: Vec<Gram>,
}

/// The distinct trigrams of `bytes`, ascending; `None` past `MAX_DOC_GRAMS`.
fn distinct_grams(bytes: &[u8]) -> Option<Vec<Gram>> {
    SEEN.with(|cell| {
        let mut seen = cell.borrow_mut();
        if seen.is_empty() {
            seen.resize(1 << 18, 0);
        }
        let mut out = Vec::new();
        for_each_gram(bytes, |g| {
            let (word, bit) = ((g >> 6) as usize, 1u64 << (g & 63));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                out.push(g);
            }
        });
        for &g in &out {
            seen[(g >> 6) as usize] = 0;
        }
        if out.len() > MAX_DOC_GRAMS {
            return None;
        }
        out.sort_unstable();
        Some(out)
    })
}

fn index_content(id: ObjectId, bytes: &[u8]) -> Indexed {
    if is_binary(bytes) {
        return Indexed { id, kind: DocKind::Binary, grams: Vec::new() };
    }
    match distinct_grams(bytes) {
        Some(grams) => Indexed { id, kind: DocKind::Text, grams },
        None => Indexed { id, kind: DocKind::Unindexed, grams: Vec::new() },
    }
}

/// Writes `done` as one segment: their documents (those another process has not indexed
/// meanwhile) and the posting lists of their trigrams, in one transaction. A (trigram,
/// document) pair is one `u64`, the trigram in the top 24 bits, so sorting them sorts the
/// lists and each list's documents at once.
fn write_segment(conn: &Connection, done: &[Indexed]) -> Result<()> {
    let mut pairs: Vec<u64> = Vec::with_capacity(done.iter().map(|d| d.grams.len()).sum());
    let (mut first, mut last) = (None, 0u64);
    for d in done {
        if grams::doc_of(conn, &d.id)?.is_some() {
            continue;
        }
        let doc = grams::insert_doc(conn, &d.id, d.kind)?;
        if doc >= DOC_LIMIT {
            return Err(Error::internal(format!("the search index has numbered {doc} documents, past its limit")));
        }
        first.get_or_insert(doc);
        last = doc;
        pairs.extend(d.grams.iter().map(|&g| (u64::from(g) << 40) | doc));
    }
    let Some(first) = first else { return Ok(()) };
    pairs.sort_unstable();
    let mut runs = pairs.chunk_by(|a, b| a >> 40 == b >> 40);
    let lists = std::iter::from_fn(|| {
        let run = runs.next()?;
        Some(((run[0] >> 40) as Gram, run.iter().map(|p| p & (DOC_LIMIT - 1)).collect::<Vec<u64>>()))
    });
    grams::insert_segment(conn, first, last, lists)
}

impl Repo {
    /// Gives every searchable file of `snap` a document in the search index, unless it is
    /// marked as done already.
    pub(crate) fn index_for_search(&self, snap: &SnapshotInfo) -> Result<()> {
        let conn = self.manifest.conn();
        if grams::snapshot_indexed(conn, &snap.id)? {
            return Ok(());
        }
        // Each content once, with one of its paths (for messages), in path order.
        let mut seen = RandomKeySet::default();
        let mut files: Vec<(Vec<u8>, ObjectId, u64)> = Vec::new();
        self.list(snap, b"", true, &mut |rel, e| {
            if let (EntryKind::File, Some(id)) = (e.kind, e.content) {
                if e.size <= READ_LIMIT && seen.insert(id) {
                    files.push((rel.to_vec(), id, e.size));
                }
            }
            Ok(())
        })?;
        drop(seen);
        let mut missing = Vec::new();
        self.manifest.read(|| -> Result<()> {
            for f in files {
                if grams::doc_of(conn, &f.1)?.is_none() {
                    missing.push(f);
                }
            }
            Ok(())
        })?;
        let mut done: Vec<Indexed> = Vec::new();
        let mut pairs = 0usize;
        let mut rest = missing.as_slice();
        while !rest.is_empty() {
            self.check_deadline("indexing a snapshot for search")?;
            let batch = take_batch(&mut rest, BATCH_FILES);
            let jobs = self.locate_all(batch)?;
            let (backend, bundles) = (self.backend.as_ref(), &self.caches.bundles);
            let indexed: Vec<Indexed> = jobs
                .par_iter()
                .map(|job| fetch_job(backend, bundles, job).map(|bytes| index_content(job.content, &bytes)))
                .collect::<Result<_>>()?;
            for d in indexed {
                pairs += d.grams.len();
                done.push(d);
            }
            if pairs >= SEGMENT_PAIRS {
                self.manifest.write(|tx| write_segment(tx, &done))?;
                done.clear();
                pairs = 0;
            }
        }
        self.manifest.write(|tx| {
            write_segment(tx, &done)?;
            grams::mark_snapshot(tx, &snap.id)
        })?;
        if grams::segment_count(conn)? > MAX_SEGMENTS {
            self.manifest.write(|tx| grams::merge_segments(tx))?;
        }
        Ok(())
    }

    /// The contents that may satisfy `q` among those indexed: every document whose trigrams
    /// pass it, and every document left unindexed. `None` when `q` rules nothing out.
    pub(crate) fn search_candidates(&self, q: &GramQuery) -> Result<Option<RandomKeySet<ObjectId>>> {
        if *q == GramQuery::All {
            return Ok(None);
        }
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let mut lists = BTreeMap::new();
            for g in q.grams() {
                lists.insert(g, grams::postings(conn, g)?);
            }
            let Some(mut docs) = eval(q, &lists) else { return Ok(None) };
            docs.extend(grams::unindexed_docs(conn)?);
            let mut out = RandomKeySet::default();
            for d in docs {
                // A document whose row is gone (its content collected) matches no file.
                if let Some(id) = grams::id_of(conn, d)? {
                    out.insert(id);
                }
            }
            Ok(Some(out))
        })
    }
}

/// The documents passing `q`, ascending; `None` for all of them. Recursion follows the query's
/// nesting, which the pattern's nesting limit bounds.
fn eval(q: &GramQuery, lists: &BTreeMap<Gram, Vec<u64>>) -> Option<Vec<u64>> {
    match q {
        GramQuery::All => None,
        GramQuery::Gram(g) => Some(lists.get(g).cloned().unwrap_or_default()),
        GramQuery::And(parts) => {
            let mut sets: Vec<Vec<u64>> = parts.iter().filter_map(|p| eval(p, lists)).collect();
            sets.sort_by_key(Vec::len);
            let mut iter = sets.into_iter();
            let mut acc = iter.next()?;
            for s in iter {
                acc = intersect(&acc, &s);
                if acc.is_empty() {
                    break;
                }
            }
            Some(acc)
        }
        GramQuery::Or(parts) => {
            let mut acc = Vec::new();
            for p in parts {
                acc.extend(eval(p, lists)?);
            }
            acc.sort_unstable();
            acc.dedup();
            Some(acc)
        }
    }
}

fn intersect(a: &[u64], b: &[u64]) -> Vec<u64> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}
