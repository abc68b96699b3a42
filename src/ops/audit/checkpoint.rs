//! Checkpoints of the audit log: the signing key (created by `trove init` outside the
//! manifest, read once per handle), a checkpoint written as a C2SP signed note of the log's
//! size and Merkle root, optionally cosigned by a witness command, and the rule for when one is
//! due (every N records; the server also every T seconds and at each session end).

use std::io::Write;
use std::path::PathBuf;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::time::now_ns;
use crate::fs::keyfile::{create_key, read_key};
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::model::audit::Checkpointed;
use crate::repo::Repo;
use crate::tlog::merkle;
use crate::tlog::note::{Checkpoint, SignerKey, VerifierKey};

/// The key file's name in the repository when the config names none.
pub const KEY_FILE: &str = "audit.key";

impl Repo {
    /// Where the audit signing key is (none for an in-memory repository).
    pub fn audit_key_path(&self) -> Option<PathBuf> {
        let root = self.root()?;
        Some(match &self.config.audit.key {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => root.join(p),
            None => root.join(KEY_FILE),
        })
    }

    /// The signing key: read from its file, made there (a repository from before keys) or, in
    /// memory, made once.
    pub(crate) fn signer(&self) -> Result<&SignerKey> {
        if let Some(k) = self.audit_key.get() {
            return Ok(k);
        }
        let origin = format!("trove/{}", self.config.id);
        let key = match self.audit_key_path() {
            Some(p) if p.exists() => read_key(&p)?,
            Some(p) => {
                tracing::info!(key = %p.display(), "made the audit log's signing key");
                create_key(&p, &origin)?
            }
            None => SignerKey::generate(&origin)?,
        };
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
    pub fn checkpoint(&self) -> Result<Checkpointed> {
        let key = self.signer()?;
        let (size, root, existing) = self.manifest.read(|| {
            let conn = self.manifest.conn();
            let size = manifest::audit::tree_size(conn)?;
            let latest = manifest::audit::latest_checkpoint(conn)?;
            let root = merkle::root(&StoredNodes(conn), size)?;
            Ok::<_, Error>((size, root, latest.filter(|c| c.size == size)))
        })?;
        if let Some(c) = existing {
            return Ok(c);
        }
        let text = Checkpoint { origin: key.name().to_string(), size, root }.text();
        let note = key.sign(&text)?;
        let note = self.cosign(note);
        let c = Checkpointed { size, time_ns: now_ns(), root, note };
        self.manifest.write(|tx| manifest::audit::insert_checkpoint(tx, &c))?;
        Ok(c)
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
