//! Verifying the audit log (`trove audit verify`): every record re-encoded from its columns,
//! the Merkle tree recomputed from those encodings, every checkpoint's signature checked and its
//! root compared, seq contiguity and time order checked, and the stored tree asked for the
//! consistency proofs between checkpoints. The same checker runs over an exported bundle, with
//! only the public key (`bundle.rs`).

use std::collections::VecDeque;

use crate::base::error::{Error, ErrorKind, Result};
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::model::audit::{AuditKeyInfo, CheckpointSeen, Checkpointed, SeqRange, VerifyReport};
use crate::repo::Repo;
use crate::tlog::merkle::{self, Frontier, Hash};
use crate::tlog::note::{Checkpoint, VerifierKey};

/// The checkpoint a note signs, if one of `keys` signed it and it names that key's log. Every
/// key whose name and key id a signature line carries is tried, in any order: the note opens if
/// one of them verifies it over its own log (a witness's key given too, or a forged line
/// naming a trusted key beside a good signature, changes nothing).
pub(crate) fn open_checkpoint(keys: &[VerifierKey], note: &str) -> Result<Checkpoint> {
    let mut failed = None;
    for key in keys.iter().filter(|k| k.signed_by(note)) {
        match key.open(note).and_then(Checkpoint::parse) {
            Ok(c) if c.origin == key.name() => return Ok(c),
            Ok(c) => {
                failed = Some(Error::new(
                    ErrorKind::Corrupt,
                    format!("the checkpoint is of log '{}', not '{}'", c.origin, key.name()),
                ))
            }
            Err(e) => failed = Some(e),
        }
    }
    Err(failed.unwrap_or_else(|| {
        let signers = crate::tlog::note::signers(note);
        Error::new(
            ErrorKind::Corrupt,
            format!(
                "it carries no signature by a key trusted here (it is signed by {})",
                if signers.is_empty() { "no key".to_string() } else { signers.join(", ") }
            ),
        )
    }))
}

/// A checkpoint whose signature holds: its size, root and signed time (if it carries one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opened {
    pub size: u64,
    pub root: Hash,
    pub time_ns: Option<i64>,
}

/// Records checked one after another against the signed checkpoints.
pub(crate) struct Checker {
    frontier: Frontier,
    prev_time: i64,
    /// Signed checkpoints not reached yet, smallest first.
    ahead: VecDeque<Opened>,
    /// The last signed checkpoint reached and matched (none: only the records before the
    /// checker's start, which are taken as given).
    matched: u64,
    matched_at: Option<Opened>,
    pub report: VerifyReport,
    stopped: bool,
}

impl Checker {
    /// A checker starting after the records `frontier` covers, against `signed` checkpoints.
    pub fn new(frontier: Frontier, mut signed: Vec<Opened>, checkpoints: u64) -> Checker {
        signed.sort_by_key(|c| c.size);
        let start = frontier.size();
        let ahead: VecDeque<_> = signed.into_iter().filter(|c| c.size > start).collect();
        let report = VerifyReport { from: start.saturating_add(1), checkpoints, ..Default::default() };
        Checker { frontier, prev_time: i64::MIN, ahead, matched: start, matched_at: None, report, stopped: false }
    }

    /// The tree of the records checked so far (and those before the start).
    pub fn frontier(&self) -> &Frontier {
        &self.frontier
    }

    /// Record `seq` of a bundle shows fields its encoding does not say (`what`).
    pub fn shown_problem(&mut self, seq: i64, what: String) {
        self.problem(Some(seq), format!("record {seq} was edited in the bundle: {what}"));
    }

    /// Counts `what` as a problem, found at record `seq` (if at one).
    pub(crate) fn problem(&mut self, seq: Option<i64>, what: String) {
        if self.report.first_bad_seq.is_none() {
            self.report.first_bad_seq = seq;
        }
        self.report.problems.push(what);
    }

    /// Record `seq` (expected: the next), its encoding recomputed from its fields, the encoding
    /// as stored (when there is one to compare) and its leaf as stored (likewise). Returns
    /// whether checking goes on: after a gap or a rewritten record nothing later can be proven.
    pub fn record(
        &mut self,
        seq: i64,
        encoded: &[u8],
        stored: Option<&[u8]>,
        leaf: Option<&[u8]>,
        time_ns: i64,
    ) -> bool {
        if self.stopped {
            return false;
        }
        // A bundle's prefix may claim any size: past what a seq counts, nothing follows it.
        let Some(want) = i64::try_from(self.frontier.size()).ok().and_then(|s| s.checked_add(1)) else {
            self.problem(Some(seq), format!("record {seq} follows more records than a seq can count"));
            self.stopped = true;
            return false;
        };
        if seq != want {
            let what = if seq > want {
                format!("record {want} is missing: the log goes from {} to {seq}", want - 1)
            } else {
                format!("record {seq} appears again after record {}", want - 1)
            };
            self.problem(Some(want), what);
            self.stopped = true;
            return false;
        }
        if stored.is_some_and(|s| s != encoded) {
            self.problem(Some(seq), format!("record {seq} was edited: its columns do not match its stored encoding"));
            self.stopped = true;
            return false;
        }
        if time_ns < self.prev_time {
            self.problem(Some(seq), format!("record {seq} is dated before record {}: time went backwards", seq - 1));
        }
        self.prev_time = time_ns;
        let hash = merkle::leaf_hash(encoded);
        if leaf.is_some_and(|l| l != hash) {
            // A row that keeps its encoding matched it: only the leaf can have changed. One whose
            // columns are the whole record (schema 17) may have had either edited.
            let what = match stored {
                Some(_) => format!("record {seq}'s leaf in the stored tree is not the hash of the record"),
                None => format!(
                    "record {seq} was edited, or its leaf in the stored tree: its columns no longer hash to that leaf"
                ),
            };
            self.problem(Some(seq), what);
        }
        self.frontier.push(hash);
        self.report.records += 1;
        while let Some(&cp) = self.ahead.front() {
            let size = cp.size;
            if size != self.frontier.size() {
                break;
            }
            self.ahead.pop_front();
            if self.frontier.root() == cp.root {
                self.matched = size;
                self.matched_at = Some(cp);
            } else {
                let from = self.matched.saturating_add(1);
                self.problem(
                    Some(from as i64),
                    format!("records {from} to {size} do not hash to the root checkpoint {size} signs: one of them was rewritten, removed or inserted"),
                );
                self.stopped = true;
                return false;
            }
        }
        true
    }

    /// The report, with the checkpoints the records never reached (a truncated log), the
    /// records no checkpoint covers and the last checkpoint matched.
    pub fn finish(mut self) -> VerifyReport {
        let size = self.frontier.size();
        if !self.stopped {
            if let Some(&Opened { size: cp, .. }) = self.ahead.back() {
                self.problem(
                    Some(i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1)),
                    format!(
                        "checkpoint {cp} signs {cp} records but the log has {size}: records {} on were removed",
                        size.saturating_add(1)
                    ),
                );
            }
        }
        self.report.verified_to = self.matched;
        self.report.unsigned_tail = size.saturating_sub(self.matched);
        if size > self.matched {
            self.report.unsigned = Some(SeqRange { first: self.matched + 1, last: size });
        }
        self.report.last_checkpoint =
            self.matched_at.map(|c| CheckpointSeen { size: c.size, time: c.time_ns.map(crate::base::time::iso_time) });
        self.report
    }
}

impl Repo {
    /// The keys checkpoints verify with when none is given: this host's own, if its file is
    /// there (verification never makes one), and in a bucket every key the log registers
    /// (each host's that signed one). In a directory only the own key counts: whoever can
    /// write the manifest could register one, while a bucket's log is sealed with the
    /// repository's key.
    pub fn trusted_audit_keys(&self) -> Result<Vec<VerifierKey>> {
        let keys = self.trusted_keys(self.own_verifier()?)?;
        if keys.is_empty() {
            let at = self.audit_key_path().map_or(String::new(), |p| format!(" at {}", p.display()));
            return Err(Error::not_found(format!(
                "no audit key{at}, and none registered in the log: give the public key with --pubkey"
            )));
        }
        Ok(keys)
    }

    /// This host's public key, if its key file is there (or the handle read it): asking never
    /// makes one.
    fn own_verifier(&self) -> Result<Option<VerifierKey>> {
        match (self.audit_key.get(), self.audit_key_path()) {
            (Some(k), _) => Ok(Some(k.verifier())),
            (None, Some(p)) if !p.exists() => Ok(None),
            _ => self.audit_verifier().map(Some),
        }
    }

    /// `own` and, in a bucket, the keys the log registers under this repository's log name
    /// (one that does not parse, or is of another log, is logged and left out: its checkpoints
    /// then verify by no key, each named as a problem).
    pub(crate) fn trusted_keys(&self, own: Option<VerifierKey>) -> Result<Vec<VerifierKey>> {
        let mut keys: Vec<VerifierKey> = own.into_iter().collect();
        if !self.manifest.is_replica() {
            return Ok(keys);
        }
        let origin = self.log_origin();
        for (text, ..) in self.manifest.read(|| manifest::audit::keys(self.manifest.conn()))? {
            match VerifierKey::parse(&text) {
                Ok(k) if k.name() != origin => {
                    tracing::warn!(key = %text, "a registered audit key is of another log; left out")
                }
                Ok(k) if !keys.contains(&k) => keys.push(k),
                Ok(_) => {}
                Err(e) => tracing::warn!(key = %text, error = %e, "a registered audit key does not parse; left out"),
            }
        }
        Ok(keys)
    }

    /// The keys the log registers as signing its checkpoints, oldest first.
    pub fn registered_audit_keys(&self) -> Result<Vec<AuditKeyInfo>> {
        let own = self.own_verifier()?.map(|k| k.to_string());
        let rows = self.manifest.read(|| manifest::audit::keys(self.manifest.conn()))?;
        Ok(rows
            .into_iter()
            .map(|(key, host, added_ns)| AuditKeyInfo {
                this_host: own.as_deref() == Some(key.as_str()),
                key,
                host,
                added: crate::base::time::iso_time(added_ns),
            })
            .collect())
    }

    /// Verifies the whole audit log (see the module's documentation) with `keys`, or when none
    /// is given [`Repo::trusted_audit_keys`]. Problems are in the report, not errors.
    ///
    /// Where the signer's state is readable beside this host's key (`fs/signed.rs`), the
    /// checkpoint it remembers signing must still be in the manifest: deleting checkpoints,
    /// every one of them included, is then a problem rather than a log that merely looks
    /// unsigned.
    pub fn verify_audit(&self, keys: &[VerifierKey]) -> Result<VerifyReport> {
        let keys = if keys.is_empty() { self.trusted_audit_keys()? } else { keys.to_vec() };
        let remembered = match self.signed_state() {
            // A replica that cannot catch up (read-only) may not have seen the checkpoint
            // another process of this host signed: not a deletion.
            Ok(_) if self.manifest.is_replica() && self.read_only().is_some() => None,
            Ok(r) => r.filter(|r| keys.iter().any(|k| r.origin == k.name())),
            Err(e) => {
                tracing::warn!(error = %e, "the audit signer's state was not consulted by verification");
                None
            }
        };
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let stored = manifest::audit::checkpoints(conn)?;
            let (signed, mut problems) = signed_checkpoints(&keys, &stored);
            if let Some(r) = &remembered {
                if !stored.iter().any(|c| c.size == r.size && c.root == r.root) {
                    problems.push(format!(
                        "the checkpoint of {} records this key signed at {} is not in the manifest: it was deleted (or the manifest restored from an older copy)",
                        r.size,
                        crate::base::time::iso_time(r.time_ns)
                    ));
                }
            }
            let mut check = Checker::new(Frontier::new(), signed.clone(), stored.len() as u64);
            check.report.problems.append(&mut problems);
            manifest::audit::each_checked(conn, 1, |full, stored, leaf| {
                let encoded = full.record.encode(full.seq);
                check.record(full.seq, &encoded, stored.as_deref(), leaf.as_deref(), full.record.time_ns);
                Ok(())
            })?;
            let mut report = check.finish();
            consistency_between(conn, &signed, report.verified_to, &mut report);
            Ok(report)
        })
    }
}

/// The checkpoints one of `keys` signed; each one whose signature or content does not hold (or
/// that none of them signed), or whose row's time is not the time it signs, is a problem.
pub(crate) fn signed_checkpoints(keys: &[VerifierKey], stored: &[Checkpointed]) -> (Vec<Opened>, Vec<String>) {
    let (mut signed, mut problems) = (Vec::new(), Vec::new());
    for c in stored {
        match open_checkpoint(keys, &c.note) {
            Ok(cp) if cp.size == c.size && cp.root == c.root => {
                if cp.time_ns.is_some_and(|t| t != c.time_ns) {
                    problems.push(format!("checkpoint {}: its row's time is not the time its note signs", c.size));
                }
                signed.push(Opened { size: cp.size, root: cp.root, time_ns: cp.time_ns });
            }
            Ok(cp) => problems.push(format!(
                "checkpoint {}: its row says size {} and another root than its signed note (size {})",
                c.size, c.size, cp.size
            )),
            Err(e) => problems.push(format!("checkpoint {}: {}", c.size, e.message())),
        }
    }
    (signed, problems)
}

/// Checks the stored tree's consistency proofs between consecutive signed checkpoints up to
/// `upto` (whose roots the records were found to hash to).
fn consistency_between(conn: &rusqlite::Connection, signed: &[Opened], upto: u64, report: &mut VerifyReport) {
    let good: Vec<_> = signed.iter().filter(|c| c.size <= upto).collect();
    for pair in good.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let proved = merkle::consistency_proof(&StoredNodes(conn), a.size, b.size).and_then(|p| {
            let p: Vec<Vec<u8>> = p.iter().map(|h| h.to_vec()).collect();
            merkle::verify_consistency(a.size, b.size, &p, &a.root, &b.root)
        });
        if let Err(e) = proved {
            report.problems.push(format!(
                "the stored tree cannot prove checkpoint {} extends checkpoint {}: {}",
                b.size,
                a.size,
                e.message()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlog::note::SignerKey;

    /// A checkpoint of log `origin` signed by `key`, its signature lines after `extra` ones.
    fn note(origin: &str, key: &SignerKey, extra: &[String]) -> String {
        let text = Checkpoint { origin: origin.into(), size: 3, root: [7; 32], time_ns: Some(1) }.text();
        let signed = key.sign(&text).expect("sign");
        let (body, line) = signed.split_at(signed.rfind("\n\n").expect("a blank line") + 2);
        format!("{body}{}{line}", extra.concat())
    }

    #[test]
    fn a_note_opens_by_any_trusted_key_that_signed_it_whatever_their_order() {
        let (one, two) = (SignerKey::generate("trove/x").expect("key"), SignerKey::generate("trove/x").expect("key"));
        let witness = SignerKey::generate("witness.example").expect("key");
        let line = |key: &SignerKey| {
            let other = key.sign("something else\n").expect("sign");
            other[other.rfind("\n\n").expect("blank") + 2..].to_string()
        };
        // A line naming `one` whose signature is not of this note, before two's good signature.
        let n = note("trove/x", &two, &[line(&one)]);
        for keys in [vec![one.verifier(), two.verifier()], vec![two.verifier(), one.verifier()]] {
            assert_eq!(open_checkpoint(&keys, &n).expect("opens").size, 3);
        }
        // Only the forged line's key: refused, naming what does not verify.
        let e = open_checkpoint(&[one.verifier()], &n).expect_err("refused");
        assert!(e.message().contains("does not verify"), "{e}");
        // A witness's key given first: its log is not this one, and two's signature still opens it.
        let cosigned = note("trove/x", &two, &[line(&witness)]);
        assert!(open_checkpoint(&[witness.verifier(), two.verifier()], &cosigned).is_ok());
        // No trusted key: the message names the keys the note carries.
        let e = open_checkpoint(&[witness.verifier()], &n).expect_err("refused");
        assert!(e.message().contains("trove/x+"), "{e}");
    }
}
