//! Put Block, Put Block List and Get Block List: a blob uploaded in parts, made visible at
//! once (see [`crate::block_list`] for the list's rules).
//!
//! Each block streams into an object of its own as Put Blob's body does, and is then listed in
//! the blob's record as uncommitted, by a compare-and-swap. The commit names the blocks in
//! order: the blob is their objects one after the other, so nothing is copied; it is hashed
//! once, reading the blocks, so that its ETag follows the same rules as a blob put whole (the
//! same bytes and headers give the same tag, whichever way they were uploaded). A block list
//! that changed while it was hashed (a block staged again under the same id) is resolved and
//! hashed again.

use super::call::Call;
use super::failure::Answered;
use super::headers::CONTENT_CRC64;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::{Access, Scope};
use crate::precondition;
use futures_util::StreamExt;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::BodyExt;
use ifmatch_core::{EntityTag, EtagHasher, strong_etag};

use super::answers::{answer, insert_checksums, validator_headers, xml_answer};
use super::append::is_other_blob_type;
use super::failure::{Failure, Result};
use super::gate::existing;
use super::swap::Step;
use super::uploads::verify_checksums;
use crate::block_list::{self as rules, MAX_LIST_BODY, MAX_UNCOMMITTED};
use crate::body::Incoming;
use crate::checksums::Checksums;
use crate::metadata;
use crate::operation::BlockListType;
use crate::record::Block;
use crate::record::Content;
use crate::record::Record;
use crate::store::{BlockToStage, Objects, PutMode, Records, StoreError};
use ifmatch_azure::Env;
use ifmatch_azure::swap::Attempts;

/// How many blocks a commit opens ahead of the one it hashes.
const HASH_AHEAD: usize = 16;

/// `x-ms-blob-content-md5`: the MD5 a Put Block List gives the whole blob.
const BLOB_CONTENT_MD5: HeaderName = HeaderName::from_static("x-ms-blob-content-md5");

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Put Block: stages one block for the blob. The blob's ETag and content do not change; a
    /// leased blob's lease id is required. The block joins the set of staged blocks its record
    /// names, which the backend keeps apart: one small write, however many are staged. Only
    /// the first block after a commit (or of a new blob) writes the record, to name a new set.
    pub(super) async fn put_block(
        &self,
        call: Call<'_>,
        id: &str,
        body: impl Incoming,
    ) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        // Fail fast, before taking the body: the same checks run again when the set is named.
        let current = self.records.get(key).await?;
        let check = |current: Option<&Record>| -> Result<()> {
            ask.lease(Scope::Blob, Access::Write, existing(key, current))?;
            if is_other_blob_type(existing(key, current)) {
                return Err(ErrorCode::InvalidBlobType.into());
            }
            if !rules::id_fits(current, id) {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidBlobOrBlock,
                    "Every block id of a blob must have the same length.",
                ));
            }
            Ok(())
        };
        check(current.as_deref())?;
        if current.is_none() {
            self.container_record(key.container()).await?;
        }

        let (staged, checksums) = self.stage_checked(headers, body).await?;
        let staged = self.persisted(staged).await?;
        let block = Block {
            id: id.to_owned(),
            object: staged.object.clone(),
            len: staged.len,
            sha256: staged.etag,
            staged: crate::record::unix_seconds(now),
        };
        let named = self
            .swap(key, headers, |current| {
                check(current)?;
                let staging = Some(crate::record::Staging {
                    epoch: self.fresh_generation(),
                    id_len: id.len(),
                });
                Ok(match current {
                    Some(current) if current.staging.is_some() => Step::Keep,
                    Some(current) => {
                        let mut record = current.clone();
                        record.staging = staging;
                        Step::update(record, current)
                    }
                    // A blob that does not exist yet: a record with staged blocks and no
                    // content (made as a container's is: no content, no lease).
                    None => {
                        let nonce = strong_etag(self.env.random_uuid().as_bytes());
                        let mut record =
                            Record::container(nonce, now).with_generation(self.fresh_generation());
                        record.staging = staging;
                        Step::Put(Box::new(record), PutMode::Create)
                    }
                })
            })
            .await;
        let staged_block = match named {
            Ok(swapped) => {
                let record = swapped.written.as_ref().or(swapped.previous.as_deref());
                let epoch = record
                    .and_then(|r| r.staging)
                    .expect("the set is named")
                    .epoch;
                (self.records)
                    .stage_block(BlockToStage {
                        key,
                        epoch,
                        block: &block,
                        max: MAX_UNCOMMITTED,
                    })
                    .await
                    .map(|staged| staged.then_some(epoch))
                    .map_err(Failure::from)
            }
            Err(failure) => Err(failure),
        };
        match staged_block {
            Ok(Some(epoch)) => {
                // A commit, a Put Blob or a delete that dropped the set meanwhile may have read
                // it before this block joined: then no set holds it, and a 201 would be a lie.
                // The client retries into the new set; its object is the sweep's if nothing
                // names it (a commit that read it may have).
                let current = self.records.get(key).await?;
                if current.and_then(|r| r.staging).map(|s| s.epoch) != Some(epoch) {
                    return Err(Failure::with_detail(
                        ErrorCode::ServerBusy,
                        "The blob was committed, written or deleted while the block was staged. \
                         Retry.",
                    ));
                }
                let mut out = HeaderMap::new();
                insert_checksums(&checksums, &mut out);
                Ok(answer(StatusCode::CREATED, out))
            }
            Ok(None) => {
                self.discard(Some(staged.object)).await;
                Err(Failure::with_detail(
                    ErrorCode::BlockCountExceedsLimit,
                    "A blob has at most 100,000 blocks staged between commits.",
                ))
            }
            Err(failure) => {
                if !failure.may_have_landed {
                    self.discard(Some(staged.object)).await;
                }
                Err(failure)
            }
        }
    }

    /// Put Block List: the blob becomes the listed blocks, in order, under the conditions
    /// and lease rules of Put Blob, with the metadata and properties of the request. Every
    /// uncommitted block not listed is dropped.
    pub(super) async fn put_block_list(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let ask = call.ask()?;
        let (content_type, properties) = metadata::upload_properties(headers, false);
        let given = super::uploads::Given::of(headers, now)?;
        let md5 = blob_content_md5(headers)?;
        let (list, checksums) = read_list(body, headers).await?;

        // The blob's bytes are hashed before the compare-and-swap, and again only if what the
        // list names changed meanwhile.
        let mut hashed: Option<(Vec<Block>, EntityTag)> = None;
        let mut attempts = Attempts::default();
        while attempts.another() {
            let current = self.records.get(key).await?;
            let visible = existing(key, current.as_deref());
            if current.is_none() {
                self.container_record(key.container()).await?;
            }
            ask.gate(precondition::Operation::Put, Access::Write, visible)?;
            if is_other_blob_type(visible) {
                return Err(ErrorCode::InvalidBlobType.into());
            }
            let uncommitted = self.uncommitted(key, current.as_deref()).await?;
            let blocks = rules::resolve(&list, rules::committed(current.as_deref()), &uncommitted)?;
            let read = current.as_deref().map(|c| (c.staging, &c.uncommitted));
            let sha256 = match &hashed {
                Some((done, tag)) if *done == blocks => tag.clone(),
                _ => match self.hash_blocks(&blocks).await {
                    Ok(tag) => tag,
                    // A block replaced since the record was read: read it again.
                    Err(StoreError::NotFound { .. }) => continue,
                    Err(e) => return Err(e.into()),
                },
            };
            hashed = Some((blocks.clone(), sha256.clone()));

            // An empty list makes an empty blob, stored as one empty object.
            let empty = match blocks.is_empty() {
                true => {
                    let staged = self.objects.stage(http_body_util::Empty::new(), 0).await?;
                    Some(self.persisted(staged).await?)
                }
                false => None,
            };
            let len = blocks.iter().map(|b| b.len).sum();
            let etag = metadata::blob_tag(
                &sha256,
                content_type.as_deref(),
                &given.metadata,
                &properties,
                None,
            );
            let object = empty.as_ref().map(|e| e.object.clone()).unwrap_or_default();
            let mut content = Content::new(object, len, content_type.clone());
            content.md5 = md5.clone();
            content.properties = properties.clone();
            content.sha256 = (etag != sha256).then_some(sha256);
            content.blocks = blocks.clone();
            let mut fresh = Record::blob(etag, now, content);
            given.apply(&mut fresh);

            let mut stale = false;
            let swapped = self
                .swap(key, headers, |current| {
                    let lease = ask.replace(key, current)?;
                    let visible = existing(key, current);
                    if is_other_blob_type(visible) {
                        return Err(ErrorCode::InvalidBlobType.into());
                    }
                    // Blocks staged since the set was read are not this commit's; a set
                    // dropped or renamed meanwhile, or other committed blocks, are read again.
                    let now_named = current.map(|c| (c.staging, &c.uncommitted));
                    let committed = rules::committed(current);
                    if now_named != read
                        || rules::resolve(&list, committed, &uncommitted)? != blocks
                    {
                        stale = true;
                        return Err(ErrorCode::ServerBusy.into());
                    }
                    // Only an empty list resolves without a record: an empty blob.
                    let Some(current) = current else {
                        let record = fresh.clone().with_generation(self.fresh_generation());
                        return Ok(Step::Put(Box::new(record), PutMode::Create));
                    };
                    let mut record = fresh.clone();
                    record.lease = lease;
                    Ok(Step::update(record, current))
                })
                .await;
            let swapped = match swapped {
                Ok(swapped) => swapped,
                Err(failure) => {
                    if let Some(empty) = empty.filter(|_| !failure.may_have_landed) {
                        self.discard(Some(empty.object)).await;
                    }
                    if stale {
                        continue;
                    }
                    return Err(failure);
                }
            };
            // The blocks the blob no longer has, and those staged and not listed.
            let sent = |_: &Record, out: &mut HeaderMap| insert_checksums(&checksums, out);
            return Ok(self.replaced(key, swapped, sent).await);
        }
        Err(Failure::with_detail(
            ErrorCode::ServerBusy,
            "The block list kept changing while it was committed. Retry later.",
        ))
    }

    /// Get Block List: the committed blocks, the uncommitted ones, or both.
    pub(super) async fn get_block_list(&self, call: Call<'_>, kind: BlockListType) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        // A blob with content or staged blocks: not a deletion the change feed has yet to
        // publish (a record with neither).
        let current = (self.records.get(key).await?)
            .filter(|r| r.content.is_some() || r.staging.is_some() || !r.uncommitted.is_empty());
        let Some(current) = current else {
            return Err(self
                .blob_missing(key, precondition::Operation::Read, headers)
                .await);
        };
        ask.lease(Scope::Blob, Access::Read, Some(&current))?;
        if is_other_blob_type(Some(&current)) {
            return Err(ErrorCode::InvalidBlobType.into());
        }
        let mut out = HeaderMap::new();
        if current.content.is_some() {
            out = validator_headers(&current);
        }
        out.insert(
            HeaderName::from_static("x-ms-blob-content-length"),
            HeaderValue::from(current.len()),
        );
        let uncommitted = match kind {
            BlockListType::Committed => Vec::new(),
            _ => self.uncommitted(key, Some(&current)).await?,
        };
        let committed = rules::committed(Some(&current));
        Ok(xml_answer(
            out,
            rules::list_xml(committed, &uncommitted, kind),
        ))
    }

    /// The tag of the bytes of `blocks` one after the other: a block's own when there is one,
    /// else read and hashed. [`StoreError::NotFound`] when a block's object is gone.
    async fn hash_blocks(&self, blocks: &[Block]) -> Result<EntityTag, StoreError> {
        if let [one] = blocks {
            return Ok(one.sha256.clone());
        }
        let mut hasher = EtagHasher::new();
        // Blocks are opened a few ahead of the one being hashed: where each open is a round
        // trip (R2 from a Worker), a list of 50,000 blocks would otherwise wait for 50,000 of
        // them in turn. The bytes are still hashed in order, one block at a time.
        let mut rest = blocks.iter();
        let mut opened = futures_util::stream::FuturesOrdered::new();
        for block in rest.by_ref().take(HASH_AHEAD) {
            opened.push_back(self.objects.read(&block.object, block.len, None));
        }
        while let Some(reader) = opened.next().await {
            if let Some(block) = rest.next() {
                opened.push_back(self.objects.read(&block.object, block.len, None));
            }
            let mut reader = std::pin::pin!(reader?);
            while let Some(frame) = reader.frame().await {
                if let Ok(data) = frame?.into_data() {
                    hasher.update(&data);
                }
            }
        }
        Ok(hasher.finish())
    }
}

/// `x-ms-blob-content-md5`, base64 of 16 bytes, or 400 `InvalidHeaderValue`.
fn blob_content_md5(headers: &HeaderMap) -> Result<Option<String>> {
    use base64::Engine;
    let Some(value) = headers.get(BLOB_CONTENT_MD5) else {
        return Ok(None);
    };
    let text = value.to_str().ok().filter(|text| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok_and(|md5| md5.len() == 16)
    });
    match text {
        Some(text) => Ok(Some(text.to_owned())),
        None => Err(Failure::with_detail(
            ErrorCode::InvalidHeaderValue,
            "x-ms-blob-content-md5 must be the base64 of 16 bytes.",
        )),
    }
}

/// The block list a Put Block List's body holds (at most 8 MiB), its checksums checked against
/// those the request gives: the list, and its checksums for the answer.
async fn read_list(
    body: impl Incoming,
    headers: &HeaderMap,
) -> Result<(Vec<(rules::Source, String)>, Checksums)> {
    let xml = crate::body::read_at_most(body, MAX_LIST_BODY)
        .await
        .ok_or_else(|| Failure::too_large("A block list is at most 8 MiB."))?;
    let checksums = Checksums::of(&xml, headers.contains_key(CONTENT_CRC64));
    verify_checksums(headers, &checksums)?;
    Ok((rules::parse(&xml)?, checksums))
}
