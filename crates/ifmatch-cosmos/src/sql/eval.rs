//! Evaluating an expression against a document, as Cosmos does: `None` is *undefined* (a
//! missing property, a comparison of two types, arithmetic on a string), which `WHERE`
//! treats as false and a projection leaves out; `AND`, `OR` and `NOT` are three-valued.

use std::cmp::Ordering;

use serde_json::{Map, Value as Json};

use super::{Expr, Op};

/// Whether `filter` holds for `document` (no filter holds for every one).
pub fn matches(filter: Option<&Expr>, document: &Json) -> bool {
    filter.is_none_or(|f| eval(f, document) == Some(Json::Bool(true)))
}

/// The value of `expr` for `document`; `None` when undefined.
///
/// Chains (`c.a.b.c`, `a AND b AND c`, `1 + 2 + 3`) nest the tree as deep as they are long,
/// down its left side: that side is walked in a loop, not by recursion, so only parentheses,
/// calls and right operands (at most [`MAX_DEPTH`](super::MAX_DEPTH) deep) take the stack.
pub(crate) fn eval(expr: &Expr, document: &Json) -> Option<Json> {
    match expr {
        Expr::Member(..) | Expr::Index(..) | Expr::Binary(..) => {
            let mut spine = Vec::new();
            let mut base = expr;
            while let Expr::Member(inner, _) | Expr::Index(inner, _) | Expr::Binary(_, inner, _) =
                base
            {
                spine.push(base);
                base = inner;
            }
            let mut value = eval(base, document);
            for step in spine.iter().rev() {
                value = match step {
                    Expr::Member(_, name) => value.and_then(|v| member(v, name)),
                    Expr::Index(_, index) => value.and_then(|v| indexed(v, eval(index, document)?)),
                    Expr::Binary(op, _, right) => binary(*op, value, right, document),
                    _ => unreachable!("the spine holds chains only"),
                };
            }
            value
        }
        Expr::Literal(value) => Some(value.clone()),
        Expr::Undefined => None,
        Expr::Root => Some(document.clone()),
        Expr::Negate(inner) => num(-eval(inner, document)?.as_f64()?),
        Expr::Not(inner) => match eval(inner, document)? {
            Json::Bool(b) => Some(Json::Bool(!b)),
            _ => None,
        },
        Expr::Between(value, low, high, negated) => {
            let value = eval(value, document)?;
            let above = compare(&value, &eval(low, document)?)? != Ordering::Less;
            let below = compare(&value, &eval(high, document)?)? != Ordering::Greater;
            Some(Json::Bool((above && below) != *negated))
        }
        Expr::In(value, list, negated) => {
            let value = eval(value, document)?;
            let found = list
                .iter()
                .filter_map(|e| eval(e, document))
                .any(|candidate| equal(&value, &candidate) == Some(true));
            Some(Json::Bool(found != *negated))
        }
        Expr::Like(value, pattern, negated) => {
            let (Json::String(value), Json::String(pattern)) =
                (eval(value, document)?, eval(pattern, document)?)
            else {
                return None;
            };
            Some(Json::Bool(like(&value, &pattern)? != *negated))
        }
        Expr::Ternary(condition, then, otherwise) => match eval(condition, document) {
            Some(Json::Bool(true)) => eval(then, document),
            _ => eval(otherwise, document),
        },
        Expr::Call(name, args) => {
            let values: Vec<Option<Json>> = args.iter().map(|a| eval(a, document)).collect();
            call(name, &values)
        }
        // Aggregates are accumulated over the results (see `Accumulator`), never per document.
        Expr::Aggregate(..) => None,
        Expr::Array(items) => Some(Json::Array(
            items.iter().filter_map(|e| eval(e, document)).collect(),
        )),
        Expr::Object(fields) => {
            let mut object = Map::new();
            for (name, e) in fields {
                if let Some(value) = eval(e, document) {
                    object.insert(name.clone(), value);
                }
            }
            Some(Json::Object(object))
        }
    }
}

fn indexed(base: Json, index: Json) -> Option<Json> {
    match index {
        Json::String(name) => member(base, &name),
        Json::Number(n) => {
            let i = n.as_f64().filter(|i| i.fract() == 0.0 && *i >= 0.0)? as usize;
            base.get(i).cloned()
        }
        _ => None,
    }
}

fn member(base: Json, name: &str) -> Option<Json> {
    match base {
        Json::Object(mut object) => object.remove(name),
        _ => None,
    }
}

fn num(n: f64) -> Option<Json> {
    serde_json::Number::from_f64(n).map(Json::Number)
}

/// `left op right`, with `left` already evaluated and `right` evaluated only when needed
/// (`AND` and `OR` are three-valued and stop at what decides them).
fn binary(op: Op, left: Option<Json>, right: &Expr, document: &Json) -> Option<Json> {
    let boolean = |v: Option<Json>| match v {
        Some(Json::Bool(b)) => Some(b),
        _ => None,
    };
    match op {
        Op::And => match boolean(left) {
            Some(false) => Some(Json::Bool(false)),
            Some(true) => boolean(eval(right, document)).map(Json::Bool),
            None => match boolean(eval(right, document)) {
                Some(false) => Some(Json::Bool(false)),
                _ => None,
            },
        },
        Op::Or => match boolean(left) {
            Some(true) => Some(Json::Bool(true)),
            Some(false) => boolean(eval(right, document)).map(Json::Bool),
            None => match boolean(eval(right, document)) {
                Some(true) => Some(Json::Bool(true)),
                _ => None,
            },
        },
        Op::Coalesce => left.or_else(|| eval(right, document)),
        _ => {
            let (a, b) = (left?, eval(right, document)?);
            match op {
                Op::Eq => equal(&a, &b).map(Json::Bool),
                Op::Ne => equal(&a, &b).map(|e| Json::Bool(!e)),
                Op::Lt => Some(Json::Bool(compare(&a, &b)? == Ordering::Less)),
                Op::Le => Some(Json::Bool(compare(&a, &b)? != Ordering::Greater)),
                Op::Gt => Some(Json::Bool(compare(&a, &b)? == Ordering::Greater)),
                Op::Ge => Some(Json::Bool(compare(&a, &b)? != Ordering::Less)),
                Op::Concat => match (a, b) {
                    (Json::String(a), Json::String(b)) => Some(Json::String(a + &b)),
                    _ => None,
                },
                _ => {
                    let (a, b) = (a.as_f64()?, b.as_f64()?);
                    let value = match op {
                        Op::Add => a + b,
                        Op::Sub => a - b,
                        Op::Mul => a * b,
                        Op::Div => a / b,
                        _ => a % b,
                    };
                    whole_or(value)
                }
            }
        }
    }
}

/// A number, whole ones as integers.
fn whole_or(value: f64) -> Option<Json> {
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        Some(Json::from(value as i64))
    } else {
        num(value)
    }
}

/// `=` between two values: `None` (undefined) when their types differ.
fn equal(a: &Json, b: &Json) -> Option<bool> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => Some(x.as_f64() == y.as_f64()),
        (Json::Null, Json::Null) => Some(true),
        (Json::Bool(x), Json::Bool(y)) => Some(x == y),
        (Json::String(x), Json::String(y)) => Some(x == y),
        (Json::Array(x), Json::Array(y)) => {
            Some(x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b) == Some(true)))
        }
        (Json::Object(x), Json::Object(y)) => Some(
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w) == Some(true))),
        ),
        _ => None,
    }
}

/// `<` and its kin between two values of one type (numbers, strings, booleans, null); `None`
/// for two types, or for arrays and objects.
fn compare(a: &Json, b: &Json) -> Option<Ordering> {
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
pub fn compare_for_order(a: &Option<Json>, b: &Option<Json>) -> Ordering {
    let rank = |v: &Option<Json>| match v {
        None => 0,
        Some(Json::Null) => 1,
        Some(Json::Bool(_)) => 2,
        Some(Json::Number(_)) => 3,
        Some(Json::String(_)) => 4,
        Some(Json::Array(_)) => 5,
        Some(Json::Object(_)) => 6,
    };
    match (a, b) {
        (Some(x), Some(y)) if rank(a) == rank(b) => compare(x, y).unwrap_or(Ordering::Equal),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// The longest `LIKE` pattern matched, in characters: matching costs the value's length times
/// the pattern's.
pub(crate) const MAX_LIKE: usize = 1024;

/// `LIKE`: `%` any run, `_` any one character.
fn like(value: &str, pattern: &str) -> Option<bool> {
    let (v, p): (Vec<char>, Vec<char>) = (value.chars().collect(), pattern.chars().collect());
    if p.len() > MAX_LIKE {
        return None;
    }
    // Matches by dynamic programming: `at[j]`, whether the value's first i characters match
    // the pattern's first j.
    let mut at = vec![false; p.len() + 1];
    at[0] = true;
    for j in 1..=p.len() {
        at[j] = at[j - 1] && p[j - 1] == '%';
    }
    for c in &v {
        let mut next = vec![false; p.len() + 1];
        for j in 1..=p.len() {
            next[j] = match p[j - 1] {
                '%' => next[j - 1] || at[j],
                '_' => at[j - 1],
                pc => at[j - 1] && pc == *c,
            };
        }
        at = next;
    }
    Some(at[p.len()])
}

fn text(value: &Option<Json>) -> Option<&str> {
    value.as_ref()?.as_str()
}

fn number(value: &Option<Json>) -> Option<f64> {
    value.as_ref()?.as_f64()
}

fn flag(value: Option<&Option<Json>>) -> Option<bool> {
    match value {
        None => Some(false),
        Some(Some(Json::Bool(b))) => Some(*b),
        Some(_) => None,
    }
}

/// A built-in function of `args` (each possibly undefined).
fn call(name: &str, args: &[Option<Json>]) -> Option<Json> {
    let boolean = |b: bool| Some(Json::Bool(b));
    let fold = |s: &str, ignore: bool| {
        if ignore {
            s.to_lowercase()
        } else {
            s.to_owned()
        }
    };
    match name {
        "STARTSWITH" | "ENDSWITH" | "CONTAINS" | "STRINGEQUALS" => {
            let ignore = flag(args.get(2))?;
            let (s, t) = (fold(text(&args[0])?, ignore), fold(text(&args[1])?, ignore));
            boolean(match name {
                "STARTSWITH" => s.starts_with(&t),
                "ENDSWITH" => s.ends_with(&t),
                "CONTAINS" => s.contains(&t),
                _ => s == t,
            })
        }
        "LOWER" => Some(Json::String(text(&args[0])?.to_lowercase())),
        "UPPER" => Some(Json::String(text(&args[0])?.to_uppercase())),
        "LENGTH" => Some(Json::from(text(&args[0])?.chars().count())),
        "TRIM" => Some(Json::String(text(&args[0])?.trim().to_owned())),
        "LTRIM" => Some(Json::String(text(&args[0])?.trim_start().to_owned())),
        "RTRIM" => Some(Json::String(text(&args[0])?.trim_end().to_owned())),
        "REVERSE" => Some(Json::String(text(&args[0])?.chars().rev().collect())),
        "CONCAT" => {
            let mut out = String::new();
            for arg in args {
                out.push_str(text(arg)?);
            }
            Some(Json::String(out))
        }
        "SUBSTRING" => {
            let s: Vec<char> = text(&args[0])?.chars().collect();
            let start = (number(&args[1])?.max(0.0) as usize).min(s.len());
            let len = number(&args[2])?.max(0.0) as usize;
            Some(Json::String(
                s[start..(start + len).min(s.len())].iter().collect(),
            ))
        }
        "LEFT" | "RIGHT" => {
            let s: Vec<char> = text(&args[0])?.chars().collect();
            let n = (number(&args[1])?.max(0.0) as usize).min(s.len());
            let part = if name == "LEFT" {
                &s[..n]
            } else {
                &s[s.len() - n..]
            };
            Some(Json::String(part.iter().collect()))
        }
        "INDEX_OF" => {
            let s: Vec<char> = text(&args[0])?.chars().collect();
            let t: Vec<char> = text(&args[1])?.chars().collect();
            let from = match args.get(2) {
                Some(v) => number(v)?.max(0.0) as usize,
                None => 0,
            };
            let found = (from..=s.len().saturating_sub(t.len()))
                .find(|&i| s.get(i..i + t.len()) == Some(&t[..]));
            Some(Json::from(found.map_or(-1, |i| i as i64)))
        }
        "REPLACE" => Some(Json::String(
            text(&args[0])?.replace(text(&args[1])?, text(&args[2])?),
        )),
        "TOSTRING" => Some(Json::String(match args[0].as_ref()? {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        })),
        "IS_DEFINED" => boolean(args[0].is_some()),
        "IS_NULL" => boolean(matches!(args[0], Some(Json::Null))),
        "IS_NUMBER" => boolean(matches!(args[0], Some(Json::Number(_)))),
        "IS_STRING" => boolean(matches!(args[0], Some(Json::String(_)))),
        "IS_BOOL" => boolean(matches!(args[0], Some(Json::Bool(_)))),
        "IS_ARRAY" => boolean(matches!(args[0], Some(Json::Array(_)))),
        "IS_OBJECT" => boolean(matches!(args[0], Some(Json::Object(_)))),
        "IS_PRIMITIVE" => boolean(matches!(
            args[0],
            Some(Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_))
        )),
        "ARRAY_CONTAINS" => {
            let Some(Json::Array(items)) = &args[0] else {
                return None;
            };
            let wanted = args[1].as_ref()?;
            let partial = flag(args.get(2))?;
            boolean(items.iter().any(|item| {
                match (partial, item, wanted) {
                    (true, Json::Object(have), Json::Object(want)) => want
                        .iter()
                        .all(|(k, v)| have.get(k).is_some_and(|h| equal(h, v) == Some(true))),
                    _ => equal(item, wanted) == Some(true),
                }
            }))
        }
        "ARRAY_LENGTH" => match &args[0] {
            Some(Json::Array(items)) => Some(Json::from(items.len())),
            _ => None,
        },
        "ARRAY_SLICE" => {
            let Some(Json::Array(items)) = &args[0] else {
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
            Some(Json::Array(
                items[start..].iter().take(count).cloned().collect(),
            ))
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

/// An aggregate accumulated over the results of a query.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    count: u64,
    sum: f64,
    /// Whether a value that is not a number came: `SUM` and `AVG` are then undefined.
    mixed: bool,
    min: Option<Json>,
    max: Option<Json>,
}

impl Accumulator {
    /// Adds the argument's value for one document (`None`: undefined, which counts nowhere).
    pub fn add(&mut self, value: Option<Json>) {
        let Some(value) = value else { return };
        self.count += 1;
        match value.as_f64() {
            Some(n) => self.sum += n,
            None => self.mixed = true,
        }
        let order = |a: &Json, b: &Json| compare_for_order(&Some(a.clone()), &Some(b.clone()));
        if self
            .min
            .as_ref()
            .is_none_or(|m| order(&value, m) == Ordering::Less)
        {
            self.min = Some(value.clone());
        }
        if self
            .max
            .as_ref()
            .is_none_or(|m| order(&value, m) == Ordering::Greater)
        {
            self.max = Some(value);
        }
    }

    /// The aggregate `name`'s value (`None`: undefined, as `AVG` of nothing is).
    pub fn value(&self, name: &str) -> Option<Json> {
        match name {
            "COUNT" => Some(Json::from(self.count)),
            "SUM" if !self.mixed => whole_or(self.sum),
            "AVG" if !self.mixed && self.count > 0 => num(self.sum / self.count as f64),
            "MIN" => self.min.clone(),
            "MAX" => self.max.clone(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Query, predicate};
    use serde_json::json;

    fn results(text: &str, docs: &[serde_json::Value]) -> Vec<serde_json::Value> {
        let query = Query::parse(text, &[json!({"name": "@city", "value": "Oslo"})]).unwrap();
        docs.iter().filter_map(|d| query.result(d)).collect()
    }

    #[test]
    fn queries_answer_as_cosmos_does() {
        let docs = [
            json!({"id": "a", "city": "Oslo", "n": 3, "tags": ["x", "y"], "name": "Ann"}),
            json!({"id": "b", "city": "Bergen", "n": 1, "name": "bob"}),
            json!({"id": "c", "n": "3"}),
        ];
        assert_eq!(
            results("SELECT VALUE c.id FROM c WHERE c.city = @city", &docs),
            [json!("a")]
        );
        assert_eq!(
            results("select value r.id from root r where r.n > 2", &docs),
            [json!("a")],
            "a string is not a number"
        );
        assert_eq!(
            results("SELECT VALUE c.id FROM c WHERE NOT (c.n > 2)", &docs),
            [json!("b")],
            "undefined stays out, negated too"
        );
        assert_eq!(
            results("SELECT VALUE c.id FROM c WHERE c.city != 'Oslo'", &docs),
            [json!("b")]
        );
        assert_eq!(
            results(
                "SELECT VALUE c.id FROM c WHERE c.n BETWEEN 1 AND 2 OR c.id IN ('c')",
                &docs
            ),
            [json!("b"), json!("c")]
        );
        assert_eq!(
            results(
                "SELECT VALUE c.id FROM c WHERE STARTSWITH(c.name, 'b')",
                &docs
            ),
            [json!("b")],
            "case-sensitive"
        );
        assert_eq!(
            results(
                "SELECT VALUE c.id FROM c WHERE STARTSWITH(c.name, 'B', true)",
                &docs
            ),
            [json!("b")]
        );
        assert_eq!(
            results(
                "SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, 'y') AND ARRAY_LENGTH(c.tags) = 2",
                &docs
            ),
            [json!("a")]
        );
        assert_eq!(
            results(
                "SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.city) = false",
                &docs
            ),
            [json!("c")]
        );
        assert_eq!(
            results("SELECT VALUE c.id FROM c WHERE c.name LIKE '_n%'", &docs),
            [json!("a")]
        );
        assert_eq!(
            results(
                "SELECT c.id, c.n * 2 AS twice, UPPER(c.city) FROM c WHERE c.id = 'a'",
                &docs
            ),
            [json!({"id": "a", "twice": 6, "$3": "OSLO"})]
        );
        assert_eq!(
            results(
                "SELECT VALUE {id: c.id, x: c.missing} FROM c WHERE c.id = 'b'",
                &docs
            ),
            [json!({"id": "b"})]
        );
        assert_eq!(
            results("SELECT VALUE c.n + 1 FROM c", &docs),
            [json!(4), json!(2)]
        );
        assert_eq!(
            results(
                "SELECT VALUE CONCAT(c.id, '-', c.city) FROM c WHERE c.id < 'b' OR c.id > 'b'",
                &docs
            ),
            [json!("a-Oslo")]
        );
        assert_eq!(
            results("SELECT VALUE c['city'] ?? 'none' FROM c", &docs),
            [json!("Oslo"), json!("Bergen"), json!("none")]
        );
        assert_eq!(
            results(
                "SELECT VALUE SUBSTRING(c.name, 1, 2) FROM c WHERE c.id = 'a'",
                &docs
            ),
            [json!("nn")]
        );
    }

    #[test]
    fn what_is_not_served_is_named_and_what_is_wrong_is_refused() {
        for (text, named) in [
            ("SELECT * FROM c JOIN t IN c.tags", "JOIN"),
            ("SELECT c.city, COUNT(1) FROM c GROUP BY c.city", "GROUP BY"),
            (
                "SELECT * FROM c WHERE ST_DISTANCE(c.a, c.b) < 1",
                "ST_DISTANCE",
            ),
            ("SELECT * FROM c WHERE x.a = 1", "'x'"),
            ("SELECT * FROM c WHERE c.a = @missing", "@missing"),
            ("SELECT * FROM c WHERE", "end"),
            ("SELECT * FROM c WHERE COUNT(1) > 1", "aggregate"),
            ("SELECT TOP -1 * FROM c", "TOP"),
            ("SELECT * FROM c ORDER BY", "end"),
        ] {
            let error = Query::parse(text, &[]).unwrap_err();
            assert!(error.message.contains(named), "{text}: {}", error.message);
        }
        let deep = format!(
            "SELECT * FROM c WHERE {}1{}",
            "(".repeat(100),
            ")".repeat(100)
        );
        assert!(
            Query::parse(&deep, &[])
                .unwrap_err()
                .message
                .contains("deeply")
        );
        // Chains nest as deep as they are long: bounded, and what is taken evaluates.
        let chain = format!(
            "SELECT * FROM c WHERE {}",
            vec!["c.n = 1"; 400].join(" AND ")
        );
        let query = Query::parse(&chain, &[]).unwrap();
        assert_eq!(query.result(&json!({"n": 1})), Some(json!({"n": 1})));
        for long in [
            format!("SELECT * FROM c WHERE c{} = 1", ".a".repeat(100_000)),
            format!("SELECT * FROM c WHERE c{} = 1", "[0]".repeat(50_000)),
            format!("SELECT VALUE {} FROM c", vec!["1"; 50_000].join("+")),
            format!(
                "SELECT * FROM c WHERE {}",
                vec!["true"; 20_000].join(" OR ")
            ),
        ] {
            assert!(
                Query::parse(&long, &[])
                    .unwrap_err()
                    .message
                    .contains("1000")
            );
        }
        let longest = format!("SELECT VALUE c{} FROM c", ".a".repeat(990));
        let query = Query::parse(&longest, &[]).unwrap();
        assert_eq!(query.result(&json!({"n": 1})), None);
        let nots = format!("SELECT * FROM c WHERE {} true", "NOT ".repeat(100));
        assert!(Query::parse(&nots, &[]).is_err());
        assert!(Query::parse(&"x".repeat(300_000), &[]).is_err());
        assert!(predicate("FROM c WHERE c.n > 1").unwrap().is_some());
        assert!(predicate("FROM c WHERE c.n > 1 ORDER BY c.n").is_err());
    }

    #[test]
    fn aggregates_accumulate() {
        let query = Query::parse("SELECT VALUE AVG(c.n) FROM c", &[]).unwrap();
        assert!(query.aggregates());
        let mut acc = super::Accumulator::default();
        for n in [json!(1), json!(2), json!(6)] {
            acc.add(Some(n));
        }
        acc.add(None);
        assert_eq!(acc.value("COUNT"), Some(json!(3)));
        assert_eq!(acc.value("SUM"), Some(json!(9)));
        assert_eq!(acc.value("AVG"), Some(json!(3.0)));
        assert_eq!(acc.value("MIN"), Some(json!(1)));
        assert_eq!(acc.value("MAX"), Some(json!(6)));
        assert_eq!(super::Accumulator::default().value("AVG"), None);
    }
}
