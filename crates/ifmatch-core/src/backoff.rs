//! The waits between tries of a write that lost a race (a conditional write refused, a lock
//! taken, a compare-and-swap beaten): exponential backoff with full jitter, as Azure's retry
//! guidance recommends. The wait before retry `n` is a random time between zero and
//! `min(max, base * 2^n)`, so that writers who collided do not collide again in step.
//!
//! The schedule is plain arithmetic; the draw needs a random source, which the `jitter`
//! feature brings (`rand`), so that the core stays free of one where it runs without
//! (`wasm32-unknown-unknown`).

use std::time::Duration;

/// How long to wait before each retry, and how many tries in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The cap of the first wait.
    pub base: Duration,
    /// The largest wait.
    pub max: Duration,
    /// How many attempts in all before giving up.
    pub attempts: u32,
}

impl Default for Backoff {
    /// 20 attempts, waits capped from 20 ms up to 2 s.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(20),
            max: Duration::from_secs(2),
            attempts: 20,
        }
    }
}

impl Backoff {
    /// Tries without end, the waits capped from 1 ms doubling up to `max`: the short waits of
    /// tries against a store the caller shares with other instances (a lock, a compare-and-swap).
    pub const fn up_to(max: Duration) -> Self {
        Self {
            base: Duration::from_millis(1),
            max,
            attempts: u32::MAX,
        }
    }

    /// The longest wait before retry number `retry` (0 for the first): `min(max, base * 2^retry)`.
    pub fn cap(&self, retry: u32) -> Duration {
        self.base
            .saturating_mul(1u32 << retry.min(20))
            .min(self.max)
    }

    /// The wait before retry number `retry` (0 for the first): uniform in `[0, cap(retry)]`.
    #[cfg(feature = "jitter")]
    pub fn delay(&self, retry: u32) -> Duration {
        let micros = u64::try_from(self.cap(retry).as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rand::random::<u64>() % micros.saturating_add(1))
    }

    /// The waits between this schedule's attempts, in order: `attempts - 1` of them.
    #[cfg(feature = "jitter")]
    pub fn waits(self) -> Waits {
        Waits {
            backoff: self,
            retry: 0,
        }
    }
}

/// The waits of one run of tries ([`Backoff::waits`]).
#[cfg(feature = "jitter")]
#[derive(Debug, Clone)]
pub struct Waits {
    backoff: Backoff,
    retry: u32,
}

#[cfg(feature = "jitter")]
impl Iterator for Waits {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.retry.saturating_add(1) >= self.backoff.attempts {
            return None;
        }
        let wait = self.backoff.delay(self.retry);
        self.retry += 1;
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_double_from_the_base_to_the_max() {
        let backoff = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(100),
            attempts: 10,
        };
        let caps: Vec<_> = (0..6).map(|retry| backoff.cap(retry).as_millis()).collect();
        assert_eq!(caps, [10, 20, 40, 80, 100, 100]);
        assert_eq!(backoff.cap(u32::MAX), Duration::from_millis(100));
        assert_eq!(
            Backoff::up_to(Duration::from_millis(20)).cap(3),
            Duration::from_millis(8)
        );
    }

    #[cfg(feature = "jitter")]
    #[test]
    fn waits_stay_under_their_cap_and_are_spread() {
        let backoff = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(100),
            attempts: 10,
        };
        for retry in 0..10 {
            let waits: Vec<_> = (0..200).map(|_| backoff.delay(retry)).collect();
            assert!(waits.iter().all(|w| *w <= backoff.cap(retry)));
            let distinct: std::collections::HashSet<_> = waits.iter().collect();
            assert!(
                distinct.len() > 100,
                "jittered: {} distinct",
                distinct.len()
            );
        }
    }

    #[cfg(feature = "jitter")]
    #[test]
    fn a_run_has_one_wait_fewer_than_its_attempts() {
        let backoff = Backoff {
            attempts: 4,
            ..Backoff::default()
        };
        let waits: Vec<_> = backoff.waits().collect();
        assert_eq!(waits.len(), 3);
        for (retry, wait) in (0..).zip(&waits) {
            assert!(*wait <= backoff.cap(retry));
        }
        assert_eq!(
            Backoff {
                attempts: 0,
                ..backoff
            }
            .waits()
            .count(),
            0
        );
    }
}
