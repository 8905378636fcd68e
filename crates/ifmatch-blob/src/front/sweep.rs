//! The sweep: objects no record names, blocks staged a week ago and never committed, and
//! deleted blobs and containers past their retention.

use http::header::HeaderMap;

use super::pages::BlobPages;
use super::state::Front;
use super::swap::Step;
use crate::store::{Key, Objects, Records, StoreError};
use ifmatch_azure::Env;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// Discards the objects stored more than `age` ago that no record names: what a crash, a
    /// client gone mid-commit or a backend that could not say whether a commit landed left
    /// behind. Answers how many it discarded.
    ///
    /// Safe while this and other instances serve the same stores, with no coordination: the
    /// candidates are listed before the records are read, so an object is discarded only if
    /// no record named it some time after it was `age` old, and a write names its object
    /// (or gives it up) within moments of staging it. `age` must be far longer than that
    /// (the servers use an hour). Sweeping twice at once is harmless.
    pub async fn sweep(&self, age: std::time::Duration) -> std::result::Result<usize, StoreError> {
        self.expire_containers().await?;
        self.expire_feed().await?;
        let mut swept = self.expire_blocks().await?;
        let candidates = self.objects.older_than(age, self.env.now()).await?;
        if candidates.is_empty() {
            return Ok(swept);
        }
        let mut named = std::collections::HashSet::new();
        for container in self.records.containers().await? {
            let mut pages = BlobPages::new(&container);
            // A container deleted meanwhile took its objects with it.
            while let Some(page) = pages.next_while_there(&self.records).await? {
                for (name, record) in page {
                    named.extend(record.objects().map(str::to_owned));
                    let appended = record.content.as_ref().and_then(|c| c.append);
                    let sets = (record.staging.map(|s| s.epoch).into_iter())
                        .chain(appended.map(|a| a.epoch));
                    let key = Key::Blob(container.clone(), name);
                    for epoch in sets {
                        let staged = self.records.staged_blocks(&key, epoch).await?;
                        named.extend(staged.into_iter().map(|b| b.object));
                    }
                }
            }
        }
        for object in candidates.iter().filter(|o| !named.contains(*o)) {
            self.objects.discard(object).await?;
            swept += 1;
        }
        Ok(swept)
    }

    /// Drops the blocks of every blob that has staged none for a week and committed none since
    /// (the dialect's rule), and a blob record left with nothing; removes the deleted blobs and
    /// snapshots whose retention is over ([`crate::soft_delete`]); discards their objects.
    /// Answers how many blocks it dropped.
    pub(super) async fn expire_blocks(&self) -> std::result::Result<usize, StoreError> {
        let now = self.env.now();
        let limit = crate::record::unix_seconds(now)
            .saturating_sub(crate::block_list::UNCOMMITTED_TTL.as_secs());
        let mut expired = 0;
        for container in self.records.containers().await? {
            let mut pages = BlobPages::new(&container);
            while let Some(blobs) = pages.next_while_there(&self.records).await? {
                for (name, record) in blobs {
                    if !record.feed.is_empty() {
                        self.remark(&container, &name, &record).await;
                    }
                    // A deleted blob or snapshot whose days are over goes for good.
                    if record
                        .deleted
                        .is_some_and(|d| d.until <= crate::record::unix_seconds(now))
                    {
                        let key = Key::Blob(container.clone(), name);
                        if let Err(failure) = self.remove_record(&key, &record).await {
                            tracing::warn!(?key, code = %failure.code, "could not remove a deleted blob");
                        }
                        continue;
                    }
                    if record.staging.is_none() && record.uncommitted.is_empty() {
                        continue;
                    }
                    let key = Key::Blob(container.clone(), name);
                    let staged = match self.uncommitted(&key, Some(&record)).await {
                        Ok(staged) => staged,
                        Err(failure) => {
                            tracing::warn!(?key, code = %failure.code, "could not read staged blocks");
                            continue;
                        }
                    };
                    // A set with no block yet is as old as its record.
                    let newest =
                        (staged.iter().map(|b| b.staged).max()).unwrap_or(record.last_modified);
                    if newest > limit {
                        continue;
                    }
                    let swapped = self
                        .swap(&key, &HeaderMap::new(), |current| {
                            let same = current.is_some_and(|c| {
                                c.staging == record.staging && c.uncommitted == record.uncommitted
                            });
                            let Some(current) = current.filter(|_| same) else {
                                return Ok(Step::Keep);
                            };
                            if current.content.is_none() {
                                return Ok(Step::Delete(current.generation));
                            }
                            let mut kept = current.clone();
                            (kept.staging, kept.uncommitted) = (None, Vec::new());
                            Ok(Step::update(kept, current))
                        })
                        .await;
                    match swapped {
                        Ok(swapped) if swapped.written.is_some() || swapped.deleted => {
                            expired += staged.len();
                            (self.discard_replaced(
                                &key,
                                swapped.previous.as_deref(),
                                swapped.written.as_ref(),
                            ))
                            .await;
                        }
                        Ok(_) => {}
                        Err(failure) => {
                            tracing::warn!(?key, code = %failure.code, "could not expire staged blocks");
                        }
                    }
                }
            }
        }
        Ok(expired)
    }
}
