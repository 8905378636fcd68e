//! Instants as Azure's services spell them in ISO 8601 (`2026-11-24T10:00:00.0000000Z`), read
//! and written with the `time` crate, here alone. The dialects differ only in which forms they
//! take, and each says so with a format description of its own beside its rules: a SAS's
//! times ([`crate::auth::iso8601`]), the Table service's `Edm.DateTime`
//! (`ifmatch_table::DateTime`), Cosmos's date and time strings (its SQL's `datetime`).
//!
//! ```
//! use ifmatch_azure::iso8601;
//! use time::macros::format_description;
//!
//! let form = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
//! let ticks = iso8601::read("2026-11-24T10:00:00Z", form, 0).unwrap();
//! assert_eq!(iso8601::write(ticks), "2026-11-24T10:00:00.0000000Z");
//! assert_eq!(iso8601::read("2026-02-29T10:00:00Z", form, 0), None, "not a leap year");
//! ```

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::parsing::Parsed;
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// Ticks of 100 ns in a second: Azure keeps its instants to the tick.
pub const TICKS_PER_SECOND: i64 = 10_000_000;

/// Ticks from the Unix epoch to 0001-01-01T00:00:00Z, the first instant written.
pub const FIRST: i64 = -62_135_596_800 * TICKS_PER_SECOND;

/// Ticks from the Unix epoch to 9999-12-31T23:59:59.9999999Z, the last instant written.
pub const LAST: i64 = 253_402_300_800 * TICKS_PER_SECOND - 1;

/// What [`write`] writes: `2026-11-24T10:00:00.0000000Z`.
const WRITTEN: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:7]Z");

/// The widest offset from UTC a place on Earth keeps (Kiribati's, +14:00).
const MOST_OFFSET_HOURS: i8 = 14;

/// The instant that `text` writes in the form `format` describes, in ticks of 100 ns since
/// the Unix epoch, UTC (an offset in the text applied): `None` unless the whole text is of
/// that form, a real date of the years 1 to 9999 and a time of day, its fraction at most
/// `most_digits` digits, its offset at most 14 hours. What the form leaves out is zero: the
/// time of a date alone, the seconds of `hh:mm`, the offset of a text that writes none.
pub fn read(text: &str, format: &[BorrowedFormatItem<'_>], most_digits: usize) -> Option<i64> {
    // `time` takes a sign before a year; no dialect writes one.
    if !text.starts_with(|c: char| c.is_ascii_digit()) || fraction_digits(text) > most_digits {
        return None;
    }
    let mut parsed = Parsed::new();
    if !parsed.parse_items(text.as_bytes(), format).ok()?.is_empty() {
        return None;
    }
    let date = Date::from_calendar_date(parsed.year()?, parsed.month()?, parsed.day()?.get());
    let time = Time::from_hms_nano(
        parsed.hour_24().unwrap_or(0),
        parsed.minute().unwrap_or(0),
        parsed.second().unwrap_or(0),
        parsed.subsecond().unwrap_or(0),
    );
    let hours = parsed.offset_hour().unwrap_or(0);
    let minutes = parsed.offset_minute_signed().unwrap_or(0);
    if hours.abs() > MOST_OFFSET_HOURS {
        return None;
    }
    let offset = UtcOffset::from_hms(hours, minutes, 0).ok()?;
    let at = PrimitiveDateTime::new(date.ok()?, time.ok()?).assume_offset(offset);
    let ticks = i64::try_from(at.unix_timestamp_nanos() / 100).ok()?;
    (FIRST..=LAST).contains(&ticks).then_some(ticks)
}

/// The digits of `text`'s fraction of a second: those after its first `.`.
fn fraction_digits(text: &str) -> usize {
    text.split_once('.').map_or(0, |(_, fraction)| {
        fraction.bytes().take_while(u8::is_ascii_digit).count()
    })
}

/// The instant `ticks` of 100 ns after the Unix epoch, as Azure writes its instants (a Table
/// `Timestamp`, a blob snapshot's or version's id): UTC, seven digits of fraction, fixed width,
/// so that such texts sort as their instants do. An instant outside the years 1 to 9999 is
/// written as the nearest within them.
pub fn write(ticks: i64) -> String {
    let ticks = ticks.clamp(FIRST, LAST);
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ticks) * 100)
        .expect("the years 1 to 9999 are within time's range");
    at.format(WRITTEN)
        .expect("every part of the form is in an OffsetDateTime")
}

/// The instant of a text [`write()`] wrote (a snapshot's or a version's id), in ticks since the
/// Unix epoch; `None` for any other text.
pub fn read_written(text: &str) -> Option<i64> {
    read(text, WRITTEN, 7)
}

/// [`write()`] of the instant `seconds` after the Unix epoch and `ticks` of 100 ns more.
pub fn write_seconds(seconds: i64, ticks: u32) -> String {
    write(
        seconds
            .saturating_mul(TICKS_PER_SECOND)
            .saturating_add(i64::from(ticks)),
    )
}

/// The Julian day of 1970-01-01, the Unix epoch's.
const EPOCH_JULIAN_DAY: i64 = 2_440_588;

/// The date of the day `days` after 1970-01-01, when it is one of the years 1 to 9999.
pub fn date_of_day(days: i64) -> Option<Date> {
    let julian = i32::try_from(days.checked_add(EPOCH_JULIAN_DAY)?).ok()?;
    Date::from_julian_day(julian)
        .ok()
        .filter(|d| (1..=9999).contains(&d.year()))
}

/// The days from 1970-01-01 to `date` (negative before it).
pub fn day_of_date(date: Date) -> i64 {
    i64::from(date.to_julian_day()) - EPOCH_JULIAN_DAY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_counted_from_the_epoch_within_the_years_written() {
        let date = |y, m: u8, d| Date::from_calendar_date(y, m.try_into().unwrap(), d).unwrap();
        assert_eq!(day_of_date(date(1970, 1, 1)), 0);
        assert_eq!(day_of_date(date(2000, 3, 1)), 11_017);
        assert_eq!(date_of_day(11_016), Some(date(2000, 2, 29)));
        let (first, last) = (
            FIRST / TICKS_PER_SECOND / 86_400,
            LAST / TICKS_PER_SECOND / 86_400,
        );
        assert_eq!(date_of_day(first), Some(date(1, 1, 1)));
        assert_eq!(date_of_day(last), Some(date(9999, 12, 31)));
        assert_eq!(
            (date_of_day(first - 1), date_of_day(last + 1)),
            (None, None)
        );
        assert_eq!(date_of_day(i64::MAX), None);
    }

    #[test]
    fn the_first_and_last_instants_are_written_and_read_back() {
        assert_eq!(write(FIRST), "0001-01-01T00:00:00.0000000Z");
        assert_eq!(write(LAST), "9999-12-31T23:59:59.9999999Z");
        assert_eq!(write(LAST + 1), write(LAST), "past the last, the last");
        assert_eq!(write(0), "1970-01-01T00:00:00.0000000Z");
        assert_eq!(write(-1), "1969-12-31T23:59:59.9999999Z");
        for ticks in [FIRST, -1, 0, 17_953_344_001_234_567, LAST] {
            assert_eq!(read_written(&write(ticks)), Some(ticks));
        }
        assert_eq!(read_written("0000-12-31T23:59:59.9999999Z"), None);
        assert_eq!(read_written("+2026-11-24T10:00:00.0000000Z"), None);
        assert_eq!(
            read_written("2026-11-24T10:00:00.000000Z"),
            None,
            "six digits"
        );
    }

    #[test]
    fn offsets_are_applied_up_to_fourteen_hours() {
        let form = format_description!(
            "[year]-[month]-[day]T[hour]:[minute][offset_hour sign:mandatory]:[offset_minute]"
        );
        let hour = 3600 * TICKS_PER_SECOND;
        assert_eq!(read("1970-01-01T14:00+14:00", form, 0), Some(0));
        assert_eq!(read("1970-01-01T00:00-01:30", form, 0), Some(hour * 3 / 2));
        assert_eq!(read("1970-01-01T00:00+15:00", form, 0), None);
    }
}
