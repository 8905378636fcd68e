//! Accounts and authentication over HTTP against the binary as a user starts it (no
//! `--anonymous`): what the SDK tests (wasm/test/sdk.test.mjs) do not reach: Shared Key Lite,
//! the clock skew, host-style accounts, a second account with a key of its own, and requests
//! that name no account.

use crate::common;

use ifmatch_azure::{DEV_ACCOUNT, DEV_KEY};
use ifmatch_core::date::{date_header_value, to_http_date};
use reqwest::Method;
use std::time::{Duration, SystemTime};

fn key(base64: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap()
}

fn date(offset: i64) -> String {
    let now = SystemTime::now();
    let at = if offset >= 0 {
        now + Duration::from_secs(offset as u64)
    } else {
        now - Duration::from_secs(offset.unsigned_abs())
    };
    date_header_value(to_http_date(at))
        .to_str()
        .unwrap()
        .to_owned()
}

/// A request signed with Shared Key Lite, its string-to-sign written out here from Azure's
/// reference (VERB, Content-MD5, Content-Type, Date, the x-ms- headers, the resource with its
/// `comp`), not taken from the server's code.
async fn lite(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    resource: &str,
    account: &str,
    secret: &[u8],
    date: &str,
) -> reqwest::Response {
    let text = format!(
        "{method}\n\n\n\nx-ms-date:{date}\nx-ms-version:2021-12-02\n/{account}{resource}",
        method = method.as_str()
    );
    let signature = ifmatch_azure::auth::sign(secret, &text);
    http.request(method, url)
        .header("x-ms-date", date)
        .header("x-ms-version", "2021-12-02")
        .header(
            "authorization",
            format!("SharedKeyLite {account}:{signature}"),
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn shared_key_lite_skew_accounts_and_styles() {
    let data = tempfile::tempdir().unwrap();
    let second = "c2Vjb25kIGFjY291bnQncyBrZXk=";
    let accounts = format!("{DEV_ACCOUNT}:{DEV_KEY};second:{second}");
    let (mut child, origin) = common::spawn_signed([
        "serve".as_ref(),
        "--data".as_ref(),
        data.path().as_os_str(),
        "--accounts".as_ref(),
        std::ffi::OsStr::new(&accounts),
    ]);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let dev = key(DEV_KEY);

    // Shared Key Lite, path-style: the resource is the path as sent (account included).
    let path = format!("/{DEV_ACCOUNT}/box");
    let url = format!("{origin}{path}?restype=container");
    let r = lite(&http, Method::PUT, &url, &path, DEV_ACCOUNT, &dev, &date(0)).await;
    assert_eq!(r.status(), 201, "{:?}", r.text().await);

    // The same request 20 minutes old, or signed with another account's key: 403.
    let url = format!("{origin}/{DEV_ACCOUNT}/other?restype=container");
    let path = format!("/{DEV_ACCOUNT}/other");
    let put_at = async |offset| {
        lite(
            &http,
            Method::PUT,
            &url,
            &path,
            DEV_ACCOUNT,
            &dev,
            &date(offset),
        )
        .await
    };
    let old = put_at(-1200).await;
    assert_eq!(old.status(), 403);
    assert_eq!(old.headers()["x-ms-error-code"], "AuthenticationFailed");
    let said = old.text().await.unwrap();
    assert!(
        said.contains("Request date header too old"),
        "Azure's words: {said}"
    );
    let ahead = put_at(1200).await;
    assert_eq!(ahead.status(), 403, "20 minutes ahead");
    assert_eq!(ahead.headers()["x-ms-error-code"], "AuthenticationFailed");
    let wrong = lite(
        &http,
        Method::PUT,
        &url,
        &path,
        DEV_ACCOUNT,
        &key(second),
        &date(0),
    )
    .await;
    assert_eq!(wrong.status(), 403);

    // No credentials: 403, nothing made. No account in the path: 400 InvalidUri.
    let anonymous = http.put(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 403);
    let r = http
        .put(format!("{origin}/box2?restype=container"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["x-ms-error-code"], "InvalidUri");
    let r = lite(&http, Method::GET, &url, &path, DEV_ACCOUNT, &dev, &date(0)).await;
    assert_eq!(r.status(), 404, "the refused creations made nothing");

    // The second account, host-style: its own key, its own containers (a `box` of its own).
    let host = format!("second.blob.{}", common::host_of(&origin));
    let url = format!("{origin}/box?restype=container");
    let signed = |method: Method, url: String, secret: Vec<u8>| {
        let http = http.clone();
        let host = host.clone();
        async move {
            let date = date(0);
            let text = format!(
                "{}\n\n\n\nx-ms-date:{date}\nx-ms-version:2021-12-02\n/second/box",
                method.as_str()
            );
            http.request(method, url)
                .header("host", host)
                .header("x-ms-date", &date)
                .header("x-ms-version", "2021-12-02")
                .header(
                    "authorization",
                    format!(
                        "SharedKeyLite second:{}",
                        ifmatch_azure::auth::sign(&secret, &text)
                    ),
                )
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        signed(Method::PUT, url.clone(), key(second)).await.status(),
        201,
        "the second account's own box"
    );
    assert_eq!(
        signed(Method::PUT, url.clone(), dev.clone()).await.status(),
        403,
        "the development key does not sign for the second account"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
