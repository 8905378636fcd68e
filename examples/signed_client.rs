//! The Shared Key client the Queue and Table load clients share (`examples/queue_load.rs` and
//! `examples/table_load.rs` include this file): an endpoint of a connection string, and
//! requests signed with the dialect's own string-to-sign, the server's code for it.

use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ifmatch_azure::Account;
use ifmatch_azure::auth::Signed;

/// A dialect's string-to-sign for a request.
pub(crate) type StringToSign = fn(&Account, Signed<'_>) -> String;

/// A service endpoint and the account that signs for it.
#[derive(Clone)]
pub(crate) struct Signer {
    http: Client<HttpConnector, Full<Bytes>>,
    /// The endpoint's URL, without a trailing `/`.
    pub(crate) endpoint: String,
    account: Account,
    key: Vec<u8>,
    text: StringToSign,
    /// The headers every request of the dialect carries (its version, what it accepts).
    fixed: &'static [(&'static str, &'static str)],
}

/// An answer: its status, its `ETag` and its body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) etag: Option<String>,
    pub(crate) body: Bytes,
}

impl Signer {
    /// The account of `connection` at its endpoint named `endpoint` (`QueueEndpoint`,
    /// `TableEndpoint`), signing with `text`, each request with the `fixed` headers.
    pub(crate) fn new(
        connection: &str,
        endpoint: &str,
        text: StringToSign,
        fixed: &'static [(&'static str, &'static str)],
    ) -> Self {
        let field = |name: &str| {
            connection
                .split(';')
                .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("{name} missing from the connection string"))
                .to_owned()
        };
        let (name, key) = (field("AccountName"), field("AccountKey"));
        let account = Account::new(&name, &[&key]).expect("an account");
        let key = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &key)
            .expect("a base64 key");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            http: Client::builder(TokioExecutor::new()).build(connector),
            endpoint: field(endpoint).trim_end_matches('/').to_owned(),
            account,
            key,
            text,
            fixed,
        }
    }

    /// Sends `method path` (below the account) with `headers` and `body`, dated, its length
    /// given (Shared Key signs it) and signed.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let body = body.into();
        let date = httpdate::fmt_http_date(SystemTime::now());
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header("x-ms-date", &date)
            .header("content-length", body.len());
        for (name, value) in self.fixed.iter().chain(headers) {
            request = request.header(*name, *value);
        }
        let mut request = request.body(Full::new(body)).expect("a request");
        let signed = Signed {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            client: ifmatch_azure::Client::default(),
            container: "",
            blob: "",
        };
        let text = (self.text)(&self.account, signed);
        let signature = ifmatch_azure::auth::sign(&self.key, &text);
        let authorization = format!("SharedKey {}:{signature}", self.account.name());
        (request.headers_mut()).insert("authorization", authorization.parse().unwrap());
        let response = self
            .http
            .request(request)
            .await
            .expect("the server answers");
        let status = response.status();
        let etag = (response.headers().get("etag")).map(|v| v.to_str().unwrap().to_owned());
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        Answer { status, etag, body }
    }
}
