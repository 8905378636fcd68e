//! The Tower layer's version backend in Redis: versions every instance sees, and the per-key
//! write lock, with an expiry and a fencing token.

use std::sync::Arc;
use std::time::Duration;

use ifmatch_core::precondition::Validators;
use ifmatch_tower::{BoxError, VersionStore};
use redis::Script;
use redis::aio::ConnectionManager;
use tokio::sync::oneshot;

/// Versions and write locks in Redis, for [`ifmatch_tower::ConditionalLayer::versions`].
///
/// Per resource key, three Redis keys sharing one hash tag: the version (JSON), the lock (the
/// holder's random token, with an expiry) and the fencing counter.
///
/// - A lock is taken with `SET NX PX` and the counter incremented in the same script: the
///   counter is the guard's fencing token ([`VersionStore::fencing_token`]).
/// - While the guard lives, a task renews the lock every third of its time to live, so a live
///   writer keeps it however long its write takes; a crashed or stalled instance loses it
///   after [`RedisVersions::lock_ttl`], and the key is writable again.
/// - A version is recorded only if the guard still holds the lock (one script): a writer
///   whose lock expired cannot record over a newer write. Dropping the guard releases the
///   lock only if it is still this guard's (compare and delete).
#[derive(Clone)]
pub struct RedisVersions {
    connection: ConnectionManager,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
    lock_ttl: Duration,
    lock_wait: Duration,
    version_ttl: Option<Duration>,
}

impl std::fmt::Debug for RedisVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisVersions")
            .field("prefix", &self.prefix)
            .field("lock_ttl", &self.lock_ttl)
            .field("lock_wait", &self.lock_wait)
            .field("version_ttl", &self.version_ttl)
            .finish_non_exhaustive()
    }
}

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

/// The write lock of one key in [`RedisVersions`]; dropping it releases the lock.
#[derive(Debug)]
pub struct RedisGuard {
    key: String,
    token: String,
    fence: u64,
    /// Dropped with the guard: tells the renewing task to stop and release.
    _release: oneshot::Sender<()>,
}

/// Why [`RedisVersions`] could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VersionsError {
    /// Redis did not answer.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The lock stayed taken for longer than [`RedisVersions::lock_wait`].
    #[error("the write lock of {0:?} stayed taken")]
    LockTimeout(String),
    /// The guard's lock expired (the holder stalled longer than its time to live): someone
    /// else may have written since, so nothing was recorded.
    #[error("the write lock of {0:?} was lost")]
    LockLost(String),
    /// A stored version did not parse.
    #[error("a stored version did not parse: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl RedisVersions {
    /// Versions under keys starting with `prefix` (say `ifmatch:`), on `connection`. Locks live
    /// 10 s unless renewed, a writer waits at most 10 s for one, versions are kept a day.
    pub fn new(connection: ConnectionManager, prefix: &str) -> Self {
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
            lock_ttl: Duration::from_secs(10),
            lock_wait: Duration::from_secs(10),
            version_ttl: Some(Duration::from_secs(24 * 3600)),
        }
    }

    /// How long a lock outlives a holder that stopped renewing it (crashed, stalled, cut off
    /// from Redis): how long its key stays unwritable after such a failure.
    pub fn lock_ttl(mut self, ttl: Duration) -> Self {
        self.lock_ttl = ttl.max(Duration::from_millis(30));
        self
    }

    /// How long a writer waits for a taken lock before giving up (the layer answers 503).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// How long Redis keeps a version (`None`: until overwritten). A forgotten version only
    /// costs a GET of the inner service to learn it again.
    pub fn version_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.version_ttl = ttl;
        self
    }

    /// One try at the lock of `key`: the guard, or `None` when someone holds it.
    async fn attempt(&self, key: &str) -> Result<Option<RedisGuard>, VersionsError> {
        let [_, lock, fence] = self.keys(key);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut connection = self.connection.clone();
        let fencing: u64 = self
            .scripts
            .acquire
            .key(&lock)
            .key(&fence)
            .arg(&token)
            .arg(millis(self.lock_ttl))
            .invoke_async(&mut connection)
            .await?;
        if fencing == 0 {
            return Ok(None);
        }
        let (release, released) = oneshot::channel();
        self.keep(lock, token.clone(), released);
        Ok(Some(RedisGuard {
            key: key.to_owned(),
            token,
            fence: fencing,
            _release: release,
        }))
    }

    fn keys(&self, key: &str) -> [String; 3] {
        let base = format!("{}{{{key}}}", self.prefix);
        [
            format!("{base}:v"),
            format!("{base}:l"),
            format!("{base}:f"),
        ]
    }

    /// Keeps the lock of `lock` alive until `release` fires, then releases it.
    fn keep(&self, lock: String, token: String, mut release: oneshot::Receiver<()>) {
        let (mut connection, scripts) = (self.connection.clone(), self.scripts.clone());
        let ttl = millis(self.lock_ttl);
        let period = self.lock_ttl / 3;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut release => break,
                    () = tokio::time::sleep(period) => {
                        let held: Result<i64, _> = scripts
                            .renew
                            .key(&lock)
                            .arg(&token)
                            .arg(ttl)
                            .invoke_async(&mut connection)
                            .await;
                        if matches!(held, Ok(0)) {
                            tracing::warn!(lock, "a write lock expired while held");
                            // Lost: nothing to renew or release. Wait for the drop.
                            let _ = release.await;
                            return;
                        }
                    }
                }
            }
            let released: Result<i64, _> = scripts
                .release
                .key(&lock)
                .arg(&token)
                .invoke_async(&mut connection)
                .await;
            if let Err(error) = released {
                tracing::debug!(%error, lock, "release failed; the lock expires instead");
            }
        });
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl VersionStore for RedisVersions {
    type Guard = RedisGuard;

    fn expire_after(self, ttl: Duration) -> Self {
        let ttl = self.version_ttl.map_or(ttl, |kept| kept.min(ttl));
        self.version_ttl(Some(ttl))
    }

    async fn get(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        let [version, ..] = self.keys(key);
        let mut connection = self.connection.clone();
        let json: Option<Vec<u8>> = redis::cmd("GET")
            .arg(version)
            .query_async(&mut connection)
            .await
            .map_err(VersionsError::from)?;
        Ok(json
            .map(|j| serde_json::from_slice(&j))
            .transpose()
            .map_err(VersionsError::from)?)
    }

    async fn set(&self, guard: &RedisGuard, validators: Validators) -> Result<(), BoxError> {
        let [version, lock, _] = self.keys(&guard.key);
        let json = serde_json::to_string(&validators).map_err(VersionsError::from)?;
        let mut connection = self.connection.clone();
        let recorded: i64 = self
            .scripts
            .set
            .key(lock)
            .key(version)
            .arg(&guard.token)
            .arg(json)
            .arg(self.version_ttl.map_or(0, millis))
            .invoke_async(&mut connection)
            .await
            .map_err(VersionsError::from)?;
        if recorded == 1 {
            Ok(())
        } else {
            Err(VersionsError::LockLost(guard.key.clone()).into())
        }
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        let [version, ..] = self.keys(key);
        let mut connection = self.connection.clone();
        let () = redis::cmd("DEL")
            .arg(version)
            .query_async(&mut connection)
            .await
            .map_err(VersionsError::from)?;
        Ok(())
    }

    async fn lock(&self, key: &str) -> Result<RedisGuard, BoxError> {
        let deadline = tokio::time::Instant::now() + self.lock_wait;
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(guard) = self.attempt(key).await? {
                return Ok(guard);
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(VersionsError::LockTimeout(key.to_owned()).into());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    async fn try_lock(&self, key: &str) -> Result<Option<RedisGuard>, BoxError> {
        Ok(self.attempt(key).await?)
    }

    fn fencing_token(&self, guard: &RedisGuard) -> Option<u64> {
        Some(guard.fence)
    }
}
