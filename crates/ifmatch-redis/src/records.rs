//! Blob and container records in Redis, each change one compare-and-swap on the server.

use std::sync::Arc;

use crate::connection::Redis;
use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};
use redis::Script;

/// Records in Redis: one hash per record (`g`: the generation, `r`: the record as JSON), and a
/// sorted set per container naming its blobs, for listing. All the keys of a container share
/// one hash tag (`{container}`), so every script touches one slot.
///
/// The rules (leases, conditions) stay in Rust: the front reads a record, decides with
/// `ifmatch-core`, and writes back with [`PutMode::Update`]; the scripts only compare the
/// generation and write, so they cannot drift from the engine.
#[derive(Clone)]
pub struct RedisRecords {
    connection: Redis,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
}

impl std::fmt::Debug for RedisRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRecords")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

struct Scripts {
    put: Script,
    delete: Script,
    list: Script,
    stage: Script,
}

/// KEYS: the record, its container's record, the container's index.
/// ARGV: mode (`c` create, `u` update), expected generation, new generation, JSON, blob name
/// (empty for a container).
const PUT: &str = r"
if ARGV[5] ~= '' and redis.call('EXISTS', KEYS[2]) == 0 then return 'container' end
local current = redis.call('HGET', KEYS[1], 'g')
if ARGV[1] == 'c' then
  if current then return 'exists' end
elseif (not current) or current ~= ARGV[2] then
  return 'conflict'
end
redis.call('HSET', KEYS[1], 'g', ARGV[3], 'r', ARGV[4])
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[3], 0, ARGV[5]) end
return 'ok'
";

/// KEYS: the record, the container's index. ARGV: expected generation, blob name (empty for
/// the container), the prefix of the container's blob keys. A container takes its blobs with
/// it, and answers their records.
const DELETE: &str = r"
local current = redis.call('HGET', KEYS[1], 'g')
if not current then return {'missing'} end
if current ~= ARGV[1] then return {'conflict'} end
local out = {'ok'}
if ARGV[2] ~= '' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return out
end
for _, name in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local key = ARGV[3] .. name
  local record = redis.call('HGET', key, 'r')
  if record then table.insert(out, record) end
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[2], KEYS[1])
return out
";

/// KEYS: the list of a blob's staged blocks under one epoch, the container's record. ARGV: the
/// most entries, the block as JSON, the list's time to live in seconds.
const STAGE: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then return 'container' end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 'full' end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 'ok'
";

/// How long a list of staged blocks outlives its last append: past the dialect's week, after
/// which the front drops the set; a list that a crash or a container's deletion left behind
/// goes by itself.
const STAGED_TTL: u64 = 8 * 86_400;

/// KEYS: the container's index. ARGV: lexicographic range (min, max), the prefix of the
/// container's blob keys. Answers name, record, name, record...
const LIST: &str = r"
local out = {}
for _, name in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, ARGV[4])) do
  local record = redis.call('HGET', ARGV[3] .. name, 'r')
  if record then
    table.insert(out, name)
    table.insert(out, record)
  end
end
return out
";

impl RedisRecords {
    /// Records under keys starting with `prefix` (say `ifmatch:`), on `connection`.
    pub fn new(connection: Redis, prefix: &str) -> Self {
        let scripts = Scripts {
            put: Script::new(PUT),
            delete: Script::new(DELETE),
            list: Script::new(LIST),
            stage: Script::new(STAGE),
        };
        Self {
            connection,
            prefix: prefix.into(),
            scripts: Arc::new(scripts),
        }
    }

    fn container_key(&self, container: &str) -> String {
        format!("{}{{{container}}}:c", self.prefix)
    }

    fn index_key(&self, container: &str) -> String {
        format!("{}{{{container}}}:i", self.prefix)
    }

    fn blob_prefix(&self, container: &str) -> String {
        format!("{}{{{container}}}:b:", self.prefix)
    }

    /// The list of the blocks staged for a blob under `epoch`, in its container's slot.
    fn staged_key(&self, key: &Key, epoch: u64) -> Option<String> {
        let Key::Blob(c, name) = key else { return None };
        Some(format!("{}{{{c}}}:s:{epoch:016x}:{name}", self.prefix))
    }

    fn record_key(&self, key: &Key) -> String {
        match key {
            Key::Container(c) => self.container_key(c),
            Key::Blob(c, name) => format!("{}{name}", self.blob_prefix(c)),
        }
    }
}

fn unavailable(error: redis::RedisError) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// Once what `writer` wrote is on the replicas asked for (see [`Redis::with_replicas`]):
/// otherwise unavailable, the write's outcome unknown.
async fn replicated(writer: &Redis) -> Result<(), StoreError> {
    writer.replicated().await.map_err(unavailable)
}

fn decode(json: &[u8]) -> Result<Record, StoreError> {
    serde_json::from_slice(json).map_err(|e| StoreError::generic("redis", e))
}

fn encode(record: &Record) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError::generic("redis", e))
}

impl Records for RedisRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        let mut connection = self.connection.clone();
        let json: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.record_key(key))
            .arg("r")
            .query_async(&mut connection)
            .await
            .map_err(unavailable)?;
        json.map(|j| decode(&j).map(Arc::new)).transpose()
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let (mode, expected) = match mode {
            PutMode::Create => ("c", String::new()),
            PutMode::Update(generation) => ("u", generation.to_string()),
        };
        let name = match key {
            Key::Container(_) => "",
            Key::Blob(_, name) => name,
        };
        let container = key.container();
        let mut connection = self.connection.for_writes();
        let answer: String = self
            .scripts
            .put
            .key(self.record_key(key))
            .key(self.container_key(container))
            .key(self.index_key(container))
            .arg(mode)
            .arg(expected)
            .arg(record.generation.to_string())
            .arg(encode(record)?)
            .arg(name)
            .invoke_async(&mut connection)
            .await
            .map_err(unavailable)?;
        match answer.as_str() {
            "ok" => replicated(&connection).await,
            "exists" => Err(StoreError::already_exists(key)),
            "conflict" => Err(StoreError::conflict(key)),
            "container" => Err(StoreError::ContainerNotFound),
            other => Err(StoreError::generic(
                "redis",
                format!("unexpected answer from the put script: {other}"),
            )),
        }
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let name = match key {
            Key::Container(_) => "",
            Key::Blob(_, name) => name,
        };
        let container = key.container();
        let mut connection = self.connection.for_writes();
        let answer: Vec<Vec<u8>> = self
            .scripts
            .delete
            .key(self.record_key(key))
            .key(self.index_key(container))
            .arg(generation.to_string())
            .arg(name)
            .arg(self.blob_prefix(container))
            .invoke_async(&mut connection)
            .await
            .map_err(unavailable)?;
        let (status, records) = (answer.split_first()).ok_or_else(|| StoreError::not_found(key))?;
        match status.as_slice() {
            b"ok" => {
                replicated(&connection).await?;
                records.iter().map(|r| decode(r)).collect()
            }
            b"conflict" => Err(StoreError::conflict(key)),
            _ => Err(StoreError::not_found(key)),
        }
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        let (container, prefix) = (scan.container, scan.prefix);
        // Names are UTF-8, whose bytes never reach 0xFF: [start .. [prefix\xFF holds exactly
        // the names that start with the prefix and are not less than `from`. The script reads
        // the index and the records in one step: every name it finds has its record.
        let start = scan.from.max(prefix);
        let min = [b"[", start.as_bytes()].concat();
        let max = [b"[", prefix.as_bytes(), b"\xff"].concat();
        let mut connection = self.connection.clone();
        let answer: Vec<Vec<u8>> = self
            .scripts
            .list
            .key(self.index_key(container))
            .arg(min)
            .arg(max)
            .arg(self.blob_prefix(container))
            .arg(scan.limit)
            .invoke_async(&mut connection)
            .await
            .map_err(unavailable)?;
        answer
            .chunks_exact(2)
            .map(|pair| {
                let name = String::from_utf8(pair[0].clone())
                    .map_err(|e| StoreError::generic("redis", e))?;
                Ok((name, decode(&pair[1])?))
            })
            .collect()
    }

    async fn stage_block(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        let (key, epoch, block, max) = (stage.key, stage.epoch, stage.block, stage.max);
        let list = (self.staged_key(key, epoch)).ok_or_else(|| StoreError::not_found(key))?;
        let json = serde_json::to_string(block).map_err(|e| StoreError::generic("redis", e))?;
        let mut connection = self.connection.for_writes();
        let answer: String = self
            .scripts
            .stage
            .key(list)
            .key(self.container_key(key.container()))
            .arg(max)
            .arg(json)
            .arg(STAGED_TTL)
            .invoke_async(&mut connection)
            .await
            .map_err(unavailable)?;
        match answer.as_str() {
            "ok" => replicated(&connection).await.map(|()| true),
            "full" => Ok(false),
            "container" => Err(StoreError::ContainerNotFound),
            other => Err(StoreError::generic(
                "redis",
                format!("unexpected answer from the stage script: {other}"),
            )),
        }
    }

    async fn staged_blocks(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        let Some(list) = self.staged_key(key, epoch) else {
            return Ok(Vec::new());
        };
        let mut connection = self.connection.clone();
        let entries: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(list)
            .arg(0)
            .arg(-1)
            .query_async(&mut connection)
            .await
            .map_err(unavailable)?;
        (entries.iter())
            .map(|json| serde_json::from_slice(json).map_err(|e| StoreError::generic("redis", e)))
            .collect()
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        let Some(list) = self.staged_key(key, epoch) else {
            return Ok(());
        };
        let mut connection = self.connection.for_writes();
        redis::cmd("DEL")
            .arg(list)
            .query_async::<()>(&mut connection)
            .await
            .map_err(unavailable)?;
        replicated(&connection).await
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        // Every container's record is `{prefix}{name}:c`; SCAN walks them without blocking
        // the server. Names are `[a-z0-9-]`, so the pattern needs no escaping.
        let pattern = format!("{}{{*}}:c", self.prefix);
        let keys = self.connection.scan(&pattern).await.map_err(unavailable)?;
        let mut out: Vec<String> = (keys.iter())
            .filter_map(|key| {
                let name = key.strip_prefix(&*self.prefix)?.strip_prefix('{')?;
                let name = name.strip_suffix("}:c")?;
                // A blob or staged key whose blob name ends in `}:c` matches too.
                (!name.contains('}')).then(|| name.to_owned())
            })
            .collect();
        // SCAN may answer a key twice.
        out.sort();
        out.dedup();
        Ok(out)
    }
}
