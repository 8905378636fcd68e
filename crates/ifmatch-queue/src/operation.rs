//! Reading a request line into a Queue service operation, and the naming rules.

use http::Method;
use percent_encoding::percent_decode_str;

use crate::failure::{ErrorCode, Failure, Result, out_of_range};

/// The longest a message lives unless told (`messagettl` absent): 7 days.
pub const DEFAULT_TTL: i64 = 7 * 24 * 3600;
/// The longest visibility timeout: 7 days.
pub const MAX_VISIBILITY: i64 = 7 * 24 * 3600;
/// The most messages one Get or Peek Messages answers.
pub const MAX_MESSAGES: usize = 32;
/// The largest page of List Queues.
pub const MAX_RESULTS: usize = 5000;

/// The operations of the Queue service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `GET /?comp=list`: the account's queues.
    ListQueues(ListOptions),
    /// `GET|PUT /?restype=service&comp=properties`: the service's properties (CORS, logging).
    ServiceProperties,
    /// `GET /?restype=service&comp=stats`: the replication stats Azurite answers.
    ServiceStats,
    /// `PUT /{queue}`.
    CreateQueue,
    /// `DELETE /{queue}`.
    DeleteQueue,
    /// `GET|HEAD /{queue}?comp=metadata`.
    GetQueueMetadata,
    /// `PUT /{queue}?comp=metadata`.
    SetQueueMetadata,
    /// `GET|HEAD /{queue}?comp=acl`.
    GetQueueAcl,
    /// `PUT /{queue}?comp=acl`.
    SetQueueAcl,
    /// `POST /{queue}/messages`.
    PutMessage(PutOptions),
    /// `GET /{queue}/messages`.
    GetMessages {
        /// How many, 1 to 32.
        count: usize,
        /// Seconds they stay invisible, 1 to 7 days.
        visibility: i64,
    },
    /// `GET /{queue}/messages?peekonly=true`.
    PeekMessages {
        /// How many, 1 to 32.
        count: usize,
    },
    /// `DELETE /{queue}/messages`.
    ClearMessages,
    /// `PUT /{queue}/messages/{id}?popreceipt=...&visibilitytimeout=...`.
    UpdateMessage {
        /// The message.
        id: String,
        /// The receipt its last Get or Update gave.
        receipt: String,
        /// Seconds it stays invisible from now, 0 to 7 days.
        visibility: i64,
    },
    /// `DELETE /{queue}/messages/{id}?popreceipt=...`.
    DeleteMessage {
        /// The message.
        id: String,
        /// The receipt its last Get or Update gave.
        receipt: String,
    },
}

/// What List Queues asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only names that start with it.
    pub prefix: String,
    /// Only names after the `NextMarker` of an earlier page.
    pub marker: String,
    /// The most names a page holds.
    pub max_results: usize,
    /// Whether each queue's metadata is listed.
    pub metadata: bool,
}

/// What Put Message asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOptions {
    /// Seconds before it is first visible, 0 to 7 days.
    pub visibility: i64,
    /// Seconds it lives, any positive number; `None`: forever (`-1`).
    pub ttl: Option<i64>,
}

/// A request's target: its queue (empty for the account) and what it asks of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The queue, as named (empty for the service's operations).
    pub queue: String,
    /// The operation.
    pub operation: Operation,
}

impl Operation {
    /// Azure's name of the operation, for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ListQueues(_) => "ListQueues",
            Self::ServiceProperties => "GetQueueServiceProperties",
            Self::ServiceStats => "GetQueueServiceStats",
            Self::CreateQueue => "CreateQueue",
            Self::DeleteQueue => "DeleteQueue",
            Self::GetQueueMetadata => "GetQueueMetadata",
            Self::SetQueueMetadata => "SetQueueMetadata",
            Self::GetQueueAcl => "GetQueueACL",
            Self::SetQueueAcl => "SetQueueACL",
            Self::PutMessage(_) => "PutMessage",
            Self::GetMessages { .. } => "GetMessages",
            Self::PeekMessages { .. } => "PeekMessages",
            Self::ClearMessages => "ClearMessages",
            Self::UpdateMessage { .. } => "UpdateMessage",
            Self::DeleteMessage { .. } => "DeleteMessage",
        }
    }
}

/// The query's parameters, decoded (a name given twice: its first value).
struct Query<'a>(Vec<(std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>);

impl Query<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        (self.0.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_ref())
    }

    /// A whole number parameter within `range`, or its default when absent.
    fn number(
        &self,
        name: &str,
        range: std::ops::RangeInclusive<i64>,
        default: i64,
    ) -> Result<i64> {
        let Some(text) = self.get(name) else {
            return Ok(default);
        };
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Failure::new(
                ErrorCode::InvalidQueryParameterValue,
                format!("{name} is not a whole number. QueryParameterName: {name}"),
            ));
        }
        match text.parse::<i64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(out_of_range(
                name,
                &format!("{} to {}", range.start(), range.end()),
            )),
        }
    }
}

impl Target {
    /// The operation `method` asks of `path` (below the account, percent-encoded) with `query`.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Result<Self> {
        let query = Query(form_pairs(query.unwrap_or("")));
        let path = percent_decode_str(path.trim_start_matches('/'))
            .decode_utf8()
            .map_err(|_| Failure::from(ErrorCode::InvalidUri))?;
        let mut segments = path.split('/');
        let queue = segments.next().unwrap_or_default().to_owned();
        let rest: Vec<&str> = segments.collect();
        let comp = query.get("comp");
        let verb = method.as_str();
        let unsupported = || Failure::from(ErrorCode::UnsupportedHttpVerb);
        let operation = match (queue.is_empty(), rest.as_slice()) {
            (true, []) => match (verb, comp, query.get("restype")) {
                ("GET", Some("list"), _) => Operation::ListQueues(list_options(&query)?),
                ("GET" | "PUT", Some("properties"), Some("service")) => {
                    Operation::ServiceProperties
                }
                ("GET", Some("stats"), Some("service")) => Operation::ServiceStats,
                _ => return Err(ErrorCode::InvalidUri.into()),
            },
            (false, []) => {
                check_name(&queue)?;
                match (verb, comp) {
                    ("PUT", None) => Operation::CreateQueue,
                    ("DELETE", None) => Operation::DeleteQueue,
                    ("GET" | "HEAD", Some("metadata")) => Operation::GetQueueMetadata,
                    ("PUT", Some("metadata")) => Operation::SetQueueMetadata,
                    ("GET" | "HEAD", Some("acl")) => Operation::GetQueueAcl,
                    ("PUT", Some("acl")) => Operation::SetQueueAcl,
                    (_, None | Some("metadata" | "acl")) => return Err(unsupported()),
                    _ => return Err(ErrorCode::InvalidUri.into()),
                }
            }
            (false, ["messages"]) => {
                check_name(&queue)?;
                let count = || -> Result<usize> {
                    let n = query.number("numofmessages", 1..=MAX_MESSAGES as i64, 1)?;
                    Ok(n as usize)
                };
                match verb {
                    "POST" => Operation::PutMessage(PutOptions {
                        visibility: query.number("visibilitytimeout", 0..=MAX_VISIBILITY, 0)?,
                        ttl: match query.number("messagettl", -1..=i64::MAX, DEFAULT_TTL)? {
                            -1 => None,
                            0 => return Err(out_of_range("messagettl", "-1, or 1 and up")),
                            n => Some(n),
                        },
                    }),
                    "GET" if query.get("peekonly") == Some("true") => {
                        Operation::PeekMessages { count: count()? }
                    }
                    "GET" => Operation::GetMessages {
                        count: count()?,
                        visibility: query.number("visibilitytimeout", 1..=MAX_VISIBILITY, 30)?,
                    },
                    "DELETE" => Operation::ClearMessages,
                    _ => return Err(unsupported()),
                }
            }
            (false, ["messages", id]) if !id.is_empty() => {
                check_name(&queue)?;
                let receipt = query.get("popreceipt").map(str::to_owned).ok_or_else(|| {
                    Failure::new(
                        ErrorCode::MissingRequiredQueryParameter,
                        "popreceipt is required. QueryParameterName: popreceipt",
                    )
                })?;
                let id = (*id).to_owned();
                match verb {
                    "PUT" => Operation::UpdateMessage {
                        id,
                        receipt,
                        visibility: match query.get("visibilitytimeout") {
                            Some(_) => query.number("visibilitytimeout", 0..=MAX_VISIBILITY, 0)?,
                            None => {
                                return Err(Failure::new(
                                    ErrorCode::MissingRequiredQueryParameter,
                                    "visibilitytimeout is required. QueryParameterName: visibilitytimeout",
                                ));
                            }
                        },
                    },
                    "DELETE" => Operation::DeleteMessage { id, receipt },
                    _ => return Err(unsupported()),
                }
            }
            _ => return Err(ErrorCode::InvalidUri.into()),
        };
        Ok(Self { queue, operation })
    }
}

fn form_pairs(query: &str) -> Vec<(std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &'_ str| {
                let plus = s.replace('+', " ");
                percent_decode_str(&plus)
                    .decode_utf8_lossy()
                    .into_owned()
                    .into()
            };
            (decode(name), decode(value))
        })
        .collect()
}

fn list_options(query: &Query<'_>) -> Result<ListOptions> {
    let max_results = query.number("maxresults", 1..=i64::MAX, MAX_RESULTS as i64)?;
    Ok(ListOptions {
        prefix: query.get("prefix").unwrap_or_default().to_owned(),
        marker: query.get("marker").unwrap_or_default().to_owned(),
        // Azure answers at most 5,000 a page, however many are asked for.
        max_results: (max_results as usize).min(MAX_RESULTS),
        metadata: query
            .get("include")
            .is_some_and(|i| i.split(',').any(|w| w == "metadata")),
    })
}

/// A queue name as Azure takes one: 3 to 63 characters, lowercase letters, digits and single
/// dashes, starting and ending with a letter or a digit.
pub fn check_name(name: &str) -> Result<()> {
    let bytes = name.as_bytes();
    let valid = (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
        && !name.contains("--");
    match valid {
        true => Ok(()),
        false => Err(Failure::new(
            ErrorCode::InvalidResourceName,
            format!(
                "{name:?} is no queue name: 3 to 63 lowercase letters, digits and single dashes, \
                 starting and ending with a letter or a digit."
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_rules_say() {
        for ok in ["abc", "a-b-c", "q12", &"a".repeat(63)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "Abc",
            "a--b",
            "-ab",
            "ab-",
            "a_b",
            "a.b",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_number_one_past_its_bound_is_refused() {
        let parse = |method: Method, path: &str, query: &str| {
            Target::parse(&method, path, Some(query)).map(|t| t.operation)
        };
        let (post, get, put) = (Method::POST, Method::GET, Method::PUT);
        let messages = "/q12/messages";
        for (method, path, query) in [
            (&post, messages, "visibilitytimeout=604801"),
            (&post, messages, "visibilitytimeout=-1"),
            (&post, messages, "messagettl=0"),
            (&post, messages, "messagettl=-2"),
            (&post, messages, "messagettl=99999999999999999999"),
            (&get, messages, "numofmessages=33"),
            (&get, messages, "numofmessages=0"),
            (&get, messages, "visibilitytimeout=0"),
            (&get, messages, "visibilitytimeout=604801"),
            (&get, messages, "peekonly=true&numofmessages=33"),
            (
                &put,
                "/q12/messages/id",
                "popreceipt=r&visibilitytimeout=604801",
            ),
            (&put, "/q12/messages/id", "popreceipt=r"),
            (&get, "/", "comp=list&maxresults=0"),
        ] {
            let failure = parse(method.clone(), path, query).unwrap_err();
            assert_eq!(failure.status, 400, "{method} {path}?{query}");
            assert_ne!(failure.code, "InvalidResourceName", "{path}?{query}");
        }
        assert_eq!(
            parse(
                Method::GET,
                "/q12/messages",
                "numofmessages=32&visibilitytimeout=604800"
            ),
            Ok(Operation::GetMessages {
                count: 32,
                visibility: MAX_VISIBILITY
            })
        );
        assert_eq!(
            parse(
                Method::POST,
                "/q12/messages",
                "messagettl=-1&visibilitytimeout=604800"
            ),
            Ok(Operation::PutMessage(PutOptions {
                visibility: MAX_VISIBILITY,
                ttl: None
            }))
        );
    }
}
