//! Get Blob Tags and Set Blob Tags: the blob's index tags ([`crate::tags`]), kept in its record.
//! Setting them is a compare-and-swap of the record that changes neither its ETag nor its
//! Last-Modified, as in Azure; a read's lease rules apply to both (Azure's reference takes
//! `x-ms-lease-id` on them, and refuses it when it is not the blob's).

use http::StatusCode;
use http::header::HeaderMap;
use http_body_util::BodyExt;
use ifmatch_azure::{Env, ErrorCode};

use super::answers::{answer, xml_answer};
use super::failure::Failure;
use super::gate::{Asking, committed};
use super::swap::Step;
use super::{Answered, Call, Front};
use crate::body::Incoming;
use crate::lease::{Access, Scope};
use crate::precondition;
use crate::store::{Objects, Records};
use crate::tags;

/// The largest Set Blob Tags body read: ten tags of the longest key and value, in their XML,
/// are under 5 KiB.
const MAX_TAGS_BODY: usize = 16 << 10;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Get Blob Tags.
    pub(super) async fn blob_tags(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, now } = call;
        let ask = Asking::of(headers, now)?;
        let Some(current) = committed(self.records.get(key).await?) else {
            return Err(self
                .blob_missing(key, precondition::Operation::Read, headers)
                .await);
        };
        ask.lease(Scope::Blob, Access::Read, Some(&current))?;
        tags::gate(headers, Some(&current.tags))?;
        Ok(xml_answer(HeaderMap::new(), tags::xml(&current.tags)))
    }

    /// Set Blob Tags: the body's tags replace the blob's, 204.
    pub(super) async fn set_blob_tags(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call { key, headers, now } = call;
        let ask = Asking::of(headers, now)?;
        let xml = http_body_util::Limited::new(body, MAX_TAGS_BODY)
            .collect()
            .await
            .map_err(|_| {
                Failure::with_detail(
                    ErrorCode::RequestBodyTooLarge,
                    "A Set Blob Tags body is at most 16 KiB.",
                )
            })?
            .to_bytes();
        let tags = tags::parse(&xml)?;
        let missing = (precondition::Operation::Read, ErrorCode::BlobNotFound);
        self.swap_existing(key, headers, missing, |current| {
            ask.lease(Scope::Blob, Access::Read, Some(current))?;
            tags::gate(headers, Some(&current.tags))?;
            let mut record = current.clone();
            record.tags = tags.clone();
            Ok(Step::update(record, current))
        })
        .await?;
        Ok(answer(StatusCode::NO_CONTENT, HeaderMap::new()))
    }
}
