//! Versions ([`crate::version`]): keeping one, and what a `versionid=` names.

use ifmatch_azure::Env;

use super::failure::Result;
use super::state::Front;
use crate::error_code::ErrorCode;
use crate::record::Record;
use crate::record_name::{self, Qualifier};
use crate::store::{Key, Objects, PutMode, Records};

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Keeps `previous`, the blob under `key` as read (its own record, not a snapshot's or a
    /// version's), as a version under the id it has. `false` when it changed while it was
    /// copied (an object of it gone): the caller reads it again.
    pub(super) async fn keep_version(&self, key: &Key, previous: &Record) -> Result<bool> {
        let Key::Blob(container, blob) = key else {
            unreachable!("a version is a blob's")
        };
        // A blob written before its account kept versions has no id: its time's.
        let id = match &previous.version {
            Some(id) => id.clone(),
            None => record_name::id(previous.last_modified_time()),
        };
        let version_key = Key::Blob(container.clone(), record_name::version(blob, &id));
        if self.records.get(&version_key).await?.is_some() {
            return Ok(true);
        }
        let Some(duplicate) = self.duplicate(key, previous, &version_key, false).await? else {
            return Ok(false);
        };
        let mut record = self.kept_copy(previous, duplicate.content);
        record.version = Some(id);
        let append = record.content.as_ref().and_then(|c| c.append);
        match self
            .records
            .put(&version_key, &record, PutMode::Create)
            .await
        {
            Ok(()) => Ok(true),
            Err(e) => {
                self.forget(&version_key, duplicate.objects, append).await;
                match e {
                    // Kept by another attempt meanwhile: the same state.
                    crate::store::StoreError::AlreadyExists { .. } => Ok(true),
                    e => Err(e.into()),
                }
            }
        }
    }

    /// `record` as a record kept of it (a version, a deleted blob) that names `content`, its
    /// own copy of the bytes: no lease, no staged blocks, a generation of its own.
    pub(super) fn kept_copy(&self, record: &Record, content: crate::record::Content) -> Record {
        let mut kept = Record::clone(record);
        kept.content = Some(content);
        kept.lease = crate::lease::Lease::Available;
        kept.staging = None;
        kept.uncommitted = Vec::new();
        // The blob's changes stay in its record, for the feed to publish once.
        kept.feed = Vec::new();
        kept.generation = self.fresh_generation();
        kept
    }

    /// The key of the record `key` names, where `key` may name a version by its id: the
    /// version's record, or the blob's own when that is the blob's current version.
    pub(super) async fn version_key(&self, key: Key) -> Result<Key> {
        let Key::Blob(container, name) = &key else {
            return Ok(key);
        };
        let (blob, Some(Qualifier::Version(id))) = record_name::split(name) else {
            return Ok(key);
        };
        if self.records.get(&key).await?.is_some() {
            return Ok(key);
        }
        let base = Key::Blob(container.clone(), blob.to_owned());
        match self.records.get(&base).await? {
            Some(current) if current.version.as_deref() == Some(id) => Ok(base),
            _ => Err(ErrorCode::BlobNotFound.into()),
        }
    }
}
