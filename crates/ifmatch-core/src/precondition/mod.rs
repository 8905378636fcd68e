//! Precondition evaluation: RFC 9110 section 13 ([`rfc9110`]), and the one model every dialect
//! reads its conditions with ([`Conditions`]).
//!
//! Every dialect reads the same five request fields with the same parsers and compares tags with
//! the same functions; they differ only in how the answers combine (the blob dialect's rules
//! are `ifmatch_blob::precondition`'s).

mod if_match;
pub mod rfc9110;

pub use if_match::IfMatch;

use crate::date::HttpDate;
use crate::date::{parse_http_date, single_date};
use crate::etag::EntityTag;
use crate::etag::scan_list;
use http::{HeaderMap, header};

/// The four conditions of RFC 9110 13.1.1-13.1.4, in the order 13.2.2 evaluates them.
/// (`If-Range` qualifies a `Range`; it is not a condition on the method.)
pub const CONDITIONS: [header::HeaderName; 4] = [
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
];

/// Whether a request carries a condition that applies to its method: `If-Modified-Since` counts
/// only for GET and HEAD (RFC 9110 13.1.3), so a write carrying only that one is unconditional.
pub fn is_conditional(method: &http::Method, headers: &HeaderMap) -> bool {
    let reads = matches!(*method, http::Method::GET | http::Method::HEAD);
    CONDITIONS
        .iter()
        .filter(|name| reads || **name != header::IF_MODIFIED_SINCE)
        .any(|name| headers.contains_key(name))
}

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

/// What an `If-Match` or `If-None-Match` field says about the current tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagField {
    /// The request does not carry it.
    Absent,
    /// It does not parse as `*` or a list of entity-tags.
    Invalid,
    /// `*`.
    Any,
    /// `count` tags, of which at least one matched the current tag when `matched`.
    Tags {
        /// How many tags it lists.
        count: usize,
        /// Whether one of them matched.
        matched: bool,
    },
}

impl TagField {
    /// Whether the request carries the field.
    pub fn is_present(self) -> bool {
        self != Self::Absent
    }

    /// The field read as `If-Match` (RFC 9110 13.1.1): `*` holds when a representation exists;
    /// tags by strong comparison; invalid syntax never holds.
    pub fn as_if_match(self, exists: bool) -> Option<bool> {
        match self {
            Self::Absent => None,
            Self::Invalid => Some(false),
            Self::Any => Some(exists),
            Self::Tags { matched, .. } => Some(matched),
        }
    }

    /// The field read as `If-None-Match` (RFC 9110 13.1.2): `*` fails when a representation
    /// exists; tags by weak comparison. A field that does not parse names no tag, so it holds.
    pub fn as_if_none_match(self, exists: bool) -> Option<bool> {
        match self {
            Self::Absent => None,
            Self::Invalid => Some(true),
            Self::Any => Some(!exists),
            Self::Tags { matched, .. } => Some(!matched),
        }
    }

    /// How many tags the field names; `*` and an invalid field count as one.
    pub fn tag_count(self) -> usize {
        match self {
            Self::Absent => 0,
            Self::Invalid | Self::Any => 1,
            Self::Tags { count, .. } => count,
        }
    }
}

/// The precondition fields of a request, read lazily: a field that RFC 9110 says to ignore is
/// never parsed, and tag lists are matched in place without allocating. Each method answers
/// for one field against the current representation: `None` when the field is absent or must be
/// ignored, `Some(true)` when its condition holds.
#[derive(Debug, Clone, Copy)]
pub struct Conditions<'a> {
    headers: &'a HeaderMap,
}

impl<'a> Conditions<'a> {
    /// The conditions `headers` carry.
    pub fn new(headers: &'a HeaderMap) -> Self {
        Self { headers }
    }

    /// Scans a tag field, comparing each tag with `current` (strongly or weakly).
    fn tag_field(
        self,
        name: header::HeaderName,
        current: Option<&EntityTag>,
        strong: bool,
    ) -> TagField {
        let field = self.headers.get_all(name);
        let mut lines = field.iter();
        let Some(first) = lines.next() else {
            return TagField::Absent;
        };
        // The common case, a client echoing the tag it was given: one line, that tag alone
        // (strong, so it matches strongly and weakly alike).
        if lines.next().is_none() && current.is_some_and(|cur| cur.is_written_as(first.as_bytes()))
        {
            return TagField::Tags {
                count: 1,
                matched: true,
            };
        }
        let mut matched = false;
        let scanned = scan_list(field.iter().map(|v| v.as_bytes()), |tag| {
            matched |= current.is_some_and(|cur| {
                if strong {
                    tag.strong_eq(cur)
                } else {
                    tag.weak_eq(cur)
                }
            });
        });
        match scanned {
            Err(_) => TagField::Invalid,
            Ok(shape) if shape.any => TagField::Any,
            Ok(shape) => TagField::Tags {
                count: shape.tags,
                matched,
            },
        }
    }

    /// The `If-Match` field, its tags compared strongly with the current tag.
    pub fn if_match_field(self, current: Option<&Validators>) -> TagField {
        self.tag_field(header::IF_MATCH, current_etag(current), true)
    }

    /// The `If-None-Match` field, its tags compared weakly with the current tag.
    pub fn if_none_match_field(self, current: Option<&Validators>) -> TagField {
        self.tag_field(header::IF_NONE_MATCH, current_etag(current), false)
    }

    /// The one date of field `name`; absent, repeated or malformed is `None` (ignored).
    pub fn date(self, name: header::HeaderName) -> Option<HttpDate> {
        single_date(self.headers, &name)
    }

    /// RFC 9110 13.1.1: `None` without the field.
    pub fn if_match(self, current: Option<&Validators>) -> Option<bool> {
        self.if_match_field(current).as_if_match(current.is_some())
    }

    /// RFC 9110 13.1.2: `None` without the field.
    pub fn if_none_match(self, current: Option<&Validators>) -> Option<bool> {
        self.if_none_match_field(current)
            .as_if_none_match(current.is_some())
    }

    /// RFC 9110 13.1.4: holds when not modified after the date; ignored without a date.
    pub fn if_unmodified_since(self, current: Option<&Validators>) -> Option<bool> {
        let modified = current?.last_modified?;
        Some(modified <= self.date(header::IF_UNMODIFIED_SINCE)?)
    }

    /// RFC 9110 13.1.3: holds when modified after the date; ignored without a date.
    pub fn if_modified_since(self, current: Option<&Validators>) -> Option<bool> {
        let modified = current?.last_modified?;
        Some(modified > self.date(header::IF_MODIFIED_SINCE)?)
    }

    /// RFC 9110 13.1.5: only with a `Range`; a strong tag match, or a date equal to a strong
    /// Last-Modified. Anything else, including a weak tag or an invalid value, does not hold.
    pub fn if_range(self, current: Option<&Validators>) -> Option<bool> {
        if !self.headers.contains_key(header::RANGE) {
            return None;
        }
        let value = self.headers.get(header::IF_RANGE)?;
        let bytes = value.as_bytes();
        Some(if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
            let tag = EntityTag::parse(bytes);
            matches!((tag, current_etag(current)), (Ok(tag), Some(cur)) if tag.strong_eq(cur))
        } else {
            let date = parse_http_date(value);
            current.is_some_and(|cur| {
                cur.last_modified_is_strong && date.is_some() && cur.last_modified == date
            })
        })
    }
}

fn current_etag(current: Option<&Validators>) -> Option<&EntityTag> {
    current?.etag.as_ref()
}

mod unix_seconds {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::date::HttpDate;

    pub(super) fn serialize<S: Serializer>(
        date: &Option<HttpDate>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        date.map(HttpDate::unix_seconds).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<HttpDate>, D::Error> {
        // HTTP dates run from year 1 to the end of year 9999.
        const RANGE: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;
        match Option::<i64>::deserialize(d)? {
            Some(s) if !RANGE.contains(&s) => Err(serde::de::Error::custom("date out of range")),
            secs => Ok(secs.map(HttpDate::from_unix_seconds)),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderValue, Method};

    use super::*;

    #[test]
    fn if_modified_since_conditions_only_reads() {
        let cases: &[(Method, &[header::HeaderName], bool)] = &[
            (Method::GET, &[], false),
            (Method::GET, &[header::IF_MODIFIED_SINCE], true),
            (Method::HEAD, &[header::IF_MODIFIED_SINCE], true),
            (Method::PUT, &[header::IF_MODIFIED_SINCE], false),
            (Method::PUT, &[header::IF_MATCH], true),
            (Method::DELETE, &[header::IF_UNMODIFIED_SINCE], true),
            (Method::POST, &[header::IF_NONE_MATCH], true),
            (Method::PUT, &[header::IF_RANGE, header::RANGE], false),
            (Method::GET, &[header::IF_RANGE, header::RANGE], false),
        ];
        for (method, names, want) in cases {
            let mut headers = HeaderMap::new();
            for name in *names {
                headers.insert(name.clone(), HeaderValue::from_static("x"));
            }
            assert_eq!(
                is_conditional(method, &headers),
                *want,
                "{method} {names:?}"
            );
        }
    }
}
