//! What a backend of the Table front offers: tables, and entities kept in (PartitionKey,
//! RowKey) order, changed only by [`Tables::commit`], a compare-and-swap over one or more
//! entities of a table, all applied or none. The rules (what `If-Match` means, how a merge
//! combines, which timestamp a write gets) stay in the front: a backend checks versions and
//! applies what it is given, as the blob front's `Records` do.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use crate::value::{DateTime, Entity};

/// An entity's key: its partition and its row.
pub type EntityKey = (String, String);

/// What a change expects of the entity it changes, checked in the same atomic step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Expected {
    /// No entity under the key (an insert).
    Absent,
    /// An entity, whatever its version (`If-Match: *`).
    Present,
    /// The entity whose `Timestamp` is this (the version its ETag names).
    Version(DateTime),
    /// Nothing: written whatever is there (Insert Or Replace, Insert Or Merge).
    Anything,
}

/// One change of a [`Tables::commit`] (serde: for a backend that sends it elsewhere).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    /// The entity changed.
    pub key: EntityKey,
    /// What must be there for the commit to apply.
    pub expected: Expected,
    /// What is there after: the new entity, or nothing (a delete).
    pub write: Option<Entity>,
}

/// Why a commit applied nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The table is not there.
    #[error("table {0} not found")]
    TableNotFound(String),
    /// The change at `index` found another entity than it expected (or none).
    #[error("change {index} found the entity changed")]
    Conflict {
        /// Which change, counted from 0.
        index: usize,
        /// Whether an entity was there.
        present: bool,
    },
    /// The backend failed.
    #[error("{backend}: {message}")]
    Generic {
        /// Which backend.
        backend: &'static str,
        /// What failed.
        message: String,
    },
}

/// A backend of the Table front.
pub trait Tables: Send + Sync + 'static {
    /// Creates the table `name`; `false` when it is there already.
    fn create_table(&self, name: &str) -> impl Future<Output = Result<bool, TableError>> + Send;

    /// Deletes the table `name` with its entities; `false` when it was not there.
    fn delete_table(&self, name: &str) -> impl Future<Output = Result<bool, TableError>> + Send;

    /// Up to `limit` table names after `after` (all, with `""`), in order.
    fn tables(
        &self,
        after: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>, TableError>> + Send;

    /// The entity under `key`, if there is one.
    fn get(
        &self,
        table: &str,
        key: &EntityKey,
    ) -> impl Future<Output = Result<Option<Entity>, TableError>> + Send;

    /// The entities under `keys`, in their order, as one read where the backend can (a
    /// transactional batch reads each document it writes): [`Tables::get`] of each by default.
    fn get_many(
        &self,
        table: &str,
        keys: &[EntityKey],
    ) -> impl Future<Output = Result<Vec<Option<Entity>>, TableError>> + Send {
        async move {
            let mut found = Vec::with_capacity(keys.len());
            for key in keys {
                found.push(self.get(table, key).await?);
            }
            Ok(found)
        }
    }

    /// Up to `limit` entities from `from` on (included), in key order, within `partition`
    /// when given. It reads what it returns and no more.
    fn scan(
        &self,
        table: &str,
        scan: Scan<'_>,
    ) -> impl Future<Output = Result<Vec<Entity>, TableError>> + Send;

    /// Applies every change, if each finds what it expects; otherwise none, and says which
    /// failed first. Atomic against every other commit of the table.
    fn commit(
        &self,
        table: &str,
        changes: &[Change],
    ) -> impl Future<Output = Result<(), TableError>> + Send;
}

/// What a [`Tables::scan`] reads.
#[derive(Debug, Clone, Copy)]
pub struct Scan<'a> {
    /// The first key it may return.
    pub from: Option<(&'a str, &'a str)>,
    /// The partition it stays in, when given.
    pub partition: Option<&'a str>,
    /// The most entities it returns.
    pub limit: usize,
}

impl Scan<'_> {
    /// The first key the scan may return: `from`, or the partition's first, or the table's.
    pub fn start(&self) -> EntityKey {
        let (pk, rk) = self
            .from
            .unwrap_or((self.partition.unwrap_or_default(), ""));
        (pk.to_owned(), rk.to_owned())
    }
}

/// Tables in memory: for tests, and the front's protocol tables.
#[derive(Debug, Default)]
pub struct MemoryTables {
    tables: Mutex<BTreeMap<String, BTreeMap<EntityKey, Entity>>>,
}

impl MemoryTables {
    /// No tables.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Whether `found` is what `expected` asks for.
pub fn satisfies(expected: Expected, found: Option<&Entity>) -> bool {
    satisfied_by(expected, found.map(|entity| entity.timestamp))
}

/// [`satisfies`], knowing only the version of the entity found (`None`: none is there), as a
/// store that reads the version alone checks it.
pub fn satisfied_by(expected: Expected, found: Option<DateTime>) -> bool {
    match (expected, found) {
        (Expected::Anything, _) | (Expected::Absent, None) => true,
        (Expected::Present, Some(_)) => true,
        (Expected::Version(version), Some(at)) => at == version,
        _ => false,
    }
}

impl Tables for MemoryTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        let mut tables = self.tables.lock().unwrap();
        let created = !tables.contains_key(name);
        tables.entry(name.to_owned()).or_default();
        Ok(created)
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        Ok(self.tables.lock().unwrap().remove(name).is_some())
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        use std::ops::Bound::{Excluded, Unbounded};
        let tables = self.tables.lock().unwrap();
        let names = tables
            .range::<str, _>((Excluded(after), Unbounded))
            .map(|(name, _)| name);
        Ok(names.take(limit).cloned().collect())
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        let tables = self.tables.lock().unwrap();
        let entities = tables.get(table).ok_or_else(|| not_found(table))?;
        Ok(entities.get(key).cloned())
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        let tables = self.tables.lock().unwrap();
        let entities = tables.get(table).ok_or_else(|| not_found(table))?;
        let start = scan.start();
        let within = |entity: &&Entity| scan.partition.is_none_or(|p| entity.partition_key == p);
        let found = entities.range(start..).map(|(_, entity)| entity);
        Ok(found.take_while(within).take(scan.limit).cloned().collect())
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        let mut tables = self.tables.lock().unwrap();
        let entities = tables.get_mut(table).ok_or_else(|| not_found(table))?;
        for (index, change) in changes.iter().enumerate() {
            let found = entities.get(&change.key);
            if !satisfies(change.expected, found) {
                let present = found.is_some();
                return Err(TableError::Conflict { index, present });
            }
        }
        for change in changes {
            match &change.write {
                Some(entity) => entities.insert(change.key.clone(), entity.clone()),
                None => entities.remove(&change.key),
            };
        }
        Ok(())
    }
}

fn not_found(table: &str) -> TableError {
    TableError::TableNotFound(table.to_owned())
}

/// A shared backend is a backend.
impl<T: Tables> Tables for std::sync::Arc<T> {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        (**self).create_table(name).await
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        (**self).delete_table(name).await
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        (**self).tables(after, limit).await
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        (**self).get(table, key).await
    }

    async fn get_many(
        &self,
        table: &str,
        keys: &[EntityKey],
    ) -> Result<Vec<Option<Entity>>, TableError> {
        (**self).get_many(table, keys).await
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        (**self).scan(table, scan).await
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        (**self).commit(table, changes).await
    }
}
