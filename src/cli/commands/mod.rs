//! One file per subcommand of `trove`: its arguments (a clap struct or enum) and its `run`.

pub mod audit;
pub mod cat;
pub mod check;
pub mod demo;
pub mod diff;
pub mod export;
pub mod find;
pub mod forget;
pub mod gc;
pub mod grep;
pub mod init;
pub mod log;
pub mod ls;
pub mod mcp;
pub mod repair;
pub mod restore;
pub mod revert;
pub mod rm;
pub mod serve;
pub mod session;
pub mod snapshot;
pub mod snapshots;
pub mod token;
pub mod tool;
pub mod trash;
pub mod workspace;
