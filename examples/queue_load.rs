//! The load client of `scripts/bench-queues`, over the Queue REST dialect with Shared Key (so it
//! runs against `ifmatch serve` and Azurite's queue service alike):
//!
//! - `put CONNECTION CLIENTS QUEUES SECONDS`: CLIENTS tasks putting small messages, each into
//!   one of QUEUES queues (`load0` ...) in turn, for SECONDS. Prints `messages/s R`.
//! - `take CONNECTION CLIENTS QUEUES SECONDS`: CLIENTS tasks each getting up to 32 messages of
//!   one of QUEUES queues in turn and deleting each with its pop receipt, for SECONDS or until
//!   the queues are empty. Prints `messages/s R`; exits 1 if a delete with the receipt just
//!   given failed, or a message came twice.
//! - `fill CONNECTION QUEUES MESSAGES`: creates the queues and puts MESSAGES into each (16 in
//!   flight).
//! - `clear CONNECTION QUEUES`: Clear Messages of each queue.

#[path = "signed_client.rs"]
#[allow(dead_code)] // the queues read no ETag
mod signed_client;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use ifmatch_azure::auth::shared_key_string;
use signed_client::Signer;

/// A Queue service endpoint and the account that signs for it.
#[derive(Clone)]
struct Queues(Signer);

impl Queues {
    fn new(connection: &str) -> Self {
        let version = &[("x-ms-version", "2021-12-02")];
        Self(Signer::new(
            connection,
            "QueueEndpoint",
            shared_key_string,
            version,
        ))
    }

    /// Sends `method path` (below the account) with `body`, signed: the status and body.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: impl Into<Bytes>,
    ) -> (StatusCode, Bytes) {
        let answer = self.0.send(method, path, &[], body).await;
        (answer.status, answer.body)
    }

    async fn put(&self, queue: &str, text: &str) {
        let body = format!("<QueueMessage><MessageText>{text}</MessageText></QueueMessage>");
        let (status, _) = self
            .send(Method::POST, &format!("/{queue}/messages"), body)
            .await;
        assert_eq!(status, StatusCode::CREATED, "put");
    }
}

/// The text of each `<tag>` of `xml`, in order.
fn all<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(open.as_str())
        .skip(1)
        .filter_map(|rest| rest.split_once(close.as_str()).map(|(v, _)| v))
        .collect()
}

fn arg(n: usize) -> String {
    std::env::args()
        .nth(n)
        .expect("too few arguments; see the file's doc")
}

fn number(n: usize) -> usize {
    arg(n).parse().expect("a number")
}

#[tokio::main]
async fn main() {
    let queues = Queues::new(&arg(2));
    match arg(1).as_str() {
        "fill" => {
            let (count, messages) = (number(3), number(4));
            let mut tasks = Vec::new();
            for q in 0..count {
                let (status, _) = queues
                    .send(Method::PUT, &format!("/load{q}"), Vec::new())
                    .await;
                assert!(status.is_success(), "create load{q}: {status}");
            }
            for t in 0..16 {
                let queues = queues.clone();
                tasks.push(tokio::spawn(async move {
                    for i in (t..count * messages).step_by(16) {
                        queues
                            .put(&format!("load{}", i % count), &format!("m{i}"))
                            .await;
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        }
        "clear" => {
            for q in 0..number(3) {
                let path = format!("/load{q}/messages");
                let (status, _) = queues.send(Method::DELETE, &path, Vec::new()).await;
                assert!(status.is_success(), "clear load{q}: {status}");
            }
        }
        mode @ ("put" | "take") => {
            let (clients, count, seconds) = (number(3), number(4), number(5));
            let until = Instant::now() + Duration::from_secs(seconds as u64);
            let started = Instant::now();
            let seen = Arc::new(Mutex::new(HashSet::new()));
            let mut tasks = Vec::new();
            for c in 0..clients {
                let (queues, seen) = (queues.clone(), seen.clone());
                let take = mode == "take";
                tasks.push(tokio::spawn(async move {
                    let (mut done, mut round) = (0usize, c);
                    let mut empty = 0;
                    while Instant::now() < until && empty < count {
                        let queue = format!("load{}", round % count);
                        round += 1;
                        if !take {
                            queues.put(&queue, &format!("c{c}-{done}")).await;
                            done += 1;
                            continue;
                        }
                        let path =
                            format!("/{queue}/messages?numofmessages=32&visibilitytimeout=60");
                        let (status, xml) = queues.send(Method::GET, &path, Vec::new()).await;
                        assert_eq!(status, StatusCode::OK, "get");
                        let xml = String::from_utf8_lossy(&xml).into_owned();
                        let ids = all(&xml, "MessageId");
                        empty = if ids.is_empty() { empty + 1 } else { 0 };
                        for (id, receipt) in ids.iter().zip(all(&xml, "PopReceipt")) {
                            assert!(seen.lock().unwrap().insert(id.to_string()), "{id} twice");
                            let receipt = percent_encoding::utf8_percent_encode(
                                receipt,
                                percent_encoding::NON_ALPHANUMERIC,
                            );
                            let path = format!("/{queue}/messages/{id}?popreceipt={receipt}");
                            let (status, _) = queues.send(Method::DELETE, &path, Vec::new()).await;
                            assert_eq!(status, StatusCode::NO_CONTENT, "delete {id}");
                            done += 1;
                        }
                    }
                    done
                }));
            }
            let mut total = 0;
            for task in tasks {
                total += task.await.unwrap();
            }
            let elapsed = started.elapsed().as_secs_f64();
            println!("messages/s {:.0}", total as f64 / elapsed);
        }
        other => panic!("unknown mode {other}; see the file's doc"),
    }
}
