//! Unique keys (a container's `uniqueKeyPolicy`): no two documents of one logical partition
//! hold the same values at the paths of one of its unique keys. A path a document lacks holds
//! null there, as Azure counts it, so at most one document of a partition may lack it.
//!
//! Kept as entries of the partition `~unique` of the container's table (after every
//! document, like the change feed's), one per document and unique key, keyed by a digest of
//! the logical partition, the key's number and the values, each naming the document that
//! holds it. A write moves its document's entries in the commit that writes the document
//! (`Front::commit_documents`): an entry it takes must be absent, so of two writers racing for
//! one value, through one instance or two of a fleet, one commit finds it present and fails
//! (409), and nothing of it is written.

use std::collections::BTreeMap;

use ifmatch_table::{Change, Entity, Expected, Value};
use serde_json::{Map, Value as Json};

use crate::document::json_of;
use crate::failure::{Code, Failure, bad_request};

/// The partition of a documents' table that holds the unique keys' entries.
pub(crate) const UNIQUE: &str = "~unique";

/// The most unique keys a container has, and the most paths one key has, as Azure allows.
const MAX_KEYS: usize = 10;
const MAX_PATHS: usize = 16;

/// A container's unique keys, each its paths (`/a/b`).
pub(crate) type Keys = Vec<Vec<String>>;

/// The property of a container that declares its unique keys.
pub(crate) const PROPERTY: &str = "uniqueKeyPolicy";

/// The unique keys `uniqueKeyPolicy` declares (`{"uniqueKeys": [{"paths": ["/a"]}]}`), or why
/// it is no policy.
pub(crate) fn declared(resource: &Map<String, Json>) -> Result<Keys, Failure> {
    let wrong = || {
        bad_request(format!(
            "uniqueKeyPolicy is {{\"uniqueKeys\": [{{\"paths\": [\"/a\", ...]}}, ...]}}: at most {MAX_KEYS} keys of 1 to {MAX_PATHS} paths that start with '/'."
        ))
    };
    let Some(policy) = resource.get(PROPERTY) else {
        return Ok(Vec::new());
    };
    let keys = match policy.get("uniqueKeys") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(keys)) if keys.len() <= MAX_KEYS => keys,
        Some(_) => return Err(wrong()),
    };
    keys.iter()
        .map(|key| {
            let paths = key
                .get("paths")
                .and_then(Json::as_array)
                .ok_or_else(wrong)?;
            if paths.is_empty() || paths.len() > MAX_PATHS {
                return Err(wrong());
            }
            (paths.iter())
                .map(|path| match path.as_str() {
                    Some(path) if path.len() > 1 && path.starts_with('/') => Ok(path.to_owned()),
                    _ => Err(wrong()),
                })
                .collect()
        })
        .collect()
}

/// The row keys of the entries `document`, of the logical partition `partition`, holds.
fn entries(keys: &Keys, partition: &str, document: &Map<String, Json>) -> Vec<String> {
    (keys.iter().enumerate())
        .map(|(number, paths)| {
            let values: Vec<Json> = (paths.iter())
                .map(|path| at(document, path).cloned().unwrap_or(Json::Null))
                .collect();
            let printed = crate::sql::printed(&Json::Array(values));
            let text = format!("{partition}\u{0}{number}\u{0}{printed}");
            let tag = ifmatch_core::strong_etag(text.as_bytes()).to_string();
            tag.trim_matches('"').to_owned()
        })
        .collect()
}

/// The value at `path` (`/a/b`) in `document`, if there is one.
fn at<'d>(document: &'d Map<String, Json>, path: &str) -> Option<&'d Json> {
    let mut names = path.trim_start_matches('/').split('/');
    let mut found = names.next().and_then(|first| document.get(first));
    for name in names {
        found = found.and_then(|value| value.get(name));
    }
    found
}

/// The changes to the unique keys' entries that `changes` (each a document's change and the
/// document as read) make, for one commit with them; or 409 when two of the documents they
/// write would hold one entry.
pub(crate) fn moves(
    keys: &Keys,
    changes: &[(Change, Option<&Entity>)],
) -> Result<Vec<Change>, Failure> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    // Each entry: the document that leaves it, and those that take it.
    let mut moved: BTreeMap<String, (bool, Vec<&Entity>)> = BTreeMap::new();
    for (change, before) in changes {
        let held = |entity: &Entity| entries(keys, &entity.partition_key, &json_of(entity));
        let left = before.map(held).unwrap_or_default();
        let taken = change.write.as_ref().map(held).unwrap_or_default();
        for entry in left.iter().filter(|e| !taken.contains(e)) {
            moved.entry(entry.clone()).or_default().0 = true;
        }
        for entry in taken.iter().filter(|e| !left.contains(e)) {
            let writer = change
                .write
                .as_ref()
                .expect("taken entries come from a write");
            moved.entry(entry.clone()).or_default().1.push(writer);
        }
    }
    let mut out = Vec::new();
    for (entry, (left, taken)) in moved {
        let write = match taken.as_slice() {
            [] => None,
            [writer] => Some(Entity::new(
                UNIQUE,
                &entry,
                writer.timestamp,
                [
                    ("pk", Value::String(writer.partition_key.clone())),
                    ("id", Value::String(writer.row_key.clone())),
                ],
            )),
            _ => return Err(violation()),
        };
        // An entry a document of this commit leaves is that document's, and the commit
        // compares and swaps that document: whoever takes it may overwrite it.
        let expected = match (left, &write) {
            (false, Some(_)) => Expected::Absent,
            _ => Expected::Anything,
        };
        out.push(Change {
            key: (UNIQUE.to_owned(), entry),
            expected,
            write,
        });
    }
    Ok(out)
}

/// The document (its partition and id) an entry names as its holder.
pub(crate) fn holder(entry: &Entity) -> Option<(String, String)> {
    let text = |name: &str| match entry.properties.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Some((text("pk")?, text("id")?))
}

/// 409, as Azure words a unique key taken.
pub(crate) fn violation() -> Failure {
    Failure::new(Code::Conflict, "Unique index constraint violation.")
}
