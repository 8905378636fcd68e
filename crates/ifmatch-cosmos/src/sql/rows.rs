//! Rows, and what a query makes of them. A query's sources (`FROM`, each `JOIN`) make its
//! rows: each source binds one slot, to its value or to each item of the array it iterates,
//! for every row of the sources before it. The filter keeps some; then each row is projected
//! (a query that streams), or collected: grouped and aggregated, de-duplicated, sorted, and
//! cut by `OFFSET ... LIMIT` and `TOP` ([`Collector`]). Every row costs the meter, so a
//! `JOIN` whose cross product explodes is refused like any other query that builds too much.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value as Json};

use super::catalog::Function;
use super::eval::{Grouped, Scope, holds, value};
use super::meter::{Meter, weight};
use super::tree::{Expr, Query, Select, Source};
use super::value::{compare_for_order, neumaier, num, owned, printed, whole_or};

/// What a row costs beyond what it builds: its slots, its filter's bookkeeping.
const ROW: usize = 64;

/// The scope of one row: its slots, over `document` (in a `FROM` source).
fn row_scope<'a, 'e>(
    document: Option<&'a Json>,
    env: &'e [Cow<'a, Json>],
    meter: &'a Meter,
) -> Scope<'a, 'e> {
    Scope {
        document,
        env,
        meter,
        group: None,
        subquery: nested,
    }
}

/// The results `query` makes of `document` (`None`: a query without `FROM`), row by row:
/// for a query that streams.
pub(crate) fn results(query: &Query, document: Option<&Json>, meter: &Meter) -> Vec<Json> {
    let mut out = Vec::new();
    each_row(query, document, &[], meter, &mut |env| {
        let scope = row_scope(document, env, meter);
        if let Some(result) = project(query, &scope) {
            out.push(result);
        }
    });
    out
}

/// The results of a subquery evaluated in the row `s`, collected whole.
fn nested(query: &Query, s: &Scope<'_, '_>) -> Vec<Json> {
    let mut collector = Collector::new(query);
    // The enclosing row's slots, for the subquery's rows to start from: what the row built
    // is copied, and charged.
    let mut outer = Vec::with_capacity(s.env.len());
    for slot in s.env {
        outer.push(match slot {
            Cow::Borrowed(borrowed) => Cow::Borrowed(*borrowed),
            Cow::Owned(value) => match s.meter.copy(value) {
                Some(copy) => Cow::Owned(copy),
                None => return Vec::new(),
            },
        });
    }
    each_row(query, None, &outer, s.meter, &mut |env| {
        collector.row(env, None, s.meter);
    });
    collector.finish(s.meter)
}

/// Calls `each` with every row of `query` (over `document`, after the enclosing queries'
/// slots `outer`) that its filter holds for.
fn each_row<'a>(
    query: &'a Query,
    document: Option<&'a Json>,
    outer: &[Cow<'a, Json>],
    meter: &'a Meter,
    each: &mut dyn FnMut(&[Cow<'a, Json>]),
) {
    let mut env = outer.to_vec();
    walk(query, &query.from, document, &mut env, meter, each);
}

fn walk<'a>(
    query: &'a Query,
    sources: &'a [Source],
    document: Option<&'a Json>,
    env: &mut Vec<Cow<'a, Json>>,
    meter: &'a Meter,
    each: &mut dyn FnMut(&[Cow<'a, Json>]),
) {
    if meter.exceeded() {
        return;
    }
    let scope = row_scope(document, env, meter);
    let Some((source, rest)) = sources.split_first() else {
        if meter.take(ROW).is_none() {
            return;
        }
        if query.filter.as_ref().is_none_or(|f| holds(f, &scope)) {
            each(env);
        }
        return;
    };
    match source {
        Source::Bind(expr) => {
            let Some(bound) = value(expr, &scope) else {
                return;
            };
            env.push(bound);
            walk(query, rest, document, env, meter, each);
            env.pop();
        }
        Source::Iterate(expr) => match value(expr, &scope) {
            Some(Cow::Borrowed(Json::Array(items))) => {
                for item in items {
                    env.push(Cow::Borrowed(item));
                    walk(query, rest, document, env, meter, each);
                    env.pop();
                }
            }
            Some(Cow::Owned(Json::Array(items))) => {
                for item in items {
                    env.push(Cow::Owned(item));
                    walk(query, rest, document, env, meter, each);
                    env.pop();
                }
            }
            _ => {}
        },
    }
}

/// What the selection makes of the row (or group) `s`; `None` when a `VALUE` is undefined.
fn project(query: &Query, s: &Scope<'_, '_>) -> Option<Json> {
    match &query.select {
        Select::Star => match s.env.get(query.outer)? {
            Cow::Borrowed(borrowed) => s.meter.copy(borrowed),
            Cow::Owned(value) => s.meter.copy(value),
        },
        Select::Value(expr) => owned(value(expr, s), s.meter),
        Select::Items(items) => {
            let mut object = Map::new();
            for (expr, name) in items {
                if let Some(field) = owned(value(expr, s), s.meter) {
                    object.insert(name.clone(), field);
                }
            }
            Some(Json::Object(object))
        }
    }
}

/// The rows of a query that needs them all before its first result, collected: grouped and
/// aggregated, de-duplicated, then sorted and cut at [`finish`](Self::finish).
pub struct Collector<'q> {
    query: &'q Query,
    /// Each result kept, with its `ORDER BY` values.
    rows: Vec<(Vec<Option<Json>>, Json)>,
    /// The results seen, printed (`DISTINCT`).
    seen: HashSet<String>,
    /// Each group's `GROUP BY` values and accumulators, in the order they were first seen.
    groups: Vec<(Vec<Option<Json>>, Vec<Accumulator>)>,
    /// Where each group is, by its values printed.
    index: HashMap<String, usize>,
    /// About what the rows and groups kept take, in bytes.
    held: usize,
}

impl<'q> Collector<'q> {
    /// A collector for `query`: a query with aggregates and no `GROUP BY` has one group, rows
    /// or none.
    pub fn new(query: &'q Query) -> Self {
        let mut collector = Self {
            query,
            rows: Vec::new(),
            seen: HashSet::new(),
            groups: Vec::new(),
            index: HashMap::new(),
            held: 0,
        };
        if query.group.is_empty() && query.aggregates() {
            collector.index.insert(String::new(), 0);
            let accumulators = vec![Accumulator::default(); query.aggregates.len()];
            collector.groups.push((Vec::new(), accumulators));
        }
        collector
    }

    /// Collects the rows `document` makes (`None`: the one row of a query without `FROM`).
    pub fn add(&mut self, document: Option<&Json>, meter: &Meter) {
        let query = self.query;
        each_row(query, document, &[], meter, &mut |env| {
            self.row(env, document, meter);
        });
    }

    /// How many results and groups are kept, and about how many bytes they take.
    pub fn held(&self) -> (usize, usize) {
        (self.rows.len() + self.groups.len(), self.held)
    }

    fn row(&mut self, env: &[Cow<'_, Json>], document: Option<&Json>, meter: &Meter) {
        let query = self.query;
        let scope = row_scope(document, env, meter);
        if !self.groups.is_empty() || !query.group.is_empty() {
            let keys: Vec<Option<Json>> = (query.group.iter())
                .map(|by| owned(value(by, &scope), meter))
                .collect();
            let printed = keys
                .iter()
                .map(|k| k.as_ref().map_or_else(|| "~".to_owned(), printed))
                .collect::<Vec<_>>()
                .join("\u{0}");
            let at = match self.index.get(&printed) {
                Some(at) => *at,
                None => {
                    self.held += printed.len() + 64 * query.aggregates.len();
                    let accumulators = vec![Accumulator::default(); query.aggregates.len()];
                    self.groups.push((keys, accumulators));
                    self.index.insert(printed, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            for ((_, argument), accumulator) in
                (query.aggregates.iter()).zip(&mut self.groups[at].1)
            {
                accumulator.add(owned(value(argument, &scope), meter));
            }
            return;
        }
        let Some(result) = project(query, &scope) else {
            return;
        };
        self.keep(result, |query| {
            (query.order.iter())
                .map(|(e, _)| owned(value(e, &scope), meter))
                .collect()
        });
    }

    /// Keeps `result` (once, under `DISTINCT`), with its `ORDER BY` values.
    fn keep(&mut self, result: Json, order: impl FnOnce(&Query) -> Vec<Option<Json>>) {
        if self.query.distinct {
            let printed = printed(&result);
            if self.seen.contains(&printed) {
                return;
            }
            self.held += printed.len();
            self.seen.insert(printed);
        }
        let order = order(self.query);
        self.held += weight(&result) + order.iter().flatten().map(weight).sum::<usize>();
        self.rows.push((order, result));
        // A sorted query that answers its first `TOP` (or `OFFSET + LIMIT`) results keeps no
        // more than those and as many again: past that the rows are sorted and cut.
        if let Some(bound) = self.bound()
            && self.rows.len() >= 2 * bound.max(512)
        {
            let query = self.query;
            self.rows.sort_by(|(a, _), (b, _)| by_order(query, a, b));
            self.rows.truncate(bound);
            self.held = (self.rows.iter())
                .map(|(order, result)| {
                    weight(result) + order.iter().flatten().map(weight).sum::<usize>()
                })
                .sum();
        }
    }

    /// How many of the sorted rows the results can come from, when that is fewer than all:
    /// a query sorted, neither grouped, aggregated nor de-duplicated, nor ranked by a score
    /// that needs every row (`FullTextScore`, `RRF`), with `TOP` or `OFFSET ... LIMIT`.
    fn bound(&self) -> Option<usize> {
        let query = self.query;
        let whole = query.distinct
            || !query.group.is_empty()
            || query.aggregates()
            || (query.rank && !matches!(query.order[0].0, Expr::Call(Function::VECTORDISTANCE, _)));
        if query.order.is_empty() || whole {
            return None;
        }
        let (offset, limit) = query.offset_limit.unwrap_or((0, u64::MAX));
        let wanted = offset.saturating_add(limit.min(query.top.unwrap_or(u64::MAX)));
        usize::try_from(wanted).ok().filter(|n| *n < usize::MAX / 4)
    }

    /// The results: each group projected, then sorted, and cut by `OFFSET ... LIMIT` and
    /// `TOP`.
    pub fn finish(mut self, meter: &Meter) -> Vec<Json> {
        let query = self.query;
        for (keys, accumulators) in std::mem::take(&mut self.groups) {
            let aggregates: Vec<Option<Json>> = (query.aggregates.iter())
                .zip(&accumulators)
                .map(|((name, _), accumulator)| accumulator.value(name))
                .collect();
            let scope = Scope {
                document: None,
                env: &[],
                meter,
                group: Some(Grouped {
                    by: &query.group,
                    keys: &keys,
                    aggregates: &aggregates,
                }),
                subquery: nested,
            };
            if let Some(result) = project(query, &scope) {
                self.keep(result, |query| {
                    (query.order.iter())
                        .map(|(e, _)| owned(value(e, &scope), meter))
                        .collect()
                });
            }
        }
        let mut rows = self.rows;
        if query.rank {
            // What the rank's function kept for each row becomes its score, now that every
            // row is in (BM25 and RRF need them all).
            let kept: Vec<Option<&Json>> = rows.iter().map(|(o, _)| o[0].as_ref()).collect();
            let scores = super::text::rank(&kept);
            for ((order, _), score) in rows.iter_mut().zip(scores) {
                order[0] = score.and_then(num);
            }
        }
        rows.sort_by(|(a, _), (b, _)| by_order(query, a, b));
        let (offset, limit) = query.offset_limit.unwrap_or((0, u64::MAX));
        let take = limit.min(query.top.unwrap_or(u64::MAX));
        rows.into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(take).unwrap_or(usize::MAX))
            .map(|(_, result)| result)
            .collect()
    }
}

/// How two rows' `ORDER BY` values order them.
fn by_order(query: &Query, a: &[Option<Json>], b: &[Option<Json>]) -> Ordering {
    for ((x, y), (_, descending)) in a.iter().zip(b).zip(&query.order) {
        let order = compare_for_order(x.as_ref(), y.as_ref());
        let order = if *descending { order.reverse() } else { order };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// An aggregate accumulated over the results of a query.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    count: u64,
    /// The sum, and what its rounding lost (Neumaier's compensated sum): the same total in
    /// whatever order the rows come.
    sum: f64,
    lost: f64,
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
            Some(n) => (self.sum, self.lost) = neumaier((self.sum, self.lost), &n),
            None => self.mixed = true,
        }
        let order = |a: &Json, b: &Json| compare_for_order(Some(a), Some(b));
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
            "SUM" if !self.mixed => whole_or(self.sum + self.lost),
            "AVG" if !self.mixed && self.count > 0 => {
                num((self.sum + self.lost) / self.count as f64)
            }
            "MIN" => self.min.clone(),
            "MAX" => self.max.clone(),
            _ => None,
        }
    }
}
