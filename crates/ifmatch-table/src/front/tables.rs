//! Create Table, Delete Table and Get Table.

use serde_json::{Map, Value as Json, json};

use super::answers::{as_preferred, json_answer, metadata};
use super::asked::{Answer, Asked};
use super::failure::{Failure, invalid, table_error};
use super::path::check_table_name;
use crate::error_code::ErrorCode;
use crate::odata::Metadata;
use crate::store::{Scan, TableError, Tables};

pub(crate) async fn create_table(
    tables: &impl Tables,
    asked: &Asked<'_>,
) -> Result<Answer, Failure> {
    let body: Json = serde_json::from_slice(asked.body).map_err(|e| invalid(e.to_string()))?;
    let name = body["TableName"]
        .as_str()
        .ok_or_else(|| invalid("TableName expected"))?;
    check_table_name(name)?;
    if !tables.create_table(name).await.map_err(table_error)? {
        return Err(Failure::new(
            ErrorCode::TableAlreadyExists,
            format!("table {name}"),
        ));
    }
    Ok(as_preferred(asked, || table_answer(asked, name, 201)))
}

/// One table as Create Table and Query Tables name it answer it.
pub(crate) fn table_answer(asked: &Asked<'_>, name: &str, status: u16) -> Answer {
    let mut out = Map::new();
    if metadata(asked) != Metadata::No {
        let link = format!("{}/$metadata#Tables/@Element", asked.base);
        out.insert("odata.metadata".into(), json!(link));
    }
    out.insert("TableName".into(), json!(name));
    json_answer(status, &Json::Object(out))
}

/// Query Tables naming one table: it, or 404 `ResourceNotFound`.
pub(crate) async fn query_table(
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
                ErrorCode::ResourceNotFound,
                "The specified resource does not exist.",
            ));
        }
        Err(error) => return Err(table_error(error)),
    }
    Ok(table_answer(asked, name, 200))
}
