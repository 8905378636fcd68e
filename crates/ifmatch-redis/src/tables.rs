//! The Table front's entities in Redis, for a fleet: per table, under one hash tag
//! (`{t:NAME}`, so every script touches one slot and Redis Cluster can hold it), a marker
//! (`:x`, the table is there), a sorted set of its entities' keys (`:o`, members
//! `PartitionKey \0 RowKey`, all of score 0: ordered as the tuple is, since a key holds no
//! control character), a hash of their JSON (`:v`) and a hash of their timestamps (`:s`, the
//! version a commit compares). A commit is one script: every change checked, then every change
//! written, or nothing. A sorted set of the table names (`tables`) serves Query Tables; a
//! table in it whose marker is gone (a delete cut short) is not listed.

use std::sync::Arc;

use crate::connection::Redis;
use ifmatch_table::{Change, Entity, EntityKey, Expected, Scan, TableError, Tables};
use redis::Script;

/// Tables in Redis under keys starting with a prefix.
#[derive(Clone)]
pub struct RedisTables {
    connection: Redis,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
}

impl std::fmt::Debug for RedisTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedisTables {{ prefix: {:?}, .. }}", self.prefix)
    }
}

struct Scripts {
    commit: Script,
    scan: Script,
    drop: Script,
}

/// KEYS: marker, order, values, stamps. ARGV: the number of changes, then per change its
/// member, what it expects (`a` absent, `p` present, `v` the version next, `x` anything), that
/// version, `w` (write) or `d` (delete), the JSON and the new version.
const COMMIT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'table'} end
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local b = 2 + i * 6
  local current = redis.call('HGET', KEYS[4], ARGV[b])
  local expect = ARGV[b + 1]
  local ok = expect == 'x' or (expect == 'a' and not current) or (expect == 'p' and current)
    or (expect == 'v' and current == ARGV[b + 2])
  if not ok then return {'conflict', tostring(i), current and '1' or '0'} end
end
for i = 0, n - 1 do
  local b = 2 + i * 6
  local member = ARGV[b]
  if ARGV[b + 3] == 'w' then
    redis.call('ZADD', KEYS[2], 0, member)
    redis.call('HSET', KEYS[3], member, ARGV[b + 4])
    redis.call('HSET', KEYS[4], member, ARGV[b + 5])
  else
    redis.call('ZREM', KEYS[2], member)
    redis.call('HDEL', KEYS[3], member)
    redis.call('HDEL', KEYS[4], member)
  end
end
return {'ok'}
";

/// KEYS: marker, order, values. ARGV: the lexicographic range (min, max) and the limit.
const SCAN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'table'} end
local members = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
if #members == 0 then return {'ok'} end
local values = redis.call('HMGET', KEYS[3], unpack(members))
table.insert(values, 1, 'ok')
return values
";

/// KEYS: marker, order, values, stamps. Deletes the table whole; 1 if it was there.
const DROP: &str = r"
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return existed
";

fn failed(error: impl std::fmt::Display) -> TableError {
    TableError::Generic {
        backend: "redis tables",
        message: error.to_string(),
    }
}

/// An entity's member in its table's sorted set and hashes.
fn member(key: &EntityKey) -> Vec<u8> {
    [key.0.as_bytes(), b"\0", key.1.as_bytes()].concat()
}

impl RedisTables {
    /// Tables under keys starting with `prefix` (say `ifmatch:`), on `connection`.
    pub fn new(connection: Redis, prefix: &str) -> Self {
        let scripts = Scripts {
            commit: Script::new(COMMIT),
            scan: Script::new(SCAN),
            drop: Script::new(DROP),
        };
        Self {
            connection,
            prefix: prefix.into(),
            scripts: Arc::new(scripts),
        }
    }

    /// The table's keys: marker, order, values, stamps.
    fn keys(&self, table: &str) -> [String; 4] {
        ["x", "o", "v", "s"].map(|part| format!("{}{{t:{table}}}:{part}", self.prefix))
    }

    fn index(&self) -> String {
        format!("{}tables", self.prefix)
    }

    async fn scan_range(
        &self,
        table: &str,
        (min, max): (Vec<u8>, Vec<u8>),
        limit: usize,
    ) -> Result<Vec<Entity>, TableError> {
        let [marker, order, values, _] = self.keys(table);
        let mut connection = self.connection.clone();
        let answer: Vec<Option<Vec<u8>>> = (self.scripts.scan.key(marker).key(order).key(values))
            .arg(min)
            .arg(max)
            .arg(limit)
            .invoke_async(&mut connection)
            .await
            .map_err(failed)?;
        let mut answer = answer.into_iter();
        if answer.next().flatten().as_deref() != Some(b"ok") {
            return Err(TableError::TableNotFound(table.to_owned()));
        }
        // A member whose value is gone was deleted between the two reads of the script: none.
        let found = answer.flatten();
        found
            .map(|json| serde_json::from_slice(&json).map_err(failed))
            .collect()
    }
}

impl Tables for RedisTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        let mut connection = self.connection.for_writes();
        // Listed first: a create cut short leaves a name the listing skips, never a table it
        // does not list.
        let _: () = redis::cmd("ZADD")
            .arg(self.index())
            .arg(0)
            .arg(name)
            .query_async(&mut connection)
            .await
            .map_err(failed)?;
        let [marker, ..] = self.keys(name);
        let created: bool = redis::cmd("SETNX")
            .arg(&marker)
            .arg(1)
            .query_async(&mut connection)
            .await
            .map_err(failed)?;
        connection.replicated().await.map_err(failed)?;
        Ok(created)
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        let mut connection = self.connection.for_writes();
        let [marker, order, values, stamps] = self.keys(name);
        let existed: bool = (self
            .scripts
            .drop
            .key(&marker)
            .key(order)
            .key(values)
            .key(stamps))
        .invoke_async(&mut connection)
        .await
        .map_err(failed)?;
        let _: () = redis::cmd("ZREM")
            .arg(self.index())
            .arg(name)
            .query_async(&mut connection)
            .await
            .map_err(failed)?;
        connection.replicated().await.map_err(failed)?;
        Ok(existed)
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        let mut connection = self.connection.clone();
        let mut out = Vec::new();
        let mut from = format!("({after}");
        if after.is_empty() {
            from = "-".to_owned();
        }
        while out.len() < limit {
            let names: Vec<String> = redis::cmd("ZRANGEBYLEX")
                .arg(self.index())
                .arg(&from)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(limit - out.len())
                .query_async(&mut connection)
                .await
                .map_err(failed)?;
            let Some(last) = names.last() else { break };
            from = format!("({last}");
            for name in names {
                let [marker, ..] = self.keys(&name);
                let there: bool = redis::cmd("EXISTS")
                    .arg(marker)
                    .query_async(&mut connection)
                    .await
                    .map_err(failed)?;
                if there {
                    out.push(name);
                }
            }
        }
        Ok(out)
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        let at = member(key);
        let range = ([b"[", &at[..]].concat(), [b"[", &at[..]].concat());
        Ok(self.scan_range(table, range, 1).await?.pop())
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        let start = member(&scan.start());
        let min = [b"[", &start[..]].concat();
        // Within a partition: below `PartitionKey \x01`, which no key of another reaches.
        let max = match scan.partition {
            Some(pk) => [b"(", pk.as_bytes(), b"\x01"].concat(),
            None => b"+".to_vec(),
        };
        self.scan_range(table, (min, max), scan.limit).await
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        let [marker, order, values, stamps] = self.keys(table);
        let mut invocation = self.scripts.commit.prepare_invoke();
        invocation.key(&marker).key(order).key(values).key(stamps);
        invocation.arg(changes.len());
        for change in changes {
            let (expect, version) = match change.expected {
                Expected::Absent => ("a", String::new()),
                Expected::Present => ("p", String::new()),
                Expected::Version(at) => ("v", at.ticks().to_string()),
                Expected::Anything => ("x", String::new()),
            };
            invocation.arg(member(&change.key)).arg(expect).arg(version);
            match &change.write {
                Some(entity) => {
                    let json = serde_json::to_vec(entity).map_err(failed)?;
                    let stamp = entity.timestamp.ticks().to_string();
                    invocation.arg("w").arg(json).arg(stamp);
                }
                None => {
                    invocation.arg("d").arg("").arg("");
                }
            }
        }
        let mut connection = self.connection.for_writes();
        let answer: Vec<String> =
            (invocation.invoke_async(&mut connection).await).map_err(failed)?;
        match answer.first().map(String::as_str) {
            Some("ok") => (connection.replicated().await).map_err(failed),
            Some("table") => Err(TableError::TableNotFound(table.to_owned())),
            Some("conflict") => {
                let index = answer.get(1).and_then(|i| i.parse().ok()).unwrap_or(0);
                let present = answer.get(2).is_some_and(|p| p == "1");
                Err(TableError::Conflict { index, present })
            }
            _ => Err(failed(format!("an unknown answer: {answer:?}"))),
        }
    }
}
