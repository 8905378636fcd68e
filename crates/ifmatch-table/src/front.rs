//! The Table service's requests answered over any [`Tables`] backend: Create, Delete and
//! Query Tables; Insert, Get, Update, Merge and Delete Entity and their `Insert Or` forms;
//! Query Entities with `$filter`, `$select`, `$top` and continuation. A request reaches it
//! with its path below the account (`/Tables`, `/people(PartitionKey='p',RowKey='r')`), its
//! credentials already checked by the server that hosts it; answers are OData JSON and
//! Azure's JSON errors.
//!
//! Every write is a compare-and-swap: read the entity, [`decide`] against it, commit the
//! change expecting what was read, and decide again if another write came first.

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde_json::{Map, Value as Json, json};

use crate::auth::{Credential, KeyRange};
use crate::filter::Filter;
use crate::odata::{self, Decoded, Metadata};
use crate::prefer::{PREFERENCE_APPLIED, Preference};
use crate::store::{EntityKey, Scan, TableError, Tables};
use crate::value::{DateTime, Entity, Value};
use crate::write::{Kind, Refused, condition, decide};

/// The most entities one page of Query Entities returns (Azure's limit).
pub const MAX_PAGE: usize = 1000;

/// How many entities one page reads at the most while it looks for matches: a filter over a
/// whole table answers a page of what it read and a continuation, never reads the table.
const MAX_READ: usize = 10 * MAX_PAGE;

/// How many times a write decides again when other writes keep coming first.
const ATTEMPTS: usize = 32;

/// `x-ms-error-code`.
const ERROR_CODE: &str = "x-ms-error-code";

/// A request as the front reads it.
#[derive(Debug)]
pub struct Asked<'a> {
    /// Its method.
    pub method: &'a Method,
    /// Its path below the account, percent-decoded, starting with `/`.
    pub path: &'a str,
    /// Its query's pairs, percent-decoded.
    pub query: &'a [(String, String)],
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its body.
    pub body: &'a [u8],
    /// The table's URL without the table (`http://host/account`), for OData links.
    pub base: &'a str,
    /// The time it is answered at.
    pub now: DateTime,
    /// The keys its credentials reach, when a table SAS bounds them: every entity it reads
    /// or writes is within them.
    pub within: Option<&'a KeyRange>,
    /// Its credentials, for what a batch's operations each need (`None`: the operator let
    /// anyone do anything).
    pub credential: Option<&'a Credential>,
}

/// An answer: its status, headers and JSON body (or none).
pub type Answer = Response<Bytes>;

/// A failure, answered as Azure's JSON error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    status: u16,
    code: &'static str,
    message: String,
}

impl Failure {
    pub(crate) fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status,
            code,
            message,
        }
    }

    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// This failure as the operation at `index` of a batch: its message starts `"{index}:"`,
    /// where the SDKs read which operation failed.
    pub(crate) fn at_index(mut self, index: usize) -> Self {
        self.message = format!("{index}:{}", self.message);
        self
    }

    /// Azure's JSON error body.
    pub(crate) fn json(&self) -> Json {
        json!({"odata.error": {
            "code": self.code,
            "message": {"lang": "en-US", "value": self.message},
        }})
    }

    fn answer(&self) -> Answer {
        let mut answer = json_answer(self.status, &self.json());
        answer
            .headers_mut()
            .insert(ERROR_CODE, HeaderValue::from_static(self.code));
        answer
    }
}

impl From<Refused> for Failure {
    fn from(refused: Refused) -> Self {
        Self::new(refused.status, refused.code, refused.code)
    }
}

impl From<odata::OdataError> for Failure {
    fn from(error: odata::OdataError) -> Self {
        Self::new(400, error.code, error.detail)
    }
}

/// Azure's JSON error with `code` and `message`: what a host answers for the front.
pub fn failure(status: u16, code: &'static str, message: &str) -> Answer {
    Failure::new(status, code, message).answer()
}

pub(crate) fn table_error(error: TableError) -> Failure {
    match error {
        TableError::TableNotFound(name) => {
            Failure::new(404, "TableNotFound", format!("table {name} not found"))
        }
        TableError::Conflict { .. } => Failure::new(409, "Conflict", "a write came first"),
        TableError::Generic { .. } => {
            Failure::new(503, "ServerBusy", "the storage did not answer; try again")
        }
    }
}

/// Refuses a key outside the range a table SAS reaches.
fn reach(asked: &Asked<'_>, (pk, rk): (&str, &str)) -> Result<(), Failure> {
    match asked.within {
        Some(range) if !range.contains(pk, rk) => Err(Failure::new(
            403,
            "AuthorizationFailure",
            "the shared access signature does not reach this entity's keys",
        )),
        _ => Ok(()),
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(400, "InvalidInput", message)
}

fn json_answer(status: u16, body: &Json) -> Answer {
    let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    let mut answer = Response::new(bytes);
    *answer.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let json = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8";
    (answer.headers_mut()).insert(header::CONTENT_TYPE, HeaderValue::from_static(json));
    answer
}

fn empty(status: StatusCode) -> Answer {
    let mut answer = Response::new(Bytes::new());
    *answer.status_mut() = status;
    answer
}

/// What a request's path names.
#[derive(Debug, PartialEq, Eq)]
enum Resource {
    /// `/Tables`.
    Tables,
    /// `/Tables('name')`.
    Table(String),
    /// `/name` or `/name()`.
    Entities(String),
    /// `/name(PartitionKey='p',RowKey='r')`.
    Entity(String, String, String),
    /// `/$batch`.
    Batch,
}

fn resource(path: &str) -> Result<Resource, Failure> {
    let path = path.strip_prefix('/').unwrap_or(path);
    let (name, keys) = match path.split_once('(') {
        Some((name, rest)) => {
            let keys = rest
                .strip_suffix(')')
                .ok_or_else(|| invalid("a ( is not closed"))?;
            (name, Some(keys))
        }
        None => (path, None),
    };
    match (name, keys) {
        ("$batch", None) => return Ok(Resource::Batch),
        ("Tables", None | Some("")) => return Ok(Resource::Tables),
        ("Tables", Some(quoted)) => return Ok(Resource::Table(literal(quoted)?)),
        _ => {}
    }
    check_table_name(name)?;
    let Some(keys) = keys.filter(|k| !k.is_empty()) else {
        return Ok(Resource::Entities(name.to_owned()));
    };
    let (pk, rk) = entity_key(keys)?;
    Ok(Resource::Entity(name.to_owned(), pk, rk))
}

/// The key `PartitionKey='p',RowKey='r'` names.
pub(crate) fn entity_key(keys: &str) -> Result<EntityKey, Failure> {
    let (pk, rk) = keys
        .split_once(",RowKey=")
        .ok_or_else(|| invalid("keys expected"))?;
    let pk = pk
        .strip_prefix("PartitionKey=")
        .ok_or_else(|| invalid("keys expected"))?;
    Ok((literal(pk)?, literal(rk)?))
}

/// An entity's JSON, at the metadata `accept` asks for.
pub(crate) fn entity_json(
    asked: &Asked<'_>,
    table: &str,
    entity: &Entity,
    accept: Option<&str>,
) -> Json {
    let url = format!("{}/{table}", asked.base);
    Json::Object(odata::encode(entity, Metadata::of(accept), &url))
}

/// The text of a quoted OData string literal (`''` for a quote).
fn literal(quoted: &str) -> Result<String, Failure> {
    let inner = (quoted.strip_prefix('\''))
        .and_then(|q| q.strip_suffix('\''))
        .ok_or_else(|| invalid("a quoted key expected"))?;
    Ok(inner.replace("''", "'"))
}

/// Azure's table names: 3 to 63 letters and digits, a letter first, not `tables`.
fn check_table_name(name: &str) -> Result<(), Failure> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let valid = first && chars.all(|c| c.is_ascii_alphanumeric());
    if !valid || !(3..=63).contains(&name.len()) || name.eq_ignore_ascii_case("tables") {
        return Err(Failure::new(
            400,
            "InvalidResourceName",
            format!("{name:?}"),
        ));
    }
    Ok(())
}

/// Answers `asked` over `tables`.
pub async fn answer(tables: &impl Tables, asked: &Asked<'_>) -> Answer {
    match route(tables, asked).await {
        Ok(answer) => answer,
        Err(failure) => failure.answer(),
    }
}

async fn route(tables: &impl Tables, asked: &Asked<'_>) -> Result<Answer, Failure> {
    let method = asked.method.as_str();
    match (method, resource(asked.path)?) {
        ("POST", Resource::Batch) => crate::batch::answer(tables, asked).await,
        ("POST", Resource::Tables) => create_table(tables, asked).await,
        ("GET", Resource::Tables) => query_tables(tables, asked).await,
        ("GET", Resource::Table(name)) => query_table(tables, asked, &name).await,
        ("DELETE", Resource::Table(name)) => {
            let deleted = tables.delete_table(&name).await.map_err(table_error)?;
            let gone = Failure::new(404, "ResourceNotFound", format!("table {name}"));
            if deleted {
                Ok(empty(StatusCode::NO_CONTENT))
            } else {
                Err(gone)
            }
        }
        ("POST", Resource::Entities(table)) => insert(tables, asked, &table).await,
        ("GET", Resource::Entities(table)) => query(tables, asked, &table, None).await,
        ("GET", Resource::Entity(table, pk, rk)) => {
            query(tables, asked, &table, Some((pk, rk))).await
        }
        ("PUT" | "MERGE" | "PATCH" | "DELETE", Resource::Entity(table, pk, rk)) => {
            let kind = match method {
                "PUT" => Kind::Replace,
                "DELETE" => Kind::Delete,
                _ => Kind::Merge,
            };
            write(tables, asked, &table, (pk, rk), kind).await
        }
        _ => Err(Failure::new(
            405,
            "MethodNotAllowed",
            format!("{method} here"),
        )),
    }
}

/// The answer to a write that could return what it wrote (an insert, Create Table): 201 with
/// it, made by `with_content`, or 204, as the client's `Prefer` asks (with
/// `Preference-Applied`) or, without one, with it.
fn as_preferred(asked: &Asked<'_>, with_content: impl FnOnce() -> Answer) -> Answer {
    let preference = Preference::of(asked.headers);
    let mut answer = if Preference::returns_content(preference, true) {
        with_content()
    } else {
        empty(StatusCode::NO_CONTENT)
    };
    if let Some(preference) = preference {
        (answer.headers_mut()).insert(PREFERENCE_APPLIED, preference.applied());
    }
    answer
}

fn metadata(asked: &Asked<'_>) -> Metadata {
    Metadata::of(
        asked
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    )
}

async fn create_table(tables: &impl Tables, asked: &Asked<'_>) -> Result<Answer, Failure> {
    let body: Json = serde_json::from_slice(asked.body).map_err(|e| invalid(e.to_string()))?;
    let name = body["TableName"]
        .as_str()
        .ok_or_else(|| invalid("TableName expected"))?;
    check_table_name(name)?;
    if !tables.create_table(name).await.map_err(table_error)? {
        return Err(Failure::new(
            409,
            "TableAlreadyExists",
            format!("table {name}"),
        ));
    }
    Ok(as_preferred(asked, || table_answer(asked, name, 201)))
}

/// One table as Create Table and Query Tables name it answer it.
fn table_answer(asked: &Asked<'_>, name: &str, status: u16) -> Answer {
    let mut out = Map::new();
    if metadata(asked) != Metadata::No {
        let link = format!("{}/$metadata#Tables/@Element", asked.base);
        out.insert("odata.metadata".into(), json!(link));
    }
    out.insert("TableName".into(), json!(name));
    json_answer(status, &Json::Object(out))
}

async fn query_tables(tables: &impl Tables, asked: &Asked<'_>) -> Result<Answer, Failure> {
    let top = top(asked)?;
    let after = parameter(asked, "NextTableName").map(untoken).transpose()?;
    let after = after.as_deref().unwrap_or_default();
    let filter = parameter(asked, "$filter").map(Filter::parse).transpose();
    let filter = filter.map_err(|e| invalid(e.to_string()))?;
    let mut names = tables.tables(after, top + 1).await.map_err(table_error)?;
    if let Some(filter) = &filter {
        let as_entity = |name: &String| {
            let named = [("TableName", Value::String(name.clone()))];
            filter.matches(&Entity::new("", "", asked.now, named))
        };
        names.retain(as_entity);
    }
    let more = names.len() > top;
    names.truncate(top);
    let value: Vec<Json> = names.iter().map(|n| json!({"TableName": n})).collect();
    let link = format!("{}/$metadata#Tables", asked.base);
    let mut answer = json_answer(200, &json!({"odata.metadata": link, "value": value}));
    if let (true, Some(last)) = (more, names.last()) {
        insert_header(
            answer.headers_mut(),
            "x-ms-continuation-NextTableName",
            &token(last),
        );
    }
    Ok(answer)
}

/// Query Tables naming one table: it, or 404 `ResourceNotFound`.
async fn query_table(
    tables: &impl Tables,
    asked: &Asked<'_>,
    name: &str,
) -> Result<Answer, Failure> {
    let one = Scan {
        from: None,
        partition: None,
        limit: 1,
    };
    match tables.scan(name, one).await {
        Ok(_) => {}
        Err(TableError::TableNotFound(_)) => {
            return Err(Failure::new(
                404,
                "ResourceNotFound",
                "The specified resource does not exist.",
            ));
        }
        Err(error) => return Err(table_error(error)),
    }
    Ok(table_answer(asked, name, 200))
}

fn parameter<'a>(asked: &'a Asked<'_>, name: &str) -> Option<&'a str> {
    (asked.query.iter())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn top(asked: &Asked<'_>) -> Result<usize, Failure> {
    match parameter(asked, "$top") {
        None => Ok(MAX_PAGE),
        Some(top) => match top.parse::<usize>() {
            Ok(n @ 1..=MAX_PAGE) => Ok(n),
            _ => Err(invalid(format!("$top is 1 to {MAX_PAGE}"))),
        },
    }
}

/// A continuation token: the key a page stopped at, opaque to the client (base64url), so any
/// key (spaces, quotes, non-ASCII) fits in a header and comes back whole.
fn token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

fn untoken(token: &str) -> Result<String, Failure> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token);
    let key = bytes.ok().and_then(|b| String::from_utf8(b).ok());
    key.ok_or_else(|| invalid("not a continuation token of this service"))
}

fn insert_header(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

async fn insert(tables: &impl Tables, asked: &Asked<'_>, table: &str) -> Result<Answer, Failure> {
    let decoded = odata::decode(asked.body)?;
    let pk = decoded.partition_key.clone();
    let rk = decoded.row_key.clone();
    let key = pk
        .zip(rk)
        .ok_or_else(|| invalid("PartitionKey and RowKey expected"))?;
    reach(asked, (&key.0, &key.1))?;
    let change = decide(Kind::Insert, None, &key, None, decoded, asked.now)?;
    let entity = change.write.clone().expect("an insert writes");
    check_size(&entity)?;
    match tables.commit(table, &[change]).await {
        Ok(()) => {}
        Err(TableError::Conflict { .. }) => {
            return Err(Failure::new(
                409,
                "EntityAlreadyExists",
                "the entity exists",
            ));
        }
        Err(error) => return Err(table_error(error)),
    }
    Ok(written(asked, table, &entity, true))
}

fn check_size(entity: &Entity) -> Result<(), Failure> {
    if entity.size() > odata::MAX_ENTITY {
        return Err(Failure::new(
            400,
            "EntityTooLarge",
            "the entity is over 1 MiB",
        ));
    }
    Ok(())
}

/// The answer to a write that left `entity`: 201 with it (an insert that returns content),
/// or 204; its ETag either way.
fn written(asked: &Asked<'_>, table: &str, entity: &Entity, created: bool) -> Answer {
    let with_content = || {
        let url = format!("{}/{table}", asked.base);
        json_answer(
            201,
            &Json::Object(odata::encode(entity, metadata(asked), &url)),
        )
    };
    let mut answer = if created {
        as_preferred(asked, with_content)
    } else {
        empty(StatusCode::NO_CONTENT)
    };
    insert_header(answer.headers_mut(), "etag", &entity.timestamp.etag());
    answer
}

async fn write(
    tables: &impl Tables,
    asked: &Asked<'_>,
    table: &str,
    key: (String, String),
    kind: Kind,
) -> Result<Answer, Failure> {
    odata::check_key("PartitionKey", &key.0)?;
    odata::check_key("RowKey", &key.1)?;
    reach(asked, (&key.0, &key.1))?;
    let if_match = asked
        .headers
        .get(header::IF_MATCH)
        .map(|v| v.to_str().unwrap_or_default());
    let condition = if_match.map(condition).transpose()?;
    let body = match kind {
        Kind::Delete => Decoded::default(),
        _ => odata::decode(asked.body)?,
    };
    let named = [(&body.partition_key, &key.0), (&body.row_key, &key.1)];
    if named
        .iter()
        .any(|(named, key)| named.as_ref().is_some_and(|n| n != *key))
    {
        return Err(invalid("the body names another entity than the URL"));
    }
    for _ in 0..ATTEMPTS {
        let current = tables.get(table, &key).await.map_err(table_error)?;
        let change = decide(
            kind,
            condition,
            &key,
            current.as_ref(),
            body.clone(),
            asked.now,
        )?;
        if let Some(entity) = &change.write {
            check_size(entity)?;
        }
        match tables.commit(table, std::slice::from_ref(&change)).await {
            Ok(()) => {
                return Ok(match &change.write {
                    Some(entity) => written(asked, table, entity, false),
                    None => empty(StatusCode::NO_CONTENT),
                });
            }
            // Another write came first: decide again against what it left.
            Err(TableError::Conflict { .. }) => continue,
            Err(error) => return Err(table_error(error)),
        }
    }
    Err(Failure::new(
        503,
        "ServerBusy",
        "the entity changed under every attempt",
    ))
}

async fn query(
    tables: &impl Tables,
    asked: &Asked<'_>,
    table: &str,
    one: Option<(String, String)>,
) -> Result<Answer, Failure> {
    let url = format!("{}/{table}", asked.base);
    let select = parameter(asked, "$select").map(|s| s.split(',').map(str::trim).collect());
    let level = metadata(asked);
    let project = |entity: Entity| -> Json {
        let mut json = odata::encode(&entity, level, &url);
        if let Some(selected) = &select {
            let selected: &Vec<&str> = selected;
            let kept = |name: &str| {
                let property = name.split('@').next().unwrap_or(name);
                name.starts_with("odata.") || selected.contains(&property)
            };
            json.retain(|name, _| kept(name));
        }
        Json::Object(json)
    };
    if let Some(key) = one {
        reach(asked, (&key.0, &key.1))?;
        let found = tables.get(table, &key).await.map_err(table_error)?;
        let entity = found.ok_or_else(|| {
            Failure::new(
                404,
                "ResourceNotFound",
                "The specified resource does not exist.",
            )
        })?;
        let etag = entity.timestamp.etag();
        let mut answer = json_answer(200, &project(entity));
        insert_header(answer.headers_mut(), "etag", &etag);
        return Ok(answer);
    }
    let top = top(asked)?;
    let filter = parameter(asked, "$filter").map(Filter::parse).transpose();
    let filter = filter.map_err(|e| invalid(e.to_string()))?;
    let next = parameter(asked, "NextPartitionKey").zip(parameter(asked, "NextRowKey"));
    let next = next.map(|(pk, rk)| Ok::<_, Failure>((untoken(pk)?, untoken(rk)?)));
    let next = next.transpose()?;
    let partition = filter.as_ref().and_then(Filter::partition);
    let mut found = Vec::new();
    // A table SAS's range starts the scan at its first key and ends it past its last.
    let first = asked.within.and_then(KeyRange::first);
    let first = first.map(|(pk, rk)| (pk.to_owned(), rk.to_owned()));
    let mut from = match (next, first) {
        (Some(next), Some(first)) => Some(next.max(first)),
        (next, first) => next.or(first),
    };
    let mut read = 0;
    let mut continuation = None;
    loop {
        let limit = (MAX_READ - read).min(MAX_PAGE) + 1;
        let scan = Scan {
            from: from.as_ref().map(|(pk, rk)| (pk.as_str(), rk.as_str())),
            partition,
            limit,
        };
        let page = tables.scan(table, scan).await.map_err(table_error)?;
        let mut exhausted = page.len() < limit;
        for entity in page {
            let (pk, rk) = (entity.partition_key.as_str(), entity.row_key.as_str());
            if asked.within.is_some_and(|r| r.ends_before(pk, rk)) {
                exhausted = true;
                break;
            }
            if found.len() == top || read == MAX_READ {
                continuation = Some((entity.partition_key.clone(), entity.row_key.clone()));
                break;
            }
            read += 1;
            from = Some((entity.partition_key.clone(), entity.row_key.clone() + "\0"));
            let reached = asked.within.is_none_or(|r| r.contains(pk, rk));
            if reached && filter.as_ref().is_none_or(|f| f.matches(&entity)) {
                found.push(entity);
            }
        }
        if continuation.is_some() || exhausted {
            break;
        }
    }
    let value: Vec<Json> = found.into_iter().map(project).collect();
    let link = format!("{}/$metadata#{table}", asked.base);
    let mut answer = json_answer(200, &json!({"odata.metadata": link, "value": value}));
    if let Some((pk, rk)) = continuation {
        let headers = answer.headers_mut();
        insert_header(headers, "x-ms-continuation-NextPartitionKey", &token(&pk));
        insert_header(headers, "x-ms-continuation-NextRowKey", &token(&rk));
    }
    Ok(answer)
}
