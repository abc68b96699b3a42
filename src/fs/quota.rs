//! The inotify watches one server may hold: the kernel's `fs.inotify.max_user_watches` is shared
//! by every process of the user, and one recursive watch of a tree an agent made can otherwise
//! take all of them. A [`WatchQuota`] is taken from for every directory watched, in all and per
//! owner (a session's watchers, a live tree's change feed), and given back when the watch ends.

use std::collections::HashMap;
use std::sync::Mutex;

/// Watches one owner may hold at most by default (a session's watchers together).
pub const PER_OWNER: usize = 8192;

/// Why a watch was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The owner holds its share already.
    Owner(usize),
    /// The server holds all it may.
    Server(usize),
}

/// Watches granted, in all and by owner.
#[derive(Debug)]
pub struct WatchQuota {
    total: usize,
    per_owner: usize,
    held: Mutex<(usize, HashMap<String, usize>)>,
}

impl WatchQuota {
    /// A quota of `total` watches, at most `per_owner` of them to one owner.
    pub fn new(total: usize, per_owner: usize) -> WatchQuota {
        WatchQuota { total, per_owner: per_owner.min(total), held: Mutex::new((0, HashMap::new())) }
    }

    /// The quota of a server on this system: half the user's `max_user_watches` (the other
    /// half left to the user's other programs), and `per_owner` (or a quarter of the whole, if
    /// less) to each owner.
    pub fn for_this_system(per_owner: usize) -> WatchQuota {
        let system = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(8192);
        let total = (system / 2).max(64);
        WatchQuota::new(total, per_owner.min(total / 4).max(1))
    }

    /// The most one owner may hold.
    pub fn per_owner(&self) -> usize {
        self.per_owner
    }

    /// The most the server may hold.
    pub fn total(&self) -> usize {
        self.total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, HashMap<String, usize>)> {
        // Counts are changed whole under the lock: a panic elsewhere leaves them sound.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes one watch for `owner`, if its share and the server's allow.
    pub fn take(&self, owner: &str) -> Result<(), Refused> {
        self.take_up_to(owner, self.per_owner)
    }

    /// Takes one watch for `owner`, if it holds fewer than `share` and the server allows: for
    /// owners whose share is not a session's (a live tree's change feed).
    pub fn take_up_to(&self, owner: &str, share: usize) -> Result<(), Refused> {
        let mut held = self.lock();
        if held.0 >= self.total {
            return Err(Refused::Server(self.total));
        }
        let mine = held.1.get(owner).copied().unwrap_or(0);
        if mine >= share {
            return Err(Refused::Owner(share));
        }
        held.0 += 1;
        held.1.insert(owner.to_string(), mine + 1);
        Ok(())
    }

    /// Gives back `n` watches of `owner`.
    pub fn give(&self, owner: &str, n: usize) {
        if n == 0 {
            return;
        }
        let mut held = self.lock();
        held.0 = held.0.saturating_sub(n);
        if let Some(mine) = held.1.get_mut(owner) {
            *mine = mine.saturating_sub(n);
            if *mine == 0 {
                held.1.remove(owner);
            }
        }
    }

    /// Watches held by `owner` now.
    pub fn held_by(&self, owner: &str) -> usize {
        self.lock().1.get(owner).copied().unwrap_or(0)
    }

    /// Watches held in all now.
    pub fn held(&self) -> usize {
        self.lock().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_gets_its_share_and_the_server_its_total() {
        let q = WatchQuota::new(5, 3);
        for _ in 0..3 {
            assert_eq!(q.take("a"), Ok(()));
        }
        assert_eq!(q.take("a"), Err(Refused::Owner(3)));
        assert_eq!(q.take("b"), Ok(()));
        assert_eq!(q.take("c"), Ok(()));
        assert_eq!(q.take("c"), Err(Refused::Server(5)));
        q.give("a", 2);
        assert_eq!(q.held_by("a"), 1);
        assert_eq!(q.held(), 3);
        assert_eq!(q.take("c"), Ok(()));
        q.give("a", 10);
        assert_eq!(q.held_by("a"), 0);
    }
}
