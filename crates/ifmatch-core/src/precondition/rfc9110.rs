//! The HTTP dialect: RFC 9110 section 13.2, exactly.

use http::{HeaderMap, Method};

use super::{Conditions, Outcome, Validators};

/// What the server knows of the target resource before it looks at the preconditions.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A current representation exists, with these validators, and the method would succeed
    /// (2xx) without preconditions.
    Current(&'a Validators),
    /// No current representation exists, and the method would still succeed without
    /// preconditions: a PUT that creates, a POST.
    Absent,
    /// Without preconditions the answer would be neither 2xx nor 412 (404 for a GET of a
    /// missing resource, 405, 401, ...). All preconditions are ignored (RFC 9110 13.2.1) and the
    /// caller sends that answer.
    Failing,
}

impl<'a> Target<'a> {
    /// The usual mapping for a resource that may not exist: a missing resource answers 404 to
    /// GET, HEAD and DELETE, while PUT, POST and PATCH can create it.
    pub fn of(method: &Method, current: Option<&'a Validators>) -> Self {
        match current {
            Some(validators) => Self::Current(validators),
            None if matches!(*method, Method::GET | Method::HEAD | Method::DELETE) => Self::Failing,
            None => Self::Absent,
        }
    }
}

/// Evaluates a request's preconditions in the order of RFC 9110 section 13.2.2.
///
/// 1. `If-Match` (strong comparison; `*` holds when a representation exists; invalid syntax
///    fails), else `If-Unmodified-Since`: false answers 412.
/// 2. `If-None-Match` (weak comparison; `*` fails when a representation exists), else for GET
///    and HEAD `If-Modified-Since`: false answers 304 for GET and HEAD, 412 for other methods.
/// 3. For a GET with `Range` and `If-Range`: false means ignore the range and answer 200.
///
/// Preconditions are ignored for CONNECT, OPTIONS and TRACE, and whenever the answer without
/// them would not be 2xx or 412 ([`Target::Failing`], 13.2.1). Invalid dates, and date fields
/// sent as lists, are ignored. When `If-Match` fails because the requested change has already
/// happened (13.1.1), the caller may answer 2xx instead of 412: only it can know.
///
/// ```
/// use http::{HeaderMap, Method, header};
/// use ifmatch_core::precondition::{Outcome, Validators, rfc9110::{Target, evaluate}};
/// use ifmatch_core::strong_etag;
///
/// let current = Validators::etag(strong_etag(b"v1"));
/// let mut headers = HeaderMap::new();
/// headers.insert(header::IF_NONE_MATCH, current.etag.as_ref().unwrap().to_header_value());
/// assert_eq!(evaluate(&Method::GET, &headers, Target::Current(&current)), Outcome::NotModified);
/// assert_eq!(evaluate(&Method::PUT, &headers, Target::Current(&current)), Outcome::PreconditionFailed);
/// ```
pub fn evaluate(method: &Method, headers: &HeaderMap, target: Target<'_>) -> Outcome {
    if matches!(*method, Method::CONNECT | Method::OPTIONS | Method::TRACE) {
        return Outcome::Proceed;
    }
    let current = match target {
        Target::Current(validators) => Some(validators),
        Target::Absent => None,
        Target::Failing => return Outcome::Proceed,
    };
    let conditions = Conditions::new(headers);
    let safe = matches!(*method, Method::GET | Method::HEAD);

    let unchanged = conditions
        .if_match(current)
        .or_else(|| conditions.if_unmodified_since(current));
    if unchanged == Some(false) {
        return Outcome::PreconditionFailed;
    }

    let changed = match conditions.if_none_match(current) {
        None if safe => conditions.if_modified_since(current),
        held => held,
    };
    if changed == Some(false) {
        return if safe {
            Outcome::NotModified
        } else {
            Outcome::PreconditionFailed
        };
    }

    if *method == Method::GET && conditions.if_range(current) == Some(false) {
        return Outcome::IgnoreRange;
    }
    Outcome::Proceed
}
