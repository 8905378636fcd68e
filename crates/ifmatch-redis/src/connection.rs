//! The connection every Redis backend uses: to one server (`redis://HOST:PORT/DB`), to the
//! master that a set of Sentinels names (`redis+sentinel://H1:P1,H2:P2/MASTER/DB`), followed
//! through a failover with no restart, or to a Redis Cluster (`redis+cluster://H1:P1,H2:P2`,
//! [`crate::cluster`]); and, when the operator asks for it, each write acknowledged only once
//! that many replicas have it ([`Redis::with_replicas`]).
//!
//! Following: a request that fails because the master is gone (refused, dropped, timed out) or
//! is a master no more (`READONLY`, `MASTERDOWN`) fails (its outcome is not known, so it is not
//! sent again), and the Sentinels are asked which server is the master now; the next requests
//! go there. Until the Sentinels have promoted a replica, they name the old master, and requests
//! fail at once, as with one server that is away.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;
use redis::{
    Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, ServerErrorKind, Value,
};

use crate::cluster::Cluster;
use crate::url::{cluster_url, sentinel_url};

/// How long a request waits for Redis before it fails, whatever the link.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write waits for its replicas before it is answered as of unknown outcome.
pub const REPLICA_TIMEOUT: Duration = Duration::from_secs(1);

/// The least time between two questions to the Sentinels.
const ASK_AGAIN: Duration = Duration::from_millis(100);

/// How often the Sentinels are asked for the master when nothing failed.
const WATCH: Duration = Duration::from_secs(1);

/// The connections that writes and their `WAIT`s take turns on, when replicas are asked for.
const WRITERS: usize = 4;

/// A connection to Redis, cheap to clone (the clones share it).
#[derive(Clone)]
pub struct Redis {
    link: Link,
    replicas: usize,
    /// The write connection this handle sends over ([`Redis::for_writes`]), if one (in a
    /// cluster, whether it is a write handle).
    writer: Option<usize>,
    /// In a cluster, the fewest replicas that had one of this handle's writes, each sent with
    /// its `WAIT`.
    waited: Option<usize>,
}

#[derive(Clone)]
enum Link {
    /// One server, or the master that Sentinels name.
    Server(Server),
    Cluster(Cluster),
}

#[derive(Clone)]
struct Server {
    current: Arc<Mutex<Current>>,
    /// The Sentinels that name the master, when the URL named them.
    sentinels: Option<Arc<tokio::sync::Mutex<Sentinels>>>,
    /// The write connection the next [`Redis::for_writes`] takes.
    next_writer: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let link = match &self.link {
            Link::Server(server) if server.sentinels.is_some() => "sentinel",
            Link::Server(_) => "server",
            Link::Cluster(_) => "cluster",
        };
        f.debug_struct("Redis")
            .field("link", &link)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

/// The master as last learned.
struct Current {
    connection: ConnectionManager,
    /// With replicas asked for, the connections writes go over, each followed by its `WAIT`,
    /// which holds the connection it is sent on: reads never queue behind one.
    writes: Vec<ConnectionManager>,
    client: redis::Client,
    /// Moves each time the master changes, so that of many requests failing at once only one
    /// asks the Sentinels.
    generation: u64,
}

struct Sentinels {
    client: SentinelClient,
    asked: Option<Instant>,
}

/// Connects to the Redis that `url` names (`redis://HOST:PORT/DB`, `rediss://`, `unix://`,
/// `redis+sentinel://H1:P1,H2:P2/MASTER/DB` or `redis+cluster://H1:P1,H2:P2`), with a
/// connection that reconnects in the background after a failure and never makes a request
/// wait longer than [`TIMEOUT`].
pub async fn connect(url: &str) -> RedisResult<Redis> {
    if let Some(nodes) = cluster_url(url)? {
        let link = Link::Cluster(Cluster::connect(nodes, TIMEOUT).await?);
        return Ok(Redis {
            link,
            replicas: 0,
            writer: None,
            waited: None,
        });
    }
    let (client, sentinels) = match sentinel_url(url)? {
        None => (redis::Client::open(url)?, None),
        Some(mut sentinels) => {
            let client = sentinels.async_get_client().await?;
            let sentinels = Sentinels {
                client: sentinels,
                asked: Some(Instant::now()),
            };
            (client, Some(Arc::new(tokio::sync::Mutex::new(sentinels))))
        }
    };
    let connection = manager(client.clone()).await?;
    let current = Current {
        connection,
        writes: Vec::new(),
        client,
        generation: 0,
    };
    let server = Server {
        current: Arc::new(Mutex::new(current)),
        sentinels,
        next_writer: Arc::default(),
    };
    if server.sentinels.is_some() {
        tokio::spawn(watch(
            Arc::downgrade(&server.current),
            server.sentinels.clone(),
        ));
    }
    Ok(Redis {
        link: Link::Server(server),
        replicas: 0,
        writer: None,
        waited: None,
    })
}

/// Asks the Sentinels for the master every [`WATCH`] while a clone of the connection lives:
/// the connection's manager reconnects by itself to the server it knows, and an old master
/// back from the dead would answer reads from its own past until the Sentinels make it a
/// replica; so the promoted master is followed within a second of its promotion, whether or
/// not a request failed meanwhile.
async fn watch(
    current: std::sync::Weak<Mutex<Current>>,
    sentinels: Option<Arc<tokio::sync::Mutex<Sentinels>>>,
) {
    loop {
        tokio::time::sleep(WATCH).await;
        let Some(current) = current.upgrade() else {
            return;
        };
        let server = Server {
            current,
            sentinels: sentinels.clone(),
            next_writer: Arc::default(),
        };
        server.follow(server.current(None).1).await;
    }
}

/// `count` connections for writes to the server `client` names.
async fn writers(client: &redis::Client, count: usize) -> RedisResult<Vec<ConnectionManager>> {
    let mut writes = Vec::with_capacity(count);
    for _ in 0..count {
        writes.push(manager(client.clone()).await?);
    }
    Ok(writes)
}

async fn manager(client: redis::Client) -> RedisResult<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_with_config(client, config).await
}

impl Redis {
    /// Acknowledges a write only once `replicas` replicas have it (`WAIT`), within
    /// [`REPLICA_TIMEOUT`]; 0, the default, acknowledges it once the master has it. Writes then
    /// go over connections of their own (to one server or the Sentinels' master; a cluster's
    /// connection has one a node), so that reads are answered while a write waits.
    pub async fn with_replicas(mut self, replicas: usize) -> RedisResult<Self> {
        self.replicas = replicas;
        if let Link::Server(server) = &self.link
            && replicas > 0
        {
            let writes = writers(&server.current_client(), WRITERS).await?;
            let mut current = server
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            current.writes = writes;
        }
        Ok(self)
    }

    /// The handle a write and its [`Self::replicated`] go through: one of the write
    /// connections when replicas are asked for (the same one for both: `WAIT` counts the writes
    /// of its own connection), this connection otherwise.
    pub(crate) fn for_writes(&self) -> Redis {
        let mut writer = self.clone();
        if self.replicas > 0 {
            writer.writer = Some(match &self.link {
                Link::Server(server) => server.next_writer.fetch_add(1, Ordering::Relaxed),
                Link::Cluster(_) => 0,
            });
        }
        writer
    }

    /// A client for a subscription: the current master's, or, in a cluster, one node's
    /// (another at each call).
    pub async fn client(&self) -> RedisResult<redis::Client> {
        match &self.link {
            Link::Server(server) => {
                if server.sentinels.is_some() {
                    server.follow(server.current(None).1).await;
                }
                Ok(server.current_client())
            }
            Link::Cluster(cluster) => cluster.client(),
        }
    }

    /// Waits until the writes this handle sent so far are on the replicas asked for: an error when they are not within [`REPLICA_TIMEOUT`] (the writes were
    /// applied by the master, and a failover may lose them: their outcome is unknown). Called
    /// on the handle the writes went through ([`Self::for_writes`]).
    pub(crate) async fn replicated(&self) -> RedisResult<()> {
        if self.replicas == 0 {
            return Ok(());
        }
        let acknowledged = match &self.link {
            Link::Server(_) => {
                redis::cmd("WAIT")
                    .arg(self.replicas)
                    .arg(REPLICA_TIMEOUT.as_millis() as u64)
                    .query_async(&mut self.clone())
                    .await?
            }
            // Each write went with its `WAIT` ([`Cluster::send_and_wait`]); none, nothing to wait
            // for.
            Link::Cluster(_) => self.waited.unwrap_or(self.replicas),
        };
        if acknowledged < self.replicas {
            return Err(RedisError::from((
                ErrorKind::Io,
                "not on the replicas asked for in time; the write's outcome is unknown",
                format!("{acknowledged} of {} replicas", self.replicas),
            )));
        }
        Ok(())
    }

    /// The keys matching `pattern` (`SCAN`, on every primary of a cluster); a key may be
    /// named twice.
    pub(crate) async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        if let Link::Cluster(cluster) = &self.link {
            return cluster.scan(pattern).await;
        }
        let mut connection = self.clone();
        let mut cursor = 0u64;
        let mut out = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut connection)
                .await?;
            out.extend(keys);
            if next == 0 {
                return Ok(out);
            }
            cursor = next;
        }
    }
}

impl Server {
    /// The master's connection (write connection `writer`, when there are some) and its
    /// generation: what each request needs (the client, with its connection info, is cloned
    /// only by those that need it).
    fn current(&self, writer: Option<usize>) -> (ConnectionManager, u64) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let connection = match writer {
            Some(at) if !current.writes.is_empty() => &current.writes[at % current.writes.len()],
            _ => &current.connection,
        };
        (connection.clone(), current.generation)
    }

    fn current_client(&self) -> redis::Client {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.client.clone()
    }

    /// After `error` on the master of `generation`: when it says the master is gone or is one
    /// no more, asks the Sentinels which server is the master now.
    async fn after(&self, error: &RedisError, generation: u64) {
        let moved = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_timeout()
            || matches!(
                error.kind(),
                ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
            );
        if moved && self.sentinels.is_some() {
            self.follow(generation).await;
        }
    }

    /// Asks the Sentinels for the master, unless another request did since `generation` or
    /// they were asked less than [`ASK_AGAIN`] ago, and connects to it when it changed.
    async fn follow(&self, generation: u64) {
        let Some(sentinels) = &self.sentinels else {
            return;
        };
        let mut sentinels = sentinels.lock().await;
        if self.current(None).1 != generation
            || sentinels.asked.is_some_and(|at| at.elapsed() < ASK_AGAIN)
        {
            return;
        }
        sentinels.asked = Some(Instant::now());
        let client = match sentinels.client.async_get_client().await {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "no Sentinel named the master");
                return;
            }
        };
        if client.get_connection_info().addr() == self.current_client().get_connection_info().addr()
        {
            return;
        }
        let count = {
            let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            current.writes.len()
        };
        let connections = async {
            let connection = manager(client.clone()).await?;
            RedisResult::Ok((connection, writers(&client, count).await?))
        };
        match connections.await {
            Ok((connection, writes)) => {
                let address = client.get_connection_info().addr().to_string();
                let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
                current.connection = connection;
                current.writes = writes;
                current.client = client;
                current.generation += 1;
                tracing::warn!(%address, "the Sentinels name a new master; following it");
            }
            Err(error) => tracing::warn!(%error, "cannot connect to the master the Sentinels name"),
        }
    }
}

/// Whether `cmd` is a `SCRIPT` command (`LOAD`, after a script's first `NOSCRIPT`), which goes
/// to every primary of a cluster by itself, never with a `WAIT`.
fn loads_script(cmd: &Cmd) -> bool {
    let name = cmd.args_iter().next();
    matches!(name, Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"SCRIPT"))
}

impl ConnectionLike for Redis {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let server = match &self.link {
                Link::Server(server) => server,
                Link::Cluster(cluster) if self.writer.is_some() && !loads_script(cmd) => {
                    let replicas = self.replicas;
                    let sent = cluster
                        .send_and_wait(cmd, replicas, REPLICA_TIMEOUT)
                        .await?;
                    let (answer, waited) = sent;
                    self.waited = Some(self.waited.map_or(waited, |least| least.min(waited)));
                    return Ok(answer);
                }
                Link::Cluster(cluster) => return cluster.send(cmd).await,
            };
            let (mut connection, generation) = server.current(self.writer);
            let answer = connection.req_packed_command(cmd).await;
            if let Err(error) = &answer {
                server.after(error, generation).await;
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let server = match &mut self.link {
                Link::Server(server) => server,
                // Routed by the pipeline's keys, which the backends keep in one slot.
                Link::Cluster(cluster) => return cluster.send_pipeline(cmd, offset, count).await,
            };
            let (mut connection, generation) = server.current(self.writer);
            let answer = connection.req_packed_commands(cmd, offset, count).await;
            if let Err(error) = &answer {
                server.after(error, generation).await;
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Server(server) => server.current(None).0.get_db(),
            Link::Cluster(_) => 0,
        }
    }
}
