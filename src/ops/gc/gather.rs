//! Garbage collection's gathering: live whole loose objects (the tools' pre-images and
//! rewritten contents, small snapshots' files) copied into packs, so the manifest keeps their
//! index rows and no longer their bytes.
//!
//! Blobs are copied verbatim: each names its id and lengths in its header. Deltas stay loose
//! (a couple of hundred bytes each): with one copy of each, their rows in `object_bases`
//! always describe what readers read, and a packed object is always whole. Order, for crashes
//! and readers: the new packs are durable first (a crash then leaves orphans, reclaimed later);
//! one transaction then indexes them and deletes the loose rows they replace, so every reader
//! finds each object in one place or the other (`view::read_stored` looks in the packs again
//! when a loose lookup misses, in case the move fell between its two lookups).

use crate::base::error::Result;
use crate::base::failpoint::failpoint;
use crate::base::time::now_ns;
use crate::manifest::loose;
use crate::object::PackWriter;
use crate::repo::Repo;

use super::GcReport;

/// Bytes of loose blobs gathered per run: what a run holds in memory, besides the pack
/// writer's own buffers.
const GATHER_RUN: u64 = 64 << 20;

impl Repo {
    /// Moves every live whole loose object into packs (see the module docs), a run at a time;
    /// returns the packs written, which this collection then leaves alone.
    pub(super) fn gc_gather(&self, report: &mut GcReport) -> Result<Vec<String>> {
        let conn = self.manifest.conn();
        let mut after: Vec<u8> = Vec::new();
        let mut written = Vec::new();
        loop {
            self.check_deadline("gathering loose objects")?;
            let run = self.manifest.read(|| loose::live_run(conn, &after, GATHER_RUN))?;
            let Some((last, ..)) = run.last() else { break };
            after = last.as_bytes().to_vec();
            let ((), sealed) = PackWriter::run_in(
                self.backend.as_ref(),
                &self.packs_dir(),
                self.config.pack_target as usize,
                |writer| run.iter().try_for_each(|(id, raw_len, encoded)| writer.add(*id, *raw_len, encoded)),
            )?;
            failpoint("gc:gathered-written");
            let moved = self.manifest.write(|tx| {
                self.record_packs(tx, &sealed, now_ns())?;
                loose::remove_gathered(tx, run.iter().map(|(id, ..)| id))
            })?;
            report.loose_gathered += moved;
            report.pack_bytes_written += sealed.iter().map(|p| p.size).sum::<u64>();
            report.bytes_reclaimed += run.iter().map(|(_, _, e)| e.len() as u64).sum::<u64>();
            written.extend(sealed.into_iter().map(|p| p.key));
        }
        Ok(written)
    }
}
