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
use crate::body::ResponseBody;
use crate::checksums::{ChecksumBody, Checksums};
use crate::metadata;
use crate::operation::{ListOptions, Operation, Target};
use crate::range::ByteRange;
use crate::store::{BoxError, Env, Key, Objects, PutMode, Records, StoreError};
use crate::{Content, PublicAccess, Record, listing};

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
    objects: O,
    env: E,
    max_body: u64,
    accounts: Accounts,
    anonymous: bool,
}

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

/// A request its credentials admit: what it addresses, and the keys of its records.
struct Admitted {
    target: Target,
    account: crate::Account,
    /// The account's root URL as the request named it (List Containers names it).
    endpoint: String,
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
}

/// A change that landed: the record it found, what it did, and the blob records a removed
/// container took with it.
struct Swapped {
    previous: Option<std::sync::Arc<Record>>,
    written: Option<Record>,
    removed: Vec<Record>,
}

type Answer<R> = Response<ResponseBody<R>>;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// A front over these backends.
    pub fn new(records: R, objects: O, env: E) -> Self {
        Self {
            records,
            objects,
            env,
            max_body: DEFAULT_MAX_BODY,
            accounts: Accounts::default(),
            anonymous: false,
        }
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
        let answer = match self.dispatch(&parts, body).await {
            Ok(answer) => answer,
            Err(failure) => error_answer(failure, head),
        };
        let mut answer = self.stamped(answer);
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
        let id = self.env.random_uuid().hyphenated().to_string();
        headers.insert(
            REQUEST_ID,
            HeaderValue::try_from(id).expect("a UUID is ASCII"),
        );
        headers.insert(MS_VERSION, HeaderValue::from_static("2021-12-02"));
        answer
    }

    async fn dispatch<B>(&self, parts: &http::request::Parts, body: B) -> Result<Answer<O::Reader>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (method, headers) = (&parts.method, &parts.headers);
        let now = self.env.now();
        let Admitted {
            target,
            account,
            endpoint,
            stored,
            container,
            blob,
        } = self.admit(parts, now).await?;
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
                self.list_containers(&account, &endpoint, options, now)
                    .await
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
        }
    }

    /// Reads what a request addresses (its account, container and blob, its operation) and
    /// admits it if its credentials allow that operation there.
    async fn admit(&self, parts: &http::request::Parts, now: SystemTime) -> Result<Admitted> {
        let (method, uri, headers) = (&parts.method, &parts.uri, &parts.headers);
        let host = (headers.get(header::HOST))
            .and_then(|h| h.to_str().ok())
            .or(uri.authority().map(|a| a.as_str()));
        let (account, path, style) = self.accounts.locate(host, uri.path())?;
        let scheme = if parts.extensions.get::<Https>().is_some() {
            "https"
        } else {
            "http"
        };
        let endpoint = match style {
            crate::Style::Host => format!("{scheme}://{}/", host.unwrap_or("")),
            crate::Style::Path => format!("{scheme}://{}/{}/", host.unwrap_or(""), account.name()),
        };
        let target = Target::parse(method, path, uri.query())?;
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
            account: account.clone(),
            endpoint,
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

    async fn create_container(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let public_access = public_access(headers)?;
        let user_metadata = metadata::metadata(headers)?;
        let etag = strong_etag(self.env.random_uuid().as_bytes());
        let mut record = Record::container(etag, now).with_generation(self.fresh_generation());
        record.public_access = public_access;
        record.metadata = user_metadata;
        match self.records.put(key, &record, PutMode::Create).await {
            Err(StoreError::AlreadyExists) => Err(ErrorCode::ContainerAlreadyExists.into()),
            result => {
                result?;
                Ok(answer(StatusCode::CREATED, validator_headers(&record)))
            }
        }
    }

    async fn delete_container(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = current else {
                    return Ok(Step::Missing(
                        blob::Operation::Container,
                        ErrorCode::ContainerNotFound,
                    ));
                };
                current
                    .lease
                    .authorize(Scope::Container, Access::Write, lease_id, now)?;
                blob::evaluate(
                    blob::Operation::Container,
                    headers,
                    Some(&current.validators()),
                )?;
                Ok(Step::Delete(current.generation))
            })
            .await?;
        for record in swapped.removed {
            self.discard(record.content.map(|c| c.object)).await;
        }
        Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()))
    }

    /// Blob Batch: each subrequest (a `DELETE` of a blob of the same account) is handled as a
    /// request of its own, with its own credentials; the answers go back in one
    /// `multipart/mixed` body, in order.
    async fn batch<B>(&self, outer: &http::request::Parts, body: B) -> Result<Answer<O::Reader>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        let refused = |(code, detail): batch::Refused| Failure::with_detail(code, detail);
        let boundary = batch::boundary(outer.headers.get(header::CONTENT_TYPE)).map_err(refused)?;
        let bytes = http_body_util::Limited::new(body, batch::MAX_BODY)
            .collect()
            .await
            .map_err(|_| {
                Failure::with_detail(ErrorCode::InvalidInput, "A batch body is at most 4 MiB.")
            })?
            .to_bytes();
        let subrequests = batch::parse(&bytes, &boundary).map_err(refused)?;
        let mut answers = Vec::with_capacity(subrequests.len());
        for sub in subrequests {
            let (mut parts, ()) = sub.request.into_parts();
            // The envelope's host (host-style accounts) and client address hold for each
            // subrequest.
            if let Some(host) = outer.headers.get(header::HOST) {
                parts.headers.insert(header::HOST, host.clone());
            }
            parts.extensions = outer.extensions.clone();
            let answer = match self.subrequest(&parts).await {
                Ok(answer) => answer,
                Err(failure) => error_answer(failure, false),
            };
            let answer = self.stamped(answer);
            let (head, body) = answer.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            answers.push((sub.content_id, Response::from_parts(head, body)));
        }
        let boundary = format!("batchresponse_{}", self.env.random_uuid().hyphenated());
        let mut out = HeaderMap::new();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::try_from(format!("multipart/mixed; boundary={boundary}"))
                .expect("a UUID boundary"),
        );
        let mut response = answer(StatusCode::ACCEPTED, out);
        *response.body_mut() = ResponseBody::full(batch::answer(&boundary, answers));
        Ok(response)
    }

    /// One subrequest of a batch: admitted like any request, and a Delete Blob.
    async fn subrequest(&self, parts: &http::request::Parts) -> Result<Answer<O::Reader>> {
        let now = self.env.now();
        let admitted = self.admit(parts, now).await?;
        if admitted.target.operation != Operation::DeleteBlob {
            return Err(Failure::with_detail(
                ErrorCode::InvalidInput,
                "A batch carries Delete Blob subrequests only.",
            ));
        }
        self.delete_blob(&admitted.blob, &parts.headers, now).await
    }

    async fn container_acl(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        let current = self
            .records
            .get(key)
            .await?
            .ok_or(ErrorCode::ContainerNotFound)?;
        current
            .lease
            .authorize(Scope::Container, Access::Read, lease_id, now)?;
        let mut out = validator_headers(&current);
        if let Some(level) = current.public_access {
            out.insert(PUBLIC_ACCESS, HeaderValue::from_static(level.as_str()));
        }
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        let mut response = answer(StatusCode::OK, out);
        *response.body_mut() = ResponseBody::full(Bytes::from_static(
            b"<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />",
        ));
        Ok(response)
    }

    /// Set Container ACL: the public access level. Stored access policies are not kept, so a
    /// body that names one is refused rather than ignored.
    async fn set_container_acl<B>(
        &self,
        key: &Key,
        headers: &HeaderMap,
        body: B,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        let level = public_access(headers)?;
        let lease_id = lease_id_from_headers(headers)?;
        let limited = http_body_util::Limited::new(body, 64 << 10);
        let xml = limited
            .collect()
            .await
            .map_err(|_| ErrorCode::InvalidXmlDocument)?
            .to_bytes();
        if String::from_utf8_lossy(&xml).contains("<SignedIdentifier>") {
            return Err(Failure::with_detail(
                ErrorCode::InvalidXmlDocument,
                "Stored access policies (SignedIdentifier) are not supported by this server; \
                 sign permissions and expiry into each shared access signature.",
            ));
        }
        let etag = strong_etag(self.env.random_uuid().as_bytes());
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = current else {
                    return Ok(Step::Missing(
                        blob::Operation::Container,
                        ErrorCode::ContainerNotFound,
                    ));
                };
                current
                    .lease
                    .authorize(Scope::Container, Access::Read, lease_id, now)?;
                blob::evaluate(
                    blob::Operation::Container,
                    headers,
                    Some(&current.validators()),
                )?;
                let mut record = current.clone();
                record.public_access = level;
                record.etag = etag.clone();
                record.last_modified = crate::unix_seconds(now);
                record.generation = current.generation + 1;
                Ok(Step::Put(
                    Box::new(record),
                    PutMode::Update(current.generation),
                ))
            })
            .await?;
        let written = swapped.written.expect("a put");
        Ok(answer(StatusCode::OK, validator_headers(&written)))
    }

    async fn container_properties(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        let current = self
            .records
            .get(key)
            .await?
            .ok_or(ErrorCode::ContainerNotFound)?;
        current
            .lease
            .authorize(Scope::Container, Access::Read, lease_id, now)?;
        let mut out = validator_headers(&current);
        current.lease.insert_headers(now, &mut out);
        if let Some(level) = current.public_access {
            out.insert(PUBLIC_ACCESS, HeaderValue::from_static(level.as_str()));
        }
        metadata::insert_metadata(&current.metadata, &mut out);
        Ok(answer(StatusCode::OK, out))
    }

    /// Get Blob Metadata: the validators and the `x-ms-meta-*` headers.
    async fn blob_metadata(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        let Some(current) = self.records.get(key).await? else {
            return Err(self
                .missing(key, blob::Operation::Read, headers, ErrorCode::BlobNotFound)
                .await);
        };
        current
            .lease
            .authorize(Scope::Blob, Access::Read, lease_id, now)?;
        blob::evaluate(blob::Operation::Read, headers, Some(&current.validators()))?;
        let mut out = validator_headers(&current);
        metadata::insert_metadata(&current.metadata, &mut out);
        Ok(answer(StatusCode::OK, out))
    }

    /// Set Container Metadata, Set Blob Metadata and Set Blob Properties: one compare-and-swap
    /// under the lease and the conditions, and a new ETag (see [`metadata`]).
    async fn set_metadata(
        &self,
        operation: &Operation,
        container: &Key,
        blob: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
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
        let nonce = self.env.random_uuid();
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = current else {
                    let operation = match scope {
                        Scope::Container => blob::Operation::Container,
                        Scope::Blob => blob::Operation::Put,
                    };
                    return Ok(Step::Missing(operation, missing));
                };
                // A blob's lease guards its metadata; a container's lease id, when given,
                // must match (Azure's Set Container Metadata), and is not required.
                let access = match scope {
                    Scope::Container => Access::Read,
                    Scope::Blob => Access::Write,
                };
                current.lease.authorize(scope, access, lease_id, now)?;
                let conditions = match scope {
                    Scope::Container => blob::Operation::Container,
                    Scope::Blob => blob::Operation::Put,
                };
                blob::evaluate(conditions, headers, Some(&current.validators()))?;
                let mut record = current.clone();
                if let Some(user_metadata) = &user_metadata {
                    record.metadata = user_metadata.clone();
                }
                record.etag = match record.content.as_mut() {
                    Some(content) => {
                        if user_metadata.is_none() {
                            // Set Blob Properties: the headers absent from it are cleared.
                            let (content_type, properties) =
                                metadata::upload_properties(headers, false);
                            content.content_type = content_type;
                            content.properties = properties;
                        }
                        let bytes = current.bytes_tag().clone();
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
                record.last_modified = crate::unix_seconds(now);
                record.generation = current.generation + 1;
                Ok(Step::Put(
                    Box::new(record),
                    PutMode::Update(current.generation),
                ))
            })
            .await?;
        let written = swapped.written.expect("a put");
        Ok(answer(StatusCode::OK, validator_headers(&written)))
    }

    async fn list(
        &self,
        container: &str,
        options: &ListOptions,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let key = Key::Container(container.to_owned());
        self.records
            .get(&key)
            .await?
            .ok_or(ErrorCode::ContainerNotFound)?;
        let mut blobs = self.records.list(container, &options.prefix).await?;
        blobs.sort_by(|a, b| a.0.cmp(&b.0));
        let (entries, next_marker) = listing::page(&blobs, options);
        let xml =
            listing::enumeration_results(container, options, &entries, next_marker.as_deref(), now);
        let mut out = HeaderMap::new();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        let mut response = answer(StatusCode::OK, out);
        *response.body_mut() = ResponseBody::full(xml);
        Ok(response)
    }

    /// List Containers: the account's containers, by name, a page at a time.
    async fn list_containers(
        &self,
        account: &crate::Account,
        endpoint: &str,
        options: &ListOptions,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let mut names: Vec<String> = (self.records.containers().await?)
            .into_iter()
            .filter_map(|stored| self.accounts.name_in(account, &stored))
            .filter(|name| name.starts_with(&options.prefix))
            .filter(|name| options.marker.as_ref().is_none_or(|m| name > m))
            .collect();
        names.sort();
        let next_marker =
            (names.len() > options.max_results).then(|| names[options.max_results - 1].clone());
        names.truncate(options.max_results);
        let mut page = Vec::with_capacity(names.len());
        for name in names {
            let key = Key::Container(self.accounts.stored(account, &name));
            // Deleted meanwhile: not listed.
            if let Some(record) = self.records.get(&key).await? {
                page.push((name, record.as_ref().clone()));
            }
        }
        let xml =
            listing::containers_results(endpoint, options, &page, next_marker.as_deref(), now);
        let mut out = HeaderMap::new();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        );
        let mut response = answer(StatusCode::OK, out);
        *response.body_mut() = ResponseBody::full(xml);
        Ok(response)
    }

    /// Lease Blob and Lease Container: one transition of the lease state machine, committed with
    /// a compare-and-swap. The record's ETag and Last-Modified do not change.
    async fn lease(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let action =
            LeaseAction::from_headers(headers, || LeaseId::from_uuid(self.env.random_uuid()))?;
        let (operation, missing) = match key {
            Key::Container(_) => (blob::Operation::Container, ErrorCode::ContainerNotFound),
            Key::Blob(..) => (blob::Operation::Write, ErrorCode::BlobNotFound),
        };
        let mut status = StatusCode::OK;
        let mut lease_headers = HeaderMap::new();
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = current else {
                    return Ok(Step::Missing(operation, missing));
                };
                blob::evaluate(operation, headers, Some(&current.validators()))?;
                let transition = current.lease.apply(&action, now)?;
                (status, lease_headers) = (transition.status, transition.headers());
                let record = Record {
                    lease: transition.lease,
                    generation: current.generation + 1,
                    ..current.clone()
                };
                Ok(Step::Put(
                    Box::new(record),
                    PutMode::Update(current.generation),
                ))
            })
            .await?;
        let mut out = validator_headers(swapped.written.as_ref().expect("a lease writes"));
        out.extend(lease_headers);
        Ok(answer(status, out))
    }

    async fn put_blob<B>(
        &self,
        key: &Key,
        headers: &HeaderMap,
        body: B,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // Required, as in Azure: a request that meant something else (a misspelt `comp`, a
        // lease action without its query) must never replace a blob with its empty body.
        match headers.get(BLOB_TYPE) {
            None => {
                return Err(Failure::with_detail(
                    ErrorCode::MissingRequiredHeader,
                    "An HTTP header that's mandatory for this request is not specified. Header: x-ms-blob-type",
                ));
            }
            Some(kind) if kind != "BlockBlob" => {
                return Err(Failure::with_detail(
                    ErrorCode::InvalidHeaderValue,
                    "Only BlockBlob is supported. Header: x-ms-blob-type",
                ));
            }
            Some(_) => {}
        }
        // A structured body (`x-ms-structured-body`) wraps the bytes in segments with their
        // CRC64s: stored as is, it would be other bytes than the client's. Refused, never kept.
        if headers.contains_key(STRUCTURED_BODY) {
            return Err(Failure::with_detail(
                ErrorCode::UnsupportedHeader,
                "Structured message bodies (x-ms-structured-body) are not supported; send \
                 x-ms-content-crc64 or Content-MD5 with the plain bytes.",
            ));
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.max_body) {
            return Err(ErrorCode::RequestBodyTooLarge.into());
        }
        let lease_id = lease_id_from_headers(headers)?;
        let (content_type, properties) = metadata::upload_properties(headers, true);
        let user_metadata = metadata::metadata(headers)?;

        // Fail fast, before taking the body: the same checks run again at commit time.
        let current = self.records.get(key).await?;
        if current.is_none() {
            self.records
                .get(&Key::Container(key.container().to_owned()))
                .await?
                .ok_or(ErrorCode::ContainerNotFound)?;
        }
        write_allowed(
            blob::Operation::Put,
            headers,
            current.as_deref(),
            lease_id,
            now,
        )?;

        let sent_crc64 = headers.get(CONTENT_CRC64).cloned();
        let (body, checksums) = ChecksumBody::new(body, sent_crc64.is_some());
        let staged = self.objects.stage(body, self.max_body).await?;
        let checksums = checksums
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| Checksums::of(&[], sent_crc64.is_some()));
        let mismatch = [
            (
                headers.get(CONTENT_MD5),
                Some(&checksums.md5),
                ErrorCode::Md5Mismatch,
            ),
            (
                sent_crc64.as_ref(),
                checksums.crc64.as_ref(),
                ErrorCode::Crc64Mismatch,
            ),
        ]
        .into_iter()
        .find(|(sent, ours, _)| {
            sent.is_some_and(|s| Some(s.as_bytes()) != ours.map(|o| o.as_bytes()))
        });
        if let Some((sent, ours, code)) = mismatch {
            self.discard(Some(staged.object)).await;
            return Err(Failure::with_detail(
                code,
                format!(
                    "{} Sent: {}; calculated: {}.",
                    code.message(),
                    sent.map(|s| String::from_utf8_lossy(s.as_bytes()).into_owned())
                        .unwrap_or_default(),
                    ours.map(String::as_str).unwrap_or_default()
                ),
            ));
        }
        let etag = metadata::blob_tag(
            &staged.etag,
            content_type.as_deref(),
            &user_metadata,
            &properties,
            None,
        );
        let mut content = Content::new(staged.object.clone(), staged.len, content_type);
        content.md5 = Some(checksums.md5);
        content.properties = properties;
        content.sha256 = (etag != staged.etag).then_some(staged.etag);
        let mut fresh = Record::blob(etag, now, content);
        fresh.metadata = user_metadata;
        let committed = self
            .commit_put(key, headers, lease_id, fresh, now)
            .await
            .map(|mut answer| {
                if let Some(crc64) = checksums.crc64.and_then(|c| HeaderValue::try_from(c).ok()) {
                    answer.headers_mut().insert(CONTENT_CRC64, crc64);
                }
                answer
            });
        // A backend that failed without an answer (a timeout, a lost connection) may have
        // committed the record all the same: its object then stays, an orphan at worst, never
        // a record naming bytes that are gone.
        if committed.as_ref().is_err_and(|f| !f.may_have_landed) {
            self.discard(Some(staged.object)).await;
        }
        committed
    }

    async fn commit_put(
        &self,
        key: &Key,
        headers: &HeaderMap,
        lease_id: Option<LeaseId>,
        fresh: Record,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let swapped = self
            .swap(key, headers, |current| {
                let lease = write_allowed(blob::Operation::Put, headers, current, lease_id, now)?;
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
        let replaced = swapped.previous.and_then(|c| c.content.clone());
        self.discard(replaced.map(|c| c.object)).await;
        let record = swapped.written.expect("a put writes");
        let mut out = validator_headers(&record);
        insert_md5(&record, &mut out);
        insert_sha256(&record, &mut out);
        Ok(answer(StatusCode::CREATED, out))
    }

    async fn get_blob(
        &self,
        key: &Key,
        head: bool,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        // A concurrent overwrite may discard the object between reading the record and opening
        // the object; the record read again names the new one.
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.records.get(key).await? else {
                return Err(self
                    .missing(key, blob::Operation::Read, headers, ErrorCode::BlobNotFound)
                    .await);
            };
            current
                .lease
                .authorize(Scope::Blob, Access::Read, lease_id, now)?;
            let outcome =
                blob::evaluate(blob::Operation::Read, headers, Some(&current.validators()))?;
            let content = current.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;

            // A 304 carries the validators and the lease, not the representation's metadata
            // (RFC 9110 15.4.5), so that is built only for a 200 or 206.
            let mut out = validator_headers(&current);
            current.lease.insert_headers(now, &mut out);
            if outcome == Outcome::NotModified {
                // As Azure's: the SDKs pick their exception (or "not modified") from the code.
                out.insert(
                    ERROR_CODE,
                    HeaderValue::from_static(ErrorCode::ConditionNotMet.as_str()),
                );
                return Ok(answer(StatusCode::NOT_MODIFIED, out));
            }
            let content_type = content
                .content_type
                .as_deref()
                .unwrap_or("application/octet-stream");
            if let Ok(value) = HeaderValue::try_from(content_type) {
                out.insert(header::CONTENT_TYPE, value);
            }
            metadata::insert_properties(&content.properties, &mut out);
            metadata::insert_metadata(&current.metadata, &mut out);
            insert_sha256(&current, &mut out);
            out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            out.insert(BLOB_TYPE, HeaderValue::from_static("BlockBlob"));
            let requested = headers.get(MS_RANGE).or_else(|| headers.get(header::RANGE));
            let range = match (outcome, requested.and_then(|v| v.to_str().ok())) {
                (Outcome::Proceed, Some(value)) if !head => ByteRange::parse(value, content.len),
                _ => ByteRange::Whole,
            };
            let (status, range) = match range {
                ByteRange::Whole => (StatusCode::OK, None),
                ByteRange::Part(range) => {
                    let value = format!("bytes {}-{}/{}", range.start, range.end - 1, content.len);
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
                            content.len
                        ),
                    ));
                }
            };
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
            match self.objects.read(&content.object, content.len, range).await {
                Ok(reader) if part_md5 => {
                    use http_body_util::BodyExt;
                    let bytes = reader.collect().await?.to_bytes();
                    if let Ok(value) = HeaderValue::try_from(Checksums::of(&bytes, false).md5) {
                        out.insert(CONTENT_MD5, value);
                    }
                    let mut response = answer(status, out);
                    *response.body_mut() = ResponseBody::full(bytes);
                    return Ok(response);
                }
                Ok(reader) => {
                    let mut response = answer(status, out);
                    *response.body_mut() = ResponseBody::stream(reader);
                    return Ok(response);
                }
                // Discarded by an overwrite since we read the record: read the record again.
                // If the record has not changed, its object is gone: damage, not a race.
                Err(StoreError::NotFound)
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
                        StoreError::NotFound => StoreError::corrupt(
                            format_args!("object {}", content.object),
                            "its record names it, and it does not exist",
                        ),
                        e => e,
                    };
                    let Key::Blob(container, name) = key else {
                        unreachable!("only blobs have content")
                    };
                    tracing::error!(
                        %container, blob = %name, object = %content.object, error = %e,
                        "a blob's record names bytes that cannot be served"
                    );
                    return Err(e.into());
                }
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    async fn delete_blob(
        &self,
        key: &Key,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Answer<O::Reader>> {
        let lease_id = lease_id_from_headers(headers)?;
        let swapped = self
            .swap(key, headers, |current| {
                let Some(current) = current else {
                    return Ok(Step::Missing(
                        blob::Operation::Write,
                        ErrorCode::BlobNotFound,
                    ));
                };
                write_allowed(
                    blob::Operation::Write,
                    headers,
                    Some(current),
                    lease_id,
                    now,
                )?;
                Ok(Step::Delete(current.generation))
            })
            .await?;
        let content = swapped.previous.and_then(|c| c.content.clone());
        self.discard(content.map(|c| c.object)).await;
        Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()))
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
                        written,
                        removed,
                    });
                }
                // Somebody changed (or removed) the record since we read it.
                Err(StoreError::Conflict | StoreError::AlreadyExists | StoreError::NotFound) => {}
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
        let candidates = self.objects.older_than(age, self.env.now()).await?;
        if candidates.is_empty() {
            return Ok(0);
        }
        let mut named = std::collections::HashSet::new();
        for container in self.records.containers().await? {
            match self.records.list(&container, "").await {
                Ok(blobs) => named.extend(
                    blobs
                        .into_iter()
                        .filter_map(|(_, record)| record.content.map(|c| c.object)),
                ),
                // Deleted meanwhile: its objects went with it.
                Err(StoreError::ContainerNotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let mut swept = 0;
        for object in candidates.iter().filter(|o| !named.contains(*o)) {
            self.objects.discard(object).await?;
            swept += 1;
        }
        Ok(swept)
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
    let mut out = HeaderMap::new();
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

fn error_answer<R>(failure: Failure, head: bool) -> Answer<R> {
    let code = failure.code;
    let mut out = HeaderMap::new();
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
        ) -> Result<Vec<(String, Record)>, StoreError> {
            self.inner.list(container, prefix).await
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
}
