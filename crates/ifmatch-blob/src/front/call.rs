//! One request as an operation's handler takes it.

use super::failure::Result;
use super::gate;

/// What a handler answers: the resource the request names (a container's or a blob's key),
/// the request's headers, and the time it is answered at (one reading of the clock for all
/// the checks of one request).
#[derive(Clone, Copy, Debug)]
pub(super) struct Call<'a> {
    pub(super) key: &'a crate::store::Key,
    pub(super) headers: &'a http::HeaderMap,
    pub(super) now: std::time::SystemTime,
    /// What the container's own protection says of a change of the blob, if it has one.
    pub(super) guard: Option<gate::Guard<'a>>,
}

impl<'a> Call<'a> {
    /// What the request brings to the gate.
    pub(super) fn ask(self) -> Result<gate::Asking<'a>> {
        Ok(gate::Asking::of(self.headers, self.now)?.guarded(self.guard))
    }

    /// The same call with other headers (a copy's, made from its source's answer).
    pub(super) fn with_headers(self, headers: &'a http::HeaderMap) -> Self {
        Self { headers, ..self }
    }
}
