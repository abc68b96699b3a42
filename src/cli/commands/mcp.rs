//! `trove mcp`: Serve a session's tools over the Model Context Protocol on stdin/stdout, for an
//! agent framework that starts its tool servers as child processes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::ServiceExt;
use trove::tools::catalog;
use trove::tools::fileapi::{Sandbox, DEFAULT_SANDBOX_ROOT};
use trove::tools::mcp::{McpTools, Runner};
use trove::{Error, ErrorKind, SessionId};

use crate::cli::output::{actor, Failure, Out};

/// The arguments of `trove mcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session whose files the tools reach
    #[arg(long, value_name = "ID")]
    pub session: SessionId,
    /// Where absolute paths of the `files` tool map onto the workspace
    #[arg(long, value_name = "DIR", default_value = DEFAULT_SANDBOX_ROOT)]
    pub sandbox_root: String,
}

pub fn run(_out: &mut Out, repo_path: &Path, args: Args) -> Result<u8, Failure> {
    trove::path::check_sandbox_root(&args.sandbox_root)?;
    // stdout is the protocol's: the log goes to stderr (`TROVE_LOG`, default warnings only, as
    // an agent framework shows a tool server's stderr to people).
    let level = std::env::var("TROVE_LOG").unwrap_or_else(|_| "warn".to_string());
    crate::cli::logging::start(Some(&level), false)?;
    let repo = crate::cli::open::open_repo(repo_path)?;
    // Refused before the protocol starts: a client learns at once that the session is unknown.
    repo.session(&args.session)?;
    // The last time a call was recorded as the session's activity: at most one write a second.
    let repo = Arc::new(Mutex::new((repo, None::<Instant>)));
    let (session, root, actor) = (args.session.clone(), args.sandbox_root, actor());
    let run: Runner = Arc::new(move |name, params| {
        let (repo, session, root, actor) = (repo.clone(), session.clone(), root.clone(), actor.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // One call at a time: the calls of one client are in order anyway.
                let mut held = repo.lock().unwrap_or_else(|p| p.into_inner());
                let (repo, noted) = &mut *held;
                if noted.is_none_or(|t| t.elapsed() >= super::tool::ACTIVITY_EVERY) {
                    super::tool::note_activity(repo, &session);
                    *noted = Some(Instant::now());
                }
                let s = repo.session(&session)?;
                let sandbox = Sandbox::new(repo, &s, &actor, &root);
                catalog::call(&sandbox, &name, params)
            })
            .await
            .map_err(|e| Error::internal(format!("a tool call stopped: {e}")))?
        })
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::with_source(ErrorKind::Io, "cannot start the async runtime", e))?;
    runtime.block_on(async {
        let protocol = |e: &dyn std::fmt::Display| Error::new(ErrorKind::Io, format!("MCP over stdio: {e}"));
        // The CLI holds the standard output's lock for its whole run: the protocol writes to a
        // duplicate of the descriptor, which no lock guards.
        let fd = rustix::io::dup(std::io::stdout())
            .map_err(|e| Error::with_source(ErrorKind::Io, "cannot open the standard output", e))?;
        let stdout = tokio::fs::File::from_std(std::fs::File::from(fd));
        let server =
            McpTools::new(args.session, run).serve((tokio::io::stdin(), stdout)).await.map_err(|e| protocol(&e))?;
        server.waiting().await.map_err(|e| protocol(&e))?;
        Ok::<_, Error>(())
    })?;
    Ok(0)
}
