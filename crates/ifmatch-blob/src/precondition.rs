//! The blob dialect's preconditions: the core's conditions, combined the way Azure Blob Storage combines them.
//!
//! Tags compare as in RFC 9110 (strong for `If-Match`, weak for `If-None-Match`) and dates at
//! whole seconds, with the parsers of the HTTP dialect. What differs:
//!
//! - Reads: `If-Match` AND `If-Unmodified-Since` AND (`If-None-Match` OR `If-Modified-Since`);
//!   the first two fail with 412 `ConditionNotMet`, the last pair with 304. `If-Match` on a
//!   missing blob fails before the 404.
//! - Writes: at most one condition, except `If-Match` + `If-Unmodified-Since` (If-Match
//!   decides) and `If-None-Match` + `If-Modified-Since` (If-None-Match decides), and at most one
//!   tag per field; otherwise 400 `MultipleConditionHeadersNotSupported`. Every failure is 412
//!   `ConditionNotMet`, except Put Blob with `If-None-Match: *` on an existing blob: 409
//!   `BlobAlreadyExists`. `If-Modified-Since` applies to writes too.
//! - Container writes (Delete and Lease Container) honour only the two date conditions; an
//!   entity-tag condition there answers 400 `UnsupportedHeader` rather than being silently
//!   dropped before a delete.
//! - A condition this server does not evaluate where the request carries it (index tags,
//!   page blobs' sequence numbers, a copy's source lease; a copy's source conditions without a
//!   copy, an append's outside Append Block) answers 400 `UnsupportedHeader` naming it, on every
//!   operation: a precondition a client sends is never dropped ([`unserved`]).

use http::{HeaderMap, header};

use crate::error_code::ErrorCode;
use ifmatch_core::precondition::{Conditions, Outcome, TagField, Validators};

/// The kind of operation whose conditions are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Get Blob, Get Blob Properties.
    Read,
    /// Put Blob.
    Put,
    /// Any other blob write: Delete Blob, Lease Blob, Set Blob Metadata or Properties.
    Write,
    /// Delete Container, Lease Container.
    Container,
}

/// Evaluates the conditional headers of a blob-dialect request against the current blob
/// (`None` when it does not exist).
///
/// `Ok` is [`Outcome::Proceed`], [`Outcome::IgnoreRange`] or, for reads, [`Outcome::NotModified`];
/// a failed condition is always an `Err` with its error code, never
/// [`Outcome::PreconditionFailed`]. A read of a missing blob that passes answers `Ok`, and the
/// caller then answers 404.
///
/// ```
/// use http::{HeaderMap, header};
/// use ifmatch_blob::ErrorCode;
/// use ifmatch_blob::precondition::{Operation, evaluate};
/// use ifmatch_core::{precondition::Validators, strong_etag};
///
/// let current = Validators::etag(strong_etag(b"v1"));
/// let mut headers = HeaderMap::new();
/// headers.insert(header::IF_NONE_MATCH, "*".parse().unwrap());
/// assert_eq!(evaluate(Operation::Put, &headers, Some(&current)), Err(ErrorCode::BlobAlreadyExists));
/// ```
pub fn evaluate(
    operation: Operation,
    headers: &HeaderMap,
    current: Option<&Validators>,
) -> Result<Outcome, ErrorCode> {
    let conditions = Conditions::new(headers);
    match operation {
        Operation::Read => read(conditions, current),
        Operation::Put | Operation::Write => write(conditions, current, operation),
        Operation::Container => container(conditions, current),
    }
}

fn read(c: Conditions<'_>, current: Option<&Validators>) -> Result<Outcome, ErrorCode> {
    if current.is_none() {
        return match c.if_match_field(None).is_present() {
            true => Err(ErrorCode::ConditionNotMet),
            false => Ok(Outcome::Proceed),
        };
    }
    if c.if_match(current) == Some(false) || c.if_unmodified_since(current) == Some(false) {
        return Err(ErrorCode::ConditionNotMet);
    }
    let changed = match (c.if_none_match(current), c.if_modified_since(current)) {
        (Some(tag), Some(date)) => Some(tag || date),
        (tag, date) => tag.or(date),
    };
    if changed == Some(false) {
        return Ok(Outcome::NotModified);
    }
    if c.if_range(current) == Some(false) {
        return Ok(Outcome::IgnoreRange);
    }
    Ok(Outcome::Proceed)
}

fn write(
    c: Conditions<'_>,
    current: Option<&Validators>,
    operation: Operation,
) -> Result<Outcome, ErrorCode> {
    let if_match = c.if_match_field(current);
    let if_none_match = c.if_none_match_field(current);
    let present = [
        if_match.is_present(),
        c.date(header::IF_UNMODIFIED_SINCE).is_some(),
        if_none_match.is_present(),
        c.date(header::IF_MODIFIED_SINCE).is_some(),
    ];
    let allowed_pair =
        present == [true, true, false, false] || present == [false, false, true, true];
    let count = present.iter().filter(|&&p| p).count();
    if (count > 1 && !allowed_pair) || if_match.tag_count() > 1 || if_none_match.tag_count() > 1 {
        return Err(ErrorCode::MultipleConditionHeadersNotSupported);
    }

    let exists = current.is_some();
    let unchanged = if_match
        .as_if_match(exists)
        .or_else(|| c.if_unmodified_since(current));
    if unchanged == Some(false) {
        return Err(ErrorCode::ConditionNotMet);
    }

    if if_none_match == TagField::Any && exists {
        return Err(match operation {
            Operation::Put => ErrorCode::BlobAlreadyExists,
            _ => ErrorCode::ConditionNotMet,
        });
    }
    let changed = if_none_match
        .as_if_none_match(exists)
        .or_else(|| c.if_modified_since(current));
    if changed == Some(false) {
        return Err(ErrorCode::ConditionNotMet);
    }
    Ok(Outcome::Proceed)
}

fn container(c: Conditions<'_>, current: Option<&Validators>) -> Result<Outcome, ErrorCode> {
    if c.if_match_field(None).is_present() || c.if_none_match_field(None).is_present() {
        return Err(ErrorCode::UnsupportedHeader);
    }
    if c.if_unmodified_since(current) == Some(false) || c.if_modified_since(current) == Some(false)
    {
        return Err(ErrorCode::ConditionNotMet);
    }
    Ok(Outcome::Proceed)
}

/// The conditional headers of the dialect that no operation of this server evaluates yet.
pub const UNSERVED: [&str; 1] = ["x-ms-source-lease-id"];

/// A page blob's conditions on its sequence number, evaluated by Put Page alone.
pub const SEQUENCE_CONDITIONS: [&str; 3] = [
    "x-ms-if-sequence-number-le",
    "x-ms-if-sequence-number-lt",
    "x-ms-if-sequence-number-eq",
];

/// The conditions on a copy's source, evaluated by Copy Blob, Put Blob From URL, Put Block From
/// URL and Append Block From URL alone.
pub const SOURCE_CONDITIONS: [&str; 4] = [
    "x-ms-source-if-match",
    "x-ms-source-if-none-match",
    "x-ms-source-if-modified-since",
    "x-ms-source-if-unmodified-since",
];

/// The conditions on an append blob's length, evaluated by Append Block (and From URL) alone.
pub const APPEND_CONDITIONS: [&str; 2] = [
    "x-ms-blob-condition-appendpos",
    "x-ms-blob-condition-maxsize",
];

/// `x-ms-copy-source`: served by Put Blob (a copy), Put Block, Append Block and Put Page
/// (From URL) and Incremental Copy Blob alone; on any other operation the body it stands for would be taken as empty.
const COPY_SOURCE: &str = "x-ms-copy-source";

/// The first header of `headers` that `operation` would not evaluate: a condition it would
/// otherwise drop silently (or a copy source it would not read). The caller refuses the
/// request with 400 `UnsupportedHeader` naming it.
///
/// ```
/// use http::HeaderMap;
/// use ifmatch_blob::Operation;
/// use ifmatch_blob::precondition::unserved;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-ms-if-sequence-number-le", "3".parse().unwrap());
/// assert_eq!(unserved(&Operation::GetBlob, &headers), Some("x-ms-if-sequence-number-le"));
/// assert_eq!(unserved(&Operation::PutPage, &headers), None);
/// assert_eq!(unserved(&Operation::GetBlob, &HeaderMap::new()), None);
/// ```
pub fn unserved(
    operation: &crate::operation::Operation,
    headers: &HeaderMap,
) -> Option<&'static str> {
    use crate::operation::Operation as Op;
    // Every name below is Azure's own (`x-ms-`); most requests carry none of those.
    if !headers
        .keys()
        .any(|name| name.as_str().starts_with("x-ms-"))
    {
        return None;
    }
    let copies = matches!(
        operation,
        Op::PutBlob | Op::AppendBlock | Op::PutBlock(_) | Op::PutPage | Op::IncrementalCopy
    );
    let copy = copies && headers.contains_key(COPY_SOURCE);
    let appends = matches!(operation, Op::AppendBlock);
    let pages = matches!(operation, Op::PutPage);
    // The operations on a blob whose gate evaluates `x-ms-if-tags` (`front/gate.rs`); not Put
    // Block, Get Block List or Abort Copy Blob, which Azure's reference lets take none.
    let tags = matches!(
        operation,
        Op::GetBlob
            | Op::GetBlobMetadata
            | Op::SetBlobMetadata
            | Op::SetBlobProperties
            | Op::PutBlob
            | Op::DeleteBlob
            | Op::LeaseBlob
            | Op::PutBlockList
            | Op::AppendBlock
            | Op::SealBlob
            | Op::PutPage
            | Op::GetPageRanges(_)
            | Op::IncrementalCopy
            | Op::SnapshotBlob
            | Op::GetBlobTags
            | Op::SetBlobTags
    );
    let never = UNSERVED.iter();
    let if_tags = [crate::tags::IF_TAGS].iter().filter(|_| !tags);
    let source_tags = [crate::tags::SOURCE_IF_TAGS];
    let source = SOURCE_CONDITIONS
        .iter()
        .chain(&source_tags)
        .filter(|_| !copy);
    let append = APPEND_CONDITIONS.iter().filter(|_| !appends);
    let sequence = SEQUENCE_CONDITIONS.iter().filter(|_| !pages);
    let copy_source = [COPY_SOURCE].iter().filter(|_| !copies);
    never
        .chain(if_tags)
        .chain(source)
        .chain(append)
        .chain(sequence)
        .chain(copy_source)
        // The request's names compared with each (a handful of fields): a lookup by a `&str`
        // parses and hashes the name every time (5,400 instructions a Get Blob for the dozen).
        .find(|name| headers.keys().any(|field| field == **name))
        .copied()
}
