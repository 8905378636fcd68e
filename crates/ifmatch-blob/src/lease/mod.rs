//! The lease state machine of the blob dialect (`shared/spec/leases.md`), as a pure type.
//!
//! A [`Lease`] is the stored record of one blob's or container's lease. It never reads the
//! clock: every method takes `now`, and the time-driven states (`expired`, and `broken` at the
//! end of a break period) are derived from it lazily. [`Lease::apply`] runs a lease action
//! (acquire, renew, change, release, break) and [`Lease::authorize`] checks a blob or container
//! operation against the lease. Records serialize with serde so that every backend (in-process,
//! Redis, a Durable Object) stores the same thing and runs the same rules.
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use ifmatch_blob::lease::{Lease, LeaseAction, LeaseDuration, LeaseId, LeaseState};
//!
//! let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//! let id: LeaseId = "5a9b3a4e-1d2c-4b7a-9f00-0123456789ab".parse().unwrap();
//! let acquire = LeaseAction::Acquire { id, duration: LeaseDuration::Fixed(15) };
//! let done = Lease::default().apply(&acquire, t0).unwrap();
//! assert_eq!(done.status, http::StatusCode::CREATED);
//! assert_eq!(done.lease.state(t0), LeaseState::Leased);
//! assert_eq!(done.lease.state(t0 + Duration::from_secs(15)), LeaseState::Expired);
//! ```

mod action;
mod request;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode};

pub use self::action::{LeaseAction, LeaseDuration, LeaseId};
pub use self::request::{HeaderError, headers, lease_id_from_headers};
use crate::error_code::ErrorCode;

/// The state of a lease at one instant (`x-ms-lease-state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseState {
    /// Never leased, or released.
    Available,
    /// Held, and not run out.
    Leased,
    /// A fixed lease whose time has run out.
    Expired,
    /// Broken, with a break period still running.
    Breaking,
    /// Broken, the break period over.
    Broken,
}

impl LeaseState {
    /// The value of `x-ms-lease-state`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Leased => "leased",
            Self::Expired => "expired",
            Self::Breaking => "breaking",
            Self::Broken => "broken",
        }
    }

    /// `leased` and `breaking` are locked: writes need the lease id.
    pub const fn is_locked(self) -> bool {
        matches!(self, Self::Leased | Self::Breaking)
    }

    /// The value of `x-ms-lease-status`.
    pub const fn status_str(self) -> &'static str {
        if self.is_locked() {
            "locked"
        } else {
            "unlocked"
        }
    }

    /// [`as_str`](Self::as_str) as a header value, made when compiled (`from_static` called
    /// at run time checks each byte again, on every answer that carries it).
    pub fn header_value(self) -> HeaderValue {
        match self {
            Self::Available => const { HeaderValue::from_static(Self::Available.as_str()) },
            Self::Leased => const { HeaderValue::from_static(Self::Leased.as_str()) },
            Self::Expired => const { HeaderValue::from_static(Self::Expired.as_str()) },
            Self::Breaking => const { HeaderValue::from_static(Self::Breaking.as_str()) },
            Self::Broken => const { HeaderValue::from_static(Self::Broken.as_str()) },
        }
    }

    /// [`status_str`](Self::status_str) as a header value, made when compiled.
    pub fn status_value(self) -> HeaderValue {
        match self.is_locked() {
            true => const { HeaderValue::from_static(LeaseState::Leased.status_str()) },
            false => const { HeaderValue::from_static(LeaseState::Available.status_str()) },
        }
    }
}

/// The result of a successful lease action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The record to store.
    pub lease: Lease,
    /// 201 for acquire, 200 for renew, change and release, 202 for break.
    pub status: StatusCode,
    /// `x-ms-lease-id` of the answer: acquire, renew and change.
    pub lease_id: Option<LeaseId>,
    /// `x-ms-lease-time` of the answer: whole seconds until broken, break only.
    pub lease_time: Option<u64>,
}

impl Transition {
    /// The lease headers of the answer.
    pub fn headers(&self) -> HeaderMap {
        let mut out = HeaderMap::new();
        if let Some(id) = self.lease_id {
            out.insert(headers::LEASE_ID, id.to_header_value());
        }
        if let Some(time) = self.lease_time {
            out.insert(headers::LEASE_TIME, HeaderValue::from(time));
        }
        out
    }
}

/// Whether an operation reads or changes the resource it targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads need no lease id; one that is sent is checked as for a write.
    Read,
    /// Writes and deletes of a locked resource need its lease id.
    Write,
}

/// Whether the lease belongs to a blob or a container: it picks the error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A blob's lease.
    Blob,
    /// A container's lease: it guards only Delete Container (the one [`Access::Write`]).
    Container,
}

/// The stored lease record of one blob or container.
///
/// Times are kept in milliseconds since the Unix epoch. `expired`, and `broken` after a break
/// period, are not stored: they follow from the times and `now`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Lease {
    /// No lease.
    #[default]
    Available,
    /// Held under `id`; expired once `now >= expires_ms`.
    Leased {
        /// The lease id.
        id: LeaseId,
        /// The duration it was acquired for; renewals restart this.
        duration: LeaseDuration,
        /// When a fixed lease runs out; `None` for an infinite one.
        expires_ms: Option<u64>,
    },
    /// Broken with a period; broken once `now >= ends_ms`.
    Breaking {
        /// The lease id.
        id: LeaseId,
        /// When the break period ends.
        ends_ms: u64,
    },
    /// Broken; release with the id, or acquire anew.
    Broken {
        /// The lease id.
        id: LeaseId,
    },
}

impl Lease {
    /// The state at `now`.
    pub fn state(&self, now: SystemTime) -> LeaseState {
        // `now` in milliseconds only for a lease that may have ended by then: most records
        // have none, and every read of one asks its state.
        match *self {
            Self::Available => LeaseState::Available,
            Self::Leased {
                expires_ms: Some(end),
                ..
            } if millis(now) >= end => LeaseState::Expired,
            Self::Leased { .. } => LeaseState::Leased,
            Self::Breaking { ends_ms, .. } if millis(now) >= ends_ms => LeaseState::Broken,
            Self::Breaking { .. } => LeaseState::Breaking,
            Self::Broken { .. } => LeaseState::Broken,
        }
    }

    /// The id of the lease, in every state but `available`.
    pub fn id(&self) -> Option<LeaseId> {
        match *self {
            Self::Available => None,
            Self::Leased { id, .. } | Self::Breaking { id, .. } | Self::Broken { id } => Some(id),
        }
    }

    /// Adds `x-ms-lease-state`, `x-ms-lease-status` and, while leased, `x-ms-lease-duration`
    /// (`fixed` or `infinite`) to the headers of a properties answer.
    pub fn insert_headers(&self, now: SystemTime, out: &mut HeaderMap) {
        let state = self.state(now);
        out.insert(headers::LEASE_STATE, state.header_value());
        out.insert(headers::LEASE_STATUS, state.status_value());
        if let (LeaseState::Leased, Self::Leased { duration, .. }) = (state, self) {
            let value = match duration {
                LeaseDuration::Fixed(_) => "fixed",
                LeaseDuration::Infinite => "infinite",
            };
            out.insert(headers::LEASE_DURATION, HeaderValue::from_static(value));
        }
    }

    /// Runs a lease action at `now`: the transition table of `leases.md`.
    pub fn apply(&self, action: &LeaseAction, now: SystemTime) -> Result<Transition, ErrorCode> {
        use ErrorCode::*;
        use LeaseState::*;

        let state = self.state(now);
        let current = self.id();
        let held_by = |id: LeaseId| current == Some(id);
        let now_ms = millis(now);

        let (lease, status) = match *action {
            LeaseAction::Acquire { id, duration } => match state {
                // A breaking lease refuses every acquire with the code that names its state,
                // whoever proposes, as Azure answers (the spec's table said
                // `LeaseAlreadyPresent` for other ids).
                Breaking => return Err(LeaseIsBreakingAndCannotBeAcquired),
                Leased if !held_by(id) => return Err(LeaseAlreadyPresent),
                _ => (leased(id, duration, now_ms), StatusCode::CREATED),
            },
            LeaseAction::Renew { id } => match (state, *self) {
                _ if !held_by(id) => return Err(LeaseIdMismatchWithLeaseOperation),
                (Breaking | Broken, _) => return Err(LeaseIsBrokenAndCannotBeRenewed),
                (_, Self::Leased { duration, .. }) => {
                    (leased(id, duration, now_ms), StatusCode::OK)
                }
                _ => return Err(LeaseIdMismatchWithLeaseOperation),
            },
            LeaseAction::Change { id, proposed } => match (state, *self) {
                (Available | Broken | Expired, _) => return Err(LeaseNotPresentWithLeaseOperation),
                (Breaking, _) if held_by(id) => return Err(LeaseIsBreakingAndCannotBeChanged),
                (
                    Leased,
                    Self::Leased {
                        duration,
                        expires_ms,
                        ..
                    },
                ) if held_by(id) || held_by(proposed) => {
                    let lease = Self::Leased {
                        id: proposed,
                        duration,
                        expires_ms,
                    };
                    (lease, StatusCode::OK)
                }
                _ => return Err(LeaseIdMismatchWithLeaseOperation),
            },
            LeaseAction::Release { id } => match state {
                Available => return Err(LeaseIdMismatchWithLeaseOperation),
                _ if !held_by(id) => return Err(LeaseIdMismatchWithLeaseOperation),
                _ => (Self::Available, StatusCode::OK),
            },
            LeaseAction::Break { period } => {
                let Some(id) = current.filter(|_| state != Available) else {
                    return Err(LeaseNotPresentWithLeaseOperation);
                };
                // The lease cannot outlive its break: a running end (expiry or an earlier break)
                // always wins over a longer period.
                let running_end = match (state, *self) {
                    (Leased, Self::Leased { expires_ms, .. }) => expires_ms,
                    (Breaking, Self::Breaking { ends_ms, .. }) => Some(ends_ms),
                    _ => Some(now_ms),
                };
                let requested_end = period.map(|p| now_ms + u64::from(p) * 1000);
                let end = match (running_end, requested_end) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) => a,
                    (None, Some(b)) => b,
                    (None, None) => now_ms, // an infinite lease with no period breaks at once
                };
                let lease = if end > now_ms {
                    Self::Breaking { id, ends_ms: end }
                } else {
                    Self::Broken { id }
                };
                let time = (end.saturating_sub(now_ms)).div_ceil(1000);
                let transition = Transition {
                    lease,
                    status: StatusCode::ACCEPTED,
                    lease_id: None,
                    lease_time: Some(time),
                };
                return Ok(transition);
            }
        };
        let lease_id = match action {
            LeaseAction::Release { .. } => None,
            _ => lease.id(),
        };
        Ok(Transition {
            lease,
            status,
            lease_id,
            lease_time: None,
        })
    }

    /// Checks an operation on the leased resource that carries lease id `id` (from
    /// `x-ms-lease-id`), and returns the record to keep afterwards.
    ///
    /// A write without an id to an expired or broken lease proceeds and leaves the resource
    /// `available`: that is how a lease that ran out loses its claim (its id can no longer
    /// renew). Deleting the resource ends its lease; the caller drops the record.
    pub fn authorize(
        &self,
        scope: Scope,
        access: Access,
        id: Option<LeaseId>,
        now: SystemTime,
    ) -> Result<Lease, ErrorCode> {
        let locked = self.state(now).is_locked();
        let (mismatch, not_present) = match scope {
            Scope::Blob => (
                ErrorCode::LeaseIdMismatchWithBlobOperation,
                ErrorCode::LeaseNotPresentWithBlobOperation,
            ),
            Scope::Container => (
                ErrorCode::LeaseIdMismatchWithContainerOperation,
                ErrorCode::LeaseNotPresentWithContainerOperation,
            ),
        };
        match (id, locked, access) {
            (None, true, Access::Write) => Err(ErrorCode::LeaseIdMissing),
            (None, true, Access::Read) => Ok(*self),
            (None, false, Access::Write) => Ok(Self::Available),
            (None, false, Access::Read) => Ok(*self),
            (Some(_), false, _) => Err(not_present),
            (Some(given), true, _) if self.id() == Some(given) => Ok(*self),
            (Some(_), true, _) => Err(mismatch),
        }
    }
}

fn leased(id: LeaseId, duration: LeaseDuration, now_ms: u64) -> Lease {
    let expires_ms = match duration {
        LeaseDuration::Fixed(secs) => Some(now_ms + u64::from(secs) * 1000),
        LeaseDuration::Infinite => None,
    };
    Lease::Leased {
        id,
        duration,
        expires_ms,
    }
}

/// Milliseconds since the Unix epoch; times before it count as the epoch.
fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The instant `ms` milliseconds after the Unix epoch, for callers whose clock gives numbers
/// (a Worker's `Date.now()`).
pub fn time_from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}
