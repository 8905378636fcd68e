//! The server's tests against the binary, each file a module of this one test program (one
//! link of the server and the test's dependencies, not one a file): `cargo test -p
//! ifmatch-server --test server cosmos::` runs one file's tests.

mod common;

mod auth;
mod bucket;
mod bucket_fleet;
mod concurrency;
mod coordination;
mod copy_from_origin;
mod cosmos;
mod cosmos_memory;
mod crash;
mod distributed;
mod distributed_proxy;
mod failover;
mod hardening;
mod https;
mod leases;
mod metrics;
mod object_store_azure;
mod protocol;
mod proxy;
mod proxy_disk;
mod proxy_hostile;
mod proxy_origin;
mod proxy_poisoning;
mod proxy_storage;
mod proxy_tls;
mod put_block_cost;
mod queues;
mod script_hosts;
mod tables;
mod tokens;
