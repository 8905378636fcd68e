//! Query Tables and Query Entities: pages of at most [`MAX_PAGE`], `$filter`, `$select`,
//! `$top`, and continuation tokens.

use base64::Engine;
use serde_json::{Value as Json, json};

use super::answers::{insert_header, json_answer, metadata};
use super::asked::{Answer, Asked};
use super::failure::{Failure, invalid, reach, table_error};
use crate::auth::KeyRange;
use crate::error_code::ErrorCode;
use crate::filter::Filter;
use crate::odata;
use crate::store::{Scan, Tables};
use crate::value::{Entity, Value};

/// The most entities one page of Query Entities returns (Azure's limit).
pub const MAX_PAGE: usize = 1000;

/// How many entities one page reads at the most while it looks for matches: a filter over a
/// whole table answers a page of what it read and a continuation, never reads the table.
pub(crate) const MAX_READ: usize = 10 * MAX_PAGE;

pub(crate) async fn query_tables(
    tables: &impl Tables,
    asked: &Asked<'_>,
) -> Result<Answer, Failure> {
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

pub(crate) fn parameter<'a>(asked: &'a Asked<'_>, name: &str) -> Option<&'a str> {
    (asked.query.iter())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

pub(crate) fn top(asked: &Asked<'_>) -> Result<usize, Failure> {
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
pub(crate) fn token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

pub(crate) fn untoken(token: &str) -> Result<String, Failure> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token);
    let key = bytes.ok().and_then(|b| String::from_utf8(b).ok());
    key.ok_or_else(|| invalid("not a continuation token of this service"))
}

pub(crate) async fn query(
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
                ErrorCode::ResourceNotFound,
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
