//! A real `redis-server` for tests, on a free loopback port, stopped when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own, with its data (append-only file, fsync always) in a
/// directory of its own, so that a restart keeps every acknowledged write.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// More arguments (a replica's `--replicaof`).
    more: Vec<String>,
}

impl RedisServer {
    /// Starts one. Panics when `redis-server` is missing: the test command installs it.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts one with more arguments (`["--replicaof", "127.0.0.1", "6379"]`).
    /// A port another process took between [`free_port`] and the server's start makes the
    /// server exit at once: it is started again on another port, a few times.
    pub fn start_with(more: &[&str]) -> Self {
        for _ in 0..4 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("ifmatch-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a directory for redis-server");
            let mut server = Self {
                child: None,
                port,
                dir,
                more: more.iter().map(|a| a.to_string()).collect(),
            };
            if server.try_start().is_ok() {
                return server;
            }
        }
        panic!("redis-server exited at its start on four ports in a row");
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Waits until this server, a replica of `primary`, has its link to it up (its first sync
    /// done) and `primary` counts it online: a write that waits for one replica before then may
    /// wait for nothing (`WAIT` counts the replicas its primary has online, which on a loaded
    /// machine came after the replica's link was up). Panics after `within`.
    pub fn wait_in_sync(&self, primary: &RedisServer, within: std::time::Duration) {
        let until = std::time::Instant::now() + within;
        let info = |port| command(port, &["INFO", "replication"]).unwrap_or_default();
        while !(info(self.port).contains("master_link_status:up")
            && info(primary.port).contains("state=online"))
        {
            assert!(
                std::time::Instant::now() < until,
                "the replica did not sync in {within:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data (after [`Self::kill`]).
    pub fn restart(&mut self) {
        if let Err(status) = self.try_start() {
            panic!("redis-server exited at its start: {status}");
        }
    }

    /// Starts the server and waits for its answer; the exit status of a server that exited
    /// first (its port taken). Panics when it neither answers nor exits within 20 s.
    fn try_start(&mut self) -> Result<(), std::process::ExitStatus> {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                // A replica's first sync at once, not after the default 5 s.
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.more)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (the test command installs it from Debian's packages)");
        let child = self.child.insert(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pong(self.port) {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(status);
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// A free loopback port no higher than 55,535: a cluster node's bus listens 10,000 above its
/// port, and Redis refuses to start where that would pass 65,535 (the kernel's ephemeral
/// ports reach 60,999).
fn free_port() -> u16 {
    loop {
        let port = (TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()))
            .expect("a free port")
            .port();
        if port <= 55_535 {
            return port;
        }
    }
}

/// Whether a Redis (or a Sentinel) answers `PING` on `port`.
fn pong(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG\r\n"
}

/// A primary, a replica of it and three Sentinels watching them under the name `mymaster`
/// (a quorum of 2; a master that answers nothing for 1 s is down), each a real process on a
/// free port, stopped when dropped.
#[derive(Debug)]
pub struct Sentinels {
    /// The primary at the start.
    pub primary: RedisServer,
    /// Its replica, which a failover promotes.
    pub replica: RedisServer,
    sentinels: Vec<(Child, u16)>,
    dir: PathBuf,
}

impl Sentinels {
    /// Starts them, and returns once the Sentinels know the replica and each other (see
    /// [`Self::url`]); they declare the primary down after a second without an answer, as the
    /// failover tests need. Panics when `redis-server` is missing.
    pub fn start() -> Self {
        Self::start_with_down_after(Duration::from_secs(1))
    }

    /// [`Self::start`], the Sentinels declaring the primary down after `down_after` without an
    /// answer. A test not about failover gives more than a loaded machine's disk may stall the
    /// primary (each of its writes waits for `fsync`): the failover a stall starts loses what
    /// the old primary acknowledged last without `--redis-replicas`, as `docs/fleet.md` says,
    /// and such a test counts on every acknowledged write.
    pub fn start_with_down_after(down_after: Duration) -> Self {
        let primary = RedisServer::start();
        let port = primary.port.to_string();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
        let dir = primary.dir.join("sentinels");
        std::fs::create_dir_all(&dir).expect("a directory for the Sentinels");
        let sentinels = (0..3)
            .map(|_| {
                let port = free_port();
                let config = dir.join(format!("sentinel-{port}.conf"));
                let text = format!(
                    "port {port}\nbind 127.0.0.1\ndir {}\n\
                     sentinel monitor mymaster 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds mymaster {}\n\
                     sentinel failover-timeout mymaster 3000\n",
                    dir.display(),
                    primary.port,
                    down_after.as_millis(),
                );
                std::fs::write(&config, text).expect("a Sentinel's configuration");
                let child = Command::new("redis-server")
                    .arg(&config)
                    .arg("--sentinel")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("redis-server --sentinel");
                (child, port)
            })
            .collect();
        let started = Self {
            primary,
            replica,
            sentinels,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !started.ready() {
            assert!(Instant::now() < deadline, "the Sentinels did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        started
    }

    /// `redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/mymaster/0`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = (self.sentinels.iter())
            .map(|(_, port)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/mymaster/0", hosts.join(","))
    }

    /// Whether every Sentinel knows the replica and the two other Sentinels, and the replica
    /// is in sync.
    fn ready(&self) -> bool {
        let synced = command(self.replica.port, &["INFO", "replication"])
            .is_some_and(|info| info.contains("master_link_status:up"));
        synced
            && self.sentinels.iter().all(|(_, port)| {
                let known = |what| {
                    command(*port, &["SENTINEL", what, "mymaster"])
                        .map_or(0, |answer| answer.matches("name").count())
                };
                pong(*port) && known("replicas") >= 1 && known("sentinels") >= 2
            })
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of real processes: `primaries` primaries, each with `replicas` replicas, all
/// `--cluster-enabled yes` (a node that answers nothing for 1 s is failing), made into one
/// with `redis-cli --cluster create`, stopped when dropped.
#[derive(Debug)]
pub struct RedisCluster {
    /// The nodes, the primaries at the start first.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts them, and returns once every node sees every slot served and every replica is
    /// in sync. Panics when `redis-server` or `redis-cli` is missing.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        // A node silent for this long is failed: quickly where a replica is to take over (the
        // failover tests), else late, so that a node a loaded machine stalls for a second does
        // not take its slots down (CLUSTERDOWN) under a test that kills nothing.
        let timeout = if replicas > 0 { "1000" } else { "15000" };
        // Without replicas no test kills a node (its slots would go down with it), so no node
        // needs its disk: none writes an append-only file, and a loaded disk's stall of a
        // second or two (its `fsync`, which `appendfsync always` waits for before answering)
        // cannot outlast the server's 2 s wait for an answer under a test of something else.
        let durable = if replicas > 0 { "yes" } else { "no" };
        let cluster = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            timeout,
            "--appendonly",
            durable,
        ];
        let nodes: Vec<RedisServer> = (0..primaries * (1 + replicas))
            .map(|_| RedisServer::start_with(&cluster))
            .collect();
        let addresses: Vec<String> = (nodes.iter())
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        let made = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli (Debian's redis-tools, which redis-server depends on)");
        assert!(made.success(), "redis-cli --cluster create failed");
        let started = Self { nodes };
        started.wait_ready(Duration::from_secs(30));
        started
    }

    /// `redis+cluster://127.0.0.1:P1,...` (every node).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = (self.nodes.iter())
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// Waits until every node that answers sees the cluster whole and its replicas in sync.
    pub fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.ready() {
            assert!(
                Instant::now() < deadline,
                "the cluster did not come up whole"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn ready(&self) -> bool {
        (self.nodes.iter().filter(|node| node.child.is_some())).all(|node| {
            let whole = server_command(node.port, &["CLUSTER", "INFO"])
                .is_some_and(|info| info.contains("cluster_state:ok"));
            let replication =
                server_command(node.port, &["INFO", "replication"]).unwrap_or_default();
            let synced = replication.contains("role:master")
                || replication.contains("master_link_status:up");
            whole && synced
        })
    }

    /// The index in [`Self::nodes`] of the primary that serves `key`'s slot now.
    pub fn primary_of(&self, key: &str) -> usize {
        let slot = self.slot(key);
        let nodes = self.describe();
        let owner = (nodes.iter())
            .find(|node| node.primary && node.slots.iter().any(|r| r.contains(&slot)))
            .expect("a primary serves every slot");
        self.index(owner.port)
    }

    /// Moves `key`'s slot to the primary `to` (an index in [`Self::nodes`]) as `redis-cli
    /// --cluster reshard` would, while it is used: the slot marked importing there and
    /// migrating here, its keys moved (`MIGRATE`) a hundred at a time, then given to `to`.
    pub fn migrate(&self, key: &str, to: usize) {
        let slot = self.slot(key).to_string();
        let from = self.primary_of(key);
        let (from_port, to_port) = (self.nodes[from].port, self.nodes[to].port);
        let (from_id, to_id) = (self.id(from), self.id(to));
        let ok = |port, args: &[&str]| {
            let answer = server_command(port, args).unwrap_or_default();
            assert!(answer.starts_with("+OK"), "{args:?}: {answer}");
        };
        ok(
            to_port,
            &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id],
        );
        ok(
            from_port,
            &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id],
        );
        loop {
            let answer = server_command(from_port, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
            let keys = bulk_strings(&answer.unwrap_or_default());
            if keys.is_empty() {
                break;
            }
            let to_port = to_port.to_string();
            let mut migrate = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            migrate.extend(keys.iter().map(String::as_str));
            let answer = server_command(from_port, &migrate).unwrap_or_default();
            assert!(
                answer.starts_with("+OK") || answer.starts_with("+NOKEY"),
                "MIGRATE: {answer}"
            );
        }
        for node in [to, from] {
            ok(
                self.nodes[node].port,
                &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id],
            );
        }
    }

    fn slot(&self, key: &str) -> u16 {
        let answer =
            server_command(self.nodes[0].port, &["CLUSTER", "KEYSLOT", key]).unwrap_or_default();
        let slot = answer.strip_prefix(':').and_then(|a| a.lines().next());
        slot.and_then(|s| s.parse().ok()).expect("CLUSTER KEYSLOT")
    }

    fn id(&self, node: usize) -> String {
        let answer =
            server_command(self.nodes[node].port, &["CLUSTER", "MYID"]).unwrap_or_default();
        bulk_strings(&answer)
            .into_iter()
            .next()
            .expect("CLUSTER MYID")
    }

    fn index(&self, port: u16) -> usize {
        (self.nodes.iter().position(|node| node.port == port)).expect("a node of this cluster")
    }

    /// What `CLUSTER NODES` says, asked of a node that answers.
    fn describe(&self) -> Vec<Described> {
        let text = (self.nodes.iter())
            .filter(|node| node.child.is_some())
            .find_map(|node| server_command(node.port, &["CLUSTER", "NODES"]))
            .expect("a node that answers");
        let text = bulk_strings(&text).into_iter().next().unwrap_or_default();
        (text.lines())
            .filter_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let port = fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                let flags = fields.get(2)?;
                let primary = flags.contains("master") && !flags.contains("fail");
                let slots = (fields.iter().skip(8))
                    .filter(|range| !range.starts_with('['))
                    .filter_map(|range| {
                        let (a, b) = range.split_once('-').unwrap_or((range, range));
                        Some(a.parse().ok()?..=b.parse().ok()?)
                    })
                    .collect();
                Some(Described {
                    port,
                    primary,
                    slots,
                })
            })
            .collect()
    }
}

/// A node as `CLUSTER NODES` describes it.
struct Described {
    port: u16,
    primary: bool,
    slots: Vec<std::ops::RangeInclusive<u16>>,
}

/// The bulk strings of a RESP answer (`$N` then N bytes), in order.
fn bulk_strings(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = answer;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let Some((length, after)) = rest.split_once("\r\n") else {
            break;
        };
        let Ok(length) = length.parse::<usize>() else {
            continue;
        };
        let Some(text) = after.get(..length) else {
            break;
        };
        out.push(text.to_owned());
        rest = &after[length..];
    }
    out
}

/// A command's whole answer, as text (what a test looks for in it), or `None`; for a Sentinel
/// too, whose answer ends when it pauses for 200 ms.
fn command(port: u16, args: &[&str]) -> Option<String> {
    command_within(port, args, Duration::from_millis(200))
}

/// [`command`] to a server (which closes the connection after the answer), waiting for the
/// answer as long as a slow machine may need (a `MIGRATE` of many keys).
fn server_command(port: u16, args: &[&str]) -> Option<String> {
    command_within(port, args, Duration::from_secs(10))
}

fn command_within(port: u16, args: &[&str], pause: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(pause)).ok()?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    // Then QUIT: a server closes the connection after the answer, which ends it; a Sentinel
    // does not, and the answer ends when it pauses.
    request.push_str("*1\r\n$4\r\nQUIT\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
    }
    (!answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
