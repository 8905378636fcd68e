//! The front's errors: a [`Failure`] is an answer with Azure's error code and what to say
//! about it, made from whatever went wrong (credentials, headers, the backends).

use http::header;
use http::header::{HeaderMap, HeaderValue};

use super::answers::{Answer, answer};
use crate::body::ResponseBody;
use crate::error_code::ErrorCode;
use crate::store::{Objects, StoreError};
use ifmatch_azure::ERROR_CODE;

/// An error answer: the code, and what to say about it.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) code: ErrorCode,
    pub(super) detail: Option<String>,
    /// The backend could not say whether the change was made (see
    /// [`StoreError::may_have_landed`]): what the change referred to must be kept.
    pub(super) may_have_landed: bool,
    /// A `WWW-Authenticate` challenge (a refused bearer token).
    pub(super) challenge: Option<String>,
}

pub(super) type Result<T, E = Failure> = std::result::Result<T, E>;

/// What a handler of a front over the objects `O` returns.
pub(super) type Answered<O> = Result<Answer<<O as Objects>::Reader>>;

impl Failure {
    /// 413 `RequestBodyTooLarge`, `detail` saying the most the body may hold.
    pub(super) fn too_large(detail: &'static str) -> Self {
        Self::with_detail(ErrorCode::RequestBodyTooLarge, detail)
    }

    pub(super) fn with_detail(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: Some(detail.into()),
            may_have_landed: false,
            challenge: None,
        }
    }
}

impl From<ifmatch_azure::auth::Denied> for Failure {
    fn from(denied: ifmatch_azure::auth::Denied) -> Self {
        Self {
            challenge: denied.challenge,
            ..Self::with_detail(denied.code.into(), denied.detail)
        }
    }
}

impl From<ifmatch_azure::CommonCode> for Failure {
    fn from(code: ifmatch_azure::CommonCode) -> Self {
        ErrorCode::from(code).into()
    }
}

impl From<ErrorCode> for Failure {
    fn from(code: ErrorCode) -> Self {
        Self {
            code,
            detail: None,
            may_have_landed: false,
            challenge: None,
        }
    }
}

impl From<crate::lease::HeaderError> for Failure {
    fn from(e: crate::lease::HeaderError) -> Self {
        Self::with_detail(e.code, format!("{} Header: {}", e.code.message(), e.header))
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let full = "The server has no space left for this request. Retry later.";
        let (code, detail) = match &e {
            StoreError::ContainerNotFound => (ErrorCode::ContainerNotFound, None),
            StoreError::NotFound { .. } => (ErrorCode::BlobNotFound, None),
            StoreError::TooLarge { .. } => (ErrorCode::RequestBodyTooLarge, None),
            StoreError::Body(_) => (ErrorCode::IncompleteBody, None),
            StoreError::LengthRequired => (ErrorCode::MissingContentLengthHeader, None),
            StoreError::Unavailable(_) => (ErrorCode::ServerBusy, None),
            StoreError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
                (ErrorCode::ServerBusy, Some(full.to_owned()))
            }
            _ => (ErrorCode::InternalError, None),
        };
        if code == ErrorCode::InternalError || code == ErrorCode::ServerBusy {
            // The error names what failed (its key, its backend); its causes follow it.
            tracing::error!(error = %chain(&e), "backend failure");
        }
        Self {
            code,
            detail,
            may_have_landed: e.may_have_landed(),
            challenge: None,
        }
    }
}

/// `error` and each of its causes its message does not already say, joined by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !out.contains(&said) {
            out.push_str(": ");
            out.push_str(&said);
        }
        cause = next.source();
    }
    out
}

pub(super) fn error_answer<R>(failure: Failure, head: bool) -> Answer<R> {
    let code = failure.code;
    let mut out = HeaderMap::with_capacity(8);
    out.insert(ERROR_CODE, code.header_value());
    if let Some(challenge) = failure
        .challenge
        .and_then(|c| HeaderValue::try_from(c).ok())
    {
        out.insert(header::WWW_AUTHENTICATE, challenge);
    }
    let mut response = answer(code.status(), out);
    if !head {
        let body = code.xml_body(failure.detail.as_deref().unwrap_or(code.message()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        *response.body_mut() = ResponseBody::full(body);
    }
    response
}
