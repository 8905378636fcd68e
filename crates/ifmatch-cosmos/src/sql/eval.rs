//! Evaluating an expression against a row, as Cosmos does: `None` is *undefined* (a missing
//! property, a comparison of two types, arithmetic on a string), which `WHERE` treats as false
//! and a projection leaves out; `AND`, `OR` and `NOT` are three-valued.
//!
//! Values are borrowed from the document and the query while they can be (`c.a.b` copies
//! nothing), and every value built or copied is charged to the evaluation's [`Meter`] first:
//! a spent meter makes the rest undefined, and its holder answers with the bound's error.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Map, Value as Json};

use super::catalog::Function;
use super::like::like;
use super::meter::Meter;
use super::tree::{Expr, Op, Query};
use super::value::{Value, compare, equal, integer, num, owned, whole_or};

/// How a subquery's rows are made and collected, which the maker of a scope knows (`rows.rs`):
/// an expression only asks for its results.
pub(crate) type Subquery = for<'a, 'e> fn(&Query, &Scope<'a, 'e>) -> Vec<Json>;

/// What an expression is evaluated against: a row's slots, the container's item (in a `FROM`
/// source), and, once rows are grouped, the group's keys and aggregates.
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a, 'e> {
    /// The container's item, for [`Expr::Root`].
    pub document: Option<&'a Json>,
    /// The row: each source's value, the enclosing queries' first.
    pub env: &'e [Cow<'a, Json>],
    pub meter: &'a Meter,
    /// A group's `GROUP BY` expressions with their values, and its aggregates' values.
    pub group: Option<Grouped<'e>>,
    /// How a subquery is answered in this scope.
    pub subquery: Subquery,
}

/// What a group's projection sees in place of its rows.
#[derive(Clone, Copy)]
pub(crate) struct Grouped<'e> {
    pub by: &'e [Expr],
    pub keys: &'e [Option<Json>],
    pub aggregates: &'e [Option<Json>],
}

fn built<'a>(value: Json) -> Value<'a> {
    Some(Cow::Owned(value))
}

/// Whether `expr` holds (is `true`) in `scope`.
pub(crate) fn holds(expr: &Expr, scope: &Scope<'_, '_>) -> bool {
    matches!(value(expr, scope).as_deref(), Some(Json::Bool(true)))
}

/// The value of `expr`.
///
/// Chains (`c.a.b.c`, `a AND b AND c`, `1 + 2 + 3`) nest the tree as deep as they are long,
/// down its left side: that side is walked in a loop, not by recursion, so only parentheses,
/// calls and right operands (at most [`MAX_DEPTH`](super::parse::MAX_DEPTH) deep) take the stack.
pub(crate) fn value<'a>(expr: &'a Expr, s: &Scope<'a, '_>) -> Value<'a> {
    if let Some(group) = &s.group
        && let Some(at) = group.by.iter().position(|by| by == expr)
    {
        return group.keys[at].clone().map(Cow::Owned);
    }
    match expr {
        Expr::Member(..) | Expr::Index(..) | Expr::Binary(..) => {
            let mut spine = Vec::new();
            let mut base = expr;
            while let Expr::Member(inner, _) | Expr::Index(inner, _) | Expr::Binary(_, inner, _) =
                base
            {
                if s.group.is_some_and(|g| g.by.contains(base)) {
                    break;
                }
                spine.push(base);
                base = inner;
            }
            let mut current = value(base, s);
            for step in spine.iter().rev() {
                current = match step {
                    Expr::Member(_, name) => current.and_then(|v| member(v, name)),
                    Expr::Index(_, index) => current.and_then(|v| indexed(v, value(index, s)?)),
                    Expr::Binary(op, _, right) => binary(*op, current, right, s),
                    _ => unreachable!("the spine holds chains only"),
                };
            }
            current
        }
        Expr::Literal(literal) => Some(Cow::Borrowed(&**literal)),
        Expr::Undefined | Expr::NonFinite(_) | Expr::Name(_) => None,
        Expr::Root => s.document.map(Cow::Borrowed),
        // A grouped row's slots are its group's keys: a slot outside them is undefined.
        Expr::Var(_) if s.group.is_some() => None,
        Expr::Var(slot) => match s.env.get(*slot)? {
            Cow::Borrowed(borrowed) => Some(Cow::Borrowed(borrowed)),
            Cow::Owned(value) => s.meter.copy(value).map(Cow::Owned),
        },
        Expr::Negate(inner) => num(-value(inner, s)?.as_f64()?).map(Cow::Owned),
        Expr::BitNot(inner) => built(Json::from(!(integer(value(inner, s)?.as_ref())? as i32))),
        Expr::Not(inner) => match value(inner, s)?.as_ref() {
            Json::Bool(b) => built(Json::Bool(!b)),
            _ => None,
        },
        Expr::Between(tested, low, high, negated) => {
            let tested = value(tested, s)?;
            let (low, high) = (value(low, s)?, value(high, s)?);
            let above = compare(&tested, &low, s.meter)? != Ordering::Less;
            let below = compare(&tested, &high, s.meter)? != Ordering::Greater;
            built(Json::Bool((above && below) != *negated))
        }
        Expr::In(tested, list, negated) => {
            let tested = value(tested, s)?;
            let found = list
                .iter()
                .filter_map(|e| value(e, s))
                .any(|candidate| equal(&tested, &candidate, s.meter) == Some(true));
            built(Json::Bool(found != *negated))
        }
        Expr::Like(tested, pattern, escape, negated) => {
            let (tested, pattern) = (value(tested, s)?, value(pattern, s)?);
            let (Json::String(tested), Json::String(pattern)) = (tested.as_ref(), pattern.as_ref())
            else {
                return None;
            };
            built(Json::Bool(
                like(tested, pattern, *escape, s.meter)? != *negated,
            ))
        }
        Expr::Ternary(condition, then, otherwise) => match value(condition, s).as_deref() {
            Some(Json::Bool(true)) => value(then, s),
            _ => value(otherwise, s),
        },
        Expr::Call(Function::TOSTRING, args) if non_finite(&args[0]).is_some() => {
            let n = non_finite(&args[0])?;
            let text = match (n.is_nan(), n > 0.0) {
                (true, _) => "NaN",
                (false, true) => "Infinity",
                (false, false) => "-Infinity",
            };
            built(Json::String(text.into()))
        }
        Expr::Call(name, args) => {
            let values: Vec<Value<'_>> = args.iter().map(|a| value(a, s)).collect();
            super::functions::call(*name, &values, s.meter).map(Cow::Owned)
        }
        Expr::Udf(name, args) => {
            let values: Vec<Option<Json>> = (args.iter())
                .map(|a| value(a, s).map(Cow::into_owned))
                .collect();
            crate::script::udf::call(name, &values).map(Cow::Owned)
        }
        Expr::Aggregate(at) => s
            .group
            .and_then(|g| g.aggregates.get(*at).cloned().flatten())
            .map(Cow::Owned),
        Expr::Array(items) => {
            s.meter.take(2)?;
            let items = items.iter().filter_map(|e| owned(value(e, s), s.meter));
            built(Json::Array(items.collect()))
        }
        Expr::Object(fields) => {
            let mut object = Map::new();
            for (name, e) in fields {
                if let Some(field) = owned(value(e, s), s.meter) {
                    s.meter.take(name.len() + 4)?;
                    object.insert(name.clone(), field);
                }
            }
            built(Json::Object(object))
        }
        Expr::Exists(query) => built(Json::Bool(!subquery(query, s).is_empty())),
        Expr::ArrayOf(query) => built(Json::Array(subquery(query, s))),
        Expr::Scalar(query) => subquery(query, s).into_iter().next().map(Cow::Owned),
    }
}

/// The results of a subquery over the row it is evaluated in.
fn subquery(query: &Query, s: &Scope<'_, '_>) -> Vec<Json> {
    if s.group.is_some() {
        return Vec::new();
    }
    (s.subquery)(query, s)
}

fn member<'a>(base: Cow<'a, Json>, name: &str) -> Value<'a> {
    match base {
        Cow::Borrowed(Json::Object(object)) => object.get(name).map(Cow::Borrowed),
        Cow::Owned(Json::Object(mut object)) => object.remove(name).map(Cow::Owned),
        _ => None,
    }
}

fn indexed<'a>(base: Cow<'a, Json>, index: Cow<'_, Json>) -> Value<'a> {
    match index.as_ref() {
        Json::String(name) => member(base, name),
        Json::Number(n) => {
            let i = n.as_f64().filter(|i| i.fract() == 0.0 && *i >= 0.0)? as usize;
            match base {
                Cow::Borrowed(Json::Array(items)) => items.get(i).map(Cow::Borrowed),
                Cow::Owned(Json::Array(mut items)) if i < items.len() => {
                    Some(Cow::Owned(items.swap_remove(i)))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// `left op right`, with `left` already evaluated and `right` evaluated only when needed
/// (`AND` and `OR` are three-valued and stop at what decides them).
fn binary<'a>(op: Op, left: Value<'a>, right: &'a Expr, s: &Scope<'a, '_>) -> Value<'a> {
    let boolean = |v: Value<'_>| match v.as_deref() {
        Some(Json::Bool(b)) => Some(*b),
        _ => None,
    };
    let truth = |b: Option<bool>| b.map(|b| Cow::Owned(Json::Bool(b)));
    match op {
        Op::And => match boolean(left) {
            Some(false) => truth(Some(false)),
            Some(true) => truth(boolean(value(right, s))),
            None => truth(boolean(value(right, s)).filter(|b| !b)),
        },
        Op::Or => match boolean(left) {
            Some(true) => truth(Some(true)),
            Some(false) => truth(boolean(value(right, s))),
            None => truth(boolean(value(right, s)).filter(|b| *b)),
        },
        Op::Coalesce => left.or_else(|| value(right, s)),
        _ => {
            let (a, b) = (left?, value(right, s)?);
            let order = || compare(&a, &b, s.meter);
            match op {
                Op::Eq => truth(equal(&a, &b, s.meter)),
                Op::Ne => truth(equal(&a, &b, s.meter).map(|e| !e)),
                Op::Lt => truth(Some(order()? == Ordering::Less)),
                Op::Le => truth(Some(order()? != Ordering::Greater)),
                Op::Gt => truth(Some(order()? == Ordering::Greater)),
                Op::Ge => truth(Some(order()? != Ordering::Less)),
                Op::Concat => match (a.as_ref(), b.as_ref()) {
                    (Json::String(a), Json::String(b)) => {
                        s.meter.take(a.len() + b.len())?;
                        built(Json::String(format!("{a}{b}")))
                    }
                    _ => None,
                },
                Op::BitAnd | Op::BitOr | Op::BitXor | Op::Shl | Op::Shr | Op::Ushr => {
                    let (x, y) = (integer(&a)?, integer(&b)?);
                    // As JavaScript does: on 32-bit integers, the shift counted modulo 32.
                    let (x32, shift) = (x as i32, (y & 31) as u32);
                    let result = match op {
                        Op::BitAnd => i64::from(x32 & y as i32),
                        Op::BitOr => i64::from(x32 | y as i32),
                        Op::BitXor => i64::from(x32 ^ y as i32),
                        Op::Shl => i64::from(x32.wrapping_shl(shift)),
                        Op::Shr => i64::from(x32.wrapping_shr(shift)),
                        _ => i64::from((x32 as u32).wrapping_shr(shift)),
                    };
                    built(Json::from(result))
                }
                _ => {
                    let (a, b) = (a.as_f64()?, b.as_f64()?);
                    let result = match op {
                        Op::Add => a + b,
                        Op::Sub => a - b,
                        Op::Mul => a * b,
                        Op::Div => a / b,
                        _ => a % b,
                    };
                    whole_or(result).map(Cow::Owned)
                }
            }
        }
    }
}

/// The number `NaN`, `Infinity` or `-Infinity` that `expr` names, if it names one.
fn non_finite(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::NonFinite(n) => Some(*n),
        Expr::Negate(inner) => non_finite(inner).map(|n| -n),
        _ => None,
    }
}
