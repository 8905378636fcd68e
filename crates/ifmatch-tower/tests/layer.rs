//! The layer driven with `oneshot` over a small document store that counts its calls.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use ifmatch_core::strong_etag;
use ifmatch_tower::ConditionalLayer;
use tower::{Layer, Service, ServiceExt};

#[derive(Clone, Default)]
struct Store {
    docs: Arc<Mutex<HashMap<String, Bytes>>>,
    calls: Arc<AtomicUsize>,
    writes: Arc<AtomicUsize>,
}

type Req = Request<Full<Bytes>>;

impl Store {
    /// GET/HEAD answer the document (no ETag of their own); PUT stores, DELETE removes.
    /// Paths under /tagged/ answer with an ETag of their own; /big/ answers 4 MiB.
    fn service(
        &self,
    ) -> impl Service<Req, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static {
        let store = self.clone();
        tower::service_fn(move |request: Req| {
            let store = store.clone();
            async move {
                store.calls.fetch_add(1, Ordering::SeqCst);
                let path = request.uri().path().to_owned();
                let mut response = Response::new(Full::new(Bytes::new()));
                match *request.method() {
                    Method::GET | Method::HEAD => {
                        if path.starts_with("/big/") {
                            *response.body_mut() = Full::new(Bytes::from(vec![b'x'; 4 << 20]));
                            return Ok(response);
                        }
                        let doc = store.docs.lock().unwrap().get(&path).cloned();
                        match doc {
                            Some(doc) => {
                                if path.starts_with("/tagged/") {
                                    response
                                        .headers_mut()
                                        .insert(header::ETAG, "\"handler-tag\"".parse().unwrap());
                                }
                                if path.starts_with("/vary/") {
                                    response
                                        .headers_mut()
                                        .insert(header::VARY, "accept-language".parse().unwrap());
                                }
                                if path.starts_with("/private/") {
                                    response
                                        .headers_mut()
                                        .insert(header::CACHE_CONTROL, "private".parse().unwrap());
                                }
                                response
                                    .headers_mut()
                                    .insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
                                *response.body_mut() = Full::new(doc);
                            }
                            None => *response.status_mut() = StatusCode::NOT_FOUND,
                        }
                    }
                    Method::PUT => {
                        store.writes.fetch_add(1, Ordering::SeqCst);
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        store.docs.lock().unwrap().insert(path, body);
                        *response.status_mut() = StatusCode::NO_CONTENT;
                    }
                    Method::DELETE => {
                        store.writes.fetch_add(1, Ordering::SeqCst);
                        let gone = store.docs.lock().unwrap().remove(&path).is_some();
                        *response.status_mut() = if gone {
                            StatusCode::NO_CONTENT
                        } else {
                            StatusCode::NOT_FOUND
                        };
                    }
                    _ => *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED,
                }
                Ok(response)
            }
        })
    }

    fn put(&self, path: &str, body: &str) {
        self.docs
            .lock()
            .unwrap()
            .insert(path.to_owned(), Bytes::from(body.to_owned()));
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn request(method: Method, path: &str, headers: &[(&str, &str)], body: &str) -> Req {
    let mut r = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    r.body(Full::new(Bytes::from(body.to_owned()))).unwrap()
}

/// A service of the layer as these tests build it.
trait Layered:
    Service<
        Req,
        Response = Response<ifmatch_tower::ConditionalBody<Full<Bytes>>>,
        Error = Infallible,
    > + Clone
{
}

impl<S> Layered for S where
    S: Service<
            Req,
            Response = Response<ifmatch_tower::ConditionalBody<Full<Bytes>>>,
            Error = Infallible,
        > + Clone
{
}

async fn send<S: Layered>(service: &S, r: Req) -> (StatusCode, http::HeaderMap, Bytes) {
    let response = service.clone().oneshot(r).await.unwrap();
    let (parts, body) = response.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

/// A GET of `path` with `headers`.
async fn get<S: Layered>(
    service: &S,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, Bytes) {
    send(service, request(Method::GET, path, headers, "")).await
}

/// The status of a `method` of `path` with `headers` and `body` (a write's, mostly).
async fn status_of<S: Layered>(
    service: &S,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> StatusCode {
    send(service, request(method, path, headers, body)).await.0
}

fn etag(headers: &http::HeaderMap) -> String {
    headers[header::ETAG].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn untagged_200_gets_the_sha256_tag_and_keeps_its_body() {
    let store = Store::default();
    store.put("/doc", "hello");
    let svc = ConditionalLayer::new().layer(store.service());
    // The length is the body's exact size, which the server writes as `Content-Length`.
    let response = (svc
        .clone()
        .oneshot(request(Method::GET, "/doc", &[], ""))
        .await)
        .unwrap();
    assert_eq!(http_body::Body::size_hint(response.body()).exact(), Some(5));
    let (status, headers, body) = get(&svc, "/doc", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(etag(&headers), strong_etag(b"hello").to_string());
    assert_eq!(body, "hello");
}

#[tokio::test]
async fn a_conditional_get_with_the_current_tag_is_answered_without_the_handler() {
    let store = Store::default();
    store.put("/doc", "hello");
    let svc = ConditionalLayer::new().layer(store.service());
    let (_, headers, _) = get(&svc, "/doc", &[]).await;
    let tag = etag(&headers);
    let before = store.calls();
    for inm in [tag.clone(), format!("W/{tag}"), format!("\"other\", {tag}")] {
        let (status, headers, body) = get(&svc, "/doc", &[("if-none-match", &inm)]).await;
        assert_eq!(status, 304, "{inm}");
        assert_eq!(etag(&headers), tag);
        assert!(body.is_empty());
        assert!(
            !headers.contains_key(header::CONTENT_TYPE)
                && !headers.contains_key(header::CONTENT_LENGTH)
        );
    }
    assert_eq!(store.calls(), before, "the handler never ran");
    // A tag that is not current goes to the handler and gets the 200.
    let (status, _, body) = get(&svc, "/doc", &[("if-none-match", "\"old\"")]).await;
    assert_eq!((status, body), (StatusCode::OK, Bytes::from("hello")));
    assert_eq!(store.calls(), before + 1);
}

#[tokio::test]
async fn the_first_conditional_get_is_decided_after_hashing() {
    let store = Store::default();
    store.put("/doc", "hello");
    let svc = ConditionalLayer::new().layer(store.service());
    let tag = strong_etag(b"hello").to_string();
    let (status, _, body) = get(&svc, "/doc", &[("if-none-match", &tag)]).await;
    assert_eq!((status, body.len()), (StatusCode::NOT_MODIFIED, 0));
    let (status, _, _) = get(&svc, "/doc", &[("if-match", "\"stale\"")]).await;
    assert_eq!(status, 412);
}

#[tokio::test]
async fn a_handler_tag_is_kept_and_not_rehashed() {
    let store = Store::default();
    store.put("/tagged/doc", "hello");
    let svc = ConditionalLayer::new().layer(store.service());
    let (_, headers, body) = get(&svc, "/tagged/doc", &[]).await;
    assert_eq!(
        (etag(&headers).as_str(), body),
        ("\"handler-tag\"", Bytes::from("hello"))
    );
    let (status, _, _) = get(&svc, "/tagged/doc", &[("if-none-match", "\"handler-tag\"")]).await;
    assert_eq!(status, 304);
}

#[tokio::test]
async fn a_body_past_the_limit_streams_through_untagged() {
    let store = Store::default();
    let svc = ConditionalLayer::new()
        .hash_limit(1 << 20)
        .layer(store.service());
    let (status, headers, body) = get(&svc, "/big/file", &[]).await;
    assert_eq!(status, 200);
    assert!(!headers.contains_key(header::ETAG));
    assert_eq!(body.len(), 4 << 20);
    assert!(body.iter().all(|&b| b == b'x'));
}

#[tokio::test]
async fn head_gets_the_tag_of_get() {
    let store = Store::default();
    store.put("/doc", "hello");
    let svc = ConditionalLayer::new().layer(store.service());
    let (status, headers, body) = send(&svc, request(Method::HEAD, "/doc", &[], "")).await;
    assert_eq!(status, 200);
    assert_eq!(etag(&headers), strong_etag(b"hello").to_string());
    assert!(body.is_empty());
    let (status, _, _) = send(
        &svc,
        request(
            Method::HEAD,
            "/doc",
            &[("if-none-match", &etag(&headers))],
            "",
        ),
    )
    .await;
    assert_eq!(status, 304);
}

#[tokio::test]
async fn variants_named_by_vary_are_kept_apart() {
    let store = Store::default();
    store.put("/vary/doc", "bonjour");
    let svc = ConditionalLayer::new().layer(store.service());
    let fr = [("accept-language", "fr")];
    let (_, headers, _) = get(&svc, "/vary/doc", &fr).await;
    let tag = etag(&headers);
    let calls = store.calls();
    let (status, _, _) = get(&svc, "/vary/doc", &[fr[0], ("if-none-match", &tag)]).await;
    assert_eq!(
        (status, store.calls()),
        (StatusCode::NOT_MODIFIED, calls),
        "the same variant: from the cache"
    );
    let (_, _, _) = get(
        &svc,
        "/vary/doc",
        &[("accept-language", "de"), ("if-none-match", &tag)],
    )
    .await;
    assert_eq!(
        store.calls(),
        calls + 1,
        "another variant is never answered from this one's entry"
    );
}

#[tokio::test]
async fn private_answers_are_not_remembered_without_a_key_function() {
    let store = Store::default();
    store.put("/private/doc", "mine");
    let svc = ConditionalLayer::new().layer(store.service());
    let (_, headers, _) = get(&svc, "/private/doc", &[]).await;
    let tag = etag(&headers);
    let calls = store.calls();
    let (status, _, _) = get(&svc, "/private/doc", &[("if-none-match", &tag)]).await;
    assert_eq!(status, 304, "still correct, decided after the handler");
    assert_eq!(store.calls(), calls + 1, "but never from the cache");
    // With a key that separates users, it may be remembered per user.
    let svc = ConditionalLayer::new()
        .key_fn(|uri, headers| {
            Some(format!(
                "{}|{}",
                headers.get("x-user")?.to_str().ok()?,
                uri.path()
            ))
        })
        .layer(store.service());
    let alice = [("x-user", "alice")];
    get(&svc, "/private/doc", &alice).await;
    let calls = store.calls();
    let (status, _, _) = get(&svc, "/private/doc", &[alice[0], ("if-none-match", &tag)]).await;
    assert_eq!((status, store.calls()), (StatusCode::NOT_MODIFIED, calls));
    get(
        &svc,
        "/private/doc",
        &[("x-user", "bob"), ("if-none-match", &tag)],
    )
    .await;
    assert_eq!(
        store.calls(),
        calls + 1,
        "bob is not answered from alice's entry"
    );
}

#[tokio::test]
async fn writes_check_preconditions_before_the_handler() {
    let store = Store::default();
    store.put("/doc", "v1");
    let svc = ConditionalLayer::new().layer(store.service());
    let v1 = strong_etag(b"v1").to_string();
    // Around a whole service, the layer asks it for the resource from the first write.
    // Stale: 412 and the handler never writes.
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-match", "\"stale\"")], "x").await;
    assert_eq!(status, 412);
    assert_eq!(store.writes.load(Ordering::SeqCst), 0);
    // Current (learned by probing the handler with a GET): the write goes through.
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-match", &v1)], "v2").await;
    assert_eq!(status, 204);
    // The old tag is now stale, for writes and for the 304 cache alike.
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-match", &v1)], "v3").await;
    assert_eq!(status, 412);
    let (status, _, body) = get(&svc, "/doc", &[("if-none-match", &v1)]).await;
    assert_eq!((status, body), (StatusCode::OK, Bytes::from("v2")));
    // Create-only.
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-none-match", "*")], "x").await;
    assert_eq!(status, 412);
    let status = status_of(&svc, Method::PUT, "/new", &[("if-none-match", "*")], "n").await;
    assert_eq!(status, 204);
    let status = status_of(&svc, Method::PUT, "/new2", &[("if-match", "*")], "n").await;
    assert_eq!(status, 412, "If-Match: * on nothing");
    // Unconditional writes go through (last writer wins) unless 428 is asked for.
    let status = status_of(&svc, Method::PUT, "/doc", &[], "blind").await;
    assert_eq!(status, 204);
    let strict = ConditionalLayer::new()
        .require_precondition(true)
        .layer(store.service());
    get(&strict, "/doc", &[]).await;
    let status = status_of(&strict, Method::PUT, "/doc", &[], "blind").await;
    assert_eq!(status, 428);
    let status = status_of(&strict, Method::DELETE, "/doc", &[("if-match", "*")], "").await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn writes_are_decided_by_the_applications_version_source() {
    let store = Store::default();
    store.put("/doc", "v1");
    let source_store = store.clone();
    let svc = ConditionalLayer::new()
        .version_source(move |parts| {
            // The application's own record of its versions: here, the tag of what it stores.
            let doc = source_store
                .docs
                .lock()
                .unwrap()
                .get(parts.uri.path())
                .cloned();
            async move { Ok(doc.map(|d| ifmatch_tower::Validators::etag(strong_etag(&d)))) }
        })
        .layer(store.service());
    let v1 = strong_etag(b"v1").to_string();
    // No GET has been served: the source answers, not anything remembered.
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-match", &v1)], "v2").await;
    assert_eq!(status, 204, "checked against the source, written");
    // Changed behind the layer: the source knows at once.
    store.put("/doc", "v3 by a job");
    let v2 = strong_etag(b"v2").to_string();
    let status = status_of(&svc, Method::PUT, "/doc", &[("if-match", &v2)], "lost").await;
    assert_eq!(status, 412);
    let status = status_of(&svc, Method::PUT, "/new", &[("if-none-match", "*")], "n").await;
    assert!(
        status.is_success(),
        "absent by the source: create-only holds: {status}"
    );
    assert_eq!(store.writes.load(Ordering::SeqCst), 2);
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        2,
        "the handler ran for the two writes only: no probe"
    );
}

/// A storage-like origin that judges `If-Match` itself, and records the methods it is sent.
fn judging_origin(
    seen: Arc<Mutex<Vec<Method>>>,
) -> impl Service<Req, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Req| {
        seen.lock().unwrap().push(request.method().clone());
        let mut response = Response::new(Full::new(Bytes::from_static(b"doc")));
        let current = "\"current\"";
        response
            .headers_mut()
            .insert(header::ETAG, current.parse().unwrap());
        let stale = (request.headers().get(header::IF_MATCH)).is_some_and(|tag| tag != current);
        if stale {
            *response.status_mut() = StatusCode::PRECONDITION_FAILED;
        }
        async move { Ok::<_, Infallible>(response) }
    })
}

#[tokio::test]
async fn a_source_that_defers_leaves_the_conditions_to_the_inner_service() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let with = |answer: fn() -> ifmatch_tower::Current| {
        ConditionalLayer::new()
            .version_source(move |_| async move { answer() })
            .layer(judging_origin(seen.clone()))
    };
    let deferring = with(|| Err(ifmatch_tower::source::Deferred.into()));
    for (tag, want) in [("\"current\"", 200), ("\"old\"", 412)] {
        let asked = request(Method::PUT, "/doc", &[("if-match", tag)], "new");
        let (status, _, _) = send(&deferring, asked).await;
        assert_eq!(status, want, "{tag}: the inner service's answer");
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
    // Any other failure of the source still fails closed, the inner service never asked.
    let failing = with(|| Err("down".into()));
    let asked = request(Method::PUT, "/doc", &[("if-match", "\"current\"")], "new");
    assert_eq!(send(&failing, asked).await.0, 503);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_head_with_signed_credentials_goes_on_as_a_head() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let svc = ConditionalLayer::new().layer(judging_origin(seen.clone()));
    let signed = [("authorization", "SharedKey account:c2lnbmVk")];
    send(&svc, request(Method::HEAD, "/a", &signed, "")).await;
    send(&svc, request(Method::HEAD, "/b", &[], "")).await;
    let bearer = [("authorization", "Bearer dG9rZW4")];
    send(&svc, request(Method::HEAD, "/c", &bearer, "")).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [Method::HEAD, Method::GET, Method::GET]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_read_modify_write_without_a_lost_update() {
    let store = Store::default();
    store.put("/counter", "0");
    let svc = ConditionalLayer::new().layer(store.service());
    let successes = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let (svc, successes) = (svc.clone(), successes.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    loop {
                        let (_, headers, body) = get(&svc, "/counter", &[]).await;
                        let value: u64 = std::str::from_utf8(&body).unwrap().parse().unwrap();
                        let tag = etag(&headers);
                        let next = (value + 1).to_string();
                        let status =
                            status_of(&svc, Method::PUT, "/counter", &[("if-match", &tag)], &next)
                                .await;
                        match status.as_u16() {
                            204 => break,
                            412 => continue,
                            other => panic!("unexpected {other}"),
                        }
                    }
                    successes.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let (_, _, body) = get(&svc, "/counter", &[]).await;
    assert_eq!(body, successes.load(Ordering::SeqCst).to_string());
    assert_eq!(body, "640");
}

#[test]
fn services_and_futures_are_send_and_clone() {
    fn assert_send<T: Send>() {}
    fn assert_clone<T: Clone>() {}
    type Svc = ifmatch_tower::Conditional<
        tower::util::BoxCloneSyncService<Req, Response<Full<Bytes>>, Infallible>,
        ifmatch_tower::MemoryVersions,
    >;
    assert_send::<Svc>();
    assert_clone::<Svc>();
    assert_send::<<Svc as Service<Req>>::Future>();
    assert_clone::<ConditionalLayer>();
}

/// The layer's own refusals say what failed and what to do, and name no validator (a client
/// that may not read the resource learns nothing of it).
#[tokio::test]
async fn refusals_say_what_failed() {
    let store = Store::default();
    store.put("/doc", "v1");
    let svc = ConditionalLayer::new()
        .require_precondition(true)
        .layer(store.service());
    let (status, headers, body) = send(&svc, request(Method::PUT, "/doc", &[], "x")).await;
    assert_eq!(status, 428);
    assert_eq!(headers[header::CONTENT_TYPE], "text/plain; charset=utf-8");
    assert!(String::from_utf8_lossy(&body).contains("If-Match"));
    get(&svc, "/doc", &[]).await;
    let (status, _, body) = send(
        &svc,
        request(Method::PUT, "/doc", &[("if-match", "\"stale\"")], "x"),
    )
    .await;
    assert_eq!(status, 412);
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(text.contains("does not satisfy"), "{text}");
    assert!(!text.contains(&strong_etag(b"v1").to_string()), "{text}");
    assert_eq!(store.writes.load(Ordering::SeqCst), 0);
}

/// A handle cloned before `time_to_live` or `cache_capacity` still
/// invalidates the cache the services use.
#[tokio::test]
async fn a_handle_cloned_early_invalidates_the_cache_in_use() {
    let store = Store::default();
    store.put("/doc", "v1");
    let handle = ConditionalLayer::new();
    let layer = handle
        .clone()
        .time_to_live(std::time::Duration::from_secs(60))
        .cache_capacity(100);
    let svc = layer.layer(store.service());
    let v1 = strong_etag(b"v1").to_string();
    get(&svc, "/doc", &[]).await;
    let calls = store.calls.load(Ordering::SeqCst);
    let (status, _, _) = get(&svc, "/doc", &[("if-none-match", &v1)]).await;
    assert_eq!(status, 304);
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        calls,
        "answered from the cache"
    );
    handle.invalidate("/doc").await;
    let (status, _, _) = get(&svc, "/doc", &[("if-none-match", &v1)]).await;
    assert_eq!(status, 304);
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        calls + 1,
        "the early handle's invalidate reached the cache in use"
    );
}
