//! The Table service's requests answered over any [`Tables`] backend: Create, Delete and
//! Query Tables; Insert, Get, Update, Merge and Delete Entity and their `Insert Or` forms;
//! Query Entities with `$filter`, `$select`, `$top` and continuation. A request reaches it
//! with its path below the account (`/Tables`, `/people(PartitionKey='p',RowKey='r')`), its
//! credentials already checked by the server that hosts it; answers are OData JSON and
//! Azure's JSON errors.
//!
//! Every write is a compare-and-swap: read the entity, [`decide`] against it, commit the
//! change expecting what was read, and decide again if another write came first.

mod answers;
pub(crate) mod asked;
pub mod batch;
pub(crate) mod entities;
pub(crate) mod failure;
pub(crate) mod path;
mod query;
mod tables;

use http::StatusCode;

use self::answers::empty;
pub use self::asked::{Answer, Asked};
use self::entities::{insert, write};
use self::failure::{Failure, table_error};
pub use self::failure::{denial, failure};
use self::path::{Resource, resource};
pub use self::query::MAX_PAGE;
use self::query::{query, query_tables};
use self::tables::{create_table, query_table};
use crate::error_code::ErrorCode;
use crate::store::Tables;
use crate::write::Kind;

/// Answers `asked` over `tables`.
pub async fn handle(tables: &impl Tables, asked: &Asked<'_>) -> Answer {
    match route(tables, asked).await {
        Ok(answer) => answer,
        Err(failure) => failure.answer(),
    }
}

async fn route(tables: &impl Tables, asked: &Asked<'_>) -> Result<Answer, Failure> {
    let method = asked.method.as_str();
    match (method, resource(asked.path)?) {
        ("POST", Resource::Batch) => batch::run(tables, asked).await,
        ("POST", Resource::Tables) => create_table(tables, asked).await,
        ("GET", Resource::Tables) => query_tables(tables, asked).await,
        ("GET", Resource::Table(name)) => query_table(tables, asked, &name).await,
        ("DELETE", Resource::Table(name)) => {
            let deleted = tables.delete_table(&name).await.map_err(table_error)?;
            let gone = Failure::new(ErrorCode::ResourceNotFound, format!("table {name}"));
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
            ErrorCode::MethodNotAllowed,
            format!("{method} here"),
        )),
    }
}
