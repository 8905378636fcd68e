//! What a host gives each Azure endpoint it runs (the Queue, Table and Cosmos DB services):
//! the accounts served, whether requests without credentials may act, and the budget of
//! memory the requests in flight share. One value, given to every endpoint of the host.

use std::sync::Arc;

use crate::account::Accounts;
use crate::inflight::Inflight;

/// What a host serves its endpoints with.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// The accounts served: by default the development account alone.
    pub accounts: Accounts,
    /// Whether requests without credentials may do anything: for development only. Requests
    /// that carry credentials are still checked.
    pub anonymous: bool,
    /// The budget of the memory the heavy requests in flight may take together, as
    /// [`crate::inflight`] weighs them (by default one of its own, of
    /// [`crate::inflight::DEFAULT_BUDGET`]): shared by every endpoint given it, so that a host
    /// making an endpoint a request (a Worker) still bounds them all.
    pub inflight: Arc<Inflight>,
}

impl Serving {
    /// The development account, and requests without credentials let through: for tests and
    /// development.
    pub fn anonymous() -> Self {
        Self {
            anonymous: true,
            ..Self::default()
        }
    }
}
