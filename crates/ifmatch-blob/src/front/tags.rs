//! Get Blob Tags, Set Blob Tags and Find Blobs by Tags in a container: the blob's index tags
//! ([`crate::tags`]), kept in its record.
//! Setting them is a compare-and-swap of the record that changes neither its ETag nor its
//! Last-Modified, as in Azure; a read's lease rules apply to both (Azure's reference takes
//! `x-ms-lease-id` on them, and refuses it when it is not the blob's).

use http::StatusCode;
use http::header::HeaderMap;
use http_body_util::BodyExt;
use ifmatch_azure::{Env, ErrorCode};

use super::answers::{answer, xml_answer};
use super::failure::Failure;
use super::gate::Asking;
use super::swap::Step;
use super::{Answered, Call, Front};
use crate::body::Incoming;
use crate::lease::{Access, Scope};
use crate::operation::FindOptions;
use crate::precondition;
use crate::store::{Objects, Records, Scan};
use crate::tags;

/// The most blob records one Find Blobs by Tags reads, in scans of `FIND_SCAN`: a page of a
/// container where few blobs match costs this much at most, and says where it stopped
/// (`NextMarker`), as Azure's may return fewer than asked with a marker. Tags are kept in the
/// blobs' records, not in an index of their own: a find reads them where they are, so it names
/// a blob only for the tags it had when read, under any concurrent writes, on every backend.
const MAX_FIND_READ: usize = 5000;
const FIND_SCAN: usize = 500;

/// The largest Set Blob Tags body read: ten tags of the longest key and value, in their XML,
/// are under 5 KiB.
const MAX_TAGS_BODY: usize = 16 << 10;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Get Blob Tags.
    pub(super) async fn blob_tags(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, now } = call;
        let ask = Asking::of(headers, now)?;
        let current = (self.existing_blob(key, precondition::Operation::Read, headers)).await?;
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

    /// Find Blobs by Tags in a container: the blobs of `stored` (named `name` to the client)
    /// whose tags meet the `where` expression, in name order, with the tags it names.
    pub(super) async fn find_blobs(
        &self,
        stored: &str,
        name: &str,
        options: &FindOptions,
    ) -> Answered<O> {
        let condition = tags::Condition::parse_find(&options.expression)?;
        self.container_record(stored).await?;
        // The marker is the last name read, base64 (opaque to clients, as Azure's): reading
        // goes on just past it.
        let mut from = match &options.marker {
            Some(marker) => {
                use base64::Engine;
                let last = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(marker)
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or(ErrorCode::InvalidQueryParameterValue)?;
                format!("{last}\0")
            }
            None => String::new(),
        };
        let (mut found, mut read, mut more) = (Vec::new(), 0, true);
        let mut last = None;
        while more && read < MAX_FIND_READ && found.len() < options.max_results {
            let limit = FIND_SCAN.min(MAX_FIND_READ - read);
            let scan = Scan {
                container: stored,
                prefix: "",
                from: &from,
                limit,
            };
            let scanned = self.records.list(scan).await?;
            more = scanned.len() == limit;
            for (blob, record) in scanned {
                read += 1;
                last = Some(blob.clone());
                let mut seen = record.tags.clone();
                seen.insert(tags::CONTAINER.to_owned(), name.to_owned());
                if record.content.is_some() && condition.holds(&seen) {
                    found.push((blob, record.tags));
                    if found.len() == options.max_results {
                        break;
                    }
                }
            }
            if let Some(last) = &last {
                from = format!("{last}\0");
            }
        }
        let stopped = more || found.len() == options.max_results && last.is_some();
        let next = last.filter(|_| stopped).map(|last| {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last)
        });
        let keys = condition.keys();
        let mut xml =
            String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults>");
        xml.push_str(&format!(
            "<Where>{}</Where><Blobs>",
            ifmatch_azure::xml_escape(&options.expression)
        ));
        for (blob, blob_tags) in found {
            let named: tags::Tags = (blob_tags.into_iter())
                .filter(|(key, _)| keys.contains(&key.as_str()))
                .collect();
            let set = tags::element(&named);
            xml.push_str(&format!(
                "<Blob><Name>{}</Name><ContainerName>{name}</ContainerName>{set}</Blob>",
                ifmatch_azure::xml_escape(&blob),
            ));
        }
        xml.push_str("</Blobs>");
        match next {
            Some(next) => xml.push_str(&format!("<NextMarker>{next}</NextMarker>")),
            None => xml.push_str("<NextMarker />"),
        }
        xml.push_str("</EnumerationResults>");
        Ok(xml_answer(HeaderMap::new(), xml))
    }
}
