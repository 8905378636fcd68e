//! The host's clock and randomness: every front asks its [`Env`] and never reads either
//! itself, so the same rules run natively, in a Worker, and in tests on a [`ManualEnv`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The clock and the randomness of the host: the front never reads either itself.
pub trait Env: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
    /// A random (version 4) UUID: lease ids and request ids. It must come from a
    /// cryptographically secure source, since lease ids guard leases.
    fn random_uuid(&self) -> uuid::Uuid;
}

impl<T: Env> Env for Arc<T> {
    fn now(&self) -> SystemTime {
        T::now(self)
    }

    fn random_uuid(&self) -> uuid::Uuid {
        T::random_uuid(self)
    }
}

/// The clock and the randomness of the operating system.
#[cfg(feature = "system")]
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemEnv;

#[cfg(feature = "system")]
impl Env for SystemEnv {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn random_uuid(&self) -> uuid::Uuid {
        // Version 4 from the OS's CSPRNG (getrandom): lease ids are unguessable.
        uuid::Uuid::new_v4()
    }
}

/// A clock that moves only when told, and ids from a counter: for deterministic tests of
/// expiry and breaking without sleeping. Its ids are guessable: never serve with it.
#[derive(Debug)]
pub struct ManualEnv {
    now_ms: AtomicU64,
    next_id: AtomicU64,
}

impl Default for ManualEnv {
    fn default() -> Self {
        Self {
            now_ms: AtomicU64::new(1_700_000_000_000),
            next_id: AtomicU64::new(1),
        }
    }
}

impl ManualEnv {
    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.now_ms
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Env for ManualEnv {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.now_ms.load(Ordering::SeqCst))
    }

    fn random_uuid(&self) -> uuid::Uuid {
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        uuid::Builder::from_random_bytes((u128::from(n) * 0x9e37_79b9_7f4a_7c15).to_be_bytes())
            .into_uuid()
    }
}
