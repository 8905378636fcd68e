//! Cosmos SQL's system functions, by their upper-case names: what each makes of its
//! arguments, undefined (`None`) for an argument of the wrong type, as Cosmos answers. Every
//! string, array or object a function builds is charged to the meter before it is made.

use std::borrow::Cow;

use serde_json::{Map, Value as Json};

use super::catalog::{Function, Group};
use super::datetime::{self, Part};
use super::meter::{MATCH_WORK, Meter, weight};
use super::value::{Value, compare_for_order, equal, integer, neumaier, num, whole_or};

/// A built-in function of `args` (each possibly undefined).
pub(crate) fn call(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name.group() {
        Group::Math => math(name, args, meter),
        Group::Integer => integers(name, args),
        Group::String => strings(name, args, meter),
        Group::Search => searches(name, args, meter),
        Group::Array => arrays(name, args, meter),
        Group::Set => sets(name, args, meter),
        Group::ArrayNumbers => array_numbers(name, args, meter),
        Group::Type => types(name, args),
        Group::Conditional => conditional(name, args, meter),
        Group::Date => dates(name, args, meter),
        Group::Item => document_id(&args[0]),
        Group::Spatial => super::spatial::call(name, args, meter),
        Group::Text => super::text::call(name, args, meter),
        Group::Vector => super::vector::distance(args, meter),
    }
}

fn text<'v>(value: &'v Value<'_>) -> Option<&'v str> {
    value.as_deref()?.as_str()
}

fn number(value: &Value<'_>) -> Option<f64> {
    value.as_deref()?.as_f64()
}

fn whole(value: &Value<'_>) -> Option<i64> {
    integer(value.as_deref()?)
}

fn flag(value: Option<&Value<'_>>) -> Option<bool> {
    match value {
        None => Some(false),
        Some(value) => value.as_deref()?.as_bool(),
    }
}

/// `value` copied as an argument's result, charged.
fn copied(value: &Value<'_>, meter: &Meter) -> Option<Json> {
    meter.copy(value.as_deref()?)
}

/// The part of `s` from character `start`, `count` characters long (both clamped).
fn chars(s: &str, start: usize, count: usize) -> &str {
    let at = |n: usize| s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    let from = at(start);
    let rest = &s[from..];
    let to = rest
        .char_indices()
        .nth(count)
        .map_or(rest.len(), |(i, _)| i);
    &rest[..to]
}

/// A string of `out`, charged.
fn string(out: &str, meter: &Meter) -> Option<Json> {
    meter.take(out.len())?;
    Some(Json::String(out.to_owned()))
}

/// The longest string `REPLICATE` makes, in characters, as Cosmos documents.
const MAX_REPLICATE: usize = 10_000;

fn math(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::PI => return num(std::f64::consts::PI),
        Function::RAND => return num(meter.random()),
        _ => {}
    }
    let x = number(&args[0])?;
    let value = match name {
        Function::ABS => x.abs(),
        Function::ACOS => x.acos(),
        Function::ASIN => x.asin(),
        Function::ATAN => x.atan(),
        // ATN2(y, x): the arc tangent of y / x, in the quadrant of the point (x, y).
        Function::ATN2 => x.atan2(number(&args[1])?),
        Function::CEILING => x.ceil(),
        Function::COS => x.cos(),
        Function::COT => 1.0 / x.tan(),
        Function::DEGREES => x.to_degrees(),
        Function::EXP => x.exp(),
        Function::FLOOR => x.floor(),
        Function::LOG => match args.get(1).map(number) {
            None => x.ln(),
            Some(Some(10.0)) => x.log10(),
            Some(Some(2.0)) => x.log2(),
            Some(base) => x.ln() / base?.ln(),
        },
        Function::LOG10 => x.log10(),
        Function::NUMBERBIN => {
            let size = match args.get(1) {
                Some(size) => number(size)?,
                None => 1.0,
            };
            if size == 0.0 {
                return None;
            }
            (x / size).floor() * size
        }
        Function::POWER => x.powf(number(&args[1])?),
        Function::RADIANS => x.to_radians(),
        Function::ROUND => x.round(),
        Function::SIGN => x.signum() * f64::from(x != 0.0),
        Function::SIN => x.sin(),
        Function::SQRT => x.sqrt(),
        Function::SQUARE => x * x,
        Function::TAN => x.tan(),
        Function::TRUNC => x.trunc(),
        _ => return None,
    };
    // NaN and the infinities are no JSON: undefined.
    whole_or(value)
}

fn integers(name: Function, args: &[Value<'_>]) -> Option<Json> {
    let a = whole(&args[0])?;
    if name == Function::INTBITNOT {
        return Some(Json::from(!a));
    }
    let b = whole(&args[1])?;
    let value = match name {
        Function::INTADD => a.checked_add(b)?,
        Function::INTSUB => a.checked_sub(b)?,
        Function::INTMUL => a.checked_mul(b)?,
        Function::INTDIV => a.checked_div(b)?,
        Function::INTMOD => a.checked_rem(b)?,
        Function::INTBITAND => a & b,
        Function::INTBITOR => a | b,
        Function::INTBITXOR => a ^ b,
        Function::INTBITLEFTSHIFT => a.checked_shl(u32::try_from(b).ok()?)?,
        Function::INTBITRIGHTSHIFT => a.checked_shr(u32::try_from(b).ok()?)?,
        _ => return None,
    };
    Some(Json::from(value))
}

/// The characters `TRIM` and its kin take off: whitespace, or those of the second argument.
fn trimmed<'s>(name: Function, s: &'s str, set: Option<&str>) -> &'s str {
    let gone = |c: char| set.map_or(c.is_whitespace(), |set| set.contains(c));
    match name {
        Function::LTRIM => s.trim_start_matches(gone),
        Function::RTRIM => s.trim_end_matches(gone),
        _ => s.trim_matches(gone),
    }
}

/// JSON text that must parse as a value of one kind.
fn parsed(s: &str, meter: &Meter, fits: fn(&Json) -> bool) -> Option<Json> {
    meter.take(2 * s.len())?;
    serde_json::from_str::<Json>(s.trim()).ok().filter(fits)
}

fn strings(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::LOWER | Function::UPPER => {
            let s = text(&args[0])?;
            // A case mapping may grow a string, three times at most: charged before it is made.
            meter.take(3 * s.len())?;
            Some(Json::String(match name {
                Function::LOWER => s.to_lowercase(),
                _ => s.to_uppercase(),
            }))
        }
        Function::LENGTH => {
            let s = text(&args[0])?;
            meter.take(s.len())?;
            Some(Json::from(s.chars().count()))
        }
        Function::TRIM | Function::LTRIM | Function::RTRIM => {
            let set = match args.get(1) {
                Some(set) => Some(text(set)?),
                None => None,
            };
            string(trimmed(name, text(&args[0])?, set), meter)
        }
        Function::REVERSE => {
            let s = text(&args[0])?;
            meter.take(s.len())?;
            Some(Json::String(s.chars().rev().collect()))
        }
        Function::CONCAT => {
            let parts: Vec<&str> = args.iter().map(text).collect::<Option<_>>()?;
            meter.take(parts.iter().map(|p| p.len()).sum())?;
            Some(Json::String(parts.concat()))
        }
        Function::SUBSTRING => {
            let s = text(&args[0])?;
            let start = number(&args[1])?.max(0.0) as usize;
            let count = number(&args[2])?.max(0.0) as usize;
            meter.take(s.len())?;
            string(chars(s, start, count), meter)
        }
        Function::LEFT | Function::RIGHT => {
            let s = text(&args[0])?;
            let n = number(&args[1])?.max(0.0) as usize;
            meter.take(s.len())?;
            let part = match name {
                Function::LEFT => chars(s, 0, n),
                _ => chars(s, s.chars().count().saturating_sub(n), usize::MAX),
            };
            string(part, meter)
        }
        Function::REPLACE => {
            let (s, from, to) = (text(&args[0])?, text(&args[1])?, text(&args[2])?);
            // What the result takes is known before it is made: count, charge, then build.
            meter.take(s.len())?;
            let times = s.matches(from).count();
            let built =
                (s.len() - times * from.len()).saturating_add(times.saturating_mul(to.len()));
            meter.take(built.saturating_add(times.saturating_mul(MATCH_WORK)))?;
            Some(Json::String(s.replace(from, to)))
        }
        Function::REPLICATE => {
            let s = text(&args[0])?;
            let times = number(&args[1])?;
            if !(0.0..=MAX_REPLICATE as f64).contains(&times) {
                return None;
            }
            let times = times as usize;
            if s.chars().count().saturating_mul(times) > MAX_REPLICATE {
                return None;
            }
            meter.take(s.len() * times)?;
            Some(Json::String(s.repeat(times)))
        }
        Function::TOSTRING => match args[0].as_deref()? {
            Json::String(s) => string(s, meter),
            other => {
                meter.take(weight(other))?;
                Some(Json::String(other.to_string()))
            }
        },
        Function::STRINGJOIN => {
            let (Json::Array(items), separator) = (args[0].as_deref()?, text(&args[1])?) else {
                return None;
            };
            let parts: Vec<&str> = items.iter().map(Json::as_str).collect::<Option<_>>()?;
            let size = parts.iter().map(|p| p.len() + separator.len()).sum();
            meter.take(size)?;
            Some(Json::String(parts.join(separator)))
        }
        Function::STRINGSPLIT => {
            let (s, separator) = (text(&args[0])?, text(&args[1])?);
            meter.take(2 * s.len() + 16)?;
            // An empty separator splits nothing: the string whole, as Cosmos answers.
            let parts: Vec<Json> = match separator.is_empty() {
                true => vec![Json::String(s.to_owned())],
                false => s
                    .split(separator)
                    .map(|p| Json::String(p.to_owned()))
                    .collect(),
            };
            meter.take(MATCH_WORK * parts.len())?;
            Some(Json::Array(parts))
        }
        Function::STRINGTOARRAY => parsed(text(&args[0])?, meter, Json::is_array),
        Function::STRINGTOOBJECT => parsed(text(&args[0])?, meter, Json::is_object),
        Function::STRINGTONUMBER => parsed(text(&args[0])?, meter, Json::is_number),
        Function::STRINGTOBOOLEAN => parsed(text(&args[0])?, meter, Json::is_boolean),
        Function::STRINGTONULL => parsed(text(&args[0])?, meter, Json::is_null),
        _ => None,
    }
}

/// A string function that looks for one string in another.
fn searches(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    let boolean = |b: bool| Some(Json::Bool(b));
    match name {
        Function::STARTSWITH | Function::ENDSWITH | Function::CONTAINS | Function::STRINGEQUALS => {
            let ignore = flag(args.get(2))?;
            let (s, t) = (text(&args[0])?, text(&args[1])?);
            // Folding case may grow a string, three times at most.
            meter.take((s.len() + t.len()) * if ignore { 3 } else { 1 })?;
            let (s, t) = match ignore {
                true => (Cow::Owned(s.to_lowercase()), Cow::Owned(t.to_lowercase())),
                false => (Cow::Borrowed(s), Cow::Borrowed(t)),
            };
            boolean(match name {
                Function::STARTSWITH => s.starts_with(&*t),
                Function::ENDSWITH => s.ends_with(&*t),
                Function::CONTAINS => s.contains(&*t),
                _ => s == t,
            })
        }
        Function::INDEX_OF => {
            let (s, t) = (text(&args[0])?, text(&args[1])?);
            let from = match args.get(2) {
                Some(v) => number(v)?.max(0.0) as usize,
                None => 0,
            };
            meter.take(s.len() + t.len())?;
            let offset = s.len() - chars(s, from, usize::MAX).len();
            let found = s[offset..]
                .find(t)
                .map(|at| s[..offset + at].chars().count());
            Some(Json::from(found.map_or(-1, |i| i as i64)))
        }
        Function::SUBSTRINGAFTER
        | Function::SUBSTRINGBEFORE
        | Function::LASTSUBSTRINGAFTER
        | Function::LASTSUBSTRINGBEFORE => {
            let (s, delimiter) = (text(&args[0])?, text(&args[1])?);
            meter.take(s.len() + delimiter.len())?;
            let found = match matches!(
                name,
                Function::LASTSUBSTRINGAFTER | Function::LASTSUBSTRINGBEFORE
            ) {
                true => s.rfind(delimiter),
                false => s.find(delimiter),
            };
            // Without the delimiter there is nothing before or after it: the empty string,
            // as XPath's functions of these names answer (Cosmos's pages do not say).
            let part = found.map_or("", |at| {
                match matches!(
                    name,
                    Function::SUBSTRINGAFTER | Function::LASTSUBSTRINGAFTER
                ) {
                    true => &s[at + delimiter.len()..],
                    false => &s[..at],
                }
            });
            string(part, meter)
        }
        Function::LASTINDEXOF => {
            let (s, t) = (text(&args[0])?, text(&args[1])?);
            meter.take(s.len() + t.len())?;
            let found = s.rfind(t).map(|at| s[..at].chars().count());
            Some(Json::from(found.map_or(-1, |i| i as i64)))
        }
        Function::CONTAINS_ALL_CI
        | Function::CONTAINS_ALL_CS
        | Function::CONTAINS_ANY_CI
        | Function::CONTAINS_ANY_CS => {
            let s = text(&args[0])?;
            let wanted: Vec<&str> = args[1..].iter().map(text).collect::<Option<_>>()?;
            let fold = matches!(name, Function::CONTAINS_ALL_CI | Function::CONTAINS_ANY_CI);
            let size: usize = s.len() + wanted.iter().map(|w| w.len()).sum::<usize>();
            meter.take(size * if fold { 3 } else { 1 } * wanted.len().max(1))?;
            let s = folded(s, fold);
            let mut found = wanted.iter().map(|w| s.contains(&*folded(w, fold)));
            boolean(
                match matches!(name, Function::CONTAINS_ALL_CI | Function::CONTAINS_ALL_CS) {
                    true => found.all(|f| f),
                    false => found.any(|f| f),
                },
            )
        }
        Function::REGEXMATCH => {
            let (s, pattern) = (text(&args[0])?, text(&args[1])?);
            let modifiers = match args.get(2) {
                Some(m) => text(m)?,
                None => "",
            };
            boolean(meter.regex_match(s, pattern, modifiers)?)
        }
        _ => None,
    }
}

fn arrays(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::ARRAY_CONTAINS => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            let wanted = args[1].as_deref()?;
            let partial = flag(args.get(2))?;
            let found = items
                .iter()
                .any(|item| contains(item, wanted, partial, meter));
            (!meter.exceeded()).then_some(Json::Bool(found))
        }
        Function::ARRAY_CONTAINS_ANY | Function::ARRAY_CONTAINS_ALL => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            let mut wanted = args[1..].iter().filter_map(|w| w.as_deref());
            let found = |w: &Json| items.iter().any(|item| contains(item, w, false, meter));
            let answer = match name {
                Function::ARRAY_CONTAINS_ANY => wanted.any(found),
                _ => wanted.all(found),
            };
            (!meter.exceeded()).then_some(Json::Bool(answer))
        }
        Function::ARRAY_LENGTH => match args[0].as_deref() {
            Some(Json::Array(items)) => Some(Json::from(items.len())),
            _ => None,
        },
        Function::ARRAY_SLICE => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            let len = items.len() as i64;
            let start = number(&args[1])? as i64;
            let start = if start < 0 {
                (len + start).max(0)
            } else {
                start.min(len)
            } as usize;
            let count = match args.get(2) {
                Some(v) => number(v)?.max(0.0) as usize,
                None => items.len(),
            };
            let slice = items[start..].iter().take(count);
            Some(Json::Array(
                slice.map(|item| meter.copy(item)).collect::<Option<_>>()?,
            ))
        }
        Function::ARRAY_CONCAT => {
            let mut out = Vec::new();
            for arg in args {
                let Json::Array(items) = arg.as_deref()? else {
                    return None;
                };
                for item in items {
                    out.push(meter.copy(item)?);
                }
            }
            Some(Json::Array(out))
        }
        Function::OBJECTTOARRAY => {
            let Some(Json::Object(fields)) = args[0].as_deref() else {
                return None;
            };
            let key = match args.get(1) {
                Some(k) => text(k)?,
                None => "k",
            };
            let value = match args.get(2) {
                Some(v) => text(v)?,
                None => "v",
            };
            let mut out = Vec::with_capacity(fields.len());
            for (name, field) in fields {
                meter.take(name.len() + key.len() + value.len() + 8)?;
                let mut pair = Map::new();
                pair.insert(key.to_owned(), Json::String(name.clone()));
                pair.insert(value.to_owned(), meter.copy(field)?);
                out.push(Json::Object(pair));
            }
            Some(Json::Array(out))
        }
        _ => None,
    }
}

/// A function of an array's numbers taken together: their sum, mean, median, least or greatest.
fn array_numbers(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::ARRAY_SUM | Function::ARRAY_AVG | Function::ARRAY_MEDIAN => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            meter.take(8 * items.len())?;
            let mut numbers: Vec<f64> = items.iter().map(Json::as_f64).collect::<Option<_>>()?;
            if numbers.is_empty() {
                return (name == Function::ARRAY_SUM).then(|| Json::from(0));
            }
            let total = || {
                let (sum, lost) = numbers.iter().fold((0.0, 0.0), neumaier);
                sum + lost
            };
            match name {
                Function::ARRAY_SUM => whole_or(total()),
                Function::ARRAY_AVG => num(total() / numbers.len() as f64),
                _ => {
                    numbers.sort_by(f64::total_cmp);
                    let middle = numbers.len() / 2;
                    whole_or(match numbers.len() % 2 {
                        1 => numbers[middle],
                        _ => (numbers[middle - 1] + numbers[middle]) / 2.0,
                    })
                }
            }
        }
        Function::ARRAY_MIN | Function::ARRAY_MAX => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            let order = |a: &&Json, b: &&Json| compare_for_order(Some(a), Some(b));
            let chosen = match name {
                Function::ARRAY_MIN => items.iter().min_by(order),
                _ => items.iter().max_by(order),
            };
            meter.copy(chosen?)
        }
        _ => None,
    }
}

/// A function of two arrays as sets.
fn sets(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::SETDIFFERENCE | Function::SETEQUAL => {
            let (Some(Json::Array(a)), Some(Json::Array(b))) =
                (args[0].as_deref(), args[1].as_deref())
            else {
                return None;
            };
            meter.take(
                a.len().saturating_mul(b.len().max(1)) + b.len().saturating_mul(a.len().max(1)),
            )?;
            let within =
                |x: &Json, set: &[Json]| set.iter().any(|y| equal(x, y, meter) == Some(true));
            if name == Function::SETEQUAL {
                let same = a.iter().all(|x| within(x, b)) && b.iter().all(|y| within(y, a));
                return (!meter.exceeded()).then_some(Json::Bool(same));
            }
            let mut out: Vec<Json> = Vec::new();
            for item in a {
                if !within(item, b) && !within(item, &out) {
                    out.push(meter.copy(item)?);
                }
            }
            (!meter.exceeded()).then_some(Json::Array(out))
        }
        Function::SETINTERSECT | Function::SETUNION => {
            let (Some(Json::Array(a)), Some(Json::Array(b))) =
                (args[0].as_deref(), args[1].as_deref())
            else {
                return None;
            };
            meter.take(a.len().saturating_mul(b.len().max(1)))?;
            let mut out: Vec<Json> = Vec::new();
            let add = |item: &Json, out: &mut Vec<Json>| -> Option<()> {
                if !out
                    .iter()
                    .any(|seen| equal(seen, item, meter) == Some(true))
                {
                    out.push(meter.copy(item)?);
                }
                Some(())
            };
            match name {
                Function::SETUNION => {
                    for item in a.iter().chain(b) {
                        add(item, &mut out)?;
                    }
                }
                _ => {
                    for item in a {
                        if b.iter()
                            .any(|other| equal(item, other, meter) == Some(true))
                        {
                            add(item, &mut out)?;
                        }
                    }
                }
            }
            (!meter.exceeded()).then_some(Json::Array(out))
        }
        _ => None,
    }
}

/// Whether `item` is `wanted`, or, `partial`, an object holding each of its fields.
fn contains(item: &Json, wanted: &Json, partial: bool, meter: &Meter) -> bool {
    match (partial, item, wanted) {
        (true, Json::Object(have), Json::Object(want)) => want.iter().all(|(k, v)| {
            have.get(k)
                .is_some_and(|h| equal(h, v, meter) == Some(true))
        }),
        _ => equal(item, wanted, meter) == Some(true),
    }
}

fn types(name: Function, args: &[Value<'_>]) -> Option<Json> {
    let value = args[0].as_deref();
    let answer = match name {
        Function::IS_DEFINED => value.is_some(),
        Function::IS_NULL => matches!(value, Some(Json::Null)),
        Function::IS_NUMBER => matches!(value, Some(Json::Number(_))),
        Function::IS_FINITE_NUMBER => value.and_then(Json::as_f64).is_some_and(f64::is_finite),
        Function::IS_INTEGER => matches!(value, Some(Json::Number(n)) if n.is_i64()),
        Function::IS_STRING => matches!(value, Some(Json::String(_))),
        Function::IS_BOOL => matches!(value, Some(Json::Bool(_))),
        Function::IS_ARRAY => matches!(value, Some(Json::Array(_))),
        Function::IS_OBJECT => matches!(value, Some(Json::Object(_))),
        _ => matches!(
            value,
            Some(Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_))
        ),
    };
    Some(Json::Bool(answer))
}

fn conditional(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    match name {
        Function::IIF => match args[0].as_deref() {
            Some(Json::Bool(true)) => copied(&args[1], meter),
            _ => copied(&args[2], meter),
        },
        _ => {
            let at = whole(&args[0])?;
            let chosen = usize::try_from(at).ok().filter(|at| *at >= 1)?;
            copied(args.get(chosen)?, meter)
        }
    }
}

fn dates(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    let instant = |value: &Value<'_>| datetime::parse(text(value)?);
    let part = |value: &Value<'_>| Part::of(text(value)?);
    match name {
        Function::GETCURRENTDATETIME | Function::GETCURRENTDATETIMESTATIC => {
            datetime::format(meter.instant()?)
        }
        Function::GETCURRENTTICKS | Function::GETCURRENTTICKSSTATIC => {
            Some(Json::from(meter.instant()?))
        }
        Function::GETCURRENTTIMESTAMP | Function::GETCURRENTTIMESTAMPSTATIC => Some(Json::from(
            meter.instant()?.div_euclid(datetime::TICKS_PER_MILLISECOND),
        )),
        Function::DATETIMEADD => {
            let ticks = datetime::add(part(&args[0])?, whole(&args[1])?, instant(&args[2])?)?;
            datetime::format(ticks)
        }
        // `NOW()` is the page's instant; `NOW(part, n)` and `AGO(part, n)` move it by `n`.
        Function::NOW | Function::AGO => {
            let now = meter.instant()?;
            let ticks = match args {
                [] => now,
                [part_name, n] => {
                    let n = whole(n)?;
                    let n = if name == Function::AGO {
                        n.checked_neg()?
                    } else {
                        n
                    };
                    datetime::add(part(part_name)?, n, now)?
                }
                _ => return None,
            };
            datetime::format(ticks)
        }
        Function::YEAR | Function::MONTH | Function::DAY => {
            let which = match name {
                Function::YEAR => Part::Year,
                Function::MONTH => Part::Month,
                _ => Part::Day,
            };
            Some(Json::from(datetime::part(which, instant(&args[0])?)))
        }
        Function::IS_DATETIME => Some(Json::Bool(
            text(&args[0]).and_then(datetime::parse).is_some(),
        )),
        Function::DATETIMEFORMAT => {
            let (ticks, pattern) = (instant(&args[0])?, text(&args[1])?);
            meter.take(datetime::FORMAT_GROWTH * pattern.len() + 32)?;
            datetime::format_with(ticks, pattern).map(Json::String)
        }
        Function::DATETIMEPART => Some(Json::from(datetime::part(
            part(&args[0])?,
            instant(&args[1])?,
        ))),
        Function::DATETIMEDIFF => Some(Json::from(datetime::diff(
            part(&args[0])?,
            instant(&args[1])?,
            instant(&args[2])?,
        ))),
        Function::DATETIMEBIN => {
            let size = match args.get(2) {
                Some(size) => whole(size)?,
                None => 1,
            };
            let origin = match args.get(3) {
                Some(origin) => instant(origin)?,
                None => 0,
            };
            datetime::format(datetime::bin(
                instant(&args[0])?,
                part(&args[1])?,
                size,
                origin,
            )?)
        }
        Function::DATETIMEFROMPARTS => {
            let parts: Vec<i64> = args.iter().map(whole).collect::<Option<_>>()?;
            datetime::format(datetime::from_parts(&parts)?)
        }
        Function::DATETIMETOTICKS => Some(Json::from(instant(&args[0])?)),
        Function::DATETIMETOTIMESTAMP => Some(Json::from(
            instant(&args[0])?.div_euclid(datetime::TICKS_PER_MILLISECOND),
        )),
        Function::TICKSTODATETIME => datetime::format(whole(&args[0])?),
        Function::TIMESTAMPTODATETIME => {
            datetime::format(whole(&args[0])?.checked_mul(datetime::TICKS_PER_MILLISECOND)?)
        }
        _ => None,
    }
}

/// `DocumentId`: a document's number, unique among the documents of its container (Cosmos's
/// is unique in a physical partition): the 53 low bits of its `_rid`'s digest, so that every
/// client reads it exactly. Undefined for what is not a document read from the container.
fn document_id(item: &Value<'_>) -> Option<Json> {
    use base64::Engine;
    let rid = item.as_deref()?.get("_rid")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(rid).ok()?;
    let digest = u64::from_be_bytes(bytes.try_into().ok()?);
    Some(Json::from(digest & ((1 << 53) - 1)))
}

/// `text` in lower case when `fold`.
fn folded(text: &str, fold: bool) -> Cow<'_, str> {
    match fold {
        true => Cow::Owned(text.to_lowercase()),
        false => Cow::Borrowed(text),
    }
}
