//! What a request's path names: the tables, a table, its entities, one entity, or a batch.

use super::failure::{Failure, invalid};
use crate::error_code::ErrorCode;
use crate::store::EntityKey;

/// What a request's path names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resource {
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

pub(crate) fn resource(path: &str) -> Result<Resource, Failure> {
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

/// The text of a quoted OData string literal (`''` for a quote).
pub(crate) fn literal(quoted: &str) -> Result<String, Failure> {
    let inner = (quoted.strip_prefix('\''))
        .and_then(|q| q.strip_suffix('\''))
        .ok_or_else(|| invalid("a quoted key expected"))?;
    Ok(inner.replace("''", "'"))
}

/// Azure's table names: 3 to 63 letters and digits, a letter first, not `tables`.
pub(crate) fn check_table_name(name: &str) -> Result<(), Failure> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let valid = first && chars.all(|c| c.is_ascii_alphanumeric());
    if !valid || !(3..=63).contains(&name.len()) || name.eq_ignore_ascii_case("tables") {
        return Err(Failure::new(
            ErrorCode::InvalidResourceName,
            format!("{name:?}"),
        ));
    }
    Ok(())
}
