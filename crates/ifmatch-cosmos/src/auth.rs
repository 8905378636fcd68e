//! Cosmos DB's master-key authorization: the `authorization` header holds
//! `type=master&ver=1.0&sig={signature}` (URL-encoded), the signature an HMAC-SHA256 under
//! the account's key of the verb, the resource type, the resource link and the request's
//! date (`x-ms-date`, else `Date`), each on a line, the verb, type and date lowercased.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use ifmatch_azure::Account;

use crate::address::Address;
use crate::failure::{Code, Failure};

/// How far a request's date may be from the server's clock.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// The account among `accounts` whose key signed the request, or why none did, in words a
/// user can act on: 401 `Unauthorized` for a missing or wrong token, 403 `Forbidden` for a
/// token signed for another time (Azure's answers, which the SDKs tell apart: a wrong key, or a
/// clock to set).
pub fn authorize<'a>(
    accounts: impl IntoIterator<Item = &'a Account>,
    method: &http::Method,
    headers: &HeaderMap,
    address: &Address,
    now: SystemTime,
) -> Result<&'a Account, Failure> {
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
    if kind != Some("master") {
        return Err(refused(
            "The authorization token is not a master key token (type=master): resource tokens are not served here.",
        ));
    }
    let signature =
        signature.ok_or_else(|| refused("The authorization token has no signature."))?;
    let date = (headers.get("x-ms-date").or(headers.get(http::header::DATE)))
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
        .ok_or_else(|| {
            refused(&format!(
                "The input authorization token can't serve the request. The wrong key is \
                 being used or the expected payload is not built as per the protocol. Server \
                 used the following payload to sign: '{}'",
                text.replace('\n', "\\n")
            ))
        })
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
        let accounts = [account];
        assert!(authorize(&accounts, &get, &signed(b"the key"), &address, now).is_ok());
        assert!(authorize(&accounts, &get, &signed(b"another"), &address, now).is_err());
        assert!(
            authorize(
                &accounts,
                &http::Method::DELETE,
                &signed(b"the key"),
                &address,
                now
            )
            .is_err()
        );
        for late in [
            now + Duration::from_secs(16 * 60),
            now - Duration::from_secs(16 * 60),
            now + Duration::from_secs(24 * 3600),
        ] {
            let refused = authorize(&accounts, &get, &signed(b"the key"), &address, late);
            let refused = refused.unwrap_err();
            assert_eq!(refused.code, Code::Forbidden);
            assert!(
                refused
                    .message
                    .starts_with("The authorization token is not valid at the current time")
            );
        }
        let wrong = authorize(&accounts, &get, &signed(b"another"), &address, now);
        assert_eq!(wrong.unwrap_err().code, Code::Unauthorized);
        assert!(authorize(&accounts, &get, &headers, &address, now).is_err());
    }
}
