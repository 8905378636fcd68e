//! The waits between tries against a store that instances share (a taken lock, a lost
//! compare-and-swap): short, doubling to a cap, and jittered, so that writers who came together
//! do not try again together.

use std::time::Duration;

/// Waits from 1 ms, doubling up to a cap, each 0.5 to 1.5 times its pause.
#[derive(Debug, Clone)]
pub struct Backoff {
    pause: Duration,
    cap: Duration,
}

impl Backoff {
    /// Waits doubling from 1 ms up to `cap`.
    pub fn up_to(cap: Duration) -> Self {
        Self {
            pause: Duration::from_millis(1).min(cap),
            cap,
        }
    }

    /// The next wait, without waiting it.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.pause.mul_f64(0.5 + rand::random::<f64>());
        self.pause = (self.pause * 2).min(self.cap);
        wait
    }

    /// Waits the next wait.
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_wait()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_the_cap_and_are_spread() {
        let mut backoff = Backoff::up_to(Duration::from_millis(20));
        let waits: Vec<_> = (0..8).map(|_| backoff.next_wait()).collect();
        let pauses = [1, 2, 4, 8, 16, 20, 20, 20].map(Duration::from_millis);
        for (wait, pause) in waits.iter().zip(pauses) {
            assert!(
                *wait >= pause / 2 && *wait <= pause * 3 / 2,
                "{wait:?} for {pause:?}"
            );
        }
        let spread = (0..64)
            .map(|_| backoff.next_wait())
            .collect::<std::collections::HashSet<_>>();
        assert!(spread.len() > 1, "the waits are not jittered");
    }
}
