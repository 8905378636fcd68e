//! User delegation: a key Get User Delegation Key gives a principal who holds a bearer token,
//! and the shared access signatures signed with it, checked as Azure checks them: the key's
//! window, its fields (`skoid`, `sktid`, `skt`, `ske`, `sks`, `skv`) signed into it, and what
//! the delegating principal may do at the time of the request (its role assignments now, not
//! when the key was given).
//!
//! The key is not stored: its value is an HMAC, under the account's key, of its fields, so any
//! instance of a fleet that holds the account's key checks it, and rotating the account's key
//! revokes every delegation key given under it (as Azure's "revoke user delegation keys").

use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::account::Account;
use crate::auth::{Denied, QueryPairs, denied, failed, iso8601, unix};
use crate::error_code::CommonCode;
use crate::identity::{Access, Assignment};

/// The longest a delegation key holds: seven days from the request.
pub const MAX_LIFETIME: i64 = 7 * 86_400;

/// A user delegation key, as Get User Delegation Key answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationKey {
    /// The principal's object id.
    pub oid: String,
    /// The principal's tenant.
    pub tid: String,
    /// When it starts, ISO 8601.
    pub start: String,
    /// When it expires, ISO 8601.
    pub expiry: String,
    /// The services it signs for: `b`.
    pub service: String,
    /// The version it was given under.
    pub version: String,
    /// The key, base64.
    pub value: String,
}

impl DelegationKey {
    /// Azure's XML answer.
    pub fn xml(&self) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><UserDelegationKey><SignedOid>{}</SignedOid>\
             <SignedTid>{}</SignedTid><SignedStart>{}</SignedStart><SignedExpiry>{}</SignedExpiry>\
             <SignedService>{}</SignedService><SignedVersion>{}</SignedVersion><Value>{}</Value>\
             </UserDelegationKey>",
            crate::xml_escape(&self.oid),
            crate::xml_escape(&self.tid),
            self.start,
            self.expiry,
            self.service,
            crate::xml_escape(&self.version),
            self.value
        )
    }
}

/// `YYYY-MM-DDThh:mm:ssZ`, as Azure writes a key's times.
fn iso(seconds: i64) -> String {
    crate::iso8601::write_seconds(seconds, 0).replace(".0000000Z", "Z")
}

/// The key's value under one account key: an HMAC of its fields (times as seconds, so a client
/// that writes them back in another form still signs with the same key).
fn value(key: &[u8], fields: (&str, &str, i64, i64, &str, &str)) -> Vec<u8> {
    let (oid, tid, start, expiry, service, version) = fields;
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    let text = format!(
        "ifmatch user delegation key\n{oid}\n{tid}\n{start}\n{expiry}\n{service}\n{version}"
    );
    mac.update(text.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The key `access`'s principal asks for, from `start` (now when absent) to `expiry`, given
/// under `version` at `now`: refused 400 `InvalidXmlNodeValue`-like (`InvalidInput`) when the
/// times are not ISO 8601, the expiry is not after the start, or it is more than seven days
/// from now.
pub fn issue(
    account: &Account,
    access: &Access,
    (start, expiry): (Option<&str>, &str),
    version: &str,
    now: SystemTime,
) -> Result<DelegationKey, Denied> {
    let now = unix(now);
    let invalid = |detail: String| denied(CommonCode::InvalidInput, detail);
    let start = match start {
        Some(text) => iso8601(text)
            .ok_or_else(|| invalid(format!("Start {text:?} is not an ISO 8601 time")))?,
        None => now,
    };
    let expiry = iso8601(expiry)
        .ok_or_else(|| invalid(format!("Expiry {expiry:?} is not an ISO 8601 time")))?;
    if expiry <= start {
        return Err(invalid("the key's Expiry must be after its Start".into()));
    }
    if expiry > now + MAX_LIFETIME {
        return Err(invalid(format!(
            "the key's Expiry {} is more than seven days from now ({})",
            iso(expiry),
            iso(now)
        )));
    }
    let key = &account.keys()[0];
    let fields = (
        access.principal.as_str(),
        access.tenant.as_str(),
        start,
        expiry,
        "b",
        version,
    );
    Ok(DelegationKey {
        oid: access.principal.clone(),
        tid: access.tenant.clone(),
        start: iso(start),
        expiry: iso(expiry),
        service: "b".into(),
        version: version.into(),
        value: STANDARD.encode(value(key, fields)),
    })
}

/// What a user delegation SAS in `query` allows its bearer, if its signature is one of
/// `texts` (the strings-to-sign of the layouts its version may have) under a key this account
/// gave, and that key holds at `now`: the delegating principal's access now, `carried` being
/// the assignments its development token carried when it got a key (see
/// [`Identity::delegating_access`](crate::identity::Identity::delegating_access)). A field the
/// server does not check yet (a delegated user, signed request headers or parameters) is
/// refused, never ignored.
pub fn check(
    account: &Account,
    query: &QueryPairs,
    (texts, carried): (&[String], &[Assignment]),
    now: SystemTime,
) -> Result<Access, Denied> {
    let field = |name: &str| query.get(name).unwrap_or_default();
    for unserved in ["sduoid", "srh", "srq"] {
        if !field(unserved).is_empty() {
            return Err(failed(format!(
                "the signature's {unserved} is not served here: sign it without one"
            )));
        }
    }
    let time = |name: &str| {
        iso8601(&field(name)).ok_or_else(|| {
            failed(format!(
                "the user delegation key's {name} is not an ISO 8601 time"
            ))
        })
    };
    let (start, expiry) = (time("skt")?, time("ske")?);
    let current = unix(now);
    if current < start || current >= expiry {
        return Err(failed(
            "the user delegation key that signed this signature does not hold now",
        ));
    }
    let service = field("sks");
    if !service.contains('b') {
        return Err(failed(
            "the user delegation key is not one for the blob service (sks)",
        ));
    }
    let (oid, tid, version) = (field("skoid"), field("sktid"), field("skv"));
    let signature = STANDARD.decode(field("sig").trim()).unwrap_or_default();
    let fields = (
        oid.as_str(),
        tid.as_str(),
        start,
        expiry,
        service.as_str(),
        version.as_str(),
    );
    let signed = account.keys().iter().any(|key| {
        let key = value(key, fields);
        texts.iter().any(|text| {
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
            mac.update(text.as_bytes());
            mac.verify_slice(&signature).is_ok()
        })
    });
    if !signed {
        return Err(failed(
            "the user delegation signature does not match its fields and a key this account gave",
        ));
    }
    let identity = account
        .identity()
        .ok_or_else(|| failed("this server takes no Entra ID principals"))?;
    Ok(identity.delegating_access(&oid, account.name(), carried))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::identity::Identity;

    #[test]
    fn a_key_holds_seven_days_at_most_and_signs_only_within_its_window() {
        let identity = std::sync::Arc::new(Identity::new());
        let accounts = crate::Accounts::default().with_identity(identity.clone());
        let account = accounts.iter().next().unwrap();
        let carried = [Assignment {
            principal: "p".into(),
            role: "Storage Blob Data Reader".into(),
            scope: "/".into(),
        }];
        let mut access = identity.access("p", account.name(), &carried);
        access.tenant = "t".into();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_334_400);
        let week = iso(unix(now) + MAX_LIFETIME);
        let key = issue(account, &access, (None, &week), "2025-11-05", now).unwrap();
        let past = iso(unix(now) + MAX_LIFETIME + 1);
        let refused = issue(account, &access, (None, &past), "2025-11-05", now).unwrap_err();
        assert_eq!(refused.code, CommonCode::InvalidInput);
        let start = iso(unix(now) + 60);
        assert!(issue(account, &access, (Some(&start), &start), "2025-11-05", now).is_err());
        assert!(issue(account, &access, (None, "tomorrow"), "2025-11-05", now).is_err());

        let text = "the string to sign".to_owned();
        let raw = STANDARD.decode(&key.value).unwrap();
        let signature = crate::auth::sign(&raw, &text);
        let query = |sig: &str, extra: &str| {
            let uri: http::Uri = format!(
                "/?skoid=p&sktid=t&skt={}&ske={}&sks=b&skv=2025-11-05&sig={}{extra}",
                key.start,
                key.expiry,
                percent(sig)
            )
            .parse()
            .unwrap();
            QueryPairs::of(&uri)
        };
        let texts = std::slice::from_ref(&text);
        let read = ["Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read"];
        let checked = check(account, &query(&signature, ""), (texts, &carried), now);
        assert!(checked.unwrap().allows(&read, "/x"));
        // A principal whose roles the service did not keep may do nothing by it.
        let unknown = check(account, &query(&signature, ""), (texts, &[]), now);
        assert!(!unknown.unwrap().allows(&read, "/x"));
        let other = crate::auth::sign(b"another key", &text);
        assert!(check(account, &query(&other, ""), (texts, &carried), now).is_err());
        let later = now + Duration::from_secs(MAX_LIFETIME as u64);
        assert!(check(account, &query(&signature, ""), (texts, &carried), later).is_err());
        let delegated = check(
            account,
            &query(&signature, "&sduoid=x"),
            (texts, &carried),
            now,
        );
        assert!(delegated.unwrap_err().detail.contains("sduoid"));
    }

    fn percent(text: &str) -> String {
        text.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    }
}
