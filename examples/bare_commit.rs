//! The floor under `ifmatch serve`'s conditional commit: hyper's HTTP/1 server, the blobs in a
//! map in memory, and a log whose writes concurrent commits share (one write and one
//! `fdatasync` a group, as ifmatch's journal), and nothing else: no account, no signature
//! checked, no routing beyond a path's GET and PUT, no record file, no cache, no checkpoint, no
//! metrics. It answers what `examples/contention.rs` asks (Create Container, Get Blob, Put Blob
//! with `If-Match` or `If-None-Match: *`) with the statuses and error codes `ifmatch serve`
//! gives, on the same threads (one runtime a core), and answers a write only once its log entry
//! is durable. A write is seen by reads before it is durable (ifmatch's is not): that only makes
//! the floor lower. `scripts/bench-contention` measures it beside `ifmatch serve` and etcd:
//! what the protocol's two exchanges and a shared sync cost a commit on this machine before
//! ifmatch does anything of its own.
//!
//! `LISTEN=127.0.0.1:8083 LOG=/path/to/log cargo run --profile dist -p examples --example bare-commit`

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, mpsc};

use bytes::Bytes;
use http::header::{ETAG, IF_MATCH, IF_NONE_MATCH, LAST_MODIFIED};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// A blob: its version (its tag's number) and bytes.
type Blobs = Mutex<HashMap<String, (u64, Bytes)>>;

/// A log entry to make durable, and who waits for it.
type Entry = (Vec<u8>, oneshot::Sender<()>);

/// The most entries one write and one sync carry, as ifmatch's journal.
const MOST_GROUPED: usize = 128;
/// The log grows by this much at a time, written with zeros (a sync then writes no metadata),
/// and starts over from its beginning once this long: the floor keeps no history.
const GROW: u64 = 1 << 20;
const WRAP: u64 = 64 << 20;

fn main() {
    let listen: SocketAddr = std::env::var("LISTEN")
        .expect("LISTEN=host:port")
        .parse()
        .expect("LISTEN is host:port");
    let log = std::env::var("LOG").expect("LOG=path of the log file");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(log)
        .expect("the log file");
    let (entries, waiting) = mpsc::channel::<Entry>();
    std::thread::spawn(move || write_log(&file, &waiting));
    let blobs: Arc<Blobs> = Arc::default();
    examples::serve_on_every_core(move || serve(listen, blobs.clone(), entries.clone()));
}

/// The log's writer: takes the entries waiting, writes them in one write, syncs, answers each.
fn write_log(file: &File, waiting: &mpsc::Receiver<Entry>) {
    let (mut tail, mut len) = (0, 0);
    while let Ok(first) = waiting.recv() {
        let mut group = vec![first];
        while group.len() < MOST_GROUPED
            && let Ok(entry) = waiting.try_recv()
        {
            group.push(entry);
        }
        let bytes: Vec<u8> = group.iter().flat_map(|(b, _)| b.iter().copied()).collect();
        if tail + bytes.len() as u64 > WRAP {
            tail = 0;
        }
        let end = tail + bytes.len() as u64;
        if end > len {
            let grown = end.div_ceil(GROW) * GROW;
            let zeros = vec![0; (grown - len) as usize];
            file.write_all_at(&zeros, len).expect("growing the log");
            len = grown;
        }
        file.write_all_at(&bytes, tail).expect("writing the log");
        file.sync_data().expect("syncing the log");
        tail = end;
        for (_, done) in group {
            let _ = done.send(());
        }
    }
}

async fn serve(listen: SocketAddr, blobs: Arc<Blobs>, log: mpsc::Sender<Entry>) {
    examples::accept_each(listen, |stream| {
        let (blobs, log) = (blobs.clone(), log.clone());
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let (blobs, log) = (blobs.clone(), log.clone());
            async move { Ok::<_, Infallible>(answer(request, &blobs, &log).await) }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    })
    .await;
}

async fn answer(
    request: Request<Incoming>,
    blobs: &Blobs,
    log: &mpsc::Sender<Entry>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let container = request
        .uri()
        .query()
        .is_some_and(|q| q.contains("restype=container"));
    match (request.method().clone(), container) {
        (Method::PUT, true) => status(StatusCode::CREATED, None),
        (Method::GET, _) => {
            let found = blobs.lock().expect("the map").get(&path).cloned();
            match found {
                Some((version, bytes)) => {
                    let mut answer = Response::new(Full::new(bytes));
                    fields(&mut answer, version);
                    answer
                        .headers_mut()
                        .insert("x-ms-blob-type", HeaderValue::from_static("BlockBlob"));
                    answer
                }
                None => status(StatusCode::NOT_FOUND, Some("BlobNotFound")),
            }
        }
        (Method::PUT, false) => put(request, path, blobs, log).await,
        _ => status(StatusCode::METHOD_NOT_ALLOWED, None),
    }
}

/// Put Blob under `If-Match` or `If-None-Match: *`: checked and applied under the map's lock,
/// answered once its entry is durable.
async fn put(
    request: Request<Incoming>,
    path: String,
    blobs: &Blobs,
    log: &mpsc::Sender<Entry>,
) -> Response<Full<Bytes>> {
    let headers = request.headers();
    let if_match = headers.get(IF_MATCH).cloned();
    let create_only = headers.get(IF_NONE_MATCH).is_some_and(|v| v == "*");
    let Ok(body) = request.into_body().collect().await else {
        return status(StatusCode::BAD_REQUEST, None);
    };
    let bytes = body.to_bytes();
    let version = {
        let mut blobs = blobs.lock().expect("the map");
        let current = blobs.get(&path).map(|(version, _)| *version);
        match (current, &if_match, create_only) {
            (Some(_), _, true) => return status(StatusCode::CONFLICT, Some("BlobAlreadyExists")),
            // As `ifmatch serve` (RFC 9110): `If-Match` of a blob that is not there fails too.
            (current, Some(tag), _)
                if current
                    .is_none_or(|version| tag.as_bytes() != self::tag(version).as_bytes()) =>
            {
                return status(StatusCode::PRECONDITION_FAILED, Some("ConditionNotMet"));
            }
            _ => {}
        }
        let version = current.unwrap_or(0) + 1;
        blobs.insert(path.clone(), (version, bytes.clone()));
        version
    };
    let mut entry = Vec::with_capacity(path.len() + bytes.len() + 16);
    entry.extend_from_slice(&version.to_le_bytes());
    entry.extend_from_slice(path.as_bytes());
    entry.extend_from_slice(&bytes);
    let (done, durable) = oneshot::channel();
    log.send((entry, done)).expect("the log's writer");
    durable.await.expect("the log's writer");
    status_with(StatusCode::CREATED, version)
}

fn tag(version: u64) -> String {
    format!("\"0x{version:X}\"")
}

/// The fields every answer about a blob carries.
fn fields(answer: &mut Response<Full<Bytes>>, version: u64) {
    let headers = answer.headers_mut();
    headers.insert(ETAG, HeaderValue::from_str(&tag(version)).expect("hex"));
    let modified = HeaderValue::from_static("Mon, 30 Nov 2026 17:09:57 GMT");
    headers.insert(LAST_MODIFIED, modified);
    let id = HeaderValue::from_static("00000000-0000-4000-8000-000000000000");
    headers.insert("x-ms-request-id", id);
    headers.insert("x-ms-version", HeaderValue::from_static("2021-12-02"));
}

fn status_with(code: StatusCode, version: u64) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::new()));
    *answer.status_mut() = code;
    fields(&mut answer, version);
    answer
}

/// An answer of `code` alone, with its `x-ms-error-code` when it is an error.
fn status(code: StatusCode, error: Option<&'static str>) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::new()));
    *answer.status_mut() = code;
    if let Some(error) = error {
        let headers = answer.headers_mut();
        headers.insert("x-ms-error-code", HeaderValue::from_static(error));
    }
    answer
}
