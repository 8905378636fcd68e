//! Throughput held to what is provisioned (`Endpoint::with_enforced_throughput`, the server's
//! `--cosmos-throughput enforce`): a request to a container's documents whose offer's budget
//! is spent is answered 429 with substatus 3200 and `x-ms-retry-after-ms` before it runs, as
//! Azure answers a partition past its throughput, and the SDKs wait that long and send it again.
//!
//! An offer's budget (the container's own, or its database's shared one) is a bucket that
//! fills at the offer's RU/s and holds one second of them (an autoscale offer: its maximum); a
//! request is admitted while the bucket is not below zero, and pays its charge once it ran (so
//! one large request may take it below, and the next wait, as in Azure). The requests held
//! back are told to come back one after the other, a usual request's share of the rate apart,
//! not all at the moment the bucket is back: ten clients of one container then take turns
//! instead of being held back again until their SDKs give up. The buckets are this
//! instance's (each instance of a fleet, each isolate of the Worker, holds its own requests to
//! the offer); what a container's offer is is read again every five seconds.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::failure::{Code, Failure};

/// How long what a container's offer is is trusted, in seconds.
const TRUSTED: f64 = 5.0;

/// How many containers' routes are remembered at most.
const MAX_ROUTES: usize = 10_000;

/// The buckets of this instance, by offer, and which offer each container draws on.
#[derive(Debug, Default)]
pub struct Budgets {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    buckets: HashMap<String, Bucket>,
    /// For each container (its account and link), the offer it draws on (none: not held)
    /// and when that was read.
    routes: HashMap<String, (Option<String>, f64)>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// RU/s.
    rate: f64,
    /// What it holds now, in RU (below zero: in debt).
    level: f64,
    /// When `level` was last brought up to date, in seconds.
    at: f64,
    /// What a request has cost lately, in RU (a moving average).
    usual: f64,
    /// The time the requests told to wait were last told to come back at, in seconds: each
    /// next one is told to come a usual request's share of the rate later, so that the
    /// clients held back do not all come back at once and be held back again.
    back_at: f64,
}

impl Bucket {
    fn at(mut self, now: f64) -> Self {
        self.level = (self.level + (now - self.at).max(0.0) * self.rate).min(self.rate);
        self.at = now;
        self
    }
}

impl Budgets {
    /// The offer `container` draws on, if it was read within the last five seconds:
    /// `Some(None)` when it draws on none.
    pub fn route(&self, container: &str, now: f64) -> Option<Option<String>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (offer, read) = inner.routes.get(container)?;
        (now - read < TRUSTED).then(|| offer.clone())
    }

    /// Records that `container` draws on `offer`, of `rate` RU/s (none: not held), at `now`.
    pub fn set_route(&self, container: &str, offer: Option<(String, f64)>, now: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = offer.as_ref().map(|(key, _)| key.clone());
        if let Some((key, rate)) = offer {
            let bucket = inner.buckets.entry(key).or_insert(Bucket {
                rate,
                level: rate,
                at: now,
                usual: 1.0,
                back_at: now,
            });
            *bucket = Bucket {
                rate,
                ..bucket.at(now)
            };
        }
        // A route per container asked for, which a client may name without its being there:
        // past the bound all are forgotten (each is read again at its next request).
        if inner.routes.len() >= MAX_ROUTES && !inner.routes.contains_key(container) {
            inner.routes.clear();
        }
        inner.routes.insert(container.to_owned(), (key, now));
    }

    /// Admits a request to `offer` at `now` (seconds), or refuses it with how long to wait.
    pub fn admit(&self, offer: &str, now: f64) -> Result<(), Failure> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bucket) = inner.buckets.get_mut(offer) else {
            return Ok(());
        };
        *bucket = bucket.at(now);
        if bucket.level >= 0.0 {
            return Ok(());
        }
        let back = (now - bucket.level / bucket.rate).max(bucket.back_at);
        bucket.back_at = back + bucket.usual / bucket.rate;
        let wait = ((back - now) * 1000.0).ceil().max(1.0) as u64;
        Err(too_many(wait))
    }

    /// Takes `charge` RU from `offer`'s bucket at `now`.
    pub fn spend(&self, offer: &str, charge: f64, now: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = inner.buckets.get_mut(offer) {
            *bucket = bucket.at(now);
            bucket.level -= charge;
            bucket.usual = 0.9 * bucket.usual + 0.1 * charge;
        }
    }
}

/// Azure's answer to a request past its partition's throughput.
fn too_many(wait_ms: u64) -> Failure {
    Failure::new(
        Code::TooManyRequests,
        "Message: {\"Errors\":[\"Request rate is large. More Request Units may be needed, so no \
         changes were made. Please retry this request later.\"]}",
    )
    .with_substatus(3200)
    .with_retry_after(wait_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_admits_while_it_holds_and_says_how_long_to_wait_after() {
        let budgets = Budgets::default();
        assert!(budgets.route("c", 0.0).is_none(), "never read");
        budgets.set_route("c", Some(("o".into(), 400.0)), 0.0);
        assert_eq!(budgets.route("c", 4.9), Some(Some("o".into())));
        assert!(
            budgets.route("c", 5.0).is_none(),
            "read again after five seconds"
        );
        // 400 RU/s: the first second's 400 RU, then a debt of 100 RU is a quarter second.
        budgets.admit("o", 0.0).unwrap();
        budgets.spend("o", 500.0, 0.0);
        let refused = budgets.admit("o", 0.0).unwrap_err();
        assert_eq!(refused.code, Code::TooManyRequests);
        assert_eq!(refused.substatus, Some(3200));
        assert_eq!(refused.retry_after_ms, Some(250));
        // The next one held back is told to come a usual request later (here 50.9 RU: 127 ms).
        let refused = budgets.admit("o", 0.125).unwrap_err();
        assert_eq!(refused.retry_after_ms, Some(125 + 128));
        budgets.admit("o", 0.25).unwrap();
        // A bucket holds one second at most, however long it was idle.
        budgets.spend("o", 0.0, 100.0);
        budgets.spend("o", 401.0, 100.0);
        assert!(budgets.admit("o", 100.0).is_err());
        // An offer not held (a container with none) admits everything.
        budgets.admit("other", 0.0).unwrap();
        // Containers named without being there are remembered up to the bound, then forgotten.
        for n in 1..MAX_ROUTES {
            budgets.set_route(&format!("nothing/{n}"), None, 0.0);
        }
        assert!(budgets.route("c", 0.0).is_some());
        budgets.set_route("one more", None, 0.0);
        assert!(
            budgets.route("c", 0.0).is_none(),
            "forgotten past the bound"
        );
        assert_eq!(budgets.inner.lock().unwrap().routes.len(), 1);
    }
}
