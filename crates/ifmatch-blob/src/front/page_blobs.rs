//! Page blobs: Put Blob with `x-ms-blob-type: PageBlob` (a size, no bytes), Put Page (update
//! and clear), Get Page Ranges (and the difference from a snapshot), and what Set Blob
//! Properties changes of one (its size, its sequence number).
//!
//! A page blob's record holds its runs of pages ([`Paged`]): a Put Page stages its body as an
//! object, then swaps the record for one whose runs lay it over what it overwrites, in one
//! compare-and-swap in which the lease, the conditions and the page blob's own
//! (`x-ms-if-sequence-number-le`, `-lt`, `-eq`) are checked against the record it replaces.
//! Pages never written cost nothing and read as zeros. Every change is a new tag, chained from
//! the one before (see [`Paged::chain`]).

use super::call::Call;
use super::failure::Answered;
use super::headers::{CONTENT_CRC64, CONTENT_MD5, MS_RANGE, SEQUENCE_NUMBER};
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::Access;
use crate::precondition;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ifmatch_core::ByteRange;

use super::answers::{answer, validator_headers, xml_answer};
use super::failure::{Failure, Result};
use super::gate::Asking;
use super::swap::Step;
use super::uploads::{declared_len, number};
use crate::body::Incoming;
use crate::operation::PageRangesOptions;
use crate::page_blob::{MAX_RUNS, MAX_SIZE, MAX_WRITE, PAGE, Paged, Run};
use crate::record::{Content, Record};
use crate::store::{Key, Objects, Records};
use ifmatch_azure::Env;

const BLOB_CONTENT_LENGTH: HeaderName = HeaderName::from_static("x-ms-blob-content-length");
const PAGE_WRITE: HeaderName = HeaderName::from_static("x-ms-page-write");
const SEQUENCE_ACTION: HeaderName = HeaderName::from_static("x-ms-sequence-number-action");
const IF_SEQUENCE_LE: HeaderName = HeaderName::from_static("x-ms-if-sequence-number-le");
const IF_SEQUENCE_LT: HeaderName = HeaderName::from_static("x-ms-if-sequence-number-lt");
const IF_SEQUENCE_EQ: HeaderName = HeaderName::from_static("x-ms-if-sequence-number-eq");

/// The largest sequence number: 2^63 - 1, as in Azure.
const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// The page blob's own conditions on a write of pages.
#[derive(Clone, Copy)]
struct Sequence {
    le: Option<u64>,
    lt: Option<u64>,
    eq: Option<u64>,
}

impl Sequence {
    fn of(headers: &HeaderMap) -> Result<Self> {
        Ok(Self {
            le: number(headers, &IF_SEQUENCE_LE)?,
            lt: number(headers, &IF_SEQUENCE_LT)?,
            eq: number(headers, &IF_SEQUENCE_EQ)?,
        })
    }

    /// 412 `SequenceNumberConditionNotMet` unless `sequence` meets every one given.
    fn check(self, sequence: u64) -> Result<()> {
        let met = self.le.is_none_or(|n| sequence <= n)
            && self.lt.is_none_or(|n| sequence < n)
            && self.eq.is_none_or(|n| sequence == n);
        if met {
            Ok(())
        } else {
            Err(ErrorCode::SequenceNumberConditionNotMet.into())
        }
    }
}

/// What one Put Page asks for: its range, and whether it writes or clears it.
#[derive(Clone)]
struct PageWrite {
    range: std::ops::Range<u64>,
    clear: bool,
    sequence: Sequence,
}

impl PageWrite {
    fn of(headers: &HeaderMap) -> Result<Self> {
        let clear = match headers.get(PAGE_WRITE).map(|v| v.as_bytes()) {
            Some(b"update") => false,
            Some(b"clear") => true,
            Some(_) => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-page-write is update or clear.",
                ));
            }
            None => return Err(missing_header("x-ms-page-write")),
        };
        let value = headers.get(MS_RANGE).or_else(|| headers.get(header::RANGE));
        let range = value
            .ok_or_else(|| missing_header("Range"))?
            .to_str()
            .ok()
            .and_then(crate::page_blob::parse_page_range)
            .ok_or_else(|| {
                Failure::with_detail(
                    ErrorCode::InvalidPageRange,
                    "A page range is bytes=START-END, START a multiple of 512, END + 1 one too.",
                )
            })?;
        let len = range.end - range.start;
        let body = declared_len(headers).unwrap_or(0);
        if !clear && len > MAX_WRITE {
            return Err(ErrorCode::RequestBodyTooLarge.into());
        }
        if (clear && body != 0) || (!clear && body != len) {
            return Err(Failure::with_detail(
                ErrorCode::InvalidHeaderValue,
                "Content-Length is the range's length for an update, 0 for a clear.",
            ));
        }
        Ok(Self {
            range,
            clear,
            sequence: Sequence::of(headers)?,
        })
    }

    /// The page blob `current`'s content if this write may change it: the lease and the
    /// conditions, its type, its sequence number, the range within its size.
    fn admits<'a>(
        &self,
        ask: &Asking<'_>,
        current: &'a Record,
    ) -> Result<(&'a Content, &'a Paged)> {
        ask.gate(precondition::Operation::Write, Access::Write, Some(current))?;
        let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        let paged = content.pages.as_ref().ok_or(ErrorCode::InvalidBlobType)?;
        if paged.incremental.is_some() {
            return Err(ErrorCode::OperationNotAllowedOnIncrementalCopyBlob.into());
        }
        self.sequence.check(paged.sequence)?;
        if self.range.end > content.len {
            return Err(Failure::with_detail(
                ErrorCode::InvalidPageRange,
                format!("The blob holds {} bytes.", content.len),
            ));
        }
        Ok((content, paged))
    }
}

/// What Set Blob Properties changes of a page blob: its size, its sequence number.
#[derive(Clone, Copy, Default)]
pub(super) struct PageProperties {
    size: Option<u64>,
    sequence: Option<SequenceAction>,
}

#[derive(Clone, Copy)]
enum SequenceAction {
    Max(u64),
    Update(u64),
    Increment,
}

impl PageProperties {
    /// Read from Set Blob Properties' headers; `None` when it changes neither.
    pub(super) fn of(headers: &HeaderMap) -> Result<Option<Self>> {
        let size = size(headers)?;
        let given = sequence_number(headers)?;
        let sequence = match headers.get(SEQUENCE_ACTION).map(|v| v.as_bytes()) {
            None => None,
            Some(b"increment") if given.is_some() => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "increment takes no x-ms-blob-sequence-number.",
                ));
            }
            Some(b"increment") => Some(SequenceAction::Increment),
            Some(action @ (b"max" | b"update")) => {
                let n = given.ok_or_else(|| missing_header("x-ms-blob-sequence-number"))?;
                Some(match action {
                    b"max" => SequenceAction::Max(n),
                    _ => SequenceAction::Update(n),
                })
            }
            Some(_) => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-sequence-number-action is max, update or increment.",
                ));
            }
        };
        Ok((size.is_some() || sequence.is_some()).then_some(Self { size, sequence }))
    }

    /// Applies them to `content` (a page blob's, else 409 `InvalidBlobType`) whose chain
    /// value is `bytes`: the chain value after (a resize is a change of the bytes).
    pub(super) fn apply(
        self,
        content: &mut Content,
        bytes: ifmatch_core::EntityTag,
    ) -> Result<ifmatch_core::EntityTag> {
        let paged = content.pages.as_mut().ok_or(ErrorCode::InvalidBlobType)?;
        if paged.incremental.is_some() {
            return Err(ErrorCode::OperationNotAllowedOnIncrementalCopyBlob.into());
        }
        paged.sequence = match self.sequence {
            None => paged.sequence,
            Some(SequenceAction::Update(n)) => n,
            Some(SequenceAction::Max(n)) => n.max(paged.sequence),
            Some(SequenceAction::Increment) => Some(paged.sequence + 1)
                .filter(|n| *n <= MAX_SEQUENCE)
                .ok_or(ErrorCode::SequenceNumberIncrementTooLarge)?,
        };
        let Some(size) = self.size.filter(|size| *size != content.len) else {
            return Ok(bytes);
        };
        paged.truncate(size);
        content.len = size;
        Ok(Paged::chain(&bytes, &format!("resize {size}")))
    }
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Put Blob with `x-ms-blob-type: PageBlob`: a page blob of `x-ms-blob-content-length`
    /// bytes, all zeros, in place of any blob of the name.
    pub(super) async fn create_page_blob(&self, call: Call<'_>) -> Answered<O> {
        let size = size(call.headers)?.ok_or_else(|| missing_header("x-ms-blob-content-length"))?;
        let mut content = Content::new(String::new(), size, None);
        content.pages = Some(Paged {
            epoch: self.fresh_generation(),
            sequence: sequence_number(call.headers)?.unwrap_or(0),
            ..Paged::default()
        });
        // The chain starts at a value of this blob's own: a blob written again from scratch
        // never repeats a tag of the one it replaced.
        let start = ifmatch_core::strong_etag(self.env.random_uuid().as_bytes());
        self.create_empty(call, content, start, false).await
    }

    /// Put Page: `body` staged as the pages of the range (or the range cleared), laid over the
    /// blob's runs.
    pub(super) async fn put_page(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        let write = PageWrite::of(headers)?;
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        // Fail fast, before taking the body: the same checks run again at commit time.
        let current = self.existing_blob(key, missing.0, headers).await?;
        write.admits(&ask, &current)?;

        let (run, checksums) = if write.clear {
            (None, None)
        } else {
            let (staged, checksums) = self.stage_checked(headers, body).await?;
            if staged.len != write.range.end - write.range.start {
                self.discard(Some(staged.object)).await;
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "The body is not the range's length.",
                ));
            }
            let staged = self.persisted(staged).await?;
            let run = Run {
                at: write.range.start,
                len: staged.len,
                object: staged.object,
                object_len: staged.len,
                skip: 0,
                sha256: staged.etag,
            };
            (Some(run), Some(checksums))
        };
        let change = match &run {
            Some(run) => format!("{}-{} {}", write.range.start, write.range.end, run.sha256),
            None => format!("{}-{} clear", write.range.start, write.range.end),
        };
        let swapped = self
            .swap_existing(key, headers, missing, |current| {
                let (content, paged) = write.admits(&ask, current)?;
                let mut paged = paged.clone();
                paged.write(write.range.clone(), run.clone());
                if paged.runs.len() > MAX_RUNS {
                    return Err(Failure::with_detail(
                        ErrorCode::InvalidPageRange,
                        format!(
                            "This server keeps at most {MAX_RUNS} runs of pages in a page blob; \
                             this write would cut one more. Write the blob's pages in larger \
                             ranges, or again from the start."
                        ),
                    ));
                }
                Ok(Step::changed(
                    chained(current, content, paged, &change),
                    current,
                    now,
                ))
            })
            .await;
        let swapped = match swapped {
            Ok(swapped) => swapped,
            Err(failure) => {
                if !failure.may_have_landed {
                    self.discard(run.map(|r| r.object)).await;
                }
                return Err(failure);
            }
        };
        let written = swapped.written.as_ref().expect("a change writes");
        self.discard_replaced(key, swapped.previous.as_deref(), Some(written))
            .await;
        let mut out = validator_headers(written);
        insert_sequence(written, &mut out);
        if let Some(checksums) = checksums {
            if let Ok(md5) = HeaderValue::try_from(checksums.md5) {
                out.insert(CONTENT_MD5, md5);
            }
            if let Some(crc64) = checksums.crc64.and_then(|c| HeaderValue::try_from(c).ok()) {
                out.insert(CONTENT_CRC64, crc64);
            }
        }
        Ok(answer(StatusCode::CREATED, out))
    }

    /// Get Page Ranges: the ranges of the blob (or of a snapshot of it) that hold bytes, within
    /// the request's range if it gives one; with `prevsnapshot`, those written and cleared
    /// since that snapshot. Paged by `maxresults`, the marker an offset.
    pub(super) async fn page_ranges(
        &self,
        call: Call<'_>,
        options: &PageRangesOptions,
    ) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let current = (self.existing_blob(key, precondition::Operation::Read, headers)).await?;
        ask.gate(precondition::Operation::Read, Access::Read, Some(&current))?;
        let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        let paged = content.pages.as_ref().ok_or(ErrorCode::InvalidBlobType)?;
        let requested = headers.get(MS_RANGE).or_else(|| headers.get(header::RANGE));
        let mut within = match requested.and_then(|v| v.to_str().ok()) {
            None => 0..content.len,
            Some(value) => match ByteRange::parse(value, content.len) {
                ByteRange::Whole => 0..content.len,
                ByteRange::Part(range) => range,
                ByteRange::Unsatisfiable => return Err(ErrorCode::InvalidRange.into()),
            },
        };
        if let Some(marker) = &options.marker {
            let from = marker
                .parse::<u64>()
                .map_err(|_| ErrorCode::InvalidQueryParameterValue)?;
            within.start = within.start.max(from).min(within.end);
        }
        let mut listed: Vec<(bool, std::ops::Range<u64>)> = match &options.previous {
            None => paged
                .ranges(within)
                .into_iter()
                .map(|r| (false, r))
                .collect(),
            Some(id) => {
                let Key::Blob(container, name) = key else {
                    unreachable!("page ranges are a blob's")
                };
                let (base, _) = crate::record_name::split(name);
                let earlier = Key::Blob(container.clone(), crate::record_name::snapshot(base, id));
                let earlier = self
                    .records
                    .get(&earlier)
                    .await?
                    .filter(|r| r.deleted.is_none())
                    .ok_or(ErrorCode::PreviousSnapshotNotFound)?;
                let before = (earlier.content.as_ref())
                    .and_then(|c| c.pages.as_ref())
                    .ok_or(ErrorCode::InvalidBlobType)?;
                let diff = paged.diff(before, within);
                let mut all: Vec<_> = (diff.changed.into_iter().map(|r| (false, r)))
                    .chain(diff.cleared.into_iter().map(|r| (true, r)))
                    .collect();
                all.sort_by_key(|(_, r)| r.start);
                all
            }
        };
        let mut next = None;
        if let Some(max) = options.max_results
            && listed.len() > max
        {
            next = Some(listed[max].1.start);
            listed.truncate(max);
        }
        let mut xml = String::from(r#"<?xml version="1.0" encoding="utf-8"?><PageList>"#);
        for (cleared, range) in &listed {
            let element = if *cleared { "ClearRange" } else { "PageRange" };
            xml.push_str(&format!(
                "<{element}><Start>{}</Start><End>{}</End></{element}>",
                range.start,
                range.end - 1
            ));
        }
        if let Some(next) = next {
            xml.push_str(&format!("<NextMarker>{next}</NextMarker>"));
        }
        xml.push_str("</PageList>");
        let mut out = validator_headers(&current);
        out.insert(BLOB_CONTENT_LENGTH, HeaderValue::from(content.len));
        Ok(xml_answer(out, xml))
    }
}

/// `current` (whose content is `content`) with `paged` as its runs after `change`: the chain
/// value and the tag that follow.
fn chained(current: &Record, content: &Content, paged: Paged, change: &str) -> Record {
    let bytes = Paged::chain(current.bytes_tag(), change);
    let mut record = current.clone();
    record.etag = content.blob_tag(&bytes, &current.metadata);
    let content = record.content.as_mut().expect("a blob");
    content.pages = Some(paged);
    content.sha256 = Some(bytes);
    record
}

/// `x-ms-blob-sequence-number` of a page blob's answer, and for an incremental copy's
/// destination `x-ms-incremental-copy` and `x-ms-copy-destination-snapshot`.
pub(super) fn insert_sequence(record: &Record, out: &mut HeaderMap) {
    let Some(paged) = record.content.as_ref().and_then(|c| c.pages.as_ref()) else {
        return;
    };
    out.insert(SEQUENCE_NUMBER, HeaderValue::from(paged.sequence));
    if let Some(incremental) = &paged.incremental {
        out.insert(INCREMENTAL_COPY, HeaderValue::from_static("true"));
        let snapshot = incremental.destination_snapshot.as_deref();
        if let Some(id) = snapshot.and_then(|id| HeaderValue::try_from(id).ok()) {
            out.insert(DESTINATION_SNAPSHOT, id);
        }
    }
}

const INCREMENTAL_COPY: HeaderName = HeaderName::from_static("x-ms-incremental-copy");
const DESTINATION_SNAPSHOT: HeaderName = HeaderName::from_static("x-ms-copy-destination-snapshot");

/// `x-ms-blob-content-length`: a page blob's size, whole pages up to 8 TiB.
fn size(headers: &HeaderMap) -> Result<Option<u64>> {
    match number(headers, &BLOB_CONTENT_LENGTH)? {
        Some(size) if !size.is_multiple_of(PAGE) || size > MAX_SIZE => Err(Failure::with_detail(
            ErrorCode::InvalidHeaderValue,
            "x-ms-blob-content-length is a multiple of 512, at most 8 TiB.",
        )),
        size => Ok(size),
    }
}

/// `x-ms-blob-sequence-number`: 0 to 2^63 - 1.
fn sequence_number(headers: &HeaderMap) -> Result<Option<u64>> {
    match number(headers, &SEQUENCE_NUMBER)? {
        Some(n) if n > MAX_SEQUENCE => Err(Failure::with_detail(
            ErrorCode::InvalidHeaderValue,
            "x-ms-blob-sequence-number is at most 2^63 - 1.",
        )),
        n => Ok(n),
    }
}

fn missing_header(name: &str) -> Failure {
    Failure::with_detail(
        ErrorCode::MissingRequiredHeader,
        format!(
            "An HTTP header that's mandatory for this request is not specified. Header: {name}"
        ),
    )
}
