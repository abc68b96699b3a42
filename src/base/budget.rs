//! The memory budget: a semaphore on bytes held in memory by reads that cannot stream (a JSON
//! body, a text an edit rewrites), shared by every `Repo` handle of a server, so that however
//! many requests arrive at once, what they hold together stays under one bound.
//!
//! Content otherwise moves as streams (files are hashed, stored and staged a buffer at a
//! time); only what a caller must hold whole takes a share of the budget, for as long as it
//! holds it ([`Permit`] gives the share back when dropped).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::base::error::{Error, Result};

/// Reads under this size are not counted: they are bounded by the number of requests.
pub const SMALL: u64 = 256 << 10;

/// The bytes in flight, and who waits for some.
#[derive(Debug)]
pub struct Budget {
    capacity: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    /// A budget of `capacity` bytes, shared by every handle given it.
    pub fn new(capacity: u64) -> Arc<Budget> {
        Arc::new(Budget { capacity, used: Mutex::new(0), freed: Condvar::new() })
    }

    /// How many bytes may be held at once.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `bytes` (at most the whole budget: a single read larger than it waits until it is
    /// alone), waiting until they are free or `deadline` passes (`timeout`, nothing changed).
    pub fn acquire(self: &Arc<Self>, bytes: u64, deadline: Option<Instant>) -> Result<Permit> {
        let want = bytes.min(self.capacity);
        if bytes < SMALL {
            return Ok(Permit { budget: self.clone(), bytes: 0 });
        }
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used + want > self.capacity {
            used = match deadline {
                None => self.freed.wait(used).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::timeout("waiting for memory to read into", false));
                    }
                    self.freed.wait_timeout(used, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
        *used += want;
        Ok(Permit { budget: self.clone(), bytes: want })
    }
}

/// A share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Permit {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(self.bytes);
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shares_are_bounded_waited_for_and_given_back() {
        let b = Budget::new(1 << 20);
        let a = b.acquire(700 << 10, None).expect("fits");
        assert_eq!(b.used(), 700 << 10);
        let soon = Instant::now() + Duration::from_millis(50);
        let e = b.acquire(700 << 10, Some(soon)).expect_err("does not fit before the deadline");
        assert_eq!(e.kind(), crate::base::error::ErrorKind::Timeout);
        let small = b.acquire(1000, None).expect("small reads are not counted");
        assert_eq!(small.bytes(), 0);
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || b.acquire(700 << 10, None).map(|p| p.bytes()))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(a);
        assert_eq!(waiter.join().expect("join").expect("acquired once freed"), 700 << 10);
        assert_eq!(b.used(), 0, "every share came back");
        let huge = b.acquire(5 << 20, None).expect("a read over the budget takes all of it");
        assert_eq!(huge.bytes(), 1 << 20);
    }
}
