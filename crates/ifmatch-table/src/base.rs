//! What an endpoint over tables stands on: the Table service's, and the Queue service's (its
//! messages are entities).

use std::sync::Arc;

use ifmatch_azure::{Answer, Env, Serving};

use crate::clock::Clock;

/// The tables an endpoint serves, the accounts it serves them for, its environment, the
/// instants it writes at, and the path it is mounted under.
#[derive(Debug, Clone)]
pub struct Base<T, E> {
    /// The tables (a queue's messages are a table's entities).
    pub tables: T,
    /// The accounts served, whether requests without credentials may act, and the memory the
    /// requests in flight share with the host's other endpoints.
    pub serving: Serving,
    /// The clock and randomness.
    pub env: E,
    /// The instants entities are written at: each later than the last, even when the system
    /// clock steps back, so that a deleted entity inserted again never gets a tag it had.
    pub clock: Arc<Clock>,
    /// A path the service is mounted under (`/table` or `/queue` on a Worker that serves blobs
    /// beside), taken off before the account is read, kept in what is signed.
    pub mount: String,
}

impl<T, E> Base<T, E> {
    /// Over `tables`, for the development account alone until [`Base::with_serving`].
    pub fn new(tables: T, env: E) -> Self {
        Self {
            tables,
            serving: Serving::default(),
            env,
            clock: Arc::default(),
            mount: String::new(),
        }
    }

    /// Under `mount` (`/table`: `/table/{account}/Tables` and so on).
    pub fn with_mount(mut self, mount: &str) -> Self {
        self.mount = mount.trim_end_matches('/').to_owned();
        self
    }

    /// For the accounts `serving` names, with its anonymous access and its memory.
    pub fn with_serving(mut self, serving: Serving) -> Self {
        self.serving = serving;
        self
    }

    /// The path `raw` without the mount.
    pub fn unmounted<'a>(&self, raw: &'a str) -> &'a str {
        raw.strip_prefix(self.mount.as_str()).unwrap_or(raw)
    }
}

impl<T, E: Env> Base<T, E> {
    /// `answer` with what every answer carries ([`ifmatch_azure::stamp`]), `version` the
    /// dialect's for a request that names none.
    pub fn stamped(
        &self,
        mut answer: Answer,
        parts: &http::request::Parts,
        version: http::HeaderValue,
    ) -> Answer {
        ifmatch_azure::stamp(answer.headers_mut(), &parts.headers, &self.env, version);
        answer
    }
}
