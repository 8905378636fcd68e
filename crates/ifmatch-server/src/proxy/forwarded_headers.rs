//! What the origin is told of who asked, and which of a client's fields about that it may
//! believe.
//!
//! Web frameworks build redirects and absolute links from the forwarding fields they are sent
//! (`X-Forwarded-Proto`, `X-Forwarded-Port`, `Forwarded: proto=...;host=...`, `X-Host`, ...).
//! None of them is in the cache key, so a stored answer shaped by a client's value would reach
//! every later client: one request with `X-Forwarded-Scheme: http` stores a redirect loop for
//! everyone. So a client's forwarding fields are dropped as the request comes in, before the
//! key is made, and the proxy sends the origin its own ([`Peer`]: the address it saw, the
//! protocol and host of its own listener).
//!
//! A hop the operator trusts ([`TrustedHops`], `--trusted-proxy CIDR`: a TLS terminator, a load
//! balancer) keeps them: the client chain (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`), to
//! which the proxy adds its own element, and the fields that say how the hop was reached
//! ([`SHAPING`]), which then go into the key ([`key_headers`]) so that an `https` answer and
//! an `http` one are stored apart. Other fields of the same kind are dropped from every client.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ipnet::IpNet;

/// The client chain: kept from a trusted hop (the proxy adds its own element), dropped from
/// anyone else. Not in the key: its values differ with every client.
const CHAIN: [HeaderName; 3] = [
    header::FORWARDED,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-real-ip"),
];

/// How the hop was reached, which frameworks build links and redirects from: kept from a
/// trusted hop and then part of the key, dropped from anyone else.
pub(super) const SHAPING: [HeaderName; 9] = [
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-forwarded-scheme"),
    HeaderName::from_static("x-forwarded-ssl"),
    HeaderName::from_static("x-forwarded-server"),
    HeaderName::from_static("front-end-https"),
    HeaderName::from_static("x-url-scheme"),
];

/// Fields some framework reads as the client's address, its scheme, its host or its target,
/// that only a hop the operator runs may send. (Any other `X-Forwarded-*` is dropped too.)
/// The method overrides (`X-HTTP-Method-Override` and the like) are not here: on a GET or
/// HEAD the shared cache drops them (their answers are stored); on other methods they pass, as
/// a client behind a filter of methods needs them, and nothing stores those answers.
const UNTRUSTED: [HeaderName; 17] = [
    HeaderName::from_static("x-host"),
    HeaderName::from_static("x-http-host-override"),
    HeaderName::from_static("x-original-host"),
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
    HeaderName::from_static("x-scheme"),
    HeaderName::from_static("x-https"),
    HeaderName::from_static("x-client-ip"),
    HeaderName::from_static("client-ip"),
    HeaderName::from_static("true-client-ip"),
    HeaderName::from_static("x-cluster-client-ip"),
    HeaderName::from_static("x-originating-ip"),
    HeaderName::from_static("x-remote-ip"),
    HeaderName::from_static("x-remote-addr"),
    HeaderName::from_static("x-proxyuser-ip"),
    HeaderName::from_static("cf-connecting-ip"),
    HeaderName::from_static("fastly-client-ip"),
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The addresses of hops whose forwarding fields are believed (`--trusted-proxy`).
#[derive(Debug, Clone, Default)]
pub struct TrustedHops(Vec<IpNet>);

impl TrustedHops {
    /// The hops in `nets`.
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// Whether none is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        // An IPv4 peer on a dual-stack socket arrives as `::ffff:a.b.c.d`.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|net| net.contains(&ip))
    }
}

/// The fields the key holds beside the operator's own when some hop is trusted: how it was
/// reached.
pub(super) fn key_headers(trusted: &TrustedHops) -> Vec<HeaderName> {
    if trusted.is_empty() {
        return Vec::new();
    }
    SHAPING.to_vec()
}

/// A client connection's peer, with its address spelled as the forwarding fields want it:
/// made once per connection rather than formatted on every request.
#[derive(Debug)]
pub struct Peer {
    /// `X-Forwarded-For`'s element: the bare address.
    ip: HeaderValue,
    /// `Forwarded`'s element without a host: the `for=` node (IPv6 in quoted brackets, RFC
    /// 7239 section 6) and the protocol.
    forwarded: HeaderValue,
    /// Whether its forwarding fields are believed.
    trusted: bool,
}

impl Peer {
    /// The peer at `address`, whose forwarding fields are believed if `trusted` names it.
    pub fn new(address: SocketAddr, trusted: &TrustedHops) -> Self {
        let ip = address.ip();
        let node = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("\"[{v6}]\""),
        };
        let forwarded = format!("for={node};proto=http");
        Self {
            ip: HeaderValue::from_str(&ip.to_string()).expect("an address is a header value"),
            forwarded: HeaderValue::from_str(&forwarded).expect("an address is a header value"),
            trusted: trusted.trusts(ip),
        }
    }

    /// Drops from a request of this peer the forwarding fields it may not send: all of them,
    /// unless it is a trusted hop. Before the request is keyed: what reaches the origin is
    /// then what the key holds.
    pub(super) fn admit(&self, headers: &mut HeaderMap) {
        // The usual request has none: one look at its names rather than a lookup of each.
        if !headers.keys().any(may_forward) {
            return;
        }
        let dropped = |name: &HeaderName| {
            if self.trusted && (CHAIN.contains(name) || SHAPING.contains(name)) {
                return false;
            }
            CHAIN.contains(name)
                || SHAPING.contains(name)
                || UNTRUSTED.contains(name)
                || name.as_str().starts_with("x-forwarded-")
        };
        let names: Vec<HeaderName> = headers.keys().filter(|n| dropped(n)).cloned().collect();
        for name in names {
            headers.remove(name);
        }
    }

    /// Tells the origin who asked, in a request for `host` (the host the client named): this
    /// peer's element added to the chain, and the protocol and host the client reached, unless
    /// a trusted hop said them.
    pub(super) fn forward(&self, headers: &mut HeaderMap, host: Option<&HeaderValue>) {
        append(headers, X_FORWARDED_FOR, self.ip.clone());
        let named = host.and_then(|h| h.to_str().ok());
        append(headers, header::FORWARDED, self.forwarded(named));
        if !headers.contains_key(X_FORWARDED_PROTO) {
            headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
        }
        if let Some(host) = host
            && !headers.contains_key(X_FORWARDED_HOST)
        {
            headers.insert(X_FORWARDED_HOST, host.clone());
        }
    }

    /// `Forwarded`'s element for a request to `host` (named only when it can go into a quoted
    /// parameter as it is).
    fn forwarded(&self, host: Option<&str>) -> HeaderValue {
        let Some(host) = host.filter(|h| is_token_safe(h)) else {
            return self.forwarded.clone();
        };
        let mut value = Vec::with_capacity(self.forwarded.len() + host.len() + 8);
        value.extend_from_slice(self.forwarded.as_bytes());
        value.extend_from_slice(b";host=\"");
        value.extend_from_slice(host.as_bytes());
        value.push(b'"');
        HeaderValue::from_maybe_shared(Bytes::from(value))
            .unwrap_or_else(|_| self.forwarded.clone())
    }
}

/// Whether `name` may be a forwarding field: a cheap look that every name of the lists above
/// passes (a test says so), for the usual request, which has none.
fn may_forward(name: &HeaderName) -> bool {
    let name = name.as_str();
    name.starts_with("x-")
        || name == "forwarded"
        || name == "front-end-https"
        || name == "client-ip"
        || name == "true-client-ip"
        || name.starts_with("cf-")
        || name.starts_with("fastly-")
}

/// Appends `value` to the list in the header `name` (one field line, comma-separated).
pub(super) fn append(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    // One lookup: the usual request has no such field yet.
    match headers.entry(name) {
        header::Entry::Vacant(vacant) => {
            vacant.insert(value);
        }
        header::Entry::Occupied(mut occupied) => {
            let before = occupied.get();
            let mut joined = Vec::with_capacity(before.len() + 2 + value.len());
            joined.extend_from_slice(before.as_bytes());
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(value.as_bytes());
            if let Ok(joined) = HeaderValue::from_bytes(&joined) {
                occupied.insert(joined);
            }
        }
    }
}

/// Whether a host can go into a quoted `Forwarded` parameter as it is.
fn is_token_safe(host: &str) -> bool {
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(peer: &str, trusted: &[&str], fields: &[(&'static str, &str)]) -> Vec<String> {
        let trusted = TrustedHops::new(trusted.iter().map(|n| n.parse().unwrap()).collect());
        let peer = Peer::new(peer.parse().unwrap(), &trusted);
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(*name, value.parse().unwrap());
        }
        peer.admit(&mut headers);
        let mut names: Vec<String> = headers.keys().map(|n| n.as_str().to_owned()).collect();
        names.sort();
        names
    }

    const SENT: [(&str, &str); 9] = [
        ("forwarded", "for=1.2.3.4;host=evil.example;proto=http"),
        ("x-forwarded-for", "1.2.3.4"),
        ("x-forwarded-proto", "http"),
        ("x-forwarded-scheme", "nothttps"),
        ("x-forwarded-port", "1234"),
        ("x-forwarded-anything", "1"),
        ("x-host", "evil.example"),
        ("x-http-host-override", "evil.example"),
        ("accept", "*/*"),
    ];

    #[test]
    fn the_cheap_look_misses_no_listed_field() {
        for name in CHAIN.iter().chain(&SHAPING).chain(&UNTRUSTED) {
            assert!(may_forward(name), "{name}");
        }
    }

    #[test]
    fn a_stranger_keeps_no_forwarding_field() {
        assert_eq!(admitted("203.0.113.9:5000", &[], &SENT), ["accept"]);
        assert_eq!(
            admitted("203.0.113.9:5000", &["10.0.0.0/8"], &SENT),
            ["accept"]
        );
    }

    #[test]
    fn a_trusted_hop_keeps_the_chain_and_how_it_was_reached() {
        let kept = admitted("10.1.2.3:5000", &["10.0.0.0/8"], &SENT);
        assert_eq!(
            kept,
            [
                "accept",
                "forwarded",
                "x-forwarded-for",
                "x-forwarded-port",
                "x-forwarded-proto",
                "x-forwarded-scheme"
            ]
        );
        // An IPv4 hop on a dual-stack listener.
        let mapped = admitted("[::ffff:10.1.2.3]:5000", &["10.0.0.0/8"], &SENT);
        assert_eq!(mapped, kept);
    }

    #[test]
    fn the_proxy_adds_its_own_element_and_says_what_no_hop_said() {
        let peer = Peer::new("127.0.0.1:1".parse().unwrap(), &TrustedHops::default());
        let mut headers = HeaderMap::new();
        peer.forward(&mut headers, Some(&HeaderValue::from_static("proxy:8080")));
        assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
        assert_eq!(
            headers["forwarded"],
            "for=127.0.0.1;proto=http;host=\"proxy:8080\""
        );
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "proxy:8080");

        let mut from_hop = HeaderMap::new();
        from_hop.insert("x-forwarded-for", "198.51.100.1".parse().unwrap());
        from_hop.insert("x-forwarded-proto", "https".parse().unwrap());
        peer.forward(&mut from_hop, None);
        assert_eq!(from_hop["x-forwarded-for"], "198.51.100.1, 127.0.0.1");
        assert_eq!(from_hop["x-forwarded-proto"], "https");
    }
}
