//! What the front reads of a request, and what it answers.

use http::{HeaderMap, Method};

use crate::auth::{Credential, KeyRange};
use crate::value::DateTime;

/// A request as the front reads it.
#[derive(Debug)]
pub struct Asked<'a> {
    /// Its method.
    pub method: &'a Method,
    /// Its path below the account, percent-decoded, starting with `/`.
    pub path: &'a str,
    /// Its query's pairs, percent-decoded.
    pub query: &'a [(String, String)],
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its body.
    pub body: &'a [u8],
    /// The table's URL without the table (`http://host/account`), for OData links.
    pub base: &'a str,
    /// The time it is answered at.
    pub now: DateTime,
    /// The keys its credentials reach, when a table SAS bounds them: every entity it reads
    /// or writes is within them.
    pub within: Option<&'a KeyRange>,
    /// Its credentials, for what a batch's operations each need (`None`: the operator let
    /// anyone do anything).
    pub credential: Option<&'a Credential>,
}

/// An answer: its status, headers and JSON body (or none), whole.
pub use ifmatch_azure::Answer;
