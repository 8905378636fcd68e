//! The coordination patterns of `ifmatch-client` against the blob front, and `ifmatch lock` as
//! scripts use it: exact counters under contention, a lock whose holder is SIGKILLed, leaders
//! that never overlap while leases are broken, a work queue whose workers crash.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::Server;
use ifmatch_azure::{DEV_ACCOUNT, DEV_KEY};
use ifmatch_client::{Backoff, Client, Conditions, LeaderElection, LeaseGuard, WorkQueue, update};

fn connection(base: &str) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};BlobEndpoint={base};"
    )
}

fn client(server: &Server) -> Client {
    Client::from_connection_string(&connection(&server.base)).unwrap()
}

/// `ifmatch lock --blob {blob} {options} -- {command}`, against `server`.
fn ifmatch_lock(
    server: &Server,
    blob: &str,
    options: &[&str],
    command: &[&str],
) -> std::process::Command {
    let mut lock = std::process::Command::new(common::binary());
    lock.args(["lock", "--blob", blob]).args(options);
    lock.arg("--").args(command);
    lock.env("IFMATCH_CONNECTION_STRING", connection(&server.base));
    lock
}

/// `ifmatch lock` of `blob` for 15 s around `sh -c {script}`, against `server`.
fn held_by(server: &Server, blob: &str, script: &str) -> std::process::Command {
    ifmatch_lock(server, blob, &["--duration", "15"], &["sh", "-c", script])
}

/// A path named `name` in a directory of its own, kept while the directory is.
fn scratch(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

/// A server of the test's own, and a client of it.
async fn served() -> (Server, Client) {
    let server = Server::start().await;
    let client = client(&server);
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_updates_count_exactly() {
    let (_server, client) = served().await;
    assert!(client.create_container("counters").await.unwrap());
    let counter = client.blob("counters", "n");
    let attempts = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (counter, attempts) = (counter.clone(), attempts.clone());
            tokio::spawn(async move {
                for _ in 0..5 {
                    let backoff = Backoff {
                        attempts: 200,
                        ..Backoff::default()
                    };
                    let done = update(&counter, &backoff, None, |old| {
                        let n: u64 =
                            old.map_or(0, |b| std::str::from_utf8(b).unwrap().parse().unwrap());
                        Some((n + 1).to_string().into_bytes())
                    })
                    .await
                    .unwrap();
                    attempts.fetch_add(done.attempts as usize, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let read = counter.get(&Conditions::default()).await.unwrap().unwrap();
    assert_eq!(
        read.bytes, "160",
        "the first write created it, every one counted once"
    );
    assert!(
        attempts.load(Ordering::Relaxed) > 160,
        "there was contention"
    );

    // The conditional-download cache: a 304 costs no body.
    let cache = ifmatch_client::ReadCache::new();
    let (first, sent) = cache.get(&counter).await.unwrap();
    assert!(sent && first.bytes == "160");
    let (again, sent) = cache.get(&counter).await.unwrap();
    assert!(
        !sent && again.bytes == "160",
        "answered 304, served from the cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_holder_is_killed_is_free_after_its_lease_never_before() {
    let (server, client) = served().await;
    let (_pids, pid_file) = scratch("pid");
    let script = format!("echo $$ > {}; exec sleep 120", pid_file.display());
    let mut lock = held_by(&server, "locks/nightly", &script);
    let mut holder = lock.spawn().unwrap();
    while !pid_file.exists()
        || std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let blob = client.blob("locks", "nightly");
    let taken = LeaseGuard::acquire(&blob, Duration::from_secs(15))
        .await
        .unwrap_err();
    assert!(taken.is_lease_taken(), "{taken}");

    // SIGKILL: no release. Its last renewal was at most 5 s ago (a third of 15 s).
    holder.kill().unwrap();
    holder.wait().unwrap();
    let command_pid = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::process::Command::new("kill")
        .arg(command_pid.trim())
        .status();
    server.advance(Duration::from_secs(9));
    let early = LeaseGuard::acquire(&blob, Duration::from_secs(15))
        .await
        .unwrap_err();
    assert!(
        early.is_lease_taken(),
        "still held 9 s after the kill: {early}"
    );
    server.advance(Duration::from_secs(7));
    let guard = LeaseGuard::acquire(&blob, Duration::from_secs(15)).await;
    assert!(guard.is_ok(), "free once the lease ran out: {guard:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_electors_never_lead_at_once_while_leases_are_broken() {
    let (_server, client) = served().await;
    client.create_container("election").await.unwrap();
    let blob = client.blob("election", "leader");
    let a = Arc::new(LeaderElection::start(blob.clone(), Duration::from_secs(15)));
    let b = Arc::new(LeaderElection::start(blob.clone(), Duration::from_secs(15)));
    let overlap = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (a, b, overlap, stop) = (a.clone(), b.clone(), overlap.clone(), stop.clone());
        tokio::spawn(async move {
            let mut leaders = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let now = (a.is_leader(), b.is_leader());
                if now.0 && now.1 {
                    overlap.store(true, Ordering::SeqCst);
                }
                if leaders.last() != Some(&now) {
                    leaders.push(now);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            leaders
        })
    };
    // Three breaks, each with a period longer than a third of the lease (the renewal
    // interval): the holder learns it lost before anyone else can take the lease, and nobody
    // leads again before the period ends (the old holder does not release a lease it lost,
    // which would end the break at once and hand the lease straight back to it).
    let leading = || a.is_leader() || b.is_leader();
    for _ in 0..3 {
        while !leading() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        blob.break_lease(Some(Duration::from_secs(6)))
            .await
            .unwrap();
        let broken = std::time::Instant::now();
        while leading() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        while !leading() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let gap = broken.elapsed();
        assert!(
            gap >= Duration::from_millis(5500),
            "a leader {gap:?} after a 6 s break"
        );
    }
    // Let the watcher (sampling every 10 ms) see the last term before it stops.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);
    let leaders = watcher.await.unwrap();
    assert!(
        !overlap.load(Ordering::SeqCst),
        "two leaders at once: {leaders:?}"
    );
    let terms = leaders.iter().filter(|l| l.0 || l.1).count();
    assert!(terms >= 4, "a leader after each break: {leaders:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leaders_lease_expires_and_the_other_takes_over_never_before() {
    let server = Server::start().await;
    let connection = connection(&server.base);
    let client = client(&server);
    client.create_container("election").await.unwrap();
    // The first elector on a runtime of its own: dropping the runtime is a crash (its lease
    // neither renewed nor released), as when a process dies.
    let crashed_leading = Arc::new(AtomicBool::new(false));
    let (crash, crashed) = std::sync::mpsc::channel::<()>();
    let first = {
        let (leading, connection) = (crashed_leading.clone(), connection.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let client = Client::from_connection_string(&connection).unwrap();
                let blob = client.blob("election", "crash");
                let mut election = LeaderElection::start(blob, Duration::from_secs(15));
                election.wait_until_leader().await;
                leading.store(true, Ordering::SeqCst);
                tokio::task::spawn_blocking(move || crashed.recv())
                    .await
                    .unwrap()
                    .unwrap();
                // Dying now: whatever it believed, it acts no more.
                leading.store(false, Ordering::SeqCst);
                std::mem::forget(election);
            });
            runtime.shutdown_background();
        })
    };
    while !crashed_leading.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = LeaderElection::start(client.blob("election", "crash"), Duration::from_secs(15));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!second.is_leader(), "the first still holds the lease");
    let crashed_at = std::time::Instant::now();
    crash.send(()).unwrap();
    first.join().unwrap();
    while !second.is_leader() {
        assert!(
            crashed_at.elapsed() < Duration::from_secs(30),
            "never took over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = crashed_at.elapsed();
    // The lease was last renewed at most 5 s before the crash: it ran out 10 to 15 s after.
    assert!(
        took >= Duration::from_secs(9),
        "took over after {took:?}: before the lease ran out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_command_and_ifmatch_lock_exits_75() {
    let (server, client) = served().await;
    let (_work, inside) = scratch("inside");
    let started = std::time::Instant::now();
    let script = format!("touch {}; exec sleep 60", inside.display());
    let lock = held_by(&server, "locks/job", &script);
    let mut holder = tokio::process::Command::from(lock).spawn().unwrap();
    while !inside.exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let blob = client.blob("locks", "job");
    blob.break_lease(Some(Duration::ZERO)).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), holder.wait())
        .await
        .expect("stopped within a renewal interval")
        .unwrap();
    assert_eq!(status.code(), Some(ifmatch_server::lock::LOST));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ifmatch_lock_around_commands_in_a_shell() {
    let server = Server::start().await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lock.sh");
    let work = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new("bash")
        .arg(&script)
        .arg(common::binary())
        .arg(work.path())
        .env("IFMATCH_CONNECTION_STRING", connection(&server.base))
        .output()
        .await
        .unwrap();
    common::assert_ran("lock.sh", &output, "lock.sh: ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_queue_processes_each_item_exactly_once_while_workers_crash() {
    const ITEMS: usize = 1000;
    const WORKERS: usize = 8;
    let (server, client) = served().await;
    let queue = WorkQueue::open(&client, "queue", "item/", Duration::from_secs(15))
        .await
        .unwrap();
    client.create_container("done").await.unwrap();
    for i in 0..ITEMS {
        queue.enqueue(i.to_string()).await.unwrap();
    }
    let processed = Arc::new(AtomicUsize::new(0));
    let crashes = Arc::new(AtomicUsize::new(0));
    let mut round = 0;
    loop {
        // Each worker runs on a runtime of its own: a crash drops the runtime, so its leases
        // are neither renewed nor released, as when a process dies.
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let connection = connection(&server.base);
                let (processed, crashes) = (processed.clone(), crashes.clone());
                // Half the workers of the first round crash at their third item or later:
                // before its work, or after it and before completing it.
                let crash_after = (round == 0 && w % 2 == 0).then_some(3 + w);
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    let crashed = runtime.block_on(async {
                        // A client of its own: its connections die with its runtime.
                        let client = Client::from_connection_string(&connection).unwrap();
                        let queue =
                            WorkQueue::open(&client, "queue", "item/", Duration::from_secs(15))
                                .await
                                .unwrap();
                        let mut taken = 0;
                        while let Some(item) = queue.dequeue().await.unwrap() {
                            taken += 1;
                            let crash = crash_after == Some(taken);
                            if crash && w % 4 == 0 {
                                // Neither released nor renewed again.
                                std::mem::forget(item);
                                return true;
                            }
                            // The work: a result written once (create-only), so an item
                            // redone after a crash finds it done.
                            let result = client.blob("done", &item.name);
                            match result
                                .put(item.bytes.clone(), &Conditions::create_only())
                                .await
                            {
                                Ok(_) => {
                                    processed.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(e) if e.is_already_exists() => {}
                                Err(e) => panic!("{e}"),
                            }
                            if crash {
                                std::mem::forget(item);
                                return true;
                            }
                            item.complete().await.unwrap();
                        }
                        false
                    });
                    if crashed {
                        crashes.fetch_add(1, Ordering::SeqCst);
                        runtime.shutdown_background();
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        if client.list("queue", "item/").await.unwrap().is_empty() {
            break;
        }
        // Items a crashed worker held come back once their lease runs out.
        round += 1;
        assert!(round < 5, "the queue never drained");
        server.advance(Duration::from_secs(16));
    }
    assert_eq!(crashes.load(Ordering::SeqCst), WORKERS / 2);
    assert_eq!(
        processed.load(Ordering::SeqCst),
        ITEMS,
        "each item's work done exactly once"
    );
    assert_eq!(client.list("done", "item/").await.unwrap().len(), ITEMS);
}

/// `ifmatch lock` around a shell that starts a background child, as cron jobs are: the process
/// of `ifmatch`, and the ids the shell wrote of itself and of its child.
struct ShellJob {
    ifmatch: tokio::process::Child,
    shell: u32,
    child: u32,
    /// Where the shell wrote the ids.
    _work: tempfile::TempDir,
}

impl ShellJob {
    /// Starts it on `blob` (grace: 2 s), once the shell and its child run. `script` runs after
    /// the child started; `wait` by default.
    async fn start(server: &Server, blob: &str, script: &str) -> Self {
        let work = tempfile::tempdir().unwrap();
        let (shell_file, child_file) = (work.path().join("shell"), work.path().join("child"));
        let script = format!(
            "sleep 300 & echo $! > {child}.tmp; mv {child}.tmp {child}; \
             echo $$ > {shell}.tmp; mv {shell}.tmp {shell}; {script}",
            child = child_file.display(),
            shell = shell_file.display(),
        );
        let options = ["--duration", "15", "--grace", "2"];
        let lock = ifmatch_lock(server, blob, &options, &["bash", "-c", &script]);
        let ifmatch = tokio::process::Command::from(lock).spawn().unwrap();
        while !shell_file.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap().trim().parse();
        Self {
            ifmatch,
            shell: read(&shell_file).unwrap(),
            child: read(&child_file).unwrap(),
            _work: work,
        }
    }

    /// Waits for `ifmatch` to exit, at most `within`: its exit status.
    async fn exits(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.ifmatch.wait())
            .await
            .expect("ifmatch exited in time")
            .unwrap()
    }

    /// Whether the shell or its child still runs (a zombie does not count).
    fn anything_runs(&self) -> bool {
        [self.shell, self.child].into_iter().any(running)
    }
}

/// Whether the process `pid` runs: it exists and is not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.as_bytes()[0]);
        state != Some(b'Z') && state != Some(b'X')
    })
}

/// Whether another `ifmatch lock --timeout 1` gets `blob` now: its exit status.
async fn another_gets(server: &Server, blob: &str) -> Option<i32> {
    let lock = ifmatch_lock(server, blob, &["--timeout", "1"], &["true"]);
    let status = tokio::process::Command::from(lock).status().await.unwrap();
    status.code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_ifmatch_lock_stops_the_whole_group_then_releases_the_lease() {
    let server = Server::start().await;
    let mut job = ShellJob::start(&server, "locks/term", "wait").await;
    assert!(job.anything_runs());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(job.ifmatch.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = job.exits(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");
    assert!(!job.anything_runs(), "the shell and its child were stopped");
    assert_eq!(
        another_gets(&server, "locks/term").await,
        Some(0),
        "the lease was released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_shell_and_its_background_child() {
    let server = Server::start().await;
    let mut job = ShellJob::start(&server, "locks/lost", "wait").await;
    client(&server)
        .blob("locks", "lost")
        .break_lease(Some(Duration::ZERO))
        .await
        .unwrap();
    let status = job.exits(Duration::from_secs(15)).await;
    assert_eq!(status.code(), Some(ifmatch_server::lock::LOST));
    assert!(!job.anything_runs(), "the shell and its child were stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ifmatch_lock_leaves_no_command_running_before_its_lease_expires() {
    let server = Server::start().await;
    let mut job = ShellJob::start(&server, "locks/killed", "wait").await;
    let killed = std::time::Instant::now();
    job.ifmatch.start_kill().unwrap();
    job.exits(Duration::from_secs(5)).await;
    while job.anything_runs() {
        // The lease runs 15 s from its last renewal, at most 5 s before the kill.
        assert!(
            killed.elapsed() < Duration::from_secs(9),
            "the command still runs {:?} after ifmatch was killed",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        another_gets(&server, "locks/killed").await,
        Some(ifmatch_server::lock::BUSY),
        "the lease is still held: the command was stopped before it expired"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_held_until_the_commands_background_child_ends() {
    let server = Server::start().await;
    // The shell exits at once; its child sleeps on until it is told to go.
    let mut job = ShellJob::start(&server, "locks/bg", "exit 3").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(running(job.child), "the background child runs on");
    assert!(
        tokio::time::timeout(Duration::from_millis(100), job.ifmatch.wait())
            .await
            .is_err(),
        "ifmatch waits for it"
    );
    assert_eq!(
        another_gets(&server, "locks/bg").await,
        Some(ifmatch_server::lock::BUSY),
        "and holds the lease meanwhile"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(job.child as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = job.exits(Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(3), "the command's own exit status");
    assert_eq!(another_gets(&server, "locks/bg").await, Some(0), "released");
}
