//! The Queue service's error answers: a status, an `x-ms-error-code` header and an XML body
//! `<Error><Code>…</Code><Message>…</Message></Error>`, as the blob service's. The codes only
//! queues have are declared here; the ones every storage service shares (credentials, bad
//! headers, a busy server) are `ifmatch_azure`'s.

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use ifmatch_azure::{Answer, ERROR_CODE};

ifmatch_azure::error_codes! {
    /// An error code of the Queue service alone, with its status and Azure's message.
    #[non_exhaustive]
    pub enum ErrorCode {
    /// The queue is not there.
    QueueNotFound = NOT_FOUND, "The specified queue does not exist.";
    /// A queue of the name is there, with other metadata.
    QueueAlreadyExists = CONFLICT, "The specified queue already exists.";
    /// No message of the id is there.
    MessageNotFound = NOT_FOUND, "The specified message does not exist.";
    /// The message is there, but was dequeued or updated again since the receipt was given.
    PopReceiptMismatch = BAD_REQUEST, "The specified pop receipt did not match the pop receipt for a dequeued message.";
    /// A message of more than 64 KiB.
    MessageTooLarge = BAD_REQUEST, "The message exceeds the maximum allowed size.";
    /// A queue name that breaks the naming rules.
    InvalidResourceName = BAD_REQUEST, "The specifed resource name contains invalid characters.";
    /// A query parameter of the right form, out of its range.
    OutOfRangeQueryParameterValue = BAD_REQUEST, "One of the query parameters specified in the request URI is outside the permissible range.";
    /// A query parameter the operation needs is missing.
    MissingRequiredQueryParameter = BAD_REQUEST, "A query parameter that's mandatory for this request is not specified.";
    /// A query parameter that is not of its form.
    InvalidQueryParameterValue = BAD_REQUEST, "Value for one of the query parameters specified in the request URI is invalid.";
    /// A body that is not the XML the operation takes.
    InvalidXmlDocument = BAD_REQUEST, "XML specified is not syntactically valid.";
    /// A method the resource does not take.
    UnsupportedHttpVerb = METHOD_NOT_ALLOWED, "The resource doesn't support the specified HTTP verb.";
    /// A path or query that names no operation.
    InvalidUri = BAD_REQUEST, "The requested URI does not represent any resource on the server.";
    }
}

/// An error answer: its status, its code and what to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The status.
    pub status: StatusCode,
    /// Azure's code.
    pub code: &'static str,
    /// What failed, and what to do.
    pub message: String,
    /// A `WWW-Authenticate` challenge (a refused bearer token).
    pub challenge: Option<String>,
}

impl Failure {
    /// `code` with `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            challenge: None,
        }
    }

    /// A code every storage service shares, with `message`.
    pub fn shared(code: ifmatch_azure::CommonCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            challenge: None,
        }
    }

    /// The answer (no body for a `HEAD`).
    pub fn answer(&self, head: bool) -> Answer {
        let body = match head {
            true => Bytes::new(),
            false => Bytes::from(ifmatch_azure::xml_error_body(self.code, &self.message)),
        };
        let mut answer = http::Response::new(body);
        *answer.status_mut() = self.status;
        let headers = answer.headers_mut();
        headers.insert(ERROR_CODE, HeaderValue::from_static(self.code));
        if let Some(challenge) =
            (self.challenge.as_deref()).and_then(|c| HeaderValue::try_from(c).ok())
        {
            headers.insert(header::WWW_AUTHENTICATE, challenge);
        }
        if !head {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            );
        }
        answer
    }
}

impl From<ErrorCode> for Failure {
    fn from(code: ErrorCode) -> Self {
        Self::new(code, code.message())
    }
}

impl From<ifmatch_azure::CommonCode> for Failure {
    fn from(code: ifmatch_azure::CommonCode) -> Self {
        Self::shared(code, code.message())
    }
}

impl From<ifmatch_azure::auth::Denied> for Failure {
    fn from(denied: ifmatch_azure::auth::Denied) -> Self {
        Self {
            challenge: denied.challenge,
            ..Self::shared(denied.code, denied.detail)
        }
    }
}

impl From<ifmatch_table::TableError> for Failure {
    /// The backend failed: 503, nothing known to have changed but what the caller says.
    fn from(error: ifmatch_table::TableError) -> Self {
        Self::shared(
            ifmatch_azure::CommonCode::ServerBusy,
            format!("The storage backend failed: {error}. Retry."),
        )
    }
}

/// `Result` with a [`Failure`].
pub type Result<T, E = Failure> = std::result::Result<T, E>;

/// 400 `OutOfRangeQueryParameterValue` naming `name` and its range.
pub(crate) fn out_of_range(name: &str, range: &str) -> Failure {
    Failure::new(
        ErrorCode::OutOfRangeQueryParameterValue,
        format!("{name} is out of its range: {range}. QueryParameterName: {name}"),
    )
}
