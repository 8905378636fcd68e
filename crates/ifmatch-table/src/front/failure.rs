//! The front's failures, answered as Azure's JSON errors with their codes ([`ErrorCode`]).

use http::HeaderValue;
use serde_json::{Value as Json, json};

use super::answers::json_answer;
use super::asked::{Answer, Asked};
use crate::error_code::ErrorCode;
use crate::odata;
use crate::store::TableError;
use crate::write::Refused;

/// `x-ms-error-code`.
pub(crate) const ERROR_CODE: &str = "x-ms-error-code";

/// A failure, answered as Azure's JSON error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    status: u16,
    /// The code's name (the dialect's [`ErrorCode`], or a code of the checks it shares).
    code: &'static str,
    message: String,
}

impl Failure {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status().as_u16(),
            code: code.as_str(),
            message: message.into(),
        }
    }

    /// A failure of the checks the table dialect shares with the blob dialect (credentials),
    /// with the code and status they give.
    pub(crate) fn shared(code: ifmatch_azure::CommonCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status().as_u16(),
            code: code.as_str(),
            message: message.into(),
        }
    }

    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// This failure as the operation at `index` of a batch: its message starts `"{index}:"`,
    /// where the SDKs read which operation failed.
    pub(crate) fn at_index(mut self, index: usize) -> Self {
        self.message = format!("{index}:{}", self.message);
        self
    }

    /// Azure's JSON error body.
    pub(crate) fn json(&self) -> Json {
        json!({"odata.error": {
            "code": self.code,
            "message": {"lang": "en-US", "value": self.message},
        }})
    }

    pub(crate) fn answer(&self) -> Answer {
        let mut answer = json_answer(self.status, &self.json());
        answer
            .headers_mut()
            .insert(ERROR_CODE, HeaderValue::from_static(self.code));
        answer
    }
}

impl From<Refused> for Failure {
    fn from(refused: Refused) -> Self {
        Self::new(refused.code, refused.code.as_str())
    }
}

impl From<odata::OdataError> for Failure {
    fn from(error: odata::OdataError) -> Self {
        Self::new(error.code, error.detail)
    }
}

/// Azure's JSON error with `code` and `message`: what a host answers for the front.
pub fn failure(code: ErrorCode, message: &str) -> Answer {
    Failure::new(code, message).answer()
}

/// The JSON error of a check the table dialect shares with the blob dialect (credentials).
pub fn denial(code: ifmatch_azure::CommonCode, message: &str) -> Answer {
    Failure::shared(code, message).answer()
}

pub(crate) fn table_error(error: TableError) -> Failure {
    match error {
        TableError::TableNotFound(name) => {
            Failure::new(ErrorCode::TableNotFound, format!("table {name} not found"))
        }
        TableError::Conflict { .. } => Failure::new(ErrorCode::Conflict, "a write came first"),
        TableError::Generic { .. } => Failure::new(
            ErrorCode::ServerBusy,
            "the storage did not answer; try again",
        ),
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(ErrorCode::InvalidInput, message)
}

/// Refuses a key outside the range a table SAS reaches.
pub(crate) fn reach(asked: &Asked<'_>, (pk, rk): (&str, &str)) -> Result<(), Failure> {
    match asked.within {
        Some(range) if !range.contains(pk, rk) => Err(Failure::new(
            ErrorCode::AuthorizationFailure,
            "the shared access signature does not reach this entity's keys",
        )),
        _ => Ok(()),
    }
}
