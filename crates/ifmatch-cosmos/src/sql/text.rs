//! Full-text search: `FullTextContains`, `FullTextContainsAll`, `FullTextContainsAny`, and
//! `FullTextScore` (BM25) and `RRF` (reciprocal rank fusion, for hybrid search) in `ORDER BY
//! RANK`. A text is its words: split at every character that is neither a letter nor a digit,
//! in lower case (no stemming and no stop words: Azure's English analyzer has both, so a word
//! it folds, `bikes` to `bike`, is two words here). A term of several words is found where
//! its words come in a row.
//!
//! BM25 (k1 = 1.2, b = 0.75) needs what the whole of the scope holds (how many items, their
//! mean length, how many hold each term): a row's score is computed when every row is in,
//! over the rows the query reads after its `WHERE` (Azure counts its index's). `RRF` ranks
//! the rows by each of its scores (the most similar first for `VectorDistance`) and sums
//! `weight / (60 + rank)`.

use serde_json::{Value as Json, json};

use super::catalog::Function;
use super::error::SqlError;
use super::meter::Meter;
use super::tree::{Expr, Query};
use super::tree::{each_expr, visit};
use super::value::Value;

/// Where a row's `FullTextScore` keeps what BM25 needs until every row is in: the text's
/// length in words, and each term's count in it.
const COUNTS: &str = "~bm25";
/// RRF's constant, as Azure uses it.
const RRF_K: f64 = 60.0;
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The words of `text`, in lower case.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// How many times the words `term` come in a row in `text`.
fn count(text: &[String], term: &[String]) -> usize {
    match term.len() {
        0 => 0,
        n => text.windows(n).filter(|w| *w == term).count(),
    }
}

/// The terms of a call's arguments after the first: strings, or arrays of strings.
fn terms(args: &[Value<'_>]) -> Option<Vec<Vec<String>>> {
    let mut all = Vec::new();
    for arg in args {
        match arg.as_deref()? {
            Json::String(term) => all.push(words(term)),
            Json::Array(items) => {
                for item in items {
                    all.push(words(item.as_str()?));
                }
            }
            _ => return None,
        }
    }
    Some(all)
}

/// A full-text function of `args` (each possibly undefined).
pub(crate) fn call(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    if name == Function::RRF {
        // Its scores, kept for `rank`; the weights, if any, are its last argument.
        let values: Option<Vec<Json>> = args.iter().map(|a| a.as_deref().cloned()).collect();
        return values.map(Json::Array);
    }
    let text = args[0].as_deref()?.as_str()?;
    meter.take(3 * text.len())?;
    let text = words(text);
    let terms = terms(&args[1..])?;
    meter.take(terms.iter().map(|t| t.len()).sum::<usize>() * text.len().max(1))?;
    let found = |term: &Vec<String>| count(&text, term) > 0;
    Some(match name {
        Function::FULLTEXTCONTAINS | Function::FULLTEXTCONTAINSALL => {
            Json::Bool(terms.iter().all(found))
        }
        Function::FULLTEXTCONTAINSANY => Json::Bool(terms.iter().any(found)),
        _ => {
            json!({ COUNTS: [text.len(), terms.iter().map(|t| count(&text, t)).collect::<Vec<_>>()] })
        }
    })
}

/// The counts a row's `FullTextScore` kept: the text's length and each term's count.
fn counts(value: &Json) -> Option<(f64, Vec<f64>)> {
    let kept = value.get(COUNTS)?.as_array()?;
    let length = kept.first()?.as_f64()?;
    let terms = kept
        .get(1)?
        .as_array()?
        .iter()
        .map(Json::as_f64)
        .collect::<Option<_>>()?;
    Some((length, terms))
}

/// The BM25 scores of the rows whose `FullTextScore` kept `values` (`None` for a row whose
/// text was undefined), over those rows.
fn bm25(values: &[Option<&Json>]) -> Vec<Option<f64>> {
    let kept: Vec<Option<(f64, Vec<f64>)>> = values.iter().map(|v| v.and_then(counts)).collect();
    let rows: Vec<&(f64, Vec<f64>)> = kept.iter().flatten().collect();
    let n = rows.len() as f64;
    let mean = rows.iter().map(|(length, _)| length).sum::<f64>() / n.max(1.0);
    let width = rows.first().map_or(0, |(_, terms)| terms.len());
    let idf: Vec<f64> = (0..width)
        .map(|t| {
            let holding = rows.iter().filter(|(_, terms)| terms[t] > 0.0).count() as f64;
            (1.0 + (n - holding + 0.5) / (holding + 0.5)).ln()
        })
        .collect();
    kept.iter()
        .map(|row| {
            let (length, terms) = row.as_ref()?;
            let norm = K1 * (1.0 - B + B * length / mean.max(f64::MIN_POSITIVE));
            Some(
                (terms.iter().zip(&idf))
                    .map(|(tf, idf)| idf * tf * (K1 + 1.0) / (tf + norm))
                    .sum(),
            )
        })
        .collect()
}

/// The scores `ORDER BY RANK` sorts by, highest first, for the rows whose rank expression
/// evaluated to `values`: BM25 for `FullTextScore`, the fused score for `RRF`, the value
/// itself for what else (`VectorDistance`, made highest-first when it was ranked).
pub(crate) fn rank(values: &[Option<&Json>]) -> Vec<Option<f64>> {
    let is_counts = |v: &Option<&Json>| v.is_some_and(|v| v.get(COUNTS).is_some());
    if values.iter().any(is_counts) {
        return bm25(values);
    }
    let fused = values
        .iter()
        .any(|v| matches!(v, Some(Json::Array(parts)) if !parts.is_empty()));
    if !fused {
        return values.iter().map(|v| v.and_then(Json::as_f64)).collect();
    }
    // RRF: each row's parts are its scores, then maybe the weights (an array of numbers).
    let parts: Vec<&[Json]> = (values.iter())
        .map(|v| match v {
            Some(Json::Array(parts)) => parts.as_slice(),
            _ => &[],
        })
        .collect();
    let weighted =
        |p: &[Json]| matches!(p.last(), Some(Json::Array(w)) if w.iter().all(Json::is_number));
    let width = parts
        .iter()
        .map(|p| p.len() - usize::from(weighted(p)))
        .max()
        .unwrap_or(0);
    let weights: Vec<f64> = (0..width)
        .map(|i| {
            (parts.iter().find(|p| weighted(p)))
                .and_then(|p| p.last()?.as_array()?.get(i)?.as_f64())
                .unwrap_or(1.0)
        })
        .collect();
    let mut fused = vec![0.0; values.len()];
    for (i, weight) in weights.iter().enumerate() {
        let component: Vec<Option<&Json>> = parts.iter().map(|p| p.get(i)).collect();
        let scores = rank(&component);
        let mut order: Vec<usize> = (0..values.len()).filter(|r| scores[*r].is_some()).collect();
        order.sort_by(|a, b| {
            scores[*b]
                .partial_cmp(&scores[*a])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (place, row) in order.into_iter().enumerate() {
            fused[row] += weight / (RRF_K + place as f64 + 1.0);
        }
    }
    fused.into_iter().map(Some).collect()
}

/// `FullTextScore` and `RRF` score rows for `ORDER BY RANK` alone (`RRF` of scores, the
/// first as the whole rank): anywhere else they are refused, as Azure refuses them.
pub(super) fn check_placement(query: &mut Query) -> Result<(), SqlError> {
    let scoring = |e: &Expr| matches!(e, Expr::Call(Function::FULLTEXTSCORE | Function::RRF, _));
    let mut misplaced = false;
    let mut check = |expr: &mut Expr| {
        let _ = visit(expr, &mut |e| {
            misplaced |= scoring(e);
            Ok(())
        });
    };
    let rank = match query.rank {
        true => query.order.pop(),
        false => None,
    };
    each_expr(query, &mut check);
    if let Some((Expr::Call(name, args), _)) = &rank {
        for arg in args {
            let inner = match (*name, arg) {
                (
                    Function::RRF,
                    Expr::Call(Function::FULLTEXTSCORE | Function::VECTORDISTANCE, inner),
                ) => inner.as_slice(),
                _ => std::slice::from_ref(arg),
            };
            for e in inner {
                check(&mut e.clone());
            }
        }
    }
    query.order.extend(rank);
    match misplaced {
        true => Err(SqlError::new(
            "FullTextScore and RRF score rows for ORDER BY RANK (RRF of FullTextScore and VectorDistance): they are nowhere else.",
        )),
        false => Ok(()),
    }
}
