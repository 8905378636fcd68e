//! The date and time functions: instants are ISO 8601 strings in UTC with seven digits of
//! fraction (`2026-11-27T10:00:00.0000000Z`, the Table service's `DateTime` spells them),
//! ticks of 100 ns since the Unix epoch, or milliseconds since it (timestamps).

use ifmatch_azure::iso8601::{self, FIRST, LAST, date_of_day, day_of_date};
use serde_json::Value as Json;
use time::macros::format_description;
use time::{Date, Month};

const TICK: i64 = 1;
const MILLISECOND: i64 = 10_000;
const SECOND: i64 = 10_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// A part of an instant, as the functions name it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
}

impl Part {
    /// The part `name` names (`year`, `yyyy`, `yy`, `month`, `mm`, `m`, ...), any case.
    pub(crate) fn of(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "year" | "yyyy" | "yy" => Self::Year,
            "month" | "mm" | "m" => Self::Month,
            "day" | "dd" | "d" => Self::Day,
            "hour" | "hh" => Self::Hour,
            "minute" | "mi" | "n" => Self::Minute,
            "second" | "ss" | "s" => Self::Second,
            "millisecond" | "ms" => Self::Millisecond,
            "microsecond" | "mcs" => Self::Microsecond,
            "nanosecond" | "ns" => Self::Nanosecond,
            _ => return None,
        })
    }

    /// Ticks in one of this part, for the parts of a fixed length (nanoseconds count as a
    /// tick's hundredth: `None`, like months and years).
    fn ticks(self) -> Option<i64> {
        match self {
            Self::Day => Some(DAY),
            Self::Hour => Some(HOUR),
            Self::Minute => Some(MINUTE),
            Self::Second => Some(SECOND),
            Self::Millisecond => Some(MILLISECOND),
            Self::Microsecond => Some(10 * TICK),
            _ => None,
        }
    }
}

/// The ticks since the Unix epoch of a date and time string as Cosmos reads one (the rules
/// `IS_DATETIME` documents): `YYYY-MM-DD`, then `Z`, or a `T` or a space and `hh:mm:ss`, then
/// optionally `.` and one to seven digits of fraction, then optionally `Z`. Always UTC: an
/// offset (`+01:00`) is no date and time here.
pub(crate) fn parse(text: &str) -> Option<i64> {
    let form = format_description!(
        "[year]-[month]-[day][optional [[first [Z][[first [T][ ]][hour]:[minute]:[second][optional [.[subsecond digits:1+]]][optional [Z]]]]]]"
    );
    iso8601::read(text, form, 7)
}

/// An instant `ticks` after the Unix epoch, as ISO 8601 (years 1 to 9999; else undefined).
pub(crate) fn format(ticks: i64) -> Option<Json> {
    (FIRST..=LAST)
        .contains(&ticks)
        .then(|| Json::String(iso8601::write(ticks)))
}

/// Year, month, day, and the ticks into that day, of an instant of the years 1 to 9999 (one
/// outside them is taken as the nearest within).
fn civil(ticks: i64) -> (i64, i64, i64, i64) {
    let ticks = ticks.clamp(FIRST, LAST);
    let date = date_of_day(ticks.div_euclid(DAY)).unwrap_or(Date::MIN);
    let (y, m, d) = (date.year(), u8::from(date.month()), date.day());
    (y.into(), m.into(), d.into(), ticks.rem_euclid(DAY))
}

/// The date of a year, month (1 to 12) and day, when it is one of the years 1 to 9999;
/// `clamped`, a day past the month's last is its last.
fn date(year: i64, month: i64, day: i64, clamped: bool) -> Option<Date> {
    let year = i32::try_from(year)
        .ok()
        .filter(|y| (1..=9999).contains(y))?;
    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    let day = u8::try_from(day).ok()?;
    let day = if clamped {
        day.min(month.length(year))
    } else {
        day
    };
    Date::from_calendar_date(year, month, day).ok()
}

/// `DateTimeAdd`: `n` of `part` added to `ticks` (months keep the day, or the month's last).
pub(crate) fn add(part: Part, n: i64, ticks: i64) -> Option<i64> {
    let added = match part {
        Part::Year | Part::Month => {
            let months = if part == Part::Year {
                n.checked_mul(12)?
            } else {
                n
            };
            let (y, m, d, within) = civil(ticks);
            let total = (y * 12 + m - 1).checked_add(months)?;
            let (year, month) = (total.div_euclid(12), total.rem_euclid(12) + 1);
            day_of_date(date(year, month, d, true)?) * DAY + within
        }
        Part::Nanosecond => ticks.checked_add(n / 100)?,
        _ => ticks.checked_add(n.checked_mul(part.ticks()?)?)?,
    };
    (FIRST..=LAST).contains(&added).then_some(added)
}

/// `DateTimePart`: the part of the instant, as an integer.
pub(crate) fn part(part: Part, ticks: i64) -> i64 {
    let (y, m, d, within) = civil(ticks);
    let fraction = within % SECOND;
    match part {
        Part::Year => y,
        Part::Month => m,
        Part::Day => d,
        Part::Hour => within / HOUR,
        Part::Minute => within / MINUTE % 60,
        Part::Second => within / SECOND % 60,
        Part::Millisecond => fraction / MILLISECOND,
        Part::Microsecond => fraction / 10,
        Part::Nanosecond => fraction * 100,
    }
}

/// `DateTimeDiff`: how many boundaries of `part` lie between `start` and `end` (negative when
/// `end` is before `start`).
pub(crate) fn diff(part: Part, start: i64, end: i64) -> i64 {
    let months = |ticks: i64| {
        let (y, m, ..) = civil(ticks);
        y * 12 + m
    };
    match part {
        Part::Year => civil(end).0 - civil(start).0,
        Part::Month => months(end) - months(start),
        Part::Nanosecond => (end - start) * 100,
        _ => {
            let unit = part.ticks().unwrap_or(TICK);
            end.div_euclid(unit) - start.div_euclid(unit)
        }
    }
}

/// `DateTimeBin`: the start of the bin of `size` parts, counted from `origin`, that holds
/// the instant; for the parts of a fixed length (days and shorter).
pub(crate) fn bin(ticks: i64, part: Part, size: i64, origin: i64) -> Option<i64> {
    let width = part.ticks()?.checked_mul(size)?;
    if width <= 0 {
        return None;
    }
    Some(origin + (ticks - origin).div_euclid(width) * width)
}

/// `DateTimeFromParts`: the instant of its parts (`fraction` in ticks of 100 ns), when they
/// name one.
pub(crate) fn from_parts(parts: &[i64]) -> Option<i64> {
    let get = |at: usize| parts.get(at).copied().unwrap_or(0);
    let (year, month, day) = (get(0), get(1), get(2));
    let (hour, minute, second, fraction) = (get(3), get(4), get(5), get(6));
    let valid = (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..60).contains(&second)
        && (0..SECOND).contains(&fraction);
    let days = day_of_date(date(year, month, day, false).filter(|_| valid)?);
    Some(days * DAY + hour * HOUR + minute * MINUTE + second * SECOND + fraction)
}

/// Ticks in a millisecond, for timestamps.
pub(crate) const TICKS_PER_MILLISECOND: i64 = MILLISECOND;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// At most how many characters one character of a `DateTimeFormat` pattern writes (`g`:
/// `A.D.`), so a pattern's result is charged before it is made.
pub(crate) const FORMAT_GROWTH: usize = 4;

/// `DateTimeFormat`: the instant written by a .NET custom format pattern, in the invariant
/// culture and UTC (`yyyy-MM-dd HH:mm:ss.fff`, `dddd d MMMM`, `h:mm tt`, quoted or
/// `\`-escaped literals). Cosmos keeps the `.` before an `F` fraction that is all zeros
/// (`ss.FFF` of a whole second is `20.`), as its page shows. `None` for a pattern .NET refuses
/// (more than seven `f`, an unclosed quote, a lone `\` or `%` at its end).
pub(crate) fn format_with(ticks: i64, pattern: &str) -> Option<String> {
    let (year, month, day, within) = civil(ticks);
    let weekday = (ticks.div_euclid(DAY) + 4).rem_euclid(7) as usize;
    let (hour, minute, second) = (within / HOUR, within / MINUTE % 60, within / SECOND % 60);
    let fraction = within % SECOND;
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    let number = |out: &mut String, n: i64, width: usize| out.push_str(&format!("{n:0width$}"));
    while at < chars.len() {
        let c = chars[at];
        let run = chars[at..].iter().take_while(|d| **d == c).count();
        let short = |n: i64| if run == 1 { (n, 1) } else { (n, 2) };
        match c {
            'y' => match run {
                1 => number(&mut out, year % 100, 1),
                2 => number(&mut out, year % 100, 2),
                _ => number(&mut out, year, run),
            },
            'M' if run >= 3 => {
                let name = MONTHS[month as usize - 1];
                out.push_str(if run == 3 { &name[..3] } else { name });
            }
            'd' if run >= 3 => {
                let name = WEEKDAYS[weekday];
                out.push_str(if run == 3 { &name[..3] } else { name });
            }
            'M' | 'd' | 'H' | 'h' | 'm' | 's' => {
                let value = match c {
                    'M' => month,
                    'd' => day,
                    'H' => hour,
                    'h' => (hour + 11) % 12 + 1,
                    'm' => minute,
                    _ => second,
                };
                let (value, width) = short(value);
                number(&mut out, value, width);
            }
            'f' | 'F' => {
                if run > 7 {
                    return None;
                }
                let digits = format!("{fraction:07}");
                let digits = &digits[..run];
                out.push_str(match c {
                    'f' => digits,
                    _ => digits.trim_end_matches('0'),
                });
            }
            't' => {
                let noon = if hour < 12 { "AM" } else { "PM" };
                out.push_str(if run == 1 { &noon[..1] } else { noon });
            }
            'z' => out.push_str(["+0", "+00", "+00:00"][run.min(3) - 1]),
            'K' => out.push_str(&"Z".repeat(run)),
            'g' => out.push_str("A.D."),
            '\\' | '%' => {
                let next = *chars.get(at + 1)?;
                if c == '\\' {
                    out.push(next);
                    at += 2;
                } else {
                    // `%` makes the one specifier after it stand alone: `%d` is the day.
                    at += 1;
                }
                continue;
            }
            '\'' | '"' => {
                let close = chars[at + 1..].iter().position(|d| *d == c)?;
                out.extend(&chars[at + 1..at + 1 + close]);
                at += close + 2;
                continue;
            }
            other => {
                out.push(other);
                at += 1;
                continue;
            }
        }
        at += run;
    }
    Some(out)
}
