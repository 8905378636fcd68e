//! `ifmatch lock` and `ifmatch leader`: run a command while holding a blob's lease, the cloud
//! `flock` for cron jobs on many machines.
//!
//! The lease is renewed in the background; when the command exits, the lease is released and
//! `ifmatch` exits with the command's status. If the lease is lost while the command runs
//! (broken, or not renewed in time), the command gets SIGTERM (SIGKILL 10 s later) and
//! `ifmatch` exits with [`LOST`].

use std::process::ExitStatus;
use std::time::Duration;

use ifmatch_client::{BlobClient, Client, Error, LeaseGuard, Lock};

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
/// `command` runs; answers the exit status `ifmatch` should end with.
pub async fn run(
    blob: &BlobClient,
    duration: Duration,
    timeout: Option<Duration>,
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
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("IFMATCH_LEASE_ID", guard.id())
        .spawn()
        .map_err(|e| anyhow::anyhow!("{program}: {e}"))?;
    let status = tokio::select! {
        status = child.wait() => Some(status?),
        () = guard.lost() => None,
    };
    match status {
        Some(status) => {
            release(guard).await;
            Ok(exit_code(status))
        }
        None => {
            eprintln!(
                "ifmatch: the lease on {} was lost; stopping the command",
                blob.path()
            );
            if let Some(pid) = child.id() {
                let _ = tokio::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
            Ok(LOST)
        }
    }
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
