// The coordination patterns as docs/coordination.md takes them: `ifmatch serve` on its
// development address (`UseDevelopmentStorage=true`, 127.0.0.1:10000) with the containers the
// examples name, a `client`, a `blob`, a `report`, a `payload`, and the work (`process`,
// `lead`, `stop_leading`). The test checks that the block runs to its end.

use std::time::Duration;

use ifmatch_client::{Backoff, Client, LeaderElection, LeaseGuard, Lock, WorkQueue, update};

async fn process(_bytes: &[u8], guard: &LeaseGuard) -> Result<(), crate::BoxError> {
    Ok(guard.check()?)
}

async fn lead() {}

fn stop_leading() {}

async fn block(
    client: Client,
    blob: ifmatch_client::BlobClient,
    report: &'static [u8],
    payload: &'static [u8],
) -> Result<(), crate::BoxError> {
    /* the block */
    Ok(())
}

#[tokio::test]
async fn runs() {
    crate::development_server();
    let client = Client::from_connection_string("UseDevelopmentStorage=true").unwrap();
    for container in ["jobs", "locks", "cluster", "work", "reports"] {
        client.create_container(container).await.unwrap();
    }
    // A blob of each block's own: one block's lease on it would refuse another's put.
    let blob = client.blob("reports", &format!("daily/{}", module_path!()));
    blob.put(&b"yesterday's"[..], &Default::default()).await.unwrap();
    block(client, blob, b"today's report", b"an item of work").await.unwrap();
}
