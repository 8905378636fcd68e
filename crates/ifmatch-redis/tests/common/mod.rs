//! A client of the failover tests: counters in a Redis table, each its own client's, every
//! increment conditional on the last.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use ifmatch_redis::RedisTables;
use ifmatch_table::{Change, DateTime, Entity, Expected, TableError, Tables, Value};

/// The counter of `client` in `table`: its value and the instant it was written at (`None`: not yet).
async fn read(
    tables: &RedisTables,
    table: &str,
    client: usize,
) -> Result<Option<(i64, DateTime)>, TableError> {
    let key = ("c".to_owned(), client.to_string());
    Ok(tables.get(table, &key).await?.map(|entity| {
        let Some(Value::Int64(n)) = entity.properties.get("n") else {
            panic!("a counter holds n");
        };
        (*n, entity.timestamp)
    }))
}

/// Increments `client`'s own counter in `table` until `stop`, counting what was acknowledged; a write
/// whose outcome is unknown (an error) counts when a later read finds it, since each write's
/// instant is its own. When an increment first lands after the kill, `resumed` says when.
async fn increment(
    tables: RedisTables,
    table: &'static str,
    client: usize,
    stop: Arc<AtomicBool>,
    killed_at: Arc<AtomicI64>,
    resumed_after: Arc<[AtomicI64]>,
    started: Instant,
) -> i64 {
    let (mut acknowledged, mut unknown) = (0, None::<DateTime>);
    let mut tick = (client as i64 + 1) * 1_000_000_000;
    while !stop.load(Ordering::SeqCst) {
        let current = match read(&tables, table, client).await {
            Ok(current) => current,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // The write of unknown outcome, found or not: either way, decided now.
        if let Some(at) = unknown.take()
            && current.is_some_and(|(_, stored)| stored == at)
        {
            acknowledged += 1;
        }
        tick += 1;
        let at = DateTime::from_ticks(tick);
        let n = current.map_or(0, |(n, _)| n);
        let change = Change {
            key: ("c".to_owned(), client.to_string()),
            expected: current.map_or(Expected::Absent, |(_, stored)| Expected::Version(stored)),
            write: Some(Entity::new(
                "c",
                &client.to_string(),
                at,
                [("n", Value::Int64(n + 1))],
            )),
        };
        let sent = started.elapsed().as_millis() as i64;
        match tables.commit(table, &[change]).await {
            Ok(()) => {
                acknowledged += 1;
                // A write sent after the kill: one in flight then may have been replicated.
                let killed = killed_at.load(Ordering::SeqCst);
                if killed > 0 && sent > killed {
                    let now = started.elapsed().as_millis() as i64;
                    resumed_after[client].fetch_min(now - killed, Ordering::SeqCst);
                }
            }
            Err(TableError::Conflict { .. }) => panic!("client {client}'s counter is its own"),
            Err(_) => {
                unknown = Some(at);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // The last write of unknown outcome, decided.
    loop {
        match read(&tables, table, client).await {
            Ok(current) => {
                if let Some(at) = unknown
                    && current.is_some_and(|(_, stored)| stored == at)
                {
                    acknowledged += 1;
                }
                return acknowledged;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
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
    clients: Vec<tokio::task::JoinHandle<i64>>,
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
    /// clients in `table`; panics when none was within `bound`.
    pub(crate) async fn resumed(&self, table: &str, bound: Duration) -> Duration {
        let deadline = Instant::now() + bound;
        loop {
            let resumed = (self.resumed_after.iter().enumerate())
                .filter(|(client, _)| (self.table_of)(*client) == table)
                .map(|(_, after)| after.load(Ordering::SeqCst))
                .min()
                .unwrap_or(i64::MAX);
            if resumed < i64::MAX {
                return Duration::from_millis(resumed as u64);
            }
            assert!(
                Instant::now() < deadline,
                "no write to {table} landed within {bound:?} of the kill"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the clients and checks that each counter holds every increment its client was
    /// acknowledged, and no other; the increments acknowledged in all.
    pub(crate) async fn finish(self) -> i64 {
        self.stop.store(true, Ordering::SeqCst);
        let mut total = 0;
        for (client, task) in self.clients.into_iter().enumerate() {
            let acknowledged = task.await.unwrap();
            let table = (self.table_of)(client);
            let stored = read(&self.tables, table, client).await.unwrap();
            let stored = stored.map_or(0, |(n, _)| n);
            assert_eq!(
                stored, acknowledged,
                "client {client}: every acknowledged increment"
            );
            total += acknowledged;
        }
        total
    }
}
