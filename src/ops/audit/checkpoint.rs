//! Checkpoints of the audit log: the signing key (created by `trove init` outside the
//! manifest, read once per handle; in a bucket, each host's own unless they share one), a
//! checkpoint written as a C2SP signed note of the log's size, Merkle root and time, only over
//! a log that extends the last one the key signed, with the key registered in the log beside
//! it (`audit_keys`), optionally cosigned by a witness command, and the rule for when one is
//! due (every N records; the server also every T seconds and at each session end).

use std::io::Write;
use std::path::PathBuf;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::now_ns;
use crate::fs::keyfile::{create_key, read_key};
use crate::fs::signed::{lock_key, read_signed, state_path, write_signed, Signed};
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::model::audit::Checkpointed;
use crate::repo::Repo;
use crate::tlog::merkle::{self, Frontier};
use crate::tlog::note::{Checkpoint, SignerKey, VerifierKey};

use super::verify::{signed_checkpoints, Checker};

/// The key file's name in the repository when the config names none.
pub const KEY_FILE: &str = "audit.key";

impl Repo {
    /// Where the audit signing key is (none for an in-memory repository).
    pub fn audit_key_path(&self) -> Option<PathBuf> {
        let root = self.root()?;
        Some(match &self.config.audit.key {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => root.join(p),
            // Each node of a fleet signs its own log with its own key, which a host acting as
            // another node (one retired) must not take for that node's.
            None => match self.node() {
                Some(node) => crate::ops::fleet::key_path(root, node),
                None => root.join(KEY_FILE),
            },
        })
    }

    /// The name of the log this handle's checkpoints sign (the key's name, C2SP's origin):
    /// `trove/<repository id>`, and a node's own `trove/<repository id>/<node>` in a bucket of
    /// a log per node.
    pub fn log_origin(&self) -> String {
        match self.node() {
            Some(node) => format!("{}/{node}", self.config.key_origin()),
            None => self.config.key_origin(),
        }
    }

    /// The signing key: read from its file, made there (a repository from before keys) or, in
    /// memory, made once.
    pub(crate) fn signer(&self) -> Result<&SignerKey> {
        if let Some(k) = self.audit_key.get() {
            return Ok(k);
        }
        // Another node's log is signed by that node alone: no key is read, let alone made, for
        // it here (a host that later acted as that node would sign with it).
        if let Some(crate::manifest::log::Owner::Foreign { node }) = self.bucket_keys.as_deref().map(|k| &k.owner) {
            return Err(Error::invalid_argument(format!(
                "only node {node} signs its audit log: read its checkpoints, or sign on that node"
            )));
        }
        let origin = self.log_origin();
        let key = match self.audit_key_path() {
            Some(p) if p.exists() => read_key(&p)?,
            Some(p) => {
                tracing::info!(key = %p.display(), "made the audit log's signing key");
                create_key(&p, &origin)?
            }
            None => SignerKey::generate(&origin)?,
        };
        // A fleet node's checkpoints name its own log: a key of another name (one the config
        // names for every node, or the repository's from before) would sign notes no verifier
        // of this node's log takes.
        if self.node().is_some() && key.name() != origin {
            return Err(Error::invalid_argument(format!(
                "the audit key{} is named '{}', but this node's log is '{origin}': each node of a fleet signs with a key of its own (remove `audit.key` from the config, or give this node a key of that name)",
                self.audit_key_path().map_or(String::new(), |p| format!(" at {}", p.display())),
                key.name()
            )));
        }
        Ok(self.audit_key.get_or_init(|| key))
    }

    /// The public key checkpoints verify with, as `trove audit pubkey` prints it.
    pub fn audit_verifier(&self) -> Result<VerifierKey> {
        Ok(self.signer()?.verifier())
    }

    /// The log's name: the signing key's.
    pub fn audit_origin(&self) -> Result<String> {
        Ok(self.signer()?.name().to_string())
    }

    /// Writes a checkpoint of the log as it is now (or returns the one of this size), signed
    /// and, with a witness configured, cosigned.
    ///
    /// The signer remembers, beside its key, the last checkpoint it signed (`fs/signed.rs`), and
    /// signs only a log that extends it: the new root is grown from the remembered frontier by
    /// the records after it (each re-encoded from its columns and compared with its stored
    /// encoding and leaf), never taken from the manifest's copy of the tree, and the stored
    /// tree must still give the remembered root. So someone who can write the manifest but not
    /// the key's directory cannot have a rewrite of signed records signed again, even after
    /// deleting the checkpoints and the tree: the signer refuses with `corrupt`. The cost is
    /// the records since the last checkpoint and a few dozen tree lookups, whatever the log's
    /// size (ARCHITECTURE.md, "Audit log"). A key with no state yet (made before the state was
    /// kept) checks the whole log once against the checkpoints it signed, and remembers from
    /// then on.
    pub fn checkpoint(&self) -> Result<Checkpointed> {
        // A checkpoint is a write: refused at once on a read-only handle, before a replica
        // that cannot catch up compares the signer's state with a log it has not all seen.
        if self.read_only().is_some() {
            return self.manifest.write(|_| Err(Error::internal("a read-only manifest ran a write")));
        }
        let key = self.signer()?;
        // One signer at a time, across processes, from reading the state to writing it (and,
        // in a fleet, to publishing it: tiles are written in the order checkpoints are).
        let _lock = self.audit_key_path().map(|p| lock_key(&p)).transpose()?;
        let c = self.sign_checkpoint(key)?;
        // The checkpoint is stored whether or not its tiles get published: the next one
        // publishes what this one could not.
        self.publish_tiles(&c).map_err(|e| {
            e.context(format!(
                "checkpoint {} of {} is stored, but its tiles were not published",
                c.size,
                self.log_name()
            ))
        })?;
        Ok(c)
    }

    /// [`Repo::checkpoint`] once the signer's lock is held.
    fn sign_checkpoint(&self, key: &SignerKey) -> Result<Checkpointed> {
        // A replica behind the log would take records another process (sharing this key, as
        // in a directory of the log layout) signed for removed ones.
        self.manifest.catch_up()?;
        let remembered = self.signed_state()?;
        if let Some(r) = remembered.as_ref().filter(|r| r.origin != key.name()) {
            return Err(Error::corrupt(format!(
                "the audit signer's state beside the key of {} is of log '{}', not '{}': the key file was replaced; move the state aside only once `trove audit verify --pubkey` passes",
                self.log_name(),
                r.origin,
                key.name()
            )));
        }
        let stale_tree = self.manifest.read(|| {
            let conn = self.manifest.conn();
            Ok::<_, Error>(manifest::audit::tree_size(conn)? != manifest::audit::size(conn)?)
        })?;
        if stale_tree {
            // A tree that lost its newest nodes gets them back from the records; the checks
            // below do not rely on it.
            self.manifest.write(|tx| manifest::audit::catch_up_tree(tx).map(|_| ()))?;
        }
        let (size, root, frontier, existing) = self.manifest.read(|| self.next_root(key, remembered.as_ref()))?;
        let (verifier, host) = (key.verifier().to_string(), self.host_id()?);
        if let Some(c) = existing {
            // Registered even when nothing is signed now: a key that signed before keys were
            // registered must be known to the other hosts verifying its checkpoints.
            let known = self.manifest.read(|| manifest::audit::keys(self.manifest.conn()))?;
            if !known.iter().any(|(k, ..)| *k == verifier) {
                self.manifest.write(|tx| manifest::audit::register_key(tx, &verifier, host.as_deref(), now_ns()))?;
            }
            if remembered.is_none() {
                // No state yet: the newest checkpoint (this key's from before the state was
                // kept, or in a bucket another host's), found to hold over the whole log, is
                // what this key extends from now on.
                self.remember(Signed { origin: key.name().to_string(), size, root, time_ns: c.time_ns, frontier })?;
            }
            return Ok(c);
        }
        let time_ns = now_ns();
        let text = Checkpoint { origin: key.name().to_string(), size, root, time_ns: Some(time_ns) }.text();
        let note = key.sign(&text)?;
        let note = self.cosign(note);
        let c = Checkpointed { size, time_ns, root, note };
        // The key is registered with its checkpoint, so that every host can verify it. In a
        // bucket another host may have stored its checkpoint of the same size first: that one
        // (of the same root) is the one kept, and returned.
        let stored = self.manifest.write(|tx| {
            manifest::audit::register_key(tx, &verifier, host.as_deref(), time_ns)?;
            manifest::audit::insert_checkpoint(tx, &c)?;
            let kept = manifest::audit::checkpoints_after(tx, size.saturating_sub(1))?;
            Ok(kept.into_iter().find(|k| k.size == size))
        })?;
        // Remembered once stored: a crash between the two leaves the state behind, which only
        // means the next checkpoint checks a few more records.
        self.remember(Signed { origin: key.name().to_string(), size, root, time_ns, frontier })?;
        Ok(stored.unwrap_or(c))
    }

    /// The size and root of the next checkpoint, the frontier it is grown to, and the stored
    /// checkpoint to return instead when the state already signs the whole log; `corrupt` when
    /// the log does not extend what this key signed (see [`Repo::checkpoint`]).
    fn next_root(
        &self,
        key: &SignerKey,
        remembered: Option<&Signed>,
    ) -> Result<(u64, merkle::Hash, Frontier, Option<Checkpointed>)> {
        let conn = self.manifest.conn();
        let size = manifest::audit::size(conn)?;
        let latest = manifest::audit::latest_checkpoint(conn)?;
        let refuse = |what: String| {
            Error::corrupt(format!(
                "{what} in the audit log of {}; no checkpoint was signed: run `trove audit verify`",
                self.log_name()
            ))
        };
        let (start, frontier, signed_after) = match remembered {
            Some(r) => {
                let when = crate::base::time::iso_time(r.time_ns);
                if r.size > size {
                    return Err(refuse(format!(
                        "this key signed {} records at {when}, but only {size} remain: records {} to {} were removed",
                        r.size,
                        size + 1,
                        r.size
                    )));
                }
                // The manifest's tree must still give the root signed: a rewrite whose tree was
                // recomputed (or rebuilt from the records) shows here, in a few lookups.
                let stored = merkle::root(&StoredNodes(conn), r.size).map_err(|e| {
                    refuse(format!("records 1 to {} cannot be hashed from the stored tree ({})", r.size, e.message()))
                })?;
                if stored != r.root {
                    return Err(refuse(format!(
                        "records 1 to {} no longer hash to the root this key signed at {when}: one of them was rewritten",
                        r.size
                    )));
                }
                if r.size == size {
                    if let Some(c) = latest.clone().filter(|c| c.size == size && c.root == r.root) {
                        return Ok((size, r.root, r.frontier.clone(), Some(c)));
                    }
                }
                (r.size, r.frontier.clone(), true)
            }
            // No state yet: the whole log, against every checkpoint this key signed before.
            None => (0, Frontier::new(), false),
        };
        let stored = manifest::audit::checkpoints_after(conn, start)?;
        // In a bucket, every host's checkpoints, each by the key it registered.
        let keys = self.trusted_keys(Some(key.verifier()))?;
        let (signed, mut problems) = signed_checkpoints(&keys, &stored);
        let mut check = Checker::new(frontier, signed, stored.len() as u64);
        check.report.problems.append(&mut problems);
        manifest::audit::each_checked(conn, start as i64 + 1, |full, stored, leaf| {
            let encoded = full.record.encode(full.seq);
            check.record(full.seq, &encoded, stored.as_deref(), leaf.as_deref(), full.record.time_ns);
            Ok(())
        })?;
        let frontier = check.frontier().clone();
        let report = check.finish();
        if let Some(p) = report.problems.first() {
            let from = report.first_bad_seq.map_or(String::new(), |s| format!(" from record {s}"));
            return Err(refuse(format!("records {} to {size} do not verify{from} ({p})", start + 1)));
        }
        if frontier.size() != size {
            return Err(refuse(format!("{} records were read where the log has {size}", frontier.size())));
        }
        let root = frontier.root();
        // The stored tree serves proofs against this root: it must agree with the records.
        let stored_root = merkle::root(&StoredNodes(conn), size).map_err(|e| {
            refuse(format!("records 1 to {size} cannot be hashed from the stored tree ({})", e.message()))
        })?;
        if stored_root != root {
            return Err(refuse(format!(
                "the stored tree over records {} to {size} does not hash to their records",
                start + 1
            )));
        }
        if !signed_after {
            if let Some(c) = latest.filter(|c| c.size == size && c.root == root) {
                // A key from before the state: what it signed is now remembered.
                return Ok((size, root, frontier, Some(c)));
            }
        }
        Ok((size, root, frontier, None))
    }

    /// What this repository's key signed last: from the state beside the key file, or, in
    /// memory, from the handle.
    pub(crate) fn signed_state(&self) -> Result<Option<Signed>> {
        match self.audit_key_path() {
            Some(p) => read_signed(&state_path(&p)),
            None => Ok(self.audit_signed.borrow().clone()),
        }
    }

    fn remember(&self, signed: Signed) -> Result<()> {
        match self.audit_key_path() {
            Some(p) => write_signed(&state_path(&p), &signed),
            None => {
                *self.audit_signed.borrow_mut() = Some(signed);
                Ok(())
            }
        }
    }

    /// The repository as messages name it.
    fn log_name(&self) -> String {
        match self.root() {
            Some(r) => r.display().to_string(),
            None => format!("repository {} (in memory)", self.config.id),
        }
    }

    /// A checkpoint if `checkpoint_every` records came since the last one; a failure is logged,
    /// never the failure of what called it (its records are committed; the next call tries again).
    pub(crate) fn checkpoint_if_due(&self) {
        let due = || -> Result<bool> {
            let conn = self.manifest.conn();
            let last = manifest::audit::latest_checkpoint(conn)?.map_or(0, |c| c.size);
            Ok(manifest::audit::size(conn)?.saturating_sub(last) >= self.config.audit.checkpoint_every.max(1))
        };
        match due() {
            Ok(true) => {
                if let Err(e) = self.checkpoint() {
                    tracing::warn!(error = %e, "a due audit checkpoint could not be written; tried again later");
                }
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot tell whether an audit checkpoint is due"),
        }
    }

    /// The newest checkpoint, if one was written.
    pub fn latest_checkpoint(&self) -> Result<Option<Checkpointed>> {
        manifest::audit::latest_checkpoint(self.manifest.conn())
    }

    /// Every checkpoint, smallest first.
    pub fn checkpoints(&self) -> Result<Vec<Checkpointed>> {
        manifest::audit::checkpoints(self.manifest.conn())
    }

    /// `note` with the witness's signature added, when a witness is configured and answers with
    /// the note it was given plus signatures; otherwise `note` as it was (the failure logged).
    fn cosign(&self, note: String) -> String {
        let Some(argv) = self.config.audit.witness.as_ref().filter(|a| !a.is_empty()) else { return note };
        // The note's text and blank line, and our signature line: a cosigned note keeps both.
        let split = note.rfind("\n\n").map_or(0, |i| i + 2);
        let (head, ours) = note.split_at(split);
        match run_witness(argv, &note) {
            Ok(c) if c.starts_with(head) && c[head.len()..].lines().any(|l| l == ours.trim_end()) => c,
            Ok(_) => {
                tracing::warn!(witness = %argv[0], "the witness answered with another note; the checkpoint is kept without its signature");
                note
            }
            Err(e) => {
                tracing::warn!(witness = %argv[0], error = %e, "the witness did not cosign; the checkpoint is kept without its signature");
                note
            }
        }
    }
}

/// Runs the witness with `note` on its standard input; its standard output (at most 64 KiB).
fn run_witness(argv: &[String], note: &str) -> Result<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot run the witness '{}'", argv[0]), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(note.as_bytes())
            .map_err(|e| Error::with_source(ErrorKind::Io, "cannot write to the witness", e))?;
    }
    let mut out = String::new();
    if let Some(stdout) = child.stdout.take() {
        stdout
            .take(64 << 10)
            .read_to_string(&mut out)
            .map_err(|e| Error::with_source(ErrorKind::Io, "cannot read the witness's answer", e))?;
    }
    let status = child.wait().map_err(|e| Error::with_source(ErrorKind::Io, "the witness did not finish", e))?;
    if !status.success() {
        return Err(Error::new(ErrorKind::Io, format!("the witness '{}' failed ({status})", argv[0])));
    }
    Ok(out)
}
