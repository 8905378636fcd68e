//! Vector search: `VectorDistance(a, b [, brute_force [, {distanceFunction, dataType}]])`, the
//! similarity of two vectors by cosine (-1 to 1), dot product, or Euclidean distance (0 and
//! up), computed exactly over every item whatever vector index a container declares (`flat`,
//! `quantizedFlat`, `diskANN`: an index only makes Azure's answer approximate). A container's
//! `vectorEmbeddingPolicy` gives the function and data type of a path, for the calls on it
//! that name none, and `ORDER BY VectorDistance(...)` puts the most similar first: highest
//! first for cosine and dot product, lowest first for Euclidean.

use serde_json::{Map, Value as Json, json};

use super::catalog::Function;
use super::meter::Meter;
use super::tree::{Expr, Query};
use super::tree::{each_expr, visit};
use super::value::{Value, whole_or};

/// A container's vector path, as its `vectorEmbeddingPolicy` declares it: the path (`/a/b`),
/// its distance function and its data type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedding {
    /// The path, `/a/b`.
    pub path: String,
    /// `cosine`, `dotproduct` or `euclidean`.
    pub function: String,
    /// `float32`, `float16`, `int8` or `uint8`.
    pub data_type: String,
    /// How many dimensions its vectors have.
    pub dimensions: u32,
}

const FUNCTIONS: [&str; 3] = ["cosine", "dotproduct", "euclidean"];
const DATA_TYPES: [&str; 4] = ["float32", "float16", "int8", "uint8"];
/// The most dimensions a vector path declares, as Azure allows (and a `quantizedFlat` or a
/// `diskANN` index takes).
const MAX_DIMENSIONS: i64 = 4096;
/// The most dimensions a `flat` vector index takes, as Azure allows.
const MAX_FLAT_DIMENSIONS: u32 = 505;
/// The vector index types of an indexing policy's `vectorIndexes`.
const INDEX_TYPES: [&str; 3] = ["flat", "quantizedFlat", "diskANN"];

/// The vector paths a container's properties declare (`{"vectorEmbeddings": [{"path",
/// "dataType", "distanceFunction", "dimensions"}]}`), or why the policy is no policy.
pub fn embeddings(properties: &Map<String, Json>) -> Result<Vec<Embedding>, String> {
    let Some(policy) = properties.get("vectorEmbeddingPolicy") else {
        return Ok(Vec::new());
    };
    let wrong = || {
        format!(
            "vectorEmbeddingPolicy is {{\"vectorEmbeddings\": [{{\"path\": \"/v\", \"dataType\": one of {DATA_TYPES:?}, \"distanceFunction\": one of {FUNCTIONS:?}, \"dimensions\": 1 to {MAX_DIMENSIONS}}}]}}."
        )
    };
    let listed = match policy.get("vectorEmbeddings") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(listed)) => listed,
        Some(_) => return Err(wrong()),
    };
    listed
        .iter()
        .map(|embedding| {
            let text = |name: &str| embedding.get(name).and_then(Json::as_str);
            let path = text("path").filter(|p| p.len() > 1 && p.starts_with('/'));
            let known = |value: Option<&str>, list: &[&str]| {
                value
                    .map(str::to_ascii_lowercase)
                    .filter(|v| list.contains(&v.as_str()))
            };
            let function = known(text("distanceFunction"), &FUNCTIONS);
            let data_type = known(text("dataType").or(Some("float32")), &DATA_TYPES);
            let dimensions = embedding.get("dimensions").and_then(Json::as_i64);
            match (path, function, data_type, dimensions) {
                (Some(path), Some(function), Some(data_type), Some(n @ 1..=MAX_DIMENSIONS)) => {
                    Ok(Embedding {
                        path: path.to_owned(),
                        function,
                        data_type,
                        dimensions: n as u32,
                    })
                }
                _ => Err(wrong()),
            }
        })
        .collect()
}

/// Checks the vector indexes a container's properties declare (`indexingPolicy.vectorIndexes`,
/// `[{"path", "type"}]`) against its vector paths (`embeddings`, as [`embeddings`] read them):
/// each indexes a declared path, with a type Azure has, within the dimensions that type takes
/// (505 for `flat`, 4096 for the others). Why not, otherwise.
pub fn check_vector_indexes(
    properties: &Map<String, Json>,
    embeddings: &[Embedding],
) -> Result<(), String> {
    let indexes = properties
        .get("indexingPolicy")
        .and_then(|policy| policy.get("vectorIndexes"));
    let listed = match indexes {
        None | Some(Json::Null) => return Ok(()),
        Some(Json::Array(listed)) => listed,
        Some(_) => {
            return Err("indexingPolicy.vectorIndexes is a list of {\"path\", \"type\"}.".into());
        }
    };
    for index in listed {
        let path = index.get("path").and_then(Json::as_str).unwrap_or_default();
        let kind = index.get("type").and_then(Json::as_str).unwrap_or_default();
        let Some(kind) = INDEX_TYPES.iter().find(|t| t.eq_ignore_ascii_case(kind)) else {
            return Err(format!(
                "The vector index on {path:?} has type {kind:?}; the types are {INDEX_TYPES:?}."
            ));
        };
        let Some(embedding) = embeddings.iter().find(|e| e.path == path) else {
            return Err(format!(
                "The vector index path {path:?} is not a path of the container's vectorEmbeddingPolicy."
            ));
        };
        if *kind == "flat" && embedding.dimensions > MAX_FLAT_DIMENSIONS {
            return Err(format!(
                "The vector index on {path:?} is of type flat, which takes at most {MAX_FLAT_DIMENSIONS} dimensions; the path has {}. Use quantizedFlat or diskANN (up to {MAX_DIMENSIONS}).",
                embedding.dimensions
            ));
        }
    }
    Ok(())
}

impl Query {
    /// Gives each `VectorDistance` on a declared vector path that names no options the
    /// path's (`embeddings`), and sets each `ORDER BY VectorDistance(...)` most similar first.
    pub fn with_embeddings(&mut self, embeddings: &[Embedding]) {
        each_expr(self, &mut |expr| {
            visit(expr, &mut |e| {
                if let Expr::Call(Function::VECTORDISTANCE, args) = e
                    && args.len() < 4
                    && let Some(declared) =
                        path(&args[0]).and_then(|p| embeddings.iter().find(|e| e.path == p))
                {
                    if args.len() == 2 {
                        args.push(Expr::literal(Json::Bool(false)));
                    }
                    let options = json!({
                        "distanceFunction": declared.function, "dataType": declared.data_type,
                    });
                    args.push(Expr::literal(options));
                }
                Ok(())
            })
            .expect("nothing refused");
        });
        for (expr, descending) in &mut self.order {
            if let Expr::Call(Function::VECTORDISTANCE, args) = expr {
                *descending = function_of(args.get(3)) != "euclidean";
            }
            // RRF ranks each score highest first: a Euclidean distance, negated.
            if let Expr::Call(Function::RRF, parts) = expr {
                for part in parts {
                    if let Expr::Call(Function::VECTORDISTANCE, args) = part
                        && function_of(args.get(3)) == "euclidean"
                    {
                        *part = Expr::Negate(Box::new(part.clone()));
                    }
                }
            }
        }
    }
}

/// The path (`/a/b`) `expr` reads from the container's item, if it is one.
fn path(expr: &Expr) -> Option<String> {
    let mut names = Vec::new();
    let mut at = expr;
    loop {
        match at {
            Expr::Member(inner, name) => {
                names.push(name.as_str());
                at = inner;
            }
            Expr::Var(0) | Expr::Root if !names.is_empty() => break,
            _ => return None,
        }
    }
    names.reverse();
    Some(format!("/{}", names.join("/")))
}

/// The distance function an options object names (`cosine` when none).
fn function_of(options: Option<&Expr>) -> String {
    let named = match options {
        Some(Expr::Literal(options)) => options.get("distanceFunction").and_then(Json::as_str),
        Some(Expr::Object(fields)) => fields.iter().find_map(|(name, value)| match value {
            Expr::Literal(f) if name == "distanceFunction" => f.as_str(),
            _ => None,
        }),
        _ => None,
    };
    named.map_or_else(|| "cosine".to_owned(), str::to_ascii_lowercase)
}

/// `VectorDistance(a, b [, brute_force [, options]])`: undefined for what is not two vectors
/// of numbers of one length, or for options it does not know.
pub(crate) fn distance(args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    let vector = |value: &Value<'_>| -> Option<Vec<f64>> {
        let Json::Array(items) = value.as_deref()? else {
            return None;
        };
        items.iter().map(Json::as_f64).collect()
    };
    let (a, b) = (vector(&args[0])?, vector(&args[1])?);
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    meter.take(16 * a.len())?;
    if let Some(brute) = args.get(2) {
        brute.as_deref()?.as_bool()?;
    }
    let function = match args.get(3) {
        None => "cosine".to_owned(),
        Some(options) => {
            let options = options.as_deref()?.as_object()?;
            if let Some(data_type) = options.get("dataType") {
                let data_type = data_type.as_str()?.to_ascii_lowercase();
                DATA_TYPES.contains(&data_type.as_str()).then_some(())?;
            }
            match options.get("distanceFunction") {
                None => "cosine".to_owned(),
                Some(f) => f.as_str()?.to_ascii_lowercase(),
            }
        }
    };
    let dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let score = match function.as_str() {
        "dotproduct" => dot,
        "euclidean" => a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f64>()
            .sqrt(),
        "cosine" => {
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            dot / (norm(&a) * norm(&b))
        }
        _ => return None,
    };
    whole_or(score)
}
