//! Incremental Copy Blob (`PUT ?comp=incrementalcopy`): a snapshot of a page blob of this
//! server copied to a destination page blob, which then keeps a snapshot of its own per copy
//! (`x-ms-copy-destination-snapshot`) and takes no other write; each later copy must be of a
//! later snapshot of the same blob. A copy shares the source's objects as any copy here does
//! (no byte is read), so only what differs costs room, as Azure's promise is.

use http::header::HeaderMap;
use ifmatch_azure::Env;

use super::call::Call;
use super::copy::{Found, Requester};
use super::failure::Answered;
use super::failure::{Failure, Result};
use super::gate::committed;
use super::state::Front;
use super::swap::Step;
use crate::error_code::ErrorCode;
use crate::lease::Access;
use crate::page_blob::Incremental;
use crate::precondition;
use crate::record::Record;
use crate::record_name::{self, Qualifier};
use crate::store::{Key, Objects, Records};

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Incremental Copy Blob: `202` with the copy's id and status (`success`: it is finished
    /// before it answers), once the destination and its new snapshot are written.
    pub(super) async fn incremental_copy(
        &self,
        call: Call<'_>,
        from: Requester<'_>,
    ) -> Answered<O> {
        let (destination, now) = (call.key, call.now);
        let headers = &from.parts.headers;
        if !headers.contains_key(super::copy::COPY_SOURCE) {
            return Err(Failure::with_detail(
                ErrorCode::MissingRequiredHeader,
                "An HTTP header that's mandatory for this request is not specified. Header: x-ms-copy-source",
            ));
        }
        let ask = call.ask()?;
        let source = match self.source(&from, now).await? {
            Found::Here(source) => source,
            Found::Elsewhere(_) => {
                return Err(Failure::with_detail(
                    ErrorCode::CannotVerifyCopySource,
                    "An incremental copy reads a page blob of this server.",
                ));
            }
        };
        let Key::Blob(_, name) = &source.key else {
            unreachable!("a copy's source is a blob")
        };
        let (_, Some(Qualifier::Snapshot(snapshot))) = record_name::split(name) else {
            return Err(ErrorCode::IncrementalCopySourceMustBeSnapshot.into());
        };
        let snapshot = snapshot.to_owned();
        let base = (source.url.split_once("?snapshot=")).map_or(source.url.as_str(), |(b, _)| b);
        let record = self.source_record(&source, headers).await?;
        let content = record.content.as_ref().ok_or(ErrorCode::BlobNotFound)?;
        if content.pages.is_none() {
            return Err(ErrorCode::InvalidBlobType.into());
        }
        let current = committed(self.records.get(destination).await?);
        if current.is_none() {
            self.container_record(destination.container()).await?;
        }
        follows(current.as_deref(), base, &snapshot)?;
        ask.gate(
            precondition::Operation::Put,
            Access::Write,
            current.as_deref(),
        )?;
        let Some(duplicate) = (self.duplicate(&source.key, &record, destination, false)).await?
        else {
            return Err(ErrorCode::BlobNotFound.into());
        };
        let mut copied = duplicate.content;
        let incremental = Incremental {
            source: base.to_owned(),
            snapshot: snapshot.clone(),
            destination_snapshot: None,
        };
        (copied.pages.as_mut().expect("a page blob")).incremental = Some(incremental);
        let bytes_tag = duplicate.bytes_tag;
        let etag = copied.blob_tag(&bytes_tag, &record.metadata);
        copied.sha256 = Some(bytes_tag);
        let mut fresh = Record::blob(etag, now, copied);
        fresh.metadata = record.metadata.clone();
        let answered = self
            .commit_copy(destination, ask, fresh, &source.url, false, now)
            .await;
        if answered.as_ref().is_err_and(|f| !f.may_have_landed) {
            self.forget(destination, duplicate.objects, None).await;
        }
        let answered = answered?;
        // The destination's snapshot of this copy, named on it.
        let none = HeaderMap::new();
        let call = Call {
            headers: &none,
            ..call
        };
        let snapped = self.snapshot_blob(call).await?;
        let id = (snapped.headers().get(crate::snapshot::SNAPSHOT))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        self.swap_existing(destination, &none, missing, |current| {
            let mut record = current.clone();
            let pages = (record.content.as_mut()).and_then(|c| c.pages.as_mut());
            match pages.and_then(|p| p.incremental.as_mut()) {
                Some(incremental) if incremental.snapshot == snapshot => {
                    incremental.destination_snapshot = id.clone();
                    Ok(Step::update(record, current))
                }
                // Another copy landed since: it names its own.
                _ => Ok(Step::Keep),
            }
        })
        .await?;
        Ok(answered)
    }
}

/// Whether a copy of `snapshot` of the blob at `base` may land on `current`: none yet, or the
/// destination of copies of that blob, whose last was of an earlier snapshot.
fn follows(current: Option<&Record>, base: &str, snapshot: &str) -> Result<()> {
    let Some(current) = current else {
        return Ok(());
    };
    let pages = current.content.as_ref().and_then(|c| c.pages.as_ref());
    match pages.and_then(|p| p.incremental.as_ref()) {
        None => Err(ErrorCode::IncrementalCopyBlobMismatch.into()),
        Some(last) if last.source != base => Err(ErrorCode::IncrementalCopyBlobMismatch.into()),
        // Snapshot ids are instants in one fixed format: their order is their text's.
        Some(last) if snapshot <= last.snapshot.as_str() => {
            Err(ErrorCode::IncrementalCopyOfEarlierVersionSnapshotNotAllowed.into())
        }
        Some(_) => Ok(()),
    }
}
