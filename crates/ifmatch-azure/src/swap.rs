//! The compare-and-swap loop of every front (the blob front, the Table service, Cosmos DB):
//! read what is stored, decide, write only if nothing changed since the read; when something
//! did, yield to the write that came first and decide again against what it left, at most
//! [`ATTEMPTS`] times.
//!
//! No sleep between attempts: a front has no timer of its own (it runs on tokio and in a
//! Worker), a lost race means the other write has landed already, and one instance's writers
//! to a key take [`Turns`](crate::Turns), so the races that remain are between instances.

/// How many times a change is decided before it gives up (the caller answers then: 503
/// `ServerBusy`, 429 `TooManyRequests`).
pub const ATTEMPTS: usize = 64;

/// The attempts of one change, every front's loop:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::task::{Context, Poll, Waker};
/// use ifmatch_azure::swap::Attempts;
///
/// // A counter another writer moves once, between this writer's read and its write.
/// let counter = AtomicU64::new(1);
/// let mut other = Some(());
/// let increment = async {
///     let mut attempts = Attempts::default();
///     while attempts.next().await {
///         let read = counter.load(Ordering::SeqCst);
///         if other.take().is_some() {
///             counter.fetch_add(1, Ordering::SeqCst);
///         }
///         let swapped = counter.compare_exchange(read, read + 1, Ordering::SeqCst, Ordering::SeqCst);
///         if swapped.is_ok() {
///             return Ok(read + 1);
///         }
///         // Another write came first: decide again against what it left.
///     }
///     Err("busy")
/// };
/// let mut increment = std::pin::pin!(increment);
/// let mut cx = Context::from_waker(Waker::noop());
/// let landed = loop {
///     if let Poll::Ready(landed) = increment.as_mut().poll(&mut cx) {
///         break landed;
///     }
/// };
/// assert_eq!(landed, Ok(3), "decided again over the other writer's 2: no lost update");
/// ```
///
/// (A loop rather than a function taking the attempt as a closure: an attempt borrows the
/// request it decides for, and a future of an async closure that borrows is not `Send` to
/// tokio, whose tasks run the native fronts.)
#[derive(Debug, Default)]
pub struct Attempts {
    made: usize,
}

impl Attempts {
    /// Whether to make an attempt: the first at once; after a lost race, another once the
    /// executor has run what else was ready; none after [`ATTEMPTS`].
    pub async fn next(&mut self) -> bool {
        if self.made == ATTEMPTS {
            return false;
        }
        if self.made > 0 {
            crate::yield_now().await;
        }
        self.made += 1;
        true
    }
}
