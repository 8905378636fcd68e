//! The Tower layer's version backend in Redis: versions every instance sees, and the per-key
//! write lock, with an expiry and a fencing token, each step one script.

use std::sync::Arc;

use crate::connection::Redis;
use ifmatch_core::precondition::Validators;
use ifmatch_tower::{BoxError, Recorded, SharedBackend};
use redis::Script;

/// Versions and write locks in Redis, for [`ifmatch_tower::ConditionalLayer::versions`] through
/// [`ifmatch_tower::Shared`] (which keeps a live holder's lock renewed, and says how long a
/// writer waits and a lock outlives its holder).
///
/// Per resource key, three Redis keys sharing one hash tag: the version (JSON), the lock (the
/// holder's random token, with an expiry) and the fencing counter.
///
/// - A lock is taken with `SET NX PX` and the counter incremented in the same script: the
///   counter is the guard's fencing token.
/// - A version is recorded only if the token still holds the lock (one script); a lock is
///   renewed and released only by its token (compare, then expire or delete).
#[derive(Clone, Debug)]
pub struct RedisVersions {
    connection: Redis,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
}

#[derive(Debug)]
struct Scripts {
    acquire: Script,
    renew: Script,
    release: Script,
    set: Script,
}

/// KEYS: lock, fencing counter. ARGV: token, time to live (ms). Answers the fencing token, or
/// 0 when the lock is held by someone else.
const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
";

/// KEYS: lock. ARGV: token, time to live (ms). Answers 1 if the lock is still the token's.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// KEYS: lock. ARGV: token.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// KEYS: lock, version. ARGV: token, JSON, time to live of the version (ms, 0: none).
const SET: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[2], ARGV[2])
else
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
";

impl RedisVersions {
    /// Versions under keys starting with `prefix` (say `ifmatch:`), on `connection`.
    pub fn new(connection: Redis, prefix: &str) -> Self {
        let scripts = Scripts {
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
            set: Script::new(SET),
        };
        Self {
            connection,
            prefix: prefix.into(),
            scripts: Arc::new(scripts),
        }
    }

    /// The version, lock and fencing counter keys of `key`.
    fn keys(&self, key: &str) -> [String; 3] {
        let base = format!("{}{{{key}}}", self.prefix);
        [
            format!("{base}:v"),
            format!("{base}:l"),
            format!("{base}:f"),
        ]
    }
}

impl SharedBackend for RedisVersions {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<Option<u64>, BoxError> {
        let [_, lock, fence] = self.keys(key);
        let mut connection = self.connection.for_writes();
        let fencing: u64 = (self.scripts.acquire.key(&lock).key(fence))
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut connection)
            .await?;
        // A lock and its fencing token are the replicas' too before they are used: a failover
        // then neither frees the lock nor takes the token back.
        connection.replicated().await?;
        Ok((fencing != 0).then_some(fencing))
    }

    async fn renew(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool, BoxError> {
        let [_, lock, _] = self.keys(key);
        let mut connection = self.connection.for_writes();
        let held: i64 = (self.scripts.renew.key(&lock).arg(token).arg(ttl_ms))
            .invoke_async(&mut connection)
            .await?;
        connection.replicated().await?;
        Ok(held == 1)
    }

    async fn release(&self, key: &str, token: &str) -> Result<(), BoxError> {
        let [_, lock, _] = self.keys(key);
        let mut connection = self.connection.for_writes();
        let _: i64 = (self.scripts.release.key(lock).arg(token))
            .invoke_async(&mut connection)
            .await?;
        Ok(())
    }

    async fn record(&self, key: &str, token: &str, version: &Recorded) -> Result<bool, BoxError> {
        let [stored, lock, _] = self.keys(key);
        let json = serde_json::to_string(&version.validators)?;
        let mut connection = self.connection.for_writes();
        let recorded: i64 = (self.scripts.set.key(&lock).key(stored))
            .arg(token)
            .arg(json)
            .arg(version.keep_ms.unwrap_or(0))
            .invoke_async(&mut connection)
            .await?;
        connection.replicated().await?;
        Ok(recorded == 1)
    }

    async fn read(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        let [version, ..] = self.keys(key);
        let mut connection = self.connection.clone();
        let json: Option<Vec<u8>> = redis::cmd("GET")
            .arg(version)
            .query_async(&mut connection)
            .await?;
        Ok(json.map(|j| serde_json::from_slice(&j)).transpose()?)
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        let [version, ..] = self.keys(key);
        let mut connection = self.connection.for_writes();
        let () = redis::cmd("DEL")
            .arg(&version)
            .query_async(&mut connection)
            .await?;
        connection.replicated().await?;
        Ok(())
    }
}
