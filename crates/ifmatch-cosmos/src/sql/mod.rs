//! Cosmos SQL: `SELECT` with or without `FROM` (`*`, `VALUE`, projections with aliases,
//! `DISTINCT`, `TOP`), `FROM` the container, a path into it or an array iterated (`IN`),
//! `JOIN`s, `WHERE`, `GROUP BY`, `ORDER BY`, `OFFSET ... LIMIT`, aggregates, `EXISTS`, `ARRAY`
//! and scalar subqueries (correlated or not), every operator and the system functions
//! (`functions.rs`), and parameters (`@name`). What is not served is refused with a message
//! that names it, never answered wrong. Evaluated as Cosmos does: names are case-sensitive,
//! keywords are not; a missing property is *undefined*, which no comparison holds for; values
//! of two types compare as undefined.
//!
//! A query is parsed (`parse.rs`, which holds its limits) into a tree (`tree.rs`), whose names are then bound to slots: each
//! source of rows (`FROM`, `JOIN`) binds one, after those of the queries around it. A row is
//! the values of its slots (`rows.rs`); an expression is evaluated against a row
//! (`eval.rs`). Why a query is refused: [`SqlError`] (`error.rs`).
//!
//! A query is code a client sends, so its evaluation is metered ([`Meter`]): what it builds
//! and compares for one document is bounded by [`DOCUMENT_WORK`], and [`crate::query`] bounds
//! a page's.

mod catalog;
mod datetime;
mod error;
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

pub use catalog::Function;
pub use error::SqlError;
pub use parse::{MAX_DEPTH, MAX_JOINS, MAX_LOGICAL, MAX_NODES};
pub use tree::{Expr, Op, Query, Select, Source};

/// The longest query text taken, in bytes (Azure's service quotas: 512 KB).
pub const MAX_QUERY: usize = 512 << 10;
/// The most user-defined functions one query calls (Azure's service quotas: 10).
pub const MAX_UDFS: usize = 10;
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
                Expr::Call(function, _) => calls.push(function.name()),
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
