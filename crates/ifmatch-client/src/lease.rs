//! Pessimistic concurrency: a lease held by a guard that renews it, a lock built on it, and
//! leader election.
//!
//! A [`LeaseGuard`] renews its lease in the background at a third of its duration, and tells
//! its holder when the lease is lost: when the server refuses a renewal (broken, taken), or
//! when no renewal has succeeded for long enough that the lease may have expired on the server
//! (counted from when the last successful renewal was *sent*, less a margin, so the guard says
//! "lost" no later than the server frees the lease). Writes made under the guard carry its
//! lease id ([`LeaseGuard::conditions`]): a holder whose lease was lost is refused by the
//! server, whatever it believes (fencing).

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{BlobClient, Conditions};
use crate::error::{Error, Result};
use ifmatch_core::backoff::Backoff;

/// How much earlier than the server the guard gives a lease up.
const MARGIN: Duration = Duration::from_secs(1);

/// A lease held, renewed in the background, released when dropped.
#[derive(Debug)]
pub struct LeaseGuard {
    blob: BlobClient,
    id: String,
    lost: watch::Receiver<bool>,
    renewer: tokio::task::JoinHandle<()>,
    released: bool,
}

impl LeaseGuard {
    /// Acquires `blob`'s lease for `duration` (15 to 60 s) once, or fails: with
    /// [`Error::is_lease_taken`] when another holder has it.
    pub async fn acquire(blob: &BlobClient, duration: Duration) -> Result<Self> {
        let sent = Instant::now();
        let id = blob.acquire_lease(Some(duration)).await?;
        let (tell, lost) = watch::channel(false);
        let renewer = tokio::spawn(renew(blob.clone(), id.clone(), duration, sent, tell));
        Ok(Self {
            blob: blob.clone(),
            id,
            lost,
            renewer,
            released: false,
        })
    }

    /// The lease id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Conditions that carry the lease id: a write under them is refused once the lease is
    /// lost.
    pub fn conditions(&self) -> Conditions {
        Conditions::default().with_lease(Some(&self.id))
    }

    /// Whether the lease is known lost.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// [`Error::LeaseLost`] once the lease is lost: call before each write.
    pub fn check(&self) -> Result<()> {
        match self.is_lost() {
            true => Err(Error::LeaseLost(self.blob.path())),
            false => Ok(()),
        }
    }

    /// Resolves when the lease is lost (never, while it is held).
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Stops renewing and releases the lease.
    pub async fn release(mut self) -> Result<()> {
        self.renewer.abort();
        self.released = true;
        self.blob.release_lease(&self.id).await
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.renewer.abort();
        // A lost lease is not released: a broken lease ends when its breaker chose (releasing
        // it would end the break period at once, and its old holder would win it right back),
        // and one that may have expired is not ours to end.
        if self.released || self.is_lost() {
            return;
        }
        // Best effort: a lease not released expires by itself.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (blob, id) = (self.blob.clone(), self.id.clone());
            runtime.spawn(async move {
                let _ = blob.release_lease(&id).await;
            });
        }
    }
}

/// Renews `id` every third of `duration`, counted from when each renewal was sent (a slow
/// answer does not push the next one back, so a break is learnt at most a third of the lease
/// and one round trip after it); says "lost" when a renewal is refused, or when the lease may
/// have expired: `duration` less the margin after the last good renewal was sent.
async fn renew(
    blob: BlobClient,
    id: String,
    duration: Duration,
    mut sent: Instant,
    tell: watch::Sender<bool>,
) {
    let every = duration / 3;
    let mut attempt = sent;
    loop {
        let deadline = sent + duration.saturating_sub(MARGIN);
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            () = tokio::time::sleep_until(attempt + every) => {}
        }
        attempt = Instant::now();
        let renewal = tokio::time::timeout_at(deadline, blob.renew_lease(&id)).await;
        match renewal {
            Ok(Ok(())) => sent = attempt,
            Ok(Err(e)) if e.is_transient() => {}
            // Refused (broken, taken, released): lost now.
            Ok(Err(_)) => break,
            Err(_) => break,
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    let _ = tell.send(true);
}

/// A lock on a blob: its lease, waited for.
#[derive(Debug)]
pub struct Lock;

impl Lock {
    /// Waits up to `timeout` for `blob`'s lease, creating the blob if it does not exist,
    /// retrying with backoff and jitter while another holder has it or the service cannot be
    /// reached. [`Error::Timeout`] when another held it to the end; the last failure when the
    /// service was what failed (unreachable, busy), so that nobody is told a lock is taken
    /// when no one could ask.
    pub async fn acquire(
        blob: &BlobClient,
        duration: Duration,
        timeout: Option<Duration>,
    ) -> Result<LeaseGuard> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let backoff = Backoff {
            base: Duration::from_millis(50),
            max: duration / 3,
            attempts: u32::MAX,
        };
        let mut retry = 0;
        let mut unreachable = None;
        loop {
            match LeaseGuard::acquire(blob, duration).await {
                Ok(guard) => return Ok(guard),
                Err(e) if e.is_not_found() => {
                    if e.code() == Some(ifmatch_blob::ErrorCode::ContainerNotFound) {
                        blob.create_container().await?;
                    }
                    match blob.put(Vec::new(), &Conditions::create_only()).await {
                        Ok(_) => continue,
                        Err(e) if e.is_already_exists() || e.is_lease_refused() => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) if e.is_lease_taken() => unreachable = None,
                Err(e) if e.is_transient() => unreachable = Some(e),
                Err(e) => return Err(e),
            }
            let wait = backoff.delay(retry);
            retry = retry.saturating_add(1);
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(unreachable.unwrap_or(Error::Timeout(timeout.unwrap_or_default())));
                }
                tokio::time::sleep(wait.min(left)).await;
            } else {
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Leader election by lease: whoever holds the blob's lease leads. The candidate keeps trying
/// while it does not lead, and learns at once when it stops leading (its guard lost the
/// lease): it must then stop acting as leader, and its writes under the lease are refused.
#[derive(Debug)]
pub struct LeaderElection {
    leading: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaderElection {
    /// Starts campaigning for `blob`'s lease, held `duration` at a time.
    pub fn start(blob: BlobClient, duration: Duration) -> Self {
        let (tell, leading) = watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                match Lock::acquire(&blob, duration, None).await {
                    Ok(guard) => {
                        let _ = tell.send(true);
                        guard.lost().await;
                        let _ = tell.send(false);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "leader election");
                        tokio::time::sleep(duration / 3).await;
                    }
                }
            }
        });
        Self { leading, task }
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Waits until this candidate leads.
    pub async fn wait_until_leader(&mut self) {
        let _ = self.leading.wait_for(|leading| *leading).await;
    }

    /// Waits until this candidate no longer leads.
    pub async fn wait_until_follower(&mut self) {
        let _ = self.leading.wait_for(|leading| !*leading).await;
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        // The guard it holds is dropped with the task, which releases the lease.
        self.task.abort();
    }
}
