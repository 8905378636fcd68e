//! Bodies on their way in: streamed into staged objects or read whole, checked against the
//! checksums the client declared, made durable; and the objects a change left unnamed,
//! discarded.

use bytes::Bytes;
use http::header::HeaderMap;
use http::{StatusCode, header};
use http_body::Body;

use super::answers::Answer;
use super::answers::{answer, insert_sha256, validator_headers};
use super::failure::{Failure, Result};
use super::headers::{CONTENT_CRC64, CONTENT_MD5, STRUCTURED_BODY};
use super::state::Front;
use super::swap::Swapped;
use crate::body::Incoming;
use crate::checksums::{ChecksumBody, Checksums};
use crate::error_code::ErrorCode;
use crate::record::Record;
use crate::store::{Key, Objects, Records};
use ifmatch_azure::Env;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// The answer to a write that replaced the blob under `key` whole (Put Blob, Put Block
    /// List), once what the old blob held and the new one does not is discarded: 201 with the
    /// new one's validators, the checksums `sent` adds, and its SHA-256.
    pub(super) async fn replaced(
        &self,
        key: &Key,
        swapped: Swapped,
        sent: impl FnOnce(&Record, &mut HeaderMap),
    ) -> Answer<O::Reader> {
        let record = swapped.written.expect("a put writes");
        (self.discard_replaced(key, swapped.previous.as_deref(), Some(&record))).await;
        let mut out = validator_headers(&record);
        sent(&record, &mut out);
        insert_sha256(&record, &mut out);
        answer(StatusCode::CREATED, out)
    }

    /// Discards the objects `previous` named that `written` (if any) does not: after a change
    /// of the blob under `key`, what it no longer holds. When `written` no longer names the
    /// blocks staged under `previous` (a commit, a Put Blob, a delete), they go too, and
    /// their set with them.
    pub(super) async fn discard_replaced(
        &self,
        key: &Key,
        previous: Option<&Record>,
        written: Option<&Record>,
    ) {
        let Some(previous) = previous else { return };
        let dropped =
            (previous.staging).filter(|staging| written.and_then(|w| w.staging) != Some(*staging));
        // An append blob's set goes when the record no longer names it (an overwrite, a
        // delete), with the objects of its entries.
        let append_epoch = |record: &Record| record.content.as_ref()?.append.map(|a| a.epoch);
        let appended =
            append_epoch(previous).filter(|e| written.and_then(append_epoch) != Some(*e));
        let dropped_sets: Vec<u64> = dropped
            .map(|s| s.epoch)
            .into_iter()
            .chain(appended)
            .collect();
        let mut entries = Vec::new();
        for epoch in &dropped_sets {
            entries.extend(self.staged_entries(key, *epoch).await);
        }
        let staged = entries.iter().map(|b| b.object.as_str());
        self.discard_unnamed(previous.objects().chain(staged), written)
            .await;
        for epoch in dropped_sets {
            if let Err(error) = self.records.drop_staged(key, epoch).await {
                tracing::warn!(?key, %error, "could not drop a set of staged blocks");
            }
        }
    }

    /// Discards each of `objects` that `written` (if any) does not name.
    pub(super) async fn discard_unnamed<'a>(
        &self,
        objects: impl Iterator<Item = &'a str>,
        written: Option<&Record>,
    ) {
        let kept: std::collections::HashSet<&str> =
            written.into_iter().flat_map(Record::objects).collect();
        let gone: std::collections::BTreeSet<&str> =
            objects.filter(|o| !kept.contains(o)).collect();
        for object in gone {
            self.discard(Some(object.to_owned())).await;
        }
    }

    /// Every entry of the set of blocks staged for `key` under `epoch`, as
    /// [`Records::staged_blocks`] gives them; none when it cannot be read (logged: its
    /// objects are then orphans, for the sweep).
    pub(super) async fn staged_entries(&self, key: &Key, epoch: u64) -> Vec<crate::record::Block> {
        match self.records.staged_blocks(key, epoch).await {
            Ok(blocks) => blocks,
            Err(error) => {
                tracing::warn!(?key, %error, "could not read staged blocks");
                Vec::new()
            }
        }
    }

    /// The blob's uncommitted blocks, in order: those of its record's staged set, after any
    /// an earlier version kept in the record itself.
    pub(super) async fn uncommitted(
        &self,
        key: &Key,
        record: Option<&Record>,
    ) -> Result<Vec<crate::record::Block>> {
        let Some(record) = record else {
            return Ok(Vec::new());
        };
        let mut entries = record.uncommitted.clone();
        if let Some(staging) = record.staging {
            entries.extend(self.records.staged_blocks(key, staging.epoch).await?);
        }
        Ok(crate::block_list::latest(entries))
    }

    /// Streams `body` into a staged object, checked against the checksums `headers` declare
    /// (a mismatch discards it: 400 `Md5Mismatch` or `Crc64Mismatch`).
    pub(super) async fn stage_checked(
        &self,
        headers: &HeaderMap,
        body: impl Incoming,
    ) -> Result<(crate::store::Staged, Checksums)> {
        let (body, checksums) = self.checked_body(headers, body)?;
        let staged = self.objects.stage(body, self.max_body).await?;
        match verified(headers, &checksums) {
            Ok(checksums) => Ok((staged, checksums)),
            Err(failure) => {
                self.discard(Some(staged.object)).await;
                Err(failure)
            }
        }
    }

    /// Reads `body` whole (at most `limit` bytes: 413 beyond), hashed and checked as
    /// [`Front::stage_checked`] checks an object: the bytes of a blob kept in its record.
    pub(super) async fn read_checked(
        &self,
        headers: &HeaderMap,
        body: impl Incoming,
        limit: u64,
    ) -> Result<(Bytes, ifmatch_core::EntityTag, Checksums)> {
        use http_body_util::BodyExt;
        let (body, checksums) = self.checked_body(headers, body)?;
        let mut body = std::pin::pin!(crate::hashing::HashingBody::new(body, limit));
        let mut bytes = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        let (etag, _) = body.as_mut().finish();
        Ok((bytes.freeze(), etag, verified(headers, &checksums)?))
    }

    /// `body` with its checksums computed on the way, once refused what cannot be stored: a
    /// structured body, or a declared length beyond the limit.
    pub(super) fn checked_body<B: Body<Data = Bytes>>(
        &self,
        headers: &HeaderMap,
        body: B,
    ) -> Result<(ChecksumBody<B>, ChecksumCell)> {
        // A structured body (`x-ms-structured-body`) wraps the bytes in segments with their
        // CRC64s: stored as is, it would be other bytes than the client's. Refused, never kept.
        if headers.contains_key(STRUCTURED_BODY) {
            return Err(Failure::with_detail(
                ErrorCode::UnsupportedHeader,
                "Structured message bodies (x-ms-structured-body) are not supported; send \
                 x-ms-content-crc64 or Content-MD5 with the plain bytes.",
            ));
        }
        if declared_len(headers).is_some_and(|len| len > self.max_body) {
            return Err(ErrorCode::RequestBodyTooLarge.into());
        }
        Ok(ChecksumBody::new(body, headers.contains_key(CONTENT_CRC64)))
    }

    /// `staged`, durable; discarded if it cannot be made so.
    pub(super) async fn persisted(
        &self,
        staged: crate::store::Staged,
    ) -> Result<crate::store::Staged> {
        if let Err(e) = self.objects.persist(&staged).await {
            self.discard(Some(staged.object)).await;
            return Err(e.into());
        }
        Ok(staged)
    }

    pub(super) async fn discard(&self, object: Option<String>) {
        let Some(object) = object else { return };
        if let Err(error) = self.objects.discard(&object).await {
            // An object that cannot be removed now is an orphan; stores sweep them.
            tracing::warn!(%object, %error, "could not discard an object");
        }
    }
}

/// Where a [`ChecksumBody`] leaves the checksums of its body once it ended.
pub(super) type ChecksumCell = std::sync::Arc<std::sync::Mutex<Option<Checksums>>>;

/// The checksums of a body that ended (`cell`), checked against those `headers` declare.
pub(super) fn verified(headers: &HeaderMap, cell: &ChecksumCell) -> Result<Checksums> {
    let checksums = cell
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .unwrap_or_else(|| Checksums::of(&[], headers.contains_key(CONTENT_CRC64)));
    verify_checksums(headers, &checksums)?;
    Ok(checksums)
}

/// The request's `Content-Length`, when it has a valid one.
pub(super) fn declared_len(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
}

/// What a write of a whole blob (Put Blob, Put Block List, a copy) takes from its request
/// besides its bytes and HTTP headers: its metadata, its index tags (`x-ms-tags`) and its
/// protection from its creation, each refused as its rules say.
pub(super) struct Given {
    pub(super) metadata: std::collections::BTreeMap<String, String>,
    pub(super) tags: std::collections::BTreeMap<String, String>,
    pub(super) protection: crate::immutability::AtCreation,
}

impl Given {
    pub(super) fn of(headers: &HeaderMap, now: std::time::SystemTime) -> Result<Self> {
        Ok(Self {
            metadata: crate::metadata::metadata(headers)?,
            tags: crate::tags::from_header(headers)?,
            protection: crate::immutability::AtCreation::from_headers(
                headers,
                crate::record::unix_seconds(now),
            )?,
        })
    }

    /// Gives them to `record`, a blob written whole.
    pub(super) fn apply(&self, record: &mut Record) {
        record.metadata = self.metadata.clone();
        record.tags = self.tags.clone();
        record.immutability = self.protection.policy;
        record.legal_hold = self.protection.legal_hold;
    }
}

/// The header `name` as a number (a length, a position, a sequence number): `None` when it is
/// absent, 400 `InvalidHeaderValue` when it is not a number.
pub(super) fn number(headers: &HeaderMap, name: &http::HeaderName) -> Result<Option<u64>> {
    headers
        .get(name)
        .map(|v| {
            v.to_str().ok().and_then(|t| t.parse().ok()).ok_or_else(|| {
                Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    format!("{name} is not a number."),
                )
            })
        })
        .transpose()
}

/// 400 `Md5Mismatch` or `Crc64Mismatch` when the `Content-MD5` or `x-ms-content-crc64` the
/// client sent is not what its body hashes to.
pub(super) fn verify_checksums(headers: &HeaderMap, ours: &Checksums) -> Result<()> {
    let mismatch = [
        (
            headers.get(CONTENT_MD5),
            Some(&ours.md5),
            ErrorCode::Md5Mismatch,
        ),
        (
            headers.get(CONTENT_CRC64),
            ours.crc64.as_ref(),
            ErrorCode::Crc64Mismatch,
        ),
    ]
    .into_iter()
    .find(|(sent, ours, _)| sent.is_some_and(|s| Some(s.as_bytes()) != ours.map(|o| o.as_bytes())));
    match mismatch {
        None => Ok(()),
        Some((sent, ours, code)) => Err(Failure::with_detail(
            code,
            format!(
                "{} Sent: {}; calculated: {}.",
                code.message(),
                sent.map(|s| String::from_utf8_lossy(s.as_bytes()).into_owned())
                    .unwrap_or_default(),
                ours.map(String::as_str).unwrap_or_default()
            ),
        )),
    }
}
