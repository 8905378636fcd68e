//! Walking a query's tree: every expression in an expression, and every expression of a
//! query and of its subqueries. What binds names (`parse.rs`), fills vector options
//! (`vector.rs`) and checks where scoring functions stand (`text.rs`) walks with these.

use super::{Expr, Query, Select, Source, SqlError};

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
