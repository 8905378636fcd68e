//! HTTP dates (RFC 9110 5.6.7): the three formats, at whole seconds.
//!
//! [`HttpDate`] comes from the `httpdate` crate: it parses IMF-fixdate, the obsolete RFC 850
//! form and asctime, holds whole seconds, and orders chronologically.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue, header::HeaderName};
pub use httpdate::HttpDate;

/// Parses one field value as an HTTP date; `None` when it is not a valid one.
pub fn parse_http_date(value: &HeaderValue) -> Option<HttpDate> {
    value.to_str().ok()?.trim_matches([' ', '\t']).parse().ok()
}

/// The date in the one field line of `name`.
///
/// `None` when the field is absent, invalid, or has more than one field line: RFC 9110 asks
/// recipients to ignore date conditions that are invalid or lists (13.1.3, 13.1.4). A list on
/// one line fails to parse as a date, so it is ignored too.
pub fn single_date(headers: &HeaderMap, name: &HeaderName) -> Option<HttpDate> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    parse_http_date(first)
}

/// `time` truncated to the whole second, as HTTP dates carry it.
pub fn to_http_date(time: SystemTime) -> HttpDate {
    HttpDate::from(time)
}

/// The IMF-fixdate field value for `date`.
pub fn date_header_value(date: HttpDate) -> HeaderValue {
    HeaderValue::try_from(date.to_string()).expect("IMF-fixdate is visible ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn three_formats_parse_to_the_same_second() {
        let want = to_http_date(UNIX_EPOCH + Duration::from_secs(784_111_777));
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            let value = HeaderValue::from_static(text);
            assert_eq!(parse_http_date(&value), Some(want), "{text}");
        }
    }

    #[test]
    fn invalid_dates_and_lists_are_ignored() {
        for text in [
            "",
            "yesterday",
            "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "1994-11-06T08:49:37Z",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::header::IF_MODIFIED_SINCE,
                HeaderValue::from_str(text).unwrap(),
            );
            assert_eq!(
                single_date(&headers, &http::header::IF_MODIFIED_SINCE),
                None,
                "{text}"
            );
        }
        let mut headers = HeaderMap::new();
        for _ in 0..2 {
            headers.append(
                http::header::IF_MODIFIED_SINCE,
                HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
            );
        }
        assert_eq!(
            single_date(&headers, &http::header::IF_MODIFIED_SINCE),
            None
        );
    }

    #[test]
    fn truncates_to_whole_seconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_000_999);
        assert_eq!(
            to_http_date(t),
            to_http_date(UNIX_EPOCH + Duration::from_secs(1000))
        );
        assert_eq!(
            date_header_value(to_http_date(t)),
            "Thu, 01 Jan 1970 00:16:40 GMT"
        );
    }
}
