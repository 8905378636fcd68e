//! Insert, Update, Merge and Delete Entity and their `Insert Or` forms: every write a
//! compare-and-swap, decided again when another write came first.

use http::{StatusCode, header};
use serde_json::Value as Json;

use super::answers::{as_preferred, empty, insert_header, json_answer, metadata};
use super::asked::{Answer, Asked};
use super::failure::{Failure, invalid, reach, table_error};
use crate::error_code::ErrorCode;
use crate::odata::{self, Decoded, Metadata};
use crate::store::{TableError, Tables};
use crate::value::Entity;
use crate::write::{Kind, condition, decide};
use ifmatch_azure::swap::Attempts;

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

pub(crate) async fn insert(
    tables: &impl Tables,
    asked: &Asked<'_>,
    table: &str,
) -> Result<Answer, Failure> {
    let decoded = odata::decode(asked.body)?;
    let pk = decoded.partition_key.clone();
    let rk = decoded.row_key.clone();
    let key = pk
        .zip(rk)
        .ok_or_else(|| invalid("PartitionKey and RowKey expected"))?;
    reach(asked, (&key.0, &key.1))?;
    let change = decide(
        Kind::Insert,
        crate::write::Condition::Absent,
        &key,
        None,
        decoded,
        asked.now,
    )?;
    let entity = change.write.clone().expect("an insert writes");
    check_size(&entity)?;
    match tables.commit(table, &[change]).await {
        Ok(()) => {}
        Err(TableError::Conflict { .. }) => {
            return Err(Failure::new(
                ErrorCode::EntityAlreadyExists,
                "the entity exists",
            ));
        }
        Err(error) => return Err(table_error(error)),
    }
    Ok(written(asked, table, &entity, true))
}

pub(crate) fn check_size(entity: &Entity) -> Result<(), Failure> {
    if entity.size() > odata::MAX_ENTITY {
        return Err(Failure::new(
            ErrorCode::EntityTooLarge,
            "the entity is over 1 MiB",
        ));
    }
    Ok(())
}

/// The answer to a write that left `entity`: 201 with it (an insert that returns content),
/// or 204; its ETag either way.
pub(crate) fn written(asked: &Asked<'_>, table: &str, entity: &Entity, created: bool) -> Answer {
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

pub(crate) async fn write(
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
    let condition = condition(if_match)?;
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
    let mut attempts = Attempts::default();
    while attempts.another() {
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
        ErrorCode::ServerBusy,
        "the entity changed under every attempt",
    ))
}
