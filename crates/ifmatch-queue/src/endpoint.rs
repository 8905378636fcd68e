//! The Queue service as a host runs it: a whole request in, an answer out. Which account and
//! queue the request names, whose credentials it carries ([`crate::auth`]), then the operation
//! over that account's tables; every answer stamped with a request id, the version and the
//! date.

use std::time::SystemTime;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use ifmatch_azure::auth::{QueryPairs, Signed, StoredPolicy, failed};
use ifmatch_azure::cors::{self, Cors};
use ifmatch_azure::inflight::Refused;
use ifmatch_azure::{Account, Answer, Client, Env, Named, OperationName, Serving, Style};
use ifmatch_table::{Base, Scoped, Tables};

use crate::failure::{ErrorCode, Failure, Result};
use crate::operation::{Operation, Target};
use crate::{auth, messages, queues, xml};

/// The access policy of a queue that has none.
const EMPTY_ACL: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />";

/// The version of the dialect answers name when the request names none.
const VERSION: HeaderValue = HeaderValue::from_static("2021-12-02");

/// The Queue service over `T`, for its accounts.
#[derive(Debug, Clone)]
pub struct Endpoint<T, E> {
    base: Base<T, E>,
}

impl<T: Tables + Clone, E: Env> ifmatch_azure::WholeBody for Endpoint<T, E> {
    /// The largest request body taken: a message of 64 KiB, escaped, with room.
    const MAX_BODY: usize = 1 << 20;

    /// Answers a request from `client` whose body was read whole (at most `MAX_BODY`), and
    /// names its operation.
    async fn answer(&self, parts: &Parts, client: Client, body: &[u8]) -> Named<Answer> {
        if parts.method == Method::OPTIONS {
            let answer = match self.preflight(parts).await {
                Ok(headers) => {
                    let mut answer = http::Response::new(Bytes::new());
                    *answer.headers_mut() = headers;
                    answer
                }
                Err(failure) => failure.answer(false),
            };
            return (
                self.stamped(answer, parts),
                Some(OperationName("Preflight")),
            );
        }
        let (mut answer, name) = self.operation(parts, client, body).await;
        if parts.headers.contains_key(header::ORIGIN) {
            // A browser's request: the service's CORS rules add what it may read.
            if let Ok(cors) = self.cors(parts).await {
                cors.decorate(&parts.method, &parts.headers, answer.headers_mut());
            }
        }
        (answer, name)
    }

    /// 413 `RequestBodyTooLarge`.
    fn too_large(&self, parts: &http::request::Parts) -> Answer {
        let failure = Failure::shared(
            ifmatch_azure::CommonCode::RequestBodyTooLarge,
            "The body is over 1 MiB; a message is at most 64 KiB.",
        );
        self.stamped(failure.answer(parts.method == Method::HEAD), parts)
    }

    /// 400 `InvalidInput`: the body was cut short.
    fn cut(&self, parts: &http::request::Parts) -> Answer {
        let failure = Failure::shared(ifmatch_azure::CommonCode::InvalidInput, "The body was cut.");
        self.stamped(failure.answer(parts.method == Method::HEAD), parts)
    }
}

/// What a handler answers: a status, headers, and an XML body or none.
struct Done {
    status: StatusCode,
    headers: HeaderMap,
    xml: Option<String>,
}

impl Done {
    fn new(status: StatusCode) -> Self {
        Self {
            status,
            headers: HeaderMap::new(),
            xml: None,
        }
    }

    fn xml(status: StatusCode, xml: String) -> Self {
        Self {
            xml: Some(xml),
            ..Self::new(status)
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.insert(name, value);
        }
        self
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

    /// The service under `mount` (`/queue`): `/queue/{account}/{queue}` and so on.
    pub fn with_mount(mut self, mount: &str) -> Self {
        self.base = self.base.with_mount(mount);
        self
    }

    /// The accounts served, whether requests without credentials may act, and the memory
    /// the requests in flight share with the host's other endpoints.
    pub fn with_serving(mut self, serving: Serving) -> Self {
        self.base = self.base.with_serving(serving);
        self
    }

    /// A browser's preflight, answered from the service's CORS rules without credentials.
    async fn preflight(&self, parts: &http::request::Parts) -> Result<HeaderMap> {
        let cors = self.cors(parts).await?;
        cors.preflight(&parts.headers)
            .map_err(|refused| match refused {
                cors::Refused::NotPreflight => Failure::shared(
                    ifmatch_azure::CommonCode::MissingRequiredHeader,
                    "A preflight (OPTIONS) carries Origin and Access-Control-Request-Method.",
                ),
                cors::Refused::NoRule => {
                    Failure::from(ifmatch_azure::CommonCode::CorsPreflightFailure)
                }
            })
    }

    /// The CORS rules of the service of the account `parts` addresses.
    async fn cors(&self, parts: &http::request::Parts) -> Result<Cors> {
        let (account, _, _) = self.locate(parts)?;
        let xml = queues::service_properties(&self.scoped(account)).await?;
        Ok(Cors::of_properties(&xml.unwrap_or_default()).unwrap_or_default())
    }

    /// The account a request addresses, the path below it and how it was named.
    fn locate<'a>(
        &'a self,
        parts: &'a http::request::Parts,
    ) -> Result<(&'a Account, &'a str, Style)> {
        let raw = self.base.unmounted(parts.uri.path());
        let accounts = &self.base.serving.accounts;
        Ok(accounts.locate("queue", ifmatch_azure::host(parts), raw)?)
    }

    /// The tables of `account`'s queues.
    fn scoped(&self, account: &Account) -> Scoped<T> {
        Scoped::new(
            self.base.tables.clone(),
            &format!("~queue~{}", account.name()),
        )
    }

    async fn operation(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: &[u8],
    ) -> Named<Answer> {
        let head = parts.method == Method::HEAD;
        let mut name = "Unknown";
        let answer = match self.dispatch(parts, client, body, &mut name).await {
            Ok(done) => {
                let mut answer = http::Response::new(match (&done.xml, head) {
                    (Some(xml), false) => Bytes::from(xml.clone()),
                    _ => Bytes::new(),
                });
                *answer.status_mut() = done.status;
                *answer.headers_mut() = done.headers;
                if done.xml.is_some() {
                    answer.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/xml"),
                    );
                }
                answer
            }
            Err(failure) => failure.answer(head),
        };
        (self.stamped(answer, parts), Some(OperationName(name)))
    }

    /// The answer to a request a host could not read: a header named `name` that is no HTTP
    /// token.
    pub fn unreadable_header(&self, parts: &http::request::Parts, name: &str) -> Answer {
        let failure = Failure::shared(
            ifmatch_azure::CommonCode::InvalidHeaderValue,
            format!("The header name {name:?} is not an HTTP token."),
        );
        self.stamped(failure.answer(parts.method == Method::HEAD), parts)
    }

    async fn dispatch(
        &self,
        parts: &http::request::Parts,
        client: Client,
        body: &[u8],
        name: &mut &'static str,
    ) -> Result<Done> {
        let now = self.base.env.now();
        let (account, below, style) = self.locate(parts)?;
        let target = Target::parse(&parts.method, below, parts.uri.query())?;
        *name = target.operation.name();
        let signed = Signed::of(parts, client, &target.queue, "");
        let tables = self.scoped(account);
        let policy = self
            .stored_policy(&tables, &target.queue, &parts.uri)
            .await?;
        let credential = auth::authenticate(account, signed, policy.as_ref(), now)?;
        match auth::authorize(&credential, &target.operation, &target.queue) {
            Ok(()) => {}
            Err(_) if credential == auth::Credential::Anonymous && self.base.serving.anonymous => {}
            Err(denied) => return Err(denied.into()),
        }
        let weight = ifmatch_azure::inflight::weight(body);
        let inflight = &self.base.serving.inflight;
        let _admitted = inflight.admit(weight).map_err(|refused| {
            let code = match refused {
                Refused::TooHeavy { .. } => ifmatch_azure::CommonCode::RequestBodyTooLarge,
                Refused::Busy { .. } => ifmatch_azure::CommonCode::ServerBusy,
            };
            Failure::shared(code, refused.to_string())
        })?;
        let root = style.root(parts, client.https, &self.base.mount, account);
        let endpoint = format!("{root}/");
        let asked = Asked {
            tables: &tables,
            queue: &target.queue,
            headers: &parts.headers,
            body,
            now,
        };
        self.operate(&asked, &target.operation, &parts.method, &endpoint)
            .await
    }

    async fn operate(
        &self,
        asked: &Asked<'_, impl Tables>,
        operation: &Operation,
        method: &Method,
        endpoint: &str,
    ) -> Result<Done> {
        let (tables, name) = (asked.tables, asked.queue);
        let at = self.base.clock.stamp(asked.now, None);
        let env = &self.base.env;
        Ok(match operation {
            Operation::ListQueues(options) => {
                let (listed, next) = queues::list(tables, options).await?;
                Done::xml(
                    StatusCode::OK,
                    xml::list_answer(endpoint, options, &listed, next.as_deref()),
                )
            }
            Operation::ServiceProperties if method == Method::PUT => {
                let text = std::str::from_utf8(asked.body)
                    .map_err(|_| Failure::from(ErrorCode::InvalidXmlDocument))?;
                let old = queues::service_properties(tables).await?;
                let old = old.unwrap_or_else(xml::default_service_properties);
                let merged = ifmatch_azure::service_properties::merge(Some(&old), text)
                    .map_err(|why| Failure::new(ErrorCode::InvalidXmlDocument, why))?;
                queues::set_service_properties(tables, merged, at).await?;
                Done::new(StatusCode::ACCEPTED)
            }
            Operation::ServiceProperties => {
                let xml = queues::service_properties(tables).await?;
                Done::xml(
                    StatusCode::OK,
                    xml.unwrap_or_else(xml::default_service_properties),
                )
            }
            Operation::ServiceStats => Done::xml(StatusCode::OK, xml::service_stats(asked.now)),
            Operation::CreateQueue => {
                let metadata = ifmatch_azure::metadata::metadata(asked.headers)?;
                match queues::create(tables, name, metadata, at).await? {
                    true => Done::new(StatusCode::CREATED),
                    false => Done::new(StatusCode::NO_CONTENT),
                }
            }
            Operation::DeleteQueue => {
                queues::delete(tables, name).await?;
                Done::new(StatusCode::NO_CONTENT)
            }
            Operation::GetQueueMetadata => {
                let queue = queues::get(tables, name).await?;
                let count = messages::count(tables, &queue.messages_table(name)).await?;
                let mut done = Done::new(StatusCode::OK)
                    .header("x-ms-approximate-messages-count", &count.to_string());
                ifmatch_azure::metadata::insert_metadata(&queue.metadata, &mut done.headers);
                done
            }
            Operation::SetQueueMetadata => {
                let metadata = ifmatch_azure::metadata::metadata(asked.headers)?;
                queues::update(tables, name, at, |queue| queue.metadata = metadata.clone()).await?;
                Done::new(StatusCode::NO_CONTENT)
            }
            Operation::GetQueueAcl => {
                let queue = queues::get(tables, name).await?;
                let acl = queue.acl.unwrap_or_else(|| EMPTY_ACL.to_owned());
                Done::xml(StatusCode::OK, acl)
            }
            Operation::SetQueueAcl => {
                xml::policies(asked.body)?;
                let acl = match std::str::from_utf8(asked.body).unwrap_or_default().trim() {
                    "" => EMPTY_ACL.to_owned(),
                    text => text.to_owned(),
                };
                queues::update(tables, name, at, |queue| queue.acl = Some(acl.clone())).await?;
                Done::new(StatusCode::NO_CONTENT)
            }
            Operation::PutMessage(options) => {
                let text = xml::message_text(asked.body)?;
                let table = queues::get(tables, name).await?.messages_table(name);
                let put = (options.visibility, options.ttl);
                let message = messages::put(tables, &table, env, text, put, at).await?;
                Done::xml(StatusCode::CREATED, xml::put_answer(&message))
            }
            Operation::GetMessages { count, visibility } => {
                let table = queues::get(tables, name).await?.messages_table(name);
                let asked = (*count, true, *visibility);
                let got = messages::get(tables, &table, env, asked, at).await?;
                Done::xml(StatusCode::OK, xml::messages_answer(&got, false))
            }
            Operation::PeekMessages { count } => {
                let table = queues::get(tables, name).await?.messages_table(name);
                let got = messages::get(tables, &table, env, (*count, false, 0), at).await?;
                Done::xml(StatusCode::OK, xml::messages_answer(&got, true))
            }
            Operation::ClearMessages => {
                queues::clear(tables, name, at).await?;
                Done::new(StatusCode::NO_CONTENT)
            }
            Operation::UpdateMessage {
                id,
                receipt,
                visibility,
            } => {
                let text = match asked.body.iter().all(u8::is_ascii_whitespace) {
                    true => None,
                    false => Some(xml::message_text(asked.body)?),
                };
                let table = queues::get(tables, name).await?.messages_table(name);
                let held = (id.as_str(), receipt.as_str());
                let updated =
                    messages::update(tables, &table, env, held, (*visibility, text), at).await?;
                Done::new(StatusCode::NO_CONTENT)
                    .header("x-ms-popreceipt", &updated.receipt)
                    .header("x-ms-time-next-visible", &xml::date(updated.visible))
            }
            Operation::DeleteMessage { id, receipt } => {
                let table = queues::get(tables, name).await?.messages_table(name);
                messages::delete(tables, &table, env, (id, receipt)).await?;
                Done::new(StatusCode::NO_CONTENT)
            }
        })
    }

    /// The stored access policy a queue SAS names (`si`), read from the queue's access
    /// policy: none when the request names none; 403 `AuthenticationFailed` when the queue has
    /// no policy by that name (a policy removed revokes the signatures that name it).
    async fn stored_policy(
        &self,
        tables: &impl Tables,
        queue: &str,
        uri: &http::Uri,
    ) -> Result<Option<StoredPolicy>> {
        // Most requests name no policy: their query is not read again.
        if !uri.query().is_some_and(|q| q.contains("si=")) {
            return Ok(None);
        }
        let query = QueryPairs::of(uri);
        let signed = query.get("sig").is_some() && query.get("ss").is_none();
        let Some(id) = query.get("si").filter(|_| signed) else {
            return Ok(None);
        };
        let missing = || {
            Failure::from(failed(format!(
                "the signature names the stored access policy {id:?}, which queue {queue:?} \
                 does not have"
            )))
        };
        if queue.is_empty() {
            return Err(missing());
        }
        let acl = match queues::get(tables, queue).await {
            Ok(found) => found.acl.unwrap_or_default(),
            Err(failure) if failure.status == StatusCode::NOT_FOUND => return Err(missing()),
            Err(failure) => return Err(failure),
        };
        let policies = xml::policies(acl.as_bytes())?;
        let found = policies.into_iter().find(|(name, _)| *name == id);
        found.map(|(_, policy)| Some(policy)).ok_or_else(missing)
    }

    /// `answer` with what every answer carries, in this dialect's version.
    fn stamped(&self, answer: Answer, parts: &http::request::Parts) -> Answer {
        self.base.stamped(answer, parts, VERSION)
    }
}

/// What one request brings an operation: the account's tables, the queue it names, its
/// headers and body, and the time it is answered at.
struct Asked<'a, T> {
    tables: &'a T,
    queue: &'a str,
    headers: &'a HeaderMap,
    body: &'a [u8],
    now: SystemTime,
}
