//! `trove cat`: Print a file of a snapshot.

use std::ffi::OsString;
use std::io::{self};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde_json::{json, Value};
use trove::{Error, ErrorKind, Repo};

use crate::cli::format;
use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove cat`.
#[derive(clap::Args, Debug)]
pub struct Args {
    pub snapshot: String,
    pub path: OsString,
    #[arg(long)]
    pub workspace: Option<String>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    let Args { snapshot, path, workspace } = args;
    let repo = Repo::open(repo_path)?;
    let snap = repo.resolve_snapshot(&snapshot, workspace.as_deref())?;
    let path = trove::path::normalize_nonempty(path.as_bytes())?;
    let entry = repo.lookup(&snap, &path)?;
    if entry.kind == trove::EntryKind::Dir {
        return Err(Error::new(
            ErrorKind::IsDirectory,
            format!(
                "'{}' is a directory in snapshot {}: list it with `trove ls {} {}`",
                trove::path::display(&path),
                trove::short_id(&snap.id),
                trove::short_id(&snap.id),
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
                    m.insert("contentBase64".into(), json!(base64::engine::general_purpose::STANDARD.encode(&bytes)))
                }
            };
        }
        print_json(out, &v)?;
    } else {
        let mut reader = repo.open_content(&entry)?;
        io::copy(&mut reader, out).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Failure::BrokenPipe,
            _ => Failure::Trove(trove::from_io(e)),
        })?;
    }
    Ok(0)
}
