//! A client of the failover tests: counters in a Redis table, each its own client's, every
//! increment conditional on the last, each counter the list of the increments that made it (so
//! that what landed is known exactly, a write of unknown outcome included).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use ifmatch_redis::{RedisTables, RedisVersions};
use ifmatch_table::{Change, DateTime, Entity, Expected, TableError, Tables, Value};
use ifmatch_tower::SharedBackend;

/// The counter of `client` in `table`: the ids of the increments that made it and the
/// instant it was last written at (`None`: not yet).
async fn read(
    tables: &RedisTables,
    table: &str,
    client: usize,
) -> Result<Option<(Vec<i64>, DateTime)>, TableError> {
    let key = ("c".to_owned(), client.to_string());
    Ok(tables.get(table, &key).await?.map(|entity| {
        let Some(Value::String(ids)) = entity.properties.get("ids") else {
            panic!("a counter holds ids");
        };
        let ids = ids.split_whitespace().map(|id| id.parse().unwrap());
        (ids.collect(), entity.timestamp)
    }))
}

/// What a client was answered: the ids of the increments acknowledged, and of those whose
/// outcome is unknown (an error: applied or not, perhaps later than its answer).
#[derive(Default)]
struct Answered {
    acknowledged: HashSet<i64>,
    unknown: HashSet<i64>,
}

/// Increments `client`'s own counter in `table` until `stop`: each write appends an id of its
/// own to the ids read, if the counter is still as read (a conflict: a write of unknown
/// outcome landed since, and it reads again). When an increment sent after the kill is first
/// acknowledged, `resumed_after[client]` says when.
async fn increment(
    tables: RedisTables,
    table: &'static str,
    client: usize,
    stop: Arc<AtomicBool>,
    killed_at: Arc<AtomicI64>,
    resumed_after: Arc<[AtomicI64]>,
    started: Instant,
) -> Answered {
    let mut answered = Answered::default();
    let mut tick = (client as i64 + 1) * 1_000_000_000;
    while !stop.load(Ordering::SeqCst) {
        let current = match read(&tables, table, client).await {
            Ok(current) => current,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        tick += 1;
        let mut ids = current.as_ref().map_or(Vec::new(), |(ids, _)| ids.clone());
        ids.push(tick);
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        let change = Change {
            key: ("c".to_owned(), client.to_string()),
            expected: current.map_or(Expected::Absent, |(_, stored)| Expected::Version(stored)),
            write: Some(Entity::new(
                "c",
                &client.to_string(),
                DateTime::from_ticks(tick),
                [("ids", Value::String(ids.join(" ")))],
            )),
        };
        let sent = started.elapsed().as_millis() as i64;
        match tables.commit(table, &[change]).await {
            Ok(()) => {
                answered.acknowledged.insert(tick);
                // A write sent after the kill: one in flight then may have been replicated.
                let killed = killed_at.load(Ordering::SeqCst);
                if killed > 0 && sent > killed {
                    let now = started.elapsed().as_millis() as i64;
                    resumed_after[client].fetch_min(now - killed, Ordering::SeqCst);
                }
            }
            Err(TableError::Conflict { .. }) => {}
            Err(_) => {
                answered.unknown.insert(tick);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    answered
}

/// Clients incrementing their counters (client `i`'s in table `tables_of(i)`), until
/// [`Run::finish`] checks each counter against what its client was acknowledged.
pub(crate) struct Run {
    tables: RedisTables,
    table_of: fn(usize) -> &'static str,
    stop: Arc<AtomicBool>,
    killed_at: Arc<AtomicI64>,
    /// Per client.
    resumed_after: Arc<[AtomicI64]>,
    started: Instant,
    clients: Vec<tokio::task::JoinHandle<Answered>>,
}

impl Run {
    /// Starts `clients` clients.
    pub(crate) fn start(
        tables: &RedisTables,
        clients: usize,
        table_of: fn(usize) -> &'static str,
    ) -> Self {
        let (stop, killed_at) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicI64::new(0)),
        );
        let resumed_after: Arc<[AtomicI64]> =
            (0..clients).map(|_| AtomicI64::new(i64::MAX)).collect();
        let started = Instant::now();
        let clients = (0..clients)
            .map(|client| {
                tokio::spawn(increment(
                    tables.clone(),
                    table_of(client),
                    client,
                    stop.clone(),
                    killed_at.clone(),
                    resumed_after.clone(),
                    started,
                ))
            })
            .collect();
        Self {
            tables: tables.clone(),
            table_of,
            stop,
            killed_at,
            resumed_after,
            started,
            clients,
        }
    }

    /// Notes that a server was killed now.
    pub(crate) fn killed(&self) {
        let now = self.started.elapsed().as_millis() as i64;
        self.killed_at.store(now, Ordering::SeqCst);
    }

    /// How long after the kill a write sent after it was first acknowledged to one of the
    /// clients in `table`; panics when none was within `bound`, or when one was before
    /// `restarted` (the old primary back as a replica: with one replica asked for and the only
    /// other copy dead, nothing may be acknowledged before).
    pub(crate) async fn resumed(
        &self,
        table: &str,
        restarted: Duration,
        bound: Duration,
    ) -> Duration {
        let deadline = Instant::now() + bound;
        let resumed = loop {
            let resumed = (self.resumed_after.iter().enumerate())
                .filter(|(client, _)| (self.table_of)(*client) == table)
                .map(|(_, after)| after.load(Ordering::SeqCst))
                .min()
                .unwrap_or(i64::MAX);
            if resumed < i64::MAX {
                break Duration::from_millis(resumed as u64);
            }
            assert!(
                Instant::now() < deadline,
                "no write to {table} landed within {bound:?} of the kill"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            resumed >= restarted,
            "a write acknowledged {resumed:?} after the kill, with no replica to have it"
        );
        resumed
    }

    /// Stops the clients and checks that each counter holds every increment its client was
    /// acknowledged, and none but those and the ones of unknown outcome; the increments
    /// acknowledged in all.
    pub(crate) async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let mut total = 0;
        for (client, task) in self.clients.into_iter().enumerate() {
            let answered = task.await.unwrap();
            let table = (self.table_of)(client);
            let stored = loop {
                match read(&self.tables, table, client).await {
                    Ok(stored) => break stored,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            };
            let landed: HashSet<i64> = stored
                .map_or(Vec::new(), |(ids, _)| ids)
                .into_iter()
                .collect();
            for id in &answered.acknowledged {
                assert!(
                    landed.contains(id),
                    "client {client}: acknowledged {id} lost"
                );
            }
            for id in &landed {
                let known = answered.acknowledged.contains(id) || answered.unknown.contains(id);
                assert!(known, "client {client}: {id} never written");
            }
            total += answered.acknowledged.len();
        }
        total
    }
}

/// Checks that the lock on `key` taken by `holder` with fencing `token` before a failover is
/// its holder's still and no one else's, and that the next token is higher.
pub(crate) async fn held_through(versions: &RedisVersions, key: &str, token: u64) {
    let taken = versions.acquire(key, "another", 60_000).await.unwrap();
    assert_eq!(taken, None, "the lock outlived the failover");
    assert!(versions.renew(key, "holder", 60_000).await.unwrap());
    versions.release(key, "holder").await.unwrap();
    let next = versions.acquire(key, "another", 60_000).await.unwrap();
    assert!(
        next.is_some_and(|next| next > token),
        "{next:?} after {token}"
    );
}
