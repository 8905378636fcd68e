//! The Table front's entities (and the Cosmos front's documents, which it keeps as entities)
//! in an object store: each entity one small JSON object changed by conditional PUT, and a
//! commit of several entities made atomic by an intent that every reader honours.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ifmatch_table::{Change, Entity, EntityKey, Scan, TableError, Tables, satisfies};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::index::{Entry, Index};
use crate::name;
use crate::object::{self, Bucket, Failure, now_millis};

/// How many times a scan reads a page again, batches committing under it, before it holds new
/// batches off.
const OPTIMISTIC: u32 = 3;

/// Tables and their entities in a bucket, for a fleet of `ifmatch serve` instances that shares
/// nothing but the bucket (`--backend s3://...`).
///
/// Layout, under a prefix:
///
/// - `t/<table>`: the table, and the *incarnation* its entities are kept under (new each time
///   the table is created); a deleted table leaves a tombstone, so deleting it is one write;
/// - `e/<table>/<incarnation>/<PartitionKey>/<RowKey>`: an entity (keys encoded to sort as
///   they do, so that the store's ordered listing scans in key order), and the incarnation of
///   its life (new when it is created, kept while it changes); a deleted entity leaves a
///   tombstone (object_store offers no conditional delete);
/// - `live/t/<table>/<incarnation>` and `live/e/<table>/<incarnation>/<PartitionKey>/<RowKey>/
///   <entity's incarnation>`: the index of the living, one empty object each (see `index.rs`),
///   which the listings and scans read, so that they pass the tombstones by;
/// - `i/<table>/<incarnation>/<id>`: the intent of a commit of several entities while it runs;
/// - `p/` and `h/<table>/<incarnation>/<PartitionKey>`: a partition's epoch and barrier (see
///   below).
///
/// A commit of one entity is one conditional PUT of its object. A commit of several (a batch)
/// is made atomic the way Percolator does it: it writes its intent (pending), then locks each
/// entity, in key order, with a conditional PUT that leaves the entity as it is and names the
/// intent and the entity's new value; when every change finds what it expects, one
/// conditional PUT of the intent (pending to committed) is the instant all of them happen;
/// then each entity takes its new value and drops the lock, and the intent goes. A reader that
/// finds a lock asks its intent: committed, the new value; pending or aborted, the old one. A
/// writer that finds a lock settles a decided intent's entity itself, waits for a pending one,
/// and aborts one pending longer than [`BucketTables::stale_after`] (its instance died): the
/// commit's atomicity does not depend on its instance surviving. Intents' ages are judged by
/// each instance's clock.
///
/// A scan's page never shows half a batch: each batch moves its partitions' epochs as it
/// commits (before any of its entities shows its new value), and a page reads each
/// partition's epoch before listing it and again at the end, reading the page again when one
/// moved; after three tries it holds new batches off its partitions for a moment.
#[derive(Clone, Debug)]
pub struct BucketTables {
    bucket: Bucket,
    stale: Duration,
}

/// A table's object: the incarnation its entities are kept under (and of its life); none once
/// deleted.
#[derive(Debug, Serialize, Deserialize)]
struct TableSlot {
    incarnation: Option<String>,
}

/// An entity's object: its value (none: deleted) and the incarnation of its life, and the lock
/// of a commit under way.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EntitySlot {
    entity: Option<Entity>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    incarnation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock: Option<Lock>,
}

/// An entity's value (none: deleted) and the incarnation of its life (empty when none).
type Life = (Option<Entity>, String);

impl EntitySlot {
    /// A slot with `life` and no lock.
    fn settled((entity, incarnation): Life) -> Self {
        Self {
            entity,
            incarnation,
            lock: None,
        }
    }

    /// The entity as it is before its lock (if any) commits.
    fn current(&self) -> Life {
        (self.entity.clone(), self.incarnation.clone())
    }

    /// The lives this slot has or its lock would begin, but that the slot written over it,
    /// whose life is `after`, does not keep: their index entries go.
    fn abandoned(&self, after: &str) -> Vec<String> {
        let had = self.entity.as_ref().map(|_| self.incarnation.clone());
        let promised = match &self.lock {
            Some(Lock {
                intent,
                write: Some(_),
            }) if self.entity.is_none() => Some(intent.clone()),
            _ => None,
        };
        (had.into_iter().chain(promised))
            .filter(|life| life != after)
            .collect()
    }

    /// The entity once `lock` commits: a changed entity keeps its life; a created one begins
    /// the life named by the lock's intent (entered in the index when it was locked).
    fn committed(&self, lock: &Lock) -> Life {
        match (&lock.write, &self.entity) {
            (None, _) => (None, String::new()),
            (Some(write), Some(_)) => (Some(write.clone()), self.incarnation.clone()),
            (Some(write), None) => (Some(write.clone()), lock.intent.clone()),
        }
    }
}

/// A commit's lock on an entity: its intent, and the entity's value once it commits.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lock {
    intent: String,
    write: Option<Entity>,
}

/// A commit of several entities.
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    state: State,
    /// When it started, in Unix milliseconds.
    started: u64,
    /// The partitions it changes.
    #[serde(default)]
    partitions: Vec<String>,
    /// Committed, whether its partitions' epochs moved since (see [`BucketTables::seal`]).
    #[serde(default)]
    sealed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum State {
    Pending,
    Committed,
    Aborted,
}

/// Where one table's incarnation keeps things.
struct Place {
    entities: Path,
    index: Index,
    intents: Path,
    epochs: Path,
    barriers: Path,
}

impl Place {
    /// The index entry of the entity under `key` in its life `incarnation`.
    fn entry(&self, (pk, rk): &EntityKey, incarnation: &str) -> Path {
        let segments = [name::encode(pk), name::encode(rk)];
        self.index.entry(&segments, incarnation)
    }

    fn entity(&self, (pk, rk): &EntityKey) -> Path {
        (self.entities.clone())
            .join(name::encode(pk))
            .join(name::encode(rk))
    }

    fn intent(&self, id: &str) -> Path {
        self.intents.clone().join(id)
    }

    /// The object counting the batches committed in partition `pk`.
    fn epoch(&self, pk: &str) -> Path {
        self.epochs.clone().join(name::encode(pk))
    }

    /// The object by which a scan holds batches off partition `pk` (until a time it holds).
    fn barrier(&self, pk: &str) -> Path {
        self.barriers.clone().join(name::encode(pk))
    }
}

/// What a commit's lock wrote on an entity: its object, and the version of it.
type Held = (EntitySlot, UpdateVersion);

/// What an entity's lock comes to, its intent asked.
enum Settled {
    /// The entity: the lock's intent is decided (or pending, for a reader).
    Value(Life),
    /// The intent is pending and may still commit: a writer waits.
    Pending,
    /// The intent is gone: the lock was dropped meanwhile; read the entity again.
    Gone,
}

impl BucketTables {
    /// Tables in `store` under `prefix` (say `ifmatch/tables`). Each operation is given up
    /// after 10 s.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        let bucket = Bucket::new(store, prefix, Duration::from_secs(10));
        let stale = Duration::from_secs(30);
        Self { bucket, stale }
    }

    /// How long a commit's intent may stay pending before another writer aborts it, taking it
    /// for the intent of an instance that died (30 s): longer than any commit of a live
    /// instance takes, and than the clocks of the fleet differ. Meanwhile its entities wait.
    pub fn stale_after(mut self, stale: Duration) -> Self {
        self.stale = stale;
        self
    }

    /// How long one operation (its requests, retries and waits for other commits included) may
    /// take before it fails. An operation given up may still land.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.bucket.timeout = timeout;
        self
    }

    async fn within<T>(
        &self,
        operation: impl Future<Output = Result<T, TableError>>,
    ) -> Result<T, TableError> {
        let late = |timeout| {
            generic(format!(
                "the object store did not answer within {timeout:?}"
            ))
        };
        self.bucket.within(operation, late).await
    }

    fn table_path(&self, table: &str) -> Path {
        self.bucket.path(&["t", &name::encode(table)])
    }

    /// The index of the tables' lives.
    fn tables_index(&self) -> Index {
        self.bucket.index(&["t"])
    }

    /// The index entry of a table's life.
    fn table_entry(&self, table: &str, incarnation: &str) -> Path {
        self.tables_index()
            .entry(&[name::encode(table)], incarnation)
    }

    fn place(&self, table: &str, incarnation: &str) -> Place {
        let table = name::encode(table);
        let at = |kind: &str| self.bucket.path(&[kind, &table, incarnation]);
        Place {
            entities: at("e"),
            index: self.bucket.index(&["e", &table, incarnation]),
            intents: at("i"),
            epochs: at("p"),
            barriers: at("h"),
        }
    }

    /// The place of a table that exists.
    async fn live(&self, table: &str) -> Result<Place, TableError> {
        let found = object::read::<TableSlot>(&*self.bucket.store, &self.table_path(table)).await;
        match found.map_err(failed)? {
            Some((
                TableSlot {
                    incarnation: Some(i),
                },
                _,
            )) => Ok(self.place(table, &i)),
            _ => Err(TableError::TableNotFound(table.to_owned())),
        }
    }

    async fn read_entity(
        &self,
        path: &Path,
    ) -> Result<(EntitySlot, Option<UpdateVersion>), TableError> {
        let found = object::read::<EntitySlot>(&*self.bucket.store, path).await;
        Ok(match found.map_err(failed)? {
            Some((slot, version)) => (slot, Some(version)),
            None => (EntitySlot::settled((None, String::new())), None),
        })
    }

    /// What a lock comes to: for a reader (`writer` false), a pending intent shows the old
    /// value; for a writer, a pending intent older than [`BucketTables::stale_after`] is aborted
    /// first.
    async fn settle(
        &self,
        place: &Place,
        slot: &EntitySlot,
        writer: bool,
    ) -> Result<Settled, TableError> {
        let Some(lock) = &slot.lock else {
            return Ok(Settled::Value(slot.current()));
        };
        let path = place.intent(&lock.intent);
        let found = object::read::<Intent>(&*self.bucket.store, &path).await;
        let Some((intent, version)) = found.map_err(failed)? else {
            return Ok(Settled::Gone);
        };
        if intent.state == State::Committed && !intent.sealed {
            // Its partitions' epochs move before anyone shows its values under way.
            self.seal(place, &path, &intent, version.clone()).await?;
        }
        let state = match intent.state {
            State::Pending
                if writer && now_millis() > intent.started + self.stale.as_millis() as u64 =>
            {
                let aborted = Intent {
                    state: State::Aborted,
                    ..intent
                };
                let written =
                    object::write_if(&*self.bucket.store, &path, &aborted, Some(version)).await;
                if written.map_err(failed)?.is_none() {
                    // Its commit or another writer came first: ask again.
                    return Ok(Settled::Pending);
                }
                State::Aborted
            }
            state => state,
        };
        Ok(match state {
            State::Committed => Settled::Value(slot.committed(lock)),
            State::Aborted => Settled::Value(slot.current()),
            State::Pending if writer => Settled::Pending,
            State::Pending => Settled::Value(slot.current()),
        })
    }

    /// Moves the epoch of each partition of the committed intent at `path`, then marks it
    /// sealed: done by its commit before its entities take their values, and by whoever finds
    /// one of its locks first. A scan reads a partition's epoch before and after its page: a
    /// batch that committed under it moved the epoch (if its commit stalled before, the scan
    /// found its lock and moved it), and the page is read again. Moving it twice only costs a
    /// scan a read again.
    async fn seal(
        &self,
        place: &Place,
        path: &Path,
        intent: &Intent,
        version: UpdateVersion,
    ) -> Result<(), TableError> {
        for pk in &intent.partitions {
            let epoch = place.epoch(pk);
            let moved = object::take_number(&*self.bucket.store, &epoch, u64::MAX).await;
            moved.map_err(failed)?;
        }
        let sealed = Intent {
            state: intent.state,
            started: intent.started,
            partitions: intent.partitions.clone(),
            sealed: true,
        };
        // Lost: sealed by someone else meanwhile.
        let written = object::write_if(&*self.bucket.store, path, &sealed, Some(version)).await;
        written.map_err(failed)?;
        Ok(())
    }

    /// The epoch of partition `pk`: how many batches committed in it.
    async fn epoch(&self, place: &Place, pk: &str) -> Result<u64, TableError> {
        let found = object::read::<u64>(&*self.bucket.store, &place.epoch(pk)).await;
        Ok(found.map_err(failed)?.map_or(0, |(n, _)| n))
    }

    /// The entity under `key` as readers see it.
    async fn visible(&self, place: &Place, key: &EntityKey) -> Result<Life, TableError> {
        let path = place.entity(key);
        loop {
            let (slot, _) = self.read_entity(&path).await?;
            match self.settle(place, &slot, false).await? {
                Settled::Value(life) => return Ok(life),
                Settled::Gone | Settled::Pending => {}
            }
        }
    }

    /// Reads the entity under `key` for a writer: its object's version and the entity, with no
    /// lock on it (a decided one settled, a pending one waited for).
    async fn unlocked(
        &self,
        place: &Place,
        key: &EntityKey,
    ) -> Result<(Life, Option<UpdateVersion>), TableError> {
        let path = place.entity(key);
        let mut waits = object::waits();
        loop {
            let (slot, version) = self.read_entity(&path).await?;
            if slot.lock.is_none() {
                return Ok((slot.current(), version));
            }
            match self.settle(place, &slot, true).await? {
                Settled::Value(life) => {
                    // Settle it for everyone: the value, and no lock.
                    let settled = EntitySlot::settled(life);
                    let written =
                        object::write_if(&*self.bucket.store, &path, &settled, version).await;
                    if written.map_err(failed)?.is_some() {
                        self.forget(place, key, &slot, &settled.incarnation).await?;
                    }
                }
                Settled::Gone => {}
                Settled::Pending => object::wait(&mut waits).await,
            }
        }
    }

    /// Removes the index entries of the lives `before` (an entity's object as it was) had or
    /// promised that the object written over it, living `after`, does not keep.
    async fn forget(
        &self,
        place: &Place,
        key: &EntityKey,
        before: &EntitySlot,
        after: &str,
    ) -> Result<(), TableError> {
        for life in before.abandoned(after) {
            let entry = place.entry(key, &life);
            place.index.remove(&entry).await.map_err(failed)?;
        }
        Ok(())
    }

    /// A commit of one change: one conditional PUT of its entity; a creation enters the life
    /// it begins in the index first, a deletion removes the one it ended after.
    async fn commit_one(&self, place: &Place, change: &Change) -> Result<(), TableError> {
        let path = place.entity(&change.key);
        let mut waits = object::waits();
        loop {
            let ((found, life), version) = self.unlocked(place, &change.key).await?;
            if !satisfies(change.expected, found.as_ref()) {
                let present = found.is_some();
                return Err(TableError::Conflict { index: 0, present });
            }
            let incarnation = match (&found, &change.write) {
                (_, None) => String::new(),
                (Some(_), Some(_)) => life.clone(),
                (None, Some(_)) => object::incarnation(),
            };
            let begun = (found.is_none() && change.write.is_some())
                .then(|| place.entry(&change.key, &incarnation));
            if let Some(entry) = &begun {
                place.index.add(entry).await.map_err(failed)?;
            }
            let slot = EntitySlot::settled((change.write.clone(), incarnation));
            let written = object::write_if(&*self.bucket.store, &path, &slot, version).await;
            if written.map_err(failed)?.is_some() {
                let before = EntitySlot::settled((found, life));
                self.forget(place, &change.key, &before, &slot.incarnation)
                    .await?;
                return Ok(());
            }
            if let Some(entry) = &begun {
                place.index.remove(entry).await.map_err(failed)?;
            }
            object::wait(&mut waits).await;
        }
    }

    /// A commit of several changes: all of them at the instant its intent commits, or none.
    /// Its entities are locked all at once; when another commit holds one of them, this try
    /// is abandoned and made again after a short wait (no commit waits holding locks, so none
    /// waits for another in a circle).
    async fn commit_many(&self, place: &Place, changes: &[Change]) -> Result<(), TableError> {
        // The value each key will have: the last change's to it.
        let mut writes: BTreeMap<&EntityKey, &Option<Entity>> = BTreeMap::new();
        for change in changes {
            writes.insert(&change.key, &change.write);
        }
        let keys: Vec<&EntityKey> = writes.keys().copied().collect();
        let mut partitions: Vec<String> = keys.iter().map(|(pk, _)| pk.clone()).collect();
        partitions.dedup();
        let mut waits = object::waits();
        loop {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let intent_path = place.intent(&id);
            let intent = Intent {
                state: State::Pending,
                started: now_millis(),
                partitions: partitions.clone(),
                sealed: false,
            };
            let written = object::write_if(&*self.bucket.store, &intent_path, &intent, None).await;
            let Some(version) = written.map_err(failed)? else {
                continue;
            };
            let locks = (writes.iter()).map(|(key, write)| self.lock(place, key, &id, write));
            let locked = futures_util::future::try_join_all(locks).await;
            // What each lock wrote: its entity's object and the version of it.
            let mut held = vec![None; keys.len()];
            let (outcome, busy) = match locked {
                Err(error) => (Err(error), false),
                Ok(found) => {
                    let busy = found.iter().any(Option::is_none);
                    let found: Vec<_> = found.into_iter().flatten().collect();
                    let values = (keys.iter().copied())
                        .zip(found.iter().map(|(slot, _)| slot.entity.clone()));
                    let outcome = first_conflict(changes, &values.collect());
                    if !busy {
                        held = found.into_iter().map(Some).collect();
                    }
                    (if busy { Ok(()) } else { outcome }, busy)
                }
            };
            // A scan that kept seeing batches commit under it holds them off for a while.
            let busy = busy || (outcome.is_ok() && self.held_off(place, &partitions).await?);
            let state = if outcome.is_ok() && !busy {
                State::Committed
            } else {
                State::Aborted
            };
            // The instant of the commit (or of its abort). Lost only to a writer that judged
            // this intent stale and aborted it: undone, and tried again.
            let decided = Intent { state, ..intent };
            let written =
                object::write_if(&*self.bucket.store, &intent_path, &decided, Some(version));
            let decided_version = written.await.map_err(failed)?;
            let won = decided_version.is_some();
            if let Some(version) = decided_version
                && state == State::Committed
            {
                self.seal(place, &intent_path, &decided, version).await?;
            }
            let committed = won && state == State::Committed;
            // Lost, the intent was aborted by another writer.
            let decided = if won { state } else { State::Aborted };
            let settled = keys.iter().copied().zip(held).collect();
            self.release(place, settled, &id, decided).await?;
            let _ = self.bucket.store.delete(&intent_path).await;
            if committed {
                return Ok(());
            }
            // A change that found otherwise than it expected, or a failure: nothing applied.
            outcome?;
            object::wait(&mut waits).await;
        }
    }

    /// Locks the entity under `key` for the intent `id`, to take `write` when it commits: the
    /// object the lock wrote (the entity as it found it) and its version, or `None` when
    /// another commit holds it now. A creation enters the life it would begin (named by the
    /// intent) in the index before its lock: before the intent can commit.
    async fn lock(
        &self,
        place: &Place,
        key: &EntityKey,
        id: &str,
        write: &Option<Entity>,
    ) -> Result<Option<Held>, TableError> {
        let path = place.entity(key);
        loop {
            let (slot, version) = self.read_entity(&path).await?;
            let (entity, incarnation) = match &slot.lock {
                None => slot.current(),
                // A decided commit's lock is settled and replaced in the same write.
                Some(_) => match self.settle(place, &slot, true).await? {
                    Settled::Value(life) => life,
                    Settled::Gone => continue,
                    Settled::Pending => return Ok(None),
                },
            };
            if entity.is_none() && write.is_some() {
                place
                    .index
                    .add(&place.entry(key, id))
                    .await
                    .map_err(failed)?;
            }
            let lock = Lock {
                intent: id.to_owned(),
                write: write.clone(),
            };
            let ours = EntitySlot {
                entity,
                incarnation,
                lock: Some(lock),
            };
            let written = object::write_if(&*self.bucket.store, &path, &ours, version).await;
            if let Some(version) = written.map_err(failed)? {
                // What a decided lock settled here ended.
                self.forget(place, key, &slot, &ours.incarnation).await?;
                return Ok(Some((ours, version)));
            }
        }
    }

    /// Drops the locks of the intent `id`, decided `state`, each entity taking its value: from
    /// the object and the version its lock wrote when this commit locked it (one conditional
    /// PUT, unless someone settled it first); otherwise read, in case a lock landed (a batch
    /// holds at most 100). The index loses the lives the commit ended, or would have begun.
    async fn release(
        &self,
        place: &Place,
        keys: Vec<(&EntityKey, Option<Held>)>,
        id: &str,
        state: State,
    ) -> Result<(), TableError> {
        let releases =
            (keys.into_iter()).map(|(key, held)| self.release_one(place, key, held, id, state));
        futures_util::future::try_join_all(releases).await?;
        Ok(())
    }

    async fn release_one(
        &self,
        place: &Place,
        key: &EntityKey,
        mut held: Option<Held>,
        id: &str,
        state: State,
    ) -> Result<(), TableError> {
        let path = place.entity(key);
        loop {
            let (locked, version) = match held.take() {
                Some((slot, version)) => (slot, Some(version)),
                None => self.read_entity(&path).await?,
            };
            let Some(lock) = locked.lock.as_ref().filter(|lock| lock.intent == id) else {
                // Never locked, or settled by someone else already.
                return Ok(());
            };
            let life = match state {
                State::Committed => locked.committed(lock),
                State::Pending | State::Aborted => locked.current(),
            };
            let settled = EntitySlot::settled(life);
            let written = object::write_if(&*self.bucket.store, &path, &settled, version).await;
            if written.map_err(failed)?.is_some() {
                return self.forget(place, key, &locked, &settled.incarnation).await;
            }
        }
    }

    /// A page of a scan, each partition of it as it was at one instant: the partition's epoch
    /// read before its entities are listed and read, and again after the page; read again when
    /// a batch committed in one of them meanwhile.
    ///
    /// Under batches that keep committing in its partitions, a scan would read again for ever:
    /// after [`OPTIMISTIC`] tries it holds new batches off its partitions (a barrier object
    /// each, which a batch reads before it commits, and which expires with the scan's time),
    /// so that the next try sees only the batches already under way land.
    async fn scan_unbounded(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        let place = self.live(table).await?;
        let mut waits = object::waits();
        let mut barriers: Vec<String> = Vec::new();
        for tries in 1.. {
            let (page, epochs) = self.read_page(&place, scan).await?;
            let mut moved = Vec::new();
            for (pk, before) in epochs {
                if self.epoch(&place, &pk).await? != before {
                    moved.push(pk);
                }
            }
            if moved.is_empty() {
                for pk in &barriers {
                    let _ = self.bucket.store.delete(&place.barrier(pk)).await;
                }
                return Ok(page);
            }
            if tries >= OPTIMISTIC {
                let until = now_millis() + self.bucket.timeout.as_millis() as u64;
                for pk in moved {
                    let path = place.barrier(&pk);
                    let json = serde_json::to_vec(&until).map_err(|e| generic(e.to_string()))?;
                    (self.bucket.store.put(&path, PutPayload::from(json)).await)
                        .map_err(|e| failed(e.into()))?;
                    barriers.push(pk);
                }
            }
            object::wait(&mut waits).await;
        }
        unreachable!("a scan tries until it reads a page whole, or its time runs out")
    }

    /// Whether a scan holds batches off one of `partitions` now.
    async fn held_off(&self, place: &Place, partitions: &[String]) -> Result<bool, TableError> {
        for pk in partitions {
            let found = object::read::<u64>(&*self.bucket.store, &place.barrier(pk)).await;
            if found
                .map_err(failed)?
                .is_some_and(|(until, _)| until > now_millis())
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The index entries of a table's incarnation from `(pk, rk)` on, in order.
    fn listing(
        &self,
        place: &Place,
        (pk, rk): (&str, &str),
    ) -> futures_util::stream::BoxStream<'static, Result<Entry, TableError>> {
        // The store lists after an offset, in order: just before the start's entries.
        let offset = match (pk.is_empty(), rk.is_empty()) {
            (true, true) => None,
            (_, true) => Some(vec![name::open(pk)]),
            _ => Some(vec![name::encode(pk), name::open(rk)]),
        };
        place.index.list(offset.as_deref()).map_err(failed).boxed()
    }

    /// A page of a scan, and the epoch of each partition it read, taken before its entities
    /// were listed: on reaching a partition, its epoch is read, then the listing starts again
    /// at it. The entities the index lists are read together, up to what the page still
    /// needs; each is kept if it lives in the life its entry names.
    async fn read_page(
        &self,
        place: &Place,
        scan: Scan<'_>,
    ) -> Result<(Vec<Entity>, Vec<(String, u64)>), TableError> {
        let start = scan.start();
        let mut from = start.clone();
        let mut listing = self.listing(place, (&from.0, &from.1));
        let mut page = Vec::new();
        let mut epochs: Vec<(String, u64)> = Vec::new();
        let mut listed = false;
        while page.len() < scan.limit && !listed {
            let mut next = Vec::new();
            while next.len() < scan.limit - page.len() {
                let Some(entry) = listing.try_next().await? else {
                    listed = true;
                    break;
                };
                let key = key_of(&entry)?;
                if key < from {
                    // A store that lists from the start all the same (an emulator).
                    continue;
                }
                if epochs.last().is_none_or(|(current, _)| *current != key.0) {
                    if scan.partition.is_some_and(|p| p != key.0) {
                        listed = true;
                        break;
                    }
                    let epoch = self.epoch(place, &key.0).await?;
                    let rk = if key.0 == start.0 {
                        start.1.clone()
                    } else {
                        String::new()
                    };
                    from = (key.0.clone(), rk);
                    listing = self.listing(place, (&from.0, &from.1));
                    epochs.push((key.0, epoch));
                    continue;
                }
                next.push((key, entry));
            }
            let reads = next.into_iter().map(|(key, entry)| async move {
                let (entity, life) = self.visible(place, &key).await?;
                let found = entity.map(|entity| (entity, life));
                place.index.confirm(&entry, found).await.map_err(failed)
            });
            let read: Vec<_> = futures_util::stream::iter(reads)
                .buffered(object::READS)
                .try_collect()
                .await?;
            page.extend(read.into_iter().flatten());
        }
        Ok((page, epochs))
    }
}

/// The key of the entity an index entry names.
fn key_of(entry: &Entry) -> Result<EntityKey, TableError> {
    match entry.names().as_deref() {
        Some([pk, rk]) => Ok((pk.clone(), rk.clone())),
        _ => Err(generic(format!(
            "{:?}: not an entity's entry",
            entry.segments
        ))),
    }
}

/// The first change, in the order given, that does not find what it expects.
fn first_conflict(
    changes: &[Change],
    found: &BTreeMap<&EntityKey, Option<Entity>>,
) -> Result<(), TableError> {
    for (index, change) in changes.iter().enumerate() {
        let current = found.get(&change.key).and_then(Option::as_ref);
        if !satisfies(change.expected, current) {
            let present = current.is_some();
            return Err(TableError::Conflict { index, present });
        }
    }
    Ok(())
}

fn generic(message: String) -> TableError {
    TableError::Generic {
        backend: "bucket",
        message,
    }
}

fn failed(failure: Failure) -> TableError {
    generic(failure.to_string())
}

impl Tables for BucketTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        self.within(async {
            let path = self.table_path(name);
            let mut waits = object::waits();
            loop {
                let found = object::read::<TableSlot>(&*self.bucket.store, &path).await;
                let version = match found.map_err(failed)? {
                    Some((
                        TableSlot {
                            incarnation: Some(_),
                        },
                        _,
                    )) => return Ok(false),
                    Some((_, version)) => Some(version),
                    None => None,
                };
                let incarnation = object::incarnation();
                let entry = self.table_entry(name, &incarnation);
                let index = self.tables_index();
                index.add(&entry).await.map_err(failed)?;
                let slot = TableSlot {
                    incarnation: Some(incarnation),
                };
                let written = object::write_if(&*self.bucket.store, &path, &slot, version).await;
                if written.map_err(failed)?.is_some() {
                    return Ok(true);
                }
                index.remove(&entry).await.map_err(failed)?;
                object::wait(&mut waits).await;
            }
        })
        .await
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        self.within(async {
            let path = self.table_path(name);
            let mut waits = object::waits();
            let incarnation = loop {
                let found = object::read::<TableSlot>(&*self.bucket.store, &path).await;
                let (incarnation, version) = match found.map_err(failed)? {
                    Some((
                        TableSlot {
                            incarnation: Some(i),
                        },
                        version,
                    )) => (i, version),
                    _ => return Ok(false),
                };
                let tombstone = TableSlot { incarnation: None };
                if object::write_if(&*self.bucket.store, &path, &tombstone, Some(version))
                    .await
                    .map_err(failed)?
                    .is_some()
                {
                    break incarnation;
                }
                object::wait(&mut waits).await;
            };
            let entry = self.table_entry(name, &incarnation);
            self.tables_index().remove(&entry).await.map_err(failed)?;
            // Out of sight since the tombstone: what the incarnation held goes (a crash
            // before the end leaves it unread).
            let place = self.place(name, &incarnation);
            let held = [
                place.entities,
                place.index.path().clone(),
                place.intents,
                place.epochs,
                place.barriers,
            ];
            for path in held {
                object::remove_all(&*self.bucket.store, &path)
                    .await
                    .map_err(failed)?;
            }
            Ok(true)
        })
        .await
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        self.within(async {
            let tables = self.bucket.path(&["t"]);
            let index = self.tables_index();
            let offset = (!after.is_empty()).then(|| [name::encode(after)]);
            let confirm = |entry: Entry| {
                let (index, tables) = (&index, &tables);
                async move {
                    let name = entry.name().ok_or_else(|| {
                        generic(format!("{:?}: not a table's entry", entry.segments))
                    })?;
                    let found =
                        object::read::<TableSlot>(&*self.bucket.store, &entry.slot(tables)).await;
                    let life = found
                        .map_err(failed)?
                        .and_then(|(slot, _)| slot.incarnation);
                    let found = life.map(|life| ((), life));
                    let confirmed = index.confirm(&entry, found).await.map_err(failed)?;
                    Ok(confirmed.and((name.as_str() > after).then_some(name)))
                }
            };
            (index.list(offset.as_ref().map(|o| o.as_slice())))
                .map_err(failed)
                .map_ok(confirm)
                .try_buffered(object::READS)
                .try_filter_map(|name| async move { Ok(name) })
                .take(limit)
                .try_collect()
                .await
        })
        .await
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        self.within(async {
            let place = self.live(table).await?;
            Ok(self.visible(&place, key).await?.0)
        })
        .await
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        self.within(self.scan_unbounded(table, scan)).await
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        self.within(async {
            let place = self.live(table).await?;
            match changes {
                [] => Ok(()),
                [change] => self.commit_one(&place, change).await,
                _ => self.commit_many(&place, changes).await,
            }
        })
        .await
    }
}
