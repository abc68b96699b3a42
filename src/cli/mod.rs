//! The CLI's commands: each turns parsed arguments into library calls and prints the result,
//! as a table for people or one JSON document with `--json`.

mod bar;
mod format;
pub mod service;

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use trove::restore::RestoreOptions;
use trove::snapshot::SnapshotOptions;
use trove::{Error, ErrorKind, Repo, SnapshotInfo};

use crate::{Cli, Command, WorkspaceCommand};

pub enum Failure {
    Trove(Error),
    BrokenPipe,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Trove(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Trove(Error::with_source(ErrorKind::Io, format!("cannot write output: {e}"), e))
        }
    }
}

type Out = BufWriter<io::StdoutLock<'static>>;

fn out() -> Out {
    BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

pub(crate) fn actor() -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

/// `$XDG_DATA_HOME/trove/repo`, else `~/.local/share/trove/repo`.
fn default_repo() -> Result<PathBuf, Error> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("trove/repo"));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or_else(|| {
        Error::invalid_argument("no repository given and $HOME is not set: pass --repo PATH or set TROVE_REPO")
    })?;
    Ok(PathBuf::from(home).join(".local/share/trove/repo"))
}

fn print_json(out: &mut Out, v: &Value) -> Result<(), Failure> {
    serde_json::to_writer_pretty(&mut *out, v).map_err(|e| Error::internal(e.to_string()))?;
    writeln!(out)?;
    Ok(())
}

pub fn run(cli: Cli) -> Result<u8, Failure> {
    let repo_path = match &cli.repo {
        Some(p) => p.clone(),
        None => default_repo()?,
    };
    let json = cli.json;
    let mut out = out();
    let code = match cli.command {
        Command::Init => {
            let repo = Repo::init(&repo_path, &actor())?;
            if json {
                print_json(&mut out, &json!({"repository": repo_path, "id": repo.config().id}))?;
            } else {
                writeln!(out, "created trove repository {} at {}", repo.config().id, repo_path.display())?;
            }
            0
        }
        Command::Snapshot { dir, workspace, exclude, no_default_excludes, reason } => {
            let repo = Repo::open(&repo_path)?;
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let bar = bar::Bar::new();
            let opts = SnapshotOptions {
                workspace,
                reason,
                actor: actor(),
                replace_excludes: no_default_excludes.then(Vec::new),
                extra_excludes: exclude,
                progress: &bar,
                ..SnapshotOptions::default()
            };
            let snap = repo.snapshot(&dir, &opts)?;
            report_snapshot(&mut out, &snap, json)?;
            0
        }
        Command::Snapshots { workspace } => {
            let repo = Repo::open(&repo_path)?;
            let list = repo.snapshots(workspace.as_deref())?;
            if json {
                print_json(&mut out, &serde_json::to_value(&list).map_err(|e| Error::internal(e.to_string()))?)?;
            } else {
                snapshot_table(&mut out, &list)?;
            }
            0
        }
        Command::Ls { snapshot, path, recursive, workspace } => {
            let repo = Repo::open(&repo_path)?;
            let snap = repo.resolve_snapshot(&snapshot, workspace.as_deref())?;
            let path = path.map(|p| p.into_vec()).unwrap_or_default();
            ls(&mut out, &repo, &snap, &path, recursive, json)?;
            0
        }
        Command::Cat { snapshot, path, workspace } => {
            let repo = Repo::open(&repo_path)?;
            let snap = repo.resolve_snapshot(&snapshot, workspace.as_deref())?;
            let path = trove::path::normalize_nonempty(path.as_bytes())?;
            let entry = repo.lookup(&snap, &path)?;
            if entry.kind == trove::EntryKind::Dir {
                return Err(Error::new(
                    ErrorKind::IsDirectory,
                    format!(
                        "'{}' is a directory in snapshot {}: list it with `trove ls {} {}`",
                        trove::path::display(&path),
                        trove::view::short(&snap.id),
                        trove::view::short(&snap.id),
                        trove::path::display(&path)
                    ),
                )
                .into());
            }
            if json {
                let bytes = repo.read_content(&entry)?;
                let mut v = format::entry_json(&path, &entry);
                if let Value::Object(m) = &mut v {
                    m.insert("snapshot".into(), json!(snap.id));
                    match std::str::from_utf8(&bytes) {
                        Ok(s) => m.insert("content".into(), json!(s)),
                        Err(_) => {
                            use base64::Engine;
                            m.insert(
                                "contentBase64".into(),
                                json!(base64::engine::general_purpose::STANDARD.encode(&bytes)),
                            )
                        }
                    };
                }
                print_json(&mut out, &v)?;
            } else {
                let mut reader = repo.open_content(&entry)?;
                io::copy(&mut reader, &mut out).map_err(|e| match e.kind() {
                    io::ErrorKind::BrokenPipe => Failure::BrokenPipe,
                    _ => Failure::Trove(trove::view::from_io(e)),
                })?;
            }
            0
        }
        Command::Restore { snapshot, to, paths, overwrite, workspace } => {
            let repo = Repo::open(&repo_path)?;
            let snap = repo.resolve_snapshot(&snapshot, workspace.as_deref())?;
            let mut norm = Vec::new();
            for p in paths {
                norm.push(trove::path::normalize_nonempty(p.as_bytes())?);
            }
            let bar = bar::Bar::new();
            let opts = RestoreOptions { paths: norm, overwrite, actor: actor(), progress: &bar };
            let report = repo.restore(&snap, &to, &opts)?;
            if json {
                print_json(&mut out, &json!({"snapshot": snap.id, "target": to, "restored": report}))?;
            } else {
                writeln!(
                    out,
                    "restored {} files, {} directories, {} symlinks ({}) from snapshot {} to {}",
                    report.files,
                    report.dirs,
                    report.symlinks,
                    format::size(report.bytes),
                    trove::view::short(&snap.id),
                    to.display()
                )?;
            }
            0
        }
        Command::Export { snapshot, path, output, zstd, workspace } => {
            let repo = Repo::open(&repo_path)?;
            let snap = repo.resolve_snapshot(&snapshot, workspace.as_deref())?;
            let path = path.map(|p| p.into_vec()).unwrap_or_default();
            let zstd = zstd || output.as_ref().and_then(|o| o.extension()).is_some_and(|e| e == "zst" || e == "tzst");
            let level = zstd.then_some(3);
            let bar = bar::Bar::new();
            match &output {
                Some(file) => {
                    let entries = export_to_file(&repo, &snap, &path, file, level, &bar)?;
                    if json {
                        print_json(
                            &mut out,
                            &json!({"snapshot": snap.id, "output": file, "entries": entries, "zstd": zstd}),
                        )?;
                    } else {
                        writeln!(
                            out,
                            "wrote {entries} entries of snapshot {} to {}",
                            trove::view::short(&snap.id),
                            file.display()
                        )?;
                    }
                }
                None => {
                    if io::stdout().is_terminal() {
                        return Err(Error::invalid_argument(
                            "refusing to write a tar archive to a terminal: pass -o FILE or redirect stdout",
                        )
                        .into());
                    }
                    repo.export(&snap, &path, &mut out, level, &bar)?;
                }
            }
            0
        }
        Command::Workspace(cmd) => {
            let repo = Repo::open(&repo_path)?;
            workspace(&mut out, &repo, cmd, json)?;
            0
        }
        Command::Check => {
            let repo = Repo::open(&repo_path)?;
            let report = repo.check()?;
            if json {
                print_json(&mut out, &serde_json::to_value(&report).map_err(|e| Error::internal(e.to_string()))?)?;
            } else {
                for p in &report.problems {
                    writeln!(out, "problem: {p}")?;
                }
                let verdict = if report.problems.is_empty() { "no problems found" } else { "CORRUPTION FOUND" };
                writeln!(
                    out,
                    "checked {} packed and {} loose objects and {} chunked contents ({}): {verdict}",
                    report.objects,
                    report.loose,
                    report.chunked,
                    format::size(report.bytes)
                )?;
            }
            if report.problems.is_empty() {
                0
            } else {
                3
            }
        }
        Command::Serve(opts) => {
            service::serve(&mut out, &repo_path, opts)?;
            0
        }
        Command::Token(cmd) => {
            let repo = Repo::open(&repo_path)?;
            match cmd {
                crate::TokenCommand::Create { label } => service::token_create(&mut out, &repo, &label, json)?,
                crate::TokenCommand::List => service::token_list(&mut out, &repo, json)?,
                crate::TokenCommand::Revoke { id } => service::token_revoke(&mut out, &repo, &id, json)?,
            }
            0
        }
        Command::Session(cmd) => {
            service::session(&mut out, &Repo::open(&repo_path)?, cmd, json)?;
            0
        }
        Command::Tool { name, session, params } => service::tool(&mut out, &repo_path, &name, &session, &params)?,
        Command::Audit(crate::AuditCommand::Log { session, limit }) => {
            let repo = Repo::open(&repo_path)?;
            let records = trove::manifest::audit::tail(repo.manifest().conn(), session.as_deref(), limit)?;
            if json {
                print_json(&mut out, &Value::Array(records.iter().map(|r| r.to_json()).collect()))?;
            } else {
                for full in &records {
                    let r = &full.record;
                    let p = r.path.as_deref().map(trove::path::display).unwrap_or_default();
                    let dest =
                        r.dest_path.as_deref().map(|d| format!(" -> {}", trove::path::display(d))).unwrap_or_default();
                    writeln!(
                        out,
                        "{:>6}  {}  {:<14} {:<16} {:<12} {p}{dest}",
                        full.seq,
                        format::time(r.time_ns),
                        r.actor,
                        r.operation,
                        r.outcome
                    )?;
                }
            }
            0
        }
        Command::Revert { seq } => {
            let result = Repo::open(&repo_path)?.revert(seq, &actor())?;
            if json {
                print_json(&mut out, &result)?;
            } else {
                writeln!(out, "reverted audit record {seq}: {}", result["path"].as_str().unwrap_or(""))?;
            }
            0
        }
        Command::Demo { dir } => {
            demo(&mut out, &repo_path, dir, json)?;
            0
        }
    };
    out.flush()?;
    Ok(code)
}

fn export_to_file(
    repo: &Repo,
    snap: &SnapshotInfo,
    path: &[u8],
    file: &Path,
    level: Option<i32>,
    bar: &bar::Bar,
) -> Result<u64, Failure> {
    // Written beside the destination and renamed, so a failed export leaves no half archive.
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io("create a file in", dir, e))?;
    let entries = {
        let mut w = BufWriter::new(tmp.as_file());
        let n = repo.export(snap, path, &mut w, level, bar)?;
        w.flush().map_err(|e| Error::io("write", file, e))?;
        n
    };
    tmp.as_file().sync_all().map_err(|e| Error::io("sync", file, e))?;
    tmp.persist(file).map_err(|e| Error::io("write", file, e.error))?;
    Ok(entries)
}

fn report_snapshot(out: &mut Out, snap: &SnapshotInfo, json: bool) -> Result<(), Failure> {
    if json {
        return print_json(out, &serde_json::to_value(snap).map_err(|e| Error::internal(e.to_string()))?);
    }
    let c = &snap.counts;
    writeln!(
        out,
        "snapshot {} of workspace '{}': {} files, {} directories, {} symlinks, {} (added {}, changed {}, removed {})",
        trove::view::short(&snap.id),
        snap.workspace,
        c.files,
        c.dirs,
        c.symlinks,
        format::size(c.bytes),
        c.added,
        c.changed,
        c.removed
    )?;
    if c.skipped > 0 {
        writeln!(out, "skipped {} sockets, FIFOs or devices", c.skipped)?;
    }
    for w in &snap.warnings {
        writeln!(out, "warning: {}: {}", w.path, w.message)?;
    }
    Ok(())
}

fn snapshot_table(out: &mut Out, list: &[SnapshotInfo]) -> Result<(), Failure> {
    writeln!(
        out,
        "{:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}  {:>8}",
        "ID", "TIME", "WORKSPACE", "REASON", "FILES", "SIZE", "WARNINGS"
    )?;
    for s in list {
        writeln!(
            out,
            "{:<8}  {:<20}  {:<16}  {:<12}  {:>8}  {:>10}  {:>8}",
            trove::view::short(&s.id),
            format::time(s.created_ns),
            s.workspace,
            s.reason,
            s.counts.files,
            format::size(s.counts.bytes),
            s.warnings.len()
        )?;
    }
    writeln!(out, "{} snapshots", list.len())?;
    Ok(())
}

fn ls(
    out: &mut Out,
    repo: &Repo,
    snap: &SnapshotInfo,
    path: &[u8],
    recursive: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut first = true;
    let mut io_err: Option<io::Error> = None;
    if json {
        out.write_all(b"[")?;
    }
    let mut each = |p: &[u8], e: &trove::Entry| -> trove::Result<()> {
        let r = if json {
            let sep: &[u8] = if first { b"\n  " } else { b",\n  " };
            out.write_all(sep)
                .and_then(|_| serde_json::to_writer(&mut *out, &format::entry_json(p, e)).map_err(io::Error::other))
        } else {
            let mut line = format!("{} {:>10} {} ", format::mode(e), e.size, format::time(e.mtime_ns)).into_bytes();
            line.extend_from_slice(p);
            if e.kind == trove::EntryKind::Dir {
                line.push(b'/');
            }
            if let Some(t) = &e.target {
                line.extend_from_slice(b" -> ");
                line.extend_from_slice(t);
            }
            line.push(b'\n');
            out.write_all(&line)
        };
        first = false;
        r.map_err(|err| {
            let e = Error::new(ErrorKind::Io, format!("cannot write output: {err}"));
            io_err = Some(err);
            e
        })
    };
    let result = repo.list(snap, path, recursive, &mut each);
    if let Some(e) = io_err {
        return Err(e.into());
    }
    result?;
    if json {
        out.write_all(b"\n]\n")?;
    }
    Ok(())
}

fn workspace(out: &mut Out, repo: &Repo, cmd: WorkspaceCommand, json: bool) -> Result<(), Failure> {
    use trove::manifest::workspaces;
    let conn = repo.manifest().conn();
    match cmd {
        WorkspaceCommand::List => {
            let list = workspaces::list(conn)?;
            if json {
                print_json(out, &serde_json::to_value(&list).map_err(|e| Error::internal(e.to_string()))?)?;
            } else {
                for w in list {
                    let ex = trove::walk::Excludes::effective(w.excludes.as_deref(), &w.extra_excludes)?;
                    writeln!(out, "{}: excludes {}", w.name, ex.patterns().join(" "))?;
                }
            }
        }
        WorkspaceCommand::Excludes { name, add, remove, no_defaults, defaults } => {
            let list = repo.set_workspace_excludes(&name, &add, &remove, no_defaults, defaults, &actor())?;
            if json {
                print_json(out, &json!({"workspace": name, "excludes": list}))?;
            } else {
                writeln!(out, "{name}: excludes {}", list.join(" "))?;
            }
        }
    }
    Ok(())
}

fn demo(out: &mut Out, repo_path: &Path, dir: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    // In JSON mode the narration is left out and one document describes the result.
    let say = |out: &mut Out, line: String| -> Result<(), Failure> {
        if !json {
            writeln!(out, "{line}")?;
        }
        Ok(())
    };
    let repo = match Repo::open(repo_path) {
        Ok(r) => r,
        Err(e) if e.kind() == ErrorKind::NotFound && !repo_path.join(trove::repo::CONFIG_FILE).exists() => {
            say(out, format!("creating repository {}", repo_path.display()))?;
            Repo::init(repo_path, &actor())?
        }
        Err(e) => return Err(e.into()),
    };
    let generated = dir.is_none();
    let dir = match dir {
        Some(d) => d,
        None => {
            let d = repo_path.with_file_name("demo-workspace");
            if !d.exists() {
                let bytes = trove::sample::generate(&d, 500, 7)?;
                say(
                    out,
                    format!("generated a sample workspace of 500 files ({}) in {}", format::size(bytes), d.display()),
                )?;
            }
            d
        }
    };
    let opts = SnapshotOptions { actor: actor(), ..SnapshotOptions::default() };
    let first = repo.snapshot(&dir, &opts)?;
    if !json {
        report_snapshot(out, &first, false)?;
    }
    if generated {
        let edited = dir.join("NOTES.md");
        let line = format!("demo edit at {}\n", format::time(trove::repo::now_ns()));
        let mut f =
            File::options().create(true).append(true).open(&edited).map_err(|e| Error::io("open", &edited, e))?;
        f.write_all(line.as_bytes()).map_err(|e| Error::io("write", &edited, e))?;
        say(out, format!("appended a line to {}", edited.display()))?;
    }
    let second = repo.snapshot(&dir, &opts)?;
    if json {
        let v = json!({"repository": repo_path, "workspace": dir, "snapshots": [first, second]});
        return print_json(out, &v);
    }
    report_snapshot(out, &second, false)?;
    writeln!(out)?;
    snapshot_table(out, &repo.snapshots(Some(&second.workspace))?)?;
    writeln!(out, "\ntop level of the latest snapshot:")?;
    ls(out, &repo, &second, b"", false, false)?;
    writeln!(out, "\nnext: trove --repo {} ls latest --recursive | head", repo_path.display())?;
    Ok(())
}
