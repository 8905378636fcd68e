//! Reading a lease request's headers into a [`LeaseAction`].

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::action::{LeaseAction, LeaseDuration, LeaseId};
use crate::error_code::ErrorCode;

/// The lease headers of the blob dialect.
pub mod headers {
    use http::HeaderName;

    /// `x-ms-lease-action`: acquire, renew, change, release, break.
    pub const LEASE_ACTION: HeaderName = HeaderName::from_static("x-ms-lease-action");
    /// `x-ms-lease-id`: the current lease id, on requests and on answers.
    pub const LEASE_ID: HeaderName = HeaderName::from_static("x-ms-lease-id");
    /// `x-ms-proposed-lease-id`: the id to acquire under or change to.
    pub const PROPOSED_LEASE_ID: HeaderName = HeaderName::from_static("x-ms-proposed-lease-id");
    /// `x-ms-lease-duration`: seconds (15 to 60) or -1 on acquire; fixed or infinite on answers.
    pub const LEASE_DURATION: HeaderName = HeaderName::from_static("x-ms-lease-duration");
    /// `x-ms-lease-break-period`: seconds (0 to 60) on break.
    pub const LEASE_BREAK_PERIOD: HeaderName = HeaderName::from_static("x-ms-lease-break-period");
    /// `x-ms-lease-time`: seconds until broken, on the answer to break.
    pub const LEASE_TIME: HeaderName = HeaderName::from_static("x-ms-lease-time");
    /// `x-ms-lease-state` on properties answers.
    pub const LEASE_STATE: HeaderName = HeaderName::from_static("x-ms-lease-state");
    /// `x-ms-lease-status` on properties answers.
    pub const LEASE_STATUS: HeaderName = HeaderName::from_static("x-ms-lease-status");
}

/// A lease header that is missing or malformed: 400 with [`HeaderError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct HeaderError {
    /// `MissingRequiredHeader` or `InvalidHeaderValue`.
    pub code: ErrorCode,
    /// The offending header.
    pub header: HeaderName,
}

impl HeaderError {
    fn missing(header: HeaderName) -> Self {
        Self {
            code: ErrorCode::MissingRequiredHeader,
            header,
        }
    }

    fn invalid(header: HeaderName) -> Self {
        Self {
            code: ErrorCode::InvalidHeaderValue,
            header,
        }
    }
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.code.message(), self.header)
    }
}

/// The `x-ms-lease-id` of a blob or container operation: `None` when absent.
pub fn lease_id_from_headers(map: &HeaderMap) -> Result<Option<LeaseId>, HeaderError> {
    optional(map, headers::LEASE_ID, parse_id)
}

impl LeaseAction {
    /// Reads a Lease Blob or Lease Container request.
    ///
    /// `fresh_id` is called for an acquire that proposes no id; it must return a random
    /// (UUIDv4) id. A missing required header is `MissingRequiredHeader`; a malformed or
    /// out-of-range value, or an unknown action, is `InvalidHeaderValue`.
    pub fn from_headers(
        map: &HeaderMap,
        fresh_id: impl FnOnce() -> LeaseId,
    ) -> Result<Self, HeaderError> {
        let action = required(map, headers::LEASE_ACTION, |v| {
            Some(v.to_str().ok()?.trim())
        })?;
        let id = || required(map, headers::LEASE_ID, parse_id);
        let proposed = || required(map, headers::PROPOSED_LEASE_ID, parse_id);
        Ok(match action.to_ascii_lowercase().as_str() {
            "acquire" => Self::Acquire {
                duration: required(map, headers::LEASE_DURATION, parse_duration)?,
                id: optional(map, headers::PROPOSED_LEASE_ID, parse_id)?.unwrap_or_else(fresh_id),
            },
            "renew" => Self::Renew { id: id()? },
            "change" => Self::Change {
                id: id()?,
                proposed: proposed()?,
            },
            "release" => Self::Release { id: id()? },
            "break" => Self::Break {
                period: optional(map, headers::LEASE_BREAK_PERIOD, |v| {
                    parse_seconds(v).filter(|&p| p <= 60)
                })?,
            },
            _ => return Err(HeaderError::invalid(headers::LEASE_ACTION)),
        })
    }
}

fn optional<'a, T>(
    map: &'a HeaderMap,
    name: HeaderName,
    parse: impl FnOnce(&'a HeaderValue) -> Option<T>,
) -> Result<Option<T>, HeaderError> {
    let mut values = map.get_all(&name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(HeaderError::invalid(name));
    }
    parse(value).map(Some).ok_or(HeaderError::invalid(name))
}

fn required<'a, T>(
    map: &'a HeaderMap,
    name: HeaderName,
    parse: impl FnOnce(&'a HeaderValue) -> Option<T>,
) -> Result<T, HeaderError> {
    optional(map, name.clone(), parse)?.ok_or(HeaderError::missing(name))
}

fn parse_id(value: &HeaderValue) -> Option<LeaseId> {
    value.to_str().ok()?.trim().parse().ok()
}

fn parse_seconds(value: &HeaderValue) -> Option<u32> {
    let text = value.to_str().ok()?.trim();
    // `u32::from_str` accepts a leading `+`; the dialect has plain digits only.
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())?
}

fn parse_duration(value: &HeaderValue) -> Option<LeaseDuration> {
    if value.to_str().ok()?.trim() == "-1" {
        return Some(LeaseDuration::Infinite);
    }
    parse_seconds(value)
        .filter(|s| (LeaseDuration::MIN_SECONDS..=LeaseDuration::MAX_SECONDS).contains(s))
        .map(LeaseDuration::Fixed)
}
