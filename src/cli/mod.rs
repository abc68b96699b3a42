//! The CLI: each subcommand is a file of `commands/` that turns its parsed arguments into
//! library calls and prints the result, as a table for people or one JSON document with
//! `--json`; this file only dispatches.

pub(crate) mod allocator;
pub(crate) mod bar;
pub mod commands;
mod format;
pub(crate) mod logging;
pub(crate) mod open;
mod output;

use std::io::Write;

use output::{default_repo, out};
pub use output::{in_flags, Failure};

use crate::{Cli, Command};

pub fn run(cli: Cli) -> Result<u8, Failure> {
    open::set_cache_dir(cli.cache_dir.clone());
    open::set_cache_size(cli.cache_size);
    open::set_batch_files(cli.batch_files);
    open::set_node(cli.node.clone());
    let repo_path = match (&cli.repo, &cli.command) {
        (Some(p), _) => p.clone(),
        // The CLI describing itself needs no repository, nor a home to find one in.
        (None, Command::Completions(_) | Command::Man(_)) => std::path::PathBuf::new(),
        (None, _) => default_repo()?,
    };
    // Refused here, before any command runs: a scheme trove does not write to.
    trove::object::Location::parse(repo_path.as_os_str())?;
    let (json, path) = (cli.json, repo_path.as_path());
    let mut out = out();
    let out = &mut out;
    let open = || open::open_repo(path);
    // The servers start their own log, with its level and format options.
    if !matches!(cli.command, Command::Serve(_) | Command::Mcp(_)) {
        logging::start_warnings(json);
    }
    let code = match cli.command {
        Command::Init(args) => commands::init::run(out, path, json, args)?,
        Command::Snapshot(args) => commands::snapshot::run(out, path, json, args)?,
        Command::Snapshots(args) => commands::snapshots::run(out, path, json, args)?,
        Command::Ls(args) => commands::ls::run(out, path, json, args)?,
        Command::Cat(args) => commands::cat::run(out, path, json, args)?,
        Command::Restore(args) => commands::restore::run(out, path, json, args)?,
        Command::Export(args) => commands::export::run(out, path, json, args)?,
        Command::Diff(args) => commands::diff::run(out, path, json, args)?,
        Command::Log(args) => commands::log::run(out, path, json, args)?,
        Command::Grep(args) => commands::grep::run(out, path, json, args)?,
        Command::Find(args) => commands::find::run(out, path, json, args)?,
        Command::Workspace(cmd) => commands::workspace::run(out, &open()?, cmd, json).map(|()| 0)?,
        Command::Check(args) => commands::check::run(out, path, json, args)?,
        Command::Forget(args) => commands::forget::run(out, path, json, args)?,
        Command::Gc(args) => commands::gc::run(out, path, json, args)?,
        Command::Pin(args) => commands::forget::pin(out, path, json, args, true)?,
        Command::Unpin(args) => commands::forget::pin(out, path, json, args, false)?,
        Command::Repair(cmd) => commands::repair::run(out, path, json, cmd)?,
        Command::Serve(args) => commands::serve::run(out, path, args).map(|()| 0)?,
        Command::Token(cmd) => commands::token::run(out, &open()?, cmd, json).map(|()| 0)?,
        Command::Key(cmd) => commands::key::run(out, &open()?, cmd, json).map(|()| 0)?,
        Command::Session(cmd) => commands::session::run(out, &open()?, cmd, json).map(|()| 0)?,
        Command::Tool(args) => commands::tool::run(out, path, args)?,
        Command::Mcp(args) => commands::mcp::run(out, path, args)?,
        Command::Trash(cmd) => commands::trash::run(out, &open()?, cmd, json)?,
        Command::Rm(args) => commands::rm::run(out, path, json, args)?,
        Command::Audit(cmd) => commands::audit::run(out, path, json, cmd)?,
        Command::Revert(args) => commands::revert::run(out, path, json, args)?,
        Command::Demo(args) => commands::demo::run(out, path, json, args)?,
        Command::Completions(args) => commands::completions::run(out, args)?,
        Command::Man(args) => commands::man::run(out, json, args)?,
    };
    out.flush()?;
    Ok(code)
}
