//! `trove tool`: Run an agent file tool (read_file, write_file, apply_patch, ...) on a session; prints the tool result `{"ok": ..., "data" | "error": ...}`.

use std::path::Path;

use trove::{Error, Repo, SessionId};

use crate::cli::output::{actor, print_json, Failure, Out};

/// The arguments of `trove tool`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tool's name (a stale-file tool, or `files`, the unified tool taking
    /// `{"params": {"command": ...}}`)
    pub name: String,
    #[arg(long, value_name = "ID")]
    pub session: SessionId,
    /// The parameters as a JSON object; `-` reads them from stdin
    #[arg(default_value = "{}")]
    pub params: String,
}

pub fn run(out: &mut Out, repo_path: &Path, args: Args) -> Result<u8, Failure> {
    tool(out, repo_path, &args.name, &args.session, &args.params)
}

/// `trove tool NAME --session ID PARAMS`: the result envelope on stdout, and the exit code of
/// the error kind when the tool refused.
fn tool(
    out: &mut Out,
    repo_path: &std::path::Path,
    name: &str,
    session: &SessionId,
    params: &str,
) -> Result<u8, Failure> {
    let text = if params == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        s
    } else {
        params.to_string()
    };
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::invalid_argument(format!("tool parameters are not JSON: {e}")))?;
    let repo = crate::cli::open::open_repo(repo_path)?;
    let s = repo.session(session)?;
    // Recorded to the second, as `trove mcp` and a server's reaper do: an agent's burst of
    // calls would otherwise write the same row, and log it to a bucket, once per call.
    let since = trove::now_ns().saturating_sub(s.last_activity_ns);
    if u128::try_from(since).unwrap_or(0) >= ACTIVITY_EVERY.as_nanos() {
        note_activity(&repo, &s.id);
    }
    if name == trove::tools::files::NAME {
        let call: trove::tools::files::FilesCall =
            serde_json::from_value(v).map_err(|e| Error::invalid_argument(format!("bad parameters for files: {e}")))?;
        let actor = actor();
        let root = trove::tools::fileapi::DEFAULT_SANDBOX_ROOT;
        let sandbox = trove::tools::fileapi::Sandbox::new(&repo, &s, &actor, root);
        let result = trove::tools::files::files(&sandbox, &call);
        let code = result.as_ref().err().map_or(0, |e| crate::exit_code(e.kind()));
        print_json(out, &trove::tools::envelope(result))?;
        return Ok(code);
    }
    let call = trove::tools::ToolCall::parse(name, v)?;
    let result = trove::tools::run(&repo, &s, call, &actor());
    let code = result.as_ref().err().map_or(0, |e| crate::exit_code(e.kind()));
    print_json(out, &trove::tools::envelope(result))?;
    Ok(code)
}

/// How often a stream of tool calls is recorded as the session's activity.
pub(crate) const ACTIVITY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Records a use of session `id` as its activity, as a server's requests are: a `trove serve`
/// running the session would otherwise end it as idle while an agent works through this
/// process. A failure (a full disk) costs the call nothing and is logged.
pub(crate) fn note_activity(repo: &Repo, id: &SessionId) {
    if let Err(e) = repo.touch_sessions(&[(id.clone(), trove::now_ns())]) {
        tracing::warn!(session = %id, error = %e, "could not record the session's activity");
    }
}
