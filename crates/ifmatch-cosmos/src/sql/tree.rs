//! A query's tree, and walking it: every expression in an expression, and every expression of a
//! query and of its subqueries. What binds names (`parse.rs`), fills vector options
//! (`vector.rs`) and checks where scoring functions stand (`text.rs`) walks with these.

use serde_json::Value as Json;

use super::catalog::Function;
use super::error::SqlError;

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
    Call(Function, Vec<Expr>),
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

/// Calls `each` on `expr` and every expression in it, outermost first; a subquery is passed
/// whole (its own expressions are `each`'s to visit). The left side of chains is walked in a
/// loop, as evaluation walks it.
pub(super) fn visit(
    expr: &mut Expr,
    each: &mut dyn FnMut(&mut Expr) -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    let mut current = expr;
    loop {
        each(current)?;
        current = match current {
            Expr::Member(inner, _) => inner,
            Expr::Index(inner, index) => {
                visit(index, each)?;
                inner
            }
            Expr::Binary(_, left, right) => {
                visit(right, each)?;
                left
            }
            Expr::Negate(inner) | Expr::BitNot(inner) | Expr::Not(inner) => inner,
            Expr::Between(a, b, c, _) | Expr::Ternary(a, b, c) => {
                visit(b, each)?;
                visit(c, each)?;
                a
            }
            Expr::In(tested, list, _) => {
                for e in list {
                    visit(e, each)?;
                }
                tested
            }
            Expr::Like(tested, pattern, ..) => {
                visit(pattern, each)?;
                tested
            }
            Expr::Call(_, items) | Expr::Udf(_, items) | Expr::Array(items) => {
                for e in items {
                    visit(e, each)?;
                }
                return Ok(());
            }
            Expr::Object(fields) => {
                for (_, e) in fields {
                    visit(e, each)?;
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
    }
}

/// Calls `each` on every expression of `query` and of its subqueries.
pub(super) fn each_expr(query: &mut Query, each: &mut dyn FnMut(&mut Expr)) {
    let mut all: Vec<&mut Expr> = Vec::new();
    for source in &mut query.from {
        let (Source::Bind(expr) | Source::Iterate(expr)) = source;
        all.push(expr);
    }
    match &mut query.select {
        Select::Star => {}
        Select::Value(expr) => all.push(expr),
        Select::Items(items) => all.extend(items.iter_mut().map(|(e, _)| e)),
    }
    all.extend(query.filter.iter_mut());
    all.extend(query.group.iter_mut());
    all.extend(query.order.iter_mut().map(|(e, _)| e));
    all.extend(query.aggregates.iter_mut().map(|(_, e)| e));
    for expr in all {
        each(expr);
        let _ = visit(expr, &mut |e| {
            if let Expr::Exists(sub) | Expr::ArrayOf(sub) | Expr::Scalar(sub) = e {
                each_expr(sub, each);
            }
            Ok(())
        });
    }
}
