//! etcd's side of `scripts/bench-contention` over gRPC: the loop of `examples/contention.rs`
//! (`examples/contention_load.rs`, included), each counter an etcd key written by a
//! transaction comparing its `mod_revision` with the one read.
//!
//! Usage: etcd-grpc HOST:PORT [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]

#[path = "../../../examples/contention_load.rs"]
mod load;

use etcd_client::{Client, Compare, CompareOp, KvClient, Txn, TxnOp};
use ifmatch_client::Backoff;
use load::Asked;

/// The counters under `prefix`, through a connection to etcd.
#[derive(Clone)]
struct Etcd {
    kv: KvClient,
    prefix: String,
}

impl Etcd {
    fn key(&self, n: u64) -> String {
        format!("{}/counter-{n}", self.prefix)
    }

    /// Counter `n`'s value and `mod_revision` (0 when absent).
    async fn get(&self, n: u64) -> (u64, i64) {
        let got = self
            .kv
            .clone()
            .get(self.key(n), None)
            .await
            .expect("etcd get");
        match got.kvs().first() {
            Some(kv) => {
                let value = u64::from_le_bytes(kv.value().try_into().expect("8 bytes"));
                (value, kv.mod_revision())
            }
            None => (0, 0),
        }
    }
}

impl load::Counters for Etcd {
    async fn increment(&self, n: u64, backoff: &Backoff) -> u32 {
        for attempt in 0..backoff.attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(backoff.delay(attempt - 1)).await;
            }
            let (value, revision) = self.get(n).await;
            let key = self.key(n);
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    key.as_str(),
                    CompareOp::Equal,
                    revision,
                )])
                .and_then([TxnOp::put(key, (value + 1).to_le_bytes(), None)]);
            if self
                .kv
                .clone()
                .txn(txn)
                .await
                .expect("etcd txn")
                .succeeded()
            {
                return attempt + 1;
            }
        }
        panic!("counter {n}: no commit in {} attempts", backoff.attempts)
    }

    async fn read(&self, n: u64) -> u64 {
        self.get(n).await.0
    }
}

// mimalloc, as the blob side's load client has (`ifmatch serve`'s allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let asked = Asked::from_args("etcd-grpc HOST:PORT [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]");
    let client = Client::connect([asked.target.as_str()], None)
        .await
        .expect("etcd");
    let etcd = Etcd {
        kv: client.kv_client(),
        prefix: asked.run.clone(),
    };
    load::run(etcd, &asked).await;
}
