//! What a lease request asks: its action, with the lease's id and duration.

use std::fmt;
use std::str::FromStr;

use http::HeaderValue;

/// A lease id: a GUID, compared by value (so case and braces do not matter).
#[derive(Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct LeaseId(uuid::Uuid);

impl LeaseId {
    /// A lease id from a UUID. Server-generated ids must be random (UUIDv4): they are the only
    /// thing that stands between a client and another client's lease.
    pub fn from_uuid(uuid: uuid::Uuid) -> Self {
        Self(uuid)
    }

    /// The UUID.
    pub fn as_uuid(&self) -> &uuid::Uuid {
        &self.0
    }

    /// The id as a field value, lowercase and hyphenated.
    pub fn to_header_value(&self) -> HeaderValue {
        HeaderValue::try_from(self.to_string()).expect("a hyphenated UUID is ASCII")
    }
}

impl FromStr for LeaseId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// How long an acquired lease lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseDuration {
    /// A number of seconds, 15 to 60.
    Fixed(u32),
    /// Until released or broken (`x-ms-lease-duration: -1`).
    Infinite,
}

impl LeaseDuration {
    /// The shortest fixed lease, in seconds.
    pub const MIN_SECONDS: u32 = 15;
    /// The longest fixed lease, in seconds.
    pub const MAX_SECONDS: u32 = 60;
}

/// A lease action, with its arguments already validated ([`LeaseAction::from_headers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAction {
    /// Take the lease under `id`: the proposed id, or a fresh random one when none was proposed.
    Acquire {
        /// The id to take the lease under.
        id: LeaseId,
        /// How long the lease lasts.
        duration: LeaseDuration,
    },
    /// Restart the clock of the lease `id`.
    Renew {
        /// The current lease id.
        id: LeaseId,
    },
    /// Replace the id of an active lease.
    Change {
        /// The current lease id.
        id: LeaseId,
        /// The id the lease continues under.
        proposed: LeaseId,
    },
    /// Give up the lease `id`.
    Release {
        /// The current lease id.
        id: LeaseId,
    },
    /// End the lease, now or after a break period.
    Break {
        /// Seconds before the lease is broken, 0 to 60; `None` lets a fixed lease run out.
        period: Option<u32>,
    },
}
