//! What a host tells the dialects of a request beyond its method, URI and headers (its
//! [`Client`]), and the host it names.

use std::net::IpAddr;

/// What a host knows of a request's client that the request does not say, handed to a dialect
/// beside the request, not in its extensions: that map, and the answer's for the operation's
/// name ([`crate::Named`]), cost a 304 5% of its instructions and 6 of its 19 allocations. The
/// default, a client the host knows nothing of, meets no condition on either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Client {
    /// Its address, when the host knows it: for the address range a shared access signature
    /// names (`sip`).
    pub ip: Option<IpAddr>,
    /// Whether it came over HTTPS: for a signature's `spr=https`, and the scheme of the URLs
    /// answers name.
    pub https: bool,
}

/// The host a request names: its `Host` header, else its URI's authority.
pub fn host(parts: &http::request::Parts) -> Option<&str> {
    (parts.headers.get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .or(parts.uri.authority().map(|a| a.as_str()))
}

/// `text` split around its first `byte` (an ASCII one: `/`, `.`), as `str::split_once` splits
/// around a char, by a plain loop: a request's host and path are a few dozen bytes, over which
/// core's char search (a word-wise `memchr` set up on each call) costs several times more, on
/// every request.
pub fn split_once_ascii(text: &str, byte: u8) -> Option<(&str, &str)> {
    debug_assert!(byte.is_ascii());
    let at = text.bytes().position(|b| b == byte)?;
    Some((&text[..at], &text[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::split_once_ascii;

    #[test]
    fn splits_around_the_first_byte_as_split_once_does() {
        for (text, byte) in [
            ("acct/box/blob", b'/'),
            ("/box", b'/'),
            ("box/", b'/'),
            ("box", b'/'),
            ("", b'/'),
            ("acct.blob.localhost:10000", b'.'),
            ("naïve/é", b'/'),
        ] {
            assert_eq!(
                split_once_ascii(text, byte),
                text.split_once(char::from(byte)),
                "{text}"
            );
        }
    }
}
