//! What every command shares: the buffered standard output, JSON printing, the failure a
//! command ends with, the actor recorded for CLI changes, and the default repository.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use trove::{Error, ErrorKind};

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

/// The parameters the library's advice names as the HTTP API and the tools spell them, with
/// the command line's flags for them.
const FLAGS: &[(&str, &str)] = &[("onConflict", "--on-conflict"), ("expectedSha256", "--expected-sha256")];

/// `message` in the command line's terms: each parameter it names, as its flag, so advice
/// can be followed as given (`restore with --on-conflict rename`, not `onConflict rename`).
pub fn in_flags(message: &str) -> String {
    FLAGS.iter().fold(message.to_string(), |m, (api, flag)| m.replace(api, flag))
}

pub type Out = BufWriter<io::StdoutLock<'static>>;

pub fn out() -> Out {
    BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

/// Who acts from the command line, as the audit log names them: `cli:` and the OS user (its
/// name from the environment, else its uid).
pub fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("uid{}", rustix::process::getuid().as_raw()));
    format!("cli:{user}")
}

/// `$XDG_DATA_HOME/trove/repo`, else `~/.local/share/trove/repo`.
pub fn default_repo() -> Result<PathBuf, Error> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("trove/repo"));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or_else(|| {
        Error::invalid_argument("no repository given and $HOME is not set: pass --repo PATH or set TROVE_REPO")
    })?;
    Ok(PathBuf::from(home).join(".local/share/trove/repo"))
}

pub fn print_json<T: serde::Serialize + ?Sized>(out: &mut Out, v: &T) -> Result<(), Failure> {
    serde_json::to_writer_pretty(&mut *out, v).map_err(|e| Error::internal(e.to_string()))?;
    writeln!(out)?;
    Ok(())
}

/// `repo` and, in a bucket of a log per node, every other node's handle: each with its node's
/// name (None outside a fleet).
pub(crate) fn with_fleet<'r>(
    repo: &'r trove::Repo,
    others: &'r [trove::NodeView],
) -> Vec<(Option<&'r str>, &'r trove::Repo)> {
    let mut all = vec![(repo.node(), repo)];
    all.extend(others.iter().map(|v| (Some(v.node.as_str()), &v.repo)));
    all
}
