//! Copy Blob, Copy Blob From URL and Put Blob From URL: a blob this server serves (or another
//! server's, see below), written to another name; and Abort Copy Blob.
//!
//! A copy of this server's blob is finished before it answers, so its status is `success` (as
//! Azure answers a copy within one account); a Copy Blob from another server may finish after
//! (`pending_copies.rs`). No byte of a blob of this server passes through the front: each object of the source
//! is shared under a new name ([`Objects::share`]: a hard link on the local disk, a
//! server-side copy in an object store, a second name for the same bytes in memory; only R2,
//! which has neither, reads and writes them again), and the destination's record, naming the
//! new objects with the source's blocks, length and checksums, is written through Put Blob's
//! gate and compare-and-swap. Each record thus owns its objects: an overwrite or a delete of
//! either blob discards its own at once, never the other's, and the sweep counts a shared
//! object's age from the copy.
//!
//! A source of this server is read with the request's own Shared Key (same account), a shared
//! access signature in the source URL, or its container's public access. A URL of another
//! server is read only where the host gave the front the means and its operator named the
//! origin ([`crate::copy_origin`]): a GET with the source's conditions as its own and
//! `x-ms-source-range` as its `Range`, its body streamed into a new object under the body
//! limit; otherwise it is refused with `CannotVerifyCopySource`, never fetched. A URL of this
//! server is one naming the host the request reached,
//! or, host-style, one of its accounts: `{account}.blob.{any domain}`, as requests are
//! accepted; the Azure CLI names a copy's source so (`https://{account}.blob.core.windows.net/
//! C/B`) whatever endpoint its connection string gives. A URL naming the host a reverse proxy
//! in front was asked for
//! (`X-Forwarded-Host`) names this server: a client behind `ifmatch proxy` (rclone's
//! server-side copies) names the proxy, which sends the origin its own `Host`. Trusting the
//! field costs nothing: it only says which URLs are read as this server's paths, whose blobs
//! the request's credentials must still be allowed to read.

use std::time::SystemTime;

use super::call::Call;
use super::failure::Answered;
use super::headers::{BLOB_TYPE, CONTENT_CRC64, CONTENT_MD5};
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::{Access, Scope};
use crate::precondition;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use http_body_util::Either;
use ifmatch_core::ByteRange;
use ifmatch_core::date::date_header_value;

use super::admission::forwarded_hosts;
use super::failure::{Failure, Result};
use super::gate::Asking;
use super::gate::committed;
use crate::auth::{self, Credential};
use crate::metadata;
use crate::operation::{Operation, Target};
use crate::record::Content;
use crate::record::Copied;
use crate::record::Record;
use crate::store::{Key, Objects, Records, StoreError};
use crate::tags;
use ifmatch_azure::Account;
use ifmatch_azure::Client;
use ifmatch_azure::Env;
use ifmatch_azure::Style;
use ifmatch_azure::auth::Signed;
use ifmatch_azure::host;
use ifmatch_azure::swap::Attempts;

/// `x-ms-copy-source`: the URL of the blob to copy.
pub(super) const COPY_SOURCE: HeaderName = HeaderName::from_static("x-ms-copy-source");
const REQUIRES_SYNC: HeaderName = HeaderName::from_static("x-ms-requires-sync");
const SOURCE_PROPERTIES: HeaderName = HeaderName::from_static("x-ms-copy-source-blob-properties");
const SOURCE_RANGE: HeaderName = HeaderName::from_static("x-ms-source-range");
const COPY_ACTION: HeaderName = HeaderName::from_static("x-ms-copy-action");
pub(super) const COPY_ID: HeaderName = HeaderName::from_static("x-ms-copy-id");
pub(super) const COPY_STATUS: HeaderName = HeaderName::from_static("x-ms-copy-status");
const COPY_STATUS_DESCRIPTION: HeaderName = HeaderName::from_static("x-ms-copy-status-description");
const COPY_PROGRESS: HeaderName = HeaderName::from_static("x-ms-copy-progress");
const COPY_COMPLETION_TIME: HeaderName = HeaderName::from_static("x-ms-copy-completion-time");

/// The body a `... From URL` operation takes: a blob of this server's, read, or an origin's
/// answer.
type SourceBody<R> = Either<crate::body::ResponseBody<R>, crate::copy_origin::OriginBody>;

/// The names the conditions on the source take to be evaluated as a write's, in the order of
/// [`precondition::SOURCE_CONDITIONS`].
const AS_CONDITIONS: [HeaderName; 4] = [
    http::header::IF_MATCH,
    http::header::IF_NONE_MATCH,
    http::header::IF_MODIFIED_SINCE,
    http::header::IF_UNMODIFIED_SINCE,
];

/// Azure's name of the operation a `PUT` with `x-ms-copy-source` is.
pub(super) fn operation_name(headers: &HeaderMap) -> &'static str {
    if headers.contains_key(BLOB_TYPE) {
        "PutBlobFromURL"
    } else if headers
        .get(REQUIRES_SYNC)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
    {
        "CopyBlobFromURL"
    } else {
        "CopyBlob"
    }
}

/// Who asks for a copy: the request, the account it addressed, and its credentials.
pub(super) struct Requester<'a> {
    pub(super) parts: &'a http::request::Parts,
    pub(super) client: Client,
    pub(super) account: &'a Account,
    pub(super) credential: &'a Credential,
}

/// A blob's content made a second blob's own ([`Front::duplicate`]).
pub(super) struct Duplicate {
    /// The content, naming the new objects (and append set).
    pub(super) content: Content,
    /// The new objects, which nothing names until a record does.
    pub(super) objects: Vec<String>,
    /// The tag of its bytes (an append blob's chain value in its new set).
    pub(super) bytes_tag: ifmatch_core::EntityTag,
}

/// A copy's source, found on this server and readable by the requester.
pub(super) struct Source {
    pub(super) key: Key,
    /// Its URL without the query, as the destination's `x-ms-copy-source` keeps it.
    pub(super) url: String,
}

/// Where a copy's source is.
pub(super) enum Found {
    /// A blob of this server.
    Here(Source),
    /// A URL of another server, which the host lets copies read.
    Elsewhere(Uri),
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Copy Blob (`202`, `x-ms-copy-status: success`), Copy Blob From URL (the same, as
    /// `x-ms-requires-sync` asks) and Put Blob From URL (with `x-ms-blob-type`: `201`).
    pub(super) async fn copy_blob(&self, call: Call<'_>, from: Requester<'_>) -> Answered<O> {
        let (destination, now) = (call.key, call.now);
        let headers = &from.parts.headers;
        let put_from_url = headers.contains_key(BLOB_TYPE);
        if put_from_url && headers[BLOB_TYPE] != "BlockBlob" {
            return Err(Failure::with_detail(
                ErrorCode::InvalidHeaderValue,
                "Put Blob From URL writes a BlockBlob only. Header: x-ms-blob-type",
            ));
        }
        let ask = call.ask()?;
        // A copy takes the tags of its request, not its source's (Azure's default); its
        // metadata too if it gives any (else the source's, but for Put Blob From URL).
        let given = super::uploads::Given::of(headers, now)?;
        let own_metadata = put_from_url || !given.metadata.is_empty();
        let found = self.source(&from, now).await?;
        // The destination's checks first, as Put Blob's: no byte is read for a copy that
        // cannot land. They run again when its record is written.
        self.may_put(destination, ask).await?;
        let source = match found {
            Found::Here(source) => source,
            Found::Elsewhere(url) => {
                let sync = put_from_url
                    || (headers.get(REQUIRES_SYNC))
                        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
                if self.background_copies && !sync {
                    return (self.start_copy(destination, ask, &given, &url, own_metadata, now))
                        .await;
                }
                let mut fresh = self.fetched(headers, &url, put_from_url).await?;
                let source_metadata = std::mem::take(&mut fresh.metadata);
                given.apply(&mut fresh);
                if !own_metadata {
                    fresh.metadata = source_metadata;
                }
                let plain = without_query(&url);
                let object = fresh.content.as_ref().map(|c| c.object.clone());
                let committed = self
                    .commit_copy(destination, ask, fresh, &plain, put_from_url, now)
                    .await;
                if committed.as_ref().is_err_and(|f| !f.may_have_landed) {
                    self.discard(object).await;
                }
                return committed;
            }
        };

        let mut attempts = Attempts::default();

        while attempts.another() {
            let record = self.source_record(&source, headers).await?;
            let Some(duplicate) =
                (self.duplicate(&source.key, &record, destination, put_from_url)).await?
            else {
                // Changed while it was read: read what it is now.
                continue;
            };
            let Duplicate {
                content: mut copied,
                objects,
                bytes_tag,
            } = duplicate;
            let (content_type, properties) = match headers.get(SOURCE_PROPERTIES) {
                Some(v) if put_from_url && v.as_bytes().eq_ignore_ascii_case(b"false") => {
                    metadata::upload_properties(headers, true)
                }
                _ => (copied.content_type.clone(), copied.properties.clone()),
            };
            let metadata = match own_metadata {
                true => given.metadata.clone(),
                false => record.metadata.clone(),
            };
            copied.content_type = content_type;
            let etag = metadata::blob_tag(
                &bytes_tag,
                copied.content_type.as_deref(),
                &metadata,
                &properties,
                None,
            );
            copied.properties = properties;
            // An append blob's chain value is kept whatever its tag: its set is read by it.
            copied.sha256 = (etag != bytes_tag || copied.chained()).then_some(bytes_tag);
            let mut fresh = Record::blob(etag, now, copied);
            given.apply(&mut fresh);
            fresh.metadata = metadata;
            let append_set = fresh.content.as_ref().and_then(|c| c.append);
            let committed = self
                .commit_copy(destination, ask, fresh, &source.url, put_from_url, now)
                .await;
            if committed.as_ref().is_err_and(|f| !f.may_have_landed) {
                self.forget(destination, objects, append_set).await;
            }
            return committed;
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Writes a copy's destination `fresh` through Put Blob's gate and compare-and-swap: for
    /// Copy Blob, with what it copied from `source` (its URL without the query) and `202`
    /// with its id and status; for Put Blob From URL, `201`.
    pub(super) async fn commit_copy(
        &self,
        destination: &Key,
        ask: Asking<'_>,
        mut fresh: Record,
        source: &str,
        put_from_url: bool,
        now: SystemTime,
    ) -> Answered<O> {
        let id = self.env.random_uuid().hyphenated().to_string();
        if !put_from_url {
            fresh.copy = Some(Copied {
                id: id.clone(),
                source: source.to_owned(),
                len: fresh.len(),
                completed: crate::record::unix_seconds(now),
                status: crate::record::CopyStatus::Success,
                description: None,
            });
        }
        let mut answered = self.commit_put(destination, ask, fresh).await?;
        if !put_from_url {
            *answered.status_mut() = StatusCode::ACCEPTED;
            let out = answered.headers_mut();
            out.insert(COPY_ID, HeaderValue::try_from(id).expect("a UUID"));
            out.insert(COPY_STATUS, HeaderValue::from_static("success"));
        }
        Ok(answered)
    }

    /// The bytes of the source `url` on another server, staged and made durable, as the
    /// record of a copy (its properties and metadata the origin's, or for
    /// Put Blob From URL with `x-ms-copy-source-blob-properties: false`, the request's).
    pub(super) async fn fetched(
        &self,
        headers: &HeaderMap,
        url: &Uri,
        put_from_url: bool,
    ) -> Result<Record> {
        let answer = self.fetch_source(url, headers, false).await?;
        let (head, body) = answer.into_parts();
        let staged = self.objects.stage(body, self.max_body).await?;
        let staged = self.persisted(staged).await?;
        let (content_type, properties) = match headers.get(SOURCE_PROPERTIES) {
            Some(v) if put_from_url && v.as_bytes().eq_ignore_ascii_case(b"false") => {
                metadata::upload_properties(headers, true)
            }
            _ => metadata::upload_properties(&head.headers, true),
        };
        let mut content = Content::new(staged.object, staged.len, content_type);
        let user_metadata = metadata::metadata(&head.headers).unwrap_or_default();
        let etag = metadata::blob_tag(
            &staged.etag,
            content.content_type.as_deref(),
            &user_metadata,
            &properties,
            None,
        );
        content.properties = properties;
        content.sha256 = (etag != staged.etag).then_some(staged.etag);
        let mut record = Record::blob(etag, self.env.now(), content);
        record.metadata = user_metadata;
        Ok(record)
    }

    /// A GET of the source `url` on another server, with the request's `x-ms-source-if-*` as
    /// its conditions and, if `ranged`, its `x-ms-source-range`: the origin's answer when it
    /// is the bytes asked for, 412 `SourceConditionNotMet` when a condition fails, 403
    /// `CannotVerifyCopySource` naming what the origin answered otherwise.
    async fn fetch_source(
        &self,
        url: &Uri,
        headers: &HeaderMap,
        ranged: bool,
    ) -> Result<http::Response<crate::copy_origin::OriginBody>> {
        let cannot =
            |detail: String| Failure::with_detail(ErrorCode::CannotVerifyCopySource, detail);
        if headers.contains_key(tags::SOURCE_IF_TAGS) {
            return Err(Failure::with_detail(
                ErrorCode::UnsupportedHeader,
                "x-ms-source-if-tags cannot be evaluated on another server's blob; the request was \
                 not applied. Header: x-ms-source-if-tags",
            ));
        }
        let mut asked = source_conditions(headers);
        let range = headers.get(SOURCE_RANGE).filter(|_| ranged);
        if let Some(range) = range {
            asked.insert(http::header::RANGE, range.clone());
        }
        let origins = self
            .origins
            .as_ref()
            .expect("a source elsewhere is allowed");
        let answer = (origins.0.get(url, asked).await)
            .map_err(|e| cannot(format!("The copy source could not be read: {e}")))?;
        match answer.status() {
            StatusCode::OK if range.is_none() => Ok(answer),
            StatusCode::PARTIAL_CONTENT if range.is_some() => Ok(answer),
            StatusCode::NOT_MODIFIED | StatusCode::PRECONDITION_FAILED => {
                Err(ErrorCode::SourceConditionNotMet.into())
            }
            StatusCode::OK => Err(cannot(
                "The copy source's server answered the whole blob to a range.".to_owned(),
            )),
            status => Err(cannot(format!("The copy source answered {status}."))),
        }
    }

    /// Append Block From URL: `x-ms-source-range` of the source (all of it without one)
    /// appended to the blob `key` as Append Block appends a body, under the same checks, and
    /// the source's under `x-ms-source-if-*`.
    pub(super) async fn append_block_from_url(
        &self,
        call: Call<'_>,
        from: Requester<'_>,
    ) -> Answered<O> {
        let (body, asked) = self.source_body(&from, call.now).await?;
        self.append_block(call.with_headers(&asked), body).await
    }

    /// Put Block From URL: `x-ms-source-range` of the source (all of it without one) staged
    /// as block `id` of the blob `key`, as Put Block stages a body, under the same checks, and
    /// the source's under `x-ms-source-if-*`.
    pub(super) async fn put_block_from_url(
        &self,
        call: Call<'_>,
        id: &str,
        from: Requester<'_>,
    ) -> Answered<O> {
        let (body, asked) = self.source_body(&from, call.now).await?;
        self.put_block(call.with_headers(&asked), id, body).await
    }

    /// Put Page From URL: `x-ms-source-range` of the source written as the pages of the
    /// request's range of the page blob `key`, as Put Page writes a body (the two ranges of one
    /// length), under the same checks, and the source's under `x-ms-source-if-*`.
    pub(super) async fn put_page_from_url(
        &self,
        call: Call<'_>,
        from: Requester<'_>,
    ) -> Answered<O> {
        let now = call.now;
        if !from.parts.headers.contains_key(SOURCE_RANGE) {
            return Err(Failure::with_detail(
                ErrorCode::MissingRequiredHeader,
                "An HTTP header that's mandatory for this request is not specified. Header: x-ms-source-range",
            ));
        }
        let (body, mut asked) = self.source_body(&from, now).await?;
        // The pages' length, which Put Page checks the body against.
        let range = asked
            .get(super::headers::MS_RANGE)
            .or_else(|| asked.get(http::header::RANGE));
        let pages = range
            .and_then(|v| v.to_str().ok())
            .and_then(crate::page_blob::parse_page_range);
        if let Some(pages) = pages {
            asked.insert(
                http::header::CONTENT_LENGTH,
                HeaderValue::from(pages.end - pages.start),
            );
        }
        self.put_page(call.with_headers(&asked), body).await
    }

    /// The bytes a `... From URL` operation takes from its source: `x-ms-source-range` of it
    /// (all of it without one), once the source meets `x-ms-source-if-*`; and the request's
    /// headers without those that describe its own, empty, body (its length, its checksums).
    async fn source_body(
        &self,
        from: &Requester<'_>,
        now: SystemTime,
    ) -> Result<(SourceBody<O::Reader>, HeaderMap)> {
        let headers = &from.parts.headers;
        let mut asked = headers.clone();
        for name in [http::header::CONTENT_LENGTH, CONTENT_MD5, CONTENT_CRC64] {
            asked.remove(name);
        }
        let source = match self.source(from, now).await? {
            Found::Here(source) => source,
            Found::Elsewhere(url) => {
                let answer = self.fetch_source(&url, headers, true).await?;
                return Ok((Either::Right(answer.into_body()), asked));
            }
        };
        let record = self.source_record(&source, headers).await?;
        let content = record.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        let range = match headers.get(SOURCE_RANGE).and_then(|v| v.to_str().ok()) {
            None => None,
            Some(value) => match ByteRange::parse(value, content.len) {
                ByteRange::Part(range) => Some(range),
                ByteRange::Whole => None,
                ByteRange::Unsatisfiable => return Err(ErrorCode::InvalidRange.into()),
            },
        };
        let body = self.open(content, range).await?;
        Ok((Either::Left(body), asked))
    }

    /// The source's record, if it exists and meets the request's `x-ms-source-if-*` (412
    /// `SourceConditionNotMet`).
    pub(super) async fn source_record(
        &self,
        source: &Source,
        headers: &HeaderMap,
    ) -> Result<std::sync::Arc<Record>> {
        let Some(record) = committed(self.records.get(&source.key).await?) else {
            return Err(Failure::with_detail(
                ErrorCode::BlobNotFound,
                "The copy source does not exist.",
            ));
        };
        let conditions = source_conditions(headers);
        precondition::evaluate(
            precondition::Operation::Write,
            &conditions,
            Some(&record.validators()),
        )
        .map_err(|_| ErrorCode::SourceConditionNotMet)?;
        if !tags::meets(headers, tags::SOURCE_IF_TAGS, Some(&record.tags))? {
            return Err(ErrorCode::SourceConditionNotMet.into());
        }
        Ok(record)
    }

    /// The blob `x-ms-copy-source` names, if it is one of this server's and the requester may
    /// read it; or its URL, if it is another server's and the host lets copies read it.
    pub(super) async fn source(&self, from: &Requester<'_>, now: SystemTime) -> Result<Found> {
        let headers = &from.parts.headers;
        let cannot = |detail: &str| Failure::with_detail(ErrorCode::CannotVerifyCopySource, detail);
        let url = headers[COPY_SOURCE]
            .to_str()
            .ok()
            .and_then(|text| text.parse::<Uri>().ok())
            .filter(|uri| uri.authority().is_some())
            .ok_or_else(|| {
                Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-copy-source is not an absolute URL.",
                )
            })?;
        let authority = url.authority().expect("checked").as_str();
        let named_account = matches!(
            self.accounts.locate("blob", Some(authority), "/"),
            Ok((_, _, Style::Host))
        );
        let reached = host(from.parts).is_some_and(|h| h.eq_ignore_ascii_case(authority))
            || forwarded_hosts(from.parts).any(|h| h.eq_ignore_ascii_case(authority));
        if !named_account && !reached {
            let web = matches!(url.scheme_str(), Some("http" | "https"));
            if let Some(origins) = &self.origins
                && web
                && origins.0.allows(&url)
            {
                return Ok(Found::Elsewhere(url));
            }
            return Err(cannot(
                "The copy source is not a blob of this server, and this server may not read it \
                 (its operator lets copies read other servers with --copy-from).",
            ));
        }
        let (account, path, _) = self
            .accounts
            .locate("blob", Some(authority), url.path())
            .map_err(|_| cannot("The copy source names no account of this server."))?;
        let target = Target::parse(&Method::GET, path, url.query())?;
        if target.operation != Operation::GetBlob || target.blob.is_empty() {
            return Err(cannot("The copy source does not name a blob."));
        }
        let stored = self.accounts.stored(account, &target.container);
        let key = self
            .version_key(Key::Blob(stored.clone(), target.record_name()))
            .await?;
        let signed = url.query().is_some_and(|query| {
            form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "sig")
        });
        let readable = if signed {
            let no_headers = HeaderMap::new();
            let request = Signed {
                method: &Method::GET,
                uri: &url,
                headers: &no_headers,
                // The source is read over the URL's scheme, from the requester's address.
                client: Client {
                    ip: from.client.ip,
                    https: url.scheme_str() == Some("https"),
                },
                container: &target.container,
                blob: &target.blob,
            };
            let delegator = self.delegator(account, &url).await?;
            let credential = auth::authenticate(account, request, &delegator, now)
                .map_err(|denied| cannot(&denied.detail))?;
            auth::authorize(
                &credential,
                &Operation::GetBlob,
                &target.container,
                &target.blob,
            )
            .map_err(|denied| cannot(&denied.detail))?;
            true
        } else {
            (account.name() == from.account.name() && *from.credential == Credential::Key)
                || (self.anonymous && *from.credential == Credential::Anonymous)
                || self
                    .public(&Key::Container(stored), &Operation::GetBlob)
                    .await?
        };
        if !readable {
            return Err(cannot(
                "The copy source is in another account, or the request is not signed with the \
                 account's key: give the source URL a shared access signature that may read it.",
            ));
        }
        // A snapshot's id stays: it names what was copied, and is no secret.
        let snapshot =
            (target.snapshot.as_ref()).map_or(String::new(), |id| format!("?snapshot={id}"));
        let plain = format!(
            "{}://{authority}{}{snapshot}",
            url.scheme_str().unwrap_or("http"),
            url.path()
        );
        Ok(Found::Here(Source { key, url: plain }))
    }

    /// The blob `source` (its record as read) as `destination`'s own content: its objects
    /// shared under new names, an append blob's blocks in a set of the destination's (or, for
    /// a `block_blob`, as a block blob's blocks), its length and checksums. `None` when the
    /// source changed while it was read.
    pub(super) async fn duplicate(
        &self,
        source: &Key,
        record: &Record,
        destination: &Key,
        block_blob: bool,
    ) -> Result<Option<Duplicate>> {
        let content = record.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        if block_blob && content.pages.is_some() {
            return Err(Failure::with_detail(
                ErrorCode::InvalidBlobType,
                "A page blob is copied as a page blob (Copy Blob), not into a block blob.",
            ));
        }
        let content = &match self.with_blocks(source, content).await {
            Ok(content) => content,
            // Replaced or deleted since its record was read.
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(objects) = self.share_source(source, record, content).await? else {
            return Ok(None);
        };
        // The source's content under the new names: its blocks (and their ids), its length,
        // its inline bytes.
        let mut copied = Content::clone(content);
        if let Some(paged) = &mut copied.pages {
            // Each run's object under its new name (runs may share one).
            let renamed: std::collections::HashMap<&str, &String> = content
                .pieces()
                .into_iter()
                .map(|(object, _)| object)
                .zip(&objects)
                .collect();
            for run in &mut paged.runs {
                run.object = renamed[run.object.as_str()].clone();
            }
        } else if copied.blocks.is_empty() {
            if let Some(object) = objects.first() {
                copied.object = object.clone();
            }
        } else {
            for (block, object) in copied.blocks.iter_mut().zip(&objects) {
                block.object = object.clone();
            }
        }
        let bytes_tag = match copied.append.filter(|_| !block_blob) {
            // An append blob's blocks go to an append set of its own, chained anew.
            Some(appended) => {
                let epoch = self.fresh_generation();
                let chained = match self.restage(destination, epoch, &copied.blocks).await {
                    Ok(chained) => chained,
                    Err(failure) => {
                        let set = Some(crate::record::Appended { epoch, ..appended });
                        self.forget(destination, objects, set).await;
                        return Err(failure);
                    }
                };
                copied.blocks = Vec::new();
                copied.append = Some(crate::record::Appended { epoch, ..appended });
                chained
            }
            None => {
                copied.append = None;
                record.bytes_tag().clone()
            }
        };
        Ok(Some(Duplicate {
            content: copied,
            objects,
            bytes_tag,
        }))
    }

    /// Discards what [`Front::duplicate`] made for `destination` and no record names: its
    /// objects and its append set.
    pub(super) async fn forget(
        &self,
        destination: &Key,
        objects: Vec<String>,
        append: Option<crate::record::Appended>,
    ) {
        for object in objects {
            self.discard(Some(object)).await;
        }
        if let Some(appended) = append {
            let _ = self.records.drop_staged(destination, appended.epoch).await;
        }
    }

    /// The source's objects under new names for the destination to own (see
    /// [`Objects::share`]: a hard link or a server-side copy where the backend has one), in
    /// the order of `content`'s pieces; none for bytes its record keeps. `None` when the source
    /// changed meanwhile (an object of it gone).
    async fn share_source(
        &self,
        key: &Key,
        record: &Record,
        content: &Content,
    ) -> Result<Option<Vec<String>>> {
        let mut shared = Vec::new();
        for (object, len) in content.pieces() {
            match self.objects.share(object, len).await {
                Ok(name) => shared.push(name),
                Err(e) => {
                    for name in shared {
                        self.discard(Some(name)).await;
                    }
                    let changed = self
                        .records
                        .get(key)
                        .await?
                        .is_none_or(|now| now.generation != record.generation);
                    return match e {
                        StoreError::NotFound { .. } if changed => Ok(None),
                        e => Err(e.into()),
                    };
                }
            }
        }
        Ok(Some(shared))
    }

    /// Abort Copy Blob: a copy here has always finished, so there is never one to abort
    /// (409 `NoPendingCopyOperation`, or `CopyIdMismatch` for another copy's id).
    pub(super) async fn abort_copy(&self, call: Call<'_>, copy_id: &str) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        match headers.get(COPY_ACTION) {
            Some(action) if action == "abort" => {}
            Some(_) => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "x-ms-copy-action takes abort only.",
                ));
            }
            None => {
                return Err(Failure::with_detail(
                    ErrorCode::MissingRequiredHeader,
                    "An HTTP header that's mandatory for this request is not specified. Header: x-ms-copy-action",
                ));
            }
        }
        let ask = call.ask()?;
        let current = (self.existing_blob(key, precondition::Operation::Write, headers)).await?;
        ask.lease(Scope::Blob, Access::Write, Some(&current))?;
        let pending = crate::record::CopyStatus::Pending;
        let copy = current.copy.as_ref();
        if copy.is_some_and(|c| c.status == pending && c.id == copy_id) {
            return self.abort_pending(key, &ask, copy_id, now).await;
        }
        Err(match &current.copy {
            Some(copy) if copy.id != copy_id => ErrorCode::CopyIdMismatch.into(),
            _ => ErrorCode::NoPendingCopyOperation.into(),
        })
    }
}

/// The `x-ms-copy-*` properties of a blob a copy wrote, for Get Blob and Get Blob Properties.
pub(super) fn insert_copy_properties(record: &Record, out: &mut HeaderMap) {
    let Some(copy) = &record.copy else { return };
    let (Ok(id), Ok(source), Ok(progress)) = (
        HeaderValue::try_from(copy.id.as_str()),
        HeaderValue::try_from(copy.source.as_str()),
        HeaderValue::try_from(format!("{0}/{0}", copy.len)),
    ) else {
        return;
    };
    out.insert(COPY_ID, id);
    out.insert(COPY_SOURCE, source);
    out.insert(COPY_STATUS, HeaderValue::from_static(copy.status.as_str()));
    if copy.status == crate::record::CopyStatus::Pending {
        return;
    }
    out.insert(COPY_PROGRESS, progress);
    let completed = std::time::UNIX_EPOCH + std::time::Duration::from_secs(copy.completed);
    out.insert(COPY_COMPLETION_TIME, date_header_value(completed.into()));
    let description = copy.description.as_deref();
    if let Some(why) = description.and_then(|d| HeaderValue::try_from(d).ok()) {
        out.insert(COPY_STATUS_DESCRIPTION, why);
    }
}

/// The request's `x-ms-source-if-*`, under the names of the conditions they are.
/// `url` without its query, which may hold a secret (a signature): what a copy keeps of it.
pub(super) fn without_query(url: &Uri) -> String {
    format!(
        "{}://{}{}",
        url.scheme_str().unwrap_or("http"),
        url.authority().map_or("", |a| a.as_str()),
        url.path()
    )
}

fn source_conditions(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, as_condition) in precondition::SOURCE_CONDITIONS.iter().zip(AS_CONDITIONS) {
        for value in headers.get_all(*name) {
            out.append(as_condition.clone(), value.clone());
        }
    }
    out
}
