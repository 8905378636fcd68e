//! What evaluating a query may spend. A query is code a client sends: forty nested
//! `REPLACE(s, 'a', 'aa')` double a string forty times, and `[c, c, c, ...]` copies the
//! document once per `c`. So every value the evaluator builds is charged, a byte a unit,
//! *before* it is built, and so is every step of a comparison or a match that costs more than
//! one: once a meter is spent, nothing more is built, the value is undefined, and whoever
//! holds the meter answers with an error that names the bound.
//!
//! The units are work, not time, so the bound is the same on every host and in a Worker, whose
//! clock does not move while it computes.

use std::cell::{Cell, RefCell};

use serde_json::Value as Json;

use super::error::SqlError;

/// What evaluating a query for one document may build and compare: 16 MiB, eight times the
/// largest document. The memory one evaluation holds is within it.
pub const DOCUMENT_WORK: u64 = 16 << 20;

/// What one match of a search that replaces or splits costs beside the bytes it reads and
/// builds: a step of the searcher and a piece appended, measured at about 20 times a byte
/// copied (`REPLACE(s, 'a', 'aa')` on a string of `a`s, where each byte is a match). Charged
/// at a byte a match, forty nested such `REPLACE`s held a thread for 0.4 to 0.8 s before the
/// meter stopped them, and the reads waiting for that thread with them.
pub(crate) const MATCH_WORK: usize = 16;

/// A budget of work units, spent as the evaluator builds and compares; it also carries what
/// an evaluation reads besides its rows: the query's instant (for the clock functions, the
/// same for every document of a page) and a stream of random numbers (`RAND`).
#[derive(Debug)]
pub struct Meter {
    limit: u64,
    spent: Cell<u64>,
    exceeded: Cell<bool>,
    /// Ticks of 100 ns since the Unix epoch.
    instant: Option<i64>,
    random: Cell<u64>,
    /// The last regular expression compiled, by its pattern and modifiers: a `RegexMatch`
    /// is compiled once for all the rows of a document, not once a row.
    regex: RefCell<Option<(String, regex::Regex)>>,
    /// Why the evaluation was refused, when it was for a reason of its own rather than for
    /// the work it would take.
    refusal: RefCell<Option<String>>,
}

impl Meter {
    /// A meter of `limit` units.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            spent: Cell::new(0),
            exceeded: Cell::new(false),
            instant: None,
            random: Cell::new(0x2545_F491_4F6C_DD1D),
            regex: RefCell::new(None),
            refusal: RefCell::new(None),
        }
    }

    /// The meter with the query's instant, `unix_ticks` of 100 ns since the Unix epoch
    /// (which also seeds its random numbers).
    pub fn at(mut self, unix_ticks: i64) -> Self {
        self.instant = Some(unix_ticks);
        self.random.set(unix_ticks as u64 | 1);
        self
    }

    /// The query's instant, in ticks since the Unix epoch, if it was given one.
    pub(crate) fn instant(&self) -> Option<i64> {
        self.instant
    }

    /// A number in [0, 1) (xorshift64*: `RAND` promises no more than an even spread).
    pub(crate) fn random(&self) -> f64 {
        let mut x = self.random.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A meter for one document's evaluation: [`DOCUMENT_WORK`] units.
    pub fn per_document() -> Self {
        Self::new(DOCUMENT_WORK)
    }

    /// Takes `units`, or, when fewer are left, marks the meter exceeded for good and takes
    /// nothing: `None`, so that `meter.take(n)?` stops the evaluation where it stands.
    pub(crate) fn take(&self, units: usize) -> Option<()> {
        let spent = self.spent.get().saturating_add(units as u64);
        if self.exceeded.get() || spent > self.limit {
            self.exceeded.set(true);
            return None;
        }
        self.spent.set(spent);
        Some(())
    }

    /// Whether `text` matches `pattern` with `modifiers` (`i`, `m`, `s`, `x`); `None` for a
    /// pattern or a modifier that is not one. Compiling is charged by the pattern's length,
    /// matching by the text's: the engine is of finite automata (linear in the text, never
    /// backtracking), its memory bounded.
    pub(crate) fn regex_match(&self, text: &str, pattern: &str, modifiers: &str) -> Option<bool> {
        self.take(text.len())?;
        let key = format!("{modifiers}/{pattern}");
        let mut last = self.regex.borrow_mut();
        if last.as_ref().is_none_or(|(k, _)| *k != key) {
            self.take(64 * pattern.len())?;
            let mut builder = regex::RegexBuilder::new(pattern);
            builder.size_limit(1 << 20).dfa_size_limit(1 << 20);
            for modifier in modifiers.chars() {
                match modifier {
                    'i' => builder.case_insensitive(true),
                    'm' => builder.multi_line(true),
                    's' => builder.dot_matches_new_line(true),
                    'x' => builder.ignore_whitespace(true),
                    _ => return None,
                };
            }
            *last = Some((key, builder.build().ok()?));
        }
        last.as_ref().map(|(_, regex)| regex.is_match(text))
    }

    /// Takes what a copy of `value` costs.
    pub(crate) fn copy(&self, value: &Json) -> Option<Json> {
        self.take(weight(value))?;
        Some(value.clone())
    }

    /// Refuses the whole evaluation for `why` (a limit of the service, such as a geometry's
    /// points): as [`Meter::take`] past the limit, the evaluation stops, and
    /// [`Meter::error`] names `why`.
    pub(crate) fn refuse(&self, why: String) {
        self.exceeded.set(true);
        self.refusal.borrow_mut().get_or_insert(why);
    }

    /// Why an exceeded meter refused: what [`Meter::refuse`] said, else the work bound.
    pub fn error(&self) -> SqlError {
        match &*self.refusal.borrow() {
            Some(why) => SqlError::new(why.clone()),
            None => exceeded(),
        }
    }

    /// Whether something was refused: the evaluation's result is not to be used.
    pub fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    /// The units taken so far.
    pub fn spent(&self) -> u64 {
        self.spent.get()
    }
}

/// About what `value` takes in memory, in bytes: its JSON's length, give or take the quotes
/// and commas.
pub fn weight(value: &Json) -> usize {
    match value {
        Json::Null | Json::Bool(_) | Json::Number(_) => 8,
        Json::String(s) => s.len() + 2,
        Json::Array(items) => items.iter().map(weight).sum::<usize>() + 2,
        Json::Object(fields) => fields.iter().map(|(k, v)| k.len() + 4 + weight(v)).sum(),
    }
}

/// The error of an evaluation whose meter was spent.
fn exceeded() -> SqlError {
    SqlError::new(format!(
        "The query builds or compares more than {} MiB for one document (the strings, arrays \
         and objects its functions and constructors make, the copies it makes of the document): \
         it is refused rather than allowed to take the server's memory.",
        DOCUMENT_WORK >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_refuses_for_good_once_spent() {
        let meter = Meter::new(10);
        assert_eq!(meter.take(6), Some(()));
        assert_eq!(meter.take(6), None, "6 more would pass the limit");
        assert!(meter.exceeded());
        assert_eq!(meter.take(1), None, "exceeded stays exceeded");
        assert_eq!(meter.spent(), 6);
        assert_eq!(weight(&serde_json::json!({"ab": "cd"})), 2 + 4 + 4);
    }
}
