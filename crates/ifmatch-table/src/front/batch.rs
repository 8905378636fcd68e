//! Entity group transactions (`POST /$batch`): one `multipart/mixed` changeset of up to 100
//! inserts, updates, merges and deletes (and their `Insert Or` forms) on one partition of one
//! table, each entity at most once, the body at most 4 MiB, applied all or none as one
//! [`Tables::commit`]. Each operation is decided as it would be alone ([`decide`]) against the
//! entities as they are, the whole decided again when another write comes between. A refusal
//! answers the failing operation's status and code, its message starting with its index
//! (`"2:..."`) as the SDKs read it; nothing is applied.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use serde_json::Value as Json;

use crate::auth::{self, Credential, Operation};
use crate::error_code::ErrorCode;
use crate::front::asked::Asked;
use crate::front::entities::entity_json;
use crate::front::failure::{Failure, table_error};
use crate::front::path::entity_key;
use crate::odata::{self, Decoded};
use crate::prefer::Preference;
use crate::store::{Change, EntityKey, TableError, Tables};
use crate::write::{Kind, condition, decide};
use ifmatch_azure::swap::Attempts;

/// The most operations a changeset holds (Azure's limit).
pub const MAX_OPERATIONS: usize = 100;

/// The largest body of a batch, as Azure counts it.
pub const MAX_BATCH: usize = 4 << 20;

/// One operation of the changeset, as sent.
#[derive(Debug)]
struct Sent<'a> {
    method: Method,
    /// Its path below the account, percent-decoded.
    path: String,
    headers: HeaderMap,
    body: &'a [u8],
}

/// One operation, read: what it does to which entity.
#[derive(Debug)]
struct Planned {
    table: String,
    key: EntityKey,
    kind: Kind,
    condition: crate::write::Condition,
    body: Decoded,
    /// Whether its answer carries the entity (an insert without `return-no-content`).
    content: bool,
    /// The `Prefer` of an insert, which its answer says it applied.
    preference: Option<Preference>,
    /// The `Accept` it named, for that entity's JSON.
    accept: Option<String>,
}

/// A batch refused at one operation: its index, and why.
fn at(index: usize, failure: Failure) -> (Option<usize>, Failure) {
    (Some(index), failure)
}

/// Answers a `$batch` request.
pub(crate) async fn run(
    tables: &impl Tables,
    asked: &Asked<'_>,
) -> Result<Response<Bytes>, Failure> {
    if asked.body.len() > MAX_BATCH {
        return Err(Failure::new(
            ErrorCode::RequestBodyTooLarge,
            "a batch's body is at most 4 MiB",
        ));
    }
    let content_type = (asked.headers.get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let outer = boundary(content_type).ok_or_else(|| invalid("a multipart/mixed body expected"))?;
    let body = std::str::from_utf8(asked.body).map_err(|_| invalid("the body is not UTF-8"))?;
    let sent = changeset(body, &outer, asked.base)?;
    let outcome = match plan(&sent, asked.credential) {
        Ok(planned) => commit(tables, asked, &planned).await,
        Err(refused) => Err(refused),
    };
    Ok(respond(&outer, outcome))
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(ErrorCode::InvalidInput, message)
}

/// The boundary a `multipart/mixed` content type names.
fn boundary(content_type: &str) -> Option<String> {
    let mut fields = content_type.split(';').map(str::trim);
    if !fields.next()?.eq_ignore_ascii_case("multipart/mixed") {
        return None;
    }
    let value = fields.find_map(|f| {
        let (name, value) = f.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("boundary")
            .then_some(value.trim())
    })?;
    let value = value.trim_matches('"');
    (!value.is_empty() && value.len() <= 70).then(|| value.to_owned())
}

/// The parts of a multipart body between its `--boundary` lines (the preamble and the
/// epilogue dropped); the last must be closed with `--boundary--`.
fn parts<'a>(body: &'a str, boundary: &str) -> Result<Vec<&'a str>, Failure> {
    let delimiter = format!("--{boundary}");
    let mut found = Vec::new();
    let mut rest = match body.find(&delimiter) {
        Some(at) => &body[at + delimiter.len()..],
        None => return Err(invalid("the body has no part")),
    };
    loop {
        if rest.starts_with("--") {
            return Ok(found);
        }
        let rest_line = rest
            .split_once('\n')
            .map(|(_, r)| r)
            .ok_or_else(|| invalid("a part is cut"))?;
        let end = rest_line
            .find(&delimiter)
            .ok_or_else(|| invalid("the body's last part is not closed"))?;
        let part = &rest_line[..end];
        let part = part.strip_suffix('\n').unwrap_or(part);
        let part = part.strip_suffix('\r').unwrap_or(part);
        found.push(part);
        rest = &rest_line[end + delimiter.len()..];
    }
}

/// A part's header lines and what follows the blank line after them.
fn head(part: &str) -> (Vec<(&str, &str)>, &str) {
    let mut headers = Vec::new();
    let mut rest = part;
    loop {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        let line = line.strip_suffix('\r').unwrap_or(line);
        rest = after;
        if line.is_empty() {
            return (headers, rest);
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim(), value.trim()));
        }
        if after.is_empty() {
            return (headers, "");
        }
    }
}

fn header_of<'a>(headers: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    (headers.iter())
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// The changeset's operations: the batch holds one changeset, which holds HTTP requests.
fn changeset<'a>(body: &'a str, outer: &str, base: &str) -> Result<Vec<Sent<'a>>, Failure> {
    let batch = parts(body, outer)?;
    let [only] = batch.as_slice() else {
        return Err(invalid("a batch holds one changeset"));
    };
    let (headers, content) = head(only);
    let inner = header_of(&headers, "content-type")
        .and_then(boundary)
        .ok_or_else(|| invalid("a batch holds one changeset (multipart/mixed)"))?;
    let operations = parts(content, &inner)?;
    if operations.is_empty() {
        return Err(invalid("the changeset is empty"));
    }
    if operations.len() > MAX_OPERATIONS {
        return Err(invalid(format!(
            "a changeset holds at most {MAX_OPERATIONS} operations"
        )));
    }
    let base_path = base
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    let mut sent = Vec::with_capacity(operations.len());
    for (index, operation) in operations.into_iter().enumerate() {
        let (part_headers, request) = head(operation);
        let kind = header_of(&part_headers, "content-type").unwrap_or("");
        if kind.to_ascii_lowercase().starts_with("multipart/") {
            return Err(invalid(format!("{index}:a changeset cannot hold another")));
        }
        let (line, rest) = request.split_once('\n').unwrap_or((request, ""));
        let mut words = line.trim().split(' ');
        let (Some(method), Some(url)) = (words.next(), words.next()) else {
            return Err(invalid(format!("{index}:not an HTTP request")));
        };
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| invalid(format!("{index}:not an HTTP method")))?;
        let path = url.split_once("://").map_or(url, |(_, rest)| {
            rest.find('/').map_or("/", |at| &rest[at..])
        });
        let path = path.split('?').next().unwrap_or(path);
        let path = path
            .strip_prefix(base_path)
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path);
        let path = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .map_err(|_| invalid(format!("{index}:the URL is not UTF-8")))?
            .into_owned();
        let (request_headers, body) = head(rest);
        let mut headers = HeaderMap::new();
        for (name, value) in request_headers {
            let name = HeaderName::from_bytes(name.as_bytes());
            let value = HeaderValue::from_str(value);
            if let (Ok(name), Ok(value)) = (name, value) {
                headers.append(name, value);
            }
        }
        sent.push(Sent {
            method,
            path,
            headers,
            body: body.as_bytes(),
        });
    }
    Ok(sent)
}

/// Reads every operation: one table, one partition, each entity once, each allowed.
fn plan(
    sent: &[Sent<'_>],
    credential: Option<&Credential>,
) -> Result<Vec<Planned>, (Option<usize>, Failure)> {
    let mut planned: Vec<Planned> = Vec::with_capacity(sent.len());
    for (index, op) in sent.iter().enumerate() {
        let one = plan_one(op, credential).map_err(|f| at(index, f))?;
        if let Some(first) = planned.first() {
            if one.table != first.table {
                let other = Failure::new(ErrorCode::InvalidInput, "a batch acts on one table");
                return Err(at(index, other));
            }
            if one.key.0 != first.key.0 {
                return Err(at(
                    index,
                    Failure::new(
                        ErrorCode::CommandsInBatchActOnDifferentPartitions,
                        "a batch acts on one partition",
                    ),
                ));
            }
        }
        if planned.iter().any(|p| p.key == one.key) {
            return Err(at(
                index,
                Failure::new(
                    ErrorCode::InvalidDuplicateRow,
                    "a batch names each entity once",
                ),
            ));
        }
        planned.push(one);
    }
    Ok(planned)
}

fn plan_one(op: &Sent<'_>, credential: Option<&Credential>) -> Result<Planned, Failure> {
    let within = match credential {
        Some(credential) => {
            let operation = Operation::of(&op.method, &op.path, &op.headers);
            auth::authorize(credential, operation).map_err(|d| Failure::shared(d.code, d.detail))?
        }
        None => None,
    };
    let path = op.path.strip_prefix('/').unwrap_or(&op.path);
    let (table, keys) = match path.split_once('(') {
        Some((table, rest)) => (table, rest.strip_suffix(')')),
        None => (path, Some("")),
    };
    let keys = keys.ok_or_else(|| invalid("a ( is not closed"))?;
    let if_match = (op.headers.get(header::IF_MATCH)).map(|v| v.to_str().unwrap_or_default());
    let condition = condition(if_match)?;
    let (kind, key) = match (op.method.as_str(), keys.is_empty()) {
        ("POST", true) => (Kind::Insert, None),
        ("PUT", false) => (Kind::Replace, Some(keys)),
        ("MERGE" | "PATCH", false) => (Kind::Merge, Some(keys)),
        ("DELETE", false) => (Kind::Delete, Some(keys)),
        (method, _) => {
            return Err(Failure::new(
                ErrorCode::InvalidInput,
                format!("{method} is not an operation a changeset holds"),
            ));
        }
    };
    let body = match kind {
        Kind::Delete => Decoded::default(),
        _ => odata::decode(op.body)?,
    };
    let key = match key {
        Some(keys) => entity_key(keys)?,
        None => (body.partition_key.clone())
            .zip(body.row_key.clone())
            .ok_or_else(|| invalid("PartitionKey and RowKey expected"))?,
    };
    odata::check_key("PartitionKey", &key.0)?;
    odata::check_key("RowKey", &key.1)?;
    let named = [(&body.partition_key, &key.0), (&body.row_key, &key.1)];
    if named
        .iter()
        .any(|(n, k)| n.as_ref().is_some_and(|n| n != *k))
    {
        return Err(invalid("the body names another entity than the URL"));
    }
    if within.is_some_and(|range| !range.contains(&key.0, &key.1)) {
        return Err(Failure::new(
            ErrorCode::AuthorizationFailure,
            "the shared access signature does not reach this entity's keys",
        ));
    }
    let preference = (kind == Kind::Insert)
        .then(|| Preference::of(&op.headers))
        .flatten();
    Ok(Planned {
        table: table.to_owned(),
        key,
        kind,
        condition,
        body,
        content: kind == Kind::Insert && Preference::returns_content(preference, true),
        preference,
        accept: (op.headers.get(header::ACCEPT))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    })
}

/// What each operation answers when the batch applies.
struct Done {
    status: StatusCode,
    etag: Option<String>,
    body: Option<Json>,
    preference: Option<Preference>,
}

/// Decides every operation against the entities as they are and commits them as one; again
/// when another write came between.
async fn commit(
    tables: &impl Tables,
    asked: &Asked<'_>,
    planned: &[Planned],
) -> Result<Vec<Done>, (Option<usize>, Failure)> {
    let table = &planned[0].table;
    let mut attempts = Attempts::default();
    while attempts.another() {
        let mut changes = Vec::with_capacity(planned.len());
        for (index, op) in planned.iter().enumerate() {
            let current = tables.get(table, &op.key).await;
            let current = current.map_err(|e| (None, table_error(e)))?;
            let change = decide(
                op.kind,
                op.condition,
                &op.key,
                current.as_ref(),
                op.body.clone(),
                asked.now,
            )
            .map_err(|refused| at(index, refused.into()))?;
            if let Some(entity) = &change.write
                && entity.size() > odata::MAX_ENTITY
            {
                let large = Failure::new(ErrorCode::EntityTooLarge, "the entity is over 1 MiB");
                return Err(at(index, large));
            }
            changes.push(change);
        }
        match tables.commit(table, &changes).await {
            Ok(()) => return Ok(done(asked, planned, &changes)),
            Err(TableError::Conflict { .. }) => continue,
            Err(error) => return Err((None, table_error(error))),
        }
    }
    Err((
        None,
        Failure::new(
            ErrorCode::ServerBusy,
            "the entities changed under every attempt",
        ),
    ))
}

fn done(asked: &Asked<'_>, planned: &[Planned], changes: &[Change]) -> Vec<Done> {
    (planned.iter().zip(changes))
        .map(|(op, change)| {
            let etag = change.write.as_ref().map(|e| e.timestamp.etag());
            match (&change.write, op.content) {
                (Some(entity), true) => Done {
                    status: StatusCode::CREATED,
                    etag,
                    body: Some(entity_json(asked, &op.table, entity, op.accept.as_deref())),
                    preference: op.preference,
                },
                _ => Done {
                    status: StatusCode::NO_CONTENT,
                    etag,
                    body: None,
                    preference: op.preference,
                },
            }
        })
        .collect()
}

/// The batch's answer: 202 with one changeset response, every operation's answer in order, or
/// the one that failed.
fn respond(outer: &str, outcome: Result<Vec<Done>, (Option<usize>, Failure)>) -> Response<Bytes> {
    let batch = format!("batchresponse_{outer}");
    let changeset = format!("changesetresponse_{outer}");
    let mut text =
        format!("--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n");
    let mut part = |status: StatusCode, headers: &[(&str, String)], body: Option<String>| {
        text.push_str(&format!(
            "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        ));
        let reason = status.canonical_reason().unwrap_or("");
        text.push_str(&format!("HTTP/1.1 {} {reason}\r\n", status.as_u16()));
        text.push_str("X-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n");
        text.push_str("DataServiceVersion: 3.0;\r\n");
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        match body {
            Some(body) => {
                let json = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8";
                text.push_str(&format!("Content-Type: {json}\r\n\r\n{body}\r\n"));
            }
            None => text.push_str("\r\n"),
        }
    };
    match outcome {
        Ok(done) => {
            for op in done {
                let applied = (op.preference).map(|p| {
                    let value = p.applied().to_str().unwrap_or_default().to_owned();
                    ("Preference-Applied", value)
                });
                let etag = op.etag.map(|e| ("ETag", e));
                let headers: Vec<(&str, String)> = etag.into_iter().chain(applied).collect();
                part(op.status, &headers, op.body.map(|b| b.to_string()));
            }
        }
        Err((index, failure)) => {
            let failure = match index {
                Some(index) => failure.at_index(index),
                None => failure,
            };
            let status = StatusCode::from_u16(failure.status()).unwrap_or(StatusCode::BAD_REQUEST);
            part(status, &[], Some(failure.json().to_string()));
        }
    }
    text.push_str(&format!("--{changeset}--\r\n--{batch}--\r\n"));
    let mut answer = Response::new(Bytes::from(text));
    *answer.status_mut() = StatusCode::ACCEPTED;
    let kind = format!("multipart/mixed; boundary={batch}");
    if let Ok(kind) = HeaderValue::from_str(&kind) {
        answer.headers_mut().insert(header::CONTENT_TYPE, kind);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_and_parts() {
        assert_eq!(
            boundary("multipart/mixed; boundary=batch_1").as_deref(),
            Some("batch_1")
        );
        assert_eq!(
            boundary("Multipart/Mixed;boundary=\"b c\"").as_deref(),
            Some("b c")
        );
        assert_eq!(boundary("application/json"), None);
        let body = "preamble\r\n--b\r\nA: 1\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b--\r\n";
        assert_eq!(parts(body, "b").unwrap(), ["A: 1\r\n\r\none", "\r\ntwo"]);
        assert!(parts("--b\r\nnever closed", "b").is_err());
        let (headers, rest) = head("A: 1\r\nB:2\r\n\r\nbody\r\nmore");
        assert_eq!(headers, [("A", "1"), ("B", "2")]);
        assert_eq!(rest, "body\r\nmore");
    }
}
