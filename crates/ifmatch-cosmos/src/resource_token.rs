//! Resource tokens: what a permission of a user grants, given to a client as the permission's
//! `_token` and sent back as `type=resource&ver=1.0&sig={token}`. A token is the grant itself
//! (the permission, its mode, its resource, its partition key, the permission's version and the
//! token's expiry), signed with the account's key, so any instance of a fleet checks it; the
//! endpoint then checks that the permission still stands as it was (deleted or replaced, its
//! tokens are refused).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderMap, Method};
use ifmatch_azure::Account;
use serde_json::Value as Json;

use crate::address::Address;
use crate::failure::{Code, Failure, bad_request};

/// How long a token holds when the request names no time (`x-ms-documentdb-expiry-seconds`).
pub const DEFAULT_SECONDS: u64 = 3600;
/// The shortest and longest a token may be asked to hold, in seconds (Azure's 10 s to 5 h).
pub const SECONDS: std::ops::RangeInclusive<u64> = 10..=18_000;

/// What a permission grants, as its token carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    /// The database it comes from.
    pub db: String,
    /// The user whose permission it is.
    pub user: String,
    /// The permission's id.
    pub permission: String,
    /// `All` (reads and writes) or only reads.
    pub all: bool,
    /// The resource's link: `dbs/{db}/colls/{coll}` or `.../docs/{id}`.
    pub resource: String,
    /// The one logical partition it reaches (the partition key's JSON array), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<Json>,
    /// The permission's version (`_etag`) when the token was made.
    pub version: String,
    /// Until when it holds, in seconds since the Unix epoch.
    pub expires: u64,
}

/// The token of `grant`, signed for `account`.
pub fn mint(account: &Account, grant: &Grant) -> String {
    let payload = serde_json::to_vec(grant).expect("a grant serializes");
    let payload = URL_SAFE_NO_PAD.encode(payload);
    let signature = ifmatch_azure::auth::sign_as(account, &payload);
    format!("type=resource&ver=1.0&sig={payload}.{signature}")
}

/// How long a permission's token is asked to hold: `x-ms-documentdb-expiry-seconds`, 10 to
/// 18,000 (one past refused 400), else an hour.
pub fn lifetime(headers: &HeaderMap) -> Result<u64, Failure> {
    let Some(value) = headers.get("x-ms-documentdb-expiry-seconds") else {
        return Ok(DEFAULT_SECONDS);
    };
    match value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(seconds) if SECONDS.contains(&seconds) => Ok(seconds),
        _ => Err(bad_request(format!(
            "x-ms-documentdb-expiry-seconds is {} to {} seconds.",
            SECONDS.start(),
            SECONDS.end()
        ))),
    }
}

/// The grant a token's signature (`sig`) carries, if one of `accounts` signed it and it holds
/// at `now` (seconds): the account and the grant, else 401 with why.
pub fn read<'a>(
    accounts: &[&'a Account],
    signature: &str,
    now: u64,
) -> Result<(&'a Account, Grant), Failure> {
    let refused = |why: &str| Failure::new(Code::Unauthorized, why.to_owned());
    let (payload, mac) = (signature.rsplit_once('.'))
        .ok_or_else(|| refused("The resource token is not one this server made."))?;
    let account = (accounts.iter())
        .find(|account| ifmatch_azure::auth::verify(account, payload, mac))
        .ok_or_else(|| {
            refused("The resource token's signature does not match: it is not one this account's permissions made.")
        })?;
    let grant: Grant = (URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| refused("The resource token is not one this server made."))?;
    if now >= grant.expires {
        return Err(refused(&format!(
            "The resource token of permission {} has expired: read the permission again for a new one.",
            grant.permission
        )));
    }
    Ok((account, grant))
}

/// Whether `grant` lets the request through: the account's read (every SDK's first), and
/// below it only the grant's resource (a container's documents and ranges, or one document;
/// with a document's grant, its container's read too), read alone in `Read` mode, in the
/// grant's partition alone when it names one. Azure's 403 otherwise.
pub fn permit(
    grant: &Grant,
    (method, headers): (&Method, &HeaderMap),
    address: &Address,
) -> Result<(), Failure> {
    let insufficient = |why: &str| {
        Failure::new(
            Code::Forbidden,
            format!(
                "Insufficient permissions provided in the authorization header for the \
                 corresponding request: {why}"
            ),
        )
    };
    let reads = matches!(method, &Method::GET | &Method::HEAD)
        || (method == Method::POST && crate::document::is_query(headers));
    let (link, metadata) = match address {
        Address::Account if method == Method::GET => return Ok(()),
        Address::Container(db, coll) | Address::Ranges(db, coll)
            if matches!(method, &Method::GET | &Method::HEAD) =>
        {
            (format!("dbs/{db}/colls/{coll}"), true)
        }
        Address::Documents(db, coll) => (format!("dbs/{db}/colls/{coll}"), false),
        Address::Document(db, coll, id) => (format!("dbs/{db}/colls/{coll}/docs/{id}"), false),
        // A container's scripts are within its grant; running a procedure names a partition.
        Address::Scripts(db, coll, kind) => {
            (format!("dbs/{db}/colls/{coll}/{}", kind.segment()), true)
        }
        Address::Script(db, coll, kind, id) => (
            format!("dbs/{db}/colls/{coll}/{}/{id}", kind.segment()),
            method != Method::POST,
        ),
        _ => {
            return Err(insufficient(
                "a resource token reaches a container's documents or one document, never \
                 databases, containers, users or permissions",
            ));
        }
    };
    let within = link == grant.resource
        || link.starts_with(&format!("{}/", grant.resource))
        || (metadata && grant.resource.starts_with(&format!("{link}/docs/")));
    if !within {
        return Err(insufficient(&format!(
            "the token's permission reaches {}, not {link}",
            grant.resource
        )));
    }
    if !grant.all && !reads {
        return Err(insufficient("the token's permission is Read"));
    }
    if let (Some(partition), false) = (&grant.partition, metadata) {
        let named = (headers.get("x-ms-documentdb-partitionkey"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| serde_json::from_str::<Json>(v).ok());
        if named.as_ref() != Some(partition) {
            return Err(insufficient(&format!(
                "the token's permission reaches partition {partition} alone: name it \
                 (x-ms-documentdb-partitionkey)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(resource: &str, all: bool, partition: Option<Json>) -> Grant {
        Grant {
            db: "d".into(),
            user: "u".into(),
            permission: "p".into(),
            all,
            resource: resource.into(),
            partition,
            version: "\"1\"".into(),
            expires: 100,
        }
    }

    #[test]
    fn a_token_is_read_back_by_its_account_until_it_expires() {
        let account = Account::new("first", &[ifmatch_azure::DEV_KEY]).unwrap();
        let other = Account::new("second", &["b3RoZXI="]).unwrap();
        let g = grant("dbs/d/colls/c", true, None);
        let token = mint(&account, &g);
        let sig = token.strip_prefix("type=resource&ver=1.0&sig=").unwrap();
        assert_eq!(read(&[&other, &account], sig, 99).unwrap().1, g);
        assert_eq!(read(&[&account], sig, 100).unwrap_err().status(), 401);
        assert_eq!(read(&[&other], sig, 0).unwrap_err().status(), 401);
        let forged = sig.replacen('e', "f", 1);
        assert_eq!(read(&[&account], &forged, 0).unwrap_err().status(), 401);
    }

    #[test]
    fn a_grant_reaches_its_resource_in_its_mode_and_partition_alone() {
        let h = |pk: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(pk) = pk {
                headers.insert("x-ms-documentdb-partitionkey", pk.parse().unwrap());
            }
            headers
        };
        let doc = |id: &str| Address::Document("d".into(), "c".into(), id.into());
        let docs = Address::Documents("d".into(), "c".into());
        let container = Address::Container("d".into(), "c".into());
        let read_only = grant("dbs/d/colls/c", false, None);
        assert!(permit(&read_only, (&Method::GET, &h(None)), &doc("x")).is_ok());
        assert!(permit(&read_only, (&Method::PUT, &h(None)), &doc("x")).is_err());
        assert!(permit(&read_only, (&Method::POST, &h(None)), &docs).is_err());
        let other = Address::Document("d".into(), "other".into(), "x".into());
        assert!(permit(&read_only, (&Method::GET, &h(None)), &other).is_err());
        assert!(permit(&read_only, (&Method::DELETE, &h(None)), &container).is_err());
        let one = grant("dbs/d/colls/c/docs/x", true, None);
        assert!(permit(&one, (&Method::PUT, &h(None)), &doc("x")).is_ok());
        assert!(permit(&one, (&Method::GET, &h(None)), &doc("y")).is_err());
        assert!(
            permit(&one, (&Method::GET, &h(None)), &container).is_ok(),
            "metadata"
        );
        let pk = grant("dbs/d/colls/c", true, Some(serde_json::json!(["a"])));
        assert!(permit(&pk, (&Method::GET, &h(Some(r#"["a"]"#))), &doc("x")).is_ok());
        assert!(permit(&pk, (&Method::GET, &h(Some(r#"["b"]"#))), &doc("x")).is_err());
        assert!(
            permit(&pk, (&Method::GET, &h(None)), &docs).is_err(),
            "cross-partition"
        );
        let users = Address::Users("d".into());
        assert!(permit(&pk, (&Method::GET, &h(None)), &users).is_err());
    }
}
