//! ifmatch's blob front, Queue and Table services and Cosmos DB endpoint as a Cloudflare Worker.
//!
//! The request handling is `ifmatch-blob`'s [`Front`], the same as the native server's; this
//! crate only supplies its three parts for the Workers platform:
//!
//! - [`records::DurableRecords`]: blob and container records (and so leases) in a Durable
//!   Object per container, [`records::ContainerRecords`], where each compare-and-swap is one
//!   atomic step;
//! - [`objects::R2Objects`]: blob bytes in R2, one object per version under a random name,
//!   hashed (SHA-256) while the upload streams;
//! - [`tables::DurableTables`]: the Table service's entities in a Durable Object per table,
//!   [`tables::TableEntities`], where each commit (a batch too) is one atomic step; the
//!   service itself is `ifmatch-table`'s, under `/table` or on a host `{account}.table.…`;
//! - the Queue service, `ifmatch-queue`'s over the same Durable Objects (a queue's messages a
//!   table, so an object, of their own), under `/queue` or on a host `{account}.queue.…`;
//! - [`WorkersEnv`]: the Workers clock and `crypto.randomUUID()`, never `SystemTime::now()`;
//! - Entra ID bearer tokens: whose (`identity.rs`: the `IDENTITY` and `DEV_ISSUER_JWKS`
//!   secrets) and their signatures checked by WebCrypto (`signatures.rs`).

mod bindings;
#[cfg(feature = "conformance")]
mod conformance;
mod env;
mod identity;
mod objects;
mod origins;
mod records;
mod signatures;
mod tables;

use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body::{Body, SizeHint};
use ifmatch_azure::{Accounts, Client, answer_whole};
use ifmatch_blob::{DEFAULT_MAX_BODY, Front, ResponseBody};
use ifmatch_core::FramePoll;
use wasm_bindgen::JsCast;
use worker::{Context, Env, HttpRequest, event};

pub use bindings::{BUCKET, RECORDS, TABLES};
pub use env::WorkersEnv;
pub use objects::{R2Objects, R2Reader};
pub use records::{ContainerRecords, DurableRecords};
pub use tables::{DurableTables, TableEntities};

/// Where the Queue service is mounted beside the blobs: `QueueEndpoint=https://HOST/queue/ACCOUNT`
/// (or a host `{account}.queue.…`).
pub const QUEUE_MOUNT: &str = "/queue";

/// Where the Table service is mounted beside the blobs: `TableEndpoint=https://HOST/table/ACCOUNT`
/// (or a host `{account}.table.…`).
pub const TABLE_MOUNT: &str = "/table";

/// How many stored Cosmos items one run of the cron trigger reads at most in each account
/// while it removes those past their time to live (`ifmatch_cosmos::Endpoint::sweep`): with
/// the trigger of `wrangler.toml` (each minute), a container's storage is freed within about
/// its items / 10,000 minutes of an item's time passing. They are gone for every read at once.
pub const SWEEP_BUDGET: usize = 10_000;

/// The cron trigger: Cosmos items past their time to live leave the Durable Objects.
#[event(scheduled)]
async fn scheduled(_event: worker::ScheduledEvent, env: Env, _ctx: worker::ScheduleContext) {
    let (Ok(accounts), Ok(namespace)) = (accounts(&env), env.durable_object(TABLES)) else {
        return;
    };
    let serving = ifmatch_azure::Serving {
        accounts: accounts.clone(),
        ..ifmatch_azure::Serving::default()
    };
    let service = ifmatch_cosmos::Endpoint::new(DurableTables::new(namespace), WorkersEnv)
        .with_serving(serving);
    service.sweep(SWEEP_BUDGET).await;
    // What the publisher that runs after each write left (a write answered as the Worker
    // stopped), and the changes of accounts whose feed was turned off.
    if let (Ok(records), Ok(bucket)) = (env.durable_object(RECORDS), env.bucket(BUCKET)) {
        let front = Front::new(
            DurableRecords::new(records),
            R2Objects::new(bucket),
            WorkersEnv,
        )
        .with_accounts(&accounts);
        if let Err(error) = front.publish_changes().await {
            worker::console_warn!("could not publish the change feed: {error}");
        }
    }
}

/// Accounts and keys from the Worker secret ACCOUNTS (`name:key[,key2]`, `;`-separated);
/// without it, the development account and its published key. Each trusts the issuers of
/// bearer tokens `identity.rs` reads.
fn accounts(env: &Env) -> worker::Result<Accounts> {
    let accounts = match env.secret("ACCOUNTS") {
        Ok(secret) => Accounts::parse(&secret.to_string())
            .map_err(|e| worker::Error::RustError(format!("the ACCOUNTS secret: {e}")))?,
        Err(_) => Accounts::default(),
    };
    Ok(match identity::identity(env)? {
        Some(identity) => accounts.with_identity(identity),
        None => accounts,
    })
}

#[event(fetch)]
async fn fetch(
    raw: worker::web_sys::Request,
    env: Env,
    ctx: Context,
) -> worker::Result<worker::Response> {
    // The runtime passes headers that `http` cannot hold (a name that is no HTTP token, a value
    // beyond visible ASCII), and the conversion of such a request fails: it is read without
    // them and answered 400 in its dialect, never the 500 a failed conversion gives.
    let (raw, unreadable) = readable(raw)?;
    let request = worker::request_from_wasm(raw)?;
    #[cfg(feature = "conformance")]
    if let Some(suite) = request.uri().path().strip_prefix("/__conformance/") {
        return conformance::run(suite, &env).await;
    }
    let max_body = env
        .var("MAX_BODY")
        .ok()
        .and_then(|v| v.to_string().parse().ok())
        .unwrap_or(DEFAULT_MAX_BODY);
    let accounts = accounts(&env)?;
    let authorization = request.headers().get(http::header::AUTHORIZATION);
    if let (Some(identity), Some(authorization)) = (accounts.identity(), authorization) {
        identity::ready(&identity, authorization.to_str().unwrap_or_default()).await;
    }
    let anonymous = env.var("ANONYMOUS").is_ok_and(|v| v.to_string() == "true");
    let unreadable = unreadable.as_deref();
    let given = Given {
        env: &env,
        accounts,
        anonymous,
        unreadable,
    };
    if is_cosmos_request(&request) {
        return cosmos(request, given).await;
    }
    if is_queue_request(&request) {
        return queues(request, given).await;
    }
    if is_table_request(&request, &given.accounts) {
        return tables(request, given).await;
    }
    let Given { accounts, .. } = given;
    let mut front = Front::new(
        DurableRecords::new(env.durable_object(RECORDS)?),
        R2Objects::new(env.bucket(BUCKET)?),
        WorkersEnv,
    )
    .with_max_body(max_body)
    .with_accounts(&accounts)
    .with_anonymous_access(anonymous);
    // The other servers copies may read (`COPY_FROM`: hosts, or `*`); none without it.
    if let Ok(hosts) = env.var("COPY_FROM") {
        let allowed = ifmatch_blob::copy_origin::Allowed::parse(&hosts.to_string())
            .map_err(|e| worker::Error::RustError(format!("COPY_FROM: {e}")))?;
        front = front.with_copy_origins(origins::FetchOrigins::new(allowed));
    }
    if let Some(name) = unreadable {
        return fixed_length(front.unreadable_header(name));
    }
    // R2 must know an upload's length before it streams: tell the body what the client said.
    let length = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let request = request.map(|body| KnownLength { body, length });
    let client = client_of(&request);
    let writes = !matches!(*request.method(), http::Method::GET | http::Method::HEAD);
    let (response, _) = Front::handle_by(&front, request, client).await;
    // The change feed's publisher, after the answer: a Worker has no timer of its own (the
    // cron trigger publishes what these leave).
    if writes && response.status().is_success() {
        ctx.wait_until(async move {
            if let Err(error) = front.publish_kept_changes().await {
                worker::console_warn!("could not publish the change feed: {error}");
            }
        });
    }
    fixed_length(response)
}

/// Whether a request is for the Table service: under [`TABLE_MOUNT`], to a host
/// `{account}.table.…`, or, path-style, naming no account first (`/Tables`,
/// `/people(...)`: no blob request does, and clients that drop an endpoint's path, as the legacy
/// `azure-storage` package does, send those) and not the management API's.
/// The host a request names: its `Host`, or its URI's.
fn host_of(request: &HttpRequest) -> &str {
    (request.headers().get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .or(request.uri().host())
        .unwrap_or("")
}

fn is_table_request(request: &HttpRequest, accounts: &Accounts) -> bool {
    let path = request.uri().path();
    let mounted = path == TABLE_MOUNT || path.starts_with("/table/");
    let host = host_of(request);
    let service = host.split('.').nth(1);
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let unnamed = service != Some("blob") && !first.is_empty() && accounts.get(first).is_none();
    // The management API's paths (`/subscriptions/...`) are the blob front's.
    let managed = ifmatch_blob::management::Route::parse(path, request.uri().query()).is_some();
    mounted || service == Some("table") || (unnamed && !managed)
}

/// Whether a request is for the Queue service: under [`QUEUE_MOUNT`], or to a host
/// `{account}.queue.…`.
fn is_queue_request(request: &HttpRequest) -> bool {
    let path = request.uri().path();
    let host = host_of(request);
    path == QUEUE_MOUNT || path.starts_with("/queue/") || host.split('.').nth(1) == Some("queue")
}

/// Whether a request is for the Cosmos DB endpoint: to a host `{account}.documents.…`, or a
/// path under `/dbs` (no blob account is named `dbs`: names have 3 letters at least, but the
/// Cosmos SDKs take the endpoint's root), or the account read (`GET /`) with Cosmos's
/// credentials.
fn is_cosmos_request(request: &HttpRequest) -> bool {
    let path = request.uri().path();
    let host = host_of(request);
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    // Cosmos's own credentials: a master key's, a resource token's or an Entra ID token's.
    let master = (request.headers().get(http::header::AUTHORIZATION)).is_some_and(|v| {
        ["master", "resource", "aad"].iter().any(|kind| {
            let value = v.as_bytes();
            value.starts_with(format!("type%3D{kind}").as_bytes())
                || value.starts_with(format!("type={kind}").as_bytes())
        })
    });
    // The account read and the offers carry Cosmos's credentials (a blob container may be
    // named `offers`; its requests never carry them).
    host.split('.').nth(1) == Some("documents")
        || first == "dbs"
        || ((path == "/" || first == "offers") && master)
}

/// What the Table service and the Cosmos endpoint are given: the bindings, the accounts,
/// whether requests without credentials may change anything, and the header the runtime passed
/// that `http` could not hold, if any.
struct Given<'a> {
    env: &'a Env,
    accounts: Accounts,
    anonymous: bool,
    unreadable: Option<&'a str>,
}

impl Given<'_> {
    /// The tables' Durable Objects.
    fn tables(&self) -> worker::Result<DurableTables> {
        Ok(DurableTables::new(self.env.durable_object(TABLES)?))
    }

    /// What the endpoints serve with: the accounts, anonymous access, the isolate's budget.
    fn serving(&self) -> ifmatch_azure::Serving {
        ifmatch_azure::Serving {
            accounts: self.accounts.clone(),
            anonymous: self.anonymous,
            inflight: INFLIGHT.clone(),
        }
    }
}

/// The memory the isolate's heavy Table and Cosmos requests may take together
/// (`ifmatch_azure::inflight`): an isolate has 128 MB in all, so a quarter of it. A body that
/// would take more (a 2 MB document of more than some 110,000 values) is answered 413 here,
/// where the native server takes up to about a million.
static INFLIGHT: std::sync::LazyLock<std::sync::Arc<ifmatch_azure::inflight::Inflight>> =
    std::sync::LazyLock::new(|| {
        std::sync::Arc::new(ifmatch_azure::inflight::Inflight::new(32 << 20))
    });

/// The budgets of the Cosmos containers' offers, kept by the isolate across its requests.
static BUDGETS: std::sync::LazyLock<std::sync::Arc<ifmatch_cosmos::throughput::Budgets>> =
    std::sync::LazyLock::new(std::sync::Arc::default);

/// The Cosmos DB endpoint's answer: `ifmatch-cosmos`'s, over the same Durable Objects as the
/// tables (each Cosmos container a table of names no table account reaches).
async fn cosmos(request: HttpRequest, given: Given<'_>) -> worker::Result<worker::Response> {
    let https = request.uri().scheme_str() == Some("https");
    let mut service = ifmatch_cosmos::Endpoint::new(given.tables()?, WorkersEnv)
        .with_serving(given.serving())
        .with_https(https);
    // `COSMOS_THROUGHPUT = "enforce"`: each container held to its offer, per isolate.
    if (given.env.var("COSMOS_THROUGHPUT")).is_ok_and(|v| v.to_string() == "enforce") {
        service = service.with_enforced_throughput(BUDGETS.clone());
    }
    if let Some(name) = given.unreadable {
        return whole(service.unreadable_header(name));
    }
    let client = client_of(&request);
    whole(answer_whole(&service, request, client).await.0)
}

/// The Queue service's answer: `ifmatch-queue`'s, over the tables' Durable Objects (a queue's
/// messages a table of their own, so a Durable Object of their own).
async fn queues(request: HttpRequest, given: Given<'_>) -> worker::Result<worker::Response> {
    let mount = match request.uri().path().starts_with(QUEUE_MOUNT) {
        true => QUEUE_MOUNT,
        false => "",
    };
    let service = ifmatch_queue::Endpoint::new(given.tables()?, WorkersEnv)
        .with_serving(given.serving())
        .with_mount(mount);
    let refused = |parts: &_, name: &_| service.unreadable_header(parts, name);
    read_whole(&service, request, given.unreadable, refused).await
}

/// The answer of `service` (a dialect that reads bodies whole) to `request`, or, when the
/// platform passed a header named `unreadable` that `http` cannot hold, `refused` of its head.
async fn read_whole<E: ifmatch_azure::WholeBody>(
    service: &E,
    request: HttpRequest,
    unreadable: Option<&str>,
    refused: impl FnOnce(&http::request::Parts, &str) -> ifmatch_azure::Answer,
) -> worker::Result<worker::Response> {
    let client = client_of(&request);
    if let Some(name) = unreadable {
        let (parts, _) = request.into_parts();
        return whole(refused(&parts, name));
    }
    whole(answer_whole(service, request, client).await.0)
}

/// What the platform says of a request's client: its address (`cf-connecting-ip`, which a
/// SAS may restrict) and whether it came over HTTPS.
fn client_of<B>(request: &http::Request<B>) -> Client {
    let ip =
        (request.headers().get("cf-connecting-ip")).and_then(|v| v.to_str().ok()?.parse().ok());
    Client {
        ip,
        https: request.uri().scheme_str() == Some("https"),
    }
}

/// The Table service's answer: `ifmatch-table`'s, over the tables' Durable Objects.
async fn tables(request: HttpRequest, given: Given<'_>) -> worker::Result<worker::Response> {
    let service = ifmatch_table::Endpoint::new(given.tables()?, WorkersEnv)
        .with_serving(given.serving())
        .with_mount(if request.uri().path().starts_with(TABLE_MOUNT) {
            TABLE_MOUNT
        } else {
            ""
        });
    let refused = |parts: &_, name: &_| service.unreadable_header(parts, name);
    read_whole(&service, request, given.unreadable, refused).await
}

/// `raw` as `http` can hold it, and the name of the first header it could not, if any: a
/// request without that header is read instead (and answered 400 by its dialect).
fn readable(
    raw: worker::web_sys::Request,
) -> worker::Result<(worker::web_sys::Request, Option<String>)> {
    let headers = raw.headers();
    let kept = worker::web_sys::Headers::new()?;
    let mut unreadable = None;
    for entry in headers.entries() {
        let pair = worker::js_sys::Array::from(&entry?);
        let name = pair.get(0).as_string().unwrap_or_default();
        let value = pair.get(1).as_string().unwrap_or_default();
        let holds = http::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && http::HeaderValue::from_str(&value).is_ok();
        match holds {
            true => kept.append(&name, &value)?,
            false => unreadable = unreadable.or(Some(name)),
        }
    }
    if unreadable.is_none() {
        return Ok((raw, None));
    }
    let init = worker::web_sys::RequestInit::new();
    init.set_headers(&kept);
    let clean = worker::web_sys::Request::new_with_request_and_init(&raw, &init)?;
    Ok((clean, unreadable))
}

/// A whole answer of the Table service or the Cosmos endpoint, as the Worker sends it.
fn whole(answer: http::Response<bytes::Bytes>) -> worker::Result<worker::Response> {
    let (mut head, body) = answer.into_parts();
    if body.is_empty() {
        // An answer with no body and no type (a 204) gets `Content-Encoding: gzip` from the
        // front line's compression as miniflare plays it (a response without a type counts
        // as compressible), with nothing gzipped after it: the SDKs then fail to read it. An
        // encoding already named is left alone.
        let identity = http::HeaderValue::from_static("identity");
        head.headers
            .insert(http::header::CONTENT_ENCODING, identity);
    }
    let builder = worker::ResponseBuilder::new()
        .with_status(head.status.as_u16())
        .with_headers(worker::Headers::from(&head.headers));
    if body.is_empty() {
        return Ok(builder.empty());
    }
    Ok(builder.fixed(body.to_vec()))
}

/// The front's answer as a Workers response that keeps its `Content-Length`: a body streamed
/// from Rust would go out chunked, so it is piped through a `FixedLengthStream` of the length
/// the front gave (the JS SDK refuses a download without the header). The bytes go as stored:
/// compressing them would make another representation under the same strong ETag.
fn fixed_length(
    response: http::Response<ResponseBody<R2Reader>>,
) -> worker::Result<worker::Response> {
    let (parts, body) = response.into_parts();
    let length = (parts.headers.get(http::header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let builder = worker::ResponseBuilder::new()
        .with_status(parts.status.as_u16())
        .with_headers(worker::Headers::from(&parts.headers))
        .with_encode_body(worker::EncodeBody::Manual);
    if body.is_end_stream() {
        return Ok(builder.empty());
    }
    let stream = http_body_util::BodyDataStream::new(body)
        .map_ok(|data| data.to_vec())
        .map_err(|e| worker::Error::RustError(e.to_string()));
    let Some(length) = length else {
        return builder.from_stream(stream);
    };
    let fixed: worker::worker_sys::FixedLengthStream =
        worker::FixedLengthStream::wrap(stream, length).into();
    let readable = fixed
        .unchecked_ref::<worker::web_sys::TransformStream>()
        .readable();
    Ok(builder.stream(readable))
}

/// The request body with the length its `Content-Length` gave, if any.
struct KnownLength {
    body: worker::Body,
    length: Option<u64>,
}

impl Body for KnownLength {
    type Data = Bytes;
    // A JavaScript error is not `Send`: its text is what the front reports.
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> FramePoll<Self::Error> {
        std::pin::Pin::new(&mut self.body)
            .poll_frame(cx)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn size_hint(&self) -> SizeHint {
        self.length
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }

    fn is_end_stream(&self) -> bool {
        self.length == Some(0) || self.body.is_end_stream()
    }
}
