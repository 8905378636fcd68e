//! One account's tables in a backend every account shares: each table stored under
//! `{account}~{name}` (`~` is never in a table's name), so an account's tables are one
//! contiguous run of names and Query Tables reads only its own.

use crate::store::{Change, EntityKey, Scan, TableError, Tables};
use crate::value::Entity;

/// The tables of one account, over `T`.
#[derive(Debug, Clone)]
pub struct Scoped<T> {
    tables: T,
    prefix: String,
}

impl<T: Tables> Scoped<T> {
    /// The tables of `account` in `tables`.
    pub fn new(tables: T, account: &str) -> Self {
        Self {
            tables,
            prefix: format!("{account}~"),
        }
    }

    fn stored(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// An error as the account sees it: its own table names.
    fn unscoped(&self, error: TableError) -> TableError {
        match error {
            TableError::TableNotFound(name) => {
                let name = name.strip_prefix(&self.prefix).unwrap_or(&name);
                TableError::TableNotFound(name.to_owned())
            }
            other => other,
        }
    }
}

impl<T: Tables> Tables for Scoped<T> {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        (self.tables.create_table(&self.stored(name)).await).map_err(|e| self.unscoped(e))
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        (self.tables.delete_table(&self.stored(name)).await).map_err(|e| self.unscoped(e))
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        let names = self.tables.tables(&self.stored(after), limit).await?;
        // The names after this account's run are another account's: the run ends there.
        let own = names.iter().map_while(|n| n.strip_prefix(&self.prefix));
        Ok(own.map(str::to_owned).collect())
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        (self.tables.get(&self.stored(table), key).await).map_err(|e| self.unscoped(e))
    }

    async fn get_many(
        &self,
        table: &str,
        keys: &[EntityKey],
    ) -> Result<Vec<Option<Entity>>, TableError> {
        (self.tables.get_many(&self.stored(table), keys).await).map_err(|e| self.unscoped(e))
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        (self.tables.scan(&self.stored(table), scan).await).map_err(|e| self.unscoped(e))
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        (self.tables.commit(&self.stored(table), changes).await).map_err(|e| self.unscoped(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryTables;
    use std::sync::Arc;

    #[tokio::test]
    async fn each_account_sees_its_own_tables() {
        let shared = Arc::new(MemoryTables::default());
        let (a, b) = (
            Scoped::new(shared.clone(), "a"),
            Scoped::new(shared.clone(), "b"),
        );
        assert!(a.create_table("people").await.unwrap());
        assert!(
            b.create_table("people").await.unwrap(),
            "the same name, another account"
        );
        assert!(b.create_table("zebras").await.unwrap());
        assert!(a.create_table("apes").await.unwrap());
        assert_eq!(a.tables("", 10).await.unwrap(), ["apes", "people"]);
        assert_eq!(b.tables("", 10).await.unwrap(), ["people", "zebras"]);
        assert_eq!(b.tables("people", 10).await.unwrap(), ["zebras"]);
        assert!(a.delete_table("people").await.unwrap());
        assert_eq!(b.tables("", 10).await.unwrap(), ["people", "zebras"]);
        let missing = a.scan(
            "people",
            Scan {
                from: None,
                partition: None,
                limit: 1,
            },
        );
        assert_eq!(
            missing.await.unwrap_err(),
            TableError::TableNotFound("people".into())
        );
    }
}
