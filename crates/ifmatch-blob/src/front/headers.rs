//! The names of the headers several operations read or answer with.

use http::header::HeaderName;

pub(super) const BLOB_TYPE: HeaderName = HeaderName::from_static("x-ms-blob-type");
pub(super) const SEQUENCE_NUMBER: HeaderName = HeaderName::from_static("x-ms-blob-sequence-number");
pub(super) const MS_RANGE: HeaderName = HeaderName::from_static("x-ms-range");
pub(super) use ifmatch_azure::MS_VERSION;
pub(super) const PUBLIC_ACCESS: HeaderName = HeaderName::from_static("x-ms-blob-public-access");
pub(super) use ifmatch_azure::CONTENT_MD5;
pub(super) const CONTENT_CRC64: HeaderName = HeaderName::from_static("x-ms-content-crc64");
pub(super) const STRUCTURED_BODY: HeaderName = HeaderName::from_static("x-ms-structured-body");
pub(super) const RANGE_MD5: HeaderName = HeaderName::from_static("x-ms-range-get-content-md5");
/// The largest part whose MD5 `x-ms-range-get-content-md5` asks for.
pub(super) const RANGE_MD5_MAX: u64 = 4 << 20;
