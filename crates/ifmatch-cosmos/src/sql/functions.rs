//! Cosmos SQL's system functions, by their upper-case names: what each makes of its
//! arguments, undefined (`None`) for an argument of the wrong type, as Cosmos answers. Every
//! string, array or object a function builds is charged to the meter before it is made.

use std::borrow::Cow;

use serde_json::Value as Json;

use super::eval::{Value, equal, whole_or};
use super::meter::{Meter, weight};

fn text<'v>(value: &'v Value<'_>) -> Option<&'v str> {
    value.as_deref()?.as_str()
}

fn number(value: &Value<'_>) -> Option<f64> {
    value.as_deref()?.as_f64()
}

fn flag(value: Option<&Value<'_>>) -> Option<bool> {
    match value {
        None => Some(false),
        Some(value) => value.as_deref()?.as_bool(),
    }
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

/// A built-in function of `args` (each possibly undefined).
pub(crate) fn call(name: &str, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    let boolean = |b: bool| Some(Json::Bool(b));
    match name {
        "STARTSWITH" | "ENDSWITH" | "CONTAINS" | "STRINGEQUALS" => {
            let ignore = flag(args.get(2))?;
            let (s, t) = (text(&args[0])?, text(&args[1])?);
            // Folding case may grow a string, three times at most.
            meter.take((s.len() + t.len()) * if ignore { 3 } else { 1 })?;
            let (s, t) = match ignore {
                true => (Cow::Owned(s.to_lowercase()), Cow::Owned(t.to_lowercase())),
                false => (Cow::Borrowed(s), Cow::Borrowed(t)),
            };
            boolean(match name {
                "STARTSWITH" => s.starts_with(&*t),
                "ENDSWITH" => s.ends_with(&*t),
                "CONTAINS" => s.contains(&*t),
                _ => s == t,
            })
        }
        "LOWER" | "UPPER" => {
            let s = text(&args[0])?;
            // A case mapping may grow a string, three times at most: charged before it is made.
            meter.take(3 * s.len())?;
            Some(Json::String(match name {
                "LOWER" => s.to_lowercase(),
                _ => s.to_uppercase(),
            }))
        }
        "LENGTH" => {
            let s = text(&args[0])?;
            meter.take(s.len())?;
            Some(Json::from(s.chars().count()))
        }
        "TRIM" => string(text(&args[0])?.trim(), meter),
        "LTRIM" => string(text(&args[0])?.trim_start(), meter),
        "RTRIM" => string(text(&args[0])?.trim_end(), meter),
        "REVERSE" => {
            let s = text(&args[0])?;
            meter.take(s.len())?;
            Some(Json::String(s.chars().rev().collect()))
        }
        "CONCAT" => {
            let parts: Vec<&str> = args.iter().map(text).collect::<Option<_>>()?;
            meter.take(parts.iter().map(|p| p.len()).sum())?;
            Some(Json::String(parts.concat()))
        }
        "SUBSTRING" => {
            let s = text(&args[0])?;
            let start = number(&args[1])?.max(0.0) as usize;
            let count = number(&args[2])?.max(0.0) as usize;
            meter.take(s.len())?;
            string(chars(s, start, count), meter)
        }
        "LEFT" | "RIGHT" => {
            let s = text(&args[0])?;
            let n = number(&args[1])?.max(0.0) as usize;
            meter.take(s.len())?;
            let part = match name {
                "LEFT" => chars(s, 0, n),
                _ => chars(s, s.chars().count().saturating_sub(n), usize::MAX),
            };
            string(part, meter)
        }
        "INDEX_OF" => {
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
        "REPLACE" => {
            let (s, from, to) = (text(&args[0])?, text(&args[1])?, text(&args[2])?);
            // What the result takes is known before it is made: count, charge, then build.
            meter.take(s.len())?;
            let times = s.matches(from).count();
            meter.take(
                (s.len() - times * from.len()).saturating_add(times.saturating_mul(to.len())),
            )?;
            Some(Json::String(s.replace(from, to)))
        }
        "REPLICATE" => {
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
        "TOSTRING" => match args[0].as_deref()? {
            Json::String(s) => string(s, meter),
            other => {
                meter.take(weight(other))?;
                Some(Json::String(other.to_string()))
            }
        },
        "IS_DEFINED" => boolean(args[0].is_some()),
        "IS_NULL" => boolean(matches!(args[0].as_deref(), Some(Json::Null))),
        "IS_NUMBER" => boolean(matches!(args[0].as_deref(), Some(Json::Number(_)))),
        "IS_STRING" => boolean(matches!(args[0].as_deref(), Some(Json::String(_)))),
        "IS_BOOL" => boolean(matches!(args[0].as_deref(), Some(Json::Bool(_)))),
        "IS_ARRAY" => boolean(matches!(args[0].as_deref(), Some(Json::Array(_)))),
        "IS_OBJECT" => boolean(matches!(args[0].as_deref(), Some(Json::Object(_)))),
        "IS_PRIMITIVE" => boolean(matches!(
            args[0].as_deref(),
            Some(Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_))
        )),
        "ARRAY_CONTAINS" => {
            let Some(Json::Array(items)) = args[0].as_deref() else {
                return None;
            };
            let wanted = args[1].as_deref()?;
            let partial = flag(args.get(2))?;
            let found = items.iter().any(|item| match (partial, item, wanted) {
                (true, Json::Object(have), Json::Object(want)) => want.iter().all(|(k, v)| {
                    have.get(k)
                        .is_some_and(|h| equal(h, v, meter) == Some(true))
                }),
                _ => equal(item, wanted, meter) == Some(true),
            });
            (!meter.exceeded()).then_some(Json::Bool(found))
        }
        "ARRAY_LENGTH" => match args[0].as_deref() {
            Some(Json::Array(items)) => Some(Json::from(items.len())),
            _ => None,
        },
        "ARRAY_SLICE" => {
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
        "ARRAY_CONCAT" => {
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
        "STRINGJOIN" => {
            let (Json::Array(items), separator) = (args[0].as_deref()?, text(&args[1])?) else {
                return None;
            };
            let parts: Vec<&str> = items.iter().map(Json::as_str).collect::<Option<_>>()?;
            let size = parts.iter().map(|p| p.len() + separator.len()).sum();
            meter.take(size)?;
            Some(Json::String(parts.join(separator)))
        }
        _ => {
            let x = number(&args[0])?;
            let value = match name {
                "ABS" => x.abs(),
                "FLOOR" => x.floor(),
                "CEILING" => x.ceil(),
                "ROUND" => x.round(),
                "SQRT" => x.sqrt(),
                "SIGN" => x.signum() * f64::from(x != 0.0),
                "TRUNC" => x.trunc(),
                "POWER" => x.powf(number(&args[1])?),
                _ => return None,
            };
            whole_or(value)
        }
    }
}
