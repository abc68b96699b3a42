//! `trove cat`: Print a file of a snapshot.

use std::ffi::OsString;
use std::io::{self};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use trove::{Error, ErrorKind};

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
    let repo = crate::cli::open::open_repo(repo_path)?;
    let (there, snap) = repo.snapshot_in_fleet(&snapshot, workspace.as_deref())?;
    let repo = there.as_ref().map_or(&repo, |v| &v.repo);
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
        let (text, text_base64) = match String::from_utf8(bytes) {
            Ok(s) => (Some(s), None),
            Err(e) => {
                use base64::Engine;
                (None, Some(base64::engine::general_purpose::STANDARD.encode(e.as_bytes())))
            }
        };
        // `content` is the file's content here, not its object id.
        let entry = format::EntryRecord { content: None, ..format::EntryRecord::of(&path, &entry) };
        let record = CatRecord { entry, snapshot: &snap.id, text, text_base64 };
        print_json(out, &record)?;
    } else {
        let mut reader = repo.open_content(&entry)?;
        io::copy(&mut reader, out).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Failure::BrokenPipe,
            _ => Failure::Trove(trove::from_io(e)),
        })?;
    }
    Ok(0)
}

/// `trove cat --json`: the entry, the snapshot it is from, and its content (as text when it is
/// UTF-8, else in base64).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CatRecord<'a> {
    #[serde(flatten)]
    entry: format::EntryRecord,
    snapshot: &'a trove::SnapshotId,
    /// The file's text, in place of the entry's `content` (its object id).
    #[serde(rename = "content", skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(rename = "contentBase64", skip_serializing_if = "Option::is_none")]
    text_base64: Option<String>,
}
