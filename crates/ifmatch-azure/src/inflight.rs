//! What the requests in flight may hold in memory together, for the dialects that read JSON
//! bodies whole (the Table service, Cosmos DB).
//!
//! A request's body is at most a few MiB (its dialect's
//! [`WholeBody::MAX_BODY`](crate::WholeBody::MAX_BODY)), but what reading it as JSON builds is
//! not in proportion to its bytes: each value of `[0,0,0,...]` is two bytes of text and a
//! [`serde_json::Value`] of 80 (with the preserved property order), so a 2 MB body
//! of a million zeros, a query's parameter or a bulk body or a patch's value, is about 80 MB
//! once read, and a few dozen at once would take the machine. So before a request is read, what
//! reading it may build is [`weighed`](weight) from its bytes alone (one pass, no allocation),
//! and a request that weighs more than [`SMALL`] is admitted only while the weights of those
//! in flight stay within the endpoint's budget; past it, it is answered 429 with a time to
//! retry after, which the SDKs honour. Requests of at most [`SMALL`] (every ordinary document,
//! query and batch) are always admitted, so heavy ones never starve them; their number is
//! bounded by the host's connections. One that weighs more than the whole budget is never
//! admitted: 413, as a body too large.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The weight below which a request is always admitted: 1 MiB.
pub const SMALL: usize = 1 << 20;

/// The default budget of the heavy requests in flight together: 256 MiB (one body of a million
/// values at a time, beside any number of ordinary ones).
pub const DEFAULT_BUDGET: usize = 256 << 20;

/// The memory one parsed JSON value takes besides its text: the size of a `serde_json::Value`
/// with the preserved property order the workspace builds it with (the dialects' crates test
/// that it is no more). A member of an object counts twice (its `:` and the `,` or `{` before
/// it): its value and its place in the map.
pub const PER_VALUE: usize = 80;

/// About the most memory reading `body` as JSON builds, in bytes: the text and each value's
/// own size, three times over. A list's values are read into a vector that doubles as it grows
/// (a million values: 84 MB once read, 126 MB while the last doubling copies), and a handler may
/// hold the body and what it makes of it (a document and its answer) at once; measured, the
/// server's peak grows by about 200 MB while a body of a million zeros is read. Counted from
/// the bytes that start a value or a member outside strings (`,`, `:`, `[`, `{`).
pub fn weight(body: &[u8]) -> usize {
    let mut values = 1usize;
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' | b':' | b'[' | b'{' => values += 1,
            _ => {}
        }
    }
    3 * (body.len() + values * PER_VALUE)
}

/// The budget of the heavy requests in flight, shared by every request of an endpoint.
#[derive(Debug)]
pub struct Inflight {
    limit: usize,
    used: AtomicUsize,
}

impl Default for Inflight {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

impl Inflight {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    /// The budget, in bytes: a request weighing more is never admitted.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// What the heavy requests in flight weigh now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Admits a request of `weight`: always when it is at most [`SMALL`]; never when it is
    /// more than the whole budget ([`Refused::TooHeavy`]); otherwise while the weights in
    /// flight with it stay within the budget ([`Refused::Busy`] past it). Held until dropped.
    pub fn admit(&self, weight: usize) -> Result<Admitted<'_>, Refused> {
        if weight <= SMALL {
            return Ok(Admitted {
                inflight: self,
                weight: 0,
            });
        }
        if weight > self.limit {
            return Err(Refused::TooHeavy {
                weight,
                limit: self.limit,
            });
        }
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(weight)
                    .filter(|&total| total <= self.limit)
            })
            .map_err(|_| Refused::Busy { weight })?;
        Ok(Admitted {
            inflight: self,
            weight,
        })
    }
}

/// Why a request was not admitted: each dialect answers it with its own status and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It weighs more than the whole budget: it is never read (a body too large, 413).
    TooHeavy {
        /// What it weighs.
        weight: usize,
        /// The budget.
        limit: usize,
    },
    /// The heavy requests in flight leave too little now: it may be retried (429 or 503).
    Busy {
        /// What it weighs.
        weight: usize,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::TooHeavy { weight, limit } => write!(
                f,
                "Reading this request would take about {} MiB; this server reads at most {} MiB of requests at once.",
                weight >> 20,
                limit >> 20
            ),
            Self::Busy { weight } => write!(
                f,
                "Reading this request takes about {} MiB, more than the large requests in flight leave now: retry it.",
                weight >> 20
            ),
        }
    }
}

/// A request admitted: its weight is given back when it is answered.
#[derive(Debug)]
pub struct Admitted<'a> {
    inflight: &'a Inflight,
    weight: usize,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.inflight.used.fetch_sub(self.weight, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_weighs_its_values_not_its_bytes() {
        let zeros = format!("[{}0]", "0,".repeat(1_000_000));
        assert!(weight(zeros.as_bytes()) >= 1_000_000 * PER_VALUE);
        // Commas and colons inside strings start no value.
        let text = format!("{{\"s\": \"{}\"}}", ",:[{".repeat(250_000));
        assert!(weight(text.as_bytes()) < 4 * text.len());
        assert!(weight(br#"{"id": "a", "pk": "p"}"#) < SMALL);
    }

    #[test]
    fn heavy_requests_share_the_budget_and_small_ones_always_pass() {
        let inflight = Inflight::new(10 * SMALL);
        let first = inflight.admit(6 * SMALL).expect("within the budget");
        let busy = inflight.admit(6 * SMALL).map(|_| ()).unwrap_err();
        assert_eq!(
            busy,
            Refused::Busy { weight: 6 * SMALL },
            "12 MiB is past 10"
        );
        assert!(inflight.admit(SMALL).is_ok(), "a small one passes");
        let never = inflight.admit(11 * SMALL).map(|_| ()).unwrap_err();
        assert!(
            matches!(never, Refused::TooHeavy { .. }),
            "more than the whole budget"
        );
        assert!(inflight.admit(usize::MAX).is_err(), "no overflow");
        drop(first);
        assert_eq!(inflight.used(), 0);
        assert!(inflight.admit(6 * SMALL).is_ok(), "given back");
    }
}
