//! Request collapsing: of the requests that miss (or find stale) the same key at the same
//! time, one goes to the inner service; the others wait for it, a bounded time, then look
//! again, and are served what it stored while it arrives. A request whose answer was not
//! stored (private, too large, another variant) goes on to the inner service itself.
//!
//! The leader also publishes what it stores to its followers: they are served from it even
//! when the store had to let it go before they looked (a full store's admission policy may
//! refuse a large new entry at once).
//!
//! A key whose last answer could not be stored is remembered for a minute (Varnish's
//! "hit-for-miss"): its requests do not wait for one another, since the wait would only
//! serialise them. A stored answer of the key ends that.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::stored::entry::Stored;

/// What a leader stored, once it has.
pub(crate) type Published = Option<Arc<Stored>>;

/// The gate of the requests of `key` with the key fields `own`.
pub(crate) fn gate_of(key: &str, own: &str) -> String {
    let mut gate = String::with_capacity(key.len() + 1 + own.len());
    gate.push_str(key);
    gate.push('\0');
    gate.push_str(own);
    gate
}

/// The keys being asked for, each with the way to wait for its asker.
#[derive(Debug)]
pub(crate) struct CollapsedMisses {
    open: Mutex<ifmatch_core::keyed::HashMap<Arc<str>, watch::Sender<Published>>>,
    /// The keys whose last answer could not be stored.
    uncacheable: moka::sync::Cache<String, (), ifmatch_core::keyed::KeyHasher>,
}

impl Default for CollapsedMisses {
    fn default() -> Self {
        let uncacheable = moka::sync::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(Duration::from_secs(60))
            .build_with_hasher(ifmatch_core::keyed::KeyHasher::default());
        Self {
            open: Mutex::default(),
            uncacheable,
        }
    }
}

/// A request's place at its key's gate.
pub(crate) enum MissTurn {
    /// The first: it asks, and the gate stays closed until it is dropped.
    Lead(Lead),
    /// Another asks: wait for it, and for what it stores.
    Follow(watch::Receiver<Published>),
}

/// The request that asks for its key while others wait; they go on once it is dropped.
#[derive(Debug)]
pub(crate) struct Lead {
    gates: Arc<CollapsedMisses>,
    key: Arc<str>,
    done: watch::Sender<Published>,
}

impl CollapsedMisses {
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
    pub(crate) fn turn(self: &Arc<Self>, key: &str) -> MissTurn {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leader) = open.get(key) {
            return MissTurn::Follow(leader.subscribe());
        }
        let (done, key) = (watch::Sender::new(None), Arc::<str>::from(key));
        open.insert(key.clone(), done.clone());
        MissTurn::Lead(Lead {
            gates: self.clone(),
            key,
            done,
        })
    }

    /// Closes the gates of `key` (whatever the key fields) to newcomers: see [`CollapsedMisses::close`].
    pub(crate) fn close_key(&self, key: &str) {
        self.close(&gate_of(key, ""));
    }

    /// Closes the gates of the keys that start with `prefix` to newcomers (a write changed
    /// them: what their leaders fetch may be older than the write); those that follow already
    /// asked before it, and are still served what their leader stores.
    pub(crate) fn close(&self, prefix: &str) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if !open.is_empty() {
            open.retain(|key, _| !key.starts_with(prefix));
        }
    }

    /// Tells the followers of `key`'s leader what it stored.
    pub(crate) fn publish(&self, key: &str, stored: &Arc<Stored>) {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leader) = open.get(key) {
            // Followers are woken; with none yet (the usual miss, which the wake-up cost about
            // 400 instructions) the value is only set, and one that comes later finds it.
            let followers = leader.receiver_count() > 0;
            leader.send_if_modified(|published| {
                *published = Some(stored.clone());
                followers
            });
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        // Its own gate only: a write may have closed it early, and another opened since.
        let mut open = self.gates.open.lock().unwrap_or_else(|e| e.into_inner());
        if open
            .get(&self.key)
            .is_some_and(|gate| gate.same_channel(&self.done))
        {
            open.remove(&self.key);
        }
    }
}

/// Waits until the leader has stored its answer or is done, or `at_most`: what it stored.
pub(crate) async fn wait(mut leader: watch::Receiver<Published>, at_most: Duration) -> Published {
    if leader.borrow().is_none() {
        // A value when it stores; the channel closes when it is dropped.
        let _ = tokio::time::timeout(at_most, leader.changed()).await;
    }
    leader.borrow().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_wait_for_the_leader_and_the_next_request_leads_again() {
        let gates = Arc::new(CollapsedMisses::default());
        let MissTurn::Lead(lead) = gates.turn("k") else {
            panic!("the first leads")
        };
        let MissTurn::Follow(follower) = gates.turn("k") else {
            panic!("the second follows")
        };
        assert!(matches!(gates.turn("other"), MissTurn::Lead(_)));
        let started = std::time::Instant::now();
        assert!(
            wait(follower.clone(), Duration::from_millis(20))
                .await
                .is_none()
        );
        assert!(started.elapsed() >= Duration::from_millis(20), "it waited");
        drop(lead);
        let started = std::time::Instant::now();
        assert!(wait(follower, Duration::from_secs(5)).await.is_none());
        // Woken by the leader's end, well before its own 5 s limit (room for a loaded machine).
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "woken by the leader's end"
        );
        assert!(matches!(gates.turn("k"), MissTurn::Lead(_)));
        assert!(gates.open.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_follower_after_the_leader_stored_is_served_what_it_stored_at_once() {
        let gates = Arc::new(CollapsedMisses::default());
        let MissTurn::Lead(lead) = gates.turn("k") else {
            panic!("the first leads")
        };
        let stored = Arc::new(crate::tiers::disk::tests::stored(b"body", ""));
        gates.publish("k", &stored);
        let MissTurn::Follow(follower) = gates.turn("k") else {
            panic!("the second follows")
        };
        let started = std::time::Instant::now();
        let published = wait(follower, Duration::from_secs(5)).await;
        assert!(published.is_some_and(|p| Arc::ptr_eq(&p, &stored)));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "no wait for the 5 s limit"
        );
        drop(lead);
    }
}
