//! Get Blob Tags, Set Blob Tags and Find Blobs by Tags in a container: the blob's index tags
//! ([`crate::tags`]), kept in its record.
//! Setting them is a compare-and-swap of the record that changes neither its ETag nor its
//! Last-Modified, as in Azure; a read's lease rules apply to both (Azure's reference takes
//! `x-ms-lease-id` on them, and refuses it when it is not the blob's).

use http::StatusCode;
use http::header::HeaderMap;
use ifmatch_azure::Env;

use super::answers::{answer, xml_answer};
use super::call::Call;
use super::failure::Answered;
use super::failure::Failure;
use super::state::Front;
use super::swap::Step;
use crate::body::Incoming;
use crate::error_code::ErrorCode;
use crate::lease::{Access, Scope};
use crate::operation::FindOptions;
use crate::precondition;
use crate::store::{Key, Objects, Records, Scan, StoreError};
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
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let current = (self.existing_blob(key, precondition::Operation::Read, headers)).await?;
        ask.lease(Scope::Blob, Access::Read, Some(&current))?;
        tags::gate(headers, Some(&current.tags))?;
        Ok(xml_answer(HeaderMap::new(), tags::xml(&current.tags)))
    }

    /// Set Blob Tags: the body's tags replace the blob's, 204.
    pub(super) async fn set_blob_tags(&self, call: Call<'_>, body: impl Incoming) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let ask = call.ask()?;
        let xml = crate::body::read_at_most(body, MAX_TAGS_BODY)
            .await
            .ok_or_else(|| Failure::too_large("A Set Blob Tags body is at most 16 KiB."))?;
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

    /// Find Blobs by Tags, in one container of `account` (`within`, its name to the client) or
    /// across all of them: the blobs whose tags meet the `where` expression, by container then
    /// name, with the tags it names.
    pub(super) async fn find_blobs(
        &self,
        account: &ifmatch_azure::Account,
        within: Option<&str>,
        options: &FindOptions,
    ) -> Answered<O> {
        let condition = tags::Condition::parse_find(&options.expression)?;
        // The marker is where the last page stopped, `container/blob`, base64 (opaque to
        // clients, as Azure's): reading goes on just past it.
        let resume = match &options.marker {
            Some(marker) => {
                Some(decode_marker(marker).ok_or(ErrorCode::InvalidQueryParameterValue)?)
            }
            None => None,
        };
        let containers = match within.or(condition.container()) {
            Some(name) => {
                let stored = self.accounts.stored(account, name);
                match (within, self.records.get(&Key::Container(stored)).await?) {
                    (_, Some(_)) => vec![name.to_owned()],
                    (Some(_), None) => return Err(ErrorCode::ContainerNotFound.into()),
                    (None, None) => Vec::new(),
                }
            }
            None => {
                let mut names: Vec<String> = (self.records.containers().await?)
                    .into_iter()
                    .filter_map(|stored| self.accounts.name_in(account, &stored))
                    .filter(|name| !name.starts_with('$'))
                    .collect();
                names.sort();
                names
            }
        };
        // Where reading stopped, when it did before the last container's end: the container
        // and the least name to read next there.
        let (mut found, mut read, mut next) = (Vec::new(), 0, None);
        'containers: for name in containers {
            let mut from = match &resume {
                Some((container, _)) if name < *container => continue,
                Some((container, from)) if name == *container => from.clone(),
                _ => String::new(),
            };
            let stored = self.accounts.stored(account, &name);
            loop {
                if read == MAX_FIND_READ || found.len() == options.max_results {
                    next = Some((name, from));
                    break 'containers;
                }
                let limit = FIND_SCAN.min(MAX_FIND_READ - read);
                let scan = Scan {
                    container: &stored,
                    prefix: "",
                    from: &from,
                    limit,
                };
                let scanned = match self.records.list(scan).await {
                    Ok(scanned) => scanned,
                    // Deleted since the account's containers were listed: a search across
                    // them passes over it, as it would had it looked a moment later.
                    Err(StoreError::ContainerNotFound) if within.is_none() => break,
                    Err(error) => return Err(error.into()),
                };
                let ended = scanned.len() < limit;
                for (blob, record) in scanned {
                    read += 1;
                    from = format!("{blob}\0");
                    let mut seen = record.tags.clone();
                    seen.insert(tags::CONTAINER.to_owned(), name.clone());
                    let base = crate::record_name::split(&blob).1.is_none();
                    if record.content.is_some() && base && condition.holds(&seen) {
                        found.push((name.clone(), blob, record.tags));
                        if found.len() == options.max_results {
                            break;
                        }
                    }
                }
                if ended && found.len() < options.max_results {
                    break;
                }
            }
        }
        let next = next.map(|(container, from)| encode_marker(&container, &from));
        let keys = condition.keys();
        let mut xml =
            String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults>");
        xml.push_str(&format!(
            "<Where>{}</Where><Blobs>",
            ifmatch_azure::xml_escape(&options.expression)
        ));
        for (container, blob, blob_tags) in found {
            let named: tags::Tags = (blob_tags.into_iter())
                .filter(|(key, _)| keys.contains(&key.as_str()))
                .collect();
            let set = tags::element(&named);
            xml.push_str(&format!(
                "<Blob><Name>{}</Name><ContainerName>{container}</ContainerName>{set}</Blob>",
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

/// A find's `NextMarker`: the container it stopped in and the least name to read there next,
/// opaque.
fn encode_marker(container: &str, from: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{container}/{from}"))
}

/// The container and least name a marker names (a container name has no `/`).
fn decode_marker(marker: &str) -> Option<(String, String)> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(marker)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (container, blob) = text.split_once('/')?;
    Some((container.to_owned(), blob.to_owned()))
}
