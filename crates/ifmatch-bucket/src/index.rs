//! Which slots of a directory are alive, so that a listing reads the living ones and not the
//! tombstones the dead leave (object_store deletes unconditionally, so a slot's object cannot
//! be removed safely: it may have been created again meanwhile).
//!
//! Each life of a slot has an *incarnation* (a random name given when the slot is created,
//! kept while it is changed) and, for that life, one empty object in the index, named as the
//! slot is, then by the incarnation: `<index>/<name segments>/<incarnation>`. Because no two
//! lives share an entry, removing one is safe unconditionally. The slot stays the truth; the
//! index is a superset of the living:
//!
//! - a creation writes its entry before the slot, and removes it when it lost the slot's race;
//! - a deletion writes the slot's tombstone, then removes the entry of the life it ended;
//! - a listing lists the entries in order, reads each one's slot and keeps those whose slot
//!   is alive in the entry's incarnation.
//!
//! An entry the slot does not confirm is a creation under way, or what a creation or a deletion
//! cut short left: once older than [`LEFTOVER_TIMEOUTS`] times the operations' timeout, nothing
//! will make it true any more, and the listing that finds it removes it. So a listing costs its page, the creations
//! under way and what crashes left, not the history of the directory.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};

use crate::name;
use crate::object::{Bucket, Failure, joined, now_millis};

/// How old, in operation timeouts, an entry its slot does not confirm must be before a listing
/// removes it: far longer than any operation may take, since each gives up after its timeout
/// (10 s by default: 10 minutes).
pub(crate) const LEFTOVER_TIMEOUTS: u32 = 60;

/// The index of the slots under one directory.
#[derive(Clone)]
pub(crate) struct Index {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// How old an unconfirmed entry is a leftover.
    leftover: Duration,
}

/// An entry as listed: where its slot is (relative to the directory, its segments still
/// encoded), the incarnation it names, and how old it is.
pub(crate) struct Entry {
    pub(crate) segments: Vec<String>,
    pub(crate) incarnation: String,
    meta: ObjectMeta,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Index").field(&self.path).finish()
    }
}

impl Entry {
    /// The slot the entry names, in the directory `slots`.
    pub(crate) fn slot(&self, slots: &Path) -> Path {
        joined(slots, &self.segments)
    }

    /// The names the entry's segments encode (see `name.rs`); `None` if one is not a name.
    pub(crate) fn names(&self) -> Option<Vec<String>> {
        self.segments.iter().map(|s| name::decode(s)).collect()
    }

    /// The name of the slot an entry of a one-level index names.
    pub(crate) fn name(&self) -> Option<String> {
        match self.names()?.as_mut_slice() {
            [name] => Some(std::mem::take(name)),
            _ => None,
        }
    }
}

impl Bucket {
    /// The index of the lives of the slots under `segments`, kept under `live/` and those
    /// segments.
    pub(crate) fn index<S: AsRef<str>>(&self, segments: &[S]) -> Index {
        let path = joined(&self.prefix.clone().join("live"), segments);
        Index::new(self.store.clone(), path, self.timeout)
    }
}

impl Index {
    /// The index at `path` in `store`, of slots whose operations give up after `timeout`.
    pub(crate) fn new(store: Arc<dyn ObjectStore>, path: Path, timeout: Duration) -> Self {
        let leftover = timeout * LEFTOVER_TIMEOUTS;
        Self {
            store,
            path,
            leftover,
        }
    }

    /// Where the index is: a directory that goes with what it indexes.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The entry of the slot named by `segments` (encoded) in its life `incarnation`.
    pub(crate) fn entry<S: AsRef<str>>(&self, segments: &[S], incarnation: &str) -> Path {
        joined(&self.path, segments).join(incarnation)
    }

    /// Writes an entry, before its slot's creation.
    pub(crate) async fn add(&self, entry: &Path) -> Result<(), Failure> {
        self.store.put(entry, PutPayload::default()).await?;
        Ok(())
    }

    /// Removes an entry: its life ended, or never began.
    pub(crate) async fn remove(&self, entry: &Path) -> Result<(), Failure> {
        match self.store.delete(entry).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// The entries in order, after `offset` (relative to the index, encoded) when given.
    pub(crate) fn list(
        &self,
        offset: Option<&[String]>,
    ) -> BoxStream<'static, Result<Entry, Failure>> {
        let listing = match offset {
            None => self.store.list(Some(&self.path)),
            Some(offset) => self
                .store
                .list_with_offset(Some(&self.path), &joined(&self.path, offset)),
        };
        let depth = self.path.parts().count();
        listing
            .map_err(Failure::from)
            .and_then(move |meta| async move {
                let mut segments: Vec<String> = (meta.location.parts().skip(depth))
                    .map(|part| part.as_ref().to_owned())
                    .collect();
                let incarnation = segments.pop().filter(|_| !segments.is_empty());
                let incarnation = incarnation.ok_or_else(|| {
                    let said = format!("{}: not an index entry", meta.location);
                    Failure::Store(object_store::Error::Generic {
                        store: "index",
                        source: said.into(),
                    })
                })?;
                Ok(Entry {
                    segments,
                    incarnation,
                    meta,
                })
            })
            .boxed()
    }

    /// What the slot `entry` names shows, if it confirms the entry: `found` is its value and
    /// the life it is in, when it is alive. An entry its slot does not confirm is not listed,
    /// and is removed once it is a leftover.
    pub(crate) async fn confirm<T, L: AsRef<str>>(
        &self,
        entry: &Entry,
        found: Option<(T, L)>,
    ) -> Result<Option<T>, Failure> {
        match found {
            Some((value, life)) if life.as_ref() == entry.incarnation => Ok(Some(value)),
            _ => {
                self.unconfirmed(entry).await?;
                Ok(None)
            }
        }
    }

    async fn unconfirmed(&self, entry: &Entry) -> Result<(), Failure> {
        let written = u64::try_from(entry.meta.last_modified.timestamp_millis()).unwrap_or(0);
        if now_millis().saturating_sub(written) > self.leftover.as_millis() as u64 {
            self.remove(&entry.meta.location).await?;
        }
        Ok(())
    }
}
