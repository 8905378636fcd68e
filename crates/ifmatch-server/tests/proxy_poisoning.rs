//! `ifmatch proxy` in front of an origin that believes every forwarding field it is sent, as
//! web frameworks do: it builds its redirects, its links and its pages from them, and marks
//! them `public, max-age=300`. An attacker's request carrying one such field, then clean ones:
//! every clean answer equals the one no attacker touched. A hop the operator trusts keeps its
//! fields, and what it says of how it was reached is part of the key.

use crate::common;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use common::client;

/// What the origin saw of every request: its forwarding fields, as one line each.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<String>>>);

/// The first value of `name`, if any.
fn first<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `Forwarded`'s parameter `name` in its first element.
fn forwarded(headers: &HeaderMap, name: &str) -> Option<String> {
    let element = first(headers, "forwarded")?.split(',').next()?;
    element.split(';').find_map(|pair| {
        let (n, v) = pair.trim().split_once('=')?;
        n.eq_ignore_ascii_case(name)
            .then(|| v.trim_matches('"').to_owned())
    })
}

/// The origin's own idea of the URL it was reached at, from everything frameworks read.
fn base_url(headers: &HeaderMap) -> String {
    let scheme = first(headers, "x-forwarded-scheme")
        .or_else(|| first(headers, "x-url-scheme"))
        .or_else(|| (first(headers, "front-end-https") == Some("on")).then_some("https"))
        .or_else(|| (first(headers, "x-forwarded-ssl") == Some("on")).then_some("https"))
        .map(str::to_owned)
        .or_else(|| forwarded(headers, "proto"))
        .or_else(|| first(headers, "x-forwarded-proto").map(str::to_owned))
        .unwrap_or_else(|| "http".into());
    let host = first(headers, "x-http-host-override")
        .or_else(|| first(headers, "x-host"))
        .or_else(|| first(headers, "x-forwarded-server"))
        .map(str::to_owned)
        .or_else(|| forwarded(headers, "host"))
        .or_else(|| first(headers, "x-forwarded-host").map(str::to_owned))
        .or_else(|| first(headers, "host").map(str::to_owned))
        .unwrap_or_default();
    let host = host.split(':').next().unwrap_or_default().to_owned();
    let port = first(headers, "x-forwarded-port").map_or(String::new(), |p| format!(":{p}"));
    let prefix = first(headers, "x-forwarded-prefix").unwrap_or_default();
    format!("{scheme}://{host}{port}{prefix}")
}

async fn page(seen: Seen, headers: HeaderMap, redirect: bool, body: Bytes) -> impl IntoResponse {
    let base = base_url(&headers);
    seen.0.lock().unwrap().push(format!(
        "{base} for={} xff={} body={}",
        first(&headers, "forwarded").unwrap_or("-"),
        first(&headers, "x-forwarded-for").unwrap_or("-"),
        body.len()
    ));
    let public = [
        (header::CACHE_CONTROL, "public, max-age=300".to_owned()),
        (
            header::LINK,
            format!("<{base}/app.js>; rel=preload; as=script"),
        ),
    ];
    // A body a framework would read too, for an origin that takes a GET's.
    let extra = if body.is_empty() {
        String::new()
    } else {
        format!(" with {} bytes", body.len())
    };
    if redirect {
        let moved = [(header::LOCATION, format!("{base}/new"))];
        (StatusCode::MOVED_PERMANENTLY, public, moved, String::new()).into_response()
    } else {
        let html = format!("<script src=\"{base}/app.js\"></script>{extra}");
        (StatusCode::OK, public, html).into_response()
    }
}

async fn start_origin() -> (Seen, String) {
    let seen = Seen::default();
    let (a, b) = (seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/page/{n}",
            axum::routing::get(move |h: HeaderMap, body: Bytes| page(a.clone(), h, false, body)),
        )
        .route(
            "/moved/{n}",
            axum::routing::get(move |h: HeaderMap, body: Bytes| page(b.clone(), h, true, body)),
        );
    (seen, common::serve_app(app).await)
}

/// An answer's status, `Location`, `Link` and body.
async fn get(url: &str, fields: &[(&str, &str)]) -> (u16, String, String, String) {
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = http.get(url);
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let field = |name| {
        response
            .headers()
            .get(name)
            .map_or(String::new(), |v| v.to_str().unwrap().to_owned())
    };
    let (location, link) = (field(header::LOCATION), field(header::LINK));
    (
        response.status().as_u16(),
        location,
        link,
        response.text().await.unwrap(),
    )
}

/// Every field a framework believes, with an attacker's value.
const ATTACKS: [(&str, &str); 16] = [
    ("x-forwarded-scheme", "nothttps"),
    ("x-forwarded-proto", "nothttps"),
    ("x-forwarded-port", "1234"),
    ("x-forwarded-host", "evil.example"),
    ("x-forwarded-server", "evil.example"),
    ("x-forwarded-prefix", "/evil"),
    ("x-forwarded-ssl", "on"),
    ("forwarded", "host=evil.example;proto=http"),
    ("forwarded", "for=1.2.3.4;proto=https"),
    ("front-end-https", "on"),
    ("x-url-scheme", "nothttps"),
    ("x-host", "evil.example"),
    ("x-http-host-override", "evil.example"),
    ("x-forwarded-for", "1.2.3.4"),
    ("x-real-ip", "1.2.3.4"),
    ("x-original-host", "evil.example"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_forwarding_field_of_a_client_shapes_a_stored_answer() {
    let (seen, upstream) = start_origin().await;
    let (proxy, base) = common::spawn_ifmatch(["proxy", "--upstream", &upstream]);
    let _proxy = common::Process(proxy);

    for path in ["page", "moved"] {
        let clean = get(&format!("{base}/{path}/clean"), &[]).await;
        assert!(clean.0 == 200 || clean.0 == 301, "{clean:?}");
        let unpoisoned = |(status, location, link, body): &(u16, String, String, String)| {
            let host = common::host_of(&base);
            let host = host.split(':').next().unwrap();
            (
                *status,
                location.replace("/clean", ""),
                link.clone(),
                body.clone(),
                host.to_owned(),
            )
        };
        let (_, _, link, _, host) = unpoisoned(&clean);
        assert_eq!(
            link,
            format!("<http://{host}/app.js>; rel=preload; as=script")
        );
        for (n, (name, value)) in ATTACKS.iter().enumerate() {
            let url = format!("{base}/{path}/{n}");
            let attacker = get(&url, &[(name, value)]).await;
            for round in 0..2 {
                let victim = get(&url, &[]).await;
                assert_eq!(
                    unpoisoned(&victim),
                    unpoisoned(&clean),
                    "{path} after {name}: {value} (round {round})"
                );
            }
            // The attacker's own answer is the clean one too: the field never reached the
            // origin.
            assert_eq!(unpoisoned(&attacker), unpoisoned(&clean), "{name}");
        }
    }
    // The origin heard of each request from the proxy alone.
    for line in seen.0.lock().unwrap().iter() {
        assert!(
            !line.contains("evil") && !line.contains("1.2.3.4") && !line.contains("1234"),
            "{line}"
        );
        assert!(line.contains("xff=127.0.0.1 "), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_hop_keeps_its_fields_and_what_they_shape_is_keyed() {
    let (seen, upstream) = start_origin().await;
    let (proxy, base) = common::spawn_ifmatch([
        "proxy",
        "--upstream",
        &upstream,
        "--trusted-proxy",
        "127.0.0.0/8",
    ]);
    let _proxy = common::Process(proxy);
    let url = format!("{base}/moved/1");

    // A TLS terminator in front says the client came over https; the same terminator's plain
    // http listener says http: two answers, stored apart.
    let https = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "198.51.100.7"),
        ("forwarded", "for=198.51.100.7;proto=https"),
    ];
    let http = [
        ("x-forwarded-proto", "http"),
        ("x-forwarded-for", "198.51.100.8"),
        ("forwarded", "for=198.51.100.8;proto=http"),
    ];
    let host = common::host_of(&base);
    let host = host.split(':').next().unwrap().to_owned();
    for _ in 0..2 {
        let (_, location, _, _) = get(&url, &https).await;
        assert_eq!(location, format!("https://{host}/new"));
        let (_, location, _, _) = get(&url, &http).await;
        assert_eq!(location, format!("http://{host}/new"));
    }
    let lines = seen.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "each stored once: {lines:?}");
    // The chains go on with the proxy's own element.
    assert!(
        lines[0].contains("for=for=198.51.100.7;proto=https, for=127.0.0.1;proto=http;host=\"")
            && lines[0].contains("xff=198.51.100.7, 127.0.0.1 "),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_reaches_the_origin_and_is_never_stored() {
    let (seen, upstream) = start_origin().await;
    let (proxy, base) = common::spawn_ifmatch(["proxy", "--upstream", &upstream]);
    let _proxy = common::Process(proxy);
    let url = format!("{base}/page/body");

    let with_body = client().get(&url).body("query").send().await.unwrap();
    assert_eq!(
        with_body.headers()["cache-status"],
        "ifmatch; fwd=bypass",
        "passed"
    );
    assert!(with_body.text().await.unwrap().ends_with("with 5 bytes"));
    let (status, _, _, clean) = get(&url, &[]).await;
    assert_eq!(status, 200);
    assert!(!clean.contains("bytes"), "{clean}");
    // And a clean answer stored meanwhile is not what a GET with a body gets.
    let again = client().get(&url).body("other").send().await.unwrap();
    assert!(again.text().await.unwrap().ends_with("with 5 bytes"));
    let lines = seen.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 3, "{lines:?}");
}
