//! Cosmos DB's error answers: a status and a JSON body `{"code": ..., "message": ...}`, the
//! code a word the SDKs and users read (`NotFound`, `Conflict`, `PreconditionFailed`, ...).

use bytes::Bytes;

/// An answer: the front's bodies are whole.
pub type Answer = http::Response<Bytes>;

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The status.
    pub status: u16,
    /// Cosmos's code.
    pub code: &'static str,
    /// What failed, and what to do.
    pub message: String,
}

impl Failure {
    /// The failure as an answer.
    pub fn answer(&self) -> Answer {
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        let mut answer = http::Response::new(Bytes::from(body.to_string()));
        *answer.status_mut() =
            http::StatusCode::from_u16(self.status).unwrap_or(http::StatusCode::BAD_REQUEST);
        answer.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        answer
    }
}

/// A failure with `status`, `code` and `message`.
pub fn failure(status: u16, code: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        status,
        code,
        message: message.into(),
    }
}

/// 400 `BadRequest`.
pub fn bad_request(message: impl Into<String>) -> Failure {
    failure(400, "BadRequest", message)
}

/// 404 `NotFound`.
pub fn not_found() -> Failure {
    failure(
        404,
        "NotFound",
        "Entity with the specified id does not exist in the system.",
    )
}

/// 409 `Conflict`.
pub fn conflict() -> Failure {
    failure(
        409,
        "Conflict",
        "Entity with the specified id already exists in the system.",
    )
}

/// 412 `PreconditionFailed`.
pub fn precondition_failed() -> Failure {
    failure(
        412,
        "PreconditionFailed",
        "Operation cannot be performed because one of the specified precondition is not met.",
    )
}

/// 503 `ServiceUnavailable`: the backend failed; nothing is known to have changed.
pub fn unavailable(detail: impl std::fmt::Display) -> Failure {
    failure(
        503,
        "ServiceUnavailable",
        format!("The storage backend failed: {detail}. Retry."),
    )
}
