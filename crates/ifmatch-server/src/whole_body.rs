//! A request's body read whole, up to a limit: what the Table service and the Cosmos endpoint
//! answer from (their dialects take a body whole, and refuse one over their limit).

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};

use crate::accept::RequestBody;

/// Why a body was not read whole.
pub(crate) enum Unread {
    /// It is longer than the limit.
    TooLarge,
    /// The client stopped sending, or sent something that is not HTTP.
    Cut,
}

/// `body`, whole, if it is at most `limit` bytes.
pub(crate) async fn read(body: RequestBody, limit: usize, what: &str) -> Result<Bytes, Unread> {
    match Limited::new(body, limit).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(Unread::TooLarge),
        Err(error) => {
            tracing::debug!(%error, "reading {what}'s body");
            Err(Unread::Cut)
        }
    }
}
