//! `trove completions SHELL`: the shell's completion script for `trove`, from the CLI's own
//! definition (so it never falls behind a new command or flag).

use clap::CommandFactory;
use clap_complete::Generator;

use crate::cli::output::{Failure, Out};

/// The arguments of `trove completions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell to complete for
    pub shell: clap_complete::Shell,
}

pub fn run(out: &mut Out, args: Args) -> Result<u8, Failure> {
    // `try_generate`, not `generate`: a closed pipe (`| head`) is an error to report, not a
    // panic. What `generate` does first, by hand: the name it completes, the command built.
    let mut cmd = crate::Cli::command().bin_name("trove");
    cmd.build();
    args.shell.try_generate(&cmd, out)?;
    Ok(0)
}
