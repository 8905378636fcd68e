//! `ifmatch lock` and `ifmatch leader`: run a command while holding a blob's lease, the cloud
//! `flock` for cron jobs on many machines. What is guaranteed: no process of the command
//! outlives the lease by more than the grace period, whatever happens to `ifmatch`.
//!
//! - The command runs in a process group of its own; every process it starts (a shell's
//!   background jobs too) is in that group unless it leaves it on purpose (`setsid`).
//! - The lease is renewed in the background. When the command exits, `ifmatch` waits for the
//!   rest of its group to end (as `flock` holds its lock while a child keeps the descriptor),
//!   then releases the lease and exits with the command's status.
//! - If the lease is lost (broken, or not renewed in time), or `ifmatch` gets SIGTERM, SIGINT
//!   or SIGHUP, the whole group gets SIGTERM, then SIGKILL after the grace period; once the
//!   group is gone, `ifmatch` exits with [`LOST`] (lease lost) or 128 + the signal, having
//!   released the lease (signal).
//! - If `ifmatch` itself is killed (SIGKILL, a crash), a watcher process it started, outside
//!   the group, sees it gone and stops the group the same way, with a grace of at most a third
//!   of the lease's duration: the group is gone before the lease, last renewed at most a third
//!   of its duration earlier, can expire and be taken by another.

use std::io::{BufRead, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use ifmatch_client::{BlobClient, Client, Error, LeaseGuard, Lock};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

/// The exit status when the lease was lost under the command.
pub const LOST: i32 = 75;
/// The exit status when the lease could not be had within `--timeout`.
pub const BUSY: i32 = 73;

/// A blob named either as `container/blob` below the connection string's endpoint, or by a
/// full URL: below the connection string's `BlobEndpoint`, or carrying its own SAS.
pub fn blob(connection: &str, blob: &str) -> Result<BlobClient, Error> {
    let client = Client::from_connection_string(connection)?;
    if !blob.starts_with("http://") && !blob.starts_with("https://") {
        let (container, name) = blob
            .split_once('/')
            .ok_or_else(|| Error::Invalid(format!("{blob}: not container/blob")))?;
        return Ok(client.blob(container, name));
    }
    let (url, sas) = blob.split_once('?').unwrap_or((blob, ""));
    let endpoint = connection
        .split(';')
        .find_map(|p| p.trim().strip_prefix("BlobEndpoint="))
        .map(|e| e.trim_end_matches('/'));
    let (client, rest) = match endpoint.and_then(|e| Some((e, url.strip_prefix(e)?))) {
        Some((_, rest)) if sas.is_empty() => (client, rest.trim_start_matches('/')),
        _ if !sas.is_empty() => {
            // The endpoint is what precedes the container and the blob.
            let mut segments = url.rsplitn(3, '/');
            let (name, container) = (segments.next(), segments.next());
            let endpoint = segments.next();
            match (endpoint, container, name) {
                (Some(endpoint), Some(container), Some(name)) => {
                    let client = Client::with_sas(endpoint, sas)?;
                    return Ok(client.blob(container, name));
                }
                _ => return Err(Error::Invalid(format!("{blob}: not a blob URL"))),
            }
        }
        _ => {
            return Err(Error::Invalid(format!(
                "{blob}: neither below the connection string's BlobEndpoint nor with a SAS"
            )));
        }
    };
    let (container, name) = rest
        .split_once('/')
        .ok_or_else(|| Error::Invalid(format!("{blob}: not a blob URL")))?;
    Ok(client.blob(container, name))
}

/// Holds `blob`'s lease (waiting up to `timeout` for it; `None`: as long as it takes) while
/// `command` and every process it starts run; stops them (SIGTERM, then SIGKILL after
/// `grace`) if the lease is lost or `ifmatch` is told to stop. Answers the exit status
/// `ifmatch` should end with.
pub async fn run(
    blob: &BlobClient,
    duration: Duration,
    timeout: Option<Duration>,
    grace: Duration,
    command: &[String],
) -> anyhow::Result<i32> {
    let guard = match Lock::acquire(blob, duration, timeout).await {
        Ok(guard) => guard,
        Err(Error::Timeout(waited)) => {
            eprintln!(
                "ifmatch: {} is held by another; gave up after {waited:?}",
                blob.path()
            );
            return Ok(BUSY);
        }
        Err(e) => return Err(e.into()),
    };
    let (program, args) = command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no command to run"))?;
    // Both before the command starts, so that no moment passes with a group nobody watches
    // or a signal that would end `ifmatch` alone.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut watcher = Watcher::start(grace.min(duration / 3))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("IFMATCH_LEASE_ID", guard.id())
        .process_group(0)
        .spawn()
        .map_err(|e| anyhow::anyhow!("{program}: {e}"))?;
    let id = child.id().and_then(|id| i32::try_from(id).ok());
    let group = Group(Pid::from_raw(id.unwrap_or(0)));
    if let Err(e) = watcher.watch(group) {
        // Without its watcher, the command would be unguarded if `ifmatch` died: not run.
        group.stop(Duration::ZERO, || drop(child.try_wait())).await;
        release(guard).await;
        return Err(anyhow::anyhow!("the lock's watcher: {e}"));
    }
    let mut status = None;
    let stop = loop {
        tokio::select! {
            exited = child.wait(), if status.is_none() => status = Some(exited?),
            () = tokio::time::sleep(Duration::from_millis(50)), if status.is_some() => {
                if !group.alive() {
                    break None;
                }
            }
            () = guard.lost() => break Some(Stop::Lost),
            _ = terminate.recv() => break Some(Stop::Signal(Signal::SIGTERM)),
            _ = interrupt.recv() => break Some(Stop::Signal(Signal::SIGINT)),
            _ = hangup.recv() => break Some(Stop::Signal(Signal::SIGHUP)),
        }
    };
    let Some(stop) = stop else {
        release(guard).await;
        return Ok(exit_code(status.expect("the command exited")));
    };
    match stop {
        Stop::Lost => eprintln!(
            "ifmatch: the lease on {} was lost; stopping the command",
            blob.path()
        ),
        Stop::Signal(signal) => eprintln!("ifmatch: {signal}; stopping the command"),
    }
    group
        .stop(grace, || {
            let _ = child.try_wait();
        })
        .await;
    drop(watcher);
    match stop {
        Stop::Lost => Ok(LOST),
        Stop::Signal(signal) => {
            release(guard).await;
            Ok(128 + signal as i32)
        }
    }
}

/// Why the command is stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// The lease was lost.
    Lost,
    /// `ifmatch` was told to stop.
    Signal(Signal),
}

/// The command's process group.
#[derive(Debug, Clone, Copy)]
struct Group(Pid);

impl Group {
    /// Whether any process of the group is left.
    fn alive(self) -> bool {
        self.0.as_raw() > 1 && killpg(self.0, None).is_ok()
    }

    /// SIGTERM to every process of the group, SIGKILL after `grace` to those left, and back
    /// once none is (at most a few seconds after the SIGKILL). `reap` collects what exited
    /// of `ifmatch`'s own child, which would otherwise stay in the group as a zombie.
    async fn stop(self, grace: Duration, mut reap: impl FnMut()) {
        // Never 0 or 1: `ifmatch`'s own group, or every process it may signal.
        if self.0.as_raw() <= 1 {
            return;
        }
        let _ = killpg(self.0, Signal::SIGTERM);
        if self.gone_by(Instant::now() + grace, &mut reap).await {
            return;
        }
        let _ = killpg(self.0, Signal::SIGKILL);
        self.gone_by(Instant::now() + Duration::from_secs(5), &mut reap)
            .await;
    }

    /// Whether the group is gone by `deadline`, looked at every 20 ms.
    async fn gone_by(self, deadline: Instant, reap: &mut impl FnMut()) -> bool {
        loop {
            reap();
            if !self.alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A process outside the command's group that stops the group if `ifmatch` dies first: it
/// reads the group's id from a pipe, then waits for the pipe's end, which comes when
/// `ifmatch` exits, however it exits.
struct Watcher {
    pipe: std::io::PipeWriter,
    _process: std::process::Child,
}

impl Watcher {
    /// Starts `ifmatch lock-watch` with a grace of `grace`.
    fn start(grace: Duration) -> anyhow::Result<Self> {
        let (read, pipe) = std::io::pipe()?;
        let process = std::process::Command::new(std::env::current_exe()?)
            .args(["lock-watch", "--grace", &grace.as_secs_f64().to_string()])
            .stdin(read)
            // Its own group: a terminal's Ctrl-C to `ifmatch` does not reach it.
            .process_group(0)
            .spawn()?;
        Ok(Self {
            pipe,
            _process: process,
        })
    }

    /// Tells the watcher the group to watch over.
    fn watch(&mut self, group: Group) -> std::io::Result<()> {
        writeln!(self.pipe, "{}", group.0.as_raw())
    }
}

/// `ifmatch lock-watch`: reads a process group's id from standard input, waits until standard
/// input ends (its writer, `ifmatch lock`, exited), then stops the group if any of it is left:
/// SIGTERM, SIGKILL after `grace`.
pub async fn watch(grace: Duration) -> i32 {
    // Blocking reads: the watcher has nothing else to do meanwhile.
    let mut input = std::io::stdin().lock();
    let mut line = String::new();
    if input.read_line(&mut line).is_err() {
        return 0;
    }
    let Ok(id) = line.trim().parse::<i32>() else {
        return 0;
    };
    let mut rest = Vec::new();
    let _ = input.read_to_end(&mut rest);
    drop(input);
    let group = Group(Pid::from_raw(id));
    if group.alive() {
        eprintln!("ifmatch lock-watch: ifmatch lock is gone; stopping its command");
        group.stop(grace, || {}).await;
    }
    0
}

async fn release(guard: LeaseGuard) {
    if let Err(e) = guard.release().await {
        eprintln!("ifmatch: releasing the lease: {e} (it expires by itself)");
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return 128 + signal;
    }
    status.code().unwrap_or(1)
}
