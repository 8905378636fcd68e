//! What a host tells the dialects of a request beyond its method, URI and headers, as request
//! extensions (the client's address, whether it came over HTTPS), and the host it names.

use std::net::IpAddr;

/// The client's address, when the host knows it: a request extension, for SAS `sip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// Whether the request came over HTTPS: a request extension, for SAS `spr=https`. Absent
/// means plain HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Https;

/// The host a request names: its `Host` header, else its URI's authority.
pub fn host(parts: &http::request::Parts) -> Option<&str> {
    (parts.headers.get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .or(parts.uri.authority().map(|a| a.as_str()))
}
