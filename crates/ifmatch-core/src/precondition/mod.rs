//! Precondition evaluation: RFC 9110 section 13 ([`http`]) and the Azure Blob dialect
//! ([`blob`]).
//!
//! Both dialects read the same five request fields with the same parsers and compare tags with
//! the same functions ([`Conditions`]); they differ only in how the answers combine.

pub mod blob;
pub mod http;

use ::http::{HeaderMap, header};
use httpdate::HttpDate;

use crate::date::{parse_http_date, single_date};
use crate::{EntityTag, EntityTagList};

/// The validators of a resource's current representation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Validators {
    /// The current entity-tag, if the resource has one.
    pub etag: Option<EntityTag>,
    /// The last modification date, at whole seconds.
    #[serde(with = "unix_seconds")]
    pub last_modified: Option<HttpDate>,
    /// Whether `last_modified` is a strong validator (RFC 9110 8.8.2.2): the server knows the
    /// representation cannot change twice within that second. Only then may `If-Range` match
    /// by date. `false` unless set, which only costs a full 200 where a 206 was possible.
    #[serde(default)]
    pub last_modified_is_strong: bool,
}

impl Validators {
    /// Validators with this tag and date; the date is a weak validator.
    pub fn new(etag: Option<EntityTag>, last_modified: Option<HttpDate>) -> Self {
        Self {
            etag,
            last_modified,
            last_modified_is_strong: false,
        }
    }

    /// Validators with just a tag.
    pub fn etag(etag: EntityTag) -> Self {
        Self::new(Some(etag), None)
    }

    /// Marks the date as a strong validator (see [`Validators::last_modified_is_strong`]).
    pub fn with_strong_last_modified(mut self) -> Self {
        self.last_modified_is_strong = true;
        self
    }
}

/// What a request's preconditions say the server should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Perform the method (honouring `Range`, if any).
    Proceed,
    /// Perform the GET but ignore `Range` and send the whole representation with 200:
    /// `If-Range` did not match (RFC 9110 13.1.5).
    IgnoreRange,
    /// Answer 304 Not Modified (only ever for GET and HEAD).
    NotModified,
    /// Answer 412 Precondition Failed.
    PreconditionFailed,
}

/// The state of one `If-Match` / `If-None-Match` field.
#[derive(Debug)]
enum TagField {
    Absent,
    Invalid,
    List(EntityTagList),
}

impl TagField {
    fn parse(headers: &HeaderMap, name: &header::HeaderName) -> Self {
        let mut lines = headers.get_all(name).iter().peekable();
        if lines.peek().is_none() {
            return Self::Absent;
        }
        match EntityTagList::parse(lines.map(|v| v.as_bytes())) {
            Ok(list) => Self::List(list),
            Err(_) => Self::Invalid,
        }
    }

    fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// How many tags the field names; `*` counts as one.
    fn tag_count(&self) -> usize {
        match self {
            Self::Absent => 0,
            Self::Invalid | Self::List(EntityTagList::Any) => 1,
            Self::List(EntityTagList::Tags(tags)) => tags.len(),
        }
    }
}

#[derive(Debug)]
enum IfRange {
    Tag(EntityTag),
    Date(HttpDate),
    Invalid,
}

/// The five precondition fields of a request, parsed once, each evaluable on its own against
/// the current representation. `None` from an evaluation means the field is absent or must be
/// ignored; `Some(true)` that the condition holds.
#[derive(Debug)]
pub(crate) struct Conditions {
    if_match: TagField,
    if_none_match: TagField,
    if_modified_since: Option<HttpDate>,
    if_unmodified_since: Option<HttpDate>,
    if_range: Option<IfRange>,
    has_range: bool,
}

impl Conditions {
    pub(crate) fn parse(headers: &HeaderMap) -> Self {
        let if_range = headers.get(header::IF_RANGE).map(|value| {
            let bytes = value.as_bytes();
            if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
                EntityTag::parse(bytes).map_or(IfRange::Invalid, IfRange::Tag)
            } else {
                parse_http_date(value).map_or(IfRange::Invalid, IfRange::Date)
            }
        });
        Self {
            if_match: TagField::parse(headers, &header::IF_MATCH),
            if_none_match: TagField::parse(headers, &header::IF_NONE_MATCH),
            if_modified_since: single_date(headers, &header::IF_MODIFIED_SINCE),
            if_unmodified_since: single_date(headers, &header::IF_UNMODIFIED_SINCE),
            if_range,
            has_range: headers.contains_key(header::RANGE),
        }
    }

    /// RFC 9110 13.1.1: `*` holds when a representation exists; tags by strong comparison;
    /// invalid syntax never holds.
    fn if_match(&self, current: Option<&Validators>) -> Option<bool> {
        Some(match &self.if_match {
            TagField::Absent => return None,
            TagField::Invalid => false,
            TagField::List(EntityTagList::Any) => current.is_some(),
            TagField::List(list) => {
                current_etag(current).is_some_and(|tag| list.matches_strong(tag))
            }
        })
    }

    /// RFC 9110 13.1.2: `*` fails when a representation exists; tags by weak comparison.
    /// A field that does not parse names no tag, so it cannot fail.
    fn if_none_match(&self, current: Option<&Validators>) -> Option<bool> {
        Some(match &self.if_none_match {
            TagField::Absent => return None,
            TagField::Invalid => true,
            TagField::List(EntityTagList::Any) => current.is_none(),
            TagField::List(list) => {
                !current_etag(current).is_some_and(|tag| list.matches_weak(tag))
            }
        })
    }

    /// RFC 9110 13.1.4: holds when not modified after the date; ignored without a date.
    fn if_unmodified_since(&self, current: Option<&Validators>) -> Option<bool> {
        let since = self.if_unmodified_since?;
        let modified = current?.last_modified?;
        Some(modified <= since)
    }

    /// RFC 9110 13.1.3: holds when modified after the date; ignored without a date.
    fn if_modified_since(&self, current: Option<&Validators>) -> Option<bool> {
        let since = self.if_modified_since?;
        let modified = current?.last_modified?;
        Some(modified > since)
    }

    /// RFC 9110 13.1.5: only with a `Range`; a strong tag match, or a date equal to a strong
    /// Last-Modified. Anything else, including a weak tag or an invalid value, does not hold.
    fn if_range(&self, current: Option<&Validators>) -> Option<bool> {
        if !self.has_range {
            return None;
        }
        Some(match self.if_range.as_ref()? {
            IfRange::Tag(tag) => current_etag(current).is_some_and(|cur| tag.strong_eq(cur)),
            IfRange::Date(date) => current
                .is_some_and(|cur| cur.last_modified_is_strong && cur.last_modified == Some(*date)),
            IfRange::Invalid => false,
        })
    }
}

fn current_etag(current: Option<&Validators>) -> Option<&EntityTag> {
    current?.etag.as_ref()
}

mod unix_seconds {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use httpdate::HttpDate;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        date: &Option<HttpDate>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        date.map(|d| {
            SystemTime::from(d)
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        })
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<HttpDate>, D::Error> {
        // HttpDate stops at the end of year 9999 (and panics past it).
        const MAX: u64 = 253_402_300_799;
        match Option::<u64>::deserialize(d)? {
            Some(s) if s > MAX => Err(serde::de::Error::custom("date after year 9999")),
            secs => Ok(secs.map(|s| HttpDate::from(UNIX_EPOCH + Duration::from_secs(s)))),
        }
    }
}
