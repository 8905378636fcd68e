//! The request handling of the blob front, written once over [`Records`], [`Objects`] and
//! [`Env`].
//!
//! Every change is a compare-and-swap of one record: read it, check the lease and the
//! conditions against it, write the new record only if nobody changed it meanwhile, and start
//! over if somebody did. The lease check and the conditions are thus part of the same atomic
//! step as the write, on any backend that offers a compare-and-swap. A body is staged (hashed
//! and stored durably) before the first attempt, so no lock or compare-and-swap waits on a
//! client's upload.
//!
//! This file routes a request to its operation, each kind in a file of its own (`blobs.rs`,
//! `blocks.rs`, `containers.rs`, ...); what they share lies beneath them: the front's state
//! (`state.rs`), a request as a handler takes it (`call.rs`), the headers several read
//! (`headers.rs`), what they answer (`answers.rs`) and how they fail (`failure.rs`).

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Method, Request};
use http_body::Body;
use ifmatch_azure::{Client, Named, OperationName, REQUEST_ID, answered_version, request_id};

use self::admission::endpoint;
use self::answers::Answer;
use self::call::Call;
use self::failure::{Answered, error_answer};
use self::headers::MS_VERSION;
pub use self::state::{DEFAULT_MAX_BODY, Front};
use crate::body::Incoming;
use crate::error_code::ErrorCode;
use crate::operation::Operation;
use crate::store::{BoxError, Objects, Records};
use ifmatch_azure::Env;

mod admission;
mod answers;
mod append;
mod blobs;
mod blocks;
mod call;
mod change_feed;
mod containers;
mod copy;
mod deleted_containers;
mod failure;
mod gate;
mod headers;
mod immutability;
mod incremental_copy;
mod leases;
mod listing;
mod management;
mod page_blobs;
mod pages;
mod pending_copies;
mod service;
mod snapshots;
mod soft_delete;
mod state;
mod swap;
mod sweep;
mod tags;
mod uploads;
mod versions;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// The answer for `code` alone: what a host says when the front could not answer.
    pub fn error(&self, code: ErrorCode) -> Answer<O::Reader> {
        self.stamped(error_answer(code.into(), false), None)
    }

    /// The answer to a request a host could not read: a header named `name` that `http`
    /// cannot hold (a Worker's runtime passes it). Metadata's is `InvalidMetadata`, as the
    /// front answers a metadata name it reads and refuses.
    pub fn unreadable_header(&self, name: &str) -> Answer<O::Reader> {
        match name.to_ascii_lowercase().starts_with("x-ms-meta-") {
            true => self.error(ErrorCode::InvalidMetadata),
            false => self.error(ErrorCode::InvalidHeaderValue),
        }
    }

    /// Answers one request from a client the host knows nothing of (see [`Client`]). Never
    /// fails: every error is an answer with its code.
    pub async fn handle<B>(&self, request: Request<B>) -> Answer<O::Reader>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self::handle_by(self, request, Client::default()).await.0
    }

    /// Answers one request from `client`, through any pointer to the front (an `Arc` of it, for
    /// a future that owns its front), and names the operation it asked when it named one.
    ///
    /// Not an `async fn`: the request is split before the future is made, so that the future
    /// holds its head and body once, where an `async fn` would keep its argument beside what it
    /// is split into (and a host's block owning the front, beside this future): every request's
    /// future is moved and boxed whole.
    pub fn handle_by<F, B>(
        front: F,
        request: Request<B>,
        client: Client,
    ) -> impl Future<Output = Named<Answer<O::Reader>>>
    where
        F: std::ops::Deref<Target = Self>,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = request.into_parts();
        async move {
            let front = &*front;
            let head = parts.method == Method::HEAD;
            let path = parts.uri.path();
            if let Some(route) = crate::management::Route::parse(path, parts.uri.query()) {
                let answer = Box::pin(front.manage(&parts, client, body, route)).await;
                return (front.stamped(answer, None), None);
            }
            let mut operation = None;
            let answer = match front.dispatch(&parts, client, body, &mut operation).await {
                Ok(answer) => answer,
                Err(failure) => error_answer(failure, head),
            };
            (
                front.stamped(answer, parts.headers.get(MS_VERSION)),
                operation,
            )
        }
    }

    /// `answer` with the headers every answer carries: a request id and the dialect's version,
    /// the one the client speaks (`asked`) when it names one the dialect knows the form of.
    fn stamped(
        &self,
        mut answer: Answer<O::Reader>,
        asked: Option<&HeaderValue>,
    ) -> Answer<O::Reader> {
        let headers = answer.headers_mut();
        headers.insert(REQUEST_ID, request_id(&self.env));
        let default = const { HeaderValue::from_static("2021-12-02") };
        headers.insert(MS_VERSION, answered_version(asked, default));
        answer
    }

    async fn dispatch(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: impl Incoming,
        operation: &mut Option<OperationName>,
    ) -> Answered<O> {
        let (method, headers) = (&parts.method, &parts.headers);
        // No operation takes a body larger than the largest blob: refused before anything else,
        // so that a length the server itself lowered (see `ifmatch-server`'s `huge_length`),
        // which no signature can cover, is 413 as any other too large.
        if uploads::declared_len(headers).is_some_and(|len| len > self.max_body) {
            return Err(ErrorCode::RequestBodyTooLarge.into());
        }
        let now = self.env.now();
        let admitted = Box::pin(self.admit(parts, client, now, operation)).await?;
        // The container's own protection, for a change of one of its blobs.
        let protection = self.protection_for(&admitted, method).await?;
        let guard = protection.as_ref().map(gate::Protected::guard);
        let on = |key| Call {
            key,
            headers,
            now,
            guard,
        };
        // A `versionid=` of a blob's current version names the blob's own record.
        let version_key;
        let blob_key = match admitted.target.version {
            Some(_) => {
                version_key = Box::pin(self.version_key(admitted.blob.clone())).await?;
                &version_key
            }
            None => &admitted.blob,
        };
        let asked = Asked {
            parts,
            client,
            admitted: &admitted,
            container: on(&admitted.container),
            blob: on(blob_key),
            now,
        };
        self.run(asked, body, operation).await
    }

    /// The operation an admitted request asks, on the records its calls name: its future,
    /// boxed where it is picked, so that the request's future holds the one operation it runs
    /// and moves none of the others' state.
    fn run<'a>(
        &'a self,
        asked: Asked<'a>,
        body: impl Incoming + 'a,
        operation: &mut Option<OperationName>,
    ) -> Running<'a, O> {
        let Asked {
            parts,
            client,
            admitted,
            container,
            blob,
            now,
        } = asked;
        let (method, headers) = (&parts.method, &parts.headers);
        let (account, credential) = (admitted.account, &admitted.credential);
        // Who asks, for a copy's source.
        let from = || copy::Requester {
            parts,
            client,
            account,
            credential,
        };
        match &admitted.target.operation {
            Operation::CreateContainer => Box::pin(self.create_container(container)),
            Operation::GetContainerAcl => Box::pin(self.container_acl(container)),
            Operation::SetContainerAcl => Box::pin(self.set_container_acl(container, body)),
            Operation::SubmitBatch => Box::pin(self.batch(parts, client, body)),
            Operation::DeleteContainer => Box::pin(self.delete_container(container)),
            Operation::RestoreContainer => Box::pin(self.restore_container(container)),
            Operation::GetContainerProperties | Operation::GetContainerMetadata => {
                Box::pin(self.container_properties(container))
            }
            Operation::ListBlobs(options) => {
                Box::pin(self.list(admitted.container.container(), options, now))
            }
            Operation::FindBlobsByTags(options) => {
                let within = Some(admitted.target.container.as_str());
                Box::pin(self.find_blobs(account, within, options))
            }
            Operation::FindBlobsInAccount(options) => {
                Box::pin(self.find_blobs(account, None, options))
            }
            Operation::GetBlobServiceProperties => Box::pin(self.service_properties(account)),
            Operation::GetUserDelegationKey => {
                Box::pin(self.user_delegation_key(account, credential, body, headers))
            }
            Operation::SetBlobServiceProperties => {
                Box::pin(self.set_service_properties(account, body, headers))
            }
            Operation::LeaseContainer => Box::pin(self.lease(container)),
            Operation::PutBlob if headers.contains_key(copy::COPY_SOURCE) => {
                *operation = Some(OperationName(copy::operation_name(headers)));
                Box::pin(self.copy_blob(blob, from()))
            }
            Operation::PutBlob => Box::pin(self.put_blob(blob, body)),
            Operation::GetBlob => Box::pin(self.get_blob(blob, method == Method::HEAD)),
            Operation::DeleteBlob
                if admitted.target.snapshot.is_some() || admitted.target.version.is_some() =>
            {
                Box::pin(self.delete_snapshot_or_version(blob))
            }
            Operation::DeleteBlob => Box::pin(self.delete_with_snapshots(blob)),
            Operation::UndeleteBlob => Box::pin(self.undelete(blob)),
            Operation::SetImmutabilityPolicy => Box::pin(self.set_immutability_policy(blob)),
            Operation::DeleteImmutabilityPolicy => Box::pin(self.delete_immutability_policy(blob)),
            Operation::SetLegalHold => Box::pin(self.set_legal_hold(blob)),
            Operation::SnapshotBlob => Box::pin(self.snapshot_blob(blob)),
            Operation::LeaseBlob => Box::pin(self.lease(blob)),
            Operation::ListContainers(options) => {
                let endpoint = endpoint(parts, client, account, admitted.style);
                Box::pin(
                    async move { self.list_containers(account, &endpoint, options, now).await },
                )
            }
            Operation::GetBlobMetadata => Box::pin(self.blob_metadata(blob)),
            Operation::SetContainerMetadata
            | Operation::SetBlobMetadata
            | Operation::SetBlobProperties => {
                Box::pin(self.set_metadata(&admitted.target.operation, container.key, blob))
            }
            Operation::GetBlobTags => Box::pin(self.blob_tags(blob)),
            Operation::SetBlobTags => Box::pin(self.set_blob_tags(blob, body)),
            Operation::PutBlock(id) if headers.contains_key(copy::COPY_SOURCE) => {
                *operation = Some(OperationName("PutBlockFromURL"));
                Box::pin(self.put_block_from_url(blob, id, from()))
            }
            Operation::PutBlock(id) => Box::pin(self.put_block(blob, id, body)),
            Operation::PutBlockList => Box::pin(self.put_block_list(blob, body)),
            Operation::GetBlockList(kind) => Box::pin(self.get_block_list(blob, *kind)),
            Operation::AbortCopyBlob(id) => Box::pin(self.abort_copy(blob, id)),
            Operation::AppendBlock if headers.contains_key(copy::COPY_SOURCE) => {
                *operation = Some(OperationName("AppendBlockFromURL"));
                Box::pin(self.append_block_from_url(blob, from()))
            }
            Operation::AppendBlock => Box::pin(self.append_block(blob, body)),
            Operation::SealBlob => Box::pin(self.seal(blob)),
            Operation::PutPage if headers.contains_key(copy::COPY_SOURCE) => {
                *operation = Some(OperationName("PutPageFromURL"));
                Box::pin(self.put_page_from_url(blob, from()))
            }
            Operation::PutPage => Box::pin(self.put_page(blob, body)),
            Operation::IncrementalCopy => Box::pin(self.incremental_copy(blob, from())),
            Operation::GetPageRanges(options) => Box::pin(self.page_ranges(blob, options)),
        }
    }
}

/// An operation's answer on its way (see [`Front::run`]).
type Running<'a, O> = std::pin::Pin<Box<dyn Future<Output = Answered<O>> + Send + 'a>>;

/// An admitted request, as its operation runs: its head, its client, what admitted it, and the
/// calls on its container's record and its blob's.
struct Asked<'a> {
    parts: &'a http::request::Parts,
    client: Client,
    admitted: &'a admission::Admitted<'a>,
    container: Call<'a>,
    blob: Call<'a>,
    now: std::time::SystemTime,
}

#[cfg(test)]
mod tests;
