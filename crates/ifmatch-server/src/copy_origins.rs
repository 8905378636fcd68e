//! The reads `ifmatch serve` makes for copies whose source another server holds (Put Blob From
//! URL, Copy Blob, Put Block From URL, Append Block From URL naming a URL elsewhere): only of
//! the origins `--copy-from` names (`*` for any). A server that fetches whatever URL a client
//! names reaches what only it may (a loopback port, the cloud's metadata address), so none is
//! reached by default, and a redirect is never followed (an allowed origin could send the read
//! anywhere).

use std::time::Duration;

use http::{HeaderMap, Uri};
use http_body_util::BodyExt;
use ifmatch_blob::copy_origin::{Allowed, CopyOrigins, OriginBody, OriginError, OriginReply};

/// How long a copy waits for an origin to take its connection, and then for each part of its
/// answer.
const CONNECT: Duration = Duration::from_secs(10);
const READ: Duration = Duration::from_secs(60);

/// Copy sources read with reqwest (HTTP/1.1 and TLS with the system's roots), for the
/// origins allowed.
#[derive(Debug, Clone)]
pub struct HttpOrigins {
    client: reqwest::Client,
    allowed: Allowed,
}

impl HttpOrigins {
    /// Reads of the origins `allowed`.
    pub fn new(allowed: Allowed) -> anyhow::Result<Self> {
        let client = ifmatch_client::https::client_builder()?
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT)
            .read_timeout(READ)
            .build()?;
        Ok(Self { client, allowed })
    }
}

impl CopyOrigins for HttpOrigins {
    fn allows(&self, url: &Uri) -> bool {
        self.allowed.allows(url)
    }

    fn get(&self, url: &Uri, headers: HeaderMap) -> OriginReply {
        let request = self.client.get(url.to_string()).headers(headers);
        Box::pin(async move {
            let failed = |e: reqwest::Error| OriginError(e.to_string());
            let response = request.send().await.map_err(failed)?;
            let response: http::Response<reqwest::Body> = response.into();
            Ok(response.map(|body| OriginBody::new(body.map_err(failed))))
        })
    }
}
