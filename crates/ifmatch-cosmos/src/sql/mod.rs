//! Cosmos SQL: `SELECT` with or without `FROM` (`*`, `VALUE`, projections with aliases,
//! `DISTINCT`, `TOP`), `FROM` the container, a path into it or an array iterated (`IN`),
//! `JOIN`s, `WHERE`, `GROUP BY`, `ORDER BY`, `OFFSET ... LIMIT`, aggregates, `EXISTS`, `ARRAY`
//! and scalar subqueries (correlated or not), every operator and the system functions
//! (`functions.rs`), and parameters (`@name`). What is not served is refused with a message
//! that names it, never answered wrong. Evaluated as Cosmos does: names are case-sensitive,
//! keywords are not; a missing property is *undefined*, which no comparison holds for; values
//! of two types compare as undefined.
//!
//! A query is parsed into a tree (`parse.rs`), whose names are then bound to slots: each
//! source of rows (`FROM`, `JOIN`) binds one, after those of the queries around it. A row is
//! the values of its slots (`rows.rs`); an expression is evaluated against a row
//! (`eval.rs`).
//!
//! A query is code a client sends, so its evaluation is metered ([`Meter`]): what it builds
//! and compares for one document is bounded by [`DOCUMENT_WORK`], and [`crate::query`] bounds
//! a page's.

mod datetime;
mod eval;
mod functions;
mod lex;
mod like;
mod meter;
mod parse;
mod rows;
mod spatial;
#[cfg(test)]
mod tests;
mod text;
mod tree;
mod value;
mod vector;

pub use meter::{DOCUMENT_WORK, Meter, weight};
pub use rows::{Accumulator, Collector};
use serde_json::Value as Json;
pub use value::compare_for_order;
pub(crate) use value::printed;
pub use vector::{Embedding, check_vector_indexes, embeddings};

/// The longest query text taken, in bytes (Azure's service quotas: 512 KB).
pub const MAX_QUERY: usize = 512 << 10;
/// The most `JOIN`s one `SELECT` holds (Azure's service quotas: 10 a query).
pub const MAX_JOINS: usize = 10;
/// The most user-defined functions one query calls (Azure's service quotas: 10).
pub const MAX_UDFS: usize = 10;
/// The deepest expression taken, in nested parentheses, calls and unary operators.
pub const MAX_DEPTH: usize = 64;
/// The most operators and property accesses a query holds besides its `AND`s and `OR`s: what
/// bounds how deep a chain such as `a + b + c` or `c.a.b.c` nests the tree that every
/// evaluation walks recursively. Room for Azure's 500 `AND`s of comparisons of a path each.
pub const MAX_NODES: usize = 2000;
/// The most `AND`s, and the most `OR`s, a query holds (Azure's account says 500 of each:
/// `maxLogicalAndPerSqlQuery`, `maxLogicalOrPerSqlQuery`).
pub const MAX_LOGICAL: usize = 500;

/// Why a query is refused: a message that names what is wrong or not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
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

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// `DISTINCT`.
    pub distinct: bool,
    /// `TOP n`.
    pub top: Option<u64>,
    /// What each result is.
    pub select: Select,
    /// Where rows come from: the `FROM` source, then each `JOIN`; each binds the next slot
    /// (after the enclosing queries' slots). Empty for a query without `FROM`: one row.
    pub from: Vec<Source>,
    /// The predicate, if any.
    pub filter: Option<Expr>,
    /// `GROUP BY`: the expressions rows are grouped by.
    pub group: Vec<Expr>,
    /// `ORDER BY`: each expression, and whether it is descending.
    pub order: Vec<(Expr, bool)>,
    /// `ORDER BY RANK`: the one order is a scoring function's (see `text.rs`), highest first.
    pub rank: bool,
    /// `OFFSET n LIMIT m`.
    pub offset_limit: Option<(u64, u64)>,
    /// The aggregates of the selection, by their index in [`Expr::Aggregate`]: the function
    /// and its argument.
    pub aggregates: Vec<(&'static str, Expr)>,
    /// The names its sources bind, by slot (after the enclosing queries').
    pub names: Vec<String>,
    /// How many slots the enclosing queries bind (a subquery sees theirs first).
    pub outer: usize,
}

/// One source of rows, binding a slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `expr [AS] alias` (`FROM c`, `FROM c.children[0] ch`, `JOIN (SELECT ...) x`): the value,
    /// when it is defined; an array from a subquery binds each of its items.
    Bind(Expr),
    /// `alias IN expr`: each item of the array.
    Iterate(Expr),
}

/// What a query selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Select {
    /// `*`: the row's only source.
    Star,
    /// `VALUE expr`: the value itself.
    Value(Expr),
    /// `expr [AS name], ...`: an object of them.
    Items(Vec<(Expr, String)>),
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant (parameters are replaced by theirs): shared, so that a parameter named many
    /// times is held once, whatever its size.
    Literal(std::sync::Arc<Json>),
    /// `undefined`.
    Undefined,
    /// `NaN` or `Infinity` (`-Infinity` is its negation): no JSON holds them, so every
    /// expression that takes one is undefined, but `ToString`, which names it.
    NonFinite(f64),
    /// The container's item, in the `FROM` source's expression.
    Root,
    /// A name the parser has not bound yet (never evaluated).
    Name(String),
    /// The value a source bound: a slot of the row.
    Var(usize),
    /// `e.name` or `e["name"]`.
    Member(Box<Expr>, String),
    /// `e[i]` with a computed index or name.
    Index(Box<Expr>, Box<Expr>),
    /// `-e`.
    Negate(Box<Expr>),
    /// `~e`.
    BitNot(Box<Expr>),
    /// `NOT e`.
    Not(Box<Expr>),
    /// A binary operator.
    Binary(Op, Box<Expr>, Box<Expr>),
    /// `e [NOT] BETWEEN low AND high`.
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// `e [NOT] IN (values)`.
    In(Box<Expr>, Vec<Expr>, bool),
    /// `e [NOT] LIKE pattern [ESCAPE c]`.
    Like(Box<Expr>, Box<Expr>, Option<char>, bool),
    /// `c ? a : b`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A built-in function, by its upper-case name.
    Call(&'static str, Vec<Expr>),
    /// A user-defined function, `udf.name(...)`, by its name.
    Udf(String, Vec<Expr>),
    /// An aggregate of the query's selection, by its index in [`Query::aggregates`].
    Aggregate(usize),
    /// `[a, b]`.
    Array(Vec<Expr>),
    /// `{"a": e}`.
    Object(Vec<(String, Expr)>),
    /// `EXISTS (subquery)`.
    Exists(Box<Query>),
    /// `ARRAY (subquery)`.
    ArrayOf(Box<Query>),
    /// `(subquery)`: its first result.
    Scalar(Box<Query>),
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
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
    /// `>>>`: shifted right with zeros.
    Ushr,
    /// `||`: string concatenation.
    Concat,
    /// `??`: the left value, or the right when it is undefined.
    Coalesce,
}

impl Expr {
    /// The constant `value`.
    pub(crate) fn literal(value: Json) -> Self {
        Self::Literal(std::sync::Arc::new(value))
    }
}

impl Query {
    /// The query `text` with `parameters` (`[{"name": "@x", "value": ...}]`), taken whole:
    /// each value is held once, however often the text names it, and never copied.
    pub fn parse(text: &str, parameters: Vec<Json>) -> Result<Self, SqlError> {
        if text.len() > MAX_QUERY {
            return Err(SqlError::new(format!(
                "The query is longer than {MAX_QUERY} bytes (512 KB)."
            )));
        }
        let mut values = std::collections::HashMap::new();
        for mut parameter in parameters {
            let name = parameter.get("name").and_then(Json::as_str);
            let Some(name) = name.filter(|n| n.starts_with('@')).map(str::to_owned) else {
                return Err(SqlError::new(
                    "Each parameter has a name that starts with '@' and a value.",
                ));
            };
            let value = parameter
                .get_mut("value")
                .map(|v| std::sync::Arc::new(v.take()));
            values.insert(name, value);
        }
        let mut query = parse::query(&lex::tokens(text)?, &values)?;
        text::check_placement(&mut query)?;
        query.with_embeddings(&[]);
        Ok(query)
    }

    /// Whether the query needs every row before its first result: it sorts, groups,
    /// aggregates or removes duplicates.
    pub fn needs_all(&self) -> bool {
        !self.order.is_empty() || self.distinct || !self.group.is_empty() || self.aggregates()
    }

    /// Whether the selection holds aggregates.
    pub fn aggregates(&self) -> bool {
        !self.aggregates.is_empty()
    }

    /// The built-in functions its selection calls (upper case), and whether the selection
    /// holds a subquery (`EXISTS`, `ARRAY`, a scalar one) or an aggregate.
    pub fn selection_calls(&mut self) -> (Vec<&'static str>, bool) {
        let mut calls = Vec::new();
        let mut nested = !self.aggregates.is_empty();
        let mut each = |expr: &mut Expr| {
            match expr {
                Expr::Call(name, _) => calls.push(*name),
                Expr::Exists(_) | Expr::ArrayOf(_) | Expr::Scalar(_) | Expr::Aggregate(_) => {
                    nested = true
                }
                _ => {}
            }
            Ok(())
        };
        let _ = match &mut self.select {
            Select::Value(expr) => tree::visit(expr, &mut each),
            Select::Items(items) => items
                .iter_mut()
                .try_for_each(|(expr, _)| tree::visit(expr, &mut each)),
            Select::Star => Ok(()),
        };
        (calls, nested)
    }

    /// The user-defined functions it calls (`udf.name`), each once; refused past
    /// [`MAX_UDFS`].
    pub fn functions(&mut self) -> Result<Vec<String>, SqlError> {
        let mut names: Vec<String> = Vec::new();
        tree::each_expr(self, &mut |top| {
            let _ = tree::visit(top, &mut |expr| {
                if let Expr::Udf(name, _) = expr
                    && !names.contains(name)
                {
                    names.push(name.clone());
                }
                Ok(())
            });
        });
        match names.len() > MAX_UDFS {
            true => Err(SqlError::new(format!(
                "The query calls {} user-defined functions; a query calls at most {MAX_UDFS}.",
                names.len()
            ))),
            false => Ok(names),
        }
    }

    /// Whether the query reads the container: one without `FROM` makes one row of nothing.
    pub fn reads_container(&self) -> bool {
        !self.from.is_empty()
    }

    /// The results the query makes of `document`, row by row (for a query that streams:
    /// [`needs_all`](Self::needs_all) is false); what it builds is charged to `meter`.
    pub fn results(&self, document: &Json, meter: &Meter) -> Vec<Json> {
        rows::results(self, Some(document), meter)
    }
}

/// The filter of a patch's condition, `FROM c WHERE ...`, as a query.
pub type Predicate = Query;

/// Whether `predicate` (a patch's condition) holds for `document`, within one document's
/// bound.
pub fn holds(predicate: Option<&Predicate>, document: &Json) -> Result<bool, SqlError> {
    let Some(predicate) = predicate else {
        return Ok(true);
    };
    let meter = Meter::per_document();
    let held = !rows::results(predicate, Some(document), &meter).is_empty();
    match meter.exceeded() {
        true => Err(meter.error()),
        false => Ok(held),
    }
}

/// A predicate on its own (`FROM c WHERE ...`, as a patch's condition is written).
pub fn predicate(text: &str) -> Result<Option<Predicate>, SqlError> {
    let query = Query::parse(&format!("SELECT * {text}"), Vec::new())?;
    let plain = query.top.is_none()
        && query.order.is_empty()
        && query.offset_limit.is_none()
        && query.group.is_empty()
        && query.from.len() == 1;
    if !plain {
        return Err(SqlError::new(
            "A condition is FROM c WHERE ..., nothing more.",
        ));
    }
    Ok(query.filter.is_some().then_some(query))
}
