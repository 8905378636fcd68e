//! The layer's own error answers: the status, and one line that says what failed and what to do.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use crate::body::ConditionalBody;

/// Why the layer answered a request itself, with an error.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// 412: the conditions do not hold for the current version.
    Failed,
    /// 412: the current version is not known, so no condition can be trusted to hold.
    Unknown,
    /// 428: a write without a condition, where conditions are required.
    Required,
    /// 503: the version backend (or the inner service, asked for the version) failed.
    Unavailable,
    /// 500: the layer wraps a single method's handler and has nothing to ask the current
    /// version of: a setup to fix, said at the first write.
    Blind,
}

/// What the layer says, and logs, when it wraps a single method's handler and can learn no
/// version: the setup's fix.
pub(crate) const BLIND: &str = "500 Internal Server Error: ifmatch's ConditionalLayer wraps \
    this route's write handler alone (axum's Router::layer and route_layer wrap each method \
    apart), so it cannot read the resource's current version to check this write's \
    conditions. Wrap the whole router instead: \
    Router::new().fallback_service(ConditionalLayer::new().layer(router)); or give the layer a \
    version_source\n";

/// The layer's own error answer: the status, and one line that says what failed and what to
/// do. It names no validator: a client that may not read the resource learns nothing of it.
pub(crate) fn refusal<B>(why: Refusal) -> Response<ConditionalBody<B>> {
    let (status, text) = match why {
        Refusal::Failed => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version does not satisfy the \
             request's If-Match, If-Unmodified-Since or If-None-Match; read it again and retry\n",
        ),
        Refusal::Unknown => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version is not known here, so the \
             conditions cannot be checked; read it (GET) and retry\n",
        ),
        Refusal::Required => (
            StatusCode::PRECONDITION_REQUIRED,
            "428 Precondition Required: send If-Match with the ETag you read, or \
             If-None-Match: * to create\n",
        ),
        Refusal::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the current version cannot be checked now; retry later\n",
        ),
        Refusal::Blind => (StatusCode::INTERNAL_SERVER_ERROR, BLIND),
    };
    let mut response = Response::new(ConditionalBody::full(
        Bytes::from_static(text.as_bytes()),
        None,
    ));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    response
}
