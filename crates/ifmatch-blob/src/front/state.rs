//! The blob front's state, one value per server and shared by every request: its stores, its
//! clock, the accounts it serves, its limits and what it remembers (the service settings read
//! lately), built with [`Front::new`] and its `with_` settings.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use ifmatch_azure::{Accounts, Env};

use crate::settings::Settings;
use crate::store::{Objects, Records};

/// The default largest blob: 5 GiB.
pub const DEFAULT_MAX_BODY: u64 = 5 << 30;

/// The blob front: one value per server, shared by every request.
#[derive(Debug)]
pub struct Front<R, O, E> {
    pub(super) records: R,
    /// Shared with the bodies of reads that open a blob's blocks one after the other.
    pub(super) objects: std::sync::Arc<O>,
    pub(super) env: E,
    pub(super) max_body: u64,
    pub(super) accounts: Accounts,
    pub(super) anonymous: bool,
    /// Compare-and-swap attempts that lost a race and started over.
    pub(super) retries: std::sync::atomic::AtomicU64,
    /// See [`Front::commit_turn`].
    pub(super) commits: ifmatch_azure::Turns,
    /// See [`Front::settings`].
    pub(super) settings: Known,
    /// Where copies read sources other servers hold (see [`crate::copy_origin`]); none by
    /// default.
    pub(super) origins: Option<crate::copy_origin::Origins>,
    /// Whether Copy Blob from another server answers before it is copied (see
    /// `pending_copies.rs`).
    pub(super) background_copies: bool,
}

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    /// A front over these backends.
    pub fn new(records: R, objects: O, env: E) -> Self {
        Self {
            records,
            objects: std::sync::Arc::new(objects),
            env,
            max_body: DEFAULT_MAX_BODY,
            accounts: Accounts::default(),
            anonymous: false,
            retries: std::sync::atomic::AtomicU64::new(0),
            commits: ifmatch_azure::Turns::default(),
            settings: Known::default(),
            origins: None,
            background_copies: false,
        }
    }

    /// How many compare-and-swap attempts lost a race with a concurrent change and started
    /// over, since the front was made.
    pub fn cas_retries(&self) -> u64 {
        self.retries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The accounts served (by default the development account alone, with its published
    /// key).
    pub fn with_accounts(mut self, accounts: &Accounts) -> Self {
        self.accounts = accounts.clone();
        self
    }

    /// Lets requests without credentials do anything: for development only. Requests that
    /// carry credentials are still checked.
    pub fn with_anonymous_access(mut self, yes: bool) -> Self {
        self.anonymous = yes;
        self
    }

    /// Lets copies read sources on other servers through `origins` (see
    /// [`crate::copy_origin`]); without, a copy reads only the blobs this server serves.
    pub fn with_copy_origins(mut self, origins: impl crate::copy_origin::CopyOrigins) -> Self {
        self.origins = Some(crate::copy_origin::Origins(std::sync::Arc::new(origins)));
        self
    }

    /// The accounts served.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The largest blob accepted; larger uploads answer 413 `RequestBodyTooLarge`.
    pub fn with_max_body(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }

    /// The record store.
    pub fn records(&self) -> &R {
        &self.records
    }

    /// The clock and randomness (a test moves a manual clock through it).
    pub fn env(&self) -> &E {
        &self.env
    }

    /// The object store.
    pub fn objects(&self) -> &O {
        &self.objects
    }
}

/// What an instance last read of each account's versioning (by its service record's name),
/// and when.
#[derive(Debug, Default)]
pub(super) struct Known(pub(super) Mutex<HashMap<String, (Settings, SystemTime)>>);

impl Known {
    /// Forgets what was read of the service record `name` (it was just changed).
    pub(super) fn forget(&self, name: &str) {
        self.0.lock().expect("not poisoned").remove(name);
    }
}
