//! Computed properties (a container's `computedProperties`): top-level properties whose values
//! a query derives from each item, never stored, that queries read as if they were (in
//! `SELECT`, `WHERE`, `ORDER BY`); a wildcard projection (`SELECT *`) leaves them out. Checked as
//! Azure checks them when a container is made or replaced: at most [`MAX_COMPUTED`], each
//! named once, no system property's name, and a query of the one form Azure takes
//! (`SELECT VALUE expr FROM c`: no `WHERE`, `JOIN`, `GROUP BY`, `ORDER BY`, `TOP`, `DISTINCT`,
//! `OFFSET LIMIT`, subquery, aggregate, spatial or non-deterministic function).

use serde_json::{Map, Value as Json};

use crate::sql::{Meter, Query, Select, Source};

/// The most computed properties a container has (Azure's limit).
pub const MAX_COMPUTED: usize = 20;

/// The names no computed property takes: the system properties.
const RESERVED: [&str; 6] = ["id", "_rid", "_ts", "_etag", "_self", "_attachments"];

/// A container's computed properties: each name and the query that derives it.
#[derive(Debug, Default)]
pub struct Computed(Vec<(String, Query)>);

impl Computed {
    /// The computed properties `container` declares, or why Azure would refuse them.
    pub fn declared(container: &Map<String, Json>) -> Result<Self, String> {
        let declared = match container.get("computedProperties") {
            None | Some(Json::Null) => return Ok(Self::default()),
            Some(Json::Array(declared)) => declared,
            Some(_) => return Err("computedProperties is a list of {name, query}.".into()),
        };
        if declared.len() > MAX_COMPUTED {
            return Err(format!(
                "A container has at most {MAX_COMPUTED} computed properties: {} are given.",
                declared.len()
            ));
        }
        let mut computed = Vec::with_capacity(declared.len());
        for property in declared {
            let (Some(name), Some(text)) = (property["name"].as_str(), property["query"].as_str())
            else {
                return Err("A computed property is {\"name\": ..., \"query\": ...}.".into());
            };
            if name.is_empty() || name.contains(['/', '.', '[', ']']) {
                return Err(format!(
                    "The computed property name {name:?} is not a top-level property name."
                ));
            }
            if RESERVED.contains(&name) {
                return Err(format!(
                    "The computed property name {name:?} is a system property's."
                ));
            }
            if computed.iter().any(|(known, _)| known == name) {
                return Err(format!(
                    "The computed property name {name:?} is given twice."
                ));
            }
            let query = computable(text)
                .map_err(|why| format!("The query of computed property {name:?}: {why}"))?;
            computed.push((name.to_owned(), query));
        }
        Ok(Self(computed))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `document` as queries read it: each computed property's value in place of a stored
    /// property of its name (none when its query's value is undefined), each computed from
    /// the item as stored.
    pub fn with(&self, document: Json) -> Json {
        let Json::Object(stored) = document else {
            return document;
        };
        let item = Json::Object(stored);
        let values: Vec<(String, Option<Json>)> = (self.0.iter())
            .map(|(name, query)| {
                let meter = Meter::per_document();
                (
                    name.clone(),
                    query.results(&item, &meter).into_iter().next(),
                )
            })
            .collect();
        let Json::Object(mut read) = item else {
            unreachable!("an object")
        };
        for (name, value) in values {
            match value {
                Some(value) => read.insert(name, value),
                None => read.remove(&name),
            };
        }
        Json::Object(read)
    }

    /// A wildcard projection's `result`, without the computed properties.
    pub fn leave_out(&self, result: &mut Json) {
        if let Json::Object(properties) = result {
            for (name, _) in &self.0 {
                properties.remove(name);
            }
        }
    }

    /// Whether `query`'s results are a wildcard projection's.
    pub fn wildcard(query: &Query) -> bool {
        matches!(query.select, Select::Star)
    }
}

/// `text` as a computed property's query, if it is of the form Azure takes.
fn computable(text: &str) -> Result<Query, String> {
    let mut query = Query::parse(text, Vec::new()).map_err(|e| e.message)?;
    let root = matches!(
        query.from.as_slice(),
        [Source::Bind(crate::sql::Expr::Root)]
    );
    if !root {
        return Err("its FROM names the item (FROM c), and nothing else, no JOIN.".into());
    }
    if !matches!(query.select, Select::Value(_)) {
        return Err("it selects a VALUE.".into());
    }
    let clauses = [
        (query.filter.is_some(), "WHERE"),
        (!query.group.is_empty(), "GROUP BY"),
        (!query.order.is_empty() || query.rank, "ORDER BY"),
        (query.top.is_some(), "TOP"),
        (query.distinct, "DISTINCT"),
        (query.offset_limit.is_some(), "OFFSET LIMIT"),
    ];
    if let Some((_, clause)) = clauses.iter().find(|(used, _)| *used) {
        return Err(format!("{clause} is not taken."));
    }
    let (calls, nested) = query.selection_calls();
    if nested {
        return Err("subqueries and aggregates are not taken.".into());
    }
    let refused = |name: &str| {
        name.starts_with("ST_")
            || [
                "GETCURRENTDATETIME",
                "GETCURRENTTIMESTAMP",
                "GETCURRENTTICKS",
                "RAND",
            ]
            .contains(&name)
            || name.starts_with("GETCURRENT")
    };
    if let Some(name) = calls.into_iter().find(|name| refused(name)) {
        return Err(format!(
            "{name} is not taken (spatial and non-deterministic functions are not)."
        ));
    }
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(properties: Json) -> Result<Computed, String> {
        let container = json!({ "id": "c", "computedProperties": properties });
        Computed::declared(container.as_object().unwrap())
    }

    #[test]
    fn a_computed_property_is_read_in_place_of_a_stored_one_and_left_out_of_a_wildcard() {
        let computed = declared(json!([
            { "name": "cp_lower", "query": "SELECT VALUE LOWER(c.name) FROM c" },
            { "name": "cp_twice", "query": "SELECT VALUE c.n * 2 FROM root c" },
        ]))
        .unwrap();
        let item = json!({ "id": "1", "name": "ANN", "n": 4, "cp_twice": "stored" });
        let read = computed.with(item.clone());
        assert_eq!(read["cp_lower"], "ann");
        assert_eq!(read["cp_twice"], 8, "in place of the stored one");
        let undefined = computed.with(json!({ "id": "2" }));
        assert!(undefined.get("cp_lower").is_none(), "undefined: absent");
        let mut wildcard = read;
        computed.leave_out(&mut wildcard);
        assert_eq!(wildcard, json!({ "id": "1", "name": "ANN", "n": 4 }));
    }

    #[test]
    fn what_azure_refuses_is_refused_one_past_each_limit() {
        let one = |name: &str, query: &str| declared(json!([{ "name": name, "query": query }]));
        let good = "SELECT VALUE LOWER(c.name) FROM c";
        let twenty: Vec<Json> = (0..20)
            .map(|n| json!({ "name": format!("cp{n}"), "query": good }))
            .collect();
        assert!(declared(Json::Array(twenty.clone())).is_ok());
        let mut past = twenty;
        past.push(json!({ "name": "cp20", "query": good }));
        assert!(declared(Json::Array(past)).is_err(), "21");
        for (name, query) in [
            ("id", good),
            ("_ts", good),
            ("a/b", good),
            ("", good),
            ("cp", "SELECT LOWER(c.name) FROM c"),
            ("cp", "SELECT VALUE c.name FROM c WHERE c.n > 1"),
            ("cp", "SELECT VALUE c.name FROM c ORDER BY c.name"),
            ("cp", "SELECT VALUE t FROM c JOIN t IN c.tags"),
            ("cp", "SELECT TOP 1 VALUE c.name FROM c"),
            ("cp", "SELECT DISTINCT VALUE c.name FROM c"),
            ("cp", "SELECT VALUE COUNT(1) FROM c"),
            ("cp", "SELECT VALUE GetCurrentDateTime() FROM c"),
            ("cp", "SELECT VALUE RAND() FROM c"),
            ("cp", "SELECT VALUE ST_ISVALID(c.loc) FROM c"),
            (
                "cp",
                "SELECT VALUE EXISTS(SELECT VALUE t FROM t IN c.tags) FROM c",
            ),
            ("cp", "SELECT VALUE t FROM t IN c.tags"),
            ("cp", "SELECT VALUE 1"),
            ("cp", "not a query"),
        ] {
            assert!(one(name, query).is_err(), "{name}: {query}");
        }
        let twice = json!([{ "name": "cp", "query": good }, { "name": "cp", "query": good }]);
        assert!(declared(twice).is_err(), "a name twice");
        assert!(declared(json!("no")).is_err());
    }
}
