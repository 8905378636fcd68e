//! Request collapsing: of the requests that miss (or find stale) the same key at the same
//! time, one goes to the inner service; the others wait for it, a bounded time, then look
//! again, and are served what it stored while it arrives. A request whose answer was not
//! stored (private, too large, another variant) goes on to the inner service itself.
//!
//! A key whose last answer could not be stored is remembered for a minute (Varnish's
//! "hit-for-miss"): its requests do not wait for one another, since the wait would only
//! serialise them. A stored answer of the key ends that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// The keys being asked for, each with the way to wait for its asker.
#[derive(Debug)]
pub(crate) struct Gates {
    open: Mutex<HashMap<String, watch::Receiver<()>>>,
    /// The keys whose last answer could not be stored.
    uncacheable: moka::sync::Cache<String, ()>,
}

impl Default for Gates {
    fn default() -> Self {
        let uncacheable = moka::sync::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(Duration::from_secs(60))
            .build();
        Self {
            open: Mutex::default(),
            uncacheable,
        }
    }
}

/// A request's place at its key's gate.
pub(crate) enum Turn {
    /// The first: it asks, and the gate stays closed until it is dropped.
    Lead(Lead),
    /// Another asks: wait for it.
    Follow(watch::Receiver<()>),
}

/// The request that asks for its key while others wait; they go on once it is dropped.
#[derive(Debug)]
pub(crate) struct Lead {
    gates: Arc<Gates>,
    key: String,
    _done: watch::Sender<()>,
}

impl Gates {
    /// Remembers whether `key`'s last answer could be stored.
    pub(crate) fn stored(&self, key: &str, stored: bool) {
        // A read first: most answers say what the last said, and an insert costs more.
        let known = self.uncacheable.contains_key(key);
        if stored && known {
            self.uncacheable.invalidate(key);
        } else if !stored && !known {
            self.uncacheable.insert(key.to_owned(), ());
        }
    }

    /// Whether requests of `key` are worth collapsing: its last answer was stored, or none is
    /// known.
    pub(crate) fn worth_waiting(&self, key: &str) -> bool {
        !self.uncacheable.contains_key(key)
    }

    /// `key`'s gate: led by this request if no other leads it.
    pub(crate) fn turn(self: &Arc<Self>, key: &str) -> Turn {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(waiting) = open.get(key) {
            return Turn::Follow(waiting.clone());
        }
        let (done, waiting) = watch::channel(());
        open.insert(key.to_owned(), waiting);
        Turn::Lead(Lead {
            gates: self.clone(),
            key: key.to_owned(),
            _done: done,
        })
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        // Only this lead inserted under its key, and no other can until it is removed.
        (self.gates.open.lock().unwrap_or_else(|e| e.into_inner())).remove(&self.key);
    }
}

/// Waits until the leader is done, or `at_most`: whether it was done in time.
pub(crate) async fn wait(mut leader: watch::Receiver<()>, at_most: Duration) -> bool {
    // Nothing is ever sent: the channel closes when the leader is dropped.
    tokio::time::timeout(at_most, leader.changed())
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_wait_for_the_leader_and_the_next_request_leads_again() {
        let gates = Arc::new(Gates::default());
        let Turn::Lead(lead) = gates.turn("k") else {
            panic!("the first leads")
        };
        let Turn::Follow(follower) = gates.turn("k") else {
            panic!("the second follows")
        };
        assert!(matches!(gates.turn("other"), Turn::Lead(_)));
        assert!(!wait(follower.clone(), Duration::from_millis(20)).await);
        drop(lead);
        assert!(wait(follower, Duration::from_secs(5)).await);
        assert!(matches!(gates.turn("k"), Turn::Lead(_)));
        assert!(gates.open.lock().unwrap().is_empty());
    }
}
