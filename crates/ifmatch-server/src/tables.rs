//! The Table service on a listener of its own (`127.0.0.1:10002` by default, as the
//! emulators lay out their ports): each request's body read whole, up to the service's
//! limit, then answered by [`ifmatch_table::Endpoint`], which holds every rule.

use bytes::Bytes;
use http_body_util::Full;
use ifmatch_table::endpoint::MAX_BODY;
use ifmatch_table::{ErrorCode, front};

use crate::accept::RequestBody;
use crate::whole_body::{self, Unread};
use crate::{AnyTables, SystemEnv};

/// The Table service's endpoint as the server runs it.
pub type TableEndpoint = ifmatch_table::Endpoint<AnyTables, SystemEnv>;

/// The Table service's answer to `request`, its body read whole first (up to the service's
/// limit).
pub(crate) async fn handle(
    endpoint: &TableEndpoint,
    request: http::Request<RequestBody>,
) -> http::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let answer = match whole_body::read(body, MAX_BODY, "a Table request").await {
        Ok(body) => endpoint.handle(&parts, &body).await,
        Err(Unread::TooLarge) => endpoint.too_large(&parts),
        Err(Unread::Cut) => front::failure(ErrorCode::InvalidInput, "the body was cut"),
    };
    answer.map(Full::new)
}
