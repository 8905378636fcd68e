//! The reads `ifmatch serve` makes for copies whose source another server holds (Put Blob From
//! URL, Copy Blob, Put Block From URL, Append Block From URL naming a URL elsewhere): only of
//! the origins `--copy-from` names (`*` for any). A server that fetches whatever URL a client
//! names reaches what only it may (a loopback port, the cloud's metadata address), so none is
//! reached by default, and a redirect is never followed (an allowed origin could send the read
//! anywhere).

use std::time::Duration;

use http::{HeaderMap, Uri};
use http_body_util::BodyExt;
use ifmatch_blob::copy_origin::{CopyOrigins, OriginBody, OriginError, OriginReply};

/// How long a copy waits for an origin to take its connection, and then for each part of its
/// answer.
const CONNECT: Duration = Duration::from_secs(10);
const READ: Duration = Duration::from_secs(60);

/// The origins copies may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Any.
    Any,
    /// These `host` or `host:port` (a host alone: any of its ports), as a URL names them.
    Hosts(Vec<String>),
}

impl Allowed {
    /// Reads `--copy-from`: `*`, or hosts (`host` or `host:port`) separated by commas.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim() == "*" {
            return Ok(Self::Any);
        }
        let hosts: Vec<String> = (text.split(','))
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        match hosts.iter().find(|h| h.contains('/') || h.contains('*')) {
            Some(bad) => Err(format!("{bad:?} is not a host or host:port")),
            None if hosts.is_empty() => Err("no host given".to_owned()),
            None => Ok(Self::Hosts(hosts)),
        }
    }

    fn allows(&self, url: &Uri) -> bool {
        let Some(authority) = url.authority() else {
            return false;
        };
        match self {
            Self::Any => true,
            Self::Hosts(hosts) => hosts.iter().any(|h| {
                h.eq_ignore_ascii_case(authority.as_str())
                    || h.eq_ignore_ascii_case(authority.host())
            }),
        }
    }
}

/// Copy sources read with reqwest (HTTP/1.1 and TLS with the system's roots), for the
/// origins allowed.
#[derive(Debug, Clone)]
pub struct HttpOrigins {
    client: reqwest::Client,
    allowed: Allowed,
}

impl HttpOrigins {
    /// Reads of the origins `allowed`.
    pub fn new(allowed: Allowed) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_origins_named_are_read() {
        let hosts = Allowed::parse("Example.com, 127.0.0.1:9000").unwrap();
        for (url, allowed) in [
            ("http://example.com/c/b", true),
            ("https://example.com:8443/c/b", true),
            ("http://127.0.0.1:9000/c/b", true),
            ("http://127.0.0.1:9001/c/b", false),
            ("http://169.254.169.254/latest/meta-data", false),
            ("http://example.com.evil/c/b", false),
        ] {
            assert_eq!(hosts.allows(&url.parse().unwrap()), allowed, "{url}");
        }
        assert_eq!(Allowed::parse(" * "), Ok(Allowed::Any));
        assert!(Allowed::parse("").is_err());
        assert!(Allowed::parse("http://example.com/").is_err());
    }
}
