//! Redis Cluster (`redis+cluster://H1:P1,H2:P2`): the redis crate's cluster connection, which
//! learns which primary holds each hash slot, sent each command once.
//!
//! Every script of the backends touches the keys of one hash tag (a container's records, a
//! table's entities, a key's version and lock), so each runs whole on the primary of one slot.
//! The crate's connection would send a command again after any error, a dropped connection
//! included, whose command may have run: a write applied twice answers a conflict for a change
//! that was made. So it is built to send each command once, and [`Cluster::send`] sends again
//! only after an answer that says the command did not run: the slot is elsewhere (`MOVED`, or
//! `ASK` while it migrates, followed with `ASKING`), the cluster or the slot is not ready
//! (`TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`, `READONLY` from a demoted primary), or
//! no connection could be made; for at most its timeout ([`crate::TIMEOUT`]). A dropped
//! connection or a timeout is answered as it is: the outcome is unknown.
//!
//! A write that waits for replicas is sent with its `WAIT` in one pipeline
//! ([`Cluster::send_and_wait`]): `WAIT` counts the writes of its own connection to its own node,
//! and one sent apart, routed by the slots as known a moment later, was seen to answer for
//! another node.
//!
//! After a request failed for want of the slot's primary (timed out, redirected or refused until
//! its time was up), the connection is made anew from the nodes the URL named, at most once a
//! second: under many requests to a failed primary's slot, the crate's connection was seen
//! never to take the promoted replica (56 clients on one slot: every read timed out for as long
//! as the test ran, 20 s), where a new connection reads the slots as they are.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// How long to wait before sending again a command the cluster was not ready for.
const PAUSE: Duration = Duration::from_millis(50);

/// The least time between two new connections.
const RENEW_AGAIN: Duration = Duration::from_secs(1);

/// A connection to a Redis Cluster, cheap to clone.
#[derive(Clone)]
pub(crate) struct Cluster {
    /// The connection, and its generation (moves at each new one).
    current: Arc<Mutex<(ClusterConnection, u64)>>,
    /// When the connection was last made anew.
    renewed: Arc<tokio::sync::Mutex<Instant>>,
    /// The nodes the URL named (`redis://H:P`, with its credentials), for subscriptions.
    nodes: Arc<[redis::ConnectionInfo]>,
    /// The node the next subscription tries.
    next: Arc<AtomicUsize>,
    /// How long a command may take, its sends again included, and a connection to be made.
    timeout: Duration,
}

/// Where to send a command again.
enum Again {
    /// As routed by its key, after a pause.
    Later,
    /// To this node; `true`: preceded by `ASKING` (the slot is migrating to it).
    To(String, u16, bool),
}

impl Cluster {
    /// Connects to the cluster that `nodes` (any of its nodes) belong to; each command is
    /// answered within `timeout`.
    pub(crate) async fn connect(
        nodes: Vec<redis::ConnectionInfo>,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let connection = open(&nodes, timeout).await?;
        Ok(Self {
            current: Arc::new(Mutex::new((connection, 0))),
            renewed: Arc::new(tokio::sync::Mutex::new(Instant::now())),
            nodes: nodes.into(),
            next: Arc::default(),
            timeout,
        })
    }

    fn connection(&self) -> (ClusterConnection, u64) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (current.0.clone(), current.1)
    }

    /// After a request on the connection of `generation` failed for want of its slot's
    /// primary: makes the connection anew, unless another request did since, or did less than
    /// [`RENEW_AGAIN`] ago.
    async fn renew(&self, generation: u64) {
        let mut renewed = self.renewed.lock().await;
        if self.connection().1 != generation || renewed.elapsed() < RENEW_AGAIN {
            return;
        }
        *renewed = Instant::now();
        match open(&self.nodes, self.timeout).await {
            Ok(connection) => {
                let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
                *current = (connection, current.1 + 1);
                tracing::warn!(
                    "a request found no primary for its slot; connected to the cluster anew"
                );
            }
            Err(error) => tracing::warn!(%error, "cannot connect to the cluster anew"),
        }
    }

    /// Sends `cmd` to the primary of its key's slot, and again only when an answer said it did
    /// not run (see the module's documentation).
    pub(crate) async fn send(&self, cmd: &Cmd) -> RedisResult<Value> {
        Ok(self.send_with(cmd, None).await?.0)
    }

    /// Sends the write `cmd` as [`Self::send`] does, and `WAIT replicas timeout` after it in one
    /// pipeline, so that the wait is on the node that ran the write and counts it: the write's
    /// answer, and how many replicas have it.
    pub(crate) async fn send_and_wait(
        &self,
        cmd: &Cmd,
        replicas: usize,
        timeout: Duration,
    ) -> RedisResult<(Value, usize)> {
        let (value, waited) = self.send_with(cmd, Some((replicas, timeout))).await?;
        let waited = waited.unwrap_or(Value::Nil);
        Ok((value, redis::FromRedisValue::from_redis_value(waited)?))
    }

    async fn send_with(
        &self,
        cmd: &Cmd,
        wait: Option<(usize, Duration)>,
    ) -> RedisResult<(Value, Option<Value>)> {
        let deadline = Instant::now() + self.timeout;
        let (mut connection, generation) = self.connection();
        let mut answer = attempt(&mut connection, cmd, wait, None).await;
        loop {
            let again = match &answer {
                Err(error) if Instant::now() < deadline => again(error),
                _ => None,
            };
            answer = match again {
                None => {
                    if answer.as_ref().is_err_and(lost) {
                        self.renew(generation).await;
                    }
                    return answer;
                }
                Some(Again::Later) => {
                    tokio::time::sleep(PAUSE).await;
                    attempt(&mut connection, cmd, wait, None).await
                }
                Some(Again::To(host, port, asking)) => {
                    let node = SingleNodeRoutingInfo::ByAddress { host, port };
                    attempt(&mut connection, cmd, wait, Some((node, asking))).await
                }
            };
        }
    }

    /// Sends a pipeline to the primary of its keys' slot, again only after an answer that says
    /// it did not run and names no other node.
    pub(crate) async fn send_pipeline(
        &self,
        pipeline: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let deadline = Instant::now() + self.timeout;
        let (mut connection, generation) = self.connection();
        loop {
            let answer = redis::aio::ConnectionLike::req_packed_commands(
                &mut connection,
                pipeline,
                offset,
                count,
            )
            .await;
            match &answer {
                Err(error) if Instant::now() < deadline && again(error).is_some() => {
                    tokio::time::sleep(PAUSE).await;
                }
                Err(error) if lost(error) => {
                    self.renew(generation).await;
                    return answer;
                }
                _ => return answer,
            }
        }
    }

    /// The keys matching `pattern` on every primary (`SCAN` on each, as the slots are now).
    pub(crate) async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut connection = self.connection().0;
        let slots = connection
            .route_command(
                redis::cmd("CLUSTER").arg("SLOTS").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await?;
        let mut primaries = primaries(slots)?;
        primaries.sort();
        primaries.dedup();
        let mut keys = Vec::new();
        for (host, port) in primaries {
            let mut cursor = 0u64;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let node = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port,
                };
                let answer = connection
                    .route_command(scan, RoutingInfo::SingleNode(node))
                    .await?;
                let (next, found): (u64, Vec<String>) =
                    redis::FromRedisValue::from_redis_value(answer)?;
                keys.extend(found);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(keys)
    }

    /// A client for one of the nodes the URL named, another at each call: in a cluster, a
    /// message published on any node reaches the subscribers of every node.
    pub(crate) fn client(&self) -> RedisResult<redis::Client> {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.nodes.len();
        redis::Client::open(self.nodes[at].clone())
    }
}

/// One sending of `cmd` (and of `WAIT` after it, when asked), where its key's slot is or to
/// `node` (preceded by `ASKING`: the slot is migrating there): the command's answer, and the
/// wait's.
async fn attempt(
    connection: &mut ClusterConnection,
    cmd: &Cmd,
    wait: Option<(usize, Duration)>,
    node: Option<(SingleNodeRoutingInfo, bool)>,
) -> RedisResult<(Value, Option<Value>)> {
    let asking = node.as_ref().is_some_and(|(_, asking)| *asking);
    if wait.is_none() && !asking {
        let answer = match node {
            None => redis::aio::ConnectionLike::req_packed_command(connection, cmd).await,
            Some((node, _)) => {
                let routing = RoutingInfo::SingleNode(node);
                connection.route_command(cmd.clone(), routing).await
            }
        };
        return answer.map(|value| (value, None));
    }
    let mut pipeline = redis::pipe();
    if asking {
        pipeline.cmd("ASKING");
    }
    pipeline.add_command(cmd.clone());
    if let Some((replicas, timeout)) = wait {
        pipeline
            .cmd("WAIT")
            .arg(replicas)
            .arg(timeout.as_millis() as u64);
    }
    let (offset, count) = (usize::from(asking), 1 + usize::from(wait.is_some()));
    let answers = match node {
        None => {
            redis::aio::ConnectionLike::req_packed_commands(connection, &pipeline, offset, count)
                .await
        }
        Some((node, _)) => {
            connection
                .route_pipeline(pipeline, offset, count, node)
                .await
        }
    };
    let mut answers = answers?.into_iter();
    let value = answers.next().unwrap_or(Value::Nil).extract_error()?;
    Ok((value, answers.next()))
}

/// The connection of `nodes`, which sends each command once.
async fn open(
    nodes: &[redis::ConnectionInfo],
    timeout: Duration,
) -> RedisResult<ClusterConnection> {
    ClusterClient::builder(nodes.to_vec())
        .retries(0)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .build()?
        .get_async_connection()
        .await
}

/// Whether a request's last error says its slot's primary was not to be had (a redirect or a
/// wait that lasted its whole time, or a timeout): the cue to connect anew.
fn lost(error: &RedisError) -> bool {
    error.is_timeout() || again(error).is_some()
}

/// Whether, and where, a command that failed with `error` is sent again: only when the
/// answer says it did not run.
fn again(error: &RedisError) -> Option<Again> {
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask) => {
            let asking = error.kind() == ErrorKind::Server(ServerErrorKind::Ask);
            let (node, _) = error.redirect_node()?;
            let (host, port) = node.rsplit_once(':')?;
            Some(Again::To(host.to_owned(), port.parse().ok()?, asking))
        }
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        )
        | ErrorKind::ClusterConnectionNotFound => Some(Again::Later),
        _ if error.is_connection_refusal() => Some(Again::Later),
        _ => None,
    }
}

/// The primaries' addresses in a `CLUSTER SLOTS` answer (per range: start, end, then the
/// primary `[host, port, id]`, then its replicas).
fn primaries(slots: Value) -> RedisResult<Vec<(String, u16)>> {
    let ranges: Vec<Vec<Value>> = redis::FromRedisValue::from_redis_value(slots)?;
    ranges
        .into_iter()
        .filter_map(|range| range.into_iter().nth(2))
        .map(|primary| {
            let node: Vec<Value> = redis::FromRedisValue::from_redis_value(primary)?;
            let mut node = node.into_iter();
            let host: String =
                redis::FromRedisValue::from_redis_value(node.next().unwrap_or(Value::Nil))?;
            let port: u16 =
                redis::FromRedisValue::from_redis_value(node.next().unwrap_or(Value::Nil))?;
            Ok((host, port))
        })
        .collect()
}
