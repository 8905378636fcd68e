//! Snapshot Blob, and Delete Blob where snapshots are concerned: a blob is deleted only with
//! its snapshots or after them, and a snapshot alone by its id ([`crate::snapshot`]).
//!
//! A snapshot is made and a blob deleted so that no snapshot outlives its blob, on every
//! backend, without a transaction across records: Snapshot Blob writes the snapshot's record,
//! then bumps the blob's generation with a compare-and-swap against the generation it copied
//! (and removes the snapshot if that fails); Delete Blob reads the blob, then looks for
//! snapshots, then deletes it only if its generation is still the one it read. Whichever of
//! the two lands second sees the other: a delete that looked before the snapshot was written
//! fails its swap on the bump (and looks again), or comes first and fails the bump.
//!
//! The bump is the snapshot's commit point: its change feed event (`BlobSnapshotCreated`)
//! rides on it, in the blob's record, so that a snapshot taken back (its bump lost a race, to
//! a write or to the feed's publisher) and made again is published once.

use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};
use ifmatch_azure::Env;
use ifmatch_azure::swap::Attempts;

use super::answers::{answer, validator_headers};
use super::call::Call;
use super::failure::Answered;
use super::failure::Failure;
use super::pages::BlobPages;
use super::state::Front;
use super::swap::Step;
use crate::error_code::ErrorCode;
use crate::lease::Access;
use crate::metadata;
use crate::precondition;
use crate::record::Record;
use crate::record_name;
use crate::snapshot::{self, Deleting};
use crate::store::{Key, Objects, PutMode, Records};

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Snapshot Blob: the blob as it is now, kept under a new snapshot id (`x-ms-snapshot`),
    /// with the request's metadata if it gives any (else the blob's); 201.
    pub(super) async fn snapshot_blob(&self, call: Call<'_>) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let Key::Blob(container, blob) = key else {
            unreachable!("a snapshot is of a blob")
        };
        let ask = call.ask()?;
        let new_metadata = metadata::metadata(headers)?;
        let mut at = now;
        let mut attempts = Attempts::default();
        while attempts.another() {
            let current =
                (self.existing_blob(key, precondition::Operation::Write, headers)).await?;
            ask.gate(precondition::Operation::Write, Access::Read, Some(&current))?;
            let id = record_name::id(at);
            let snapshot_key = Key::Blob(container.clone(), record_name::snapshot(blob, &id));
            let Some(duplicate) = self.duplicate(key, &current, &snapshot_key, false).await? else {
                continue;
            };
            let mut record = Record::blob(current.etag.clone(), now, duplicate.content);
            record.last_modified = current.last_modified;
            record.metadata = current.metadata.clone();
            record.tags = current.tags.clone();
            record.copy = current.copy.clone();
            record.generation = self.fresh_generation();
            let bytes_tag = duplicate.bytes_tag;
            let content = record.content.as_mut().expect("a blob's");
            if !new_metadata.is_empty() {
                record.metadata = new_metadata.clone();
                record.etag = content.blob_tag(&bytes_tag, &record.metadata);
            }
            // An append blob's chain value is kept whatever its tag: its set is read by it.
            content.sha256 = (record.etag != bytes_tag || content.chained()).then_some(bytes_tag);
            let append = content.append;
            // The blob as it was copied, still there: its generation bumped so that a delete
            // which read it before sees the snapshot (see the module's note). Its change made
            // before the snapshot's record is written: a failure here leaves no snapshot.
            let mut bumped = Record::clone(&current);
            bumped.generation = current.generation + 1;
            let change = self.snapshot_change((container, blob), (&id, &record), &mut bumped);
            if let Err(failure) = change.await {
                self.forget(&snapshot_key, duplicate.objects, append).await;
                return Err(failure);
            }
            let written = self
                .records
                .put(&snapshot_key, &record, PutMode::Create)
                .await;
            if let Err(e) = written {
                self.forget(&snapshot_key, duplicate.objects, append).await;
                match self.lost_race(&e) {
                    // Another snapshot of this tick: the next one.
                    true => at += std::time::Duration::from_nanos(100),
                    false => return Err(e.into()),
                }
                continue;
            }
            let bump = PutMode::Update(current.generation);
            match self.records.put(key, &bumped, bump).await {
                Ok(()) => {
                    let mut out = validator_headers(&record);
                    let id = HeaderValue::try_from(id).expect("an id is ASCII");
                    out.insert(snapshot::SNAPSHOT, id);
                    return Ok(answer(StatusCode::CREATED, out));
                }
                Err(e) => {
                    if let Err(failure) = self.remove_record(&snapshot_key, &record).await {
                        // Left for its blob's delete (`include`) or its own to remove.
                        tracing::warn!(key = %snapshot_key, ?failure, "a snapshot left behind");
                    }
                    if !self.lost_race(&e) {
                        return Err(e.into());
                    }
                }
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Delete Blob of a blob (not of a snapshot): the blob, its snapshots or both, as
    /// `x-ms-delete-snapshots` asks; 409 `SnapshotsPresent` for the blob alone while it has
    /// some. While the account keeps deleted blobs, the blob is kept as a deleted blob and its
    /// snapshots are marked deleted ([`crate::soft_delete`]); while it keeps versions, the blob
    /// is kept as a version ([`crate::version`]).
    pub(super) async fn delete_with_snapshots(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let Key::Blob(container, blob) = key else {
            unreachable!("snapshots are a blob's")
        };
        let deleting = Deleting::from_headers(headers)?;
        let ask = call.ask()?;
        let conditions = precondition::Operation::Write;
        let settings = self.settings(key).await?;
        // Deleted blobs are kept where versions are not (a version keeps them there).
        let retention = settings.retention_days.filter(|_| !settings.versioning);
        let mut attempts = Attempts::default();
        while attempts.another() {
            let current = (self.existing_blob(key, conditions, headers)).await?;
            ask.gate(conditions, Access::Write, Some(&current))?;
            // Its snapshots (not those deleted and kept), a page at a time.
            let prefix = record_name::snapshots_of(blob);
            let mut pages = BlobPages::under(container, &prefix);
            while let Some(page) = pages.next(&self.records).await? {
                let live =
                    (page.into_iter()).filter(|(_, r)| r.content.is_some() && r.deleted.is_none());
                for (name, record) in live {
                    if deleting == Deleting::Blob {
                        return Err(Failure::with_detail(
                            ErrorCode::SnapshotsPresent,
                            "This operation is not permitted because the blob has snapshots: \
                             x-ms-delete-snapshots: include deletes them with it.",
                        ));
                    }
                    let key = Key::Blob(container.clone(), name);
                    match retention {
                        Some(days) => self.mark_deleted(&key, &record, days).await?,
                        None => self.remove_record(&key, &record).await?,
                    }
                }
            }
            if deleting == Deleting::Only {
                return Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()));
            }
            // A version of it, where versions are kept (the rule every change's swap follows).
            let mut step = Step::Delete(current.generation);
            if !self.version_step(key, Some(&current), &mut step).await? {
                // Changed while it was kept as a version: look again.
                continue;
            }
            let kept = match retention {
                Some(days) => match self.keep_deleted(key, &current, days).await? {
                    Some(kept) => Some(kept),
                    // Changed while it was kept: look again.
                    None => continue,
                },
                None => None,
            };
            match self.remove_holding(key, &current).await? {
                Ok(()) => {
                    self.discard_replaced(key, Some(&current), None).await;
                    return Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()));
                }
                Err(e) => {
                    // Not deleted: the blob is not a deleted one.
                    if let Some(kept) = kept
                        && let Some(record) = self.records.get(&kept).await?
                    {
                        self.remove_record(&kept, &record).await?;
                    }
                    // Changed, or snapshotted, since it was read: look again.
                    if !self.lost_race(&e) {
                        return Err(e.into());
                    }
                }
            }
        }
        Err(ErrorCode::ServerBusy.into())
    }

    /// Delete Blob of one snapshot or version: removed, or, while the account keeps deleted
    /// blobs, marked deleted for its days (Undelete Blob brings it back).
    pub(super) async fn delete_snapshot_or_version(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        if headers.contains_key(crate::snapshot::DELETE_SNAPSHOTS) {
            return Err(Failure::with_detail(
                ErrorCode::InvalidHeaderValue,
                "x-ms-delete-snapshots is for a blob, not a snapshot.",
            ));
        }
        let settings = self.settings(key).await?;
        let Some(days) = settings.retention_days else {
            return self.delete_blob(call).await;
        };
        let ask = call.ask()?;
        let conditions = precondition::Operation::Write;
        let current = (self.existing_blob(key, conditions, headers)).await?;
        ask.gate(conditions, Access::Write, Some(&current))?;
        self.mark_deleted(key, &current, days).await?;
        Ok(answer(StatusCode::ACCEPTED, HeaderMap::new()))
    }
}
