//! `trove audit`: query the audit log (filters, formats, a cursor, following it live, proofs),
//! a path's history, checkpoints, this host's public key and those the log registers, and
//! verification of the log or of an exported bundle.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use trove::tlog::note::VerifierKey;
use trove::{AuditEntry, AuditQuery, Error, ErrorKind, Order, Repo, SessionId, VerifyReport};

use crate::cli::commands::export::to_file;
use crate::cli::format::{self, time_arg};
use crate::cli::output::{print_json, Failure, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Records, oldest first: the newest --limit, or those after --after SEQ
    Log(Box<LogArgs>),
    /// Every recorded change to a path of a workspace, newest first, renames followed
    History {
        /// The workspace
        #[arg(long)]
        workspace: String,
        /// The path
        path: String,
        /// At most N records
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Check the log: every record re-encoded, the Merkle tree recomputed, every checkpoint's
    /// signature and root; exit 3 if anything was rewritten. Records no signed checkpoint
    /// covers are named (`unsigned: FIRST-LAST`), never counted as verified. With --node NAME
    /// and --pubkey in a fleet's bucket: that node's log as published there (C2SP tiles),
    /// read with nothing but the bucket (no passphrase, no cache)
    Verify {
        /// A public key checkpoints verify with (`trove audit pubkey` prints a host's), as text
        /// or a file holding it; repeat it for a bucket whose hosts sign with keys of their own
        /// (`trove audit keys`) [default: this host's key, and in a bucket every key the log
        /// registers]
        #[arg(long, value_name = "KEY")]
        pubkey: Vec<String>,
        /// Verify this exported bundle instead of the repository (no repository needed)
        #[arg(long, value_name = "FILE", requires = "pubkey")]
        bundle: Option<PathBuf>,
        /// Exit 3 also when any record is not covered by a signed checkpoint (none written
        /// yet, or records after the last one)
        #[arg(long)]
        require_checkpoint: bool,
    },
    /// Write records, the checkpoints that sign them and proofs as one bundle file
    Export {
        /// The first record [default: 1]
        #[arg(long, value_name = "SEQ", default_value_t = 1)]
        from: u64,
        /// The bundle file
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write a checkpoint of the log now and print it
    Checkpoint,
    /// Every checkpoint, smallest first
    Checkpoints,
    /// This host's public key, which its checkpoints verify with (a C2SP verifier key)
    Pubkey,
    /// Every public key the log registers as signing its checkpoints, with its host
    Keys,
    /// The proof that record SEQ is in the log (of the latest checkpoint's size, or --size)
    Proof {
        seq: i64,
        #[arg(long)]
        size: Option<u64>,
    },
    /// The proof that the log of TO records extends the log of FROM records
    Consistency { from: u64, to: u64 },
}

#[derive(ClapArgs, Debug)]
pub struct LogArgs {
    /// Only records at or after T: RFC 3339 or an age (7d, 2h)
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only records before T: RFC 3339 or an age
    #[arg(long, value_name = "T")]
    until: Option<String>,
    /// In a fleet's bucket: only this node's log (every node's by default, merged by time; a
    /// seq cursor, --follow and --proof need one node's)
    #[arg(long, value_name = "NODE")]
    of: Option<trove::NodeName>,
    /// Only this actor's (`tok_…`, `cli:<user>`, ...)
    #[arg(long)]
    actor: Option<String>,
    /// Only this session's
    #[arg(long, value_name = "ID")]
    session: Option<SessionId>,
    /// Only this workspace's
    #[arg(long)]
    workspace: Option<String>,
    /// Only this operation's (write_file, delete_file, trash_purge, session_end, ...)
    #[arg(long)]
    operation: Option<String>,
    /// Only this outcome's (ok, or an error kind: stale_file, permission_denied, ...)
    #[arg(long)]
    outcome: Option<String>,
    /// Only records of exactly this path
    #[arg(long, conflicts_with = "prefix")]
    path: Option<String>,
    /// Only records of this path or below it
    #[arg(long)]
    prefix: Option<String>,
    /// Only records after this seq, oldest first (the cursor of incremental reading)
    #[arg(long, value_name = "SEQ")]
    after: Option<i64>,
    /// At most N records
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// How to print them
    #[arg(long, value_enum, default_value = "table")]
    format: LogFormat,
    /// Keep printing new records as they are appended
    #[arg(long, short)]
    follow: bool,
    /// Add each record's inclusion proof against the latest checkpoint (written now if needed)
    #[arg(long)]
    proof: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Table,
    Json,
    Jsonl,
    Csv,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, cmd: Command) -> Result<u8, Failure> {
    if let Command::Verify { pubkey, bundle: Some(file), require_checkpoint } = &cmd {
        let keys = pubkey.iter().map(|k| read_pubkey(k)).collect::<Result<Vec<_>, _>>()?;
        let f = std::fs::File::open(file).map_err(|e| Error::io("open the bundle", file, e))?;
        let report = trove::verify_bundle(BufReader::new(f), &keys)?;
        return print_report(out, &report, json, *require_checkpoint);
    }
    if let (Command::Verify { pubkey, bundle: None, require_checkpoint }, Some(node)) = (&cmd, crate::cli::open::node())
    {
        if !pubkey.is_empty() {
            let keys = pubkey.iter().map(|k| read_pubkey(k)).collect::<Result<Vec<_>, _>>()?;
            let report = trove::verify_published(repo_path, &node, &keys)?;
            return print_report(out, &report, json, *require_checkpoint);
        }
    }
    let repo = crate::cli::open::open_repo(repo_path)?;
    match cmd {
        Command::Log(args) => log(out, &repo, *args, json).map(|()| 0),
        Command::History { workspace, path, limit } => {
            let rel = trove::path::from_text(&path)?;
            let entries = repo.path_history(&workspace, &rel, limit)?;
            if json {
                print_json(out, &entries)?;
            } else {
                for h in &entries {
                    let change = h.change.as_deref().unwrap_or(&h.entry.operation);
                    let dest = h.entry.dest_path.as_deref().map(|d| format!(" -> {d}")).unwrap_or_default();
                    let sha = h.entry.after_sha256.or(h.entry.before_sha256).map(|s| s.to_hex()[..12].to_string());
                    writeln!(
                        out,
                        "{:>7}  {}  {:<16} {:<8} {:<12} {}{dest}  {}",
                        h.entry.seq,
                        h.entry.time,
                        h.entry.actor,
                        change,
                        h.entry.outcome,
                        h.entry.path.as_deref().unwrap_or(""),
                        sha.unwrap_or_default()
                    )?;
                }
            }
            Ok(0)
        }
        Command::Verify { pubkey, require_checkpoint, .. } => {
            let keys = pubkey.iter().map(|k| read_pubkey(k)).collect::<Result<Vec<_>, _>>()?;
            let report = repo.verify_audit(&keys)?;
            print_report(out, &report, json, require_checkpoint)
        }
        Command::Export { from, output } => {
            let mut summary = None;
            to_file(&output, |w| {
                let s = repo.export_audit_bundle(from, w)?;
                let to = s.to;
                summary = Some(s);
                Ok(to)
            })?;
            if let Some(s) = summary {
                if json {
                    print_json(out, &s)?;
                } else {
                    writeln!(
                        out,
                        "wrote records {} to {} and {} checkpoints to {}",
                        s.from,
                        s.to,
                        s.checkpoints,
                        output.display()
                    )?;
                }
            }
            Ok(0)
        }
        Command::Checkpoint => {
            let c = repo.checkpoint()?.record();
            if json {
                print_json(out, &c)?;
            } else {
                write!(out, "{}", c.note)?;
            }
            Ok(0)
        }
        Command::Checkpoints => {
            let all: Vec<_> = repo.checkpoints()?.iter().map(|c| c.record()).collect();
            if json {
                print_json(out, &all)?;
            } else {
                for c in &all {
                    writeln!(out, "{:>9}  {}  {}", c.size, c.time, c.root)?;
                }
            }
            Ok(0)
        }
        Command::Pubkey => {
            writeln!(out, "{}", repo.audit_verifier()?)?;
            Ok(0)
        }
        Command::Keys => {
            let keys = repo.registered_audit_keys()?;
            if json {
                print_json(out, &keys)?;
            } else {
                for k in &keys {
                    let mine = if k.this_host { "  (this host)" } else { "" };
                    writeln!(out, "{}  {:<24}  {}{mine}", k.added, k.host.as_deref().unwrap_or("-"), k.key)?;
                }
            }
            Ok(0)
        }
        Command::Proof { seq, size } => {
            print_json(out, &repo.inclusion_proof(seq, size)?)?;
            Ok(0)
        }
        Command::Consistency { from, to } => {
            print_json(out, &repo.consistency_proof(from, to)?)?;
            Ok(0)
        }
    }
}

/// A verifier key given as text, or the path of a file holding it.
fn read_pubkey(given: &str) -> Result<VerifierKey, Error> {
    let text = if Path::new(given).is_file() {
        std::fs::read_to_string(given).map_err(|e| Error::io("read the public key", Path::new(given), e))?
    } else {
        given.to_string()
    };
    VerifierKey::parse(&text)
}

/// The verification report; exit 3 (corruption) when something was found rewritten, and with
/// `require_checkpoint` when a record is not covered by a signed checkpoint. Uncovered records
/// are always named, and never counted as verified.
fn print_report(out: &mut Out, report: &VerifyReport, json: bool, require_checkpoint: bool) -> Result<u8, Failure> {
    if json {
        print_json(out, report)?;
    } else if report.ok() {
        match &report.last_checkpoint {
            Some(c) if report.verified_to >= report.from => {
                let when = c.time.as_deref().map(|t| format!(", signed {t}")).unwrap_or_default();
                writeln!(
                    out,
                    "verified: records {} to {} are signed by checkpoint {}{when} ({} checkpoints checked)",
                    report.from, report.verified_to, c.size, report.checkpoints
                )?;
            }
            _ => writeln!(out, "verified: none: no signed checkpoint covers any of the {} records", report.records)?,
        }
        if let Some(u) = report.unsigned {
            let after =
                if report.verified_to >= report.from { "after the last checkpoint" } else { "with no checkpoint" };
            writeln!(
                out,
                "unsigned: {u} ({} records {after}): intact as stored, but no signature covers them yet; `trove audit checkpoint` signs them",
                report.unsigned_tail
            )?;
        }
    } else {
        let proven = if report.verified_to >= report.from {
            format!("records {} to {} verify", report.from, report.verified_to)
        } else {
            "no record verifies".to_string()
        };
        match report.first_bad_seq {
            Some(seq) => writeln!(out, "TAMPERED: the first divergent record is {seq}; {proven}")?,
            None => writeln!(out, "TAMPERED: {proven}")?,
        }
        for p in &report.problems {
            writeln!(out, "  {p}")?;
        }
        if let Some(u) = report.unsigned {
            writeln!(out, "unsigned: {u}: no signed checkpoint covers them")?;
        }
    }
    out.flush()?;
    if !report.ok() {
        return Err(Error::new(ErrorKind::Corrupt, "the audit log does not verify: see above").into());
    }
    match report.unsigned {
        Some(u) if require_checkpoint => Err(Error::new(
            ErrorKind::Corrupt,
            format!("records {u} are not covered by a signed checkpoint (--require-checkpoint): write one with `trove audit checkpoint` and verify again"),
        )
        .into()),
        _ => Ok(0),
    }
}

/// Says so on stderr when an operation filter names an operation no record of the log has
/// (most often misspelt): an empty answer alone would look like "it never happened".
fn unknown_operation(repo: &Repo, operation: Option<&str>) -> Result<(), Failure> {
    let Some(op) = operation else { return Ok(()) };
    let known = repo.audit_operations()?;
    if !known.iter().any(|k| k == op) {
        tracing::warn!("no record of this log has operation '{op}'; the operations recorded are: {}", known.join(", "));
    }
    Ok(())
}

fn log(out: &mut Out, repo: &Repo, args: LogArgs, json: bool) -> Result<(), Failure> {
    let now = trove::now_ns();
    let format = if json && args.format == LogFormat::Table { LogFormat::Json } else { args.format };
    let mut q = AuditQuery {
        actor: args.actor,
        session: args.session,
        workspace: args.workspace,
        operation: args.operation,
        outcome: args.outcome,
        path: args.path.as_deref().map(trove::path::from_text).transpose()?,
        prefix: args.prefix.as_deref().map(trove::path::from_text).transpose()?,
        since_ns: args.since.as_deref().map(|t| time_arg("--since", t, now)).transpose()?,
        until_ns: args.until.as_deref().map(|t| time_arg("--until", t, now)).transpose()?,
        order: args.after.map_or(Order::Newest, Order::After),
        limit: args.limit.clamp(1, 100_000),
    };
    if format == LogFormat::Csv {
        writeln!(out, "seq,time,actor,operation,workspace,session,path,destPath,beforeSha256,afterSha256,outcome")?;
    }
    // In a fleet, every node's log (merged), or the one --of names; elsewhere the one log.
    let (others, of) = match (&args.of, repo.node()) {
        (Some(node), Some(mine)) if node.as_str() != mine => (Vec::new(), Some(repo.foreign(node)?)),
        (Some(_), Some(_)) => (Vec::new(), None),
        (Some(node), None) => {
            return Err(Error::invalid_argument(format!("--of {node}: this repository is not a fleet's")).into())
        }
        (None, Some(_)) if args.follow || args.proof || args.after.is_some() => {
            return Err(Error::invalid_argument(
                "--after, --follow and --proof read one node's log (a seq is a position in one): in a fleet, name it with --of NODE",
            )
            .into())
        }
        (None, Some(_)) => (repo.fleet()?, None),
        (None, None) => (Vec::new(), None),
    };
    let views: Vec<(Option<&str>, &Repo)> = match &of {
        Some(handle) => vec![(handle.node(), handle)],
        None => crate::cli::output::with_fleet(repo, &others),
    };
    let log_repo = views.first().map_or(repo, |(_, r)| *r);
    let mut first = true;
    loop {
        let mut entries = trove::fleet_audit(&views, &q)?;
        if first && entries.is_empty() {
            unknown_operation(log_repo, q.operation.as_deref())?;
        }
        if args.proof && !entries.is_empty() {
            // Another node's log is proven against the checkpoints it signed; only this node's
            // own signs a new one for records none covers yet.
            add_proofs(log_repo, &mut entries, log_repo.node() == repo.node())?;
        }
        if format == LogFormat::Json && !args.follow {
            return print_json(out, &entries);
        }
        for e in &entries {
            print_entry(out, e, format)?;
        }
        out.flush()?;
        if !args.follow {
            return Ok(());
        }
        if let Some(last) = entries.last() {
            q.order = Order::After(last.seq);
        } else if first {
            q.order = Order::After(log_repo.audit_size()? as i64);
        }
        first = false;
        std::thread::sleep(std::time::Duration::from_millis(250));
        // What other processes, hosts or (in a fleet) the node wrote since: a request a second
        // at most.
        log_repo.refresh(std::time::Duration::from_secs(1))?;
    }
}

/// Each entry's inclusion proof against the latest checkpoint, written first if it does not
/// cover them all and `may_sign` (this node's own log); otherwise the entries no checkpoint
/// covers go without one.
fn add_proofs(repo: &Repo, entries: &mut [AuditEntry], may_sign: bool) -> Result<(), Failure> {
    let newest = entries.iter().map(|e| e.seq).max().unwrap_or(0) as u64;
    let size = match repo.latest_checkpoint()? {
        Some(c) if c.size >= newest => c.size,
        _ if may_sign => repo.checkpoint()?.size,
        Some(c) => c.size,
        None => 0,
    };
    for e in entries.iter_mut().filter(|e| e.seq as u64 <= size) {
        e.proof = Some(repo.inclusion_proof(e.seq, Some(size))?);
    }
    Ok(())
}

fn print_entry(out: &mut Out, e: &AuditEntry, format: LogFormat) -> Result<(), Failure> {
    match format {
        LogFormat::Jsonl | LogFormat::Json => {
            serde_json::to_writer(&mut *out, e).map_err(|err| Error::internal(err.to_string()))?;
            writeln!(out)?;
        }
        LogFormat::Csv => {
            let sha = |s: Option<trove::object::Sha256>| s.map(|s| s.to_hex()).unwrap_or_default();
            let fields = [
                e.seq.to_string(),
                e.time.clone(),
                e.actor.clone(),
                e.operation.clone(),
                e.workspace.clone().unwrap_or_default(),
                e.session.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                e.path.clone().unwrap_or_default(),
                e.dest_path.clone().unwrap_or_default(),
                sha(e.before_sha256),
                sha(e.after_sha256),
                e.outcome.clone(),
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            writeln!(out, "{}", line.join(","))?;
        }
        LogFormat::Table => {
            let dest = e.dest_path.as_deref().map(|d| format!(" -> {d}")).unwrap_or_default();
            let time = trove::parse_rfc3339(&e.time).map(format::time).unwrap_or_else(|| e.time.clone());
            // In a fleet a seq is one node's: shown as `node/seq`.
            let seq = e.node.as_ref().map_or_else(|| e.seq.to_string(), |n| format!("{n}/{}", e.seq));
            writeln!(
                out,
                "{:>6}  {}  {:<14} {:<16} {:<12} {}{dest}",
                seq,
                time,
                e.actor,
                e.operation,
                e.outcome,
                e.path.as_deref().unwrap_or("")
            )?;
        }
    }
    Ok(())
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}
