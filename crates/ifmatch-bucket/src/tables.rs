//! The Table front's entities (and the Cosmos front's documents, which it keeps as entities)
//! in an object store: each entity one small JSON object changed by conditional PUT, and a
//! commit of several entities made atomic by an intent that every reader honours.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::TryStreamExt;
use ifmatch_table::{Change, Entity, EntityKey, Scan, TableError, Tables, satisfies};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::name;
use crate::object::{self, Backoff, Failure};

/// Tables and their entities in a bucket, for a fleet of `ifmatch serve` instances that shares
/// nothing but the bucket (`--backend s3://...`).
///
/// Layout, under a prefix:
///
/// - `t/<table>`: the table, and the *incarnation* its entities are kept under (new each time
///   the table is created); a deleted table leaves a tombstone, so deleting it is one write;
/// - `e/<table>/<incarnation>/<PartitionKey>/<RowKey>`: an entity (keys encoded to sort as
///   they do, so that the store's ordered listing scans in key order); a deleted entity leaves
///   a tombstone (object_store offers no conditional delete);
/// - `i/<table>/<incarnation>/<id>`: the intent of a commit of several entities while it runs.
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
/// A scan's page is read as it was at one instant: read, then checked by a second listing of
/// its range and a HEAD of each object it depended on, and read again if anything changed
/// between; a page costs twice its objects' requests.
#[derive(Clone)]
pub struct BucketTables {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    timeout: Duration,
    stale: Duration,
}

impl std::fmt::Debug for BucketTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketTables")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// A table's object: the incarnation its entities are kept under; none once deleted.
#[derive(Debug, Serialize, Deserialize)]
struct TableSlot {
    incarnation: Option<String>,
}

/// An entity's object: its value (none: deleted), and the lock of a commit under way.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EntitySlot {
    entity: Option<Entity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock: Option<Lock>,
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
    intents: Path,
}

impl Place {
    fn entity(&self, (pk, rk): &EntityKey) -> Path {
        (self.entities.clone())
            .join(name::encode(pk))
            .join(name::encode(rk))
    }

    fn intent(&self, id: &str) -> Path {
        self.intents.clone().join(id)
    }
}

/// What an entity's lock comes to, its intent asked.
enum Settled {
    /// The entity's value: the lock's intent is decided (or pending, for a reader).
    Value(Option<Entity>),
    /// The intent is pending and may still commit: a writer waits.
    Pending,
    /// The intent is gone: the lock was dropped meanwhile; read the entity again.
    Gone,
}

impl BucketTables {
    /// Tables in `store` under `prefix` (say `ifmatch/tables`). Each operation is given up
    /// after 10 s.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: Path::from(prefix),
            timeout: Duration::from_secs(10),
            stale: Duration::from_secs(30),
        }
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
        self.timeout = timeout;
        self
    }

    async fn within<T>(
        &self,
        operation: impl Future<Output = Result<T, TableError>>,
    ) -> Result<T, TableError> {
        match tokio::time::timeout(self.timeout, operation).await {
            Ok(done) => done,
            Err(_) => Err(generic(format!(
                "the object store did not answer within {:?}",
                self.timeout
            ))),
        }
    }

    fn table_path(&self, table: &str) -> Path {
        self.prefix.clone().join("t").join(name::encode(table))
    }

    fn place(&self, table: &str, incarnation: &str) -> Place {
        let table = name::encode(table);
        let at = |kind: &str| {
            self.prefix
                .clone()
                .join(kind)
                .join(table.as_str())
                .join(incarnation)
        };
        Place {
            entities: at("e"),
            intents: at("i"),
        }
    }

    /// The place of a table that exists.
    async fn live(&self, table: &str) -> Result<Place, TableError> {
        let found = object::read::<TableSlot>(&*self.store, &self.table_path(table)).await;
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
        let found = object::read::<EntitySlot>(&*self.store, path).await;
        Ok(match found.map_err(failed)? {
            Some((slot, version)) => (slot, Some(version)),
            None => (
                EntitySlot {
                    entity: None,
                    lock: None,
                },
                None,
            ),
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
            return Ok(Settled::Value(slot.entity.clone()));
        };
        let path = place.intent(&lock.intent);
        let found = object::read::<Intent>(&*self.store, &path).await;
        let Some((intent, version)) = found.map_err(failed)? else {
            return Ok(Settled::Gone);
        };
        let state = match intent.state {
            State::Pending
                if writer && now_millis() > intent.started + self.stale.as_millis() as u64 =>
            {
                let aborted = Intent {
                    state: State::Aborted,
                    ..intent
                };
                let written = object::write_if(&*self.store, &path, &aborted, Some(version)).await;
                if !written.map_err(failed)? {
                    // Its commit or another writer came first: ask again.
                    return Ok(Settled::Pending);
                }
                State::Aborted
            }
            state => state,
        };
        Ok(match state {
            State::Committed => Settled::Value(lock.write.clone()),
            State::Aborted => Settled::Value(slot.entity.clone()),
            State::Pending if writer => Settled::Pending,
            State::Pending => Settled::Value(slot.entity.clone()),
        })
    }

    /// The entity at `path` as readers see it.
    async fn visible(&self, place: &Place, path: &Path) -> Result<Option<Entity>, TableError> {
        loop {
            let (slot, _) = self.read_entity(path).await?;
            match self.settle(place, &slot, false).await? {
                Settled::Value(entity) => return Ok(entity),
                Settled::Gone | Settled::Pending => {}
            }
        }
    }

    /// Reads the entity at `path` for a writer: its object's version and its value, with no
    /// lock on it (a decided one settled, a pending one waited for).
    async fn unlocked(
        &self,
        place: &Place,
        path: &Path,
    ) -> Result<(Option<Entity>, Option<UpdateVersion>), TableError> {
        let mut backoff = Backoff::default();
        loop {
            let (slot, version) = self.read_entity(path).await?;
            if slot.lock.is_none() {
                return Ok((slot.entity, version));
            }
            match self.settle(place, &slot, true).await? {
                Settled::Value(entity) => {
                    // Settle it for everyone: the value, and no lock.
                    let settled = EntitySlot { entity, lock: None };
                    let written = object::write_if(&*self.store, path, &settled, version).await;
                    written.map_err(failed)?;
                }
                Settled::Gone => {}
                Settled::Pending => backoff.wait().await,
            }
        }
    }

    async fn commit_one(&self, place: &Place, change: &Change) -> Result<(), TableError> {
        let path = place.entity(&change.key);
        let mut backoff = Backoff::default();
        loop {
            let (found, version) = self.unlocked(place, &path).await?;
            if !satisfies(change.expected, found.as_ref()) {
                let present = found.is_some();
                return Err(TableError::Conflict { index: 0, present });
            }
            let slot = EntitySlot {
                entity: change.write.clone(),
                lock: None,
            };
            let written = object::write_if(&*self.store, &path, &slot, version).await;
            if written.map_err(failed)? {
                return Ok(());
            }
            backoff.wait().await;
        }
    }

    /// A commit of several changes: all of them at the instant its intent commits, or none.
    async fn commit_many(&self, place: &Place, changes: &[Change]) -> Result<(), TableError> {
        loop {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let intent_path = place.intent(&id);
            let intent = Intent {
                state: State::Pending,
                started: now_millis(),
            };
            object::write_if(&*self.store, &intent_path, &intent, None)
                .await
                .map_err(failed)?;
            // The value each key will have: the last change's to it.
            let mut writes: BTreeMap<&EntityKey, &Option<Entity>> = BTreeMap::new();
            for change in changes {
                writes.insert(&change.key, &change.write);
            }
            let mut found: BTreeMap<&EntityKey, Option<Entity>> = BTreeMap::new();
            let mut locked: Vec<&EntityKey> = Vec::new();
            let mut outcome = Ok(());
            for (key, write) in &writes {
                match self.lock(place, key, &id, (*write).clone()).await {
                    Ok(entity) => {
                        found.insert(key, entity);
                        locked.push(key);
                    }
                    Err(error) => {
                        outcome = Err(error);
                        break;
                    }
                }
            }
            if outcome.is_ok() {
                outcome = first_conflict(changes, &found);
            }
            let state = if outcome.is_ok() {
                State::Committed
            } else {
                State::Aborted
            };
            let decided = Intent { state, ..intent };
            // The instant of the commit (or of its abort). Lost only to a writer that judged
            // this intent stale and aborted it: undone, and tried again.
            let version = object::read::<Intent>(&*self.store, &intent_path).await;
            let version = version.map_err(failed)?.map(|(_, version)| version);
            let won = match version {
                Some(version) => {
                    let written =
                        object::write_if(&*self.store, &intent_path, &decided, Some(version)).await;
                    written.map_err(failed)?
                }
                None => false,
            };
            let committed = won && state == State::Committed;
            self.release(place, &locked, &id).await?;
            let _ = self.store.delete(&intent_path).await;
            match (committed, outcome) {
                (true, _) => return Ok(()),
                (false, Err(error)) => return Err(error),
                (false, Ok(())) => {}
            }
        }
    }

    /// Locks the entity under `key` for the intent `id`, to take `write` when it commits; the
    /// entity's value as the lock found it.
    async fn lock(
        &self,
        place: &Place,
        key: &EntityKey,
        id: &str,
        write: Option<Entity>,
    ) -> Result<Option<Entity>, TableError> {
        let path = place.entity(key);
        let mut backoff = Backoff::default();
        loop {
            let (entity, version) = self.unlocked(place, &path).await?;
            let lock = Lock {
                intent: id.to_owned(),
                write: write.clone(),
            };
            let slot = EntitySlot {
                entity: entity.clone(),
                lock: Some(lock),
            };
            let written = object::write_if(&*self.store, &path, &slot, version).await;
            if written.map_err(failed)? {
                return Ok(entity);
            }
            backoff.wait().await;
        }
    }

    /// Drops the locks of the decided intent `id` on `keys`, each entity taking its value (a
    /// batch holds at most 100).
    async fn release(
        &self,
        place: &Place,
        keys: &[&EntityKey],
        id: &str,
    ) -> Result<(), TableError> {
        let releases = keys.iter().map(|key| self.release_one(place, key, id));
        futures_util::future::try_join_all(releases).await?;
        Ok(())
    }

    async fn release_one(
        &self,
        place: &Place,
        key: &EntityKey,
        id: &str,
    ) -> Result<(), TableError> {
        let path = place.entity(key);
        loop {
            let (slot, version) = self.read_entity(&path).await?;
            if slot.lock.as_ref().is_none_or(|lock| lock.intent != id) {
                // Settled by someone else already.
                return Ok(());
            }
            let Settled::Value(entity) = self.settle(place, &slot, false).await? else {
                return Ok(());
            };
            let settled = EntitySlot { entity, lock: None };
            let written = object::write_if(&*self.store, &path, &settled, version).await;
            if written.map_err(failed)? {
                return Ok(());
            }
        }
    }

    /// A page of a scan, as it was at one instant: read, then checked by a second listing of
    /// its range and a HEAD of every object it depended on (each entity's, each lock's intent);
    /// read again when anything changed between (a batch committed under the scan).
    async fn scan_unbounded(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        let place = self.live(table).await?;
        let mut backoff = Backoff::default();
        loop {
            let (page, seen) = self.read_page(&place, scan).await?;
            if self.unchanged(&place, scan, &seen).await? {
                return Ok(page);
            }
            backoff.wait().await;
        }
    }

    /// The objects of a scan's range, from its start, in order.
    fn listing(
        &self,
        place: &Place,
        scan: Scan<'_>,
    ) -> impl futures_util::Stream<Item = Result<object_store::ObjectMeta, TableError>> + use<>
    {
        let (pk, rk) = scan.start();
        // The store lists after an offset, in order: just before the start's object.
        let listing = match (pk.is_empty(), rk.is_empty()) {
            (true, true) => self.store.list(Some(&place.entities)),
            (_, true) => {
                let offset = place.entities.clone().join(name::open(&pk));
                self.store.list_with_offset(Some(&place.entities), &offset)
            }
            _ => {
                let offset = (place.entities.clone())
                    .join(name::encode(&pk))
                    .join(name::open(&rk));
                self.store.list_with_offset(Some(&place.entities), &offset)
            }
        };
        listing.map_err(|e| failed(e.into()))
    }

    /// A page of a scan, and what it saw: each object read and its ETag, and the ETag of the
    /// intent of each lock found.
    async fn read_page(
        &self,
        place: &Place,
        scan: Scan<'_>,
    ) -> Result<(Vec<Entity>, Seen), TableError> {
        let start = scan.start();
        let mut listing = self.listing(place, scan);
        let (mut page, mut seen) = (Vec::new(), Seen::default());
        while page.len() < scan.limit
            && let Some(meta) = listing.try_next().await?
        {
            let (entity, tags) = self.read_for_scan(place, &meta.location).await?;
            seen.objects.push((meta.location, tags.0));
            seen.intents.extend(tags.1);
            let Some(entity) = entity else { continue };
            let key = (entity.partition_key.clone(), entity.row_key.clone());
            if key < start {
                // A store that lists from the start all the same (an emulator).
                continue;
            }
            if scan.partition.is_some_and(|p| p != entity.partition_key) {
                break;
            }
            page.push(entity);
        }
        Ok((page, seen))
    }

    /// The entity at `path` as readers see it, with its object's ETag and, when locked, its
    /// intent's path and ETag.
    async fn read_for_scan(
        &self,
        place: &Place,
        path: &Path,
    ) -> Result<
        (
            Option<Entity>,
            (Option<String>, Option<(Path, Option<String>)>),
        ),
        TableError,
    > {
        loop {
            let (slot, version) = self.read_entity(path).await?;
            let tag = version.and_then(|v| v.e_tag);
            let Some(lock) = &slot.lock else {
                return Ok((slot.entity, (tag, None)));
            };
            let intent_path = place.intent(&lock.intent);
            let found = object::read::<Intent>(&*self.store, &intent_path).await;
            let Some((intent, version)) = found.map_err(failed)? else {
                // Its commit ended meanwhile: the lock is gone now.
                continue;
            };
            let entity = match intent.state {
                State::Committed => lock.write.clone(),
                State::Pending | State::Aborted => slot.entity.clone(),
            };
            return Ok((entity, (tag, Some((intent_path, version.e_tag)))));
        }
    }

    /// Whether what a page saw is still so: the same objects in its range, each with the same
    /// ETag, and each intent it asked with the same ETag.
    async fn unchanged(
        &self,
        place: &Place,
        scan: Scan<'_>,
        seen: &Seen,
    ) -> Result<bool, TableError> {
        let Some((last, _)) = seen.objects.last() else {
            return Ok(true);
        };
        let mut listing = self.listing(place, scan);
        let mut listed = Vec::with_capacity(seen.objects.len());
        while let Some(meta) = listing.try_next().await? {
            if meta.location > *last {
                break;
            }
            listed.push(meta.location);
        }
        let read: Vec<&Path> = seen.objects.iter().map(|(path, _)| path).collect();
        if listed.iter().collect::<Vec<_>>() != read {
            return Ok(false);
        }
        let objects = (seen.objects.iter()).map(|(path, tag)| (path, tag));
        let intents = (seen.intents.iter()).map(|(path, tag)| (path, tag));
        for (path, tag) in objects.chain(intents) {
            match self.store.head(path).await {
                Ok(meta) if meta.e_tag == *tag => {}
                Ok(_) | Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(error) => return Err(failed(error.into())),
            }
        }
        Ok(true)
    }
}

/// What a page of a scan read: the objects (with their ETags) and the intents of their locks.
#[derive(Debug, Default)]
struct Seen {
    objects: Vec<(Path, Option<String>)>,
    intents: Vec<(Path, Option<String>)>,
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

/// This instance's clock, in Unix milliseconds: what an intent's age is judged by.
fn now_millis() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}

impl Tables for BucketTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        self.within(async {
            let path = self.table_path(name);
            let mut backoff = Backoff::default();
            loop {
                let found = object::read::<TableSlot>(&*self.store, &path).await;
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
                let slot = TableSlot {
                    incarnation: Some(object::incarnation()),
                };
                if object::write_if(&*self.store, &path, &slot, version)
                    .await
                    .map_err(failed)?
                {
                    return Ok(true);
                }
                backoff.wait().await;
            }
        })
        .await
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        self.within(async {
            let path = self.table_path(name);
            let mut backoff = Backoff::default();
            let incarnation = loop {
                let found = object::read::<TableSlot>(&*self.store, &path).await;
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
                if object::write_if(&*self.store, &path, &tombstone, Some(version))
                    .await
                    .map_err(failed)?
                {
                    break incarnation;
                }
                backoff.wait().await;
            };
            // Out of sight since the tombstone: what the incarnation held goes (a crash
            // before the end leaves it unread).
            let place = self.place(name, &incarnation);
            for path in [place.entities, place.intents] {
                object::remove_all(&*self.store, &path)
                    .await
                    .map_err(failed)?;
            }
            Ok(true)
        })
        .await
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        self.within(async {
            let tables = self.prefix.clone().join("t");
            let listing = if after.is_empty() {
                self.store.list(Some(&tables))
            } else {
                let offset = tables.clone().join(name::encode(after));
                self.store.list_with_offset(Some(&tables), &offset)
            };
            let mut listing = listing.map_err(|e| failed(e.into()));
            let mut out = Vec::new();
            while out.len() < limit
                && let Some(meta) = listing.try_next().await?
            {
                let found = object::read::<TableSlot>(&*self.store, &meta.location).await;
                let live = matches!(
                    found.map_err(failed)?,
                    Some((
                        TableSlot {
                            incarnation: Some(_)
                        },
                        _
                    ))
                );
                let name = meta.location.filename().and_then(name::decode);
                if let (true, Some(name)) = (live, name)
                    && name.as_str() > after
                {
                    out.push(name);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        self.within(async {
            let place = self.live(table).await?;
            self.visible(&place, &place.entity(key)).await
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
