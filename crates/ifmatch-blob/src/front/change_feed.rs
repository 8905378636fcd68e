//! The change feed ([`crate::change_feed`]): what a change writes, and the publisher that
//! moves changes into the feed's chunks.
//!
//! **Written in the commit.** While an account keeps a feed (`<ChangeFeed>` in its Blob service
//! properties), a change of a blob (its bytes, its metadata or properties, its deletion, a
//! snapshot of it) adds a [`Change`] to the blob's record in the compare-and-swap that makes
//! it: the change is there exactly when the write is. A deleted blob's record stays, empty,
//! until its deletion is published. Before that compare-and-swap, the change leaves a marker,
//! a record of the account's own (`$changes`, beside its containers) named by its id: what the
//! publisher reads, so a pass costs the changes there are, never the blobs stored.
//!
//! **Published once.** A pass ([`Front::publish_changes`]) reads the markers, takes every change
//! their records hold, and writes the plan (those changes, by id, and the chunk they go to) in
//! the feed's head record first: the plan is the publication's commit point. Then it writes the
//! chunk (the same plan gives the same bytes, so writing it again is harmless), removes the
//! changes from their records, removes the markers, and clears the plan. A pass cut short is
//! finished by the next, of whichever instance: a chunk is never written twice with other
//! changes, and a change never reaches two chunks. Instances may run passes at once; the head's
//! compare-and-swap orders them.
//!
//! A marker whose change is in no record is a write that lost its race (or failed): removed
//! once [`DEADLINE`] old. A write whose compare-and-swap lands even later keeps its change in
//! its record; the blob's next change publishes it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ifmatch_azure::Env;

use super::failure::Result;
use super::state::Front;
use super::swap::Step;
use crate::change_feed::{self, CHANGES, Change, FEED};
use crate::record::{Content, Record};
use crate::record_name;
use crate::settings::beside;
use crate::store::{Key, Objects, PutMode, Records, Scan, StoreError};

/// How old a marker whose change no record holds may be before it is removed: far longer than
/// a compare-and-swap takes.
const DEADLINE: Duration = Duration::from_secs(60);

/// The most markers one pass reads: its chunk's changes are about as many.
const PASS: usize = 1000;

/// The most passes one call of the publisher makes (see [`Front::publish_changes`]).
const PASSES: usize = 4;

/// The head record's name among the markers (theirs start with `m/`).
const HEAD: &str = "head";

/// The name of the marker of change `id`.
fn marker(id: &str) -> String {
    format!("m/{id}")
}

/// Whether the record is a deletion not yet published: no content, no staged blocks.
fn emptied(record: &Record) -> bool {
    record.content.is_none() && record.staging.is_none() && record.uncommitted.is_empty()
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// The change feed's part of a compare-and-swap step about to be written over `previous`:
    /// the changes `previous` holds go on in the record written (a deletion writes the emptied
    /// record that keeps them), and while the account keeps a feed, the change this step makes
    /// joins them, its marker written first. `true` when the step's deletion became such a
    /// write.
    pub(super) async fn feed_step(
        &self,
        key: &Key,
        previous: Option<&Record>,
        step: &mut Step,
    ) -> Result<bool> {
        let Key::Blob(container, name) = key else {
            return Ok(false);
        };
        let held = previous.map_or(&[][..], |p| &p.feed[..]);
        let change = match step {
            Step::Put(record, _) => change_feed::kind_of(previous, Some(record)),
            Step::Delete(_) => change_feed::kind_of(previous, None),
            Step::Missing(..) | Step::Keep => return Ok(false),
        };
        let kept = match change {
            Some(kind) if self.keeps_feed(container, name).await? => {
                let record = match step {
                    Step::Put(record, _) => &**record,
                    _ => previous.expect("a deletion's record"),
                };
                let change = self.next_change(held, kind, (container, name), record);
                // Boxed: every commit awaits this step, few keep a feed.
                Box::pin(self.mark(container, name, &change.id)).await?;
                Some(change)
            }
            _ => None,
        };
        if held.is_empty() && kept.is_none() {
            return Ok(false);
        }
        let feed = held.iter().cloned().chain(kept).collect();
        match step {
            Step::Put(record, _) => {
                record.feed = feed;
                Ok(false)
            }
            Step::Delete(generation) => {
                let previous = previous.expect("a deletion's record");
                let mut emptied = Record::container(previous.etag.clone(), self.env.now());
                emptied.feed = feed;
                emptied.generation = *generation + 1;
                *step = Step::Put(Box::new(emptied), PutMode::Update(*generation));
                Ok(true)
            }
            Step::Missing(..) | Step::Keep => unreachable!("returned above"),
        }
    }

    /// Removes the record under `key` if it is still `current` (its generation), as a
    /// compare-and-swap step does: a record that holds changes not yet published, or whose
    /// removal is one (a blob's deletion), is emptied instead. The outer error is the feed's
    /// (its settings, its marker), the inner the compare-and-swap's.
    pub(super) async fn remove_holding(
        &self,
        key: &Key,
        current: &Record,
    ) -> Result<std::result::Result<(), StoreError>> {
        let mut step = Step::Delete(current.generation);
        self.feed_step(key, Some(current), &mut step).await?;
        Ok(match step {
            Step::Put(record, mode) => self.records.put(key, &record, mode).await,
            _ => self
                .records
                .delete(key, current.generation)
                .await
                .map(|_| ()),
        })
    }

    /// Adds `BlobSnapshotCreated` of the snapshot `snapshot` (whose record is `record`) of the
    /// blob `name` of `container` to `blob`, the blob's record about to be written by the
    /// compare-and-swap that commits the snapshot (its generation's bump), while the account
    /// keeps a feed: the change lands exactly when the snapshot does, never for one taken back.
    pub(super) async fn snapshot_change(
        &self,
        (container, name): (&str, &str),
        (snapshot, record): (&str, &Record),
        blob: &mut Record,
    ) -> Result<()> {
        if !self.keeps_feed(container, name).await? {
            return Ok(());
        }
        let kind = (change_feed::Kind::BlobSnapshotCreated, "SnapshotBlob");
        let mut change = self.next_change(&blob.feed, kind, (container, name), record);
        change.snapshot = Some(snapshot.to_owned());
        self.mark(container, name, &change.id).await?;
        blob.feed.push(change);
        Ok(())
    }

    /// The change `kind` of the blob `name` of `container` (whose record is `record`), made
    /// now, after the changes its record holds (`held`): a blob's changes in the order they
    /// were made, whatever the clock says.
    fn next_change(
        &self,
        held: &[Change],
        kind: (change_feed::Kind, &'static str),
        (container, name): (&str, &str),
        record: &Record,
    ) -> Change {
        let (mut now, random) = self.moment();
        if let Some(last) = held.last().and_then(|c| change_feed::instant(&c.id))
            && last >= now
        {
            now = last + Duration::from_nanos(1);
        }
        change_feed::change(kind, (container, name), record, (now, random))
    }

    /// Whether changes of the blob `name` of the stored container `container` go to a feed: a
    /// blob of a client's container (not a snapshot's or version's record) of an account that
    /// keeps one.
    async fn keeps_feed(&self, container: &str, name: &str) -> Result<bool> {
        let client_name = container.split_once('~').map_or(container, |(_, n)| n);
        if client_name.starts_with('$') {
            return Ok(false);
        }
        let own = record_name::split(name).1.is_none();
        let key = Key::Container(container.to_owned());
        Ok(own && self.settings(&key).await?.change_feed)
    }

    /// Now, and 64 random bits: what a change's id is made of.
    fn moment(&self) -> (SystemTime, u64) {
        (self.env.now(), self.env.random_uuid().as_u64_pair().1)
    }

    /// Writes the marker of change `id` of the record `name` of `container`.
    async fn mark(&self, container: &str, name: &str, id: &str) -> Result<()> {
        let changes = beside(container, CHANGES);
        let key = Key::Blob(changes.clone(), marker(id));
        let mut record =
            Record::container(ifmatch_core::strong_etag(id.as_bytes()), self.env.now());
        record.metadata = BTreeMap::from([
            ("container".to_owned(), container.to_owned()),
            ("blob".to_owned(), name.to_owned()),
        ]);
        match self.records.put(&key, &record, PutMode::Create).await {
            Err(StoreError::ContainerNotFound) => {
                self.create_own(&changes).await?;
                Ok(self.records.put(&key, &record, PutMode::Create).await?)
            }
            written => Ok(written?),
        }
    }

    /// Creates the container record `name` (one of the account's own) if it is not there.
    pub(super) async fn create_own(&self, name: &str) -> std::result::Result<(), StoreError> {
        let now = self.env.now();
        let record = Record::container(ifmatch_core::strong_etag(name.as_bytes()), now)
            .with_generation(self.fresh_generation());
        match self
            .records
            .put(&Key::Container(name.to_owned()), &record, PutMode::Create)
            .await
        {
            Ok(()) | Err(StoreError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Publishes the changes of every account (see the module's note), those written before
    /// its feed was turned off too (a pass over an account that never kept one lists one
    /// container that is not there). Safe to call from every instance of a fleet at once.
    /// Answers how many it published.
    pub async fn publish_changes(&self) -> std::result::Result<usize, StoreError> {
        self.publish_accounts(false).await
    }

    /// [`Front::publish_changes`] of the accounts that keep a feed now, and only those: what a
    /// host that has no timer of its own (a Worker) runs after each write.
    pub async fn publish_kept_changes(&self) -> std::result::Result<usize, StoreError> {
        self.publish_accounts(true).await
    }

    async fn publish_accounts(&self, kept_only: bool) -> std::result::Result<usize, StoreError> {
        let mut published = 0;
        let accounts: Vec<(String, String)> = (self.accounts.iter())
            .map(|a| (a.name().to_owned(), self.accounts.stored(a, CHANGES)))
            .collect();
        for (account, changes) in accounts {
            if kept_only {
                let settings = self.settings(&Key::Container(changes.clone())).await;
                if !settings.is_ok_and(|s| s.change_feed) {
                    continue;
                }
            }
            published += self.publish(&account, &changes).await?;
        }
        Ok(published)
    }

    /// Publishes what the account that owns the stored container `container` has not yet, a
    /// few passes at most: what a container's deletion runs first, so that the changes its
    /// blobs' records hold are not removed with them (one made during the deletion may be).
    pub(super) async fn publish_before_removing(&self, container: &str) -> Result<()> {
        if !self
            .settings(&Key::Container(container.to_owned()))
            .await?
            .change_feed
        {
            return Ok(());
        }
        let account = match container.split_once('~') {
            Some((account, _)) => account.to_owned(),
            None => (self.accounts.iter().next()).map_or_else(String::new, |a| a.name().to_owned()),
        };
        self.publish(&account, &beside(container, CHANGES)).await?;
        Ok(())
    }

    /// The sweep's part: removes the segments (their chunks, then their `meta.json`) each
    /// account's feed keeps no longer (`<RetentionInDays>`). Segments are named by their hour,
    /// so a pass reads only those it removes, and the first it keeps.
    pub(super) async fn expire_feed(&self) -> std::result::Result<usize, StoreError> {
        let now = crate::record::unix_seconds(self.env.now()) as i64;
        let feeds: Vec<String> = (self.accounts.iter())
            .map(|a| self.accounts.stored(a, FEED))
            .collect();
        let mut removed = 0;
        for feed in feeds {
            let settings = self.settings(&Key::Container(feed.clone())).await;
            let Some(days) = settings.ok().and_then(|s| s.change_feed_days) else {
                continue;
            };
            let mut segments = super::pages::BlobPages::under(&feed, "idx/segments/");
            'segments: loop {
                let page = match segments.next(&self.records).await {
                    Ok(Some(page)) => page,
                    Ok(None) | Err(StoreError::ContainerNotFound) => break,
                    Err(e) => return Err(e),
                };
                for (name, record) in page {
                    let hour = change_feed::segment_hour(&name).unwrap_or_default();
                    let end = change_feed::hour_start(hour).map(|s| s + 3600);
                    if end.is_none_or(|end| end + i64::from(days) * 86_400 > now) {
                        break 'segments;
                    }
                    let shard = change_feed::shard_path(hour);
                    let mut chunks = super::pages::BlobPages::under(&feed, &shard);
                    while let Some(page) = chunks.next(&self.records).await? {
                        for (chunk, record) in page {
                            self.remove_feed_blob(&feed, chunk, &record).await;
                            removed += 1;
                        }
                    }
                    self.remove_feed_blob(&feed, name, &record).await;
                }
            }
        }
        Ok(removed)
    }

    async fn remove_feed_blob(&self, feed: &str, name: String, record: &Record) {
        let key = Key::Blob(feed.to_owned(), name);
        if let Err(failure) = self.remove_record(&key, record).await {
            tracing::warn!(?key, code = %failure.code, "could not remove a change feed's segment");
        }
    }

    /// Marks again the changes `record` (of the blob record `name` of `container`) has held
    /// for longer than any pass leaves one: those of a write whose compare-and-swap landed after
    /// its marker was given up ([`DEADLINE`]). What the sweep runs on each record it walks.
    pub(super) async fn remark(&self, container: &str, name: &str, record: &Record) {
        let now = self.env.now();
        for change in &record.feed {
            let old = change_feed::instant(&change.id)
                .is_some_and(|at| now.duration_since(at).is_ok_and(|age| age > 2 * DEADLINE));
            let key = Key::Blob(beside(container, CHANGES), marker(&change.id));
            if !old || matches!(self.records.get(&key).await, Ok(Some(_))) {
                continue;
            }
            if let Err(failure) = self.mark(container, name, &change.id).await {
                tracing::warn!(container, name, code = %failure.code, "could not mark a change again");
            }
        }
    }

    /// Passes over the account's `changes` container until one finds nothing to do, at most
    /// [`PASSES`]: a pass that finds another's plan (cut short, or running now on another
    /// instance) finishes it and goes on, so that what was written before the call is published
    /// by it (up to `PASSES` chunks), whoever else publishes meanwhile.
    async fn publish(
        &self,
        account: &str,
        changes: &str,
    ) -> std::result::Result<usize, StoreError> {
        let mut published = 0;
        for _ in 0..PASSES {
            match self.pass(account, changes).await? {
                Some(count) => published += count,
                None => break,
            }
        }
        Ok(published)
    }

    /// One pass of the publisher over the account's `changes` container: how many changes it
    /// published, `None` when it found nothing to do.
    async fn pass(
        &self,
        account: &str,
        changes: &str,
    ) -> std::result::Result<Option<usize>, StoreError> {
        let head_key = Key::Blob(changes.to_owned(), HEAD.to_owned());
        let head = self.records.get(&head_key).await?;
        if let Some(head) = head.as_deref().filter(|h| !h.feed.is_empty()) {
            // Another pass's plan, cut short or running: finish it before planning another.
            return (self
                .publish_planned(account, changes, &head_key, head)
                .await)
                .map(Some);
        }
        let scan = Scan {
            container: changes,
            prefix: "m/",
            from: "",
            limit: PASS,
        };
        let markers = match self.records.list(scan).await {
            Err(StoreError::ContainerNotFound) => return Ok(None),
            listed => listed?,
        };
        if markers.is_empty() {
            return Ok(None);
        }
        // Every change the markers' records hold, once.
        let mut keys = BTreeSet::new();
        for (_, record) in &markers {
            if let (Some(c), Some(b)) = (
                record.metadata.get("container"),
                record.metadata.get("blob"),
            ) {
                keys.insert(Key::Blob(c.clone(), b.clone()));
            }
        }
        let mut plan: Vec<Change> = Vec::new();
        for key in &keys {
            if let Some(record) = self.records.get(key).await? {
                plan.extend(record.feed.iter().cloned());
            }
        }
        plan.sort_by(|a, b| a.id.cmp(&b.id));
        plan.dedup_by(|a, b| a.id == b.id);
        // Markers of changes no record holds, once the write they stood for is surely over.
        let now = self.env.now();
        let planned: BTreeSet<&str> = plan.iter().map(|c| c.id.as_str()).collect();
        for (name, record) in &markers {
            let id = name.trim_start_matches("m/");
            let old = change_feed::instant(id)
                .is_none_or(|at| now.duration_since(at).is_ok_and(|age| age > DEADLINE));
            if !planned.contains(id) && old {
                let key = Key::Blob(changes.to_owned(), name.clone());
                let _ = self.records.delete(&key, record.generation).await;
            }
        }
        if plan.is_empty() {
            return Ok(None);
        }
        // The plan, in the head: the chunk it goes to is the hour's next.
        let hour = change_feed::hour(now);
        let next = (head.as_deref())
            .filter(|h| h.metadata.get("hour") == Some(&hour))
            .and_then(|h| h.metadata.get("next")?.parse::<u64>().ok())
            .unwrap_or(0);
        let mut planned = Record::container(ifmatch_core::strong_etag(plan[0].id.as_bytes()), now);
        planned.metadata = BTreeMap::from([
            ("hour".to_owned(), hour),
            ("chunk".to_owned(), next.to_string()),
            ("next".to_owned(), (next + 1).to_string()),
        ]);
        planned.feed = plan;
        let mode = self.over(&mut planned, head.as_deref());
        match self.records.put(&head_key, &planned, mode).await {
            Ok(()) => {}
            // Another pass planned first: the next pass finishes its plan.
            Err(e) if self.lost_race(&e) => return Ok(Some(0)),
            Err(e) => return Err(e),
        }
        (self
            .publish_planned(account, changes, &head_key, &planned)
            .await)
            .map(Some)
    }

    /// Carries out the plan in `head`: the chunk, the changes out of their records, the
    /// markers, then the plan cleared. Answers how many changes it published.
    async fn publish_planned(
        &self,
        account: &str,
        changes: &str,
        head_key: &Key,
        head: &Record,
    ) -> std::result::Result<usize, StoreError> {
        let (Some(hour), Some(chunk)) = (
            head.metadata.get("hour"),
            head.metadata
                .get("chunk")
                .and_then(|n| n.parse::<u64>().ok()),
        ) else {
            return Err(StoreError::corrupt(
                head_key,
                "a change feed's head names no chunk",
            ));
        };
        let feed = beside(changes, FEED);
        self.create_own(&feed).await?;
        let segment = change_feed::segment_json(hour, "Publishing");
        self.write_feed_blob(
            &feed,
            &change_feed::segment_path(hour),
            segment.into(),
            false,
        )
        .await?;
        let bytes = change_feed::chunk(account, &head.feed);
        let path = change_feed::chunk_path(hour, chunk);
        self.write_feed_blob(&feed, &path, bytes.into(), false)
            .await?;
        let last = head.feed.last().map_or("", |c| c.time.as_str());
        let segments = change_feed::segments_json(last);
        self.write_feed_blob(&feed, "meta/segments.json", segments.into(), true)
            .await?;
        // The changes out of their records: the blob's, and a snapshot's own for a snapshot
        // taken before its change joined the blob's record.
        let mut by_key: BTreeMap<Key, BTreeSet<&str>> = BTreeMap::new();
        for change in &head.feed {
            let snapshot =
                (change.snapshot.as_ref()).map(|s| record_name::snapshot(&change.blob, s));
            for name in std::iter::once(change.blob.clone()).chain(snapshot) {
                let key = Key::Blob(change.container.clone(), name);
                by_key.entry(key).or_default().insert(change.id.as_str());
            }
        }
        for (key, ids) in &by_key {
            self.unhold(key, ids).await?;
        }
        for change in &head.feed {
            let key = Key::Blob(changes.to_owned(), marker(&change.id));
            if let Some(record) = self.records.get(&key).await? {
                let _ = self.records.delete(&key, record.generation).await;
            }
        }
        let mut cleared = head.clone();
        cleared.feed = Vec::new();
        cleared.generation = head.generation + 1;
        match self
            .records
            .put(head_key, &cleared, PutMode::Update(head.generation))
            .await
        {
            Ok(()) => Ok(head.feed.len()),
            // Another instance finished it.
            Err(e) if self.lost_race(&e) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Removes the changes `ids` from the record under `key`; an emptied record (a deletion)
    /// that holds no more goes.
    async fn unhold(&self, key: &Key, ids: &BTreeSet<&str>) -> std::result::Result<(), StoreError> {
        loop {
            let Some(current) = self.records.get(key).await? else {
                return Ok(());
            };
            if !current.feed.iter().any(|c| ids.contains(c.id.as_str())) {
                return Ok(());
            }
            let mut record = Record::clone(&current);
            record.feed.retain(|c| !ids.contains(c.id.as_str()));
            let written = if record.feed.is_empty() && emptied(&record) {
                self.records
                    .delete(key, current.generation)
                    .await
                    .map(|_| ())
            } else {
                record.generation = current.generation + 1;
                self.records
                    .put(key, &record, PutMode::Update(current.generation))
                    .await
            };
            match written {
                Ok(()) => return Ok(()),
                Err(e) if self.lost_race(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes `bytes` as the blob `name` of the feed's container `feed`: created if it is not
    /// there (left as it is if it is, unless `replace`).
    async fn write_feed_blob(
        &self,
        feed: &str,
        name: &str,
        bytes: Bytes,
        replace: bool,
    ) -> std::result::Result<(), StoreError> {
        let key = Key::Blob(feed.to_owned(), name.to_owned());
        let current = self.records.get(&key).await?;
        if current.is_some() && !replace {
            return Ok(());
        }
        let len = bytes.len() as u64;
        let staged = self
            .objects
            .stage(http_body_util::Full::new(bytes), len)
            .await?;
        if let Err(e) = self.objects.persist(&staged).await {
            self.discard(Some(staged.object)).await;
            return Err(e);
        }
        let content_type = if name.ends_with(".json") {
            "application/json"
        } else {
            "avro/binary"
        };
        let content = Content::new(staged.object.clone(), len, Some(content_type.to_owned()));
        let mut record = Record::blob(staged.etag.clone(), self.env.now(), content);
        let mode = self.over(&mut record, current.as_deref());
        match self.records.put(&key, &record, mode).await {
            Ok(()) => {
                let old = current.and_then(|c| c.content.as_ref().map(|c| c.object.clone()));
                self.discard(old).await;
                Ok(())
            }
            Err(e) => {
                self.discard(Some(staged.object)).await;
                // Written meanwhile by another instance finishing the same plan.
                if self.lost_race(&e) { Ok(()) } else { Err(e) }
            }
        }
    }
}
