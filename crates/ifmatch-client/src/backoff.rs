//! Exponential backoff with full jitter, as Azure's retry guidance recommends: the n-th wait
//! is a random time between zero and `min(max, base * 2^n)`, so that writers who collided do
//! not collide again in step.

use std::time::Duration;

/// How long to wait before each retry, and how many.
#[derive(Debug, Clone, Copy)]
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
    /// The wait before retry number `retry` (0 for the first): uniform in `[0, cap]`.
    pub fn delay(&self, retry: u32) -> Duration {
        let cap = self
            .base
            .saturating_mul(1u32 << retry.min(20))
            .min(self.max);
        let micros = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rand::random::<u64>() % (micros + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_the_cap_and_are_spread() {
        let backoff = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(100),
            attempts: 10,
        };
        for retry in 0..10 {
            let cap = Duration::from_millis((10u64 << retry).min(100));
            let waits: Vec<_> = (0..200).map(|_| backoff.delay(retry)).collect();
            assert!(waits.iter().all(|w| *w <= cap));
            let distinct: std::collections::HashSet<_> = waits.iter().collect();
            assert!(
                distinct.len() > 100,
                "jittered: {} distinct waits",
                distinct.len()
            );
        }
    }
}
