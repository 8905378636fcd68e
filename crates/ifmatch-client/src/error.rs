//! What a request can end in, typed by the dialect's error code.

use http::StatusCode;
use ifmatch_blob::ErrorCode;

/// A failed request: the answer's status and error code, or a transport failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error.
    #[error("{status} {}: {message}", code.as_deref().unwrap_or("(no error code)"))]
    Status {
        /// The status.
        status: StatusCode,
        /// `x-ms-error-code`, when the answer has one.
        code: Option<String>,
        /// The XML body's message, or the body.
        message: String,
    },
    /// The request did not get an answer (connection refused, timeout, ...).
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    /// The arguments cannot make a request (a bad URL or connection string).
    #[error("{0}")]
    Invalid(String),
    /// A lease this client held was lost (expired, broken or taken) before the work was done.
    #[error("the lease on {0} was lost")]
    LeaseLost(String),
    /// Waited longer than asked.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
}

impl Error {
    /// The dialect's error code, when the server gave one this crate knows.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Status {
                code: Some(code), ..
            } => ErrorCode::ALL.iter().copied().find(|c| c.as_str() == code),
            _ => None,
        }
    }

    /// The status, when the server answered.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// 412: a condition (`If-Match`, ...) failed: someone else wrote first.
    pub fn is_precondition_failed(&self) -> bool {
        self.status() == Some(StatusCode::PRECONDITION_FAILED)
            && self.code() == Some(ErrorCode::ConditionNotMet)
    }

    /// 404: the blob or container is not there.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND)
    }

    /// 409 `BlobAlreadyExists` / `ContainerAlreadyExists`: a create-only write found one.
    pub fn is_already_exists(&self) -> bool {
        matches!(
            self.code(),
            Some(ErrorCode::BlobAlreadyExists | ErrorCode::ContainerAlreadyExists)
        )
    }

    /// 409: another holder has the lease (`LeaseAlreadyPresent`) or it is breaking.
    pub fn is_lease_taken(&self) -> bool {
        matches!(
            self.code(),
            Some(ErrorCode::LeaseAlreadyPresent | ErrorCode::LeaseIsBreakingAndCannotBeAcquired)
        )
    }

    /// The server did not take this lease id (expired, broken, released or another's).
    pub fn is_lease_refused(&self) -> bool {
        matches!(
            self.code(),
            Some(
                ErrorCode::LeaseIdMismatchWithLeaseOperation
                    | ErrorCode::LeaseIdMismatchWithBlobOperation
                    | ErrorCode::LeaseIdMissing
                    | ErrorCode::LeaseNotPresentWithLeaseOperation
                    | ErrorCode::LeaseNotPresentWithBlobOperation
                    | ErrorCode::LeaseIsBrokenAndCannotBeRenewed
            )
        )
    }

    /// Worth retrying as it is: 503, 500, or no answer at all.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Transport(_) => true,
            Self::Status { status, .. } => status.is_server_error(),
            _ => false,
        }
    }
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
