//! Checking a repository: every indexed object (in a pack) and every loose object (in the
//! manifest) reads back and hashes to its id; every chunk list names stored chunks that
//! reassemble to its file's content id; every file content and tree a tree references exists.
//!
//! Problems are collected, not returned as errors, so one damaged pack or row does not hide
//! another: a row whose values have the wrong type or an impossible size is a finding too.

use serde::Serialize;

use crate::base::error::{Error, ErrorKind, Result};
use crate::manifest::{loose, objects, snapshots, trees};
use crate::model::tree::EntryKind;
use crate::object::ObjectId;
use crate::repo::Repo;

/// What `Repo::check` read and what it found wrong.
#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    /// Packed objects read and verified.
    pub objects: u64,
    /// Loose objects (the file tools' pre-images and new contents) read and verified.
    pub loose: u64,
    /// Chunked file contents whose chunks were reassembled and verified.
    pub chunked: u64,
    /// Bytes read and verified, all objects together.
    pub bytes: u64,
    /// Each damage found, in words naming the object or row; empty for a sound repository.
    pub problems: Vec<String>,
}

/// Whether an error is damage to report (and go on), rather than a failure of the check itself.
fn is_finding(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound | ErrorKind::Io)
}

/// One content's chunk list as `check` reads it row by row: the chunks hashed in order into
/// the whole, which must be the content; a gap, an overlap or an unreadable chunk breaks it.
struct Reassembly {
    content: ObjectId,
    next_seq: u64,
    offset: u64,
    whole: blake3::Hasher,
    broken: bool,
}

impl Reassembly {
    fn new(content: ObjectId) -> Reassembly {
        Reassembly { content, next_seq: 0, offset: 0, whole: blake3::Hasher::new(), broken: false }
    }

    /// Row `seq` of the list: chunk `chunk` at `offset`.
    fn add(&mut self, repo: &Repo, seq: u64, chunk: ObjectId, offset: u64, report: &mut CheckReport) -> Result<()> {
        if self.broken {
            return Ok(());
        }
        let content = self.content;
        if seq != self.next_seq || offset != self.offset {
            report.problems.push(format!(
                "the chunk list of content {content} is malformed at row {seq} (expected row {} at offset {}, found offset {offset})",
                self.next_seq, self.offset
            ));
            self.broken = true;
            return Ok(());
        }
        match repo.read_object(&chunk) {
            Ok(bytes) => {
                self.whole.update(&bytes);
                self.offset += bytes.len() as u64;
                self.next_seq += 1;
            }
            Err(e) if is_finding(&e) => {
                report.problems.push(format!("chunk {chunk} of content {content}: {}", e.message()));
                self.broken = true;
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The list is whole: it reassembles to its content, or a finding says it does not.
    fn finish(self, report: &mut CheckReport) {
        if self.broken {
            return;
        }
        if ObjectId(*self.whole.finalize().as_bytes()) == self.content {
            report.chunked += 1;
        } else {
            report.problems.push(format!(
                "the chunk list of content {} does not reassemble to it: its chunks hash to another content",
                self.content
            ));
        }
    }
}

impl Repo {
    /// Verifies every object and reference; see the module docs.
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = CheckReport::default();
        self.check_packed(&mut report)?;
        self.check_loose(&mut report)?;
        self.check_chunk_lists(&mut report)?;
        self.check_trees(&mut report)?;
        Ok(report)
    }

    fn check_packed(&self, report: &mut CheckReport) -> Result<()> {
        objects::for_each_location(self.manifest.conn(), |raw_id, loc| {
            let outcome = ObjectId::from_slice(&raw_id).and_then(|id| {
                let loc = loc.map_err(|e| e.context(format!("object {id}")))?;
                self.read_object(&id)?;
                Ok(loc.raw_len)
            });
            match outcome {
                Ok(n) => {
                    report.objects += 1;
                    report.bytes += n;
                }
                Err(e) if is_finding(&e) => report.problems.push(e.message().to_string()),
                Err(e) => return Err(e),
            }
            Ok(())
        })
    }

    fn check_loose(&self, report: &mut CheckReport) -> Result<()> {
        for id in loose::ids(self.manifest.conn())? {
            match loose::get(self.manifest.conn(), &id).and_then(|blob| {
                let blob = blob.ok_or_else(|| Error::corrupt(format!("loose object {id} vanished")))?;
                crate::object::blob::decode(&id, &blob)
            }) {
                Ok(raw) => {
                    report.loose += 1;
                    report.bytes += raw.len() as u64;
                }
                Err(e) if is_finding(&e) => report.problems.push(format!("loose {}", e.message())),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every chunk list: rows numbered 0, 1, ... with offsets that add up, each chunk stored,
    /// and the chunks' bytes in order hashing to the content id.
    fn check_chunk_lists(&self, report: &mut CheckReport) -> Result<()> {
        let mut open: Option<Reassembly> = None;
        objects::for_each_chunk_row(self.manifest.conn(), |row| {
            let (content, seq, chunk, offset) = match row {
                Ok(r) => r,
                Err(e) if is_finding(&e) => {
                    report.problems.push(e.message().to_string());
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if open.as_ref().is_none_or(|o| o.content != content) {
                if let Some(done) = open.take() {
                    done.finish(report);
                }
                open = Some(Reassembly::new(content));
            }
            match open.as_mut() {
                Some(o) => o.add(self, seq, chunk, offset, report),
                None => Ok(()),
            }
        })?;
        if let Some(done) = open.take() {
            done.finish(report);
        }
        Ok(())
    }

    /// Every tree decodes and verifies, and everything it points at exists.
    fn check_trees(&self, report: &mut CheckReport) -> Result<()> {
        let conn = self.manifest.conn();
        let (mut missing_content, mut missing_trees) = (0u64, 0u64);
        for id in trees::all_ids(conn)? {
            let entries = match trees::entries(conn, &id) {
                Ok(e) => e,
                Err(e) if is_finding(&e) => {
                    report.problems.push(e.message().to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            for e in entries {
                match (e.kind, e.content) {
                    (EntryKind::File, Some(c)) if !self.content_stored(&c)? => missing_content += 1,
                    (EntryKind::Dir, Some(t)) if !trees::exists(conn, &t)? => missing_trees += 1,
                    _ => {}
                }
            }
        }
        for snap in snapshots::list(conn, None)? {
            if !trees::exists(conn, &snap.root)? {
                missing_trees += 1;
            }
        }
        if missing_content > 0 {
            report.problems.push(format!("{missing_content} file contents are referenced by trees but not stored"));
        }
        if missing_trees > 0 {
            report.problems.push(format!("{missing_trees} trees are referenced but missing"));
        }
        Ok(())
    }

    /// Whether a file content is stored: as one object (packed or loose) or as a chunk list.
    fn content_stored(&self, id: &ObjectId) -> Result<bool> {
        let conn = self.manifest.conn();
        Ok(objects::contains(conn, id)? || loose::contains(conn, id)? || !objects::chunk_list(conn, id)?.is_empty())
    }
}
