//! HTTP dates (RFC 9110 5.6.7): the three formats, at whole seconds, before 1970 too.
//!
//! The `httpdate` crate parses and formats IMF-fixdate, the obsolete RFC 850 form and asctime,
//! but only from 1970 on. A client may send any valid date (`If-Unmodified-Since: Sun, 06 Nov
//! 1960 08:49:37 GMT` is valid, and must fail against any resource modified since), so
//! [`HttpDate`] holds signed seconds and reaches earlier years through the Gregorian
//! calendar's 400-year cycle: 146,097 days, a whole number of weeks, so a date 400 years on
//! has the same month, day and weekday.

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, header::HeaderName};

/// 400 Gregorian years, in seconds: the calendar and the weekdays repeat after it.
const CYCLE: i64 = 146_097 * 86_400;

/// An HTTP date: whole seconds since the Unix epoch (negative before it), ordered
/// chronologically. Parses the three formats of RFC 9110 5.6.7 for the years 1 to 9999, and
/// displays as IMF-fixdate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpDate {
    secs: i64,
}

impl HttpDate {
    /// The date `secs` seconds after the Unix epoch (before it, if negative).
    pub fn from_unix_seconds(secs: i64) -> Self {
        Self { secs }
    }

    /// Seconds since the Unix epoch (negative before it).
    pub fn unix_seconds(self) -> i64 {
        self.secs
    }
}

impl From<SystemTime> for HttpDate {
    fn from(time: SystemTime) -> Self {
        let secs = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs() as i64,
            // Whole seconds, rounded down: -0.5 s is the second that starts at -1 s.
            Err(before) => -(before.duration().as_secs_f64().ceil() as i64),
        };
        Self { secs }
    }
}

impl From<HttpDate> for SystemTime {
    fn from(date: HttpDate) -> Self {
        match u64::try_from(date.secs) {
            Ok(after) => UNIX_EPOCH + Duration::from_secs(after),
            Err(_) => UNIX_EPOCH - Duration::from_secs(date.secs.unsigned_abs()),
        }
    }
}

/// A value that is not a valid HTTP date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a valid HTTP date")]
pub struct InvalidDate;

impl FromStr for HttpDate {
    type Err = InvalidDate;

    fn from_str(text: &str) -> Result<Self, InvalidDate> {
        if let Ok(date) = text.parse::<httpdate::HttpDate>() {
            return Ok(SystemTime::from(date).into());
        }
        // Before 1970: move the four-digit year on by whole cycles into the range `httpdate`
        // takes, parse, and move the instant back by as many cycles.
        let (start, year) = four_digit_year(text).ok_or(InvalidDate)?;
        if !(1..1970).contains(&year) {
            return Err(InvalidDate);
        }
        let cycles = (1970 - year + 399) / 400;
        let shifted = format!(
            "{}{:04}{}",
            &text[..start],
            year + 400 * cycles,
            &text[start + 4..]
        );
        let date = shifted
            .parse::<httpdate::HttpDate>()
            .map_err(|_| InvalidDate)?;
        let secs = HttpDate::from(SystemTime::from(date)).secs;
        Ok(Self {
            secs: secs - i64::from(cycles) * CYCLE,
        })
    }
}

impl fmt::Display for HttpDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cycles = if self.secs < 0 {
            (-self.secs).div_euclid(CYCLE) + 1
        } else {
            0
        };
        let shifted = SystemTime::from(HttpDate::from_unix_seconds(self.secs + cycles * CYCLE));
        if cycles == 0 {
            return fmt::Display::fmt(&httpdate::HttpDate::from(shifted), f);
        }
        let text = httpdate::fmt_http_date(shifted);
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT", the year at bytes 12 to 16.
        let year: i64 = text[12..16].parse().map_err(|_| fmt::Error)?;
        write!(
            f,
            "{}{:04}{}",
            &text[..12],
            year - 400 * cycles,
            &text[16..]
        )
    }
}

/// The byte offset and value of the one run of exactly four digits standing alone in `text`:
/// the year of an IMF-fixdate or asctime date.
fn four_digit_year(text: &str) -> Option<(usize, i32)> {
    let bytes = text.as_bytes();
    let mut found = None;
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let alone =
            (start == 0 || bytes[start - 1] == b' ') && (i == bytes.len() || bytes[i] == b' ');
        if i - start == 4 && alone {
            if found.is_some() {
                return None;
            }
            found = Some((start, text[start..i].parse().ok()?));
        }
    }
    found
}

/// Parses one field value as an HTTP date; `None` when it is not a valid one.
pub fn parse_http_date(value: &HeaderValue) -> Option<HttpDate> {
    value.to_str().ok()?.trim_matches([' ', '\t']).parse().ok()
}

/// Parses a field value as an HTTP date the way a cache reads `Expires` (RFC 9111 5.3 asks
/// for the three formats; senders get the rest wrong): names in any case, and the weekday,
/// which the date already fixes, not checked. `None` when it is no date even so (an extra
/// space, say).
pub fn parse_http_date_leniently(value: &HeaderValue) -> Option<HttpDate> {
    if let Some(date) = parse_http_date(value) {
        return Some(date);
    }
    let text = value.to_str().ok()?.trim_matches([' ', '\t']);
    // Each run of letters as the formats spell it: `GMT`, else capitalised (`Thu`, `Aug`,
    // `Thursday`).
    let mut cased = String::with_capacity(text.len());
    let mut start_of_word = true;
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            cased.push(if start_of_word {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            });
            start_of_word = false;
        } else {
            cased.push(c);
            start_of_word = true;
        }
    }
    let cased = cased.replace("Gmt", "GMT");
    if let Ok(date) = cased.parse() {
        return Some(date);
    }
    let (weekday, rest) = cased.split_at(cased.find([',', ' '])?);
    let long = weekday.len() > 3;
    ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        .into_iter()
        .map(|day| match (long, day) {
            (false, day) => day.to_owned(),
            (true, "Tue") => "Tuesday".to_owned(),
            (true, "Wed") => "Wednesday".to_owned(),
            (true, "Thu") => "Thursday".to_owned(),
            (true, "Sat") => "Saturday".to_owned(),
            (true, day) => format!("{day}day"),
        })
        .find_map(|day| format!("{day}{rest}").parse().ok())
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

/// The IMF-fixdate field value for `date`, written where it is made rather than in a `String`
/// first (every blob's answer carries one: `Last-Modified`).
///
/// A server answers the same few dates again and again (a blob's `Last-Modified` on each of
/// its reads), so the last value made on this thread is kept: a clone of it is a reference
/// count's increment, where writing the date is about 800 instructions (`callgrind`, a blob's
/// 304: `scripts/serve-instructions`).
pub fn date_header_value(date: HttpDate) -> HeaderValue {
    thread_local! {
        static LAST: RefCell<Option<(HttpDate, HeaderValue)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((made, value)) if *made == date => value.clone(),
        _ => {
            let mut text = Imf::default();
            fmt::write(&mut text, format_args!("{date}")).expect("an IMF-fixdate is 29 bytes");
            let value = HeaderValue::from_bytes(&text.bytes[..text.len])
                .expect("IMF-fixdate is visible ASCII");
            *last = Some((date, value.clone()));
            value
        }
    })
}

/// Room for one IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`: 29 bytes).
#[derive(Default)]
struct Imf {
    bytes: [u8; 29],
    len: usize,
}

impl fmt::Write for Imf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_field_value_is_the_imf_fixdate_of_any_year() {
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Sun, 06 Nov 1960 08:49:37 GMT",
            "Mon, 01 Jan 0001 00:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            let date: super::HttpDate = text.parse().unwrap();
            assert_eq!(super::date_header_value(date), text);
        }
    }

    #[test]
    fn the_kept_value_is_the_last_dates_alone() {
        let texts = [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:38 GMT",
        ];
        for text in [texts[0], texts[0], texts[1], texts[0], texts[1], texts[1]] {
            let date: super::HttpDate = text.parse().unwrap();
            assert_eq!(super::date_header_value(date), text);
        }
    }

    #[test]
    fn dates_read_leniently() {
        let read = |v: &str| {
            super::parse_http_date_leniently(&http::HeaderValue::from_str(v).unwrap())
                .map(|d| d.to_string())
        };
        let when = Some("Thu, 18 Aug 2050 02:01:18 GMT".to_owned());
        for value in [
            "Thu, 18 Aug 2050 02:01:18 GMT",
            "THU, 18 Aug 2050 02:01:18 GMT",
            "Thu, 18 AUG 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02:01:18 gMT",
            "Mon, 18 Aug 2050 02:01:18 GMT",
            "Thursday, 18-Aug-50 02:01:18 GMT",
            "Monday, 18-Aug-50 02:01:18 GMT",
            "Thu Aug 18 02:01:18 2050",
            "Sun Aug 18 02:01:18 2050",
        ] {
            assert_eq!(read(value), when, "{value}");
        }
        for value in ["Thu, 18 Aug 2050  02:01:18 GMT", "0", "", "tomorrow"] {
            assert_eq!(read(value), None, "{value}");
        }
    }

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
    fn dates_before_1970_parse_order_and_print() {
        let cases = [
            ("Sun, 06 Nov 1960 08:49:37 GMT", -288_803_423),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
            ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
            ("Mon, 01 Jan 1601 00:00:00 GMT", -11_644_473_600),
            ("Mon, 01 Jan 0001 00:00:00 GMT", -62_135_596_800),
        ];
        for (text, secs) in cases {
            let date: HttpDate = text.parse().unwrap();
            assert_eq!(date.unix_seconds(), secs, "{text}");
            assert_eq!(date.to_string(), text, "{text}");
        }
        let asctime: HttpDate = "Sun Nov  6 08:49:37 1960".parse().unwrap();
        assert_eq!(asctime.unix_seconds(), -288_803_423);
        let old: HttpDate = "Sun, 06 Nov 1960 08:49:37 GMT".parse().unwrap();
        assert!(old < to_http_date(UNIX_EPOCH));
        // A wrong weekday is still invalid before 1970, as after.
        assert!("Mon, 06 Nov 1960 08:49:37 GMT".parse::<HttpDate>().is_err());
        assert!("Sun, 06 Nov 0000 08:49:37 GMT".parse::<HttpDate>().is_err());
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
