//! The layer against the reference implementation of RFC 9110 section 13: Go's `net/http`
//! `ServeContent`, serving the same representation with the same strong ETag and Last-Modified.
//! 500 combinations of If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Range
//! and If-Range, each as GET and HEAD, against the layer with a cold cache (the handler answers)
//! and a warm one (304s from the cache): the status and the fields that section 13 and 15.4.5
//! are about must agree, but for the differences RFC 9110 allows, each named in [`allowed`] and
//! in the crate README. Needs `go` (Debian's golang-go, which the test command installs);
//! without it the test says it skipped, and fails under CI.

use crate::common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;

const CONTENT: &str = "the representation both servers serve";
const MODIFIED: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

/// Go's server, killed when dropped.
struct Reference(std::process::Child, String);

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn reference() -> Option<Reference> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let binary = dir.join("servecontent");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/servecontent.go");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(source)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GO111MODULE", "off")
        .status();
    match built {
        Ok(status) if status.success() => {}
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "go is needed here (golang-go): {other:?}"
            );
            println!("SKIPPED: cannot build the Go reference: {other:?}");
            return None;
        }
    }
    let mut child = Command::new(&binary)
        .args([CONTENT, &MODIFIED.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Some(Reference(child, format!("http://{}", line.trim())))
}

async fn layered(layer: ConditionalLayer) -> String {
    let app = Router::new()
        .route(
            "/doc",
            get(|| async {
                let mut headers = HeaderMap::new();
                let modified = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MODIFIED);
                let value = httpdate::fmt_http_date(modified);
                headers.insert(header::LAST_MODIFIED, value.parse().unwrap());
                headers.insert(
                    header::CONTENT_TYPE,
                    "text/plain; charset=utf-8".parse().unwrap(),
                );
                (headers, CONTENT)
            }),
        )
        .layer(layer);
    common::serve(app).await
}

/// The header combinations: 5 x 5 x 4 x 4 of the four conditions, then 5 x 5 x 4 of If-Match,
/// If-None-Match and a `Range` (alone or with an If-Range of the current tag, another tag or
/// the Last-Modified date).
fn combinations() -> Vec<Vec<(&'static str, String)>> {
    let current = ifmatch_core::strong_etag(CONTENT.as_bytes()).to_string();
    let weak = format!("W/{current}");
    let stale = "\"stale\"".to_owned();
    let tags = |name: &'static str| -> Vec<Option<(&'static str, String)>> {
        vec![
            None,
            Some((name, "*".to_owned())),
            Some((name, current.clone())),
            Some((name, weak.clone())),
            Some((name, format!("{stale}, {current}"))),
        ]
    };
    let dates = |name: &'static str| -> Vec<Option<(&'static str, String)>> {
        vec![
            None,
            Some((name, "Sat, 05 Nov 1994 08:49:37 GMT".to_owned())),
            Some((name, "Sun, 06 Nov 1994 08:49:37 GMT".to_owned())),
            Some((name, "Mon, 07 Nov 1994 08:49:37 GMT".to_owned())),
        ]
    };
    let mut out = Vec::new();
    for im in tags("if-match") {
        for inm in tags("if-none-match") {
            for ims in dates("if-modified-since") {
                for ius in dates("if-unmodified-since") {
                    let set = [&im, &inm, &ims, &ius];
                    out.push(set.into_iter().flatten().cloned().collect());
                }
            }
        }
    }
    let range = ("range", "bytes=0-3".to_owned());
    let ranges = [
        vec![range.clone()],
        vec![range.clone(), ("if-range", current.clone())],
        vec![range.clone(), ("if-range", stale.clone())],
        vec![
            range,
            ("if-range", "Sun, 06 Nov 1994 08:49:37 GMT".to_owned()),
        ],
    ];
    for im in tags("if-match") {
        for inm in tags("if-none-match") {
            for range in &ranges {
                let mut set: Vec<_> = [&im, &inm].into_iter().flatten().cloned().collect();
                set.extend(range.iter().cloned());
                out.push(set);
            }
        }
    }
    out
}

/// What the comparison looks at in an answer: the status, and the fields of RFC 9110 section
/// 13 and 15.4.5: the validators, the part's range, the length (of a 200 or 206: a HEAD's
/// too), whether representation metadata (`Content-Type`) came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    etag: Option<String>,
    last_modified: Option<String>,
    content_range: Option<String>,
    content_length: Option<String>,
    content_type: bool,
}

async fn answer(base: &str, method: &str, headers: &[(&'static str, String)]) -> Answer {
    let mut request = common::http().request(method.parse().unwrap(), format!("{base}/doc"));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let field = |name: header::HeaderName| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let status = response.status().as_u16();
    Answer {
        status,
        etag: field(header::ETAG),
        last_modified: field(header::LAST_MODIFIED),
        content_range: field(header::CONTENT_RANGE),
        content_length: field(header::CONTENT_LENGTH).filter(|_| matches!(status, 200 | 206)),
        content_type: response.headers().contains_key(header::CONTENT_TYPE),
    }
}

/// Why a difference is one RFC 9110 allows, if it is.
fn allowed(go: &Answer, layer: &Answer) -> Option<&'static str> {
    if go.status == 206 && layer.status == 200 && layer.etag == go.etag {
        // Ranges are the handler's business and this handler serves none.
        return Some("Range ignored: 200 for Go's 206 (RFC 9110 14.2: a server MAY ignore Range)");
    }
    if go.status == 412
        && layer.status == 412
        && layer.etag.is_none()
        && layer.last_modified.is_none()
    {
        // The layer's 412 names no validator (a client that may not read learns nothing) and
        // has a body of its own that says what failed.
        return Some(
            "412 without the validators Go repeats, with a text body of its own (RFC 9110 \
             15.5.13 asks for neither)",
        );
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: scripts/test --full runs it"]
async fn answers_agree_with_go_servecontent() {
    let Some(go) = reference() else { return };
    let layer = ConditionalLayer::new();
    let ours = layered(layer.clone()).await;
    let combinations = combinations();
    assert_eq!(combinations.len(), 500);
    let mut compared = 0;
    let mut identical = 0;
    let mut allowances: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut differences = Vec::new();
    for headers in &combinations {
        for method in ["GET", "HEAD"] {
            let want = answer(&go.1, method, headers).await;
            // Cold: the layer has forgotten the resource, the handler answers.
            layer.invalidate("/doc").await;
            let cold = answer(&ours, method, headers).await;
            // Warm: a plain GET taught the cache; a 304 may come from it.
            answer(&ours, "GET", &[]).await;
            let warm = answer(&ours, method, headers).await;
            for (cache, got) in [("cold", cold), ("warm", warm)] {
                compared += 1;
                if got == want {
                    identical += 1;
                } else if let Some(why) = allowed(&want, &got) {
                    *allowances.entry(why).or_default() += 1;
                } else {
                    differences.push(format!(
                        "{method} {cache} {headers:?}:\n    go    {want:?}\n    layer {got:?}"
                    ));
                }
            }
        }
    }
    println!(
        "{compared} requests compared with Go's ServeContent (status, ETag, Last-Modified, \
         Content-Range, Content-Length, Content-Type): {identical} identical, {} differ",
        differences.len()
    );
    for (why, count) in &allowances {
        println!("  allowed, {count} requests: {why}");
    }
    for d in differences.iter().take(20) {
        println!("  {d}");
    }
    assert!(differences.is_empty(), "{} differences", differences.len());
}
