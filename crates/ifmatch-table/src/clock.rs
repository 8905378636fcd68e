//! The instants writes are made at: each later than every one this instance gave before (even
//! when the system clock steps back) and than the version it replaces, so an `_etag` never
//! names two versions of a document.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::value::DateTime;

/// The last instant given.
#[derive(Debug, Default)]
pub struct Clock {
    /// In ticks.
    last: AtomicI64,
}

impl Clock {
    /// An instant later than `before`, than every instant given before, and not before `now`.
    pub fn stamp(&self, now: SystemTime, before: Option<DateTime>) -> DateTime {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let now = DateTime::from_unix(since.as_secs() as i64, since.subsec_nanos()).ticks();
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = after(DateTime::from_ticks(now.max(last + 1)), before).ticks();
            match (self.last).compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return DateTime::from_ticks(next),
                Err(seen) => last = seen,
            }
        }
    }

    /// The last instant given, in ticks.
    pub fn last(&self) -> i64 {
        self.last.load(Ordering::Relaxed)
    }
}

/// The instant of a write at `now` over a version written at `before`: `now`, or a tick after
/// `before` when the clock has not moved past it, so that a write never gives a version a tag
/// it had (a client holding the earlier tag gets 412, never a false match).
pub(crate) fn after(now: DateTime, before: Option<DateTime>) -> DateTime {
    match before {
        Some(before) if now <= before => DateTime::from_ticks(before.ticks().saturating_add(1)),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_rise_even_when_the_clock_steps_back() {
        let clock = Clock::default();
        let now = SystemTime::now();
        let a = clock.stamp(now, None);
        let b = clock.stamp(now, None);
        assert!(b > a);
        let c = clock.stamp(now - std::time::Duration::from_secs(60), None);
        assert!(
            c > b,
            "a clock stepped back gives a later instant all the same"
        );
        let far = DateTime::from_ticks(c.ticks() + 1_000_000);
        assert!(
            clock.stamp(now, Some(far)) > far,
            "later than the version it replaces"
        );
    }
}
