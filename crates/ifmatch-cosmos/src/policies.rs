//! What a container's properties declare: its partition key, and what every write of its
//! documents must keep. A request reads them once, in one pass over the container's JSON
//! ([`Rules::of`]), the other properties (its indexing policy among them) skipped unbuilt.

use ifmatch_table::Entity;
use serde_json::{Map, Value as Json};

use crate::document::json_fields;
use crate::{ttl, unique, versions};

/// The property of a container that declares its partition key.
const PARTITION_KEY: &str = "partitionKey";

/// A container's rules, as a request reads them: its partition key's paths and its policies.
pub(crate) struct Rules {
    /// The paths of the partition key: one, or two or three for a hierarchical key.
    pub(crate) paths: Vec<String>,
    pub(crate) policies: Policies,
}

impl Rules {
    /// The rules of the container `container` (its stored entry).
    pub(crate) fn of(container: &Entity) -> Self {
        let names = [
            PARTITION_KEY,
            unique::PROPERTY,
            ttl::PROPERTY,
            versions::PROPERTY,
        ];
        Self::declared(&json_fields(container, &names))
    }

    /// The rules `properties`, a container's as stored (read whole, or at least the four
    /// that declare them), declare.
    pub(crate) fn declared(properties: &Map<String, Json>) -> Self {
        Self {
            paths: partition_paths(properties),
            policies: Policies {
                unique: unique::declared(properties).unwrap_or_default(),
                ttl: ttl::declared(properties).unwrap_or_default(),
                versions: versions::declared(properties),
                expiring: false,
            },
        }
    }
}

/// What a container's properties ask of every write of its documents: its unique keys and
/// its time to live.
#[derive(Clone)]
pub(crate) struct Policies {
    pub(crate) unique: unique::Keys,
    pub(crate) ttl: ttl::Default,
    /// How long every version is kept (the all-versions-and-deletes feed), if at all.
    pub(crate) versions: versions::Retention,
    /// Whether the writes are deletes of items past their time to live (the sweep's).
    pub(crate) expiring: bool,
}

/// The paths `properties` declare for the partition key; `/id` where they declare none.
fn partition_paths(properties: &Map<String, Json>) -> Vec<String> {
    let paths = properties
        .get(PARTITION_KEY)
        .and_then(|key| key.get("paths"))
        .and_then(Json::as_array);
    let paths: Vec<String> = (paths.into_iter().flatten())
        .filter_map(|path| path.as_str().map(str::to_owned))
        .collect();
    match paths.is_empty() {
        true => vec!["/id".to_owned()],
        false => paths,
    }
}
