//! The Cosmos DB endpoint as a host runs it: a whole request in, an answer out. What the path
//! names, whose key signed it ([`crate::auth`]), then the [`front`](crate::front) over that
//! account's tables; every answer stamped with Cosmos's headers (activity id, request
//! charge, session token).

use std::sync::Arc;

use http::{HeaderValue, header};
use ifmatch_azure::{Account, Env, Serving};
use ifmatch_table::{Scoped, Tables};

use crate::address::{Address, Unknown};
use crate::charge::{self, Meter};
use crate::failure::{Answer, Failure, bad_request, refused, too_large};
use crate::front::answers::answer_of;
use crate::front::turns::Commits;
use crate::front::{Asked, CONSISTENCY, Front};
use crate::throughput::Budgets;
use ifmatch_table::Clock;

/// The largest request body taken: a document of 2 MB and some room.
pub const MAX_BODY: usize = (2 << 20) + (64 << 10);

/// The account the emulators serve, and its published key: what SDK samples connect with.
pub const EMULATOR_ACCOUNT: &str = "localhost";
/// The Cosmos DB emulator's published key.
pub const EMULATOR_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

/// The connection string of the emulator's account at `endpoint` (`http://host:port`).
pub fn connection_string(endpoint: &str) -> String {
    format!("AccountEndpoint={endpoint}/;AccountKey={EMULATOR_KEY};")
}

/// The Cosmos DB endpoint over `T`.
#[derive(Debug, Clone)]
pub struct Endpoint<T, E> {
    tables: T,
    /// The emulator's account, then the served ones.
    accounts: Vec<Account>,
    /// What the host serves with (its accounts are in `accounts`).
    serving: Serving,
    env: E,
    /// The instants writes are made at.
    clock: Arc<Clock>,
    /// This instance's commits to containers (their turns and groups).
    commits: Arc<Commits>,
    /// Whether clients reach it over HTTPS: the endpoint the account read names.
    https: bool,
    /// The offers' budgets, when throughput is held to them.
    budgets: Option<Arc<Budgets>>,
}

impl<T: Tables + Clone, E: Env> ifmatch_azure::WholeBody for Endpoint<T, E> {
    const MAX_BODY: usize = MAX_BODY;

    /// No operation named: the Cosmos endpoint's are counted as one (`Unknown`).
    async fn answer(
        &self,
        parts: &http::request::Parts,
        _: ifmatch_azure::Client,
        body: &[u8],
    ) -> ifmatch_azure::Named<Answer> {
        (self.handle(parts, body).await, None)
    }

    /// 413 `RequestEntityTooLarge`: the body is over [`MAX_BODY`].
    fn too_large(&self, parts: &http::request::Parts) -> Answer {
        self.stamped(too_large().answer(), Some(&parts.headers))
    }

    /// 400 `BadRequest`: the body was cut short.
    fn cut(&self, parts: &http::request::Parts) -> Answer {
        self.stamped(
            bad_request("The body was cut.").answer(),
            Some(&parts.headers),
        )
    }
}

impl<T: Tables + Clone, E: Env> Endpoint<T, E> {
    /// The endpoint over `tables`, for the emulator's account alone until
    /// [`Endpoint::with_serving`].
    pub fn new(tables: T, env: E) -> Self {
        let emulator = Account::new(EMULATOR_ACCOUNT, &[EMULATOR_KEY]).expect("the published key");
        Self {
            tables,
            accounts: vec![emulator],
            serving: Serving::default(),
            env,
            clock: Arc::default(),
            commits: Arc::default(),
            https: false,
            budgets: None,
        }
    }

    /// Serves the host's accounts too, each with its own keys and its own databases, beside
    /// the emulator's (which takes the tokens the first takes); lets requests without
    /// credentials act if it says so; shares its memory budget.
    pub fn with_serving(mut self, serving: Serving) -> Self {
        if let Some(first) = serving.accounts.iter().next() {
            self.accounts[0] = self.accounts[0].clone().sharing_identity(first);
        }
        self.accounts.truncate(1);
        self.accounts.extend(serving.accounts.iter().cloned());
        self.serving = serving;
        self
    }

    /// Removes items past their time to live, in every account, reading at most about
    /// `budget` stored items of each from where the last sweep stopped: called on a timer, it
    /// goes round every container that has a time to live, `budget` items a call (see
    /// `ttl.rs`). Answers how many it removed; a backend that fails leaves the rest for the
    /// next call.
    pub async fn sweep(&self, budget: usize) -> usize {
        let mut removed = 0;
        for account in &self.accounts {
            let tables = Scoped::new(self.tables.clone(), &format!("~cosmos~{}", account.name()));
            let front = Front {
                tables: &tables,
                clock: &self.clock,
                now: self.env.now(),
                endpoint: "",
                commits: &self.commits,
                account,
                meter: Meter::default(),
                seed: self.env.random_uuid(),
            };
            removed += front.sweep(budget).await.unwrap_or(0);
        }
        removed
    }

    /// Whether clients reach the endpoint over HTTPS (the account read names an `https://`
    /// endpoint, so the SDKs stay on it).
    pub fn with_https(mut self, https: bool) -> Self {
        self.https = https;
        self
    }

    /// Holds each container's requests to the throughput its offer provisions, its budget
    /// kept in `budgets` (a host whose endpoint lives one request, the Worker, keeps them
    /// beside it): past it, 429 with the time to wait ([`crate::throughput`]). Without it,
    /// every answer says what it cost and nothing waits.
    pub fn with_enforced_throughput(mut self, budgets: Arc<Budgets>) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Answers a request whose body was read whole (at most [`MAX_BODY`]; see
    /// [`too_large`](ifmatch_azure::WholeBody::too_large) for one that was longer).
    pub async fn handle(&self, parts: &http::request::Parts, body: &[u8]) -> Answer {
        let answer = match self.dispatch(parts, body).await {
            Ok(answer) => answer,
            Err(failure) => failure.answer(),
        };
        self.stamped(answer, Some(&parts.headers))
    }

    /// The answer to a request a host could not read: a header named `name` that is no HTTP
    /// token (a Worker's runtime passes it; `http` cannot hold it).
    pub fn unreadable_header(&self, name: &str) -> Answer {
        let refused = bad_request(format!(
            "The header name {name:?} is not an HTTP token: the request cannot be read."
        ));
        self.stamped(refused.answer(), None)
    }

    async fn dispatch(&self, parts: &http::request::Parts, body: &[u8]) -> Result<Answer, Failure> {
        let address = Address::parse(parts.uri.path()).map_err(|unknown| match unknown {
            Unknown::Encoding => bad_request("The path is not UTF-8 once decoded."),
            Unknown::Kind(path) => bad_request(format!("/{path} names nothing this server serves (databases, containers, documents, partition key ranges, conflicts, stored procedures, triggers, user-defined functions, users, permissions and offers).")),
        })?;
        let host = ifmatch_azure::host(parts).unwrap_or("localhost");
        // A host named for an account (`{account}.documents.…`) is that account's alone.
        let label = host.split(['.', ':']).next().unwrap_or_default();
        let named: Vec<&Account> = self.accounts.iter().filter(|a| a.name() == label).collect();
        let candidates = if named.is_empty() {
            self.accounts.iter().collect()
        } else {
            named
        };
        let (account, caller) = match self.serving.anonymous {
            true => (candidates[0], crate::auth::Caller::Key),
            false => {
                let reached = crate::auth::Reached {
                    host: host.split(':').next().unwrap_or(host),
                    https: self.https,
                };
                let (method, headers) = (&parts.method, &parts.headers);
                crate::auth::authorize(
                    candidates,
                    method,
                    headers,
                    &address,
                    (reached, self.env.now()),
                )?
            }
        };
        match &caller {
            crate::auth::Caller::Token(access) => {
                let asked = (&parts.method, &parts.headers, body);
                crate::auth::permit(access, asked, &address, account.name())?;
            }
            crate::auth::Caller::Resource(grant) => {
                let asked = (&parts.method, &parts.headers);
                crate::resource_token::permit(grant, asked, &address)?;
            }
            crate::auth::Caller::Key => {}
        }
        consistency(&parts.headers)?;
        // Once the credentials are known good: a stranger takes no share of the budget.
        let weight = ifmatch_azure::inflight::weight(body);
        let _admitted = self.serving.inflight.admit(weight).map_err(refused)?;
        let tables = Scoped::new(self.tables.clone(), &format!("~cosmos~{}", account.name()));
        let scheme = if self.https { "https" } else { "http" };
        let endpoint = format!("{scheme}://{host}/");
        let front = Front {
            tables: &tables,
            clock: &self.clock,
            now: self.env.now(),
            endpoint: &endpoint,
            commits: &self.commits,
            account,
            meter: Meter::default(),
            seed: self.env.random_uuid(),
        };
        let asked = Asked {
            method: &parts.method,
            headers: &parts.headers,
            address: &address,
            body,
        };
        if let crate::auth::Caller::Resource(grant) = &caller {
            front.permission_stands(grant).await?;
        }
        // A container's documents past its offer's budget wait (when throughput is held).
        let seconds = |at: std::time::SystemTime| {
            (at.duration_since(std::time::UNIX_EPOCH)).map_or(0.0, |d| d.as_secs_f64())
        };
        let offer = match (&self.budgets, address.documents_of()) {
            (Some(budgets), Some(container)) => {
                let now = seconds(front.now);
                let offer = front.drawn_on(budgets, container, now).await?;
                if let Some(offer) = &offer {
                    budgets.admit(offer, now)?;
                }
                offer
            }
            _ => None,
        };
        // Charged once it ran, failed or not (a read of nothing costs a read).
        let mut answer = match front.handle(&asked).await {
            Ok(done) => answer_of(done),
            Err(failure) => failure.answer(),
        };
        let charge = front.meter.total(answer.body().len()).max(charge::METADATA);
        if let (Some(budgets), Some(offer)) = (&self.budgets, &offer) {
            budgets.spend(offer, charge, seconds(self.env.now()));
        }
        if let Ok(value) = HeaderValue::from_str(&charge::header(charge)) {
            answer.headers_mut().insert(CHARGE, value);
        }
        Ok(answer)
    }

    /// `answer` with the headers every Cosmos answer carries; its activity id the one the
    /// request `asked` names (the SDKs name one for each, to find it again), else a new one.
    fn stamped(&self, mut answer: Answer, asked: Option<&http::HeaderMap>) -> Answer {
        let named = asked
            .and_then(|headers| headers.get("x-ms-activity-id"))
            .and_then(|value| value.to_str().ok())
            .and_then(|value| uuid::Uuid::try_parse(value).ok());
        let activity = named.unwrap_or_else(|| self.env.random_uuid()).to_string();
        let lsn = self.clock.last().max(1);
        let headers = answer.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&activity) {
            headers.insert("x-ms-activity-id", value);
        }
        // A request refused before it ran costs nothing.
        if !headers.contains_key(CHARGE) {
            headers.insert(CHARGE, HeaderValue::from_static("0"));
        }
        if let Ok(value) = HeaderValue::from_str(&format!("0:-1#{lsn}")) {
            headers.insert("x-ms-session-token", value);
        }
        headers.insert("x-ms-gatewayversion", HeaderValue::from_static("2.0.0"));
        let date = ifmatch_core::date::date_header_value(self.env.now().into());
        headers.insert(header::DATE, date);
        answer
    }
}

/// What every answer says it cost, in request units ([`crate::charge`]).
const CHARGE: &str = "x-ms-request-charge";

/// The consistency headers a request may carry: a level of the five Cosmos names no stronger
/// than the account's ([`CONSISTENCY`]: a stronger one is 400, as Azure refuses it), and a session
/// token as the SDKs send it back (`0:-1#42`, `0:42`, several ranges joined by commas). Every
/// level is met: each read is served from the store every instance commits to (a redb file,
/// Redis, a bucket), which shows every write acknowledged before it, so a read carrying any
/// token this service gave is served at or after it, on any instance of a fleet.
fn consistency(headers: &http::HeaderMap) -> Result<(), Failure> {
    // Strongest first.
    const LEVELS: [&str; 5] = [
        "Strong",
        "BoundedStaleness",
        "Session",
        "ConsistentPrefix",
        "Eventual",
    ];
    let rank = |level: &str| {
        LEVELS
            .iter()
            .position(|known| known.eq_ignore_ascii_case(level))
    };
    if let Some(level) = headers.get("x-ms-consistency-level") {
        let level = level.to_str().unwrap_or_default();
        match rank(level) {
            None => {
                return Err(bad_request(format!(
                    "The consistency level {level:?} is none of Strong, BoundedStaleness, Session, ConsistentPrefix and Eventual."
                )));
            }
            Some(asked) if asked < rank(CONSISTENCY).unwrap_or_default() => {
                return Err(bad_request(format!(
                    "The consistency level {level:?} is stronger than the account's ({CONSISTENCY}): a request may only relax it."
                )));
            }
            Some(_) => {}
        }
    }
    if let Some(token) = headers.get("x-ms-session-token") {
        // A token of bytes that are not text is malformed, not absent.
        let text = token
            .to_str()
            .map_err(|_| bad_request("The session token provided is not text: it is invalid."))?;
        // Each number as the SDKs send it (a version may be -1), within 64 bits.
        let numbers = |part: &str| {
            let digits = part.strip_prefix('-').unwrap_or(part);
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && part.parse::<i64>().is_ok()
        };
        let valid = text.trim().is_empty()
            || text.split(',').all(|range| {
                let Some((id, progress)) = range.trim().split_once(':') else {
                    return false;
                };
                let mut parts = progress.split('#');
                numbers(id)
                    && parts.next().is_some_and(numbers)
                    && parts.all(|p| p.split('=').all(numbers))
            });
        if !valid {
            return Err(bad_request(format!(
                "The session token provided {text:?} is invalid."
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::consistency;

    fn with(name: &str, value: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        headers
    }

    #[test]
    fn a_json_value_is_no_larger_than_the_memory_budget_weighs_it() {
        let size = std::mem::size_of::<serde_json::Value>();
        assert!(size <= ifmatch_azure::inflight::PER_VALUE, "{size}");
    }

    #[test]
    fn consistency_headers_as_the_sdks_send_them_and_nothing_else() {
        for token in ["0:-1#42", "0:42", "0:-1#42#1=20#2=3,1:-1#7", ""] {
            assert!(
                consistency(&with("x-ms-session-token", token)).is_ok(),
                "{token}"
            );
        }
        for token in [
            "abc",
            "0:-1#x",
            "0:",
            ":-1#4",
            "0:-1#4#1=",
            "0:-1#4,",
            "0:-1#99999999999999999999",
            "0:-1#9223372036854775808",
            "18446744073709551616:-1#4",
            "0:-1#4#1=99999999999999999999",
        ] {
            let refused = consistency(&with("x-ms-session-token", token)).unwrap_err();
            assert_eq!(refused.status(), 400, "{token}");
        }
        for level in ["session", "Eventual", "ConsistentPrefix"] {
            assert!(
                consistency(&with("x-ms-consistency-level", level)).is_ok(),
                "{level}"
            );
        }
        // Stronger than the account's Session: Azure's 400.
        for level in ["Strong", "boundedstaleness"] {
            let refused = consistency(&with("x-ms-consistency-level", level)).unwrap_err();
            assert_eq!(refused.status(), 400, "{level}");
        }
        assert!(consistency(&with("x-ms-consistency-level", "Linearizable")).is_err());
        let mut not_text = http::HeaderMap::new();
        let value = http::HeaderValue::from_bytes(b"0:-1#4\xff").unwrap();
        not_text.insert("x-ms-session-token", value);
        assert_eq!(consistency(&not_text).unwrap_err().status(), 400);
    }
}
