//! A container's own protection, which Azure sets through its management API (ARM), not the
//! blob service: a time-based retention policy counted in days from each blob's change, and
//! legal holds named by tags. While either is in force no blob of the container (nor a
//! snapshot or a version of one) is changed or deleted, whatever the caller's key: blobs are
//! created and read. After a blob's retention it may be deleted, never overwritten; an append
//! blob takes new blocks when the policy allows protected append writes. An unlocked policy
//! may be changed or removed; a locked one only extended, five times at most.
//!
//! Azure counts a blob's retention from its creation; the record keeps its last change, which
//! is its creation for every blob written while the policy holds (no blob is overwritten then).
//! A blob changed before the policy was set is kept from that change: longer than Azure keeps
//! it, never shorter.

use crate::error_code::ErrorCode;

/// The shortest retention, in days.
pub const MIN_DAYS: u32 = 1;
/// The longest retention, in days (400 years).
pub const MAX_DAYS: u32 = 146_000;
/// How many times a locked policy may be extended.
pub const MAX_EXTENSIONS: u8 = 5;
/// How many legal hold tags a container holds.
pub const MAX_TAGS: usize = 10;

/// A container's protection: its policy and its legal holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Protection {
    /// The time-based retention policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The legal holds, in the order they were set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<Hold>,
}

/// A container's time-based retention policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// How many days each blob is kept from its change.
    pub days: u32,
    /// Whether it may only be extended.
    pub locked: bool,
    /// Whether an append blob takes new blocks meanwhile.
    #[serde(default)]
    pub appends: bool,
    /// How many times it was extended since it was locked.
    #[serde(default)]
    pub extensions: u8,
    /// Its entity tag (quoted), new at each change: its If-Match.
    pub etag: String,
}

/// A legal hold: its tag, and who set it when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    /// The tag (lowercase letters and digits).
    pub tag: String,
    /// When it was set, in seconds since the Unix epoch.
    pub at: u64,
    /// The principal that set it (empty without a token).
    #[serde(default)]
    pub principal: String,
    /// The principal's tenant.
    #[serde(default)]
    pub tenant: String,
}

/// What the protection reads of a blob that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blob {
    /// Its last change, in seconds since the Unix epoch.
    pub changed: u64,
    /// Whether it is an append blob.
    pub appendable: bool,
}

/// What a write does to a blob that exists, as the protection judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Delete Blob (a blob, a snapshot, a version).
    Delete,
    /// Append Block.
    Append,
    /// Any other change of its bytes, metadata or properties.
    Other,
}

impl Protection {
    /// Whether it protects anything (a container record without one keeps none).
    pub fn is_empty(&self) -> bool {
        self.policy.is_none() && self.holds.is_empty()
    }

    /// Why `change` of `blob` (which exists) is refused at `now` (seconds since the Unix
    /// epoch), if it is.
    pub fn refusal(&self, blob: Blob, change: Change, now: u64) -> Option<ErrorCode> {
        if !self.holds.is_empty() {
            return Some(ErrorCode::BlobImmutableDueToLegalHold);
        }
        let policy = self.policy.as_ref()?;
        let refused = match change {
            Change::Delete => policy.holds(blob.changed, now),
            Change::Append => !(policy.appends && blob.appendable),
            Change::Other => true,
        };
        refused.then_some(ErrorCode::BlobImmutableDueToPolicy)
    }

    /// Why its container may not be deleted, whatever its blobs: a locked policy, or a hold.
    pub fn container_refusal(&self) -> Option<ErrorCode> {
        if !self.holds.is_empty() {
            return Some(ErrorCode::ContainerHasLegalHold);
        }
        (self.policy.as_ref())
            .filter(|p| p.locked)
            .map(|_| ErrorCode::ContainerImmutabilityPolicyLocked)
    }

    /// Adds the holds of `tags` (already read by [`tags`]) not already set: `Err` with why
    /// when the container would hold more than [`MAX_TAGS`].
    pub fn hold(&mut self, tags: Vec<String>, at: u64, who: (&str, &str)) -> Result<(), String> {
        for tag in tags {
            if self.holds.iter().any(|h| h.tag == tag) {
                continue;
            }
            if self.holds.len() == MAX_TAGS {
                return Err(format!(
                    "a container holds at most {MAX_TAGS} legal hold tags"
                ));
            }
            self.holds.push(Hold {
                tag,
                at,
                principal: who.0.to_owned(),
                tenant: who.1.to_owned(),
            });
        }
        Ok(())
    }

    /// Removes the holds of `tags`.
    pub fn release(&mut self, tags: &[String]) {
        self.holds.retain(|h| !tags.contains(&h.tag));
    }
}

impl Policy {
    /// Whether it still keeps a blob last changed at `changed` at `now` (seconds).
    pub fn holds(&self, changed: u64, now: u64) -> bool {
        changed.saturating_add(u64::from(self.days) * 86_400) > now
    }
}

/// Reads a retention in days: `Err` with why outside [`MIN_DAYS`]..=[`MAX_DAYS`].
pub fn days(days: i64) -> Result<u32, String> {
    match u32::try_from(days) {
        Ok(d) if (MIN_DAYS..=MAX_DAYS).contains(&d) => Ok(d),
        _ => Err(format!(
            "immutabilityPeriodSinceCreationInDays is {MIN_DAYS} to {MAX_DAYS}, not {days}"
        )),
    }
}

/// Reads legal hold tags as Azure takes them: 1 to [`MAX_TAGS`], each 3 to 23 letters and
/// digits, kept in lowercase. `Err` with why.
pub fn tags(given: &[String]) -> Result<Vec<String>, String> {
    if given.is_empty() || given.len() > MAX_TAGS {
        return Err(format!("a legal hold names 1 to {MAX_TAGS} tags"));
    }
    given
        .iter()
        .map(|tag| {
            let fits =
                (3..=23).contains(&tag.len()) && tag.bytes().all(|b| b.is_ascii_alphanumeric());
            match fits {
                true => Ok(tag.to_ascii_lowercase()),
                false => Err(format!(
                    "legal hold tag {tag:?} is not 3 to 23 letters and digits"
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(changed: u64, appendable: bool) -> Blob {
        Blob {
            changed,
            appendable,
        }
    }

    fn policy(days: u32, appends: bool) -> Protection {
        Protection {
            policy: Some(Policy {
                days,
                locked: false,
                appends,
                extensions: 0,
                etag: "\"1\"".into(),
            }),
            holds: Vec::new(),
        }
    }

    #[test]
    fn a_policy_keeps_each_blob_its_days_from_its_change_then_lets_it_go_never_overwritten() {
        let day = 86_400;
        let p = policy(2, false);
        let b = blob(1000, false);
        let refused = Some(ErrorCode::BlobImmutableDueToPolicy);
        assert_eq!(p.refusal(b, Change::Delete, 1000 + 2 * day - 1), refused);
        assert_eq!(p.refusal(b, Change::Delete, 1000 + 2 * day), None);
        assert_eq!(p.refusal(b, Change::Other, 1000 + 400 * day), refused);
        assert_eq!(p.refusal(b, Change::Append, 1000), refused);
    }

    #[test]
    fn protected_appends_reach_append_blobs_only() {
        let p = policy(2, true);
        assert_eq!(p.refusal(blob(0, true), Change::Append, 1), None);
        assert_eq!(
            p.refusal(blob(0, false), Change::Append, 1),
            Some(ErrorCode::BlobImmutableDueToPolicy)
        );
    }

    #[test]
    fn a_hold_refuses_every_change_and_its_container_deletion() {
        let mut p = Protection::default();
        p.hold(vec!["case1".into()], 0, ("", "")).unwrap();
        let held = Some(ErrorCode::BlobImmutableDueToLegalHold);
        for change in [Change::Delete, Change::Append, Change::Other] {
            assert_eq!(p.refusal(blob(0, true), change, u64::MAX), held);
        }
        assert_eq!(
            p.container_refusal(),
            Some(ErrorCode::ContainerHasLegalHold)
        );
        p.release(&["case1".into()]);
        assert!(p.is_empty());
    }

    #[test]
    fn every_limit_is_refused_one_past_it() {
        assert!(days(0).is_err());
        assert_eq!(days(1), Ok(1));
        assert_eq!(days(146_000), Ok(146_000));
        assert!(days(146_001).is_err());
        assert!(tags(&["ab".into()]).is_err());
        assert_eq!(tags(&["AbC".into()]), Ok(vec!["abc".into()]));
        assert!(tags(&["a".repeat(23)]).is_ok());
        assert!(tags(&["a".repeat(24)]).is_err());
        assert!(tags(&["ab-c".into()]).is_err());
        let eleven: Vec<String> = (0..11).map(|i| format!("tag{i}")).collect();
        assert!(tags(&eleven).is_err());
        let mut p = Protection::default();
        p.hold(tags(&eleven[..10]).unwrap(), 0, ("", "")).unwrap();
        assert!(p.hold(vec!["tag10".into()], 0, ("", "")).is_err());
        assert!(
            p.hold(vec!["tag9".into()], 0, ("", "")).is_ok(),
            "set again"
        );
    }
}
