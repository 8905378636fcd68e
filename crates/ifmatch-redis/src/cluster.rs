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
//! no connection could be made; for at most [`TIMEOUT`]. A dropped connection or a timeout is
//! answered as it is: the outcome is unknown.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use crate::connection::TIMEOUT;

/// How long to wait before sending again a command the cluster was not ready for.
const PAUSE: Duration = Duration::from_millis(50);

/// A connection to a Redis Cluster, cheap to clone.
#[derive(Clone)]
pub(crate) struct Cluster {
    connection: ClusterConnection,
    /// The nodes the URL named (`redis://H:P`, with its credentials), for subscriptions.
    nodes: Arc<[redis::ConnectionInfo]>,
    /// The node the next subscription tries.
    next: Arc<AtomicUsize>,
}

/// Where to send a command again.
enum Again {
    /// As routed by its key, after a pause.
    Later,
    /// To this node; `true`: preceded by `ASKING` (the slot is migrating to it).
    To(String, u16, bool),
}

impl Cluster {
    /// Connects to the cluster that `nodes` (any of its nodes) belong to.
    pub(crate) async fn connect(nodes: Vec<redis::ConnectionInfo>) -> RedisResult<Self> {
        let connection = ClusterClient::builder(nodes.clone())
            .retries(0)
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .build()?
            .get_async_connection()
            .await?;
        Ok(Self {
            connection,
            nodes: nodes.into(),
            next: Arc::default(),
        })
    }

    /// Sends `cmd` to the primary of its key's slot, and again only when an answer said it did
    /// not run (see the module's documentation).
    pub(crate) async fn send(&self, cmd: &Cmd) -> RedisResult<Value> {
        let deadline = Instant::now() + TIMEOUT;
        let mut connection = self.connection.clone();
        let mut answer = redis::aio::ConnectionLike::req_packed_command(&mut connection, cmd).await;
        loop {
            let again = match &answer {
                Err(error) if Instant::now() < deadline => again(error),
                _ => None,
            };
            answer = match again {
                None => return answer,
                Some(Again::Later) => {
                    tokio::time::sleep(PAUSE).await;
                    redis::aio::ConnectionLike::req_packed_command(&mut connection, cmd).await
                }
                Some(Again::To(host, port, false)) => {
                    let node = SingleNodeRoutingInfo::ByAddress { host, port };
                    let routing = RoutingInfo::SingleNode(node);
                    connection.route_command(cmd.clone(), routing).await
                }
                Some(Again::To(host, port, true)) => {
                    let mut asking = redis::pipe();
                    asking.cmd("ASKING").add_command(cmd.clone());
                    let node = SingleNodeRoutingInfo::ByAddress { host, port };
                    let answers = connection.route_pipeline(asking, 1, 1, node).await;
                    answers.map(|mut answers| answers.pop().unwrap_or(Value::Nil))
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
        let deadline = Instant::now() + TIMEOUT;
        let mut connection = self.connection.clone();
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
                _ => return answer,
            }
        }
    }

    /// `WAIT replicas timeout` on the primary of `key`'s slot, over the connection that sent
    /// its writes: how many of its replicas have them.
    pub(crate) async fn wait(
        &self,
        key: &str,
        replicas: usize,
        timeout: Duration,
    ) -> RedisResult<usize> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        let route = Route::with_key(key, SlotAddr::Master);
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
        let answer = self.connection.clone().route_command(wait, routing).await?;
        redis::FromRedisValue::from_redis_value(answer).map_err(Into::into)
    }

    /// The keys matching `pattern` on every primary (`SCAN` on each, as the slots are now).
    pub(crate) async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut connection = self.connection.clone();
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
