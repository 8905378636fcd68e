//! Partial document update (`PATCH`): up to ten operations, `add`, `set`, `replace`,
//! `remove`, `incr` and `move`, on JSON-pointer paths, applied in order to a copy of the
//! document, all or none. The id, the partition key and the system properties are not
//! paths a patch may change.

use serde_json::{Map, Value as Json};

use crate::failure::{Failure, bad_request};

/// The most operations one patch holds.
pub const MAX_OPERATIONS: usize = 10;

/// A patch request's body: its operations, and its condition (`from c where ...`), if any.
/// Two forms: the object `{"operations": [...], "condition": "..."}`, and the bare array of
/// operations the JS SDK sends for `item.patch([...])`.
pub fn parse(body: &[u8]) -> Result<(Vec<Json>, Option<String>), Failure> {
    let (operations, mut body) = match serde_json::from_slice::<Json>(body) {
        Ok(Json::Array(operations)) => (operations, Map::new()),
        Ok(Json::Object(mut body)) => match body.remove("operations") {
            Some(Json::Array(operations)) => (operations, body),
            _ => {
                return Err(bad_request(
                    "A patch names its operations: {\"operations\": [...]}.",
                ));
            }
        },
        _ => {
            return Err(bad_request(
                "A patch's body is a JSON object ({\"operations\": [...]}) or an array of operations.",
            ));
        }
    };
    if operations.is_empty() || operations.len() > MAX_OPERATIONS {
        return Err(bad_request(format!(
            "A patch holds 1 to {MAX_OPERATIONS} operations; this one holds {}.",
            operations.len()
        )));
    }
    let condition = match body.remove("condition") {
        None | Some(Json::Null) => None,
        Some(Json::String(text)) => Some(text),
        Some(_) => {
            return Err(bad_request(
                "A patch's condition is a string: \"from c where ...\".",
            ));
        }
    };
    Ok((operations, condition))
}

/// `document` with `operations` applied, or why one cannot be; `fixed` are the paths no
/// operation may touch (the partition key's).
pub fn apply(
    document: &Map<String, Json>,
    operations: &[Json],
    fixed: &[String],
) -> Result<Map<String, Json>, Failure> {
    let mut out = Json::Object(document.clone());
    for operation in operations {
        let op = operation
            .get("op")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let path = pointer(operation.get("path"), fixed)?;
        let value = operation.get("value").cloned();
        let needs_value = || {
            value
                .clone()
                .ok_or_else(|| bad_request(format!("The {op} operation needs a value.")))
        };
        match op.to_ascii_lowercase().as_str() {
            "add" => insert(&mut out, &path, needs_value()?, Insert::Add)?,
            "set" => insert(&mut out, &path, needs_value()?, Insert::Set)?,
            "replace" => {
                get(&out, &path).ok_or_else(|| missing(&path))?;
                insert(&mut out, &path, needs_value()?, Insert::Set)?;
            }
            "remove" => {
                remove(&mut out, &path)?;
            }
            "incr" => {
                let by = needs_value()?;
                let by = by
                    .as_f64()
                    .ok_or_else(|| bad_request("incr takes a number."))?;
                let sum = match get(&out, &path) {
                    None => by,
                    Some(Json::Number(n)) => n.as_f64().unwrap_or_default() + by,
                    Some(_) => {
                        return Err(bad_request(format!(
                            "incr at {} finds a value that is not a number.",
                            show(&path)
                        )));
                    }
                };
                let sum = if sum.fract() == 0.0 && sum.abs() < 9e15 {
                    Json::from(sum as i64)
                } else {
                    serde_json::Number::from_f64(sum).map_or(Json::Null, Json::Number)
                };
                insert(&mut out, &path, sum, Insert::Set)?;
            }
            "move" => {
                let from = pointer(operation.get("from"), fixed)?;
                let moved = remove(&mut out, &from)?;
                insert(&mut out, &path, moved, Insert::Set)?;
            }
            other => {
                return Err(bad_request(format!(
                    "{other:?} is not a patch operation: add, set, replace, remove, incr or move."
                )));
            }
        }
    }
    crate::document::check_nesting(&out)?;
    match out {
        Json::Object(object) => Ok(object),
        _ => Err(bad_request("A patch leaves a document an object.")),
    }
}

/// A path's names, checked: not the id, a system property or the partition key.
fn pointer(path: Option<&Json>, fixed: &[String]) -> Result<Vec<String>, Failure> {
    let text = path
        .and_then(Json::as_str)
        .filter(|p| p.starts_with('/') && p.len() > 1);
    let text = text.ok_or_else(|| bad_request("A patch path is a JSON pointer such as /a/b."))?;
    let names: Vec<String> = text[1..]
        .split('/')
        .map(|n| n.replace("~1", "/").replace("~0", "~"))
        .collect();
    let first = names[0].as_str();
    if first == "id"
        || first.starts_with('_')
            && ["_rid", "_self", "_etag", "_ts", "_attachments"].contains(&first)
    {
        return Err(bad_request(format!(
            "{text} is not a path a patch may change."
        )));
    }
    if (fixed.iter()).any(|fixed| text == fixed || fixed.starts_with(&format!("{text}/"))) {
        return Err(bad_request(format!(
            "{text} holds the partition key, which a patch may not change."
        )));
    }
    Ok(names)
}

fn show(path: &[String]) -> String {
    format!("/{}", path.join("/"))
}

fn missing(path: &[String]) -> Failure {
    bad_request(format!(
        "The patch path {} names nothing in the document.",
        show(path)
    ))
}

fn get<'a>(value: &'a Json, path: &[String]) -> Option<&'a Json> {
    path.iter().try_fold(value, |at, name| match at {
        Json::Object(object) => object.get(name),
        Json::Array(items) => items.get(name.parse::<usize>().ok()?),
        _ => None,
    })
}

fn parent<'a>(value: &'a mut Json, path: &[String]) -> Result<&'a mut Json, Failure> {
    let (_, above) = path.split_last().ok_or_else(|| missing(path))?;
    let mut at = value;
    for name in above {
        at = match at {
            Json::Object(object) => object.get_mut(name),
            Json::Array(items) => name.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| missing(path))?;
    }
    Ok(at)
}

#[derive(Clone, Copy, PartialEq)]
enum Insert {
    /// In an array, inserted before the index (or appended at `-`).
    Add,
    /// In an array, replacing the element at the index.
    Set,
}

fn insert(value: &mut Json, path: &[String], new: Json, how: Insert) -> Result<(), Failure> {
    let last = path.last().cloned().unwrap_or_default();
    match parent(value, path)? {
        Json::Object(object) => {
            object.insert(last, new);
            Ok(())
        }
        Json::Array(items) => {
            let index = match last.as_str() {
                "-" => items.len(),
                n => n.parse::<usize>().map_err(|_| missing(path))?,
            };
            match (how, index) {
                (Insert::Set, i) if i < items.len() => items[i] = new,
                (_, i) if i <= items.len() => items.insert(i, new),
                _ => return Err(missing(path)),
            }
            Ok(())
        }
        _ => Err(missing(path)),
    }
}

fn remove(value: &mut Json, path: &[String]) -> Result<Json, Failure> {
    let last = path.last().cloned().unwrap_or_default();
    let removed = match parent(value, path)? {
        Json::Object(object) => object.shift_remove(&last),
        Json::Array(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => Some(items.remove(i)),
            _ => None,
        },
        _ => None,
    };
    removed.ok_or_else(|| missing(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(ops: Json) -> Result<Json, Failure> {
        let doc = json!({"id": "a", "pk": "p", "n": 1, "tags": ["x"], "o": {"k": 1}});
        let ops = ops.as_array().unwrap().clone();
        apply(doc.as_object().unwrap(), &ops, &["/pk".to_owned()]).map(Json::Object)
    }

    #[test]
    fn operations_apply_in_order_all_or_none() {
        let out = patched(json!([
            {"op": "incr", "path": "/n", "value": 2},
            {"op": "add", "path": "/tags/0", "value": "w"},
            {"op": "add", "path": "/tags/-", "value": "z"},
            {"op": "set", "path": "/o/k", "value": 5},
            {"op": "move", "from": "/o", "path": "/moved"},
            {"op": "remove", "path": "/moved/k"},
            {"op": "incr", "path": "/fresh", "value": 1.5},
        ]))
        .unwrap();
        assert_eq!(
            out,
            json!({"id": "a", "pk": "p", "n": 3, "tags": ["w", "x", "z"], "moved": {}, "fresh": 1.5})
        );
        for bad in [
            json!([{"op": "replace", "path": "/missing", "value": 1}]),
            json!([{"op": "remove", "path": "/missing"}]),
            json!([{"op": "incr", "path": "/tags", "value": 1}]),
            json!([{"op": "set", "path": "/id", "value": "b"}]),
            json!([{"op": "set", "path": "/pk", "value": "q"}]),
            json!([{"op": "set", "path": "/_etag", "value": "q"}]),
            json!([{"op": "add", "path": "/no/such/parent", "value": 1}]),
            json!([{"op": "copy", "path": "/n", "value": 1}]),
            json!([{"op": "set", "path": "n", "value": 1}]),
        ] {
            assert!(patched(bad.clone()).is_err(), "{bad}");
        }
        assert!(parse(br#"{"operations": []}"#).is_err());
        let eleven =
            json!({"operations": vec![json!({"op": "incr", "path": "/n", "value": 1}); 11]});
        assert!(parse(eleven.to_string().as_bytes()).is_err());
        let (ops, condition) = parse(br#"{"operations": [{"op": "remove", "path": "/n"}], "condition": "from c where c.n > 0"}"#).unwrap();
        assert_eq!(
            (ops.len(), condition.as_deref()),
            (1, Some("from c where c.n > 0"))
        );
        // The JS SDK's form: the operations alone.
        let (ops, condition) = parse(br#"[{"op": "incr", "path": "/n", "value": 1}]"#).unwrap();
        assert_eq!((ops.len(), condition), (1, None));
        assert!(parse(b"[]").is_err());
        assert!(parse(br#""incr""#).is_err());
    }
}
