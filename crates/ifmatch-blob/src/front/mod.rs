//! The request handling of the blob front, written once over [`Records`], [`Objects`] and
//! [`Env`].
//!
//! Every change is a compare-and-swap of one record: read it, check the lease and the
//! conditions against it, write the new record only if nobody changed it meanwhile, and start
//! over if somebody did. The lease check and the conditions are thus part of the same atomic
//! step as the write, on any backend that offers a compare-and-swap. A body is staged (hashed
//! and stored durably) before the first attempt, so no lock or compare-and-swap waits on a
//! client's upload.

use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use ifmatch_core::date::date_header_value;
use ifmatch_core::lease::{Access, Lease, LeaseAction, LeaseId, Scope, lease_id_from_headers};
use ifmatch_core::precondition::{Outcome, blob};
use ifmatch_core::{ErrorCode, strong_etag};

use crate::account::Accounts;
use crate::auth::{self, ClientIp, Credential, Https, Signed};
use crate::batch;
use crate::body::{Opening, Piece, Pieces, ResponseBody};
use crate::checksums::{ChecksumBody, Checksums};
use crate::metadata;
use crate::operation::{ListOptions, Operation, Target};
use crate::store::{BoxError, Env, Key, Objects, PutMode, Records, StoreError};
use crate::{Content, PublicAccess, Record};
use ifmatch_core::ByteRange;

mod blobs;
mod blocks;
mod containers;
mod leases;
mod listing;

/// `x-ms-request-id`
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-request-id");
/// `x-ms-error-code`
pub const ERROR_CODE: HeaderName = HeaderName::from_static("x-ms-error-code");
const BLOB_TYPE: HeaderName = HeaderName::from_static("x-ms-blob-type");
const MS_RANGE: HeaderName = HeaderName::from_static("x-ms-range");
const MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
const PUBLIC_ACCESS: HeaderName = HeaderName::from_static("x-ms-blob-public-access");
const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");
const CONTENT_CRC64: HeaderName = HeaderName::from_static("x-ms-content-crc64");
const STRUCTURED_BODY: HeaderName = HeaderName::from_static("x-ms-structured-body");
const RANGE_MD5: HeaderName = HeaderName::from_static("x-ms-range-get-content-md5");
/// The largest part whose MD5 `x-ms-range-get-content-md5` asks for.
const RANGE_MD5_MAX: u64 = 4 << 20;

/// How often a change is retried when its compare-and-swap keeps losing, before 503.
const MAX_ATTEMPTS: usize = 64;

/// The default largest blob: 5 GiB.
pub const DEFAULT_MAX_BODY: u64 = 5 << 30;

/// The blob front: one value per server, shared by every request.
#[derive(Debug)]
pub struct Front<R, O, E> {
    records: R,
    /// Shared with the bodies of reads that open a blob's blocks one after the other.
    objects: std::sync::Arc<O>,
    env: E,
    max_body: u64,
    accounts: Accounts,
    anonymous: bool,
    /// Compare-and-swap attempts that lost a race and started over.
    retries: std::sync::atomic::AtomicU64,
    /// See [`Front::commit_turn`].
    commits: Box<[futures_util::lock::Mutex<()>]>,
}

/// The extension on every answer to a request whose operation could be read: Azure's name of
/// it (see [`Operation::name`]), for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationName(pub &'static str);

/// An error answer: the code, and what to say about it.
#[derive(Debug)]
struct Failure {
    code: ErrorCode,
    detail: Option<String>,
    /// The backend could not say whether the change was made (see
    /// [`StoreError::may_have_landed`]): what the change referred to must be kept.
    may_have_landed: bool,
}

type Result<T, E = Failure> = std::result::Result<T, E>;

impl Failure {
    fn with_detail(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: Some(detail.into()),
            may_have_landed: false,
        }
    }
}

impl From<auth::Denied> for Failure {
    fn from(denied: auth::Denied) -> Self {
        Self::with_detail(denied.code, denied.detail)
    }
}

impl From<ErrorCode> for Failure {
    fn from(code: ErrorCode) -> Self {
        Self {
            code,
            detail: None,
            may_have_landed: false,
        }
    }
}

impl From<ifmatch_core::lease::HeaderError> for Failure {
    fn from(e: ifmatch_core::lease::HeaderError) -> Self {
        Self::with_detail(e.code, format!("{} Header: {}", e.code.message(), e.header))
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let full = "The server has no space left for this request. Retry later.";
        let (code, detail) = match &e {
            StoreError::ContainerNotFound => (ErrorCode::ContainerNotFound, None),
            StoreError::NotFound => (ErrorCode::BlobNotFound, None),
            StoreError::TooLarge { .. } => (ErrorCode::RequestBodyTooLarge, None),
            StoreError::Body(_) => (ErrorCode::IncompleteBody, None),
            StoreError::LengthRequired => (ErrorCode::MissingContentLengthHeader, None),
            StoreError::Unavailable(_) => (ErrorCode::ServerBusy, None),
            StoreError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => {
                (ErrorCode::ServerBusy, Some(full.to_owned()))
            }
            _ => (ErrorCode::InternalError, None),
        };
        if code == ErrorCode::InternalError || code == ErrorCode::ServerBusy {
            tracing::error!(error = %e, "backend failure");
        }
        Self {
            code,
            detail,
            may_have_landed: e.may_have_landed(),
        }
    }
}

/// The host a request names: its `Host`, or the authority of its target.
fn host(parts: &http::request::Parts) -> Option<&str> {
    (parts.headers.get(header::HOST))
        .and_then(|h| h.to_str().ok())
        .or(parts.uri.authority().map(|a| a.as_str()))
}

/// The account's root URL as the request named it (List Containers names it).
fn endpoint(parts: &http::request::Parts, account: &crate::Account, style: crate::Style) -> String {
    let scheme = if parts.extensions.get::<Https>().is_some() {
        "https"
    } else {
        "http"
    };
    let host = host(parts).unwrap_or("");
    match style {
        crate::Style::Host => format!("{scheme}://{host}/"),
        crate::Style::Path => format!("{scheme}://{host}/{}/", account.name()),
    }
}

/// A request its credentials admit: what it addresses, and the keys of its records.
struct Admitted<'a> {
    target: Target,
    account: &'a crate::Account,
    /// How the request named the account (for the root URL List Containers names).
    style: crate::Style,
    /// The name its container is stored under.
    stored: String,
    container: Key,
    blob: Key,
}

/// What one attempt of a change decided from the record it found.
enum Step {
    /// Write this record, as the mode allows.
    Put(Box<Record>, PutMode),
    /// Remove the record, if it still has this generation.
    Delete(u64),
    /// There is no record: answer as [`Front::missing`] does for this operation.
    Missing(blob::Operation, ErrorCode),
    /// Nothing to change.
    Keep,
}

/// A change that landed: the record it found, what it did, and the blob records a removed
/// container took with it.
struct Swapped {
    previous: Option<std::sync::Arc<Record>>,
    written: Option<Record>,
    deleted: bool,
    removed: Vec<Record>,
}

type Answer<R> = Response<ResponseBody<R>>;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// A front over these backends.
    pub fn new(records: R, objects: O, env: E) -> Self {
        Self {
            records,
            objects: std::sync::Arc::new(objects),
            env,
            max_body: DEFAULT_MAX_BODY,
            accounts: Accounts::default(),
            anonymous: false,
            retries: std::sync::atomic::AtomicU64::new(0),
            commits: (0..64)
                .map(|_| futures_util::lock::Mutex::new(()))
                .collect(),
        }
    }

    /// How many compare-and-swap attempts lost a race with a concurrent change and started
    /// over, since the front was made.
    pub fn cas_retries(&self) -> u64 {
        self.retries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The accounts served (by default the development account alone, with its published
    /// key).
    pub fn with_accounts(mut self, accounts: Accounts) -> Self {
        self.accounts = accounts;
        self
    }

    /// Lets requests without credentials do anything: for development only. Requests that
    /// carry credentials are still checked.
    pub fn with_anonymous_access(mut self, yes: bool) -> Self {
        self.anonymous = yes;
        self
    }

    /// The accounts served.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The largest blob accepted; larger uploads answer 413 `RequestBodyTooLarge`.
    pub fn with_max_body(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }

    /// The record store.
    pub fn records(&self) -> &R {
        &self.records
    }

    /// The object store.
    pub fn objects(&self) -> &O {
        &self.objects
    }

    /// The answer for `code` alone: what a host says when the front could not answer.
    pub fn error(&self, code: ErrorCode) -> Answer<O::Reader> {
        self.stamped(error_answer(code.into(), false))
    }

    /// Answers one request. Never fails: every error is an answer with its code.
    pub async fn handle<B>(&self, request: Request<B>) -> Answer<O::Reader>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let head = request.method() == Method::HEAD;
        let (parts, body) = request.into_parts();
        let mut operation = None;
        let answer = match self.dispatch(&parts, body, &mut operation).await {
            Ok(answer) => answer,
            Err(failure) => error_answer(failure, head),
        };
        let mut answer = self.stamped(answer);
        if let Some(operation) = operation {
            answer.extensions_mut().insert(operation);
        }
        // The version the client speaks, when it names one the dialect knows the form of.
        if let Some(version) = parts.headers.get(MS_VERSION)
            && version.len() == 10
        {
            answer.headers_mut().insert(MS_VERSION, version.clone());
        }
        answer
    }

    /// `answer` with the headers every answer carries: a request id and the dialect's version.
    fn stamped(&self, mut answer: Answer<O::Reader>) -> Answer<O::Reader> {
        let headers = answer.headers_mut();
        let mut id = [0; uuid::fmt::Hyphenated::LENGTH];
        let id = self.env.random_uuid().hyphenated().encode_lower(&mut id);
        headers.insert(
            REQUEST_ID,
            HeaderValue::from_str(id).expect("a UUID is ASCII"),
        );
        headers.insert(MS_VERSION, HeaderValue::from_static("2021-12-02"));
        answer
    }

    async fn dispatch<B>(
        &self,
        parts: &http::request::Parts,
        body: B,
        operation: &mut Option<OperationName>,
    ) -> Result<Answer<O::Reader>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (method, headers) = (&parts.method, &parts.headers);
        let now = self.env.now();
        let Admitted {
            target,
            account,
            style,
            stored,
            container,
            blob,
        } = self.admit(parts, now, operation).await?;
        match &target.operation {
            Operation::CreateContainer => self.create_container(&container, headers, now).await,
            Operation::GetContainerAcl => self.container_acl(&container, headers, now).await,
            Operation::SetContainerAcl => {
                self.set_container_acl(&container, headers, body, now).await
            }
            Operation::SubmitBatch => self.batch(parts, body).await,
            Operation::DeleteContainer => self.delete_container(&container, headers, now).await,
            Operation::GetContainerProperties => {
                self.container_properties(&container, headers, now).await
            }
            Operation::ListBlobs(options) => self.list(&stored, options, now).await,
            Operation::LeaseContainer => self.lease(&container, headers, now).await,
            Operation::PutBlob => self.put_blob(&blob, headers, body, now).await,
            Operation::GetBlob => {
                self.get_blob(&blob, method == Method::HEAD, headers, now)
                    .await
            }
            Operation::DeleteBlob => self.delete_blob(&blob, headers, now).await,
            Operation::LeaseBlob => self.lease(&blob, headers, now).await,
            Operation::ListContainers(options) => {
                let endpoint = endpoint(parts, account, style);
                self.list_containers(account, &endpoint, options, now).await
            }
            Operation::GetContainerMetadata => {
                self.container_properties(&container, headers, now).await
            }
            Operation::GetBlobMetadata => self.blob_metadata(&blob, headers, now).await,
            Operation::SetContainerMetadata
            | Operation::SetBlobMetadata
            | Operation::SetBlobProperties => {
                self.set_metadata(&target.operation, &container, &blob, headers, now)
                    .await
            }
            Operation::PutBlock(id) => self.put_block(&blob, id, headers, body, now).await,
            Operation::PutBlockList => self.put_block_list(&blob, headers, body, now).await,
            Operation::GetBlockList(kind) => self.get_block_list(&blob, *kind, headers, now).await,
        }
    }

    /// Reads what a request addresses (its account, container and blob, its operation) and
    /// admits it if its credentials allow that operation there.
    async fn admit(
        &self,
        parts: &http::request::Parts,
        now: SystemTime,
        operation: &mut Option<OperationName>,
    ) -> Result<Admitted<'_>> {
        let (method, uri, headers) = (&parts.method, &parts.uri, &parts.headers);
        let (account, path, style) = self.accounts.locate(host(parts), uri.path())?;
        let target = Target::parse(method, path, uri.query())?;
        *operation = Some(OperationName(target.operation.name()));
        let signed = Signed {
            method,
            uri,
            headers,
            client: parts.extensions.get::<ClientIp>().map(|ip| ip.0),
            https: parts.extensions.get::<Https>().is_some(),
            container: &target.container,
            blob: &target.blob,
        };
        let credential = auth::authenticate(account, signed, now)?;
        let stored = self.accounts.stored(account, &target.container);
        let container = Key::Container(stored.clone());
        let blob = Key::Blob(stored.clone(), target.blob.clone());
        if let Err(denied) = auth::authorize(
            &credential,
            &target.operation,
            &target.container,
            &target.blob,
        ) {
            let public = credential == Credential::Anonymous
                && (self.anonymous || self.public(&container, &target.operation).await?);
            if !public {
                return Err(denied.into());
            }
        }
        Ok(Admitted {
            target,
            account,
            style,
            stored,
            container,
            blob,
        })
    }

    /// Whether a container's public access level lets anyone do `operation`: read blobs at
    /// `blob` level, and also list them and read the container's properties at `container`.
    async fn public(&self, container: &Key, operation: &Operation) -> Result<bool> {
        let level = match self.records.get(container).await? {
            Some(record) => record.public_access,
            None => None,
        };
        Ok(matches!(
            (level, operation),
            (Some(_), Operation::GetBlob)
                | (
                    Some(PublicAccess::Container),
                    Operation::ListBlobs(_) | Operation::GetContainerProperties
                )
        ))
    }

    /// One change of the record under `key`, as a compare-and-swap: read the record, let
    /// `decide` check the lease and the conditions against it and say what to write, write it
    /// only if nobody changed the record meanwhile, and start over if somebody did. Every
    /// change of the front goes through here, so the checks and the write are one atomic step
    /// on every backend.
    async fn swap(
        &self,
        key: &Key,
        headers: &HeaderMap,
        mut decide: impl FnMut(Option<&Record>) -> Result<Step>,
    ) -> Result<Swapped> {
        for _ in 0..MAX_ATTEMPTS {
            let previous = self.records.get(key).await?;
            let (written, result) = match decide(previous.as_deref())? {
                Step::Missing(operation, code) => {
                    return Err(self.missing(key, operation, headers, code).await);
                }
                Step::Keep => {
                    return Ok(Swapped {
                        previous,
                        written: None,
                        deleted: false,
                        removed: Vec::new(),
                    });
                }
                Step::Put(record, mode) => {
                    let result = self.records.put(key, &record, mode).await;
                    (Some(*record), result.map(|()| Vec::new()))
                }
                Step::Delete(generation) => (None, self.records.delete(key, generation).await),
            };
            match result {
                Ok(removed) => {
                    return Ok(Swapped {
                        previous,
                        deleted: written.is_none(),
                        written,
                        removed,
                    });
                }
                // Somebody changed (or removed) the record since we read it.
                Err(StoreError::Conflict | StoreError::AlreadyExists | StoreError::NotFound) => {
                    self.retries
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Failure::with_detail(
            ErrorCode::ServerBusy,
            format!("The change lost {MAX_ATTEMPTS} races with concurrent changes. Retry later."),
        ))
    }

    /// The error for a record that does not exist: for a change, a failed `If-Match` first
    /// (412); then a missing container, then `missing`.
    async fn missing(
        &self,
        key: &Key,
        operation: blob::Operation,
        headers: &HeaderMap,
        missing: ErrorCode,
    ) -> Failure {
        // A read of a missing blob is 404 whatever its conditions, as live Azure answers
        // (RFC 9110 13.2.1: without them the answer would not be a 2xx either).
        if operation != blob::Operation::Read
            && let Err(code) = blob::evaluate(operation, headers, None)
        {
            return code.into();
        }
        if let Key::Blob(container, _) = key {
            match self.records.get(&Key::Container(container.clone())).await {
                Ok(Some(_)) => {}
                Ok(None) => return ErrorCode::ContainerNotFound.into(),
                Err(e) => return e.into(),
            }
        }
        missing.into()
    }

    /// Discards the objects `previous` named that `written` (if any) does not: after a change
    /// of the blob under `key`, what it no longer holds. When `written` no longer names the
    /// blocks staged under `previous` (a commit, a Put Blob, a delete), they go too, and
    /// their set with them.
    async fn discard_replaced(
        &self,
        key: &Key,
        previous: Option<&Record>,
        written: Option<&Record>,
    ) {
        let Some(previous) = previous else { return };
        let dropped =
            (previous.staging).filter(|staging| written.and_then(|w| w.staging) != Some(*staging));
        let staged = match dropped {
            Some(staging) => self.staged_entries(key, staging.epoch).await,
            None => Vec::new(),
        };
        let staged = staged.iter().map(|b| b.object.as_str());
        self.discard_unnamed(previous.objects().chain(staged), written)
            .await;
        if let Some(staging) = dropped
            && let Err(error) = self.records.drop_staged(key, staging.epoch).await
        {
            tracing::warn!(?key, %error, "could not drop a set of staged blocks");
        }
    }

    /// Discards each of `objects` that `written` (if any) does not name.
    async fn discard_unnamed<'a>(
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
    async fn staged_entries(&self, key: &Key, epoch: u64) -> Vec<crate::Block> {
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
    async fn uncommitted(&self, key: &Key, record: Option<&Record>) -> Result<Vec<crate::Block>> {
        let Some(record) = record else {
            return Ok(Vec::new());
        };
        let mut entries = record.uncommitted.clone();
        if let Some(staging) = record.staging {
            entries.extend(self.records.staged_blocks(key, staging.epoch).await?);
        }
        Ok(crate::blocks::latest(entries))
    }

    /// Streams `body` into a staged object, checked against the checksums `headers` declare
    /// (a mismatch discards it: 400 `Md5Mismatch` or `Crc64Mismatch`).
    async fn stage_checked<B>(
        &self,
        headers: &HeaderMap,
        body: B,
    ) -> Result<(crate::Staged, Checksums)>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
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
    async fn read_checked<B>(
        &self,
        headers: &HeaderMap,
        body: B,
        limit: u64,
    ) -> Result<(Bytes, ifmatch_core::EntityTag, Checksums)>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        let (body, checksums) = self.checked_body(headers, body)?;
        let mut body = std::pin::pin!(crate::HashingBody::new(body, limit));
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
    fn checked_body<B: Body<Data = Bytes>>(
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

    /// Waits for this instance's turn to commit a write of `key`: one at a time per key, so
    /// that a write which lost its race while its body arrived learns it (from the record
    /// the winner committed) before its object costs the fsyncs. The compare-and-swap still
    /// decides; this only saves the work of writes that would lose it.
    async fn commit_turn(&self, key: &Key) -> futures_util::lock::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        let stripe = (hash % self.commits.len() as u64) as usize;
        self.commits[stripe].lock().await
    }

    /// `staged`, durable; discarded if it cannot be made so.
    async fn persisted(&self, staged: crate::Staged) -> Result<crate::Staged> {
        if let Err(e) = self.objects.persist(&staged).await {
            self.discard(Some(staged.object)).await;
            return Err(e.into());
        }
        Ok(staged)
    }

    async fn discard(&self, object: Option<String>) {
        let Some(object) = object else { return };
        if let Err(error) = self.objects.discard(&object).await {
            // An object that cannot be removed now is an orphan; stores sweep them.
            tracing::warn!(%object, %error, "could not discard an object");
        }
    }

    /// Discards the objects stored more than `age` ago that no record names: what a crash, a
    /// client gone mid-commit or a backend that could not say whether a commit landed left
    /// behind. Answers how many it discarded.
    ///
    /// Safe while this and other instances serve the same stores, with no coordination: the
    /// candidates are listed before the records are read, so an object is discarded only if
    /// no record named it some time after it was `age` old, and a write names its object
    /// (or gives it up) within moments of staging it. `age` must be far longer than that
    /// (the servers use an hour). Sweeping twice at once is harmless.
    pub async fn sweep(&self, age: std::time::Duration) -> std::result::Result<usize, StoreError> {
        let mut swept = self.expire_blocks().await?;
        let candidates = self.objects.older_than(age, self.env.now()).await?;
        if candidates.is_empty() {
            return Ok(swept);
        }
        let mut named = std::collections::HashSet::new();
        for container in self.records.containers().await? {
            match self.all_blobs(&container).await {
                Ok(blobs) => {
                    for (name, record) in blobs {
                        named.extend(record.objects().map(str::to_owned));
                        if let Some(staging) = record.staging {
                            let key = Key::Blob(container.clone(), name);
                            let staged = self.records.staged_blocks(&key, staging.epoch).await?;
                            named.extend(staged.into_iter().map(|b| b.object));
                        }
                    }
                }
                // Deleted meanwhile: its objects went with it.
                Err(StoreError::ContainerNotFound) => {}
                Err(e) => return Err(e),
            }
        }
        for object in candidates.iter().filter(|o| !named.contains(*o)) {
            self.objects.discard(object).await?;
            swept += 1;
        }
        Ok(swept)
    }

    /// Every blob record of a container, scanned a thousand at a time.
    async fn all_blobs(
        &self,
        container: &str,
    ) -> std::result::Result<Vec<(String, Record)>, StoreError> {
        const SCAN: usize = 1000;
        let mut out: Vec<(String, Record)> = Vec::new();
        loop {
            let from = out
                .last()
                .map_or(String::new(), |(name, _)| format!("{name}\0"));
            let scanned = self.records.list(container, "", &from, SCAN).await?;
            let done = scanned.len() < SCAN;
            out.extend(scanned);
            if done {
                return Ok(out);
            }
        }
    }

    /// Drops the blocks of every blob that has staged none for a week and committed none since
    /// (the dialect's rule), and a blob record left with nothing; discards their objects.
    /// Answers how many blocks it dropped.
    async fn expire_blocks(&self) -> std::result::Result<usize, StoreError> {
        let now = self.env.now();
        let limit =
            crate::unix_seconds(now).saturating_sub(crate::blocks::UNCOMMITTED_TTL.as_secs());
        let mut expired = 0;
        for container in self.records.containers().await? {
            let blobs = match self.all_blobs(&container).await {
                Ok(blobs) => blobs,
                Err(StoreError::ContainerNotFound) => continue,
                Err(e) => return Err(e),
            };
            for (name, record) in blobs {
                if record.staging.is_none() && record.uncommitted.is_empty() {
                    continue;
                }
                let key = Key::Blob(container.clone(), name);
                let staged = match self.uncommitted(&key, Some(&record)).await {
                    Ok(staged) => staged,
                    Err(failure) => {
                        tracing::warn!(?key, code = %failure.code, "could not read staged blocks");
                        continue;
                    }
                };
                // A set with no block yet is as old as its record.
                let newest =
                    (staged.iter().map(|b| b.staged).max()).unwrap_or(record.last_modified);
                if newest > limit {
                    continue;
                }
                let swapped = self
                    .swap(&key, &HeaderMap::new(), |current| {
                        let same = current.is_some_and(|c| {
                            c.staging == record.staging && c.uncommitted == record.uncommitted
                        });
                        let Some(current) = current.filter(|_| same) else {
                            return Ok(Step::Keep);
                        };
                        if current.content.is_none() {
                            return Ok(Step::Delete(current.generation));
                        }
                        let mut kept = current.clone();
                        (kept.staging, kept.uncommitted) = (None, Vec::new());
                        kept.generation += 1;
                        Ok(Step::Put(
                            Box::new(kept),
                            PutMode::Update(current.generation),
                        ))
                    })
                    .await;
                match swapped {
                    Ok(swapped) if swapped.written.is_some() || swapped.deleted => {
                        expired += staged.len();
                        (self.discard_replaced(
                            &key,
                            swapped.previous.as_deref(),
                            swapped.written.as_ref(),
                        ))
                        .await;
                    }
                    Ok(_) => {}
                    Err(failure) => {
                        tracing::warn!(?key, code = %failure.code, "could not expire staged blocks");
                    }
                }
            }
        }
        Ok(expired)
    }

    /// A random first generation, so that a record deleted and created again never repeats a
    /// generation a slow writer may still hold (no ABA).
    fn fresh_generation(&self) -> u64 {
        self.env.random_uuid().as_u64_pair().0 >> 1
    }
}

/// The checks of a blob write, in the order the dialect gives them: the lease, then the
/// conditions. Returns the lease the blob keeps after the write.
fn write_allowed(
    operation: blob::Operation,
    headers: &HeaderMap,
    current: Option<&Record>,
    lease_id: Option<LeaseId>,
    now: SystemTime,
) -> Result<Lease> {
    let lease = match current {
        Some(record) => record
            .lease
            .authorize(Scope::Blob, Access::Write, lease_id, now)?,
        None => Lease::Available.authorize(Scope::Blob, Access::Write, lease_id, now)?,
    };
    blob::evaluate(operation, headers, current.map(Record::validators).as_ref())?;
    Ok(lease)
}

/// The record of a blob that exists: one with blocks staged and never committed is none yet.
fn committed(record: Option<std::sync::Arc<Record>>) -> Option<std::sync::Arc<Record>> {
    record.filter(|r| r.content.is_some())
}

/// The record under `key` if what it describes exists: a blob record with staged blocks and
/// no content is a blob that does not exist yet.
fn existing<'r>(key: &Key, record: Option<&'r Record>) -> Option<&'r Record> {
    record.filter(|r| matches!(key, Key::Container(_)) || r.content.is_some())
}

/// Where a [`ChecksumBody`] leaves the checksums of its body once it ended.
type ChecksumCell = std::sync::Arc<std::sync::Mutex<Option<Checksums>>>;

/// The checksums of a body that ended (`cell`), checked against those `headers` declare.
fn verified(headers: &HeaderMap, cell: &ChecksumCell) -> Result<Checksums> {
    let checksums = cell
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .unwrap_or_else(|| Checksums::of(&[], headers.contains_key(CONTENT_CRC64)));
    verify_checksums(headers, &checksums)?;
    Ok(checksums)
}

/// The request's `Content-Length`, when it has a valid one.
fn declared_len(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
}

/// 400 `Md5Mismatch` or `Crc64Mismatch` when the `Content-MD5` or `x-ms-content-crc64` the
/// client sent is not what its body hashes to.
fn verify_checksums(headers: &HeaderMap, ours: &Checksums) -> Result<()> {
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

/// The checksums an upload's answer carries: its `Content-MD5`, and its
/// `x-ms-content-crc64` when the client sent one.
fn insert_checksums(checksums: &Checksums, out: &mut HeaderMap) {
    if let Ok(md5) = HeaderValue::try_from(checksums.md5.as_str()) {
        out.insert(CONTENT_MD5, md5);
    }
    if let Some(crc64) = checksums
        .crc64
        .as_deref()
        .and_then(|c| HeaderValue::try_from(c).ok())
    {
        out.insert(CONTENT_CRC64, crc64);
    }
}

/// The tag of the blob's bytes alone (`x-ifmatch-content-sha256`).
fn insert_sha256(record: &Record, out: &mut HeaderMap) {
    if record.content.is_some() {
        out.insert(
            metadata::CONTENT_SHA256,
            record.bytes_tag().to_header_value(),
        );
    }
}

/// The blob's `Content-MD5`, when it has one.
fn insert_md5(record: &Record, out: &mut HeaderMap) {
    if let Some(md5) = record.content.as_ref().and_then(|c| c.md5.as_deref())
        && let Ok(value) = HeaderValue::try_from(md5)
    {
        out.insert(CONTENT_MD5, value);
    }
}

/// `x-ms-blob-public-access`, or 400 `InvalidHeaderValue`.
fn public_access(headers: &HeaderMap) -> Result<Option<PublicAccess>> {
    PublicAccess::from_header(headers.get(PUBLIC_ACCESS)).ok_or_else(|| {
        Failure::with_detail(
            ErrorCode::InvalidHeaderValue,
            "x-ms-blob-public-access must be `container` or `blob` (absent: private).",
        )
    })
}

fn validator_headers(record: &Record) -> HeaderMap {
    // Room for every header a blob's answer carries: the map never grows on the way.
    let mut out = HeaderMap::with_capacity(24);
    out.insert(header::ETAG, record.etag.to_header_value());
    out.insert(
        header::LAST_MODIFIED,
        date_header_value(record.last_modified_date()),
    );
    out
}

fn answer<R>(status: StatusCode, headers: HeaderMap) -> Answer<R> {
    let mut response = Response::new(ResponseBody::empty());
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A 200 with an XML body and `headers`.
fn xml_answer<R>(mut headers: HeaderMap, xml: impl Into<Bytes>) -> Answer<R> {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    let mut response = answer(StatusCode::OK, headers);
    *response.body_mut() = ResponseBody::full(xml);
    response
}

fn error_answer<R>(failure: Failure, head: bool) -> Answer<R> {
    let code = failure.code;
    let mut out = HeaderMap::with_capacity(8);
    out.insert(ERROR_CODE, HeaderValue::from_static(code.as_str()));
    let mut response = answer(code.status(), out);
    if !head {
        let body = code.xml_body(failure.detail.as_deref().unwrap_or(code.message()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        *response.body_mut() = ResponseBody::full(body);
    }
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::Full;

    use super::*;
    use crate::memory::{ManualEnv, MemoryObjects, MemoryRecords};

    /// Memory records whose blob puts always fail with `fail()`.
    struct FailingPuts {
        inner: MemoryRecords,
        fail: fn() -> StoreError,
    }

    impl Records for FailingPuts {
        async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
            self.inner.get(key).await
        }

        async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
            match key {
                Key::Blob(..) => Err((self.fail)()),
                Key::Container(_) => self.inner.put(key, record, mode).await,
            }
        }

        async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
            self.inner.delete(key, generation).await
        }

        async fn list(
            &self,
            container: &str,
            prefix: &str,
            from: &str,
            limit: usize,
        ) -> Result<Vec<(String, Record)>, StoreError> {
            self.inner.list(container, prefix, from, limit).await
        }

        async fn stage_block(
            &self,
            key: &Key,
            epoch: u64,
            block: &crate::Block,
            max: usize,
        ) -> Result<bool, StoreError> {
            self.inner.stage_block(key, epoch, block, max).await
        }

        async fn staged_blocks(
            &self,
            key: &Key,
            epoch: u64,
        ) -> Result<Vec<crate::Block>, StoreError> {
            self.inner.staged_blocks(key, epoch).await
        }

        async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
            self.inner.drop_staged(key, epoch).await
        }
    }

    async fn put_through(fail: fn() -> StoreError) -> (StatusCode, Option<String>, usize) {
        let records = FailingPuts {
            inner: MemoryRecords::default(),
            fail,
        };
        let front = Front::new(records, MemoryObjects::default(), ManualEnv::default())
            .with_anonymous_access(true);
        let put = |uri: &str| {
            Request::put(uri)
                .header("x-ms-blob-type", "BlockBlob")
                .body(Full::new(Bytes::from_static(b"bytes")))
                .unwrap()
        };
        front
            .handle(put("/devstoreaccount1/box?restype=container"))
            .await;
        let answer = front.handle(put("/devstoreaccount1/box/b")).await;
        let code = answer
            .headers()
            .get(ERROR_CODE)
            .map(|c| c.to_str().unwrap().to_owned());
        (answer.status(), code, front.objects().len())
    }

    #[tokio::test]
    async fn a_staged_object_is_kept_only_when_the_commit_may_have_landed() {
        // 64 lost races: nothing landed, the object goes.
        let lost = put_through(|| StoreError::Conflict).await;
        assert_eq!(
            lost,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("ServerBusy".into()),
                0
            )
        );
        // A refusal or a local failure: nothing landed.
        let refused = put_through(|| StoreError::Io(std::io::Error::other("disk"))).await;
        assert_eq!(refused.2, 0);
        // The backend could not say: the object stays (an orphan at worst, for the sweep).
        let unknown = put_through(|| StoreError::Unavailable("timeout".into())).await;
        assert_eq!(
            unknown,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("ServerBusy".into()),
                1
            )
        );
    }

    #[tokio::test]
    async fn staged_blocks_never_committed_expire_after_a_week_with_their_objects() {
        let env = Arc::new(ManualEnv::default());
        let front = Front::new(
            MemoryRecords::default(),
            MemoryObjects::default(),
            env.clone(),
        )
        .with_anonymous_access(true);
        let put = |uri: &str, body: &'static [u8]| {
            Request::put(uri)
                .header("x-ms-blob-type", "BlockBlob")
                .body(Full::new(Bytes::from_static(body)))
                .unwrap()
        };
        let base = "/devstoreaccount1/box";
        front
            .handle(put(&format!("{base}?restype=container"), b""))
            .await;
        // A blob with a committed block and a staged one, and a blob with a staged one only.
        for (blob, id) in [("kept", "QQ=="), ("kept", "Qg=="), ("gone", "QQ==")] {
            let uri = format!("{base}/{blob}?comp=block&blockid={id}");
            assert_eq!(front.handle(put(&uri, b"bytes")).await.status(), 201);
        }
        let list = b"<BlockList><Latest>QQ==</Latest></BlockList>";
        let commit = front
            .handle(put(&format!("{base}/kept?comp=blocklist"), list))
            .await;
        assert_eq!(commit.status(), 201);
        let uri = format!("{base}/kept?comp=block&blockid=Qg==");
        assert_eq!(front.handle(put(&uri, b"later")).await.status(), 201);
        assert_eq!(front.objects().len(), 3);

        env.advance(std::time::Duration::from_secs(6 * 86_400));
        assert_eq!(front.expire_blocks().await.unwrap(), 0, "not a week yet");
        env.advance(std::time::Duration::from_secs(86_401));
        assert_eq!(front.expire_blocks().await.unwrap(), 2);
        assert_eq!(
            front.objects().len(),
            1,
            "the committed block's object stays"
        );
        let gone = Key::Blob("box".into(), "gone".into());
        assert!(front.records().get(&gone).await.unwrap().is_none());
        let kept = Key::Blob("box".into(), "kept".into());
        let kept = front.records().get(&kept).await.unwrap().unwrap();
        assert!(kept.uncommitted.is_empty() && kept.staging.is_none() && kept.content.is_some());
        let get = Request::get(format!("{base}/kept"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let answer = front.handle(get).await;
        assert_eq!(answer.status(), 200);
        use http_body_util::BodyExt;
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"bytes");
    }
}
