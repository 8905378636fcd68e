//! Blob operations: Put Blob, Get Blob, Delete Blob, and the metadata and properties of
//! blobs and containers.

use super::call::Call;
use super::failure::Answered;
use super::headers::{BLOB_TYPE, CONTENT_CRC64, CONTENT_MD5, MS_RANGE, RANGE_MD5, RANGE_MD5_MAX};
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::{Access, Scope};
use crate::precondition;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::{StatusCode, header};
use ifmatch_azure::ERROR_CODE;
use ifmatch_core::precondition::Outcome;
use ifmatch_core::{ByteRange, strong_etag};

use super::answers::{answer, insert_md5, insert_sha256, validator_headers};
use super::failure::{Failure, Result};
use super::gate::Asking;
use super::gate::{committed, existing};
use super::page_blobs::{PageProperties, insert_sequence};
use super::swap::Step;
use super::uploads::{Given, declared_len};
use crate::body::Incoming;
use crate::body::{Opening, Piece, Pieces, ResponseBody};
use crate::checksums::Checksums;
use crate::metadata;
use crate::operation::Operation;
use crate::record::Content;
use crate::record::Record;
use crate::store::{Key, Objects, PutMode, Records, StoreError};
use ifmatch_azure::Env;
use ifmatch_azure::swap::Attempts;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Get Blob Metadata: the validators and the `x-ms-meta-*` headers.
    pub(super) async fn blob_metadata(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let current = (self.existing_blob(key, precondition::Operation::Read, headers)).await?;
        ask.gate(precondition::Operation::Read, Access::Read, Some(&current))?;
        let mut out = validator_headers(&current);
        metadata::insert_metadata(&current.metadata, &mut out);
        Ok(answer(StatusCode::OK, out))
    }

    /// Set Container Metadata, Set Blob Metadata and Set Blob Properties: one compare-and-swap
    /// under the lease and the conditions, and a new ETag (see [`metadata`]).
    pub(super) async fn set_metadata(
        &self,
        operation: &Operation,
        container: &Key,
        call: Call<'_>,
    ) -> Answered<O> {
        let Call {
            key: blob,
            headers,
            now,
            ..
        } = call;
        let ask = call.ask()?;
        let (key, scope, missing) = match operation {
            Operation::SetContainerMetadata => {
                (container, Scope::Container, ErrorCode::ContainerNotFound)
            }
            _ => (blob, Scope::Blob, ErrorCode::BlobNotFound),
        };
        let user_metadata = match operation {
            Operation::SetBlobProperties => None,
            _ => Some(metadata::metadata(headers)?),
        };
        // A page blob's size and sequence number; a request that sets only them leaves the
        // blob's HTTP headers as they are (Azure's rule).
        let pages = match operation {
            Operation::SetBlobProperties => PageProperties::of(headers)?,
            _ => None,
        };
        let (content_type, properties) = metadata::upload_properties(headers, false);
        let keeps_headers =
            pages.is_some() && content_type.is_none() && properties == Default::default();
        let nonce = self.env.random_uuid();
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = existing(key, current) else {
                    let operation = match scope {
                        Scope::Container => precondition::Operation::Container,
                        Scope::Blob => precondition::Operation::Put,
                    };
                    return Ok(Step::Missing(operation, missing));
                };
                // A blob's lease guards its metadata; a container's lease id, when given,
                // must match (Azure's Set Container Metadata), and is not required.
                let access = match scope {
                    Scope::Container => Access::Read,
                    Scope::Blob => Access::Write,
                };
                let conditions = match scope {
                    Scope::Container => precondition::Operation::Container,
                    Scope::Blob => precondition::Operation::Put,
                };
                ask.gate(conditions, access, Some(current))?;
                let mut record = current.clone();
                if let Some(user_metadata) = &user_metadata {
                    record.metadata = user_metadata.clone();
                }
                record.etag = match record.content.as_mut() {
                    Some(content) => {
                        if user_metadata.is_none() && !keeps_headers {
                            // Set Blob Properties: the headers absent from it are cleared.
                            content.content_type = content_type.clone();
                            content.properties = properties.clone();
                        }
                        let mut bytes = current.bytes_tag().clone();
                        if let Some(pages) = pages {
                            bytes = pages.apply(content, bytes)?;
                        }
                        let etag = metadata::blob_tag(
                            &bytes,
                            content.content_type.as_deref(),
                            &record.metadata,
                            &content.properties,
                            Some(nonce.as_bytes()),
                        );
                        content.sha256 = Some(bytes);
                        etag
                    }
                    None => strong_etag(nonce.as_bytes()),
                };
                Ok(Step::changed(record, current, now))
            })
            .await?;
        let written = swapped.written.as_ref().expect("a change writes");
        // A page blob made smaller drops the objects of its pages past its end.
        self.discard_replaced(key, swapped.previous.as_deref(), Some(written))
            .await;
        let mut out = validator_headers(written);
        insert_sequence(written, &mut out);
        Ok(answer(StatusCode::OK, out))
    }

    pub(super) async fn put_blob(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        // Required, as in Azure: a request that meant something else (a misspelt `comp`, a
        // lease action without its query) must never replace a blob with its empty body.
        match headers.get(BLOB_TYPE) {
            None => {
                return Err(Failure::with_detail(
                    ErrorCode::MissingRequiredHeader,
                    "An HTTP header that's mandatory for this request is not specified. Header: x-ms-blob-type",
                ));
            }
            // Boxed: each is about 8 KiB of state, which a block blob's write (most of them)
            // would otherwise carry and move with its own.
            Some(kind) if kind == "AppendBlob" => {
                return Box::pin(self.create_append_blob(call)).await;
            }
            Some(kind) if kind == "PageBlob" => {
                return Box::pin(self.create_page_blob(call)).await;
            }
            Some(kind) if kind != "BlockBlob" => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-blob-type is one of BlockBlob, AppendBlob and PageBlob. Header: x-ms-blob-type",
                ));
            }
            Some(_) => {}
        }
        let ask = call.ask()?;
        let (content_type, properties) = metadata::upload_properties(headers, true);
        let given = Given::of(headers, now)?;

        // Fail fast, before taking the body: the same checks run again at commit time.
        self.may_put(key, ask).await?;

        // A small blob (its length declared, or known to the body) the records keep whole: no
        // object, none of its fsyncs.
        let inline_max = self.records.inline_max();
        let (received, checksums) = match declared_len(headers).or(body.size_hint().upper()) {
            Some(len) if inline_max > 0 && len <= inline_max => {
                let (bytes, etag, checksums) = self.read_checked(headers, body, inline_max).await?;
                (Received::Inline { bytes, etag }, checksums)
            }
            _ => {
                let (staged, checksums) = self.stage_checked(headers, body).await?;
                (Received::Staged(staged), checksums)
            }
        };
        // Checked again once the body is in, in this key's turn: a write that lost its race
        // meanwhile (a concurrent If-Match writer won) is refused before its object costs the
        // fsyncs.
        let _turn = self.commit_turn(key).await;
        let still = match self.records.get(key).await {
            Ok(current) => ask
                .gate(
                    precondition::Operation::Put,
                    Access::Write,
                    committed(current).as_deref(),
                )
                .map(drop),
            Err(e) => Err(e.into()),
        };
        // The object to discard if the write goes no further.
        let object = received.object();
        if let Err(failure) = still {
            self.discard(object).await;
            return Err(failure);
        }
        let (mut content, bytes_tag) = match received {
            Received::Staged(staged) => {
                let staged = self.persisted(staged).await?;
                let content = Content::new(staged.object, staged.len, content_type);
                (content, staged.etag)
            }
            Received::Inline { bytes, etag } => (Content::inline(bytes, content_type), etag),
        };
        let etag = metadata::blob_tag(
            &bytes_tag,
            content.content_type.as_deref(),
            &given.metadata,
            &properties,
            None,
        );
        content.md5 = Some(checksums.md5);
        content.properties = properties;
        content.sha256 = (etag != bytes_tag).then_some(bytes_tag);
        let mut fresh = Record::blob(etag, now, content);
        given.apply(&mut fresh);
        let committed = self.commit_put(key, ask, fresh).await.map(|mut answer| {
            if let Some(crc64) = checksums.crc64.and_then(|c| HeaderValue::try_from(c).ok()) {
                answer.headers_mut().insert(CONTENT_CRC64, crc64);
            }
            answer
        });
        // A backend that failed without an answer (a timeout, a lost connection) may have
        // committed the record all the same: its object then stays, an orphan at worst, never
        // a record naming bytes that are gone.
        if committed.as_ref().is_err_and(|f| !f.may_have_landed) {
            self.discard(object).await;
        }
        committed
    }

    /// Put Blob of an append or a page blob: `content` (its kind's state, no bytes) with the
    /// request's properties, metadata, tags and protection, in place of any blob of the name.
    /// `bytes_tag` starts the blob's chain (see [`Content::chained`]); with `nonce`, the
    /// record's tag is new even where the chain's start is not.
    pub(super) async fn create_empty(
        &self,
        call: Call<'_>,
        mut content: Content,
        bytes_tag: ifmatch_core::EntityTag,
        nonce: bool,
    ) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        if declared_len(headers).is_some_and(|len| len > 0) {
            return Err(Failure::with_detail(
                ErrorCode::InvalidHeaderValue,
                "Put Blob of an append or a page blob creates it empty: Content-Length must be 0.",
            ));
        }
        let ask = call.ask()?;
        let (content_type, properties) = metadata::upload_properties(headers, true);
        let given = Given::of(headers, now)?;
        if committed(self.records.get(key).await?).is_none() {
            self.container_record(key.container()).await?;
        }
        content.content_type = content_type;
        let nonce = nonce.then(|| self.env.random_uuid());
        let etag = metadata::blob_tag(
            &bytes_tag,
            content.content_type.as_deref(),
            &given.metadata,
            &properties,
            nonce.as_ref().map(|n| n.as_bytes().as_slice()),
        );
        content.properties = properties;
        content.sha256 = Some(bytes_tag);
        let mut fresh = Record::blob(etag, now, content);
        given.apply(&mut fresh);
        self.commit_put(key, ask, fresh).await
    }

    pub(super) async fn commit_put(
        &self,
        key: &Key,
        ask: Asking<'_>,
        fresh: Record,
    ) -> Answered<O> {
        let headers = ask.headers;
        let swapped = self
            .swap(key, headers, |current| {
                let lease = ask.replace(key, current)?;
                // An incremental copy's destination takes its next copy only.
                let incremental = |r: &Record| {
                    let pages = r.content.as_ref().and_then(|c| c.pages.as_ref());
                    pages.is_some_and(|p| p.incremental.is_some())
                };
                if current.is_some_and(|c| c.deleted.is_none() && incremental(c))
                    && !incremental(&fresh)
                {
                    return Err(ErrorCode::OperationNotAllowedOnIncrementalCopyBlob.into());
                }
                let record = fresh.clone();
                Ok(match current {
                    Some(cur) => {
                        let mut record = record.with_generation(cur.generation + 1);
                        record.lease = lease;
                        Step::Put(Box::new(record), PutMode::Update(cur.generation))
                    }
                    None => Step::Put(
                        Box::new(record.with_generation(self.fresh_generation())),
                        PutMode::Create,
                    ),
                })
            })
            .await?;
        // What it replaced, and any blocks staged and not committed: Put Blob drops them.
        Ok(self.replaced(key, swapped, insert_md5).await)
    }

    pub(super) async fn get_blob(&self, call: Call<'_>, head: bool) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        // A concurrent overwrite may discard the object between reading the record and opening
        // the object; the record read again names the new one.
        let mut attempts = Attempts::default();
        while attempts.another() {
            let current = (self.existing_blob(key, precondition::Operation::Read, headers)).await?;
            let outcome = ask
                .gate(precondition::Operation::Read, Access::Read, Some(&current))?
                .outcome;
            let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;

            // A 304 carries the validators and the lease, not the representation's metadata
            // (RFC 9110 15.4.5), so that is built only for a 200 or 206.
            let mut out = validator_headers(&current);
            current.lease.insert_headers(now, &mut out);
            if outcome == Outcome::NotModified {
                // As Azure's: the SDKs pick their exception (or "not modified") from the code.
                out.insert(ERROR_CODE, ErrorCode::ConditionNotMet.header_value());
                return Ok(answer(StatusCode::NOT_MODIFIED, out));
            }
            insert_representation(&current, content, &mut out);
            let (status, range) = part(headers, outcome, head, content.len, &mut out)?;
            if range.is_none() {
                insert_md5(&current, &mut out);
            }
            let len = range.as_ref().map_or(content.len, |r| r.end - r.start);
            out.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            if head {
                return Ok(answer(status, out));
            }
            // `x-ms-range-get-content-md5`: the MD5 of the part, which must be at most 4 MiB
            // (it is read into memory to be hashed before the headers go).
            let part_md5 = range.is_some()
                && headers
                    .get(RANGE_MD5)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
            if part_md5 && len > RANGE_MD5_MAX {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-range-get-content-md5 takes a range of at most 4 MiB.",
                ));
            }
            // The reads of the bytes are boxed where they are awaited: a 304 never reaches them,
            // and its future (boxed whole where the front picks the operation) would otherwise
            // hold theirs too, moved on every request.
            let opened = match Box::pin(self.with_blocks(key, content)).await {
                Ok(whole) => Box::pin(self.open(&whole, range)).await,
                Err(e) => Err(e),
            };
            match opened {
                Ok(body) if part_md5 => {
                    use http_body_util::BodyExt;
                    let bytes = Box::pin(body.collect()).await?.to_bytes();
                    if let Ok(value) = HeaderValue::try_from(Checksums::of(&bytes, false).md5) {
                        out.insert(CONTENT_MD5, value);
                    }
                    let mut response = answer(status, out);
                    *response.body_mut() = ResponseBody::full(bytes);
                    return Ok(response);
                }
                Ok(body) => {
                    let mut response = answer(status, out);
                    *response.body_mut() = body;
                    return Ok(response);
                }
                // Discarded by an overwrite since we read the record: read the record again.
                // If the record has not changed, its object is gone: damage, not a race.
                Err(StoreError::NotFound { .. })
                    if self
                        .records
                        .get(key)
                        .await?
                        .is_none_or(|now| now.generation != current.generation) =>
                {
                    continue;
                }
                Err(e) => {
                    let e = match e {
                        StoreError::NotFound { .. } => StoreError::corrupt(
                            format_args!("blob {key:?}"),
                            "its record names an object that does not exist",
                        ),
                        e => e,
                    };
                    let Key::Blob(container, name) = key else {
                        unreachable!("only blobs have content")
                    };
                    tracing::error!(
                        %container, blob = %name, error = %e,
                        "a blob's record names bytes that cannot be served"
                    );
                    return Err(e.into());
                }
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// The body of a read of `content`, all of it or `range`: the bytes its record holds, its
    /// one object, or its blocks one after the other (the first opened here, so that a missing
    /// or damaged object is known before the answer's headers go).
    pub(super) async fn open(
        &self,
        content: &Content,
        range: Option<std::ops::Range<u64>>,
    ) -> Result<ResponseBody<O::Reader>, StoreError> {
        if content.len == 0 {
            return Ok(ResponseBody::empty());
        }
        if let Some(bytes) = &content.inline {
            if bytes.len() as u64 != content.len {
                return Err(StoreError::corrupt(
                    format_args!("the bytes a record keeps"),
                    format!("{} bytes where it says {}", bytes.len(), content.len),
                ));
            }
            let range = range.map_or(0..bytes.len(), |r| {
                let end = (r.end as usize).min(bytes.len());
                (r.start as usize).min(end)..end
            });
            return Ok(ResponseBody::full(bytes.slice(range)));
        }
        if content.blocks.is_empty() && content.pages.is_none() {
            let len = range.as_ref().map_or(content.len, |r| r.end - r.start);
            let reader = self
                .objects
                .read(&content.object, content.len, range)
                .await?;
            return Ok(ResponseBody::stream(reader, len));
        }
        let range = range.unwrap_or(0..content.len);
        let len = range.end - range.start;
        let pieces = content.pieces_in(range).into_iter();
        let mut pieces = pieces.peekable();
        // Zeros first (a page blob's) open nothing.
        let first = match pieces.next_if(|(object, _, _)| !object.is_empty()) {
            Some((object, object_len, part)) => {
                Some(self.objects.read(&object, object_len, Some(part)).await?)
            }
            None if pieces.peek().is_none() => return Ok(ResponseBody::empty()),
            None => None,
        };
        let objects = self.objects.clone();
        let open = move |(object, len, part): Piece| -> Opening<O::Reader> {
            let objects = objects.clone();
            Box::pin(async move { objects.read(&object, len, Some(part)).await })
        };
        Ok(ResponseBody::pieces(Pieces::new(
            first,
            pieces.collect(),
            len,
            open,
        )))
    }

    pub(super) async fn delete_blob(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, .. } = call;
        let ask = call.ask()?;
        let (conditions, missing) = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        let swapped = self.delete_existing(key, ask, conditions, missing).await?;
        self.discard_replaced(key, swapped.previous.as_deref(), None)
            .await;
        Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()))
    }
}

/// A Put Blob's bytes once received and checked: staged in an object, or held for a record
/// that keeps them itself ([`Records::inline_max`]).
enum Received {
    Staged(crate::store::Staged),
    Inline {
        bytes: Bytes,
        etag: ifmatch_core::EntityTag,
    },
}

impl Received {
    /// The object holding the bytes, if they are in one.
    fn object(&self) -> Option<String> {
        match self {
            Self::Staged(staged) => Some(staged.object.clone()),
            Self::Inline { .. } => None,
        }
    }
}

/// What a 200 or 206 of `current` (a blob with `content`) says of its representation: its
/// type, properties, metadata, copy, hash, type of blob, tag count and protection.
fn insert_representation(current: &Record, content: &Content, out: &mut HeaderMap) {
    let content_type = content
        .content_type
        .as_deref()
        .unwrap_or("application/octet-stream");
    if let Ok(value) = HeaderValue::try_from(content_type) {
        out.insert(header::CONTENT_TYPE, value);
    }
    metadata::insert_properties(&content.properties, out);
    metadata::insert_metadata(&current.metadata, out);
    super::copy::insert_copy_properties(current, out);
    insert_sha256(current, out);
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    super::append::insert_blob_type(current, out);
    if !current.tags.is_empty() {
        let count = HeaderValue::from(current.tags.len());
        out.insert(http::HeaderName::from_static(crate::tags::TAG_COUNT), count);
    }
    super::immutability::insert_protection(current, out);
}

/// The status and the part of a blob of `len` bytes a read answers with (the `Range` or
/// `x-ms-range` a read that proceeds asks for; a HEAD's is the whole), its `Content-Range`
/// added; 416 `InvalidRange` for a range past the end.
fn part(
    headers: &HeaderMap,
    outcome: Outcome,
    head: bool,
    len: u64,
    out: &mut HeaderMap,
) -> Result<(StatusCode, Option<std::ops::Range<u64>>)> {
    let requested = headers.get(MS_RANGE).or_else(|| headers.get(header::RANGE));
    let range = match (outcome, requested.and_then(|v| v.to_str().ok())) {
        (Outcome::Proceed, Some(value)) if !head => ByteRange::parse(value, len),
        _ => ByteRange::Whole,
    };
    Ok(match range {
        ByteRange::Whole => (StatusCode::OK, None),
        ByteRange::Part(range) => {
            let value = format!("bytes {}-{}/{}", range.start, range.end - 1, len);
            out.insert(
                header::CONTENT_RANGE,
                HeaderValue::try_from(value).expect("digits"),
            );
            (StatusCode::PARTIAL_CONTENT, Some(range))
        }
        ByteRange::Unsatisfiable => {
            return Err(Failure::with_detail(
                ErrorCode::InvalidRange,
                format!(
                    "The range specified is invalid for the current size of the resource ({} bytes).",
                    len
                ),
            ));
        }
    })
}
