//! Cosmos DB's error answers: a status and a JSON body `{"code": ..., "message": ...}`, the
//! code a word the SDKs and users read (`NotFound`, `Conflict`, `PreconditionFailed`, ...).
//! Each code is declared once, with the status it is answered with.

use bytes::Bytes;
use ifmatch_table::TableError;

pub use ifmatch_azure::Answer;

ifmatch_azure::error_codes! {
    /// A Cosmos DB error code, with its status and the message Azure gives when nothing more is
    /// known.
    #[non_exhaustive]
    pub enum Code {
    /// The request is malformed, or asks for what this service does not do.
    BadRequest = BAD_REQUEST, "The request is not valid.";
    /// No valid credentials.
    Unauthorized = UNAUTHORIZED, "The input authorization token can't serve the request.";
    /// Credentials that do not allow this.
    Forbidden = FORBIDDEN, "The request is not allowed with these credentials.";
    /// The resource is not there.
    NotFound = NOT_FOUND, "Entity with the specified id does not exist in the system.";
    /// The method is not served on this resource.
    MethodNotAllowed = METHOD_NOT_ALLOWED, "The method is not served on this resource.";
    /// A query ran past its bound before its first result.
    RequestTimeout = REQUEST_TIMEOUT, "The request timed out.";
    /// A partition key range that split or merged (substatus 1002): read the ranges again.
    Gone = GONE, "The partition key range is gone: it split or merged. Read the container's ranges again.";
    /// The resource is already there, or a unique value is taken.
    Conflict = CONFLICT, "Entity with the specified id already exists in the system.";
    /// An `If-Match` did not hold.
    PreconditionFailed = PRECONDITION_FAILED, "Operation cannot be performed because one of the specified precondition is not met.";
    /// A body or a document over its bound.
    RequestEntityTooLarge = PAYLOAD_TOO_LARGE, "Request size is too large: a document is at most 2 MB.";
    /// A write lost more races than it retries.
    TooManyRequests = TOO_MANY_REQUESTS, "The document changed under this write more times than it retries: retry it.";
    /// The backend failed; nothing is known to have changed.
    ServiceUnavailable = SERVICE_UNAVAILABLE, "The storage backend failed. Retry.";
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct Failure {
    /// Cosmos's code, which says the status.
    pub code: Code,
    /// What failed, and what to do.
    pub message: String,
    /// Cosmos's `x-ms-substatus`, where it tells failures of one status apart.
    pub substatus: Option<u16>,
    /// How long a 429 asks the client to wait, in milliseconds (100 unless said).
    pub retry_after_ms: Option<u64>,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            substatus: None,
            retry_after_ms: None,
        }
    }

    /// This failure asking the client to wait `ms` before it retries.
    pub fn with_retry_after(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// This failure with `substatus`.
    pub fn with_substatus(mut self, substatus: u16) -> Self {
        self.substatus = Some(substatus);
        self
    }

    /// A failure with `code` and its standard message.
    pub fn of(code: Code) -> Self {
        Self::new(code, code.message())
    }

    /// Its status, as a number (a batch's results carry it so).
    pub fn status(&self) -> u16 {
        self.code.status().as_u16()
    }

    /// The failure as an answer.
    pub fn answer(&self) -> Answer {
        let body = serde_json::json!({ "code": self.code.as_str(), "message": self.message });
        let mut answer = http::Response::new(Bytes::from(body.to_string()));
        *answer.status_mut() = self.code.status();
        answer.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        if let Some(substatus) = self.substatus {
            answer
                .headers_mut()
                .insert("x-ms-substatus", substatus.into());
        }
        // How long the SDKs wait before they retry a 429 (they retry it themselves).
        if self.code == Code::TooManyRequests {
            let ms = self.retry_after_ms.unwrap_or(RETRY_AFTER_MS);
            answer
                .headers_mut()
                .insert("x-ms-retry-after-ms", ms.into());
        }
        answer
    }
}

/// What a 429 asks the client to wait before it retries, in milliseconds.
const RETRY_AFTER_MS: u64 = 100;

/// A request the memory budget did not admit ([`ifmatch_azure::inflight`]): 413 when it weighs
/// more than the whole budget, 429 (retried by the SDKs) while the heavy requests in flight hold
/// it.
pub(crate) fn refused(refused: ifmatch_azure::inflight::Refused) -> Failure {
    let code = match refused {
        ifmatch_azure::inflight::Refused::TooHeavy { .. } => Code::RequestEntityTooLarge,
        ifmatch_azure::inflight::Refused::Busy { .. } => Code::TooManyRequests,
    };
    Failure::new(code, refused.to_string())
}

/// 400 `BadRequest`.
pub fn bad_request(message: impl Into<String>) -> Failure {
    Failure::new(Code::BadRequest, message)
}

/// 404 `NotFound`.
pub fn not_found() -> Failure {
    Failure::of(Code::NotFound)
}

/// 409 `Conflict`.
pub fn conflict() -> Failure {
    Failure::of(Code::Conflict)
}

/// 412 `PreconditionFailed`.
pub fn precondition_failed() -> Failure {
    Failure::of(Code::PreconditionFailed)
}

/// 503 `ServiceUnavailable`: the backend failed; nothing is known to have changed.
pub fn unavailable(detail: impl std::fmt::Display) -> Failure {
    Failure::new(
        Code::ServiceUnavailable,
        format!("The storage backend failed: {detail}. Retry."),
    )
}

/// 503 `ServiceUnavailable`: a commit carried by another request whose request was dropped
/// while the commit was in flight (`commits.rs`): it may have landed.
pub(crate) fn unknown_outcome() -> Failure {
    Failure::new(
        Code::ServiceUnavailable,
        "The commit's outcome is not known: it may have been applied. Read before retrying.",
    )
}

/// The backend's failure, answered 503.
pub(crate) fn backend(error: TableError) -> Failure {
    unavailable(error)
}

/// 413: a body or a document over 2 MB.
pub(crate) fn too_large() -> Failure {
    Failure::of(Code::RequestEntityTooLarge)
}

/// 429: a write lost more races than it retries.
pub(crate) fn raced() -> Failure {
    Failure::of(Code::TooManyRequests)
}
