//! What the Cosmos tests share: a database and container to write to, the peak memory of the
//! server, and a point reader timed all along.

use std::sync::Arc;
use std::time::Duration;

/// Creates database `id` and its container `c`, keyed by `/pk`.
pub async fn create_database(http: &reqwest::Client, endpoint: &str, id: &str) {
    let created = http
        .post(format!("{endpoint}/dbs"))
        .body(format!(r#"{{"id":"{id}"}}"#));
    assert_eq!(created.send().await.unwrap().status(), 201);
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#;
    let created = http
        .post(format!("{endpoint}/dbs/{id}/colls"))
        .body(container);
    assert_eq!(created.send().await.unwrap().status(), 201);
}

/// The peak resident memory of process `pid`, in MiB.
pub fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

/// A point read of one document in partition `p`, again and again, timed, until stopped.
pub struct PointReader {
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Duration)>,
}

impl PointReader {
    pub fn start(http: &reqwest::Client, url: String) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stopped, http) = (stop.clone(), http.clone());
        let task = tokio::spawn(async move {
            let (mut reads, mut slowest) = (0, Duration::ZERO);
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let started = std::time::Instant::now();
                let read = http
                    .get(&url)
                    .header("x-ms-documentdb-partitionkey", r#"["p"]"#);
                assert_eq!(read.send().await.unwrap().status(), 200);
                slowest = slowest.max(started.elapsed());
                reads += 1;
            }
            (reads, slowest)
        });
        Self { stop, task }
    }

    /// How many reads were made, and the slowest.
    pub async fn stop(self) -> (usize, Duration) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap()
    }
}
