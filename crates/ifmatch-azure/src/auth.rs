//! Who is asking, as every Azure storage service reads it: the `Authorization` header (Shared
//! Key and Shared Key Lite, with the Blob, Queue and File services' strings-to-sign), the window,
//! protocol and address every shared access signature carries, the account SAS, and HMAC.
//! What a signature grants is each service's: `ifmatch_blob::auth`, `ifmatch_table::auth`.
//!
//! The signatures are HMAC-SHA256 over a string-to-sign built from the request, keyed with the
//! account's key (`hmac`, compared in constant time). The rules of each string-to-sign come from
//! Azure's REST reference ("Authorize with Shared Key", "Create an account SAS", "Create a
//! service SAS"); the official SDKs' requests are the tests' proof that they match.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use http::header::{self, HeaderMap};
use http::{Method, Uri};
use ifmatch_core::date::{HttpDate, parse_http_date};
use sha2::Sha256;
use time::macros::format_description;

use crate::account::Account;
use crate::error_code::CommonCode;
use crate::headers::{CONTENT_MD5, X_MS_DATE};
use crate::identity::Access;

/// How far a Shared Key request's date may be from the server's clock.
pub const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

use crate::request::Client;

/// What a request's credentials allow: `G` is what a shared access signature grants (each
/// service has its own [`Grant`] scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential<G> {
    /// Signed with the account's key: everything in the account.
    Key,
    /// A shared access signature: what it grants (boxed, as the token's access: every request
    /// holds its credential while it runs, most of them the key's or none).
    Sas(Box<G>),
    /// An Entra ID bearer token: what its principal's roles allow.
    Token(Box<Access>),
    /// No credentials.
    Anonymous,
}

/// What a valid shared access signature grants: its permissions over a scope (`S`: what the
/// service's signatures reach).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant<S> {
    /// The signed permissions (`sp`), as letters.
    pub permissions: String,
    /// What it reaches.
    pub scope: S,
}

/// An authentication or authorization failure: its code and what to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The error code.
    pub code: CommonCode,
    /// What failed, for the error's message.
    pub detail: String,
    /// The `WWW-Authenticate` challenge to answer with (a refused bearer token).
    pub challenge: Option<String>,
}

/// A denial with `code`.
pub fn denied(code: CommonCode, detail: impl Into<String>) -> Denied {
    Denied {
        code,
        detail: detail.into(),
        challenge: None,
    }
}

/// A refused bearer token: 401 `InvalidAuthenticationInfo` with the challenge the SDKs read
/// (where to get a token, for which resource).
pub fn unauthenticated(tenant: &str, detail: impl Into<String>) -> Denied {
    Denied {
        challenge: Some(format!(
            "Bearer authorization_uri=https://login.microsoftonline.com/{tenant}/oauth2/authorize \
             resource_id={STORAGE_AUDIENCE}"
        )),
        ..denied(CommonCode::InvalidAuthenticationInfo, detail)
    }
}

impl Access {
    /// [`Access::allows`], or Storage's 403 `AuthorizationPermissionMismatch` naming what
    /// was needed.
    pub fn check(&self, actions: &[&str], resource: &str) -> Result<(), Denied> {
        if self.allows(actions, resource) {
            return Ok(());
        }
        Err(denied(
            CommonCode::AuthorizationPermissionMismatch,
            format!(
                "principal {} has no role assignment at {resource} that permits {}",
                self.principal,
                actions.join(" or ")
            ),
        ))
    }
}

/// The audience of every Storage service's tokens.
pub const STORAGE_AUDIENCE: &str = "https://storage.azure.com";

/// An `AuthenticationFailed` denial.
pub fn failed(detail: impl Into<String>) -> Denied {
    denied(CommonCode::AuthenticationFailed, detail)
}

/// A request without credentials refused by a service that takes Shared Key and shared access
/// signatures: `why` says when it serves none without (`queues are never public`).
pub fn anonymous_refused(why: &str) -> Denied {
    failed(format!(
        "this request needs credentials: a Shared Key signature or a shared access signature \
         ({why})"
    ))
}

/// The parts of a request authentication reads.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI as sent (its path percent-encoded, the account segment included when
    /// path-style).
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// What the host knows of the client: its address, whether it came over HTTPS.
    pub client: Client,
    /// The container it addresses, decoded (empty for the account).
    pub container: &'a str,
    /// The blob it addresses, decoded (empty for a container).
    pub blob: &'a str,
}

impl<'a> Signed<'a> {
    /// What authentication reads of the request `parts` from `client` that addresses
    /// `container` and `blob` (empty where it addresses none).
    pub fn of(
        parts: &'a http::request::Parts,
        client: Client,
        container: &'a str,
        blob: &'a str,
    ) -> Self {
        Self {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            client,
            container,
            blob,
        }
    }
}

/// How every service reads a request's credentials, given its string-to-sign (for Shared
/// Key, or Shared Key Lite when `true`) and how it reads a SAS: the
/// `Authorization` header's scheme, account and date checked, the signature compared; else a
/// SAS if the query is signed; else none.
pub fn credentials<G>(
    account: &Account,
    request: Signed<'_>,
    now: SystemTime,
    strings: impl FnOnce(bool) -> String,
    sas: impl FnOnce(&QueryPairs) -> Result<G, Denied>,
) -> Result<Credential<G>, Denied> {
    let (headers, uri) = (request.headers, request.uri);
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| failed("the Authorization header is not ASCII"))?;
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let lite = match scheme {
            "SharedKey" => false,
            "SharedKeyLite" => true,
            "Bearer" => {
                return bearer(account, request, rest.trim(), now)
                    .map(|access| Credential::Token(Box::new(access)));
            }
            _ => {
                return Err(failed(format!(
                    "the {scheme} authorization scheme is not supported here: sign with \
                     SharedKey or SharedKeyLite, send a bearer token, or use a shared access \
                     signature"
                )));
            }
        };
        let (name, signature) = rest.trim().split_once(':').ok_or_else(|| {
            failed("the Authorization header is not `SharedKey account:signature`")
        })?;
        if name != account.name() {
            return Err(failed(format!(
                "the request is signed for account {name:?} but addresses {:?}",
                account.name()
            )));
        }
        check_date(headers, now)?;
        let text = strings(lite);
        if !verify(account, &text, signature) {
            return Err(failed(format!(
                "the signature does not match: the server signed {text:?}"
            )));
        }
        return Ok(Credential::Key);
    }
    let query = QueryPairs::of(uri);
    if query.get("sig").is_some() {
        return sas(&query).map(|grant| Credential::Sas(Box::new(grant)));
    }
    Ok(Credential::Anonymous)
}

/// What a bearer token allows, as every Storage service checks it: over HTTPS, from version
/// 2017-11-09, signed by an issuer the account trusts for Storage's audience or the account's
/// own.
fn bearer(
    account: &Account,
    request: Signed<'_>,
    token: &str,
    now: SystemTime,
) -> Result<Access, Denied> {
    let version = (request.headers.get(crate::MS_VERSION))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if version < "2017-11-09" {
        return Err(failed(
            "Authentication scheme Bearer is not supported in this version: send x-ms-version \
             2017-11-09 or later",
        ));
    }
    let Some(identity) = account.identity() else {
        return Err(failed(
            "bearer tokens are not taken by this server: it trusts no issuer of them",
        ));
    };
    if !request.client.https {
        return Err(unauthenticated(
            identity.tenant(),
            "a bearer token is taken over HTTPS only (ifmatch serve --https)",
        ));
    }
    let name = account.name();
    let audiences: Vec<String> = std::iter::once(STORAGE_AUDIENCE.to_owned())
        .chain(
            ["blob", "queue", "table", "dfs"]
                .map(|s| format!("https://{name}.{s}.core.windows.net")),
        )
        .collect();
    token_access(identity, account, token, &audiences, now)
        .map_err(|why| unauthenticated(identity.tenant(), why))
}

/// What `token` allows in `account` if `identity` trusts its issuer for one of `audiences`,
/// or why not (every service's words around it are its own).
pub fn token_access(
    identity: &crate::identity::Identity,
    account: &Account,
    token: &str,
    audiences: &[String],
    now: SystemTime,
) -> Result<Access, String> {
    (identity.verify(token, audiences, account.name(), now)).map_err(|e| e.to_string())
}

/// Checks a shared access signature's `sig` against `text`, its string-to-sign.
pub fn verify_sas(account: &Account, text: &str, query: &QueryPairs) -> Result<(), Denied> {
    if verify(account, text, &query.get("sig").unwrap_or_default()) {
        return Ok(());
    }
    Err(failed(
        "the shared access signature does not match its fields and this account's key",
    ))
}

/// The permissions an operation needs: any one of these letters, or all of them.
#[derive(Debug, Clone, Copy)]
pub enum Needs<'a> {
    /// Any one (the blob service's rule: Put Blob takes `c` or `w`).
    AnyOf(&'a str),
    /// All (the Table service's Insert Or Replace needs `a` and `u`).
    AllOf(&'a str),
}

impl<S> Grant<S> {
    /// `permissions` (letters) over `scope`.
    pub fn new(permissions: impl Into<String>, scope: S) -> Self {
        Self {
            permissions: permissions.into(),
            scope,
        }
    }

    /// Whether this grant allows an operation its scope covers (`in_scope`, as the service
    /// reads it) that needs `needs`.
    pub fn allows(&self, in_scope: bool, needs: Needs<'_>) -> Result<(), Denied> {
        if !in_scope {
            return Err(denied(
                CommonCode::AuthorizationResourceTypeMismatch,
                "this shared access signature does not cover this resource",
            ));
        }
        let has = |p| self.permissions.contains(p);
        let (allowed, which) = match needs {
            Needs::AnyOf(letters) => (letters.chars().any(has), letters),
            Needs::AllOf(letters) => (letters.chars().all(has), letters),
        };
        if !allowed {
            return Err(denied(
                CommonCode::AuthorizationPermissionMismatch,
                format!(
                    "this operation needs the permissions {which:?} ({}); the signature grants {:?}",
                    if matches!(needs, Needs::AnyOf(_)) {
                        "one of them"
                    } else {
                        "all"
                    },
                    self.permissions
                ),
            ));
        }
        Ok(())
    }
}

/// Checks what every shared access signature carries whatever it signs, for the blob and the
/// Table service alike: no user delegation (the blob service's alone: [`check_window`]) or
/// stored policy, a signed version of 2015-04-05 or later, the time window (`st`, `se`), the
/// protocol (`spr`) and the client's address (`sip`). Answers the signed version.
pub fn check_sas_window(
    query: &QueryPairs,
    client: Client,
    now: SystemTime,
) -> Result<String, Denied> {
    if query.get("skoid").is_some() {
        return Err(failed(
            "user delegation shared access signatures (Entra ID) are the blob service's: \
             sign with the account key",
        ));
    }
    check_window(query, client, now)
}

/// [`check_sas_window`] with user delegation taken (the blob service's, which checks the
/// delegation itself: `crate::delegation`).
pub fn check_window(query: &QueryPairs, client: Client, now: SystemTime) -> Result<String, Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    if query.get("si").is_some() {
        return Err(failed(
            "stored access policies (`si`) are not supported here: sign the permissions and \
             the expiry into the signature",
        ));
    }
    let version = field("sv");
    if version.len() != 10 || version.as_str() < "2015-04-05" {
        return Err(failed(format!(
            "signed version (sv) {version:?}: 2015-04-05 or later is needed"
        )));
    }
    let start = optional_time(query, "st")?;
    let expiry =
        optional_time(query, "se")?.ok_or_else(|| failed("the signature has no expiry (se)"))?;
    let now = unix(now);
    if start.is_some_and(|start| now < start) || now >= expiry {
        // Azure's words, which tools show as they are.
        let at = |secs: i64| HttpDate::from_unix_seconds(secs).to_string();
        return Err(failed(format!(
            "Signature not valid in the specified time frame: Start [{}] - Expiry [{}] - Current [{}]",
            start.map(at).unwrap_or_default(),
            at(expiry),
            at(now)
        )));
    }
    match field("spr").as_str() {
        "" | "https,http" | "http,https" => {}
        "https" if client.https => {}
        "https" => {
            return Err(denied(
                CommonCode::AuthorizationProtocolMismatch,
                "the signature allows HTTPS only",
            ));
        }
        other => return Err(failed(format!("signed protocol (spr) {other:?}"))),
    }
    let ip = field("sip");
    if !ip.is_empty() && !client.ip.is_some_and(|client| ip_in(&ip, client)) {
        return Err(denied(
            CommonCode::AuthorizationSourceIPMismatch,
            format!("the signature allows requests from {ip} only"),
        ));
    }
    Ok(version)
}

/// A stored access policy (Set Queue ACL and its kin): the start, expiry and permissions a
/// service SAS that names it (`si`) may leave out. Each field is in the policy or in the
/// signature, never both; together they must give an expiry and permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredPolicy {
    /// Its `<Start>`, ISO 8601.
    pub start: Option<String>,
    /// Its `<Expiry>`, ISO 8601.
    pub expiry: Option<String>,
    /// Its `<Permission>` letters.
    pub permissions: Option<String>,
}

impl StoredPolicy {
    /// Whether a policy's time is one a SAS may carry (checked when the policy is set).
    pub fn valid_time(text: &str) -> bool {
        iso8601(text).is_some()
    }
}

/// The resource types an account SAS covers (`srt`: service, container, object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceTypes {
    /// The service's own operations (`s`).
    pub service: bool,
    /// Containers, or tables (`c`).
    pub container: bool,
    /// Blobs, or entities (`o`).
    pub object: bool,
}

/// An account SAS's string-to-sign (any service) and the resource types it covers, if the
/// signature covers `service` (`b`, `t`: one of the letters of `ss`).
pub fn account_sas(
    account: &Account,
    query: &QueryPairs,
    service: char,
) -> Result<(String, ResourceTypes), Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    let services = field("ss");
    if !services.contains(service) {
        return Err(denied(
            CommonCode::AuthorizationServiceMismatch,
            "the signature does not cover this service (ss)",
        ));
    }
    let version = field("sv");
    let mut text = [
        account.name(),
        &field("sp"),
        &services,
        &field("srt"),
        &field("st"),
        &field("se"),
        &field("sip"),
        &field("spr"),
        &version,
    ]
    .join("\n");
    text.push('\n');
    if version.as_str() >= "2020-12-06" {
        text.push_str(&field("ses"));
        text.push('\n');
    }
    let types = field("srt");
    let types = ResourceTypes {
        service: types.contains('s'),
        container: types.contains('c'),
        object: types.contains('o'),
    };
    Ok((text, types))
}

/// Whether `client` is `range` (one address, or `low-high` inclusive).
fn ip_in(range: &str, client: IpAddr) -> bool {
    let (low, high) = range.split_once('-').unwrap_or((range, range));
    match (low.parse::<IpAddr>(), high.parse::<IpAddr>()) {
        (Ok(low), Ok(high)) => low <= client && client <= high,
        _ => false,
    }
}

/// A SAS time field, as Unix seconds; absent is `None`, malformed an error.
pub(crate) fn optional_time(query: &QueryPairs, name: &str) -> Result<Option<i64>, Denied> {
    let Some(text) = query.get(name) else {
        return Ok(None);
    };
    iso8601(&text)
        .map(Some)
        .ok_or_else(|| failed(format!("{name}={text:?} is not an ISO 8601 UTC time")))
}

/// Unix seconds of `YYYY-MM-DD`, `YYYY-MM-DDThh:mmZ` or `YYYY-MM-DDThh:mm:ss[.fff]Z`, the
/// forms a SAS may carry (its fraction of a second is read, and passed over).
pub fn iso8601(text: &str) -> Option<i64> {
    let form = format_description!(
        "[year]-[month]-[day][optional [T[hour]:[minute][optional [:[second][optional [.[subsecond digits:1+]]]]]Z]]"
    );
    let ticks = crate::iso8601::read(text, form, usize::MAX)?;
    Some(ticks.div_euclid(crate::iso8601::TICKS_PER_SECOND))
}

/// Seconds since 1970 of `time` (negative before).
pub fn unix(time: SystemTime) -> i64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Refuses a Shared Key request without a date, or one further than [`MAX_SKEW`] from `now`.
fn check_date(headers: &HeaderMap, now: SystemTime) -> Result<(), Denied> {
    let date = headers
        .get(X_MS_DATE)
        .or_else(|| headers.get(header::DATE))
        .ok_or_else(|| failed("a signed request needs x-ms-date or Date"))?;
    let date = parse_http_date(date)
        .ok_or_else(|| failed("x-ms-date / Date is not an HTTP date"))?
        .unix_seconds();
    let apart = date - unix(now);
    if apart.unsigned_abs() > MAX_SKEW.as_secs() {
        // Azure's words for an old date; a date ahead is refused alike (403).
        let date = HttpDate::from_unix_seconds(date);
        return Err(failed(match apart < 0 {
            true => format!("Request date header too old: '{date}'"),
            false => format!(
                "Request date header not valid: '{date}' is more than 15 minutes ahead of the server's clock"
            ),
        }));
    }
    Ok(())
}

/// Whether `signature` (base64) is the HMAC-SHA256 of `text` under one of the account's keys;
/// compared in constant time. Every dialect's signatures are checked here (Shared Key, SAS,
/// Cosmos DB's master-key tokens).
pub fn verify(account: &Account, text: &str, signature: &str) -> bool {
    let Ok(signature) = STANDARD.decode(signature.trim()) else {
        return false;
    };
    account.keys().iter().any(|key| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(text.as_bytes());
        mac.verify_slice(&signature).is_ok()
    })
}

/// The signature of `text` under the account's first key, base64: what the server itself signs
/// for a client to give back (Cosmos DB's resource tokens), checked later by [`verify`].
pub fn sign_as(account: &Account, text: &str) -> String {
    sign(&account.keys()[0], text)
}

/// The signature of `text` under `key`, base64: for clients and tests that sign.
pub fn sign(key: &[u8], text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(text.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// A header's value for a string-to-sign: empty when absent (or not visible ASCII). Every
/// dialect's Shared Key strings take their fields so.
pub fn signed_field(headers: &HeaderMap, name: impl header::AsHeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The Shared Key string-to-sign of the Blob, Queue and File services (versions 2015-02-21 and
/// later: a `Content-Length` of 0 is signed as empty).
pub fn shared_key_string(account: &Account, request: Signed<'_>) -> String {
    let headers = request.headers;
    let length = match signed_field(headers, header::CONTENT_LENGTH) {
        "0" => "",
        length => length,
    };
    let mut text = [
        request.method.as_str(),
        signed_field(headers, header::CONTENT_ENCODING),
        signed_field(headers, header::CONTENT_LANGUAGE),
        length,
        signed_field(headers, CONTENT_MD5),
        signed_field(headers, header::CONTENT_TYPE),
        signed_date(headers),
        signed_field(headers, header::IF_MODIFIED_SINCE),
        signed_field(headers, header::IF_MATCH),
        signed_field(headers, header::IF_NONE_MATCH),
        signed_field(headers, header::IF_UNMODIFIED_SINCE),
        signed_field(headers, header::RANGE),
    ]
    .join("\n");
    push_resource(&mut text, account, request);
    let query = QueryPairs::of(request.uri);
    let mut names: Vec<String> = query.pairs.iter().map(|(n, _)| n.to_lowercase()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let mut values: Vec<&str> = query
            .pairs
            .iter()
            .filter(|(n, _)| n.to_lowercase() == name)
            .map(|(_, v)| v.as_str())
            .collect();
        values.sort_unstable();
        text.push('\n');
        text.push_str(&name);
        text.push(':');
        text.push_str(&values.join(","));
    }
    text
}

/// The Shared Key string-to-sign of the Blob, Queue and File services, or their Shared Key
/// Lite one when `lite`: what [`credentials`] takes of them.
pub fn storage_string(account: &Account, request: Signed<'_>, lite: bool) -> String {
    match lite {
        true => shared_key_lite_string(account, request),
        false => shared_key_string(account, request),
    }
}

/// The Shared Key Lite string-to-sign of the Blob, Queue and File services.
pub fn shared_key_lite_string(account: &Account, request: Signed<'_>) -> String {
    let headers = request.headers;
    let mut text = [
        request.method.as_str(),
        signed_field(headers, CONTENT_MD5),
        signed_field(headers, header::CONTENT_TYPE),
        signed_date(headers),
    ]
    .join("\n");
    push_resource(&mut text, account, request);
    if let Some(comp) = QueryPairs::of(request.uri).get("comp") {
        text.push_str("?comp=");
        text.push_str(&comp);
    }
    text
}

/// The `Date` a string-to-sign names: none when `x-ms-date` stands in for it.
fn signed_date(headers: &HeaderMap) -> &str {
    if headers.contains_key(X_MS_DATE) {
        ""
    } else {
        signed_field(headers, header::DATE)
    }
}

/// Ends `text` with the request's `x-ms-` headers and the resource it names (its account and
/// path), as both Shared Key strings-to-sign do.
fn push_resource(text: &mut String, account: &Account, request: Signed<'_>) {
    text.push('\n');
    push_canonical_headers(text, request.headers);
    text.push('/');
    text.push_str(account.name());
    text.push_str(request.uri.path());
}

/// Ends `out` with the `x-ms-` headers, lowercased and sorted, each `name:values\n`, a
/// name's values joined by `,` in their order, each value's runs of whitespace folded to one
/// space. Written in place, one pass over the fields: every signed request goes through here.
fn push_canonical_headers(out: &mut String, headers: &HeaderMap) {
    let mut fields: Vec<(&str, &header::HeaderValue)> = (headers.iter())
        .map(|(name, value)| (name.as_str(), value))
        .filter(|(name, _)| name.starts_with("x-ms-"))
        .collect();
    // Stable: the map gives a name's values together and in order, and they stay so.
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut last = None;
    for (name, value) in fields {
        if last == Some(name) {
            out.push(',');
        } else {
            if last.is_some() {
                out.push('\n');
            }
            out.push_str(name);
            out.push(':');
            last = Some(name);
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        // Most values have nothing to fold (no tab, no leading, trailing or double space, all
        // ASCII): written whole, where folding looks at each character's class.
        let bytes = value.as_bytes();
        let plain = !bytes.starts_with(b" ")
            && !bytes.ends_with(b" ")
            && bytes.windows(2).all(|pair| pair != b"  ")
            && bytes
                .iter()
                .all(|&b| b.is_ascii() && (b == b' ' || !b.is_ascii_whitespace()));
        if plain {
            out.push_str(&value);
            continue;
        }
        for (at, word) in value.split_whitespace().enumerate() {
            if at > 0 {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
    if last.is_some() {
        out.push('\n');
    }
}

/// A request's query, decoded.
#[derive(Debug)]
pub struct QueryPairs {
    pairs: Vec<(String, String)>,
}

impl QueryPairs {
    /// The pairs of `uri`'s query.
    pub fn of(uri: &Uri) -> Self {
        let pairs = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        Self { pairs }
    }

    /// This signature's fields completed by the stored access policy it names: `st`, `se` and
    /// `sp` taken from the policy where the signature leaves them out, and `si` dropped (the
    /// window is then checked as any signature's). A field in both is 400
    /// `InvalidQueryParameterValue`, as Azure answers it.
    pub fn with_policy(&self, policy: &StoredPolicy) -> Result<Self, Denied> {
        let mut pairs: Vec<(String, String)> = (self.pairs.iter())
            .filter(|(n, _)| n != "si")
            .cloned()
            .collect();
        let fields = [
            ("st", &policy.start),
            ("se", &policy.expiry),
            ("sp", &policy.permissions),
        ];
        for (name, stored) in fields {
            let Some(stored) = stored else { continue };
            if self.get(name).is_some() {
                return Err(denied(
                    CommonCode::InvalidQueryParameterValue,
                    format!(
                        "{name} is both in the signature and in the stored access policy it \
                         names: a field is in one of them. QueryParameterName: {name}"
                    ),
                ));
            }
            pairs.push((name.to_owned(), stored.clone()));
        }
        Ok(Self { pairs })
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_times() {
        assert_eq!(iso8601("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(iso8601("2026-11-22T08:00:00Z"), Some(1_795_334_400));
        assert_eq!(iso8601("2026-11-22T08:00Z"), Some(1_795_334_400));
        assert_eq!(iso8601("2026-11-22T08:00:00.1234567Z"), Some(1_795_334_400));
        assert_eq!(iso8601("2026-11-22"), Some(1_795_305_600));
        assert_eq!(iso8601("2000-03-01T00:00:00Z"), Some(951_868_800));
        for bad in [
            "",
            "2026-13-01T00:00Z",
            "2026-11-22T08:00:00",
            "x",
            "2026-11-22T8:0+0Z",
        ] {
            assert_eq!(iso8601(bad), None, "{bad}");
        }
    }

    #[test]
    fn canonical_headers_sorted_folded_and_joined() {
        let mut headers = HeaderMap::new();
        headers.append("x-ms-meta-b", "one  two\t three".parse().unwrap());
        headers.append("content-type", "text/plain".parse().unwrap());
        headers.append(
            "x-ms-date",
            "Tue, 01 Dec 2026 06:00:00 GMT".parse().unwrap(),
        );
        headers.append("x-ms-meta-b", " four ".parse().unwrap());
        headers.append("x-ms-meta-a", "".parse().unwrap());
        let mut out = String::new();
        push_canonical_headers(&mut out, &headers);
        assert_eq!(
            out,
            "x-ms-date:Tue, 01 Dec 2026 06:00:00 GMT\nx-ms-meta-a:\nx-ms-meta-b:one two three,four\n"
        );
        let mut none = String::new();
        push_canonical_headers(&mut none, &HeaderMap::new());
        assert_eq!(none, "");
    }

    #[test]
    fn ip_ranges() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(ip_in("127.0.0.1", ip("127.0.0.1")));
        assert!(ip_in("10.0.0.0-10.0.0.255", ip("10.0.0.7")));
        assert!(!ip_in("10.0.0.0-10.0.0.255", ip("10.0.1.7")));
        assert!(!ip_in("nonsense", ip("10.0.1.7")));
    }
}
