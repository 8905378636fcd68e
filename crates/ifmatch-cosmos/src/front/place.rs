//! Where a document is kept and how it is named: its container's table, its key (partition
//! and id), the partitions a request names, and the short resource ids (`_rid`).

use ifmatch_table::EntityKey;
use serde_json::{Map, Value as Json};

use crate::document;
use crate::failure::{Failure, bad_request};
use crate::ttl;

pub(crate) fn key(partition: &str, id: &str) -> EntityKey {
    (partition.to_owned(), id.to_owned())
}

pub(crate) fn documents_table(db: &str, coll: &str) -> String {
    format!("{db}/{coll}")
}

pub(crate) fn id_of(resource: &Map<String, Json>) -> String {
    resource
        .get("id")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `text`, a document's JSON, as a document written within `partition` (a batch's
/// operation, a script's write): a resource, its time to live within bounds, its partition
/// key `partition`'s; 400 with `elsewhere` when it names another.
pub(crate) fn document_in(
    text: &str,
    (paths, partition): (&[String], &str),
    elsewhere: &str,
) -> Result<Map<String, Json>, Failure> {
    placed(
        document::resource(text.as_bytes())?,
        (paths, partition),
        elsewhere,
    )
}

/// [`document_in`] of a resource already read.
pub(crate) fn placed(
    resource: Map<String, Json>,
    (paths, partition): (&[String], &str),
    elsewhere: &str,
) -> Result<Map<String, Json>, Failure> {
    ttl::check_item(&resource)?;
    if stored_key_of(&resource, paths)? != partition {
        return Err(bad_request(elsewhere));
    }
    Ok(resource)
}

/// The stored partition key of `resource` in a container whose key has `paths`.
pub(crate) fn stored_key_of(
    resource: &Map<String, Json>,
    paths: &[String],
) -> Result<String, Failure> {
    let values: Vec<Json> = paths
        .iter()
        .map(|p| document::key_at(resource, p))
        .collect();
    match values.as_slice() {
        [value] => document::stored_key(value),
        values => document::stored_keys(values, true),
    }
}

/// Which partitions a request names.
pub(crate) enum Scope {
    /// One partition: its stored key.
    Key(String),
    /// The partitions of a hierarchical key's prefix: the start their stored keys share.
    Prefix(String),
}

impl Scope {
    /// The partitions an `x-ms-documentdb-partitionkey` header names in a container whose
    /// partition key has `paths`.
    pub(crate) fn of_header(paths: &[String], header: &str) -> Result<Self, Failure> {
        let paths = paths.len();
        let values = document::keys_of_header(header)?;
        match (paths, values.len()) {
            (1, 1) => Ok(Self::Key(document::stored_key(&values[0])?)),
            (n, m) if n > 1 && m == n => Ok(Self::Key(document::stored_keys(&values, true)?)),
            (n, m) if n > 1 && m < n => Ok(Self::Prefix(document::stored_keys(&values, false)?)),
            _ => Err(bad_request(
                "The partition key supplied in x-ms-partitionkey header has one value per path of the container's partition key.",
            )),
        }
    }
}

/// A short resource id of `names`, stable for them: base64 of an FNV-1a digest.
pub(crate) fn rid(names: &[&str]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(digest(names))
}

/// An FNV-1a digest of `names`, joined by NUL (which no name holds).
pub(crate) fn digest(names: &[&str]) -> [u8; 8] {
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in names.join("\0").bytes() {
        digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    digest.to_be_bytes()
}
