//! The client: an account's endpoint and credentials, and a handle per blob and container.
//!
//! Requests are signed with Shared Key using the very string-to-sign the blob front verifies
//! (`ifmatch_blob::auth`), so the two cannot drift; a SAS is appended to each URL instead.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use ifmatch_azure::auth::{Signed, shared_key_string, sign};

use crate::error::{Error, Result};

/// The dialect's version this client speaks.
const VERSION: &str = "2021-12-02";

/// How a client proves who it is.
#[derive(Clone)]
enum Credential {
    /// Shared Key: the account's name and its decoded key.
    Key(ifmatch_azure::Account, Vec<u8>),
    /// A shared access signature, appended to every URL.
    Sas(String),
    /// None: only for public containers or `--anonymous` servers.
    Anonymous,
}

/// A client of one storage account's blob endpoint. Cloned cheaply (a blob's handle holds
/// one): what it holds is shared.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// What every clone of a [`Client`] shares.
struct Shared {
    http: reqwest::Client,
    /// `http(s)://host[:port]/account/` (path-style) or `https://account.blob.../`, read once:
    /// each request's URL is joined to it, its host not read again.
    base: reqwest::Url,
    credential: Credential,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.shared.base.as_str())
            .finish_non_exhaustive()
    }
}

/// The conditions and lease of one request.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// `If-Match`: only if the blob still has this ETag.
    pub if_match: Option<String>,
    /// `If-None-Match`: `*` for create-only, or a tag for a conditional read.
    pub if_none_match: Option<String>,
    /// `x-ms-lease-id`: the lease the caller holds.
    pub lease_id: Option<String>,
}

impl Conditions {
    /// Only if the blob has this ETag.
    pub fn if_match(etag: impl Into<String>) -> Self {
        Self {
            if_match: Some(etag.into()),
            ..Self::default()
        }
    }

    /// Only if there is no blob yet.
    pub fn create_only() -> Self {
        Self {
            if_none_match: Some("*".into()),
            ..Self::default()
        }
    }

    /// These conditions, under this lease.
    pub fn with_lease(mut self, lease_id: Option<&str>) -> Self {
        self.lease_id = lease_id.map(str::to_owned);
        self
    }

    fn apply(&self, headers: &mut HeaderMap) {
        let pairs = [
            (http::header::IF_MATCH, &self.if_match),
            (http::header::IF_NONE_MATCH, &self.if_none_match),
            (HeaderName::from_static("x-ms-lease-id"), &self.lease_id),
        ];
        for (name, value) in pairs {
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, value);
            }
        }
    }
}

/// A blob as read: its bytes and validators.
#[derive(Debug, Clone)]
pub struct Blob {
    /// The bytes.
    pub bytes: Bytes,
    /// The ETag.
    pub etag: String,
}

/// A successful answer: its headers and its body, read.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        let value = self.headers.get(name)?;
        value.to_str().ok().map(str::to_owned)
    }
}

impl Client {
    /// A client for a connection string, as Azure and Azurite give them:
    /// `AccountName=...;AccountKey=...;BlobEndpoint=...` (or `DefaultEndpointsProtocol` and
    /// `EndpointSuffix` for Azure), `SharedAccessSignature=...` instead of a key, or
    /// `UseDevelopmentStorage=true`.
    pub fn from_connection_string(text: &str) -> Result<Self> {
        let parts: Vec<(String, String)> = text
            .split(';')
            .filter(|p| !p.trim().is_empty())
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let get = |name: &str| {
            parts
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        if get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Self::with_key(
                "http://127.0.0.1:10000/devstoreaccount1",
                ifmatch_azure::DEV_ACCOUNT,
                ifmatch_azure::DEV_KEY,
            );
        }
        let account = get("accountname");
        let endpoint = match (get("blobendpoint"), &account) {
            (Some(endpoint), _) => endpoint,
            (None, Some(account)) => {
                let protocol = get("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
                let suffix = get("endpointsuffix").unwrap_or_else(|| "core.windows.net".into());
                format!("{protocol}://{account}.blob.{suffix}")
            }
            (None, None) => {
                return Err(Error::Invalid(
                    "a connection string needs BlobEndpoint or AccountName".into(),
                ));
            }
        };
        match (account, get("accountkey"), get("sharedaccesssignature")) {
            (Some(account), Some(key), _) => Self::with_key(&endpoint, &account, &key),
            (_, _, Some(sas)) => Self::with_sas(&endpoint, &sas),
            _ => Self::anonymous(&endpoint),
        }
    }

    /// A client signing with Shared Key.
    pub fn with_key(endpoint: &str, account: &str, key: &str) -> Result<Self> {
        use base64::Engine;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(key)
            .map_err(|_| Error::Invalid("the account key is not base64".into()))?;
        let account = ifmatch_azure::Account::new(account, &[key]).map_err(Error::Invalid)?;
        Self::new(endpoint, Credential::Key(account, decoded))
    }

    /// A client appending a shared access signature to every request.
    pub fn with_sas(endpoint: &str, sas: &str) -> Result<Self> {
        Self::new(
            endpoint,
            Credential::Sas(sas.trim_start_matches('?').to_owned()),
        )
    }

    /// A client sending no credentials.
    pub fn anonymous(endpoint: &str) -> Result<Self> {
        Self::new(endpoint, Credential::Anonymous)
    }

    fn new(endpoint: &str, credential: Credential) -> Result<Self> {
        let http = crate::https::client_builder()
            .map_err(|e| Error::Invalid(format!("TLS: {e}")))?
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            // Below the 5 s after which Node's servers (Azurite, miniflare) close an idle
            // connection: a connection is not reused just as the server lets it go.
            .pool_idle_timeout(Duration::from_secs(4))
            .build()?;
        let base = format!("{}/", endpoint.trim_end_matches('/'));
        let base = reqwest::Url::parse(&base)
            .map_err(|e| Error::Invalid(format!("the endpoint {endpoint}: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                http,
                base,
                credential,
            }),
        })
    }

    /// A blob's handle from its URL below this client's endpoint, or `container/blob`.
    pub fn blob(&self, container: &str, name: &str) -> BlobClient {
        BlobClient {
            client: self.clone(),
            container: container.to_owned(),
            name: name.to_owned(),
        }
    }

    /// Creates a container; `Ok(false)` if it was there already.
    pub async fn create_container(&self, container: &str) -> Result<bool> {
        let path = format!("{container}?restype=container");
        match self
            .send(Method::PUT, &path, HeaderMap::new(), Bytes::new())
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_already_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The names of a container's blobs that start with `prefix`, every page.
    pub async fn list(&self, container: &str, prefix: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut marker = String::new();
        loop {
            let query: String = form_pairs(&[
                ("restype", "container"),
                ("comp", "list"),
                ("prefix", prefix),
                ("marker", &marker),
            ]);
            let path = format!("{container}?{query}");
            let answer = self
                .send(Method::GET, &path, HeaderMap::new(), Bytes::new())
                .await?;
            let xml = String::from_utf8_lossy(&answer.body);
            names.extend(elements(&xml, "Name"));
            marker = elements(&xml, "NextMarker")
                .into_iter()
                .next()
                .unwrap_or_default();
            if marker.is_empty() {
                return Ok(names);
            }
        }
    }

    /// Sends one request to `path` (below the endpoint: `container[/blob][?query]`),
    /// signed; a status of 300 or more is an [`Error::Status`].
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer> {
        let Shared {
            http,
            base,
            credential,
        } = &*self.shared;
        let with_sas;
        let path = match credential {
            Credential::Sas(sas) => {
                let glue = if path.contains('?') { '&' } else { '?' };
                with_sas = format!("{path}{glue}{sas}");
                &with_sas
            }
            _ => path,
        };
        let url = (base.join(path)).map_err(|e| Error::Invalid(format!("{path}: {e}")))?;
        let date = httpdate::fmt_http_date(SystemTime::now());
        headers.insert("x-ms-date", HeaderValue::from_str(&date).expect("a date"));
        headers.insert("x-ms-version", HeaderValue::from_static(VERSION));
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        if let Credential::Key(account, key) = credential {
            let uri: http::Uri =
                (url.as_str().parse()).map_err(|e| Error::Invalid(format!("{url}: {e}")))?;
            let signed = Signed {
                method: &method,
                uri: &uri,
                headers: &headers,
                client: ifmatch_azure::Client::default(),
                container: "",
                blob: "",
            };
            let text = shared_key_string(account, signed);
            let authorization = format!("SharedKey {}:{}", account.name(), sign(key, &text));
            headers.insert(
                http::header::AUTHORIZATION,
                HeaderValue::from_str(&authorization).expect("base64"),
            );
        }
        let read = matches!(method, Method::GET | Method::HEAD);
        let request = http
            .request(method, url)
            .headers(headers)
            .body(body)
            .build()?;
        // A kept connection the server closed as the request went out (no answer came): a read
        // changes nothing, so it is sent once more, on another connection. One that timed out
        // is not: it already took its time. (A copy is kept for that, of a read only.)
        let again = read.then(|| request.try_clone()).flatten();
        let mut response = match (http.execute(request).await, again) {
            (Err(e), Some(again)) if e.is_request() && !e.is_timeout() => {
                http.execute(again).await?
            }
            (sent, _) => sent?,
        };
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        let body = response.bytes().await?;
        if status.as_u16() >= 300 {
            let code = (headers.get("x-ms-error-code"))
                .and_then(|c| c.to_str().ok())
                .map(str::to_owned);
            let text = String::from_utf8_lossy(&body);
            let message = elements(&text, "Message")
                .into_iter()
                .next()
                .unwrap_or_else(|| text.into_owned());
            return Err(Error::Status {
                status,
                code,
                message,
            });
        }
        Ok(Answer { headers, body })
    }
}

/// One blob of a client's account.
#[derive(Debug, Clone)]
pub struct BlobClient {
    pub(crate) client: Client,
    container: String,
    name: String,
}

impl BlobClient {
    /// `container/blob`.
    pub fn path(&self) -> String {
        format!("{}/{}", self.container, encode_path(&self.name))
    }

    fn at(&self, query: &str) -> String {
        match query {
            "" => self.path(),
            query => format!("{}?{query}", self.path()),
        }
    }

    /// Creates the blob's container if it does not exist.
    pub async fn create_container(&self) -> Result<()> {
        self.client
            .create_container(&self.container)
            .await
            .map(drop)
    }

    /// Reads the blob. With `If-None-Match` of its current tag: `Ok(None)` (304).
    pub async fn get(&self, conditions: &Conditions) -> Result<Option<Blob>> {
        let mut headers = HeaderMap::new();
        conditions.apply(&mut headers);
        let answer = match self
            .client
            .send(Method::GET, &self.path(), headers, Bytes::new())
            .await
        {
            Err(Error::Status { status, .. }) if status == StatusCode::NOT_MODIFIED => {
                return Ok(None);
            }
            answer => answer?,
        };
        Ok(Some(Blob {
            etag: answer.header("etag").unwrap_or_default(),
            bytes: answer.body,
        }))
    }

    /// Writes the blob under `conditions`; answers its new ETag.
    pub async fn put(&self, bytes: impl Into<Bytes>, conditions: &Conditions) -> Result<String> {
        let mut headers = HeaderMap::new();
        headers.insert("x-ms-blob-type", HeaderValue::from_static("BlockBlob"));
        conditions.apply(&mut headers);
        let answer = (self.client)
            .send(Method::PUT, &self.path(), headers, bytes.into())
            .await?;
        Ok(answer.header("etag").unwrap_or_default())
    }

    /// Deletes the blob under `conditions`.
    pub async fn delete(&self, conditions: &Conditions) -> Result<()> {
        let mut headers = HeaderMap::new();
        conditions.apply(&mut headers);
        (self.client)
            .send(Method::DELETE, &self.path(), headers, Bytes::new())
            .await?;
        Ok(())
    }

    /// One lease action (`acquire`, `renew`, `release`, `break`, `change`) with its headers;
    /// answers the lease id the server gave, if any.
    pub(crate) async fn lease(
        &self,
        action: &str,
        extra: &[(&str, String)],
    ) -> Result<Option<String>> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-ms-lease-action",
            HeaderValue::from_str(action).map_err(|e| Error::Invalid(e.to_string()))?,
        );
        for (name, value) in extra {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| Error::Invalid(e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| Error::Invalid(e.to_string()))?;
            headers.insert(name, value);
        }
        let answer = (self.client)
            .send(Method::PUT, &self.at("comp=lease"), headers, Bytes::new())
            .await?;
        Ok(answer.header("x-ms-lease-id"))
    }

    /// Acquires the blob's lease for `duration` (15 to 60 s; `None`: until released).
    pub async fn acquire_lease(&self, duration: Option<Duration>) -> Result<String> {
        let seconds = duration.map_or(-1, |d| d.as_secs() as i64);
        let id = uuid::Uuid::new_v4().to_string();
        let extra = [
            ("x-ms-lease-duration", seconds.to_string()),
            ("x-ms-proposed-lease-id", id.clone()),
        ];
        Ok(self.lease("acquire", &extra).await?.unwrap_or(id))
    }

    /// Renews a lease this client holds.
    pub async fn renew_lease(&self, lease_id: &str) -> Result<()> {
        self.lease("renew", &[("x-ms-lease-id", lease_id.to_owned())])
            .await
            .map(drop)
    }

    /// Releases a lease this client holds.
    pub async fn release_lease(&self, lease_id: &str) -> Result<()> {
        self.lease("release", &[("x-ms-lease-id", lease_id.to_owned())])
            .await
            .map(drop)
    }

    /// Breaks the blob's lease, whoever holds it, after `period` (`Some(0)`: now).
    pub async fn break_lease(&self, period: Option<Duration>) -> Result<()> {
        let extra: Vec<(&str, String)> = period
            .map(|p| ("x-ms-lease-break-period", p.as_secs().to_string()))
            .into_iter()
            .collect();
        self.lease("break", &extra).await.map(drop)
    }
}

/// `name=value&...`, percent-encoded.
fn form_pairs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| format!("{n}={}", encode_query(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn encode_query(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A blob name as a path: each segment percent-encoded, `/` kept.
fn encode_path(name: &str) -> String {
    name.split('/')
        .map(encode_query)
        .collect::<Vec<_>>()
        .join("/")
}

/// The text of every `<tag>` element of `xml` (the listing's names and markers, an error's
/// message).
fn elements(xml: &str, tag: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut inside: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.local_name().as_ref() == tag.as_bytes() => {
                inside = Some(String::new());
            }
            Ok(Event::Empty(e)) if e.local_name().as_ref() == tag.as_bytes() => {
                out.push(String::new());
            }
            Ok(Event::Text(text)) => {
                if let Some(s) = &mut inside {
                    s.push_str(&text.decode().unwrap_or_default());
                }
            }
            Ok(Event::GeneralRef(entity)) => {
                if let Some(s) = &mut inside {
                    match entity.resolve_char_ref() {
                        Ok(Some(c)) => s.push(c),
                        _ => {
                            let name = entity.decode().unwrap_or_default();
                            s.push_str(
                                quick_xml::escape::resolve_predefined_entity(&name).unwrap_or(""),
                            );
                        }
                    }
                }
            }
            Ok(Event::End(e)) if e.local_name().as_ref() == tag.as_bytes() => {
                out.extend(inside.take());
            }
            Ok(Event::Eof) | Err(_) => return out,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const LISTING: &str = "<EnumerationResults><Blobs><Blob><Name>a</Name></Blob></Blobs>\
        <NextMarker/></EnumerationResults>";

    /// Reads one request head from `stream`; false once the peer closed.
    async fn head(stream: &mut TcpStream) -> bool {
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                return false;
            }
            seen.push(byte[0]);
        }
        true
    }

    async fn reply_ok(stream: &mut TcpStream) {
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{LISTING}",
            LISTING.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
    }

    #[tokio::test]
    async fn a_read_on_a_kept_connection_the_server_closed_is_sent_again() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            // The first connection answers one request, and is closed when the next comes.
            let (mut kept, _) = listener.accept().await.unwrap();
            assert!(head(&mut kept).await);
            reply_ok(&mut kept).await;
            assert!(head(&mut kept).await);
            drop(kept);
            let (mut fresh, _) = listener.accept().await.unwrap();
            assert!(head(&mut fresh).await);
            reply_ok(&mut fresh).await;
        });
        let client = Client::anonymous(&format!("http://127.0.0.1:{port}/account")).unwrap();
        assert_eq!(client.list("c", "").await.unwrap(), ["a"]);
        assert_eq!(client.list("c", "").await.unwrap(), ["a"]);
        server.await.unwrap();
    }
}
