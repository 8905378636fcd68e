//! Immutability: a blob's (or a version's) time-based retention policy and legal hold. While a
//! policy's date is to come, or a hold is set, the blob can be read, copied, snapshotted and
//! tagged, never changed nor deleted (409 `BlobImmutableDueToPolicy` /
//! `BlobImmutableDueToLegalHold`), whatever the caller's key; nor can its container be deleted.
//! An unlocked policy may be changed or removed; a locked one only extended.

use crate::error_code::ErrorCode;
use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use ifmatch_core::date::parse_http_date;

/// `x-ms-immutability-policy-until-date`: until when a policy holds (an HTTP date).
pub const UNTIL: HeaderName = HeaderName::from_static("x-ms-immutability-policy-until-date");
/// `x-ms-immutability-policy-mode`: `Unlocked` or `Locked`.
pub const MODE: HeaderName = HeaderName::from_static("x-ms-immutability-policy-mode");
/// `x-ms-legal-hold`: `true` or `false`.
pub const LEGAL_HOLD: HeaderName = HeaderName::from_static("x-ms-legal-hold");

/// A time-based retention policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// Until when, in seconds since the Unix epoch.
    pub until: u64,
    /// Whether it may only be extended.
    pub locked: bool,
}

impl Policy {
    /// Reads a Set Immutability Policy's headers (the date, and the mode, `Unlocked` when
    /// absent): 400 `InvalidHeaderValue` for a date that is not one or not after `now`, or a
    /// mode that is not one, `MissingRequiredHeader` without a date.
    pub fn from_headers(headers: &HeaderMap, now: u64) -> Result<Self, ErrorCode> {
        let until = headers.get(UNTIL).ok_or(ErrorCode::MissingRequiredHeader)?;
        let until = parse_http_date(until).ok_or(ErrorCode::InvalidHeaderValue)?;
        let until = std::time::SystemTime::from(until)
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| ErrorCode::InvalidHeaderValue)?
            .as_secs();
        if until <= now {
            return Err(ErrorCode::InvalidHeaderValue);
        }
        let locked = match headers.get(MODE).map(HeaderValue::as_bytes) {
            None => false,
            Some(mode) if mode.eq_ignore_ascii_case(b"unlocked") => false,
            Some(mode) if mode.eq_ignore_ascii_case(b"locked") => true,
            Some(_) => return Err(ErrorCode::InvalidHeaderValue),
        };
        Ok(Self { until, locked })
    }

    /// Whether `self` may replace `old`: a locked policy only by a locked one that lasts at
    /// least as long.
    pub fn may_replace(self, old: Option<Self>) -> bool {
        match old {
            Some(old) if old.locked => self.locked && self.until >= old.until,
            _ => true,
        }
    }

    /// The mode's name, as the headers give it.
    pub fn mode(self) -> &'static str {
        if self.locked { "Locked" } else { "Unlocked" }
    }
}

/// Reads `x-ms-legal-hold`: 400 `InvalidHeaderValue` for a value not `true` nor `false`,
/// `MissingRequiredHeader` without one.
pub fn legal_hold(headers: &HeaderMap) -> Result<bool, ErrorCode> {
    match headers.get(LEGAL_HOLD).map(HeaderValue::as_bytes) {
        None => Err(ErrorCode::MissingRequiredHeader),
        Some(v) if v.eq_ignore_ascii_case(b"true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case(b"false") => Ok(false),
        Some(_) => Err(ErrorCode::InvalidHeaderValue),
    }
}

/// The protection a write that makes a blob asks for it (Put Blob, Put Block List, an append
/// blob's creation, a copy): a policy when `x-ms-immutability-policy-until-date` is given, a
/// legal hold when `x-ms-legal-hold: true`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtCreation {
    /// The policy.
    pub policy: Option<Policy>,
    /// The hold.
    pub legal_hold: bool,
}

impl AtCreation {
    /// Reads the request's headers, judged at `now` (seconds since the Unix epoch).
    pub fn from_headers(headers: &HeaderMap, now: u64) -> Result<Self, ErrorCode> {
        let policy = match headers.contains_key(UNTIL) {
            true => Some(Policy::from_headers(headers, now)?),
            false if headers.contains_key(MODE) => return Err(ErrorCode::MissingRequiredHeader),
            false => None,
        };
        let legal_hold = match headers.contains_key(LEGAL_HOLD) {
            true => legal_hold(headers)?,
            false => false,
        };
        Ok(Self { policy, legal_hold })
    }
}

/// Why a blob with this hold and policy may not be changed or deleted at `now`, if it may not.
pub fn refusal(legal_hold: bool, policy: Option<Policy>, now: u64) -> Option<ErrorCode> {
    if legal_hold {
        return Some(ErrorCode::BlobImmutableDueToLegalHold);
    }
    policy
        .filter(|p| p.until > now)
        .map(|_| ErrorCode::BlobImmutableDueToPolicy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_policy_is_only_extended() {
        let locked = Policy {
            until: 100,
            locked: true,
        };
        let unlocked = Policy {
            until: 100,
            locked: false,
        };
        assert!(unlocked.may_replace(Some(Policy {
            until: 50,
            locked: false
        })));
        assert!(
            Policy {
                until: 50,
                locked: false
            }
            .may_replace(Some(unlocked))
        );
        assert!(
            Policy {
                until: 200,
                locked: true
            }
            .may_replace(Some(locked))
        );
        assert!(
            !Policy {
                until: 99,
                locked: true
            }
            .may_replace(Some(locked))
        );
        assert!(
            !Policy {
                until: 200,
                locked: false
            }
            .may_replace(Some(locked))
        );
        assert_eq!(refusal(false, Some(locked), 100), None, "over");
        assert_eq!(
            refusal(false, Some(locked), 99),
            Some(ErrorCode::BlobImmutableDueToPolicy)
        );
        assert_eq!(
            refusal(true, None, 0),
            Some(ErrorCode::BlobImmutableDueToLegalHold)
        );
    }
}
