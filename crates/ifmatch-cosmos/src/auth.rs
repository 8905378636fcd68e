//! Cosmos DB's authorization: the `authorization` header holds
//! `type=master&ver=1.0&sig={signature}` (URL-encoded), the signature an HMAC-SHA256 under
//! the account's key of the verb, the resource type, the resource link and the request's
//! date (`x-ms-date`, else `Date`), each on a line, the verb, type and date lowercased; or
//! `type=aad&ver=1.0&sig={token}`, an Entra ID token whose principal's roles are judged by the
//! data action Azure names for each operation ([`permit`]); or `type=resource&ver=1.0&sig=`, a
//! permission's resource token ([`crate::resource_token`]).

use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method};
use ifmatch_azure::Account;
use ifmatch_azure::identity::Access;

use crate::address::Address;
use crate::failure::{Code, Failure};

/// How far a request's date may be from the server's clock.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// Where a request came: the host it named, and whether over HTTPS.
#[derive(Debug, Clone, Copy)]
pub struct Reached<'a> {
    /// The `Host` (its port aside).
    pub host: &'a str,
    /// Over HTTPS.
    pub https: bool,
}

/// Who a request's credentials say it comes from.
#[derive(Debug, Clone)]
pub enum Caller {
    /// The account's key: everything.
    Key,
    /// An Entra ID token: what its principal's roles allow ([`permit`]).
    Token(Access),
    /// A resource token: what its permission grants.
    Resource(crate::resource_token::Grant),
}

/// The account among `accounts` whose key signed the request, or whose trusted issuer signed
/// its token (then with what the token allows), or whose permission made its resource token,
/// or why none did, in words a user can act on:
/// 401 `Unauthorized` for a missing or wrong token, 403 `Forbidden` for a token signed for
/// another time (Azure's answers, which the SDKs tell apart: a wrong key, or a clock to set).
pub fn authorize<'a>(
    accounts: Vec<&'a Account>,
    method: &http::Method,
    headers: &HeaderMap,
    address: &Address,
    (reached, now): (Reached<'_>, SystemTime),
) -> Result<(&'a Account, Caller), Failure> {
    let header = (headers.get(http::header::AUTHORIZATION))
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| refused("Required Header authorization is missing. Ensure a valid Authorization token is passed."))?;
    let decoded = percent_encoding::percent_decode_str(header).decode_utf8_lossy();
    let mut kind = None;
    let mut signature = None;
    for pair in decoded.split('&') {
        match pair.split_once('=') {
            Some(("type", value)) => kind = Some(value),
            Some(("sig", value)) => signature = Some(value),
            _ => {}
        }
    }
    if kind == Some("aad") {
        let token = signature.unwrap_or_default();
        let account = accounts[0];
        return entra(account, token, reached, now).map(|access| (account, Caller::Token(access)));
    }
    if kind == Some("resource") {
        let seconds = (now.duration_since(std::time::UNIX_EPOCH))
            .unwrap_or_default()
            .as_secs();
        let (account, grant) =
            crate::resource_token::read(&accounts, signature.unwrap_or_default(), seconds)?;
        return Ok((account, Caller::Resource(grant)));
    }
    if kind != Some("master") {
        return Err(refused(
            "The authorization token is neither a master key token (type=master), an Entra ID one (type=aad) nor a resource token (type=resource).",
        ));
    }
    let signature =
        signature.ok_or_else(|| refused("The authorization token has no signature."))?;
    let date = (headers
        .get(ifmatch_azure::X_MS_DATE)
        .or(headers.get(http::header::DATE)))
    .and_then(|value| value.to_str().ok())
    .ok_or_else(|| refused("The request has no x-ms-date or Date header."))?;
    let when = httpdate::parse_http_date(date)
        .map_err(|_| refused("The request's x-ms-date is not an HTTP date."))?;
    let apart = now
        .duration_since(when)
        .or_else(|_| when.duration_since(now))
        .unwrap_or_default();
    if apart > SKEW {
        // Azure's words: a token holds from its date for 15 minutes (and as long before it,
        // for clocks that run ahead).
        let time = httpdate::fmt_http_date;
        return Err(Failure::new(
            Code::Forbidden,
            format!(
                "The authorization token is not valid at the current time. Please create another \
                 token and retry (token start time: {}, token expiry time: {}, current server \
                 time: {}).",
                time(when),
                time(when + SKEW),
                time(now)
            ),
        ));
    }
    let text = string_to_sign(method, address, date);
    accounts
        .into_iter()
        .find(|account| ifmatch_azure::auth::verify(account, &text, signature))
        .map(|account| (account, Caller::Key))
        .ok_or_else(|| {
            refused(&format!(
                "The input authorization token can't serve the request. The wrong key is \
                 being used or the expected payload is not built as per the protocol. Server \
                 used the following payload to sign: '{}'",
                text.replace('\n', "\\n")
            ))
        })
}

/// What an Entra ID token allows in `account`: over HTTPS, signed by an issuer the account
/// trusts, for Cosmos DB's audience, the account's own or the endpoint's host (what the SDKs
/// ask a credential for).
fn entra(
    account: &Account,
    token: &str,
    reached: Reached<'_>,
    now: SystemTime,
) -> Result<Access, Failure> {
    let Some(identity) = account.identity() else {
        return Err(refused(
            "Entra ID tokens (type=aad) are not taken by this server.",
        ));
    };
    if !reached.https {
        return Err(refused(
            "An Entra ID token (type=aad) is taken over HTTPS only (ifmatch serve --https or --cosmos-https).",
        ));
    }
    let audiences = [
        "https://cosmos.azure.com".to_owned(),
        format!("https://{}.documents.azure.com", account.name()),
        format!("https://{}", reached.host),
    ];
    ifmatch_azure::auth::token_access(identity, account, token, &audiences, now)
        .map_err(|why| refused(&format!("The Entra ID token was refused: {why}")))
}

/// Whether `access` permits what the request asks, by the data action Azure's documentation
/// names for it (`Microsoft.DocumentDB/databaseAccounts/readMetadata`, `.../items/create`,
/// `.../executeQuery`, ...), at the request's scope (`/`, `/dbs/{db}`, `/dbs/{db}/colls/{coll}`):
/// Cosmos's 403 with substatus 5301 when not; 5300 for the management operations (creating,
/// replacing and deleting databases and containers), which Azure never takes with a token on the
/// data plane.
pub fn permit(
    access: &Access,
    (method, headers, body): (&Method, &HeaderMap, &[u8]),
    address: &Address,
    account: &str,
) -> Result<(), Failure> {
    let scope = match address {
        Address::Account | Address::Databases | Address::Offers | Address::Offer(_) => {
            "/".to_owned()
        }
        Address::Database(db)
        | Address::Containers(db)
        | Address::Users(db)
        | Address::User(db, _)
        | Address::Permissions(db, _)
        | Address::Permission(db, ..) => format!("/dbs/{db}"),
        Address::Container(db, coll)
        | Address::Documents(db, coll)
        | Address::Document(db, coll, _)
        | Address::Ranges(db, coll)
        | Address::Conflicts(db, coll)
        | Address::Conflict(db, coll, _)
        | Address::Scripts(db, coll, _)
        | Address::Script(db, coll, ..) => format!("/dbs/{db}/colls/{coll}"),
    };
    // Running a stored procedure is data; writing any script is management.
    let runs = method == Method::POST
        && matches!(
            address,
            Address::Script(_, _, crate::address::Scripts::Procedures, _)
        );
    let changes = !matches!(method, &Method::GET | &Method::HEAD);
    let management = (changes
        && matches!(
            address,
            Address::Databases
                | Address::Database(_)
                | Address::Containers(_)
                | Address::Container(..)
                | Address::Scripts(..)
                | Address::Script(..)
                | Address::Ranges(..)
        )
        && !runs)
        || matches!(
            address,
            Address::Users(_)
                | Address::User(..)
                | Address::Permissions(..)
                | Address::Permission(..)
                | Address::Offers
                | Address::Offer(_)
        );
    if management {
        return Err(Failure::new(
            Code::Forbidden,
            format!(
                "Request blocked by Auth {account}: {method} on {scope} is a management operation, \
                 which an Entra ID token is never allowed on the data plane: use the account key, \
                 or Azure's management API."
            ),
        )
        .with_substatus(5300));
    }
    for action in actions(method, headers, body, address) {
        let full = format!("Microsoft.DocumentDB/databaseAccounts/{action}");
        // The account's own read, which every SDK makes first, takes an assignment anywhere.
        let allowed = match address {
            Address::Account => access.allows_somewhere(&[&full]),
            _ => access.allows(&[&full], &scope),
        };
        if !allowed {
            return Err(Failure::new(
                Code::Forbidden,
                format!(
                    "Request blocked by Auth {account}: principal [{}] has no role assignment \
                     that permits [{full}] on resource [{scope}].",
                    access.principal
                ),
            )
            .with_substatus(5301));
        }
    }
    Ok(())
}

/// The data actions (each needed) of a request below the account.
fn actions(
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
    address: &Address,
) -> Vec<&'static str> {
    let flag = |name: &str| {
        (headers.get(name))
            .is_some_and(|v| v.to_str().is_ok_and(|v| v.eq_ignore_ascii_case("true")))
    };
    match (address, method) {
        (Address::Documents(..), &Method::GET) if headers.contains_key("a-im") => {
            vec!["sqlDatabases/containers/readChangeFeed"]
        }
        (Address::Documents(..), &Method::GET) => vec!["sqlDatabases/containers/executeQuery"],
        (Address::Documents(..), &Method::POST) if crate::document::is_query(headers) => {
            vec!["sqlDatabases/containers/executeQuery"]
        }
        (Address::Documents(..), &Method::POST) if flag("x-ms-cosmos-is-batch-request") => {
            // Each operation of the batch by its own action.
            let operations: Vec<serde_json::Value> =
                serde_json::from_slice(body).unwrap_or_default();
            let mut actions: Vec<&'static str> = operations
                .iter()
                .map(
                    |op| match op["operationType"].as_str().unwrap_or_default() {
                        "Read" => "sqlDatabases/containers/items/read",
                        "Create" => "sqlDatabases/containers/items/create",
                        "Upsert" => "sqlDatabases/containers/items/upsert",
                        "Delete" => "sqlDatabases/containers/items/delete",
                        _ => "sqlDatabases/containers/items/replace",
                    },
                )
                .collect();
            actions.dedup();
            actions
        }
        (Address::Documents(..), &Method::POST) if flag("x-ms-documentdb-is-upsert") => {
            vec!["sqlDatabases/containers/items/upsert"]
        }
        (Address::Documents(..), _) => vec!["sqlDatabases/containers/items/create"],
        (Address::Document(..), &Method::GET | &Method::HEAD) => {
            vec!["sqlDatabases/containers/items/read"]
        }
        (Address::Document(..), &Method::DELETE) => vec!["sqlDatabases/containers/items/delete"],
        (Address::Script(..), &Method::POST) => {
            vec!["sqlDatabases/containers/executeStoredProcedure"]
        }
        // Replace and patch.
        (Address::Document(..), _) => vec!["sqlDatabases/containers/items/replace"],
        _ => vec!["readMetadata"],
    }
}

/// What a master-key token signs for `method` on `address` at `date`.
pub fn string_to_sign(method: &http::Method, address: &Address, date: &str) -> String {
    let (kind, link) = address.signed();
    format!(
        "{}\n{kind}\n{link}\n{}\n\n",
        method.as_str().to_ascii_lowercase(),
        date.to_ascii_lowercase()
    )
}

/// The `authorization` value of a master-key token for `text` under `key`: for tests and
/// clients that sign.
pub fn token(key: &[u8], text: &str) -> String {
    let signature = ifmatch_azure::auth::sign(key, text);
    let token = format!("type=master&ver=1.0&sig={signature}");
    percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn refused(message: &str) -> Failure {
    Failure::new(Code::Unauthorized, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn each_operation_is_judged_by_its_data_action_one_role_allowed_and_one_refused() {
        const READER: &str = "Cosmos DB Built-in Data Reader";
        const CONTRIBUTOR: &str = "Cosmos DB Built-in Data Contributor";
        const BLOBS: &str = "Storage Blob Data Owner";
        // A read is the reader's and not a blob owner's; a write the contributor's, not the
        // reader's.
        const READ: (&str, &str) = (READER, BLOBS);
        const WRITE: (&str, &str) = (CONTRIBUTOR, READER);
        let batch = br#"[{"operationType": "Create"}, {"operationType": "Read"}]"#;
        let docs = "/dbs/d/colls/c/docs";
        // The method, path, a header (`name: value`) and body; a role allowed, a role refused.
        type Case = (
            &'static str,
            &'static str,
            &'static str,
            &'static [u8],
            (&'static str, &'static str),
        );
        let query = "x-ms-documentdb-isquery: True";
        let upsert = "x-ms-documentdb-is-upsert: True";
        let batched = "x-ms-cosmos-is-batch-request: True";
        let cases: [Case; 14] = [
            ("GET", "/", "", b"", READ),
            ("GET", "/dbs", "", b"", READ),
            ("GET", "/dbs/d", "", b"", READ),
            ("GET", "/dbs/d/colls/c", "", b"", READ),
            ("GET", "/dbs/d/colls/c/pkranges", "", b"", READ),
            ("GET", docs, "", b"", READ),
            ("GET", docs, "a-im: Incremental feed", b"", READ),
            ("POST", docs, query, b"{}", READ),
            ("POST", docs, "", b"{}", WRITE),
            ("POST", docs, upsert, b"{}", WRITE),
            ("POST", docs, batched, batch, WRITE),
            ("GET", "/dbs/d/colls/c/docs/a", "", b"", READ),
            ("PUT", "/dbs/d/colls/c/docs/a", "", b"{}", WRITE),
            ("DELETE", "/dbs/d/colls/c/docs/a", "", b"", WRITE),
        ];
        let access = |role: &str| Access::holding(role, "/dbs/d/colls/c");
        for (method, path, header, body, (allowed, refused)) in cases {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let mut headers = HeaderMap::new();
            if let Some((name, value)) = header.split_once(": ") {
                headers.insert(name, value.parse().unwrap());
            }
            let address = Address::parse(path).unwrap();
            let judge = |role| {
                permit(
                    &access(role),
                    (&method, &headers, body),
                    &address,
                    "localhost",
                )
            };
            // The database and the list of databases are above the assignment's scope.
            let above = matches!(address, Address::Databases | Address::Database(_));
            match above {
                true => assert_eq!(judge(allowed).unwrap_err().substatus, Some(5301)),
                false => assert_eq!(judge(allowed), Ok(()), "{method} {path}: {allowed}"),
            }
            let denied = judge(refused).unwrap_err();
            assert_eq!(
                (denied.code, denied.substatus),
                (Code::Forbidden, Some(5301)),
                "{method} {path}"
            );
        }
        // Management is never a token's, whatever its role.
        let none = HeaderMap::new();
        for (method, path) in [
            (Method::POST, "/dbs"),
            (Method::DELETE, "/dbs/d"),
            (Method::POST, "/dbs/d/colls"),
            (Method::PUT, "/dbs/d/colls/c"),
            (Method::DELETE, "/dbs/d/colls/c"),
        ] {
            let address = Address::parse(path).unwrap();
            let denied = permit(
                &access(CONTRIBUTOR),
                (&method, &none, b"{}"),
                &address,
                "localhost",
            );
            assert_eq!(denied.unwrap_err().substatus, Some(5300), "{method} {path}");
        }
    }

    #[test]
    fn a_token_signed_with_the_key_passes_and_one_with_another_does_not() {
        let key = base64::engine::general_purpose::STANDARD.encode(b"the key");
        let account = Account::new("localhost", &[&key]).unwrap();
        let address = Address::parse("/dbs/shop/colls/carts/docs/a").unwrap();
        let now = SystemTime::now();
        let date = httpdate::fmt_http_date(now);
        let text = string_to_sign(&http::Method::GET, &address, &date);
        assert_eq!(
            text,
            format!(
                "get\ndocs\ndbs/shop/colls/carts/docs/a\n{}\n\n",
                date.to_lowercase()
            )
        );
        let mut headers = HeaderMap::new();
        headers.insert("x-ms-date", date.parse().unwrap());
        let signed = |key: &[u8]| {
            let mut headers = headers.clone();
            headers.insert("authorization", token(key, &text).parse().unwrap());
            headers
        };
        let get = http::Method::GET;
        let accounts = vec![&account];
        let at = |now| {
            (
                Reached {
                    host: "localhost",
                    https: true,
                },
                now,
            )
        };
        assert!(
            authorize(
                accounts.clone(),
                &get,
                &signed(b"the key"),
                &address,
                at(now)
            )
            .is_ok()
        );
        assert!(
            authorize(
                accounts.clone(),
                &get,
                &signed(b"another"),
                &address,
                at(now)
            )
            .is_err()
        );
        assert!(
            authorize(
                accounts.clone(),
                &http::Method::DELETE,
                &signed(b"the key"),
                &address,
                at(now)
            )
            .is_err()
        );
        for late in [
            now + Duration::from_secs(16 * 60),
            now - Duration::from_secs(16 * 60),
            now + Duration::from_secs(24 * 3600),
        ] {
            let refused = authorize(
                accounts.clone(),
                &get,
                &signed(b"the key"),
                &address,
                at(late),
            );
            let refused = refused.unwrap_err();
            assert_eq!(refused.code, Code::Forbidden);
            assert!(
                refused
                    .message
                    .starts_with("The authorization token is not valid at the current time")
            );
        }
        let wrong = authorize(
            accounts.clone(),
            &get,
            &signed(b"another"),
            &address,
            at(now),
        );
        assert_eq!(wrong.unwrap_err().code, Code::Unauthorized);
        assert!(authorize(accounts.clone(), &get, &headers, &address, at(now)).is_err());
    }
}
