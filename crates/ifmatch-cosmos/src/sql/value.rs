//! The values queries compute with, and the rules every part of evaluation shares: undefined
//! is `None`, numbers are JSON's (whole ones as integers), `=` and `<` hold between two values
//! of one type only, and `ORDER BY` orders across types.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value as Json;

use super::meter::Meter;

/// A value as the evaluator holds it: borrowed from the document or the query, or built;
/// `None` is undefined.
pub(crate) type Value<'a> = Option<Cow<'a, Json>>;

/// `value` as a value of its own: a borrowed one is copied, and the copy charged.
pub(crate) fn owned(value: Value<'_>, meter: &Meter) -> Option<Json> {
    match value? {
        Cow::Borrowed(borrowed) => meter.copy(borrowed),
        Cow::Owned(built) => Some(built),
    }
}

pub(crate) fn num(n: f64) -> Option<Json> {
    serde_json::Number::from_f64(n).map(Json::Number)
}

/// A number as a 64-bit integer, for the bitwise operators and the integer functions: whole
/// numbers only (exact when they were written as integers).
pub(crate) fn integer(value: &Json) -> Option<i64> {
    if let Some(exact) = value.as_i64() {
        return Some(exact);
    }
    let n = value.as_f64()?;
    (n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_992.0).then_some(n as i64)
}

/// A number, whole ones as integers.
pub(crate) fn whole_or(value: f64) -> Option<Json> {
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        Some(Json::from(value as i64))
    } else {
        num(value)
    }
}

/// `=` between two values: `None` (undefined) when their types differ. Each value compared,
/// and each byte of two strings, is a unit of work.
pub(crate) fn equal(a: &Json, b: &Json, meter: &Meter) -> Option<bool> {
    meter.take(1)?;
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => Some(x.as_f64() == y.as_f64()),
        (Json::Null, Json::Null) => Some(true),
        (Json::Bool(x), Json::Bool(y)) => Some(x == y),
        (Json::String(x), Json::String(y)) => {
            meter.take(x.len().min(y.len()))?;
            Some(x == y)
        }
        (Json::Array(x), Json::Array(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (a, b) in x.iter().zip(y) {
                if equal(a, b, meter) != Some(true) {
                    return (!meter.exceeded()).then_some(false);
                }
            }
            Some(true)
        }
        (Json::Object(x), Json::Object(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (k, v) in x {
                if y.get(k).is_none_or(|w| equal(v, w, meter) != Some(true)) {
                    return (!meter.exceeded()).then_some(false);
                }
            }
            Some(true)
        }
        _ => None,
    }
}

/// `<` and its kin between two values of one type (numbers, strings, booleans, null); `None`
/// for two types, or for arrays and objects. Comparing two strings costs their bytes.
pub(crate) fn compare(a: &Json, b: &Json, meter: &Meter) -> Option<Ordering> {
    if let (Json::String(x), Json::String(y)) = (a, b) {
        meter.take(x.len().min(y.len()))?;
    }
    scalar_order(a, b)
}

fn scalar_order(a: &Json, b: &Json) -> Option<Ordering> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Json::String(x), Json::String(y)) => Some(x.cmp(y)),
        (Json::Bool(x), Json::Bool(y)) => Some(x.cmp(y)),
        (Json::Null, Json::Null) => Some(Ordering::Equal),
        _ => None,
    }
}

/// The order of `ORDER BY` across types: undefined, null, booleans, numbers, strings, then
/// arrays and objects.
pub fn compare_for_order(a: Option<&Json>, b: Option<&Json>) -> Ordering {
    let rank = |v: Option<&Json>| match v {
        None => 0,
        Some(Json::Null) => 1,
        Some(Json::Bool(_)) => 2,
        Some(Json::Number(_)) => 3,
        Some(Json::String(_)) => 4,
        Some(Json::Array(_)) => 5,
        Some(Json::Object(_)) => 6,
    };
    match (a, b) {
        (Some(x), Some(y)) if rank(a) == rank(b) => scalar_order(x, y).unwrap_or(Ordering::Equal),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// One step of Neumaier's compensated sum: (the sum, what its rounding lost so far).
pub(crate) fn neumaier((sum, lost): (f64, f64), n: &f64) -> (f64, f64) {
    let next = sum + n;
    let lost = lost
        + match sum.abs() >= n.abs() {
            true => (sum - next) + n,
            false => (n - next) + sum,
        };
    (next, lost)
}

/// `value` printed so that equal values print alike, whatever the order of their objects'
/// properties (kept as a document has them) and however their numbers are spelled (`1` and
/// `1.0`): what `DISTINCT` and `GROUP BY` tell values apart by.
pub(crate) fn printed(value: &Json) -> String {
    fn print(value: &Json, out: &mut String) {
        match value {
            Json::Number(n) => out.push_str(&n.as_f64().unwrap_or(f64::NAN).to_string()),
            Json::Array(items) => {
                out.push('[');
                for item in items {
                    print(item, out);
                    out.push(',');
                }
                out.push(']');
            }
            Json::Object(object) => {
                let mut names: Vec<&String> = object.keys().collect();
                names.sort_unstable();
                out.push('{');
                for name in names {
                    out.push_str(&Json::String(name.clone()).to_string());
                    out.push(':');
                    print(&object[name], out);
                    out.push(',');
                }
                out.push('}');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    print(value, &mut out);
    out
}
