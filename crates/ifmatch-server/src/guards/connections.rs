//! The open connections of a listener: each one's state (requests in flight, since when it is
//! idle, whether its requests wait for their bodies), closing those idle too long (an HTTP/1
//! connection waiting for a request's head longer than the header timeout), and making room at
//! the cap by closing the one idle the longest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

use crate::guards::body_rate::Waiting;

/// The open connections.
#[derive(Debug, Default)]
pub(crate) struct Table {
    open: Mutex<HashMap<u64, Arc<State>>>,
    next: AtomicU64,
}

/// Milliseconds since the first call: the clock of idle times.
fn now() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One connection: how many requests it has in flight, since when it is idle, and how to
/// close it.
#[derive(Debug)]
pub(crate) struct State {
    id: u64,
    in_flight: AtomicUsize,
    /// When (see [`now`]) the last request ended, or the connection opened.
    idle_since: AtomicU64,
    /// How many of the requests in flight wait for their client to send more of the body.
    waiting: AtomicUsize,
    /// When (see [`now`]) the first of them started waiting.
    waiting_since: AtomicU64,
    /// Whether a request came over HTTP/2: the header timeout is HTTP/1's.
    http2: AtomicBool,
    /// Whether the connection is to be closed, and its task, woken when it is: polled each
    /// time the connection's task runs, a flag costs a few instructions where a `Notify`'s
    /// future costs a hundred and more.
    closing: AtomicBool,
    closer: AtomicWaker,
}

impl State {
    /// Whether no request of this connection is in flight: what it reads next is a request's
    /// head (or the rest of a refused body).
    pub(crate) fn between_requests(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// A request starts on this connection: in flight until the guard drops.
    pub(crate) fn request_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// A request came and was answered at once, refused before any service saw it: the
    /// connection waits for the next head from now.
    pub(crate) fn request_refused(&self) {
        self.idle_since.store(now(), Ordering::Relaxed);
    }

    /// A request came over HTTP/2: the connection is held to the idle timeout alone.
    pub(crate) fn speaks_http2(&self) {
        self.http2.store(true, Ordering::Relaxed);
    }

    /// What tells this connection when a request body of it waits for its client.
    pub(crate) fn body_waits(self: &Arc<Self>) -> BodyWaits {
        BodyWaits(self.clone())
    }

    /// Resolves when the connection is to be closed (idle too long, or shed at the cap).
    pub(crate) fn close_asked(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            if self.closing.load(Ordering::Acquire) {
                return std::task::Poll::Ready(());
            }
            self.closer.register(cx.waker());
            match self.closing.load(Ordering::Acquire) {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            }
        })
    }

    /// Asks the connection's task to close it.
    fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.closer.wake();
    }

    /// Since when (see [`now`]) nothing is asked of this connection's client but its own
    /// sending: no request in flight, or every one waiting for its body. `None` while the
    /// server works on a request.
    fn idle(&self) -> Option<u64> {
        match self.in_flight.load(Ordering::Acquire) {
            0 => Some(self.idle_since.load(Ordering::Relaxed)),
            n if self.waiting.load(Ordering::Acquire) >= n => {
                Some(self.waiting_since.load(Ordering::Relaxed))
            }
            _ => None,
        }
    }
}

/// Tells a connection when a request body of it waits for its client.
#[derive(Debug)]
pub(crate) struct BodyWaits(Arc<State>);

impl Waiting for BodyWaits {
    fn started(&self) {
        if self.0.waiting.fetch_add(1, Ordering::AcqRel) == 0 {
            self.0.waiting_since.store(now(), Ordering::Relaxed);
        }
    }

    fn stopped(&self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<State>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn open(&self) -> Arc<State> {
        let state = Arc::new(State {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(now()),
            waiting: AtomicUsize::new(0),
            waiting_since: AtomicU64::new(0),
            http2: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            closer: AtomicWaker::new(),
        });
        self.lock().insert(state.id, state.clone());
        state
    }

    pub(crate) fn remove(&self, state: &State) {
        self.lock().remove(&state.id);
    }

    /// Whether a new connection may open: below the cap, or after closing the connection
    /// idle the longest (an upload waiting for its client is idle as a kept-alive connection
    /// is: nothing is asked of the server).
    pub(crate) fn make_room(&self, cap: usize) -> bool {
        let mut open = self.lock();
        if open.len() < cap {
            return true;
        }
        let oldest = open
            .values()
            .filter_map(|s| Some((s.idle()?, s)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, s)| s.clone());
        let Some(oldest) = oldest else {
            return false;
        };
        open.remove(&oldest.id);
        oldest.close();
        true
    }
}

/// Closes the connections idle too long. With no request in flight an HTTP/1 connection waits
/// for a request's head, from when its last request ended (or it opened), and has `header` to
/// send it whole (hyper's own header timeout arms a timer and drops it for every request: 5% of
/// a 304's instructions, docs/figures.md); an HTTP/2 connection may idle for `idle`; each is
/// closed within a quarter of its limit past it.
pub(crate) async fn reap(table: Arc<Table>, header: Duration, idle: Duration) {
    let tick = (header.min(idle) / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let (header, idle) = (header.min(idle).as_millis() as u64, idle.as_millis() as u64);
    loop {
        tokio::time::sleep(tick).await;
        let now = now();
        let stale: Vec<Arc<State>> = table
            .lock()
            .values()
            .filter(|s| {
                let limit = match s.http2.load(Ordering::Relaxed) {
                    true => idle,
                    false => header,
                };
                s.in_flight.load(Ordering::Acquire) == 0
                    && now.saturating_sub(s.idle_since.load(Ordering::Relaxed)) >= limit
            })
            .cloned()
            .collect();
        for state in stale {
            table.remove(&state);
            state.close();
        }
    }
}

/// A request in flight on a connection, until its response body is done.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<State>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.idle_since.store(now(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
