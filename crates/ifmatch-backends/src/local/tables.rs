//! The Table front's entities on the local disk, in one redb database (`DATA/tables.redb`):
//! a table `tables` of the table names, and a table `t/{name}` per table of its entities,
//! keyed by (PartitionKey, RowKey), their JSON as values. redb gives what the Table front
//! needs and a file of our own would have to build: keys in order (a query reads a key
//! range), transactions over many keys (a batch is one), and crash safety (a commit is
//! durable before it returns, with `Durability::Immediate`, its default; a crash leaves the
//! last commit whole). A commit is one write transaction: redb runs them one at a time, so
//! the version checks and the writes are one atomic step.
//!
//! Commits that arrive while one is being written wait, and are then written together, each
//! checked and applied in turn, in one transaction and one sync of the disk (a group commit:
//! under many writers, a sync carries many of them where it carried one). Each change is
//! written and checked against what its write replaced (one descent of the tree, not a read
//! and a write), and a check that fails puts back what its commit had replaced, so that it
//! leaves the others of the group as they were. A failure of the disk while writing fails the
//! group, whose commits are then written one at a time, so that it is only its own commit's.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use ifmatch_table::{
    Change, DateTime, Entity, EntityKey, Expected, Scan, TableError, Tables, satisfied_by,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

/// The most memory redb's page cache takes: reads past it go to the file (the kernel's page
/// cache), so a table of any size costs the server a bounded amount.
const CACHE_BYTES: usize = 64 << 20;

/// The names of the tables.
const NAMES: TableDefinition<'static, &str, ()> = TableDefinition::new("tables");

/// A table's entities, under the redb table `t/{name}`.
type Entities<'a> = TableDefinition<'a, (&'static str, &'static str), &'static [u8]>;
/// A table's entities, open for reading.
type ReadEntities = redb::ReadOnlyTable<(&'static str, &'static str), &'static [u8]>;

/// The most commits one transaction carries.
const MOST_GROUPED: usize = 128;

/// Tables in a redb database on the local disk.
#[derive(Clone)]
pub struct LocalTables {
    db: Arc<Database>,
    commits: Arc<Mutex<Waiting>>,
}

/// The commits waiting to be written, and whether a writer is at work (which takes them).
#[derive(Default)]
struct Waiting {
    commits: Vec<Queued>,
    writing: bool,
}

/// A commit waiting to be written, and where its outcome goes.
struct Queued {
    table: String,
    changes: Vec<Change>,
    answer: tokio::sync::oneshot::Sender<Result<(), TableError>>,
}

impl std::fmt::Debug for LocalTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTables").finish_non_exhaustive()
    }
}

impl LocalTables {
    /// Opens (or creates) the database at `path`, with redb's page cache held to
    /// [`CACHE_BYTES`] (its default grows to 1 GiB).
    pub fn open(path: &Path) -> Result<Self, TableError> {
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(failed)?;
        Ok(Self {
            db: Arc::new(db),
            commits: Arc::default(),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, TableError> + Send + 'static,
    ) -> Result<T, TableError> {
        let db = self.db.clone();
        (tokio::task::spawn_blocking(move || f(&db)).await).map_err(failed)?
    }

    /// Runs `f` in a write transaction, committed (durably) when `f` succeeds, dropped, so
    /// aborted with nothing written, when it fails.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<T, TableError> + Send + 'static,
    ) -> Result<T, TableError> {
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(failed)?;
            let out = f(&tx)?;
            tx.commit().map_err(failed)?;
            Ok(out)
        })
        .await
    }
}

/// The redb table of `name`'s entities.
fn entities(name: &str) -> String {
    format!("t/{name}")
}

fn failed(error: impl std::fmt::Display) -> TableError {
    TableError::Generic {
        backend: "local tables",
        message: error.to_string(),
    }
}

fn decode(bytes: &[u8]) -> Result<Entity, TableError> {
    serde_json::from_slice(bytes).map_err(failed)
}

/// The version of a stored entity: its `timestamp`, its properties skipped, not built (a
/// commit's check needs no more).
fn version(bytes: &[u8]) -> Result<DateTime, TableError> {
    #[derive(serde::Deserialize)]
    struct Stamped {
        timestamp: DateTime,
    }
    let stamped: Stamped = serde_json::from_slice(bytes).map_err(failed)?;
    Ok(stamped.timestamp)
}

/// Whether the table `name` is there, in `names`.
fn exists(names: &impl ReadableTable<&'static str, ()>, name: &str) -> Result<bool, TableError> {
    Ok(names.get(name).map_err(failed)?.is_some())
}

impl Tables for LocalTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        let name = name.to_owned();
        self.write(move |tx| {
            let mut names = tx.open_table(NAMES).map_err(failed)?;
            let created = !exists(&names, &name)?;
            names.insert(name.as_str(), ()).map_err(failed)?;
            tx.open_table(Entities::new(&entities(&name)))
                .map_err(failed)?;
            Ok(created)
        })
        .await
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        let name = name.to_owned();
        self.write(move |tx| {
            let mut names = tx.open_table(NAMES).map_err(failed)?;
            let deleted = names.remove(name.as_str()).map_err(failed)?.is_some();
            tx.delete_table(Entities::new(&entities(&name)))
                .map_err(failed)?;
            Ok(deleted)
        })
        .await
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        let after = after.to_owned();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(failed)?;
            let names = match tx.open_table(NAMES) {
                Ok(names) => names,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(error) => return Err(failed(error)),
            };
            let mut out = Vec::new();
            for entry in names.range(after.as_str()..).map_err(failed)? {
                let name = entry.map_err(failed)?.0.value().to_owned();
                if name != after {
                    out.push(name);
                }
                if out.len() == limit {
                    break;
                }
            }
            Ok(out)
        })
        .await
    }

    /// Read where it is asked, not on the blocking pool: a point read is a few microseconds
    /// from redb's page cache (or the kernel's), where a trip to the pool and back costs two
    /// task switches, most of a small request's CPU (docs/figures.md). Scans, which read up to
    /// a page of entities, and commits, which sync, go to the pool.
    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        let tx = self.db.begin_read().map_err(failed)?;
        entity_at(&open_read(&tx, table)?, key)
    }

    async fn get_many(
        &self,
        table: &str,
        keys: &[EntityKey],
    ) -> Result<Vec<Option<Entity>>, TableError> {
        let tx = self.db.begin_read().map_err(failed)?;
        let entities = open_read(&tx, table)?;
        keys.iter().map(|key| entity_at(&entities, key)).collect()
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        let table = table.to_owned();
        let partition = scan.partition.map(str::to_owned);
        let from = scan.start();
        let limit = scan.limit;
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(failed)?;
            let entities = open_read(&tx, &table)?;
            let mut out = Vec::new();
            let start = (from.0.as_str(), from.1.as_str());
            for entry in entities.range(start..).map_err(failed)? {
                if out.len() == limit {
                    break;
                }
                let (key, bytes) = entry.map_err(failed)?;
                if partition.as_deref().is_some_and(|p| key.value().0 != p) {
                    break;
                }
                out.push(decode(bytes.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// Waits in line with the commits that arrive while one is written (see the module's
    /// notes); the commit runs to its end even when the caller stops waiting for it.
    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        let (answer, outcome) = tokio::sync::oneshot::channel();
        let start = {
            let mut waiting = self.commits.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.commits.push(Queued {
                table: table.to_owned(),
                changes: changes.to_vec(),
                answer,
            });
            !std::mem::replace(&mut waiting.writing, true)
        };
        if start {
            let (db, commits) = (self.db.clone(), self.commits.clone());
            tokio::task::spawn_blocking(move || write_waiting(db, &commits));
        }
        outcome
            .await
            .map_err(|_| failed("the writer of commits stopped"))?
    }
}

/// Writes the waiting commits, a group at a time, until none waits. The database is let go
/// before the last group learns its outcome, so that a caller who drops its handle after its
/// commit may open the file again at once.
fn write_waiting(db: Arc<Database>, commits: &Mutex<Waiting>) {
    // A panic below leaves no writer: the next commit starts one (those of the group
    // learn of it from their dropped answers).
    struct Stopped<'a>(&'a Mutex<Waiting>);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .writing = false;
            }
        }
    }
    let _stopped = Stopped(commits);
    let mut db = Some(db);
    while let Some(open) = db.take() {
        let group: Vec<Queued> = {
            let mut waiting = commits.lock().unwrap_or_else(PoisonError::into_inner);
            let most = waiting.commits.len().min(MOST_GROUPED);
            waiting.commits.drain(..most).collect()
        };
        let outcomes = match write_group(&open, &group) {
            Ok(outcomes) => outcomes,
            Err(error) if group.len() == 1 => vec![Err(error)],
            // Each alone, so that the failure is only its own commit's.
            Err(_) => (group.iter())
                .map(|queued| {
                    let alone = write_group(&open, std::slice::from_ref(queued));
                    alone.and_then(|mut outcomes| outcomes.remove(0))
                })
                .collect(),
        };
        let more = {
            let mut waiting = commits.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.writing = !waiting.commits.is_empty();
            waiting.writing
        };
        if more {
            db = Some(open);
        } else {
            drop(open);
        }
        for (queued, outcome) in group.into_iter().zip(outcomes) {
            let _ = queued.answer.send(outcome);
        }
    }
}

/// Writes `group` in one transaction, each commit checked then applied in turn: each one's
/// outcome (a check that failed wrote nothing of it), or the failure of the whole.
fn write_group(db: &Database, group: &[Queued]) -> Result<Vec<Result<(), TableError>>, TableError> {
    let tx = db.begin_write().map_err(failed)?;
    let mut outcomes = Vec::with_capacity(group.len());
    for queued in group {
        outcomes.push(apply(&tx, &queued.table, &queued.changes)?);
    }
    tx.commit().map_err(failed)?;
    Ok(outcomes)
}

/// Writes `changes` to `table` in `tx`, each checked against what it replaced: `Ok(Err(_))`
/// when a check failed (what the commit wrote is put back), `Err(_)` when the transaction
/// failed (it must be dropped).
fn apply(
    tx: &redb::WriteTransaction,
    table: &str,
    changes: &[Change],
) -> Result<Result<(), TableError>, TableError> {
    let names = tx.open_table(NAMES).map_err(failed)?;
    if !exists(&names, table)? {
        return Ok(Err(TableError::TableNotFound(table.to_owned())));
    }
    let name = entities(table);
    let mut entities = tx.open_table(Entities::new(&name)).map_err(failed)?;
    // What each change written so far replaced, to put back if a check fails.
    let mut replaced: Vec<(&EntityKey, Option<Vec<u8>>)> = Vec::new();
    for (index, change) in changes.iter().enumerate() {
        let key = (change.key.0.as_str(), change.key.1.as_str());
        let old = match &change.write {
            Some(entity) => {
                let json = serde_json::to_vec(entity).map_err(failed)?;
                entities.insert(key, json.as_slice())
            }
            None => entities.remove(key),
        }
        .map_err(failed)?;
        let found = match (&old, change.expected) {
            (None, _) => None,
            (Some(old), Expected::Version(_)) => Some(version(old.value())?),
            // The others ask only whether there was one: its version is not read.
            (Some(_), _) => Some(DateTime::from_unix(0, 0)),
        };
        let satisfied = satisfied_by(change.expected, found);
        if satisfied && index + 1 == changes.len() {
            break;
        }
        replaced.push((&change.key, old.map(|bytes| bytes.value().to_vec())));
        if !satisfied {
            for (key, bytes) in replaced.into_iter().rev() {
                let key = (key.0.as_str(), key.1.as_str());
                match bytes {
                    Some(bytes) => entities.insert(key, bytes.as_slice()).map(drop),
                    None => entities.remove(key).map(drop),
                }
                .map_err(failed)?;
            }
            let present = found.is_some();
            return Ok(Err(TableError::Conflict { index, present }));
        }
    }
    Ok(Ok(()))
}

/// The entity under `key` in `entities`, if there is one.
fn entity_at(entities: &ReadEntities, key: &EntityKey) -> Result<Option<Entity>, TableError> {
    let found = (entities.get((key.0.as_str(), key.1.as_str()))).map_err(failed)?;
    found.map(|bytes| decode(bytes.value())).transpose()
}

/// `table`'s entities for reading; `TableNotFound` when it is not there.
fn open_read(tx: &redb::ReadTransaction, table: &str) -> Result<ReadEntities, TableError> {
    let names = match tx.open_table(NAMES) {
        Ok(names) => names,
        Err(redb::TableError::TableDoesNotExist(_)) => {
            return Err(TableError::TableNotFound(table.to_owned()));
        }
        Err(error) => return Err(failed(error)),
    };
    if !exists(&names, table)? {
        return Err(TableError::TableNotFound(table.to_owned()));
    }
    let name = entities(table);
    tx.open_table(Entities::new(&name)).map_err(failed)
}
