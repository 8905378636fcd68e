//! Queries and their pages: the SQL run over a container or one partition (`crate::query`), the
//! plan the SDKs ask for first, page sizes and continuation tokens.

use http::StatusCode;
use ifmatch_table::Tables;
use serde_json::{Value as Json, json};

use super::answers::{Answered, Done};
use super::documents::document_json;
use super::{Asked, Front, Rules, Scope, documents_table, rid};
use crate::address::Scripts;
use crate::computed::Computed;
use crate::document::json_of;
use crate::failure::{Failure, bad_request};
use crate::script::udf::Functions;
use crate::ttl;

impl<T: Tables> Front<'_, T> {
    pub(super) async fn query(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        let container = self.container(db, coll).await?;
        let mut body: Json = serde_json::from_slice(asked.body).map_err(|_| {
            bad_request("A query's body is JSON: {\"query\": ..., \"parameters\": [...]}.")
        })?;
        // The parameters are taken out of the body, not copied: they may be most of it.
        let parameters = match body.get_mut("parameters").map(Json::take) {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(list)) => list,
            Some(_) => {
                return Err(bad_request(
                    "A query's parameters are a list of {name, value}.",
                ));
            }
        };
        let text = body.get("query").and_then(Json::as_str).ok_or_else(|| {
            bad_request("A query's body names its text: {\"query\": \"SELECT ...\"}.")
        })?;
        let mut query = crate::sql::Query::parse(text, parameters)
            .map_err(|error| bad_request(format!("Query: {}", error.message)))?;
        let properties = json_of(&container);
        let embeddings = crate::sql::embeddings(&properties).unwrap_or_default();
        query.with_embeddings(&embeddings);
        if asked.is_true("x-ms-cosmos-is-query-plan-request") {
            return Ok(plan(text));
        }
        // A query is charged to run even when it reads nothing.
        self.meter.examined(0);
        // Checked when the container was made or replaced.
        let computed = Computed::declared(&properties).unwrap_or_default();
        let rules = Rules::declared(&properties);
        let scope = self.scope(&rules.paths, asked)?;
        let size = asked.page_size()?;
        let table = documents_table(db, coll);
        let (default, now) = (rules.policies.ttl, ttl::ticks(self.now));
        let functions = self.functions(db, coll, &mut query).await?;
        // The plan says "send it as it is", and an SDK that sends a query to each range
        // puts their answers one after another: the range of the lowest keys answers the
        // whole query, the others nothing, so that counts, order and pages come out whole.
        let range = self.range_named(db, coll, asked).await?;
        if range.is_some_and(|range| !range.min.is_empty()) {
            return Ok(Done::feed(&rid(&[db, coll]), "Documents", Vec::new(), None));
        }
        let reading = crate::query::Reading {
            functions: functions.as_ref(),
            tables: self.tables,
            table: &table,
            partition: match &scope {
                Some(Scope::Key(stored)) => Some(stored),
                _ => None,
            },
            prefix: match &scope {
                Some(Scope::Prefix(start)) => Some(start),
                _ => None,
            },
        };
        let page = crate::query::page(
            reading,
            &query,
            size,
            asked.header("x-ms-continuation"),
            self.now,
            |entity| {
                self.meter.examined(1);
                let doc = document_json(db, coll, entity);
                let live = !ttl::past(default, entity.timestamp, doc.get("ttl"), now);
                live.then(|| match computed.is_empty() {
                    true => doc,
                    false => computed.with(doc),
                })
            },
        )
        .await?;
        let mut page = page;
        if !computed.is_empty() && Computed::wildcard(&query) {
            page.results.iter_mut().for_each(|r| computed.leave_out(r));
        }
        let mut done = Done::feed(&rid(&[db, coll]), "Documents", page.results, None);
        done.continuation = page.continuation;
        Ok(done)
    }
}

impl<T: Tables> Front<'_, T> {
    /// The user-defined functions `query` calls, read from the container; 400 for one it
    /// does not have.
    async fn functions(
        &self,
        db: &str,
        coll: &str,
        query: &mut crate::sql::Query,
    ) -> Result<Option<Functions>, Failure> {
        let names = (query.functions())
            .map_err(|error| bad_request(format!("Query: {}", error.message)))?;
        if names.is_empty() {
            return Ok(None);
        }
        let mut sources = Vec::new();
        for name in names {
            let found = self
                .stored_script(db, coll, Scripts::Functions, &name)
                .await;
            let function = found.map_err(|_| {
                bad_request(format!(
                    "Query: the user-defined function udf.{name} is not one of the container's."
                ))
            })?;
            let body = json_of(&function)
                .get("body")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned();
            sources.push((name, body));
        }
        Ok(Some(Functions::new(sources)))
    }
}

/// The plan an SDK asks for before a query across partitions: this server runs every query
/// whole, over every range, so the plan is "send it as it is" (no ordering, aggregation or
/// paging for the SDK to do; an SDK that sends it to each range gets each range's part).
pub(super) fn plan(text: &str) -> Done {
    let body = json!({
        "partitionedQueryExecutionInfoVersion": 2,
        "queryInfo": {
            "distinctType": "None", "top": null, "offset": null, "limit": null,
            "orderBy": [], "orderByExpressions": [], "groupByExpressions": [],
            "groupByAliases": [], "aggregates": [], "groupByAliasToAggregateType": {},
            "rewrittenQuery": text, "hasSelectValue": false, "dCountInfo": null,
            "hasNonStreamingOrderBy": false,
        },
        "queryRanges": [{ "min": "", "max": "FF", "isMinInclusive": true, "isMaxInclusive": false }],
    });
    Done::of(StatusCode::OK, body, None)
}
