//! The proxy's admin listener (`--admin-listen`), off the data path: purging the shared cache.
//!
//! - `POST /purge?url=http://HOST/PATH?QUERY`: forgets what is stored for that URL (every
//!   variant); 200 `purged 1`, or 404 `purged 0` when nothing was.
//! - `POST /purge?prefix=http://HOST/PATH`: forgets every URL of `HOST` whose path and query
//!   start with `/PATH`; 200 `purged N`.
//!
//! `HOST` is the host (and port, unless 80) clients name in their requests, as the cache keys
//! them. Anything else is 404 or 405; a URL that does not parse is 400.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use ifmatch_cache::SharedCacheHandle;
use tokio::net::TcpListener;

/// Serves the admin requests on `listener` until the task is dropped.
pub(crate) async fn serve(listener: TcpListener, cache: SharedCacheHandle) -> std::io::Result<()> {
    crate::guards::accept::serve_aside(listener, move |method, target| {
        purge(&cache, method, target)
    })
    .await
}

/// The answer to `method target`: `POST /purge` forgets what it names.
fn purge(cache: &SharedCacheHandle, method: &Method, target: &http::Uri) -> Response<Full<Bytes>> {
    if target.path() != "/purge" {
        return text(StatusCode::NOT_FOUND, "not found\n".into());
    }
    if method != Method::POST {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /purge?url=... or ?prefix=...\n".into(),
        );
    }
    let query = target.query().unwrap_or_default();
    let asked = url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "url" || name == "prefix");
    let Some((kind, value)) = asked else {
        return text(
            StatusCode::BAD_REQUEST,
            "url= or prefix= is required\n".into(),
        );
    };
    let Some((host, path)) = host_and_target(&value) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("not an http URL: {value}\n"),
        );
    };
    let purged = if kind == "url" {
        u64::from(cache.purge(&host, &path))
    } else {
        cache.purge_prefix(&host, &path)
    };
    tracing::info!(%kind, url = %value, purged, "purged");
    let status = if purged == 0 && kind == "url" {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    text(status, format!("purged {purged}\n"))
}

/// The host (with its port unless 80) and the path and query of an `http://` URL.
fn host_and_target(value: &str) -> Option<(String, String)> {
    let url = url::Url::parse(value).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str()?),
        None => url.host_str()?.to_owned(),
    };
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    Some((host, target))
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::host_and_target;

    #[test]
    fn urls_name_a_host_and_a_target() {
        let read = |v| host_and_target(v);
        let pair = |h: &str, t: &str| Some((h.to_owned(), t.to_owned()));
        assert_eq!(
            read("http://cdn.example/a/b?x=1"),
            pair("cdn.example", "/a/b?x=1")
        );
        assert_eq!(
            read("http://CDN.example:8080/"),
            pair("cdn.example:8080", "/")
        );
        assert_eq!(read("http://cdn.example:80/a"), pair("cdn.example", "/a"));
        assert_eq!(read("https://cdn.example/a"), None);
        assert_eq!(read("/a"), None);
    }
}
