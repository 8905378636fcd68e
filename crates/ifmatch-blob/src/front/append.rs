//! Append blobs: Put Blob with `x-ms-blob-type: AppendBlob` (an empty blob), Append Block,
//! Append Block From URL, and Append Blob Seal.
//!
//! An append blob's bytes are the blocks of its append set, one object per Append Block, read
//! one after the other as a committed block list's are. The set is kept beside the record, as
//! Put Block's staged blocks are, so that an append costs the same at the first block and at
//! the 50,000th: it stages its body, adds an entry naming the chain value it follows, and swaps
//! the record for one counting it, in one compare-and-swap in which the lease, the conditions
//! (`If-Match` and the rest, `x-ms-blob-condition-appendpos`, `x-ms-blob-condition-maxsize`),
//! the seal and the 50,000-block bound are checked against the record it replaces. Two
//! appenders at one position never both land; the entry of one that lost leads nowhere, and a
//! read, which walks the chain to the record's value ([`Appended::resolve`]), never reads it.
//! Every append is a new tag, at the cost of one small hash ([`Appended::chain`]).

use std::borrow::Cow;
use std::time::SystemTime;

use super::call::Call;
use super::failure::Answered;
use super::headers::{CONTENT_CRC64, CONTENT_MD5};
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::Access;
use crate::precondition;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::answers::{answer, validator_headers};
use super::failure::{Failure, Result};
use super::gate::Asking;
use super::gate::committed;
use super::swap::Step;
use super::uploads::{declared_len, number};
use crate::body::Incoming;
use crate::record::Appended;
use crate::record::Block;
use crate::record::Content;
use crate::record::Record;
use crate::store::{BlockToStage, Key, Objects, PutMode, Records, StoreError};
use ifmatch_azure::Env;
use ifmatch_azure::swap::Attempts;

const APPEND_POSITION: HeaderName = HeaderName::from_static("x-ms-blob-condition-appendpos");
const MAX_SIZE: HeaderName = HeaderName::from_static("x-ms-blob-condition-maxsize");
const APPEND_OFFSET: HeaderName = HeaderName::from_static("x-ms-blob-append-offset");
const COMMITTED_BLOCKS: HeaderName = HeaderName::from_static("x-ms-blob-committed-block-count");
const SEALED: HeaderName = HeaderName::from_static("x-ms-blob-sealed");

/// The most blocks an append blob holds, as in Azure.
pub(super) const MAX_APPENDS: usize = 50_000;
/// The largest block one Append Block adds: 100 MiB, as in Azure's current versions.
const MAX_APPEND: u64 = 100 << 20;

/// What an Append Block asks of the blob besides the usual conditions.
#[derive(Clone, Copy)]
struct Position {
    /// `x-ms-blob-condition-appendpos`: the length the blob must have.
    at: Option<u64>,
    /// `x-ms-blob-condition-maxsize`: the length it may have after the append.
    max: Option<u64>,
}

impl Position {
    fn of(headers: &HeaderMap) -> Result<Self> {
        Ok(Self {
            at: number(headers, &APPEND_POSITION)?,
            max: number(headers, &MAX_SIZE)?,
        })
    }

    /// Whether `len` more bytes may follow the blob `current`, as the dialect checks an append:
    /// the lease and the conditions, sealed, then the position, then the size, then the block
    /// count. Its content.
    fn admits<'a>(self, ask: &Asking<'_>, current: &'a Record, len: u64) -> Result<&'a Content> {
        ask.gate(precondition::Operation::Write, Access::Write, Some(current))?;
        let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        let append = content.append.ok_or(ErrorCode::InvalidBlobType)?;
        if append.sealed {
            return Err(ErrorCode::BlobIsSealed.into());
        }
        if self.at.is_some_and(|at| at != content.len) {
            return Err(ErrorCode::AppendPositionConditionNotMet.into());
        }
        if self.max.is_some_and(|max| content.len + len > max) {
            return Err(ErrorCode::MaxBlobSizeConditionNotMet.into());
        }
        if append.count >= MAX_APPENDS {
            return Err(ErrorCode::BlockCountExceedsLimit.into());
        }
        Ok(content)
    }
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Put Blob with `x-ms-blob-type: AppendBlob`: an empty append blob, in place of any
    /// blob of the name (as Put Blob replaces).
    pub(super) async fn create_append_blob(&self, call: Call<'_>) -> Answered<O> {
        let mut content = Content::new(String::new(), 0, None);
        content.append = Some(Appended {
            epoch: self.fresh_generation(),
            ..Appended::default()
        });
        // The chain starts at the tag of no bytes; the record's tag is new all the same.
        self.create_empty(call, content, ifmatch_core::strong_etag(b""), true)
            .await
    }

    /// Append Block: `body` staged, then added as the blob's next block.
    pub(super) async fn append_block(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        let position = Position::of(headers)?;
        let declared = declared_len(headers).or(body.size_hint().exact());
        if declared.is_some_and(|len| len > MAX_APPEND) {
            return Err(ErrorCode::RequestBodyTooLarge.into());
        }
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        // Fail fast, before taking the body: the same checks run again at commit time.
        let Some(current) = committed(self.records.get(key).await?) else {
            return Err(self.missing(key, missing.0, headers, missing.1).await);
        };
        position.admits(&ask, &current, declared.unwrap_or(0))?;

        let (staged, checksums) = self.stage_checked(headers, body).await?;
        if staged.len == 0 || staged.len > MAX_APPEND {
            self.discard(Some(staged.object)).await;
            return Err(match staged.len {
                0 => Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "Append Block needs at least one byte.",
                ),
                _ => ErrorCode::RequestBodyTooLarge.into(),
            });
        }
        let staged = self.persisted(staged).await?;
        let written = match self.commit_append(key, ask, position, &staged, now).await {
            Ok(written) => written,
            Err(failure) => {
                if !failure.may_have_landed {
                    self.discard(Some(staged.object)).await;
                }
                return Err(failure);
            }
        };
        let content = written.content.as_ref().expect("a blob");
        let mut out = validator_headers(&written);
        let count = content.append.map_or(0, |a| a.count);
        out.insert(APPEND_OFFSET, HeaderValue::from(content.len - staged.len));
        out.insert(COMMITTED_BLOCKS, HeaderValue::from(count));
        if let Ok(md5) = HeaderValue::try_from(checksums.md5) {
            out.insert(CONTENT_MD5, md5);
        }
        if let Some(crc64) = checksums.crc64.and_then(|c| HeaderValue::try_from(c).ok()) {
            out.insert(CONTENT_CRC64, crc64);
        }
        Ok(answer(StatusCode::CREATED, out))
    }

    /// Adds `staged` to the blob under `key`: an entry in its append set following the chain
    /// value the record has, then the record counting it, swapped if nobody changed it
    /// meanwhile; read again and retried if somebody did (the entry left behind leads nowhere,
    /// see [`Appended::resolve`]). The record written.
    async fn commit_append(
        &self,
        key: &Key,
        ask: Asking<'_>,
        position: Position,
        staged: &crate::store::Staged,
        now: SystemTime,
    ) -> Result<Record> {
        let headers = ask.headers;
        let mut attempts = Attempts::default();
        while attempts.another() {
            let write = precondition::Operation::Write;
            let current = self.existing_blob(key, write, headers).await?;
            let content = position.admits(&ask, &current, staged.len)?;
            let appended = content.append.ok_or(ErrorCode::InvalidBlobType)?;
            let before = current.bytes_tag();
            let block = Block {
                id: before.to_string(),
                object: staged.object.clone(),
                len: staged.len,
                sha256: staged.etag.clone(),
                staged: crate::record::unix_seconds(now),
            };
            let room = 2 * MAX_APPENDS;
            if !self
                .records
                .stage_block(BlockToStage {
                    key,
                    epoch: appended.epoch,
                    block: &block,
                    max: room,
                })
                .await?
            {
                return Err(ErrorCode::BlockCountExceedsLimit.into());
            }
            let chained = Appended::chain(before, &block);
            let mut record = Record::clone(&current);
            let content = record.content.as_mut().expect("checked");
            content.len += staged.len;
            content.append = Some(Appended {
                count: appended.count + 1,
                ..appended
            });
            record.etag = content.blob_tag(&chained, &current.metadata);
            content.sha256 = Some(chained);
            record.last_modified = crate::record::unix_seconds(now);
            record.generation = current.generation + 1;
            let mut step = Step::Put(Box::new(record), PutMode::Update(current.generation));
            self.feed_step(key, Some(&current), &mut step).await?;
            let Step::Put(record, mode) = step else {
                unreachable!("a write stays a write")
            };
            match self.records.put(key, &record, mode).await {
                Ok(()) => return Ok(*record),
                Err(e) if self.lost_race(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Stages `blocks` (objects of the blob's own) as the append set `epoch` of `key`, each
    /// entry following the one before, as appends would have: the last chain value.
    pub(super) async fn restage(
        &self,
        key: &Key,
        epoch: u64,
        blocks: &[Block],
    ) -> Result<ifmatch_core::EntityTag> {
        let mut chained = ifmatch_core::strong_etag(b"");
        for block in blocks {
            let entry = Block {
                id: chained.to_string(),
                ..block.clone()
            };
            if !self
                .records
                .stage_block(BlockToStage {
                    key,
                    epoch,
                    block: &entry,
                    max: 2 * MAX_APPENDS,
                })
                .await?
            {
                return Err(ErrorCode::BlockCountExceedsLimit.into());
            }
            chained = Appended::chain(&chained, &entry);
        }
        Ok(chained)
    }

    /// `content` with its blocks in it, for a read or a copy of them: itself, but for an
    /// append blob, whose blocks are the entries of its append set its record leads to (see
    /// [`Appended::resolve`]).
    pub(super) async fn with_blocks<'a>(
        &self,
        key: &Key,
        content: &'a Content,
    ) -> std::result::Result<Cow<'a, Content>, StoreError> {
        let Some(appended) = content.append.filter(|a| a.count > 0) else {
            return Ok(Cow::Borrowed(content));
        };
        let entries = self.records.staged_blocks(key, appended.epoch).await?;
        let last = content.sha256.as_ref().ok_or_else(|| {
            StoreError::corrupt(
                format_args!("append blob {key}"),
                "its record has no chain value",
            )
        })?;
        // Not there: the blob was replaced or deleted since its record was read (a reader
        // reads the record again), or its set is damaged (one whose record is unchanged).
        let blocks = appended.resolve(entries, last).ok_or_else(|| {
            StoreError::not_found(format_args!("the blocks of append blob {key}"))
        })?;
        let mut whole = content.clone();
        whole.blocks = blocks;
        Ok(Cow::Owned(whole))
    }

    /// Append Blob Seal: no block may be appended after it. Its tag and time stay (as in
    /// Azure); sealing a sealed blob succeeds again.
    pub(super) async fn seal(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let position = Position::of(headers)?;
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        let swapped = self
            .swap_existing(key, headers, missing, |current| {
                ask.gate(precondition::Operation::Write, Access::Write, Some(current))?;
                let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
                let append = content.append.ok_or(ErrorCode::InvalidBlobType)?;
                if position.at.is_some_and(|at| at != content.len) {
                    return Err(ErrorCode::AppendPositionConditionNotMet.into());
                }
                if append.sealed {
                    return Ok(Step::Keep);
                }
                let mut record = current.clone();
                let content = record.content.as_mut().expect("checked");
                content.append = Some(Appended {
                    sealed: true,
                    ..append
                });
                Ok(Step::update(record, current))
            })
            .await?;
        let record = match (swapped.written, swapped.previous) {
            (Some(written), _) => written,
            (None, Some(previous)) => Record::clone(&previous),
            (None, None) => return Err(ErrorCode::BlobNotFound.into()),
        };
        let mut out = validator_headers(&record);
        out.insert(SEALED, HeaderValue::from_static("true"));
        Ok(answer(StatusCode::OK, out))
    }
}

/// The headers that say what kind of blob `record` is, for Get Blob and its properties:
/// `x-ms-blob-type`, for an append blob its block count and seal, for a page blob its sequence
/// number.
pub(super) fn insert_blob_type(record: &Record, out: &mut HeaderMap) {
    let content = record.content.as_ref();
    let blob_type = content.map_or("BlockBlob", Content::blob_type);
    out.insert(
        super::headers::BLOB_TYPE,
        HeaderValue::from_static(blob_type),
    );
    super::page_blobs::insert_sequence(record, out);
    let Some(append) = content.and_then(|c| c.append) else {
        return;
    };
    out.insert(COMMITTED_BLOCKS, HeaderValue::from(append.count));
    if append.sealed {
        out.insert(SEALED, HeaderValue::from_static("true"));
    }
}

/// Whether `record` is an append or a page blob: what a block operation may not touch.
pub(super) fn is_other_blob_type(record: Option<&Record>) -> bool {
    record
        .and_then(|r| r.content.as_ref())
        .is_some_and(|c| c.blob_type() != "BlockBlob")
}
