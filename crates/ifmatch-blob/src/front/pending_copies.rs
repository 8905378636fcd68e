//! Copy Blob from another server, finished after its answer where the host runs copies in
//! the background ([`Front::with_background_copies`]; the native server does, every second):
//! the request writes the destination empty with its copy `pending` (`202`,
//! `x-ms-copy-status: pending`) after a job naming it, a record of the account's own
//! (`$copies`, beside its containers, as `$service` is); [`Front::run_copies`] reads the source
//! into a new object and swaps the destination for one naming it, `success`, if it is still
//! that copy's and pending (`failed`, with why, if the source could not be read); Abort Copy
//! Blob makes it `aborted`, empty. A job is removed once its copy ended; one an instance left
//! midway runs again on the next pass, of whichever instance: the destination's swap lands
//! once, and the object of a run that lost it is discarded. `x-ms-requires-sync: true` (Copy
//! Blob From URL) and Put Blob From URL stay synchronous.

use std::collections::BTreeMap;
use std::time::SystemTime;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{StatusCode, Uri};
use ifmatch_azure::Env;

use super::answers::{answer, validator_headers};
use super::failure::Answered;
use super::gate::Asking;
use super::pages::BlobPages;
use super::state::Front;
use super::swap::Step;
use super::uploads::Given;
use crate::error_code::ErrorCode;
use crate::precondition;
use crate::record::{Content, Copied, CopyStatus, Record};
use crate::store::{Key, Objects, PutMode, Records, StoreError};

use crate::copy_origin::COPY_JOBS as COPIES;

/// A copy to finish: its destination, its id, the source's URL (with its query: what reads
/// it), the source's conditions, and whether the destination keeps the metadata its request
/// gave. Kept as a record of its own, these in its metadata.
struct Job {
    container: String,
    blob: String,
    id: String,
    url: String,
    conditions: HeaderMap,
    own_metadata: bool,
}

impl Job {
    /// The key of the job of copy `id` to a blob of the stored container `container`.
    fn key(container: &str, id: &str) -> Key {
        Key::Blob(crate::settings::beside(container, COPIES), id.to_owned())
    }

    fn record(&self, now: SystemTime) -> Record {
        let mut fields = BTreeMap::from([
            ("container".to_owned(), self.container.clone()),
            ("blob".to_owned(), self.blob.clone()),
            ("id".to_owned(), self.id.clone()),
            ("url".to_owned(), self.url.clone()),
            ("own-metadata".to_owned(), self.own_metadata.to_string()),
        ]);
        for (name, value) in &self.conditions {
            if let Ok(value) = value.to_str() {
                fields.insert(name.as_str().to_owned(), value.to_owned());
            }
        }
        let mut record = Record::container(ifmatch_core::strong_etag(self.id.as_bytes()), now);
        record.metadata = fields;
        record
    }

    fn of(record: &Record) -> Option<Self> {
        let field = |name: &str| record.metadata.get(name).cloned();
        let mut conditions = HeaderMap::new();
        for name in precondition::SOURCE_CONDITIONS {
            if let Some(value) = field(name).and_then(|v| HeaderValue::try_from(v).ok()) {
                conditions.insert(HeaderName::from_static(name), value);
            }
        }
        Some(Self {
            container: field("container")?,
            blob: field("blob")?,
            id: field("id")?,
            url: field("url")?,
            conditions,
            own_metadata: field("own-metadata")? == "true",
        })
    }
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Lets Copy Blob from another server answer before it is copied, the host calling
    /// [`Front::run_copies`] to finish it.
    pub fn with_background_copies(mut self) -> Self {
        self.background_copies = true;
        self
    }

    /// Copy Blob from `url` (another server's) to `destination`, to finish in the background:
    /// its job written, then the destination (`pending`: empty, with what the request `given`
    /// gives it), through Put Blob's gate; `202` pending.
    pub(super) async fn start_copy(
        &self,
        destination: &Key,
        ask: Asking<'_>,
        given: &Given,
        url: &Uri,
        own_metadata: bool,
        now: SystemTime,
    ) -> Answered<O> {
        let etag = ifmatch_core::strong_etag(self.env.random_uuid().as_bytes());
        let mut fresh = Record::blob(etag, now, Content::new(String::new(), 0, None));
        given.apply(&mut fresh);
        let Key::Blob(container, blob) = destination else {
            unreachable!("a copy's destination is a blob")
        };
        let id = self.env.random_uuid().hyphenated().to_string();
        let mut conditions = HeaderMap::new();
        for name in precondition::SOURCE_CONDITIONS {
            if let Some(value) = ask.headers.get(name) {
                conditions.insert(HeaderName::from_static(name), value.clone());
            }
        }
        let job = Job {
            container: container.clone(),
            blob: blob.clone(),
            id: id.clone(),
            url: url.to_string(),
            conditions,
            own_metadata,
        };
        let job_key = Job::key(container, &id);
        let copies = Key::Container(job_key.container().to_owned());
        let etag = ifmatch_core::strong_etag(COPIES.as_bytes());
        match (self.records)
            .put(&copies, &Record::container(etag, now), PutMode::Create)
            .await
        {
            Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let written = job.record(now).with_generation(self.fresh_generation());
        self.records
            .put(&job_key, &written, PutMode::Create)
            .await?;
        fresh.copy = Some(Copied {
            id: id.clone(),
            source: super::copy::without_query(url),
            len: 0,
            completed: 0,
            status: CopyStatus::Pending,
            description: None,
        });
        let mut answered = match self.commit_put(destination, ask, fresh).await {
            Ok(answered) => answered,
            Err(failure) => {
                // Never started: its job goes (one left by a failure that may have landed
                // finds no pending copy of its id, and goes then).
                if !failure.may_have_landed {
                    let _ = self.records.delete(&job_key, written.generation).await;
                }
                return Err(failure);
            }
        };
        *answered.status_mut() = StatusCode::ACCEPTED;
        let out = answered.headers_mut();
        out.insert(
            super::copy::COPY_ID,
            HeaderValue::try_from(id).expect("a UUID"),
        );
        let pending = HeaderValue::from_static(CopyStatus::Pending.as_str());
        out.insert(super::copy::COPY_STATUS, pending);
        Ok(answered)
    }

    /// Finishes the copies started in the background (see the module's note). Safe to call
    /// from every instance of a fleet at once. Answers how many it finished.
    pub async fn run_copies(&self) -> std::result::Result<usize, StoreError> {
        let mut finished = 0;
        // Each account's jobs, where its jobs are kept: a pass costs the jobs there are, not
        // the containers stored.
        let job_containers: Vec<String> = (self.accounts.iter())
            .map(|account| self.accounts.stored(account, COPIES))
            .collect();
        for container in job_containers {
            let mut pages = BlobPages::new(&container);
            while let Some(page) = pages.next_while_there(&self.records).await? {
                for (name, record) in page {
                    let key = Key::Blob(container.clone(), name);
                    if let Some(job) = Job::of(&record) {
                        self.finish(&job).await;
                        finished += 1;
                    }
                    if let Err(error) = self.records.delete(&key, record.generation).await {
                        tracing::warn!(?key, %error, "could not remove a copy's job");
                    }
                }
            }
        }
        Ok(finished)
    }

    /// Reads the job's source into a new object and writes it as its destination, if that is
    /// still its copy, pending; else (its source unreadable) marks the copy failed.
    async fn finish(&self, job: &Job) {
        let destination = Key::Blob(job.container.clone(), job.blob.clone());
        let pending = |record: &Record| {
            (record.copy.as_ref())
                .is_some_and(|c| c.id == job.id && c.status == CopyStatus::Pending)
        };
        match self.records.get(&destination).await {
            Ok(Some(current)) if pending(&current) => {}
            _ => return,
        }
        let read = match job.url.parse::<Uri>() {
            Ok(url) => self.fetched(&job.conditions, &url, false).await,
            Err(_) => Err(ErrorCode::InvalidHeaderValue.into()),
        };
        let now = self.env.now();
        let (object, outcome) = match read {
            Ok(record) => (
                record.content.as_ref().map(|c| c.object.clone()),
                Ok(record),
            ),
            Err(failure) => {
                let why = failure.detail.unwrap_or_else(|| failure.code.to_string());
                (None, Err(why))
            }
        };
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        let swapped = self
            .swap_existing(&destination, &HeaderMap::new(), missing, |current| {
                if !pending(current) {
                    return Ok(Step::Keep);
                }
                let mut record = current.clone();
                let copy = record.copy.as_mut().expect("pending");
                copy.completed = crate::record::unix_seconds(now);
                match &outcome {
                    Ok(read) => {
                        let content = read.content.clone().expect("a blob");
                        copy.status = CopyStatus::Success;
                        copy.len = content.len;
                        if !job.own_metadata {
                            record.metadata = read.metadata.clone();
                        }
                        record.etag = content.blob_tag(read.bytes_tag(), &record.metadata);
                        let mut content = content;
                        let bytes = read.bytes_tag().clone();
                        content.sha256 = (record.etag != bytes).then_some(bytes);
                        record.content = Some(content);
                    }
                    Err(why) => {
                        copy.status = CopyStatus::Failed;
                        copy.description = Some(why.clone());
                    }
                }
                Ok(Step::changed(record, current, now))
            })
            .await;
        let landed = matches!(&swapped, Ok(s) if s.written.is_some());
        if !landed {
            self.discard(object).await;
        }
        if let Ok(swapped) = swapped {
            self.discard_replaced(
                &destination,
                swapped.previous.as_deref(),
                swapped.written.as_ref(),
            )
            .await;
        }
    }

    /// Abort Copy Blob of a pending copy: `aborted`, the blob left empty; `204`.
    pub(super) async fn abort_pending(
        &self,
        key: &Key,
        ask: &Asking<'_>,
        copy_id: &str,
        now: SystemTime,
    ) -> Answered<O> {
        let missing = (precondition::Operation::Write, ErrorCode::BlobNotFound);
        let swapped = self
            .swap_existing(key, ask.headers, missing, |current| {
                let copy = current.copy.as_ref();
                match copy {
                    Some(c) if c.id != copy_id => Err(ErrorCode::CopyIdMismatch.into()),
                    Some(c) if c.status == CopyStatus::Pending => {
                        let mut record = current.clone();
                        let copy = record.copy.as_mut().expect("pending");
                        copy.status = CopyStatus::Aborted;
                        copy.completed = crate::record::unix_seconds(now);
                        Ok(Step::changed(record, current, now))
                    }
                    _ => Err(ErrorCode::NoPendingCopyOperation.into()),
                }
            })
            .await?;
        let written = swapped.written.as_ref().expect("a change writes");
        Ok(answer(StatusCode::NO_CONTENT, validator_headers(written)))
    }
}
