//! Soft delete ([`crate::soft_delete`]): keeping a deleted blob, marking a deleted snapshot,
//! Undelete Blob, and the removal of those whose days are over.

use http::StatusCode;
use http::header::HeaderMap;
use ifmatch_azure::Env;

use super::answers::answer;
use super::call::Call;
use super::failure::Answered;
use super::failure::Result;
use super::gate::committed;
use super::pages::BlobPages;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::record::Record;
use crate::record_name;
use crate::soft_delete::kept;
use crate::store::{Key, Objects, PutMode, Records, StoreError};

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Keeps `current`, the blob under `key` about to be deleted, as a deleted blob for `days`:
    /// a record of its own, its bytes shared as a copy's are. The kept record's key, for the
    /// caller to remove if its delete does not land; `None` when the blob changed while it was
    /// copied.
    pub(super) async fn keep_deleted(
        &self,
        key: &Key,
        current: &Record,
        days: u32,
    ) -> Result<Option<Key>> {
        let Key::Blob(container, blob) = key else {
            unreachable!("a deleted blob is a blob")
        };
        let now = self.env.now();
        let mut at = now;
        loop {
            let id = record_name::id(at);
            let kept_key = Key::Blob(container.clone(), record_name::deleted(blob, &id));
            let Some(duplicate) = self.duplicate(key, current, &kept_key, false).await? else {
                return Ok(None);
            };
            let mut record = self.kept_copy(current, duplicate.content);
            record.deleted = Some(kept(now, days));
            let append = record.content.as_ref().and_then(|c| c.append);
            match self.records.put(&kept_key, &record, PutMode::Create).await {
                Ok(()) => return Ok(Some(kept_key)),
                Err(e) => {
                    self.forget(&kept_key, duplicate.objects, append).await;
                    match e {
                        // Another deletion of this name in the same tick: the next tick.
                        StoreError::AlreadyExists { .. } => {
                            at += std::time::Duration::from_nanos(100);
                        }
                        e => return Err(e.into()),
                    }
                }
            }
        }
    }

    /// Marks the snapshot's or version's record under `key` (as read: `record`) deleted, kept
    /// `days`. One
    /// changed or removed meanwhile is left as it is.
    pub(super) async fn mark_deleted(&self, key: &Key, record: &Record, days: u32) -> Result<()> {
        let mut marked = Record::clone(record);
        marked.deleted = Some(kept(self.env.now(), days));
        marked.generation = record.generation + 1;
        let mode = PutMode::Update(record.generation);
        match self.records.put(key, &marked, mode).await {
            Ok(()) => Ok(()),
            Err(e) if self.lost_race(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Undelete Blob: the blob's deleted snapshots and versions back, and, if no blob has its
    /// name now, its latest deleted self; 200. 404 `BlobNotFound` when there is neither a blob nor a deleted
    /// one to bring back.
    pub(super) async fn undelete(&self, call: Call<'_>) -> Answered<O> {
        let Call { key, headers, .. } = call;
        let Key::Blob(container, blob) = key else {
            unreachable!("undeleted is a blob")
        };
        self.container_record(container).await?;
        let now = crate::record::unix_seconds(self.env.now());
        let alive = |r: &Record| r.deleted.is_some_and(|d| d.until > now);
        for prefix in [
            record_name::snapshots_of(blob),
            record_name::versions_of(blob),
        ] {
            let mut pages = BlobPages::under(container, &prefix);
            while let Some(page) = pages.next(&self.records).await? {
                for (name, record) in page.into_iter().filter(|(_, r)| alive(r)) {
                    let mut back = record.clone();
                    back.deleted = None;
                    back.generation = record.generation + 1;
                    let key = Key::Blob(container.clone(), name);
                    let put = self
                        .records
                        .put(&key, &back, PutMode::Update(record.generation));
                    match put.await {
                        Ok(()) => {}
                        Err(e) if self.lost_race(&e) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        if committed(self.records.get(key).await?).is_some() {
            return Ok(answer(StatusCode::OK, HeaderMap::new()));
        }
        // The latest deleted self still kept: the last in name order (its id is its instant).
        let prefix = record_name::deleted_of(blob);
        let (mut pages, mut latest) = (BlobPages::under(container, &prefix), None);
        while let Some(page) = pages.next(&self.records).await? {
            latest = page.into_iter().rev().find(|(_, r)| alive(r)).or(latest);
        }
        let Some((name, record)) = latest else {
            return Err(self
                .blob_missing(key, crate::precondition::Operation::Read, headers)
                .await);
        };
        let kept_key = Key::Blob(container.clone(), name);
        let Some(duplicate) = self.duplicate(&kept_key, &record, key, false).await? else {
            // Removed meanwhile (its days over, or brought back by another).
            return Err(ErrorCode::BlobNotFound.into());
        };
        let mut back = record.clone();
        back.content = Some(duplicate.content);
        back.deleted = None;
        back.generation = self.fresh_generation();
        // Over the record its deletion left for the change feed (no content, no blocks), which
        // keeps its changes; a blob written meanwhile stays (a Create finds it).
        let mut mode = PutMode::Create;
        if let Some(left) = self.records.get(key).await?
            && left.content.is_none()
            && left.staging.is_none()
            && left.uncommitted.is_empty()
        {
            back.feed = left.feed.clone();
            back.generation = left.generation + 1;
            mode = PutMode::Update(left.generation);
        }
        let append = back.content.as_ref().and_then(|c| c.append);
        match self.records.put(key, &back, mode).await {
            Ok(()) => self.remove_record(&kept_key, &record).await?,
            Err(e) => {
                self.forget(key, duplicate.objects, append).await;
                // A blob of that name written meanwhile: it stays, the deleted one too.
                if !matches!(
                    e,
                    StoreError::AlreadyExists { .. } | StoreError::Conflict { .. }
                ) {
                    return Err(e.into());
                }
            }
        }
        Ok(answer(StatusCode::OK, HeaderMap::new()))
    }
}
