//! The log on stderr: the server's (and the MCP server's) whole log, and for every other
//! command the warnings of what it skipped and why (a record that does not parse, a file read
//! again), which the library reports through `tracing` and never prints itself.

use trove::Error;

use crate::cli::output::Failure;

/// Sends the server's log to stderr: the level from `--log-level`, else `TROVE_LOG`, else
/// `info` (the MCP library's own at `warn` unless the filter names it); text or JSON lines. Panics are logged through it too (with their location), so a
/// crash in a request shows in the same log as everything else, once.
pub(crate) fn start(level: Option<&str>, json: bool) -> Result<(), Failure> {
    use tracing_subscriber::EnvFilter;
    // The MCP library logs every session it opens and closes at INFO: a client opening
    // sessions in a loop would fill the log. Its warnings still show, unless asked otherwise.
    let parse = |given: &str| {
        let directives = if given.contains("rmcp") { given.to_string() } else { format!("{given},rmcp=warn") };
        EnvFilter::try_new(directives)
    };
    let filter = match level {
        Some(l) => parse(l),
        None => std::env::var("TROVE_LOG")
            .map_err(|_| ())
            .and_then(|l| parse(&l).map_err(|_| ()))
            .or_else(|()| parse("info")),
    }
    .map_err(|e| Error::invalid_argument(format!("log level: {e}: give e.g. info, debug or trove=debug")))?;
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = if json { builder.json().try_init() } else { builder.try_init() };
    installed.map_err(|e| Error::internal(format!("cannot start logging: {e}")))?;
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(at = %at, panic = %message, "panic");
    }));
    Ok(())
}

/// For a one-shot command: warnings and errors on stderr (`TROVE_LOG` sets another filter),
/// plain text without timestamps, or one JSON object a line with `--json` (the failure line
/// that may follow is one too). A `TROVE_LOG` that does not parse falls back to warnings, as the
/// server falls back to its default. A progress bar on the terminal is cleared for each line.
pub(crate) fn start_warnings(json: bool) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("TROVE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| BarAware)
        .with_ansi(!json && std::io::stderr().is_terminal())
        .with_target(false)
        .without_time();
    // Only fails when a subscriber is installed already: then that one logs.
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}

/// stderr, written with the progress bar (if one is drawn) out of the way.
struct BarAware;

impl std::io::Write for BarAware {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::cli::bar::suspend(|| std::io::stderr().write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
