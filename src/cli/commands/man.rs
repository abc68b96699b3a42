//! `trove man DIR`: manual pages from the CLI's own definition, `trove.1` and one per
//! subcommand (`trove-snapshot.1`, `trove-trash-restore.1`, ...), written into DIR.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use trove::Error;

use crate::cli::output::{print_json, Failure, Out};

/// The arguments of `trove man`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The directory to write the pages into (made if missing; pages already there are
    /// replaced)
    pub dir: PathBuf,
}

/// What `trove man --json` prints.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Written {
    directory: PathBuf,
    /// The pages' file names, `trove.1` first.
    pages: Vec<String>,
}

pub fn run(out: &mut Out, json: bool, args: Args) -> Result<u8, Failure> {
    let pages = write_pages(&args.dir)?;
    if json {
        print_json(out, &Written { directory: args.dir, pages })?;
    } else {
        for page in &pages {
            writeln!(out, "{}", args.dir.join(page).display())?;
        }
    }
    Ok(0)
}

/// Writes a page for `trove` and every subcommand below it into `dir`; their file names.
fn write_pages(dir: &Path) -> Result<Vec<String>, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create the manual pages' directory", dir, e))?;
    // Built, every subcommand carries its display name (`trove-trash-restore`), which names
    // its page; `help` is clap's, not a command of trove's.
    let mut root = crate::Cli::command().disable_help_subcommand(true);
    root.build();
    let mut pages = Vec::new();
    // The CLI's own depth, walked without recursion like every tree here.
    let mut todo = vec![root];
    while let Some(cmd) = todo.pop() {
        todo.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let page = clap_mangen::Man::new(cmd);
        let name = page.get_filename();
        let path = dir.join(&name);
        let mut file = std::fs::File::create(&path).map_err(|e| Error::io("write", &path, e))?;
        page.render(&mut file).and_then(|()| file.flush()).map_err(|e| Error::io("write", &path, e))?;
        pages.push(name);
    }
    pages[1..].sort();
    Ok(pages)
}
