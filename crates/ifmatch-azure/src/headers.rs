//! The headers and extensions every Azure dialect answers with.

use http::HeaderName;

/// `x-ms-request-id`
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-request-id");

/// `x-ms-error-code`
pub const ERROR_CODE: HeaderName = HeaderName::from_static("x-ms-error-code");

/// `x-ms-date`, which every dialect's signatures take in place of `Date`.
pub const X_MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");

/// `Content-MD5`, which `http` names no constant for.
pub const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");

/// The extension on every answer to a request whose operation could be read: Azure's name of
/// it (`GetBlob`, `InsertEntity`), for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationName(pub &'static str);
