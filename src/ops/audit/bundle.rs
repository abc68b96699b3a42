//! Audit bundles: records, the checkpoints that sign them and the proofs between those, in one
//! file that `trove audit verify --bundle` checks on a machine without the repository, with only
//! the log's public key.
//!
//! The format is JSON lines (ARCHITECTURE.md, "Audit bundle"): a header (`format`, `origin`,
//! `from`, `to`), then `prefix` (the hashes of the perfect subtrees of the records before
//! `from`), then every `checkpoint` (size and signed note) from `from` to `to`, the
//! `consistency` proofs between consecutive ones, and each `record` (seq and canonical encoding,
//! base64, with its fields shown beside for people: verification checks each one shown against
//! the encoding, so what a person reads is what the signature covers). `to` is a checkpoint
//! written at export.

use std::io::{BufRead, Read, Write};

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, ErrorKind, Result};
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::model::audit::{AuditRecord, ConsistencyProof, FullRecord, VerifyReport};
use crate::repo::Repo;
use crate::tlog::merkle::{self, Frontier, Hash};
use crate::tlog::note::VerifierKey;

use super::verify::{open_checkpoint, Checker, Opened};

/// The format name a bundle's header carries.
pub const FORMAT: &str = "trove-audit-bundle/1";
/// The longest line a bundle may have (one record's encoding with its fields, in base64).
const MAX_LINE: u64 = 64 << 20;

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// One line of a bundle.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum Line {
    /// What the bundle holds.
    Header { format: String, origin: String, from: u64, to: u64 },
    /// The perfect subtrees of records 1 to `from - 1`: (level, base64 hash), left to right.
    Prefix(Vec<(u32, String)>),
    /// A checkpoint: its size and signed note.
    Checkpoint { size: u64, note: String },
    /// A consistency proof between two of the bundle's checkpoints.
    Consistency(ConsistencyProof),
    /// A record: its seq, its canonical encoding (base64), and its fields shown for people
    /// (each checked against the encoding when the bundle is verified).
    Record {
        seq: i64,
        encoded: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shown: Option<serde_json::Value>,
    },
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleSummary {
    /// The first record.
    pub from: u64,
    /// The last record, which the last checkpoint signs.
    pub to: u64,
    /// Checkpoints in the bundle.
    pub checkpoints: usize,
}

fn write_line(out: &mut dyn Write, line: &Line) -> Result<()> {
    serde_json::to_writer(&mut *out, line)
        .map_err(|e| Error::with_source(ErrorKind::Io, "cannot write the bundle", e))?;
    out.write_all(b"\n").map_err(|e| Error::with_source(ErrorKind::Io, "cannot write the bundle", e))
}

impl Repo {
    /// Writes records `from` to now, with a checkpoint of now and the earlier checkpoints and
    /// proofs from `from` on, as a bundle.
    pub fn export_audit_bundle(&self, from: u64, out: &mut dyn Write) -> Result<BundleSummary> {
        let from = from.max(1);
        let last = self.checkpoint()?;
        if from > last.size {
            return Err(Error::invalid_argument(format!(
                "the log has {} records: --from {from} is past its end",
                last.size
            )));
        }
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let nodes = StoredNodes(conn);
            let origin = self.audit_origin()?;
            write_line(out, &Line::Header { format: FORMAT.into(), origin, from, to: last.size })?;
            let prefix = Frontier::of(&nodes, from - 1)?;
            write_line(out, &Line::Prefix(prefix.edge().iter().map(|(l, h)| (*l, b64().encode(h))).collect()))?;
            let cps: Vec<_> = manifest::audit::checkpoints(conn)?
                .into_iter()
                .filter(|c| c.size >= from && c.size <= last.size)
                .collect();
            for c in &cps {
                write_line(out, &Line::Checkpoint { size: c.size, note: c.note.clone() })?;
            }
            for pair in cps.windows(2) {
                let (a, b) = (pair[0].size, pair[1].size);
                let proof = merkle::consistency_proof(&nodes, a, b)?;
                let p = ConsistencyProof {
                    from: a,
                    to: b,
                    from_root: b64().encode(pair[0].root),
                    to_root: b64().encode(pair[1].root),
                    proof: proof.iter().map(|h| b64().encode(h)).collect(),
                };
                write_line(out, &Line::Consistency(p))?;
            }
            manifest::audit::each_from(conn, from as i64, |full, encoded| {
                if full.seq as u64 > last.size {
                    return Ok(());
                }
                let shown = serde_json::to_value(full.entry()).ok();
                write_line(out, &Line::Record { seq: full.seq, encoded: b64().encode(encoded), shown })
            })?;
            Ok(BundleSummary { from, to: last.size, checkpoints: cps.len() })
        })
    }
}

/// Verifies a bundle with `keys` alone (the public keys of the hosts that signed its
/// checkpoints): the prefix and the records hash to every checkpoint's signed root, the proofs
/// between checkpoints hold, seqs run on and times never go back.
pub fn verify_bundle(mut input: impl BufRead, keys: &[VerifierKey]) -> Result<VerifyReport> {
    let Some(key) = keys.first() else {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "a bundle verifies with a public key: give one with --pubkey",
        ));
    };
    let bad = |what: String| Error::new(ErrorKind::Corrupt, format!("not a valid audit bundle: {what}"));
    let mut line = Vec::new();
    let mut next = |input: &mut dyn BufRead| -> Result<Option<Line>> {
        line.clear();
        let n = (&mut *input)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::with_source(ErrorKind::Io, "cannot read the bundle", e))?;
        if n == 0 {
            return Ok(None);
        }
        if n as u64 > MAX_LINE {
            return Err(bad(format!("a line is longer than {MAX_LINE} bytes")));
        }
        serde_json::from_slice(&line).map(Some).map_err(|e| bad(format!("a line does not parse: {e}")))
    };
    let (from, to) = match next(&mut input)? {
        Some(Line::Header { format, origin, from, to }) if format == FORMAT => {
            if !keys.iter().any(|k| k.name() == origin) {
                return Err(bad(format!("it is of log '{origin}', and the key of '{}'", key.name())));
            }
            (from, to)
        }
        _ => return Err(bad(format!("the first line is not a {FORMAT} header"))),
    };
    let prefix = match next(&mut input)? {
        Some(Line::Prefix(edge)) => {
            let edge = edge
                .into_iter()
                .map(|(l, h)| {
                    let h: Hash = b64()
                        .decode(&h)
                        .ok()
                        .and_then(|h| h.try_into().ok())
                        .ok_or_else(|| bad("a prefix hash".into()))?;
                    Ok((l, h))
                })
                .collect::<Result<Vec<_>>>()?;
            Frontier::from_edge(edge)?
        }
        _ => return Err(bad("the second line is not the prefix".into())),
    };
    if prefix.size().checked_add(1) != Some(from) {
        return Err(bad(format!(
            "the prefix covers {} records, not the {} before record {from}",
            prefix.size(),
            from.saturating_sub(1)
        )));
    }
    let (mut signed, mut problems, mut proofs, mut count) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
    let mut pending = None;
    while let Some(l) = next(&mut input)? {
        match l {
            Line::Checkpoint { size, note } => {
                count += 1;
                match open_checkpoint(keys, &note) {
                    Ok(c) if c.size == size => signed.push(Opened { size: c.size, root: c.root, time_ns: c.time_ns }),
                    Ok(c) => problems.push(format!("checkpoint {size}: its note signs size {}", c.size)),
                    Err(e) => problems.push(format!("checkpoint {size}: {}", e.message())),
                }
            }
            Line::Consistency(p) => proofs.push(p),
            other => {
                pending = Some(other);
                break;
            }
        }
    }
    if !signed.iter().any(|c| c.size == to) {
        problems.push(format!("no checkpoint signed by a key given covers the bundle's end ({to})"));
    }
    for p in &proofs {
        check_consistency(p, &signed, &mut problems);
    }
    let mut check = Checker::new(prefix, signed, count);
    check.report.problems.append(&mut problems);
    let record = |l: Line, check: &mut Checker| -> Result<()> {
        let Line::Record { seq, encoded, shown } = l else { return Err(bad("records come last".into())) };
        let bytes = b64().decode(&encoded).map_err(|_| bad(format!("record {seq}'s encoding is not base64")))?;
        let (inner, rec) = AuditRecord::decode(&bytes)?;
        if inner != seq {
            return Err(bad(format!("record {seq}'s encoding says it is record {inner}")));
        }
        let time_ns = rec.time_ns;
        if let Some(shown) = shown {
            if let Some(what) = shown_differs(&shown, FullRecord { seq, record: rec }) {
                check.shown_problem(seq, what);
            }
        }
        check.record(seq, &bytes, None, None, time_ns);
        Ok(())
    };
    if let Some(l) = pending {
        record(l, &mut check)?;
    }
    while let Some(l) = next(&mut input)? {
        record(l, &mut check)?;
    }
    Ok(check.finish())
}

/// The fields of `shown` (what people read in the bundle) that are not what the record's
/// encoding says, named; `None` when every field shown is the encoding's. A field left out is
/// no lie, so bundles written before a field existed still verify; one shown that the
/// encoding lacks (or a `shown` that is not an object) is.
fn shown_differs(shown: &serde_json::Value, full: FullRecord) -> Option<String> {
    let Some(shown) = shown.as_object() else { return Some("its shown fields are not an object".into()) };
    let decoded = serde_json::to_value(full.entry()).unwrap_or_default();
    let null = serde_json::Value::Null;
    let differ: Vec<&str> =
        shown.iter().filter(|(k, v)| decoded.get(k.as_str()).unwrap_or(&null) != *v).map(|(k, _)| k.as_str()).collect();
    (!differ.is_empty()).then(|| format!("the fields shown differ from its encoding: {}", differ.join(", ")))
}

/// One of the bundle's consistency proofs, against the roots its checkpoints sign.
fn check_consistency(p: &ConsistencyProof, signed: &[Opened], problems: &mut Vec<String>) {
    let root = |size: u64| signed.iter().find(|c| c.size == size).map(|c| c.root);
    let (Some(a), Some(b)) = (root(p.from), root(p.to)) else {
        problems.push(format!(
            "a consistency proof from {} to {} names a checkpoint the bundle does not sign",
            p.from, p.to
        ));
        return;
    };
    let hashes: std::result::Result<Vec<Vec<u8>>, _> = p.proof.iter().map(|h| b64().decode(h)).collect();
    let ok = hashes.map_err(|_| ()).and_then(|h| merkle::verify_consistency(p.from, p.to, &h, &a, &b).map_err(|_| ()));
    if ok.is_err() {
        problems.push(format!("the consistency proof from checkpoint {} to {} does not hold", p.from, p.to));
    }
}
