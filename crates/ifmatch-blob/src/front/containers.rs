//! Container operations: create, delete, properties, the access policy (ACL), and Blob Batch
//! (its subrequests are blob deletes, answered one by one).

use super::call::Call;
use super::failure::Answered;
use super::headers::PUBLIC_ACCESS;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::{Access, Scope};
use crate::precondition;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode, header};
use ifmatch_azure::Client;
use ifmatch_core::strong_etag;

use super::answers::{answer, validator_headers, xml_answer};
use super::failure::{Failure, Result, error_answer};
use super::swap::Step;
use crate::body::Incoming;
use crate::body::ResponseBody;
use crate::operation::Operation;
use crate::record::PublicAccess;
use crate::record::Record;
use crate::store::{Objects, PutMode, Records, StoreError};
use crate::{batch, metadata};
use ifmatch_azure::Env;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    pub(super) async fn create_container(&self, call: Call<'_>) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let public_access = public_access(headers)?;
        let user_metadata = metadata::metadata(headers)?;
        let etag = strong_etag(self.env.random_uuid().as_bytes());
        let mut record = Record::container(etag, now).with_generation(self.fresh_generation());
        record.public_access = public_access;
        record.metadata = user_metadata;
        match self.records.put(key, &record, PutMode::Create).await {
            Err(StoreError::AlreadyExists { .. }) => Err(ErrorCode::ContainerAlreadyExists.into()),
            result => {
                result?;
                Ok(answer(StatusCode::CREATED, validator_headers(&record)))
            }
        }
    }

    pub(super) async fn delete_container(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let (conditions, missing) = (
            precondition::Operation::Container,
            ErrorCode::ContainerNotFound,
        );
        let mut attempts = ifmatch_azure::swap::Attempts::default();
        while attempts.another() {
            let Some(current) = self.records.get(key).await? else {
                return Err(self.missing(key, conditions, headers, missing).await);
            };
            ask.gate(conditions, crate::lease::Access::Write, Some(&current))?;
            self.publish_before_removing(key.container()).await?;
            // None of its blobs under a legal hold or a retention policy: a protection set
            // after this look bumps the container's generation, and the delete below fails.
            let own = current.protection.as_deref();
            if let Some(code) = self.protected_blob(key.container(), own).await? {
                return Err(code.into());
            }
            // Kept for the account's days, if it keeps deleted containers.
            if let Some(days) = self.settings(key).await?.container_retention_days {
                match self.keep_container(key, &current, days).await? {
                    Some(removed) => {
                        for record in removed {
                            self.discard_unnamed(record.objects(), None).await;
                        }
                        return Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()));
                    }
                    None => continue,
                }
            }
            match self.records.delete(key, current.generation).await {
                Ok(removed) => {
                    // Their staged sets went with the container; the objects of those are
                    // orphans, for the sweep.
                    for record in removed {
                        self.discard_unnamed(record.objects(), None).await;
                    }
                    return Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()));
                }
                Err(e) if self.lost_race(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Blob Batch: each subrequest (a `DELETE` of a blob of the same account) is handled as a
    /// request of its own, with its own credentials; the answers go back in one
    /// `multipart/mixed` body, in order.
    pub(super) async fn batch(
        &self,
        outer: &http::request::Parts,
        client: Client,
        body: impl Incoming,
    ) -> Answered<O> {
        use http_body_util::BodyExt;
        let refused = |(code, detail): batch::Malformed| Failure::with_detail(code, detail);
        let boundary = batch::boundary(outer.headers.get(header::CONTENT_TYPE)).map_err(refused)?;
        let bytes = crate::body::read_at_most(body, batch::MAX_BODY)
            .await
            .ok_or_else(|| {
                Failure::with_detail(ErrorCode::InvalidInput, "A batch body is at most 4 MiB.")
            })?;
        let subrequests = batch::parse(&bytes, &boundary).map_err(refused)?;
        let mut answers = Vec::with_capacity(subrequests.len());
        for sub in subrequests {
            let (mut parts, ()) = sub.request.into_parts();
            // The envelope's host (host-style accounts) and client hold for each subrequest.
            if let Some(host) = outer.headers.get(header::HOST) {
                parts.headers.insert(header::HOST, host.clone());
            }
            let answer = match self.subrequest(&parts, client).await {
                Ok(answer) => answer,
                Err(failure) => error_answer(failure, false),
            };
            let answer = self.stamped(answer, None);
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
        *response.body_mut() = ResponseBody::full(batch::multipart_body(&boundary, answers));
        Ok(response)
    }

    /// One subrequest of a batch: admitted like any request, and a Delete Blob.
    pub(super) async fn subrequest(
        &self,
        parts: &http::request::Parts,
        client: Client,
    ) -> Answered<O> {
        let now = self.env.now();
        let admitted = self.admit(parts, client, now, &mut None).await?;
        if admitted.target.operation != Operation::DeleteBlob {
            return Err(Failure::with_detail(
                ErrorCode::InvalidInput,
                "A batch carries Delete Blob subrequests only.",
            ));
        }
        let (key, headers) = (&admitted.blob, &parts.headers);
        let protection = self.protection_for(&admitted, &Method::DELETE).await?;
        let guard = protection.as_ref().map(super::gate::Protected::guard);
        self.delete_blob(Call {
            key,
            headers,
            now,
            guard,
        })
        .await
    }

    pub(super) async fn container_acl(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, .. } = call;
        let ask = call.ask()?;
        let current = self.container_record(key.container()).await?;
        ask.lease(Scope::Container, Access::Read, Some(&current))?;
        let mut out = validator_headers(&current);
        if let Some(level) = current.public_access {
            out.insert(PUBLIC_ACCESS, HeaderValue::from_static(level.as_str()));
        }
        let xml = b"<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />";
        Ok(xml_answer(out, Bytes::from_static(xml)))
    }

    /// Set Container ACL: the public access level. Stored access policies are not kept, so a
    /// body that names one is refused rather than ignored.
    pub(super) async fn set_container_acl(
        &self,
        call: Call<'_>,
        body: impl Incoming,
    ) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let level = public_access(headers)?;
        let ask = call.ask()?;
        let xml = crate::body::read_at_most(body, 64 << 10)
            .await
            .ok_or(ErrorCode::InvalidXmlDocument)?;
        if String::from_utf8_lossy(&xml).contains("<SignedIdentifier>") {
            return Err(Failure::with_detail(
                ErrorCode::InvalidXmlDocument,
                "Stored access policies (SignedIdentifier) are not supported by this server; \
                 sign permissions and expiry into each shared access signature.",
            ));
        }
        let etag = strong_etag(self.env.random_uuid().as_bytes());
        let swapped = self
            .swap_existing(
                key,
                headers,
                (
                    precondition::Operation::Container,
                    ErrorCode::ContainerNotFound,
                ),
                |current| {
                    ask.gate(
                        precondition::Operation::Container,
                        Access::Read,
                        Some(current),
                    )?;
                    let mut record = current.clone();
                    record.public_access = level;
                    record.etag = etag.clone();
                    Ok(Step::changed(record, current, now))
                },
            )
            .await?;
        Ok(swapped.answered())
    }

    pub(super) async fn container_properties(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, now, .. } = call;
        let ask = call.ask()?;
        let current = self.container_record(key.container()).await?;
        ask.lease(Scope::Container, Access::Read, Some(&current))?;
        let mut out = validator_headers(&current);
        current.lease.insert_headers(now, &mut out);
        if let Some(level) = current.public_access {
            out.insert(PUBLIC_ACCESS, HeaderValue::from_static(level.as_str()));
        }
        let (policy, hold) = current.container_protection();
        let flag = |yes: bool| HeaderValue::from_static(if yes { "true" } else { "false" });
        out.insert("x-ms-has-immutability-policy", flag(policy));
        out.insert("x-ms-has-legal-hold", flag(hold));
        metadata::insert_metadata(&current.metadata, &mut out);
        Ok(answer(StatusCode::OK, out))
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
