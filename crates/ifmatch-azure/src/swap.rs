//! The compare-and-swap loop of every front (the blob front, the Table service, Cosmos DB):
//! read what is stored, decide, write only if nothing changed since the read; when something
//! did, decide again against what it left, at most [`ATTEMPTS`] times.
//!
//! No pause between attempts: a front has no timer of its own (it runs on tokio and in a
//! Worker), a lost race means the other write has landed already, each attempt's own reads
//! give the executor its turn, and one instance's writers to a key take
//! [`Turns`](crate::Turns), so the races that remain are between instances.

/// How many times a change is decided before it gives up (the caller answers then: 503
/// `ServerBusy`, 429 `TooManyRequests`).
pub const ATTEMPTS: usize = 64;

/// The attempts of one change, every front's loop:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
/// use ifmatch_azure::swap::Attempts;
///
/// // A counter another writer moves once, between this writer's read and its write.
/// let counter = AtomicU64::new(1);
/// let mut other = Some(());
/// let (mut attempts, mut landed) = (Attempts::default(), Err("busy"));
/// while attempts.another() {
///     let read = counter.load(SeqCst);
///     if other.take().is_some() {
///         counter.fetch_add(1, SeqCst);
///     }
///     if counter.compare_exchange(read, read + 1, SeqCst, SeqCst).is_ok() {
///         landed = Ok(read + 1);
///         break;
///     }
///     // Another write came first: decide again against what it left.
/// }
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
    /// Whether to make an attempt: another after each lost race, none after [`ATTEMPTS`].
    pub fn another(&mut self) -> bool {
        if self.made == ATTEMPTS {
            return false;
        }
        self.made += 1;
        true
    }
}
