//! `trove gc`: collect what no snapshot, trash item, recent audit record or plan reaches.

use std::io::Write;
use std::path::Path;

use trove::GcOptions;

use crate::cli::format;
use crate::cli::output::{actor, print_json, Failure, Out};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Change nothing: report what a collection with these options would delete and reclaim
    #[arg(long)]
    dry_run: bool,
    /// Delete what is condemned only this long after (1h; 0s for tests and emergencies)
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    grace: std::time::Duration,
    /// Rewrite packs whose dead share passes this percentage
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0)]
    repack_threshold: f64,
    /// Rewrite the manifest whole at the end, giving its free pages back (blocks writers while
    /// it runs; only needed once for repositories made before trove shrank it by itself)
    #[arg(long)]
    vacuum: bool,
    /// Rewrite the packs compressed below this zstd level (9 if no level is given), every live
    /// blob encoded again at it: snapshots compress fast at the repository's level (3), and this
    /// makes the repository smaller later, at a few seconds of CPU per hundred MB of packs
    #[arg(long, value_name = "LEVEL", num_args = 0..=1, default_missing_value = "9")]
    recompress: Option<i32>,
}

pub fn run(out: &mut Out, repo_path: &Path, json: bool, args: Args) -> Result<u8, Failure> {
    if !(0.0..=100.0).contains(&args.repack_threshold) {
        return Err(trove::Error::invalid_argument("--repack-threshold is a percentage from 0 to 100").into());
    }
    let repo = crate::cli::open::open_repo(repo_path)?;
    let opts = GcOptions {
        dry_run: args.dry_run,
        grace: args.grace,
        repack_threshold: args.repack_threshold / 100.0,
        actor: actor(),
        vacuum: args.vacuum,
        recompress: args.recompress,
    };
    let r = repo.gc(&opts)?;
    if json {
        print_json(out, &r)?;
        return Ok(0);
    }
    let u = r.unreachable;
    writeln!(
        out,
        "reachable: {} trees, {} contents, {} objects; unreachable: {} packed and {} loose objects, {} trees, {} chunk lists",
        r.reachable.trees, r.reachable.contents, r.reachable.objects, u.objects, u.loose, u.trees, u.chunk_lists
    )?;
    let d = r.deleted;
    if r.dry_run {
        writeln!(
            out,
            "dry run, nothing changed: a collection with these options would delete {} packed and {} loose objects, {} trees, {} chunk lists, rewrite {} packs and delete {} packs and {} orphan packs, reclaiming {}",
            d.objects,
            d.loose,
            d.trees,
            d.chunk_lists,
            r.packs_rewritten,
            r.packs_deleted,
            r.orphans_deleted,
            format::size(r.bytes_reclaimed)
        )?;
        return Ok(0);
    }
    writeln!(
        out,
        "deleted {} packed and {} loose objects, {} trees, {} chunk lists; {} waiting (grace period or operations in flight); {} loose objects gathered into packs; {} packs rewritten ({} recompressed, {} bundles rebuilt without their dead members), {} packs and {} orphan packs deleted; {} reclaimed ({} of it from the manifest)",
        d.objects,
        d.loose,
        d.trees,
        d.chunk_lists,
        r.waiting,
        r.loose_gathered,
        r.packs_rewritten,
        r.packs_recompressed,
        r.bundles_rebuilt,
        r.packs_deleted,
        r.orphans_deleted,
        format::size(r.bytes_reclaimed + r.manifest_bytes_reclaimed),
        format::size(r.manifest_bytes_reclaimed)
    )?;
    Ok(0)
}
