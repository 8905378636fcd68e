//! The weighted lists of proactive negotiation (`Accept-Language`, `Accept-Encoding`: members,
//! each with an optional `q`, RFC 9110 12.4.2), read for `language.rs` and
//! `coding.rs`.

use http::HeaderValue;

/// The members of `field` with their weights in thousandths, in order (`None`: a field that
/// cannot be read, or a weight that is none). Empty members count for nothing (RFC 9110
/// 5.6.1).
pub(crate) fn members(field: &HeaderValue) -> Option<Vec<(&str, u16)>> {
    let mut members = Vec::new();
    for member in field.to_str().ok()?.split(',') {
        let mut parts = member.split(';').map(str::trim);
        let Some(name) = parts.next().filter(|name| !name.is_empty()) else {
            continue;
        };
        let mut weight = 1000;
        for parameter in parts {
            let (key, value) = parameter.split_once('=')?;
            if key.trim().eq_ignore_ascii_case("q") {
                weight = thousandths(value.trim())?;
            }
        }
        members.push((name, weight));
    }
    Some(members)
}

/// A weight (RFC 9110 12.4.2: `0`, `1`, up to three decimals) in thousandths.
fn thousandths(qvalue: &str) -> Option<u16> {
    let (whole, decimals) = qvalue.split_once('.').unwrap_or((qvalue, ""));
    if decimals.len() > 3 || !decimals.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{decimals:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}
