//! The coordination patterns of `ifmatch-client` against any blob endpoint, for comparing
//! servers (`scripts/client-vs-azurite` runs it against Azurite and `ifmatch serve`):
//! 32 concurrent read-modify-writes, a lock that excludes, a work queue drained by four
//! workers, a leader that hands over when its lease is broken.
//!
//! Usage: cargo run --example patterns -- CONNECTION_STRING

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ifmatch_client::{Backoff, Client, Conditions, LeaderElection, Lock, WorkQueue, update};

#[tokio::main]
async fn main() {
    let connection = std::env::args()
        .nth(1)
        .expect("usage: patterns CONNECTION_STRING");
    let client = Client::from_connection_string(&connection).expect("a connection string");
    let run = format!("p{}", std::process::id());
    let mut failed = 0;
    for (name, result) in [
        (
            "update: 32 clients x 5 increments, exact",
            counter(&client, &run).await,
        ),
        (
            "lock: 4 holders never inside at once",
            lock(&client, &run).await,
        ),
        (
            "work queue: 100 items, 4 workers, each once",
            queue(&client, &run).await,
        ),
        (
            "leader election: a break hands over, never two leaders",
            leader(&client, &run).await,
        ),
    ] {
        match result {
            Ok(detail) => println!("ok   {name}: {detail}"),
            Err(error) => {
                failed += 1;
                println!("FAIL {name}: {error}");
            }
        }
    }
    println!("client patterns: {} passed, {failed} failed", 4 - failed);
    std::process::exit(i32::from(failed > 0));
}

type Outcome = Result<String, String>;

async fn counter(client: &Client, run: &str) -> Outcome {
    client
        .create_container(run)
        .await
        .map_err(|e| e.to_string())?;
    let blob = client.blob(run, "counter");
    let started = Instant::now();
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let blob = blob.clone();
            tokio::spawn(async move {
                let backoff = Backoff {
                    attempts: 200,
                    ..Backoff::default()
                };
                let mut attempts = 0;
                for _ in 0..5 {
                    let done = update(&blob, &backoff, None, |old| {
                        let n: u64 = old
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                            .unwrap_or(0);
                        Some((n + 1).to_string().into_bytes())
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                    attempts += done.attempts;
                }
                Ok::<_, String>(attempts)
            })
        })
        .collect();
    let mut attempts = 0;
    for task in tasks {
        attempts += task.await.map_err(|e| e.to_string())??;
    }
    let read = blob
        .get(&Conditions::default())
        .await
        .map_err(|e| e.to_string())?;
    let value = read
        .map(|b| String::from_utf8_lossy(&b.bytes).into_owned())
        .unwrap_or_default();
    match value.as_str() {
        "160" => Ok(format!(
            "160 in {:.1} s, {attempts} attempts",
            started.elapsed().as_secs_f64()
        )),
        other => Err(format!("counted {other}, not 160")),
    }
}

async fn lock(client: &Client, run: &str) -> Outcome {
    let blob = client.blob(run, "lock");
    let inside = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (blob, inside) = (blob.clone(), inside.clone());
            tokio::spawn(async move {
                let guard = Lock::acquire(
                    &blob,
                    Duration::from_secs(15),
                    Some(Duration::from_secs(60)),
                )
                .await
                .map_err(|e| e.to_string())?;
                if inside.swap(true, Ordering::SeqCst) {
                    return Err("two holders inside".to_owned());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                inside.store(false, Ordering::SeqCst);
                guard.release().await.map_err(|e| e.to_string())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok("4 turns".into())
}

async fn queue(client: &Client, run: &str) -> Outcome {
    let queue = WorkQueue::open(client, run, "item/", Duration::from_secs(15))
        .await
        .map_err(|e| e.to_string())?;
    for i in 0..100 {
        queue
            .enqueue(i.to_string())
            .await
            .map_err(|e| e.to_string())?;
    }
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (queue, done) = (queue.clone(), done.clone());
            tokio::spawn(async move {
                while let Some(item) = queue.dequeue().await.map_err(|e| e.to_string())? {
                    item.complete().await.map_err(|e| e.to_string())?;
                    done.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    match done.load(Ordering::SeqCst) {
        100 => Ok("100 completed".into()),
        n => Err(format!("{n} completed, not 100")),
    }
}

async fn leader(client: &Client, run: &str) -> Outcome {
    let blob = client.blob(run, "leader");
    let a = LeaderElection::start(blob.clone(), Duration::from_secs(15));
    let b = LeaderElection::start(blob.clone(), Duration::from_secs(15));
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        match (a.is_leader(), b.is_leader()) {
            (true, true) => return Err("two leaders".into()),
            (true, false) => break 'a',
            (false, true) => break 'b',
            _ if Instant::now() > deadline => return Err("no leader".into()),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    // The break's period exceeds the renewal interval (a third of the lease, 5 s) by more than
    // any round trip of a loaded machine: the leader learns it lost before the other can lead.
    blob.break_lease(Some(Duration::from_secs(10)))
        .await
        .map_err(|e| e.to_string())?;
    // The break lasts 10 s, then the candidates retry at most a third of the lease (5 s)
    // apart; 60 s leaves room for a Worker in miniflare loaded by the other SDK tests (a CI run
    // saw no leader within 30 s while the Python SDK's uploads ran beside it).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut gap = false;
    loop {
        match (a.is_leader(), b.is_leader()) {
            (true, true) => return Err("two leaders".into()),
            (false, false) => gap = true,
            _ if gap => break,
            _ => {}
        }
        if Instant::now() > deadline {
            return Err("no leader after the break".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(format!("{first} led, lost it to the break, a leader again"))
}
