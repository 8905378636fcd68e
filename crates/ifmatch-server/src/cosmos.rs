//! The Cosmos DB endpoint on a listener of its own (`127.0.0.1:8081` by default, the
//! emulator's port), answered by [`ifmatch_cosmos::Endpoint`], which holds every rule (its body
//! read whole first: `ifmatch_azure::answer_whole`), over the tables the Table service keeps
//! (each Cosmos account in names of its own); and the sweep of its items past their time to
//! live.

use ifmatch_azure::SystemEnv;
use ifmatch_backends::AnyTables;

/// The Cosmos DB endpoint as the server runs it.
pub type CosmosEndpoint = ifmatch_cosmos::Endpoint<AnyTables, SystemEnv>;

/// How often the items past their time to live are swept, and how many stored items a sweep
/// reads at most in each account: a container's storage is freed within about its items /
/// 2,000 seconds of an item's time passing (a million items: about 8 minutes), at a cost of a
/// few tens of milliseconds of a core each sweep.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// See [`SWEEP_EVERY`].
pub const SWEEP_BUDGET: usize = 4_000;

/// Sweeps `endpoint`'s items past their time to live every [`SWEEP_EVERY`] until `stop`.
pub(crate) async fn sweep(
    endpoint: std::sync::Arc<CosmosEndpoint>,
    stop: tokio_util::sync::WaitForCancellationFutureOwned,
) {
    let sweeping = async {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            endpoint.sweep(SWEEP_BUDGET).await;
        }
    };
    tokio::select! {
        () = sweeping => {}
        () = stop => {}
    }
}
