//! Checking a repository. Plain `check` reads metadata only: every pack the index names is
//! there and as long as the index says; every indexed object's blob header agrees with its row;
//! every loose object's header agrees with its id; every chunk list is contiguous and names
//! stored chunks; every tree decodes and verifies, and every reference (trees' files and
//! subtrees, snapshots' roots, trash items, audit pre-images within their retention, journaled
//! plans) names something stored; the audit log verifies; and, where the manifest is a replica
//! of a record log (a bucket, a directory of the log layout), the whole log replays to the rows
//! the replica holds. With `--read-data` (or a subset of the packs) objects are decompressed and
//! hashed, and chunk lists reassembled.
//!
//! Problems are collected, not returned as errors, so one damaged pack or row does not hide
//! another; each names its object and pack, and the snapshots and paths it affects.

mod affected;
mod data;
mod meta;
mod refs;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::SnapshotId;
use crate::object::ObjectId;
use crate::repo::Repo;

/// How much content a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ReadData {
    /// Metadata only.
    #[default]
    Off,
    /// Every object.
    All,
    /// The objects of this fraction (0 to 1) of the packs, chosen at random.
    Fraction(f64),
    /// The objects of packs chosen at random until this many bytes of packs.
    Bytes(u64),
}

impl std::str::FromStr for ReadData {
    type Err = Error;

    /// `10%` (a share of the packs) or `500M` (bytes of packs: K, M, G, T suffixes, powers of
    /// 1024).
    fn from_str(s: &str) -> Result<ReadData> {
        let bad = || {
            Error::invalid_argument(format!(
                "'{s}' is not a subset: give a percentage of the packs (10%) or a size (500M, 2G)"
            ))
        };
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad());
            }
            return Ok(ReadData::Fraction(p / 100.0));
        }
        let (digits, unit) = s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let shift = match unit.to_ascii_uppercase().as_str() {
            "" | "B" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            "T" | "TB" | "TIB" => 40,
            _ => return Err(bad()),
        };
        n.checked_mul(1u64 << shift).filter(|&b| b > 0).map(ReadData::Bytes).ok_or_else(bad)
    }
}

/// What a check reads.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Content to decompress and verify.
    pub read_data: ReadData,
}

/// What is wrong, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A pack the index names is not there.
    PackMissing,
    /// A pack is shorter than the index says, or its header is wrong.
    PackDamaged,
    /// An object's blob does not agree with its index row, or its bytes do not verify.
    ObjectDamaged,
    /// Something refers to an object (or file content) that is not stored.
    ObjectMissing,
    /// A chunk list is malformed or does not reassemble to its content.
    ChunkList,
    /// A tree does not decode or verify.
    TreeDamaged,
    /// Something refers to a tree that is not stored.
    TreeMissing,
    /// A manifest row whose values are malformed.
    Row,
    /// The audit log does not verify.
    AuditLog,
    /// The record log (a bucket's, or a directory's of the log layout) does not replay to this
    /// host's replica of the manifest: a segment damaged or missing, or rows that differ.
    RecordLog,
}

/// One thing wrong.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// What is wrong.
    pub kind: ProblemKind,
    /// In words, naming the object or row.
    pub message: String,
    /// The object, content or tree concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The pack concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack: Option<String>,
    /// Snapshots that hold what it damages (at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotId>,
    /// Paths in those snapshots it damages, as `SNAPSHOT:PATH` (at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

impl Problem {
    fn new(kind: ProblemKind, message: impl Into<String>) -> Problem {
        Problem { kind, message: message.into(), object: None, pack: None, snapshots: Vec::new(), paths: Vec::new() }
    }

    fn object(mut self, id: impl ToString) -> Problem {
        self.object = Some(id.to_string());
        self
    }

    fn pack(mut self, pack: &str) -> Problem {
        self.pack = Some(pack.to_string());
        self
    }
}

/// What a check read and what it found wrong.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// Packs the index names.
    pub packs: u64,
    /// Pack files the index does not know (garbage collection reclaims them; not damage).
    pub orphan_packs: u64,
    /// Packed objects checked.
    pub objects: u64,
    /// Loose objects (the file tools' pre-images and new contents, small snapshots' files) checked.
    pub loose: u64,
    /// Chunked contents whose lists were checked (and, reading data, reassembled).
    pub chunked: u64,
    /// Trees decoded and verified.
    pub trees: u64,
    /// Snapshots whose roots were checked.
    pub snapshots: u64,
    /// Objects whose bytes were decompressed and verified.
    pub objects_read: u64,
    /// Bytes decompressed and verified.
    pub bytes: u64,
    /// Packs whose objects were read.
    pub packs_read: u64,
    /// Audit records verified.
    pub audit_records: u64,
    /// Segments of the record log replayed and compared with this host's replica (0 for a
    /// manifest that is no replica).
    pub log_segments: u64,
    /// Why the record log was not compared with this host's replica, when it was not (a
    /// read-only replica, a log that kept growing): not a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_note: Option<String>,
    /// Why the audit log's checkpoints could not be verified, when they could not (its key
    /// kept elsewhere): not a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_note: Option<String>,
    /// Each damage found; empty for a sound repository.
    pub problems: Vec<Problem>,
}

/// Ids found bad while checking, for the snapshots and paths they affect: object (or content)
/// id or tree id -> the problems naming it.
#[derive(Default)]
struct Bad {
    objects: BTreeMap<ObjectId, Vec<usize>>,
    trees: BTreeMap<ObjectId, Vec<usize>>,
}

/// A check in progress: the report, and the ids found bad so far.
struct Checking<'r> {
    repo: &'r Repo,
    report: CheckReport,
    bad: Bad,
    /// Objects (by id) already reported, so one damage is one problem.
    reported: BTreeSet<ObjectId>,
}

/// Whether an error is damage to report (and go on), rather than a failure of the check itself.
fn is_finding(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound | ErrorKind::Io)
}

impl Checking<'_> {
    fn problem(&mut self, p: Problem) -> usize {
        self.report.problems.push(p);
        self.report.problems.len() - 1
    }

    /// Reports damage to object `id` once, and remembers it as bad.
    fn object_problem(&mut self, id: ObjectId, p: Problem) {
        if self.reported.insert(id) {
            let i = self.problem(p.object(id));
            self.bad.objects.entry(id).or_default().push(i);
        }
    }

    fn tree_problem(&mut self, id: ObjectId, p: Problem) {
        let i = self.problem(p.object(id));
        self.bad.trees.entry(id).or_default().push(i);
    }
}

impl Checking<'_> {
    /// The audit log: every record re-encoded, the tree recomputed, every checkpoint verified
    /// with the repository's key. Without the key (kept elsewhere), only noted.
    fn check_audit(&mut self) -> Result<()> {
        match self.repo.verify_audit(&[]) {
            Ok(v) => {
                self.report.audit_records = v.records;
                for p in v.problems {
                    self.problem(Problem::new(ProblemKind::AuditLog, p));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::Io => {
                self.report.audit_note =
                    Some(format!("the audit log's checkpoints were not verified: {}", e.message()));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

impl Checking<'_> {
    /// A replica's record log: every segment replayed beside the replica and the rows compared.
    fn check_record_log(&mut self) -> Result<()> {
        if !self.repo.manifest.is_replica() {
            return Ok(());
        }
        if let Some(why) = self.repo.read_only() {
            // The replay needs a scratch database beside the replica, which a full disk refuses.
            self.report.log_note =
                Some(format!("the record log was not replayed: this host's replica is open read-only ({why})"));
            return Ok(());
        }
        if let Some(log) = self.repo.manifest.check_log()? {
            self.report.log_segments = log.segments;
            if !log.compared {
                self.report.log_note = Some(match log.problems.is_empty() {
                    true => "the record log grew through every try: its rows were not compared with this host's replica; run check again",
                    false => "the record log's rows were not compared with this host's replica: see the problem found replaying it",
                }.to_owned());
            }
            for p in log.problems {
                self.problem(Problem::new(ProblemKind::RecordLog, p));
            }
        }
        Ok(())
    }
}

impl Repo {
    /// Verifies everything and reads every object: `check_with` with `ReadData::All`.
    pub fn check(&self) -> Result<CheckReport> {
        self.check_with(&CheckOptions { read_data: ReadData::All })
    }

    /// Checks the repository (see the module docs).
    pub fn check_with(&self, opts: &CheckOptions) -> Result<CheckReport> {
        // What is verified is the bucket, not this node's cached copies of its packs.
        let _bypass = self.reading_the_bucket();
        let mut c =
            Checking { repo: self, report: CheckReport::default(), bad: Bad::default(), reported: BTreeSet::new() };
        let packs = self.manifest.read(|| c.check_packs())?;
        self.manifest.read(|| c.check_objects(&packs))?;
        self.manifest.read(|| c.check_loose(opts.read_data == ReadData::All))?;
        self.manifest.read(|| c.check_stray_bases())?;
        self.manifest.read(|| c.check_chunk_lists(false))?;
        self.manifest.read(|| c.check_trees())?;
        self.manifest.read(|| c.check_references())?;
        if opts.read_data != ReadData::Off {
            c.read_data(&packs, opts.read_data)?;
        }
        c.check_audit()?;
        c.check_record_log()?;
        if !c.report.problems.is_empty() {
            self.manifest.read(|| c.affected())?;
        }
        Ok(c.report)
    }
}
