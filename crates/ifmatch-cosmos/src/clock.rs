//! The instants writes are made at: each later than every one before it (even when the
//! system clock steps back), so an `_etag` never names two versions, and each pending until
//! its commit is done, so the change feed never reads past a write that may still land
//! before what it has read (it would skip it for good).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use ifmatch_table::DateTime;

/// The instants given, and those whose writes are still under way.
#[derive(Debug, Default)]
pub struct Clock {
    /// The last instant given, in ticks.
    last: AtomicI64,
    /// The instants whose writes have not finished, with how many writes hold each.
    pending: Mutex<BTreeMap<i64, u32>>,
}

/// An instant a write is made at; pending until dropped, which a write does once its commit
/// has applied or failed.
#[derive(Debug)]
pub struct Stamped {
    /// The instant.
    pub at: DateTime,
    clock: Arc<Clock>,
}

impl Clock {
    /// An instant later than `before`, than every instant given before, and not before
    /// `now`; pending until the [`Stamped`] is dropped.
    pub fn stamp(self: &Arc<Self>, now: SystemTime, before: Option<DateTime>) -> Stamped {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let now = DateTime::from_unix(since.as_secs() as i64, since.subsec_nanos()).ticks();
        let floor = before.map_or(i64::MIN, |b| b.ticks().saturating_add(1));
        // Taken under the lock, so that no reader sees a later instant settled while this
        // one is not yet pending.
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let last = self.last.load(Ordering::Relaxed);
        let next = now.max(last + 1).max(floor);
        self.last.store(next, Ordering::Relaxed);
        *pending.entry(next).or_default() += 1;
        Stamped {
            at: DateTime::from_ticks(next),
            clock: self.clone(),
        }
    }

    /// The instant below which every write has finished: the earliest pending one, or the
    /// one after the last given.
    pub fn horizon(&self) -> i64 {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.keys().next() {
            Some(earliest) => *earliest,
            None => self.last.load(Ordering::Relaxed) + 1,
        }
    }

    /// The last instant given, in ticks.
    pub fn last(&self) -> i64 {
        self.last.load(Ordering::Relaxed)
    }
}

impl Drop for Stamped {
    fn drop(&mut self) {
        let mut pending = (self.clock.pending)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let ticks = self.at.ticks();
        if let Some(count) = pending.get_mut(&ticks) {
            *count -= 1;
            if *count == 0 {
                pending.remove(&ticks);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_rise_and_the_horizon_waits_for_pending_writes() {
        let clock = Arc::new(Clock::default());
        let now = SystemTime::now();
        let a = clock.stamp(now, None);
        let b = clock.stamp(now, None);
        assert!(b.at > a.at);
        let c = clock.stamp(now - std::time::Duration::from_secs(60), Some(b.at));
        assert!(
            c.at > b.at,
            "a clock stepped back gives a later instant all the same"
        );
        assert_eq!(clock.horizon(), a.at.ticks());
        drop(a);
        assert_eq!(clock.horizon(), b.at.ticks());
        drop(c);
        assert_eq!(clock.horizon(), b.at.ticks(), "b is still pending");
        let last = clock.last();
        drop(b);
        assert_eq!(clock.horizon(), last + 1);
    }
}
