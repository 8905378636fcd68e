//! Container soft delete: while an account keeps deleted containers
//! (`<ContainerDeleteRetentionPolicy>`, [`crate::settings`]), Delete Container moves the
//! container and its blobs (snapshots, versions and deleted blobs among them) under a name of
//! their own ([`crate::soft_delete::deleted_container`]), where List Containers shows them with
//! `include=deleted`, Restore Container brings them back, and the sweep removes them once their
//! days are over.
//!
//! A move is one record at a time (a delete already costs one removal per blob): the container
//! kept first, marked `moving`, then each blob's record copied, naming the same objects (an
//! append blob's blocks staged again under the new name), then the container removed as
//! without soft delete. What the removal returns says which copies hold: a copy of a record
//! the removal took unchanged owns its objects from then on; a blob written while the move ran
//! (its record not the one copied) is not kept, and its copy, whose objects the write may have
//! discarded, is dropped, so no kept record ever names bytes that are gone. Restore Container
//! moves them back the same way. A move cut short by a crash leaves its kept container
//! `moving`: never listed, and removed by the sweep without discarding a thing (its objects may
//! be the live container's; those that are not go to the orphan sweep).

use std::collections::HashSet;

use http::StatusCode;
use http::header::HeaderName;

use super::answers::{answer, validator_headers};
use super::call::Call;
use super::failure::Answered;
use super::failure::{Failure, Result};
use super::pages::BlobPages;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::Lease;
use crate::record::Record;
use crate::soft_delete::{container_version, deleted_container, kept};
use crate::store::{Key, Objects, PutMode, Records, StoreError};
use ifmatch_azure::Env;

const DELETED_NAME: HeaderName = HeaderName::from_static("x-ms-deleted-container-name");
const DELETED_VERSION: HeaderName = HeaderName::from_static("x-ms-deleted-container-version");

/// How long a move may run before the sweep takes a kept container still `moving` for one a
/// crash cut short.
const MOVE_TIMEOUT: u64 = 3600;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Delete Container where deleted containers are kept `days`: the container `key` (its
    /// record `current`, as checked) moved under its deleted name. The records the removal
    /// took whose objects no kept record names, for the caller to discard; `None` when the
    /// container changed meanwhile (the caller reads it again).
    pub(super) async fn keep_container(
        &self,
        key: &Key,
        current: &Record,
        days: u32,
    ) -> Result<Option<Vec<Record>>> {
        let now = self.env.now();
        let stored = key.container();
        let kept_key = Key::Container(deleted_container(stored, &container_version(now)));
        let mut marked = current.clone();
        marked.deleted = Some(crate::record::Deleted {
            moving: true,
            ..kept(now, days)
        });
        marked.lease = Lease::default();
        let marked = marked.with_generation(self.fresh_generation());
        self.records
            .put(&kept_key, &marked, PutMode::Create)
            .await?;
        let copied = match self.copy_blobs(stored, kept_key.container()).await {
            Ok(copied) => copied,
            Err(e) => {
                self.drop_kept(&kept_key, |_| false).await;
                return Err(e);
            }
        };
        let removed = match self.records.delete(key, current.generation).await {
            Ok(removed) => removed,
            Err(e) => {
                self.drop_kept(&kept_key, |_| false).await;
                return match self.lost_race(&e) {
                    true => Ok(None),
                    false => Err(e.into()),
                };
            }
        };
        let taken: HashSet<u64> = removed.iter().map(|r| r.generation).collect();
        let (owned, stale): (Vec<_>, Vec<_>) = copied
            .into_iter()
            .partition(|(_, generation)| taken.contains(generation));
        for (name, _) in stale {
            let key = Key::Blob(kept_key.container().to_owned(), name);
            self.forget_copy(&key).await;
        }
        let owned: HashSet<u64> = owned.into_iter().map(|(_, g)| g).collect();
        self.settle(&kept_key, &marked).await?;
        Ok(Some(
            removed
                .into_iter()
                .filter(|r| !owned.contains(&r.generation))
                .collect(),
        ))
    }

    /// Restore Container: the deleted container `x-ms-deleted-container-name` of version
    /// `x-ms-deleted-container-version` back under its name (the request's container), with
    /// its blobs; 409 `ContainerAlreadyExists` while a container has that name.
    pub(super) async fn restore_container(&self, call: Call<'_>) -> Answered<O> {
        let Call {
            key, headers, now, ..
        } = call;
        let header = |name: &HeaderName| -> Result<String> {
            let value = headers.get(name).and_then(|v| v.to_str().ok());
            value.map(str::to_owned).ok_or_else(|| {
                Failure::with_detail(
                    ErrorCode::MissingRequiredHeader,
                    format!("An HTTP header that's mandatory for this request is not specified. Header: {name}"),
                )
            })
        };
        let (name, version) = (header(&DELETED_NAME)?, header(&DELETED_VERSION)?);
        let stored = key.container();
        let own = stored.rsplit('~').next().unwrap_or(stored);
        if name != own {
            return Err(Failure::with_detail(
                ErrorCode::InvalidHeaderValue,
                "A deleted container is restored under its own name. Header: x-ms-deleted-container-name",
            ));
        }
        let kept_key = Key::Container(deleted_container(stored, &version));
        let kept = self.records.get(&kept_key).await?;
        let Some(kept) = kept.filter(|k| k.deleted.is_some_and(|d| !d.moving)) else {
            return Err(ErrorCode::ContainerNotFound.into());
        };
        // Marked moving first: from here its records may name the restored blobs' objects.
        let mut marked = Record::clone(&kept);
        marked.deleted = (marked.deleted).map(|d| crate::record::Deleted { moving: true, ..d });
        let marked = marked.with_generation(kept.generation + 1);
        match self
            .records
            .put(&kept_key, &marked, PutMode::Update(kept.generation))
            .await
        {
            Err(e) if self.lost_race(&e) => return Err(ErrorCode::ContainerNotFound.into()),
            result => result?,
        }
        let mut restored = Record::clone(&kept);
        restored.deleted = None;
        restored.last_modified = crate::record::unix_seconds(now);
        let restored = restored.with_generation(self.fresh_generation());
        match self.records.put(key, &restored, PutMode::Create).await {
            Ok(()) => {}
            Err(e) => {
                // Not moved: it stays as it was.
                let back = Record::clone(&kept).with_generation(marked.generation + 1);
                let undo = PutMode::Update(marked.generation);
                if let Err(error) = self.records.put(&kept_key, &back, undo).await {
                    tracing::warn!(?kept_key, %error, "could not unmark a deleted container");
                }
                return Err(match e {
                    StoreError::AlreadyExists { .. } => ErrorCode::ContainerAlreadyExists.into(),
                    e => e.into(),
                });
            }
        }
        let copied = self.copy_blobs(kept_key.container(), stored).await?;
        // Those not moved (a blob of the name written since) own their objects still.
        let moved: HashSet<u64> = copied.into_iter().map(|(_, g)| g).collect();
        (self.drop_kept(&kept_key, |r| !moved.contains(&r.generation))).await;
        Ok(answer(StatusCode::CREATED, validator_headers(&restored)))
    }

    /// Copies the blob records of the stored container `from` into `to` (records with content:
    /// blobs, snapshots, versions, deleted blobs), naming the same objects; an append blob's
    /// blocks are staged again under its new key. A name `to` holds already keeps its record.
    /// The name and generation of each record copied.
    async fn copy_blobs(&self, from: &str, to: &str) -> Result<Vec<(String, u64)>> {
        let mut copied = Vec::new();
        let mut pages = BlobPages::new(from);
        while let Some(page) = pages.next(&self.records).await? {
            for (name, record) in page {
                let Some(content) = &record.content else {
                    continue; // Only uncommitted blocks: not kept.
                };
                let (source, target) = (
                    Key::Blob(from.to_owned(), name.clone()),
                    Key::Blob(to.to_owned(), name.clone()),
                );
                if let Some(appended) = content.append.filter(|a| a.count > 0) {
                    let blocks = match self.with_blocks(&source, content).await {
                        Ok(whole) => whole.blocks.clone(),
                        // Replaced meanwhile: the move will not keep it.
                        Err(StoreError::NotFound { .. }) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    self.restage(&target, appended.epoch, &blocks).await?;
                }
                let mut copy = record.clone();
                (copy.staging, copy.uncommitted) = (None, Vec::new());
                // Its changes the feed has not published go with the container's deletion.
                copy.feed = Vec::new();
                match self.records.put(&target, &copy, PutMode::Create).await {
                    Ok(()) => copied.push((name, record.generation)),
                    Err(StoreError::AlreadyExists { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(copied)
    }

    /// Removes a copy that does not hold (see [`Front::keep_container`]): its record and its
    /// append set, none of its objects.
    async fn forget_copy(&self, key: &Key) {
        let Ok(Some(record)) = self.records.get(key).await else {
            return;
        };
        if let Err(error) = self.records.delete(key, record.generation).await {
            tracing::warn!(?key, %error, "could not drop a deleted container's stale copy");
        }
        if let Some(appended) = record.content.as_ref().and_then(|c| c.append) {
            let _ = self.records.drop_staged(key, appended.epoch).await;
        }
    }

    /// The kept container `key`, its move over: no longer `moving`.
    async fn settle(&self, key: &Key, marked: &Record) -> Result<()> {
        let mut settled = marked.clone();
        settled.deleted = (settled.deleted).map(|d| crate::record::Deleted { moving: false, ..d });
        let settled = settled.with_generation(marked.generation + 1);
        let mode = PutMode::Update(marked.generation);
        Ok(self.records.put(key, &settled, mode).await?)
    }

    /// Removes the kept container `key` and its records, and discards the objects of those
    /// `discards` says own theirs.
    async fn drop_kept(&self, key: &Key, discards: impl Fn(&Record) -> bool) {
        let Ok(Some(current)) = self.records.get(key).await else {
            return;
        };
        match self.records.delete(key, current.generation).await {
            Ok(removed) => {
                for record in removed.iter().filter(|r| discards(r)) {
                    self.discard_unnamed(record.objects(), None).await;
                }
            }
            Err(error) => {
                tracing::warn!(?key, %error, "could not remove a deleted container");
            }
        }
    }

    /// The sweep's part: removes each kept container whose days are over, or whose move a
    /// crash cut short an hour ago.
    pub(super) async fn expire_containers(&self) -> std::result::Result<(), StoreError> {
        let now = crate::record::unix_seconds(self.env.now());
        for stored in self.records.containers().await? {
            let own = stored.rsplit('~').next().unwrap_or(&stored);
            if crate::soft_delete::parse_deleted_container(own).is_none() {
                continue;
            }
            let key = Key::Container(stored.clone());
            let Some(record) = self.records.get(&key).await? else {
                continue;
            };
            let Some(deleted) = record.deleted else {
                continue;
            };
            let over = match deleted.moving {
                false => deleted.until <= now,
                true => record.last_modified.max(deleted.at) + MOVE_TIMEOUT <= now,
            };
            if over {
                // A move cut short: its records may name the live container's objects.
                self.drop_kept(&key, |_| !deleted.moving).await;
            }
        }
        Ok(())
    }
}
