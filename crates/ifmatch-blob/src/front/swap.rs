//! The compare-and-swap every change goes through: read the record, decide, write only if
//! nobody changed it meanwhile, start over if somebody did.

use super::state::Front;
use crate::error_code::ErrorCode;
use crate::lease::Access;
use crate::precondition;
use http::header::HeaderMap;

use super::failure::{Failure, Result};
use super::gate::{Asking, committed, existing};
use crate::record::Record;
use crate::store::{Key, Objects, PutMode, Records, StoreError};
use ifmatch_azure::Env;
use ifmatch_azure::swap::{ATTEMPTS, Attempts};

/// What one attempt of a change decided from the record it found.
pub(super) enum Step {
    /// Write this record, as the mode allows.
    Put(Box<Record>, PutMode),
    /// Remove the record, if it still has this generation.
    Delete(u64),
    /// There is no record: answer as [`Front::missing`] does for this operation.
    Missing(precondition::Operation, ErrorCode),
    /// Nothing to change.
    Keep,
}

impl Step {
    /// `record` in place of `current`, if `current` is still there as read: the next
    /// generation.
    pub(super) fn update(mut record: Record, current: &Record) -> Self {
        record.generation = current.generation + 1;
        Self::Put(Box::new(record), PutMode::Update(current.generation))
    }

    /// [`Step::update`] of a change a client sees: modified `now`.
    pub(super) fn changed(
        mut record: Record,
        current: &Record,
        now: std::time::SystemTime,
    ) -> Self {
        record.last_modified = crate::record::unix_seconds(now);
        Self::update(record, current)
    }
}

impl Swapped {
    /// The 200 of a change: the validators of the record it wrote.
    pub(super) fn answered<R>(self) -> super::answers::Answer<R> {
        let written = self.written.expect("a change writes");
        super::answers::answer(
            http::StatusCode::OK,
            super::answers::validator_headers(&written),
        )
    }
}

/// A change that landed: the record it found, and what it did.
pub(super) struct Swapped {
    pub(super) previous: Option<std::sync::Arc<Record>>,
    pub(super) written: Option<Record>,
    pub(super) deleted: bool,
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// One change of the record under `key`, as a compare-and-swap: read the record, let
    /// `decide` check the lease and the conditions against it and say what to write, write it
    /// only if nobody changed the record meanwhile, and start over if somebody did. Every
    /// change of the front goes through here, so the checks and the write are one atomic step
    /// on every backend.
    /// [`Front::swap`] of a record that must exist (a blob with committed content, a
    /// container): `decide` sees it; without it, the answer is `missing` (the conditions'
    /// operation and the error code), as [`Front::missing`] gives it.
    pub(super) async fn swap_existing(
        &self,
        key: &Key,
        headers: &HeaderMap,
        missing: (precondition::Operation, ErrorCode),
        mut decide: impl FnMut(&Record) -> Result<Step>,
    ) -> Result<Swapped> {
        self.swap(key, headers, |current| match existing(key, current) {
            Some(current) => decide(current),
            None => Ok(Step::Missing(missing.0, missing.1)),
        })
        .await
    }

    /// Deletes the record under `key`, which must exist (else `missing`), through the gate
    /// with `conditions` and write access.
    pub(super) async fn delete_existing(
        &self,
        key: &Key,
        ask: Asking<'_>,
        conditions: precondition::Operation,
        missing: ErrorCode,
    ) -> Result<Swapped> {
        self.swap_existing(key, ask.headers, (conditions, missing), |current| {
            ask.gate(conditions, Access::Write, Some(current))?;
            Ok(Step::Delete(current.generation))
        })
        .await
    }

    /// A write's checks before its body is read (they run again when its record is written):
    /// its container there, and `ask`'s lease and conditions met by the blob at `key` now.
    pub(super) async fn may_put(&self, key: &Key, ask: Asking<'_>) -> Result<()> {
        let current = committed(self.records.get(key).await?);
        if current.is_none() {
            self.container_record(key.container()).await?;
        }
        let conditions = precondition::Operation::Put;
        ask.gate(conditions, Access::Write, current.as_deref())?;
        Ok(())
    }

    /// The record of the container `name`: 404 `ContainerNotFound` when there is none.
    pub(super) async fn container_record(&self, name: &str) -> Result<std::sync::Arc<Record>> {
        let key = Key::Container(name.to_owned());
        Ok(self
            .records
            .get(&key)
            .await?
            .ok_or(ErrorCode::ContainerNotFound)?)
    }

    pub(super) async fn swap(
        &self,
        key: &Key,
        headers: &HeaderMap,
        mut decide: impl FnMut(Option<&Record>) -> Result<Step>,
    ) -> Result<Swapped> {
        let mut attempts = Attempts::default();
        while attempts.another() {
            let previous = self.records.get(key).await?;
            let mut step = decide(previous.as_deref())?;
            if !self
                .version_step(key, previous.as_deref(), &mut step)
                .await?
            {
                // Changed while it was kept as a version: read what it is now.
                continue;
            }
            let emptied = self.feed_step(key, previous.as_deref(), &mut step).await?;
            let (written, result) = match step {
                Step::Missing(operation, code) => {
                    return Err(self.missing(key, operation, headers, code).await);
                }
                Step::Keep => {
                    return Ok(Swapped {
                        previous,
                        written: None,
                        deleted: false,
                    });
                }
                Step::Put(record, mode) => {
                    let result = self.records.put(key, &record, mode).await;
                    (Some(*record), result)
                }
                Step::Delete(generation) => {
                    let result = self.records.delete(key, generation).await;
                    (None, result.map(|_| ()))
                }
            };
            match result {
                Ok(()) => {
                    // A deletion that keeps its change in an emptied record is a deletion.
                    let written = written.filter(|_| !emptied);
                    return Ok(Swapped {
                        previous,
                        deleted: written.is_none(),
                        written,
                    });
                }
                Err(e) if self.lost_race(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(Failure::with_detail(
            ErrorCode::ServerBusy,
            format!("The change lost {ATTEMPTS} races with concurrent changes. Retry later."),
        ))
    }

    /// What a change of a blob owes its history while its account keeps versions
    /// ([`crate::version`]): a change of its ETag or its deletion keeps the blob as it was as a
    /// version, and a blob written gets the next version id. An append (the same append set)
    /// and a page write (the same page blob, its metadata unchanged) keep no version, nor does a change of a snapshot's or a version's record. `false` when
    /// the blob changed while it was kept: the caller reads it again.
    pub(super) async fn version_step(
        &self,
        key: &Key,
        previous: Option<&Record>,
        step: &mut Step,
    ) -> Result<bool> {
        let Key::Blob(_, name) = key else {
            return Ok(true);
        };
        let previous = previous.filter(|p| p.content.is_some());
        // An append blob's set, or a page blob's life: a change of its bytes within it keeps no
        // version (Set Blob Metadata does, as on any blob).
        let append_set = |r: &Record| {
            let content = r.content.as_ref()?;
            (content.append.map(|a| a.epoch)).or(content.pages.as_ref().map(|p| p.epoch))
        };
        let changes = match step {
            Step::Put(record, _) => {
                record.content.is_some()
                    && previous.is_none_or(|p| {
                        p.etag != record.etag
                            && (append_set(p).is_none()
                                || append_set(p) != append_set(record)
                                || p.metadata != record.metadata)
                    })
            }
            Step::Delete(_) => previous.is_some(),
            Step::Missing(..) | Step::Keep => false,
        };
        let own = crate::record_name::split(name).1.is_none();
        if !changes || !own || !self.settings(key).await?.versioning {
            return Ok(true);
        }
        if let Step::Put(record, _) = step {
            let before = previous.and_then(|p| p.version.as_deref());
            record.version = Some(crate::version::next_id(self.env.now(), before));
        }
        match previous {
            // Boxed: every commit awaits this step, few keep versions.
            Some(previous) => Box::pin(self.keep_version(key, previous)).await,
            None => Ok(true),
        }
    }

    /// Removes the blob record under `key` as it was read (`record`: a snapshot, a version, a
    /// deleted blob, or one written and not needed) and what it names. One changed or removed
    /// meanwhile by another is left to it: not an error.
    pub(super) async fn remove_record(&self, key: &Key, record: &Record) -> Result<()> {
        match self.remove_holding(key, record).await? {
            Ok(()) => {
                self.discard_replaced(key, Some(record), None).await;
                Ok(())
            }
            Err(e) if self.lost_race(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a write failed because somebody changed (or removed) the record since it was
    /// read: counted, for the caller to read it again.
    pub(super) fn lost_race(&self, error: &StoreError) -> bool {
        let lost = matches!(
            error,
            StoreError::Conflict { .. }
                | StoreError::AlreadyExists { .. }
                | StoreError::NotFound { .. }
        );
        if lost {
            self.retries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        lost
    }

    /// The blob under `key`, which must exist (committed content); else the error
    /// [`Front::blob_missing`] gives for `operation`.
    pub(super) async fn existing_blob(
        &self,
        key: &Key,
        operation: precondition::Operation,
        headers: &HeaderMap,
    ) -> Result<std::sync::Arc<Record>> {
        match super::gate::committed(self.records.get(key).await?) {
            Some(current) => Ok(current),
            // Boxed: every read of a blob holds this future, which the missing blob's answer
            // (its container read too) would make several times larger.
            None => Err(Box::pin(self.blob_missing(key, operation, headers)).await),
        }
    }

    /// The error for an `operation` on a blob that is not there: [`Front::missing`] with
    /// `BlobNotFound`.
    pub(super) async fn blob_missing(
        &self,
        key: &Key,
        operation: precondition::Operation,
        headers: &HeaderMap,
    ) -> Failure {
        (self.missing(key, operation, headers, ErrorCode::BlobNotFound)).await
    }

    /// The error for a record that does not exist: for a change, a failed `If-Match` first
    /// (412); then a missing container, then `missing`.
    pub(super) async fn missing(
        &self,
        key: &Key,
        operation: precondition::Operation,
        headers: &HeaderMap,
        missing: ErrorCode,
    ) -> Failure {
        // A read of a missing blob is 404 whatever its conditions, as live Azure answers
        // (RFC 9110 13.2.1: without them the answer would not be a 2xx either).
        if operation != precondition::Operation::Read
            && let Err(code) = precondition::evaluate(operation, headers, None)
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

    /// Waits for this instance's turn to commit a write of `key`: one at a time per key, so
    /// that a write which lost its race while its body arrived learns it (from the record
    /// the winner committed) before its object costs the fsyncs. The compare-and-swap still
    /// decides; this only saves the work of writes that would lose it.
    pub(super) async fn commit_turn(&self, key: &Key) -> futures_util::lock::MutexGuard<'_, ()> {
        self.commits.take(key).await
    }

    /// How `record` is written over `current`: as its next generation, if it is still there as
    /// read; else created, with a fresh one.
    pub(super) fn over(&self, record: &mut Record, current: Option<&Record>) -> PutMode {
        match current {
            Some(current) => {
                record.generation = current.generation + 1;
                PutMode::Update(current.generation)
            }
            None => {
                record.generation = self.fresh_generation();
                PutMode::Create
            }
        }
    }

    /// A random first generation, so that a record deleted and created again never repeats a
    /// generation a slow writer may still hold (no ABA).
    pub(super) fn fresh_generation(&self) -> u64 {
        self.env.random_uuid().as_u64_pair().0 >> 1
    }
}
