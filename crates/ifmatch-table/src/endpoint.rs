//! The Table service as a host runs it: a whole request in, an answer out. Which account the
//! request addresses (its host `{account}.table.…`, else its path's first segment), whether
//! its credentials allow what it asks ([`crate::auth`]), then the [`front`](crate::front)
//! over that account's tables ([`Scoped`]); every answer stamped with a request id and the
//! dialect's version. The native server and the Worker only carry bytes to and from it.

use std::time::SystemTime;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Response};
use ifmatch_azure::{Client, Env, Named, OperationName, Serving, Style};

use crate::auth::{self, Credential, Operation};
use crate::base::Base;
use crate::error_code::ErrorCode;
use crate::front::{self, Answer, Asked};
use crate::scoped::Scoped;
use crate::store::Tables;
use ifmatch_azure::auth::Signed;
use ifmatch_azure::inflight::Refused;

/// The version of the dialect answers name when the request names none.
const VERSION: http::HeaderValue = http::HeaderValue::from_static("2019-02-02");

/// The Table service over `T`, for `accounts`.
#[derive(Debug, Clone)]
pub struct Endpoint<T, E> {
    base: Base<T, E>,
}

impl<T: Tables + Clone, E: Env> ifmatch_azure::WholeBody for Endpoint<T, E> {
    /// The largest request body taken: a batch's 4 MiB of operations and its multipart framing.
    const MAX_BODY: usize = (4 << 20) + (64 << 10);

    /// Answers a request from `client` whose body was read whole (at most `MAX_BODY`; see
    /// [`too_large`](ifmatch_azure::WholeBody::too_large) for one that was longer), and names its
    /// operation.
    async fn answer(&self, parts: &Parts, client: Client, body: &[u8]) -> Named<Answer> {
        let now = self.base.env.now();
        let mut name = "Unknown";
        let answer = self.dispatch(parts, client, body, now, &mut name).await;
        (self.stamped(answer, parts), Some(OperationName(name)))
    }

    /// 413 `RequestBodyTooLarge`: the body is over `MAX_BODY`.
    fn too_large(&self, parts: &http::request::Parts) -> Answer {
        let failure = front::failure(ErrorCode::RequestBodyTooLarge, "the body is over 4 MiB");
        self.stamped(failure, parts)
    }

    /// 400 `InvalidInput`: the body was cut short.
    fn cut(&self, parts: &http::request::Parts) -> Answer {
        self.stamped(
            front::failure(ErrorCode::InvalidInput, "the body was cut"),
            parts,
        )
    }
}

impl<T: Tables + Clone, E: Env> Endpoint<T, E> {
    /// The service over `tables`, for the development account alone until
    /// [`Endpoint::with_serving`].
    pub fn new(tables: T, env: E) -> Self {
        Self {
            base: Base::new(tables, env),
        }
    }

    /// The accounts served, whether requests without credentials may act (for the whole
    /// server, in development: Azure itself has no public tables), and the memory the requests
    /// in flight share with the host's other endpoints.
    pub fn with_serving(mut self, serving: Serving) -> Self {
        self.base = self.base.with_serving(serving);
        self
    }

    /// The service under `mount` (`/table`): `/table/{account}/Tables` and so on.
    pub fn with_mount(mut self, mount: &str) -> Self {
        self.base = self.base.with_mount(mount);
        self
    }

    /// The answer to a request a host could not read: a header named `name` that is no HTTP
    /// token (a Worker's runtime passes it; `http` cannot hold it).
    pub fn unreadable_header(&self, parts: &http::request::Parts, name: &str) -> Answer {
        let detail = format!("the header name {name:?} is not an HTTP token");
        self.stamped(front::failure(ErrorCode::InvalidInput, &detail), parts)
    }

    /// The answer, and in `name` the operation's name once it is known.
    async fn dispatch(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: &[u8],
        now: SystemTime,
        name: &mut &'static str,
    ) -> Answer {
        let host = ifmatch_azure::host(parts);
        let raw = parts.uri.path();
        let raw = self.base.unmounted(raw);
        // A path that names no account is the first account's: clients that drop an
        // endpoint's path (the legacy `azure-storage` package does, outside its own
        // development-storage settings) send `/Tables`, `/people(...)`.
        let located = self.base.serving.accounts.locate("table", host, raw);
        let first = self.base.serving.accounts.iter().next();
        let (account, below, style) = match (located, first) {
            (Ok(located), _) => located,
            (Err(_), Some(first)) => (first, raw, Style::Path),
            (Err(_), None) => {
                return front::failure(ErrorCode::InvalidUri, "no account of this server is named");
            }
        };
        let style = match (style, below.len() == raw.len()) {
            (Style::Path, true) => None,
            (style, _) => Some(style),
        };
        let signed = Signed::of(parts, client, "", "");
        let path = percent_encoding::percent_decode_str(below).decode_utf8_lossy();
        // What the request asks: its method, or the one a POST tunnels (signed as sent).
        let method = tunneled(&parts.method, &parts.headers);
        let operation = Operation::of(&method, &path, &parts.headers);
        *name = operation.name(&method);
        let credential = match auth::authenticate(account, signed, now) {
            Ok(credential) => credential,
            Err(denied) => return denial(&denied),
        };
        let (within, credential) = match auth::authorize(&credential, operation) {
            Ok(within) => (within, Some(&credential)),
            Err(_) if credential == Credential::Anonymous && self.base.serving.anonymous => {
                (None, None)
            }
            Err(denied) => return denial(&denied),
        };
        let query: Vec<(String, String)> =
            form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                .map(|(n, v)| (n.into_owned(), v.into_owned()))
                .collect();
        let base =
            style
                .unwrap_or(Style::Host)
                .root(parts, client.https, &self.base.mount, account);
        let asked = Asked {
            method: &method,
            path: &path,
            query: &query,
            headers: &parts.headers,
            body,
            base: &base,
            now: self.base.clock.stamp(now, None),
            within,
            credential,
        };
        // Once the credentials are known good: a stranger takes no share of the budget. A body
        // heavier than all of it is never read (413); one heavier than what is left now, later
        // (503, which the SDKs retry).
        let weight = ifmatch_azure::inflight::weight(body);
        let _admitted = match self.base.serving.inflight.admit(weight) {
            Ok(admitted) => admitted,
            Err(refused) => {
                let code = match refused {
                    Refused::TooHeavy { .. } => ErrorCode::RequestBodyTooLarge,
                    Refused::Busy { .. } => ErrorCode::ServerBusy,
                };
                return front::failure(code, &refused.to_string());
            }
        };
        let tables = Scoped::new(self.base.tables.clone(), account.name());
        front::handle(&tables, &asked).await
    }

    /// `answer` with what every answer carries, in this dialect's version.
    fn stamped(&self, answer: Answer, parts: &http::request::Parts) -> Answer {
        self.base.stamped(answer, parts, VERSION)
    }
}

/// The method a request asks: a `POST` with `X-HTTP-Method: MERGE` (or `PUT`, `DELETE`,
/// `PATCH`) asks that one, as clients without those verbs send it (the Python SDK does so for a
/// Table endpoint it takes for Cosmos DB's: `localhost` on another port than 10002).
fn tunneled(method: &Method, headers: &http::HeaderMap) -> Method {
    let asked = headers.get("x-http-method").and_then(|v| v.to_str().ok());
    match asked {
        Some(verb @ ("MERGE" | "PUT" | "DELETE" | "PATCH")) if method == Method::POST => {
            Method::from_bytes(verb.as_bytes()).unwrap_or(Method::POST)
        }
        _ => method.clone(),
    }
}

/// A refused credential, in the Table service's JSON.
fn denial(denied: &ifmatch_azure::auth::Denied) -> Response<Bytes> {
    let mut answer = front::denial(denied.code, &denied.detail);
    let challenge = denied.challenge.as_deref();
    if let Some(challenge) = challenge.and_then(|c| http::HeaderValue::try_from(c).ok()) {
        (answer.headers_mut()).insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    answer
}
