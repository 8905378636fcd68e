//! Cosmos SQL, the part applications write: `SELECT` (`*`, `VALUE`, projections with
//! aliases, `DISTINCT`, `TOP`) `FROM` one container with its alias, `WHERE`, `ORDER BY` one
//! or more paths, `OFFSET ... LIMIT`, aggregates (`COUNT`, `SUM`, `MIN`, `MAX`, `AVG`) and
//! parameters (`@name`). Anything else is refused with a message that names it, never
//! answered wrong. Evaluated as Cosmos does: names are case-sensitive, keywords are not; a
//! missing property is *undefined*, which no comparison holds for; values of two types
//! compare as undefined.
//!
//! A query is code a client sends, so its evaluation is metered ([`Meter`]): what it builds
//! and compares for one document is bounded by [`DOCUMENT_WORK`], and [`crate::query`] bounds
//! a page's.

mod eval;
mod lex;
mod meter;
mod parse;

pub use eval::{Accumulator, compare_for_order, matches};
pub use meter::{DOCUMENT_WORK, Meter, weight};
use serde_json::Value as Json;

/// The longest query text taken.
pub const MAX_QUERY: usize = 256 << 10;
/// The deepest expression taken, in nested parentheses, calls and unary operators.
pub const MAX_DEPTH: usize = 64;
/// The most operators and property accesses a query holds (Cosmos takes 500 `AND`s): what
/// bounds how deep a chain such as `a AND b AND c` or `c.a.b.c` nests the tree that every
/// evaluation walks recursively.
pub const MAX_NODES: usize = 1000;

/// Why a query is refused: a message that names what is wrong or not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// What is wrong.
    pub message: String,
}

impl SqlError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The error of an evaluation whose meter was spent.
    pub fn exceeded() -> Self {
        Self::new(format!(
            "The query builds or compares more than {} MiB for one document (the strings, arrays \
             and objects its functions and constructors make, the copies it makes of the document): \
             it is refused rather than allowed to take the server's memory.",
            DOCUMENT_WORK >> 20
        ))
    }
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// `DISTINCT`.
    pub distinct: bool,
    /// `TOP n`.
    pub top: Option<u64>,
    /// What each result is.
    pub select: Select,
    /// The predicate, if any.
    pub filter: Option<Expr>,
    /// `ORDER BY`: each path, and whether it is descending.
    pub order: Vec<(Expr, bool)>,
    /// `OFFSET n LIMIT m`.
    pub offset_limit: Option<(u64, u64)>,
}

/// What a query selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Select {
    /// `*`: the document.
    Star,
    /// `VALUE expr`: the value itself.
    Value(Expr),
    /// `expr [AS name], ...`: an object of them.
    Items(Vec<(Expr, String)>),
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant (parameters are replaced by theirs).
    Literal(Json),
    /// `undefined`.
    Undefined,
    /// The document (the `FROM` alias).
    Root,
    /// `e.name` or `e["name"]`.
    Member(Box<Expr>, String),
    /// `e[i]` with a computed index or name.
    Index(Box<Expr>, Box<Expr>),
    /// `-e`, `+e`, `~e`.
    Negate(Box<Expr>),
    /// `NOT e`.
    Not(Box<Expr>),
    /// A binary operator.
    Binary(Op, Box<Expr>, Box<Expr>),
    /// `e [NOT] BETWEEN low AND high`.
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// `e [NOT] IN (values)`.
    In(Box<Expr>, Vec<Expr>, bool),
    /// `e [NOT] LIKE pattern`.
    Like(Box<Expr>, Box<Expr>, bool),
    /// `c ? a : b`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A built-in function, by its upper-case name.
    Call(&'static str, Vec<Expr>),
    /// An aggregate, by its upper-case name, over its argument.
    Aggregate(&'static str, Box<Expr>),
    /// `[a, b]`.
    Array(Vec<Expr>),
    /// `{"a": e}`.
    Object(Vec<(String, Expr)>),
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `AND`.
    And,
    /// `OR`.
    Or,
    /// `=`.
    Eq,
    /// `!=` or `<>`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Mod,
    /// `||`: string concatenation.
    Concat,
    /// `??`: the left value, or the right when it is undefined.
    Coalesce,
}

impl Query {
    /// The query `text` with `parameters` (`[{"name": "@x", "value": ...}]`).
    pub fn parse(text: &str, parameters: &[Json]) -> Result<Self, SqlError> {
        if text.len() > MAX_QUERY {
            return Err(SqlError::new("The query is longer than 262144 characters."));
        }
        let mut values = std::collections::HashMap::new();
        for parameter in parameters {
            let name = parameter.get("name").and_then(Json::as_str);
            let Some(name) = name.filter(|n| n.starts_with('@')) else {
                return Err(SqlError::new(
                    "Each parameter has a name that starts with '@' and a value.",
                ));
            };
            values.insert(name.to_owned(), parameter.get("value").cloned());
        }
        parse::query(&lex::tokens(text)?, &values)
    }

    /// Whether the query sorts, aggregates or removes duplicates: it needs every match
    /// before its first result.
    pub fn needs_all(&self) -> bool {
        !self.order.is_empty() || self.distinct || self.aggregates()
    }

    /// Whether the selection is made of aggregates.
    pub fn aggregates(&self) -> bool {
        match &self.select {
            Select::Value(Expr::Aggregate(..)) => true,
            Select::Items(items) => items.iter().any(|(e, _)| matches!(e, Expr::Aggregate(..))),
            _ => false,
        }
    }

    /// The result for `document`, if the filter holds for it (`None` when it does not, or
    /// when its `VALUE` is undefined); what it builds is charged to `meter`.
    pub fn result(&self, document: &Json, meter: &Meter) -> Option<Json> {
        if !matches(self.filter.as_ref(), document, meter) {
            return None;
        }
        self.project(document, meter)
    }

    /// What the selection makes of `document`.
    pub fn project(&self, document: &Json, meter: &Meter) -> Option<Json> {
        match &self.select {
            Select::Star => meter.copy(document),
            Select::Value(expr) => eval::eval(expr, document, meter),
            Select::Items(items) => {
                let mut object = serde_json::Map::new();
                for (expr, name) in items {
                    if let Some(value) = eval::eval(expr, document, meter) {
                        object.insert(name.clone(), value);
                    }
                }
                Some(Json::Object(object))
            }
        }
    }

    /// The values of the `ORDER BY` paths for `document`.
    pub fn order_values(&self, document: &Json, meter: &Meter) -> Vec<Option<Json>> {
        self.order
            .iter()
            .map(|(e, _)| eval::eval(e, document, meter))
            .collect()
    }
}

/// Evaluates `expr` against `document` (`None`: undefined).
pub fn evaluate(expr: &Expr, document: &Json, meter: &Meter) -> Option<Json> {
    eval::eval(expr, document, meter)
}

/// Whether `predicate` (a patch's condition) holds for `document`, within one document's
/// bound.
pub fn holds(predicate: Option<&Expr>, document: &Json) -> Result<bool, SqlError> {
    let meter = Meter::per_document();
    let held = matches(predicate, document, &meter);
    match meter.exceeded() {
        true => Err(SqlError::exceeded()),
        false => Ok(held),
    }
}

/// A predicate on its own (`FROM c WHERE ...`, as a patch's condition is written).
pub fn predicate(text: &str) -> Result<Option<Expr>, SqlError> {
    let query = Query::parse(&format!("SELECT * {text}"), &[])?;
    if query.top.is_some() || !query.order.is_empty() || query.offset_limit.is_some() {
        return Err(SqlError::new(
            "A condition is FROM c WHERE ..., nothing more.",
        ));
    }
    Ok(query.filter)
}
