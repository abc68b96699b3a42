//! Writing out behind a writer: a thread that runs a sync each time the writer says another
//! batch is written, so the disk works while the writer goes on. Kicks while a sync runs merge
//! into one; nothing queues.

use std::sync::mpsc::{sync_channel, SyncSender};

/// The writer's handle: [`Kick::kick`] after each batch.
pub struct Kick(SyncSender<()>);

impl Kick {
    /// Asks for a sync; one already asked for and not yet begun covers this one too.
    pub fn kick(&self) {
        // Full means a sync is pending; gone means syncing failed, which `behind` reports.
        let _ = self.0.try_send(());
    }
}

/// Runs `writer` with a [`Kick`], beside a thread that runs `sync` once per kick. Returns what
/// the writer returned and how syncing went: the first failed sync's error (syncing stops
/// there), which the caller must not drop: a failed sync may be reported once only, so a later
/// one can succeed over lost data.
pub fn behind<T>(
    mut sync: impl FnMut() -> std::io::Result<()> + Send,
    writer: impl FnOnce(&Kick) -> T,
) -> (T, std::io::Result<()>) {
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<()>(1);
        let syncing = scope.spawn(move || -> std::io::Result<()> {
            while rx.recv().is_ok() {
                sync()?;
            }
            Ok(())
        });
        let kick = Kick(tx);
        let written = writer(&kick);
        drop(kick);
        let synced = syncing.join().unwrap_or_else(|_| Err(std::io::Error::other("the syncing thread panicked")));
        (written, synced)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn kicks_run_syncs_and_a_failed_sync_is_returned() {
        let runs = AtomicUsize::new(0);
        let (out, synced) = behind(
            || {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |kick| {
                kick.kick();
                7
            },
        );
        assert_eq!((out, synced.is_ok()), (7, true));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the kick given before the writer returned ran");
        let (_, synced) = behind(
            || Err(std::io::Error::other("disk gone")),
            |kick| {
                for _ in 0..3 {
                    kick.kick();
                }
            },
        );
        assert_eq!(synced.expect_err("failed").to_string(), "disk gone");
    }
}
