//! The front's tests' harness: the blob front over the memory backends, spoken to in HTTP/1.1
//! through hyper over an in-memory pipe (no socket, no disk), so that a reply is framed as a
//! server frames it (`Content-Length`, no body for a 304 or a HEAD).

#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use ifmatch_azure::ManualEnv;
use ifmatch_blob::Front;
use ifmatch_blob::memory::{MemoryObjects, MemoryRecords};

/// The account the tests speak to, path-style: every test path follows it.
pub const ACCOUNT: &str = "devstoreaccount1";

type MemoryFront = Front<MemoryRecords, MemoryObjects, ManualEnv>;

/// A blob front over memory, open to requests without credentials.
pub struct Server {
    front: Arc<MemoryFront>,
}

/// A reply, read whole.
pub struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    pub async fn bytes(self) -> Result<Bytes, Infallible> {
        Ok(self.body)
    }

    pub async fn text(self) -> Result<String, Infallible> {
        Ok(String::from_utf8_lossy(&self.body).into_owned())
    }
}

impl Server {
    pub async fn start() -> Self {
        let front = Front::new(
            MemoryRecords::default(),
            MemoryObjects::default(),
            ManualEnv::default(),
        )
        .with_anonymous_access(true);
        Self {
            front: Arc::new(front),
        }
    }

    /// A server with the container `name` made.
    pub async fn with_container(name: &str) -> Self {
        let server = Self::start().await;
        server.create_container(name).await;
        server
    }

    /// Sends one request on a connection of its own. A PUT of a blob (account, container,
    /// blob; no `comp`) carries `x-ms-blob-type: BlockBlob` unless `headers` name it or a copy
    /// source, as every SDK's Put Blob does (and its Copy Blob does not).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let (target, query) = path.split_once('?').unwrap_or((path, ""));
        let put_blob = method == "PUT"
            && target.trim_start_matches('/').contains('/')
            && !query.contains("comp=")
            && !headers.iter().any(|(n, _)| {
                n.eq_ignore_ascii_case("x-ms-blob-type")
                    || n.eq_ignore_ascii_case("x-ms-copy-source")
            });
        let mut headers = headers.to_vec();
        if put_blob {
            headers.push(("x-ms-blob-type", "BlockBlob"));
        }
        let uri = format!("/{ACCOUNT}{}", as_a_url_parser_would(path));
        self.send_to(method, &uri, &headers, body).await
    }

    /// A management request (Azure's ARM) of the container `rest` names (`box`,
    /// `box/immutabilityPolicies/default`...) of the test account.
    pub async fn manage(
        &self,
        method: &str,
        rest: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        let uri = format!(
            "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/\
             {ACCOUNT}/blobServices/default/containers/{rest}?api-version=2023-05-01"
        );
        self.send_to(method, &uri, headers, body.to_owned()).await
    }

    /// Sends one request to `uri` as it is, on a connection of its own.
    pub async fn send_to(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "127.0.0.1:10000");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).unwrap();

        let (client, server) = tokio::io::duplex(1 << 20);
        let front = self.front.clone();
        let serve = hyper::server::conn::http1::Builder::new().serve_connection(
            TokioIo::new(server),
            service_fn(move |request| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            }),
        );
        tokio::spawn(serve);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(client))
            .await
            .unwrap();
        tokio::spawn(connection);
        let (head, body) = sender.send_request(request).await.unwrap().into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Reply {
            status: head.status,
            headers: head.headers,
            body,
        }
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send("GET", path, headers, Vec::new()).await
    }

    /// The body a GET of `path` with no fields answers, whatever its status.
    pub async fn read(&self, path: &str) -> Bytes {
        self.get(path, &[]).await.body
    }

    /// [`Server::read`] as text.
    pub async fn read_text(&self, path: &str) -> String {
        String::from_utf8_lossy(&self.read(path).await).into_owned()
    }

    pub async fn head(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send("HEAD", path, headers, Vec::new()).await
    }

    pub async fn put(&self, path: &str, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Reply {
        self.send("PUT", path, headers, body).await
    }

    /// A PUT with no body: an operation of its query (`comp=`) or a container's creation.
    pub async fn put_empty(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.put(path, headers, Vec::new()).await
    }

    pub async fn delete(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send("DELETE", path, headers, Vec::new()).await
    }

    /// Set Blob Service Properties with `xml`, taken (202).
    pub async fn set_properties(&self, xml: &str) {
        let r = self
            .put("/?restype=service&comp=properties", &[], xml.to_owned())
            .await;
        assert_eq!(r.status(), 202, "{:?}: {xml}", code(&r));
    }

    pub async fn create_container(&self, name: &str) {
        let r = self
            .put(&format!("/{name}?restype=container"), &[], Vec::new())
            .await;
        assert_eq!(r.status(), 201, "create container {name}");
    }

    /// The record of blob `name` of container `container`, as the backend holds it.
    pub async fn record(&self, container: &str, name: &str) -> ifmatch_blob::Record {
        use ifmatch_blob::Records;
        let key = ifmatch_blob::Key::Blob(container.to_owned(), name.to_owned());
        let record = self.front.records().get(&key).await.unwrap().unwrap();
        ifmatch_blob::Record::clone(&record)
    }

    /// Moves the front's clock forward.
    pub fn advance(&self, by: std::time::Duration) {
        self.front.env().advance(by);
    }

    /// Runs the front's sweep: staged blocks and deleted blobs past their time (the memory
    /// objects do not list theirs, so unnamed objects are not swept here).
    pub async fn sweep(&self, age: std::time::Duration) {
        match self.front.sweep(age).await {
            Ok(_) | Err(ifmatch_blob::StoreError::Unsupported(_)) => {}
            Err(e) => panic!("sweep: {e}"),
        }
    }

    /// Whether the backend holds a record of blob `name` of container `container`.
    #[allow(dead_code)]
    pub async fn has_record(&self, container: &str, name: &str) -> bool {
        use ifmatch_blob::Records;
        let key = ifmatch_blob::Key::Blob(container.to_owned(), name.to_owned());
        self.front.records().get(&key).await.unwrap().is_some()
    }

    /// Runs a pass of the change feed's publisher: how many changes it published.
    #[allow(dead_code)]
    pub async fn publish(&self) -> usize {
        self.front.publish_changes().await.expect("publish")
    }

    /// Puts a blob and returns its ETag.
    pub async fn put_blob(&self, path: &str, body: &[u8]) -> String {
        let r = self.put(path, &[], body.to_vec()).await;
        assert_eq!(r.status(), 201, "put {path}");
        header(&r, "etag").unwrap()
    }
}

/// `path` with what a URL may not hold raw percent-encoded, as a client's URL parser sends it
/// (the WHATWG path and query sets: controls, space, `"`, `#`, `<`, `>`, and in a path `?`,
/// `` ` ``, `{`, `}` too).
fn as_a_url_parser_would(path: &str) -> String {
    use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
    const QUERY: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'<').add(b'>');
    const PATH: &AsciiSet = &QUERY.add(b'?').add(b'`').add(b'{').add(b'}');
    match path.split_once('?') {
        Some((target, query)) => format!(
            "{}?{}",
            utf8_percent_encode(target, PATH),
            utf8_percent_encode(query, QUERY)
        ),
        None => utf8_percent_encode(path, PATH).to_string(),
    }
}

/// The text of the first element `tag` in `xml` (a listing's entry), if there is one.
pub fn field(xml: &str, tag: &str) -> Option<String> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    Some(xml[start..start + xml[start..].find('<')?].to_owned())
}

/// The values of the headers `names` (separated by spaces), each there.
pub fn header_values(reply: &Reply, names: &str) -> Vec<String> {
    let value = |name| header(reply, name).unwrap_or_else(|| panic!("no {name}"));
    names.split_whitespace().map(value).collect()
}

/// The user-defined metadata `name` (`x-ms-meta-{name}`) of a reply.
pub fn meta(reply: &Reply, name: &str) -> Option<String> {
    header(reply, &format!("x-ms-meta-{name}"))
}

pub fn header(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

pub fn code(reply: &Reply) -> Option<String> {
    header(reply, "x-ms-error-code")
}

/// A refusal's status and error code, to compare with `(409, "InvalidBlobType")`.
pub fn refusal(reply: &Reply) -> (u16, String) {
    (reply.status().as_u16(), code(reply).unwrap_or_default())
}

pub fn sha256_tag(bytes: &[u8]) -> String {
    ifmatch_core::strong_etag(bytes).to_string()
}

/// A header map from field lines, in order; a name may repeat (several field lines).
pub(crate) fn headers(lines: &[(&str, &str)]) -> HeaderMap {
    let line = |(name, value): &(&str, &str)| (name.parse().unwrap(), value.parse().unwrap());
    lines.iter().map(line).collect::<HeaderMap>()
}
