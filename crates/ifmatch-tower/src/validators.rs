//! The validators a response carries.

use http::header::{self, HeaderMap};
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::Validators;

/// The validators a response carries.
pub(crate) fn validators_of(headers: &HeaderMap) -> Option<Validators> {
    let etag = EntityTag::from_header(headers.get(header::ETAG)?).ok()?;
    let last_modified = headers.get(header::LAST_MODIFIED).and_then(parse_http_date);
    Some(Validators::new(Some(etag), last_modified))
}
