//! A `Content-Length` too large for hyper, answered by the service as any other too large.
//!
//! hyper keeps the two largest 64-bit lengths for its own use (chunked, close-delimited) and
//! refuses a request declaring either, `18446744073709551614` or `18446744073709551615`, with
//! an empty `431 Request Header Fields Too Large` before any service sees it. The blob front
//! answers every other length past its limit with 413 `RequestBodyTooLarge` and Azure's body.
//! This wrapper of a connection's reads lowers such a declared length, in a request head, to
//! the largest hyper takes (`...613`, the same number of digits): the service refuses it as
//! too large, and reads none of it.
//!
//! Only bytes read while the connection has no request in flight are looked at (the head of
//! the next request; or the rest of a refused body, which is discarded), and only a
//! `Content-Length:` field holding exactly one of the two values is changed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::guards::connections::State;

const NAME: &[u8] = b"content-length";
/// The two lengths hyper refuses, but for their last digit.
const STEM: &[u8] = b"1844674407370955161";

pin_project_lite::pin_project! {
    /// A connection's stream, its reads looked at while the connection is between requests.
    pub(crate) struct HugeLength<T> {
        #[pin]
        io: T,
        // The connection's state; none when the server forwards what it is sent (a proxy).
        state: Option<Arc<State>>,
    }
}

impl<T> HugeLength<T> {
    /// `io`, with its requests' huge lengths lowered while `state` says the connection is
    /// between requests; as it is without a state.
    pub(crate) fn new(io: T, state: Option<Arc<State>>) -> Self {
        Self { io, state }
    }
}

/// Lowers each `Content-Length` field of `head` holding a length hyper refuses to the largest
/// it takes.
fn lower(head: &mut [u8]) {
    // Every read of a head passes here: the stem is looked for with memchr's vectorised
    // search, not byte by byte (1.4% of a 304's CPU, `perf record`, when it was), with a finder
    // built once (built for each search, 825 instructions a request).
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(STEM));
    let mut from = 0;
    while let Some(found) = FINDER.find(&head[from..]) {
        let at = from + found;
        from = at + 1;
        let last = at + STEM.len();
        let huge = matches!(head.get(last), Some(b'4' | b'5'));
        let ends = head.get(last + 1).is_none_or(|b| !b.is_ascii_digit());
        if huge && ends && is_length_field(&head[..at]) {
            head[last] = b'3';
        }
    }
}

/// Whether `before` ends with the name `Content-Length`, a colon and white space, at the start
/// of a line.
fn is_length_field(before: &[u8]) -> bool {
    let trimmed = before.trim_ascii_end();
    let Some(name) = trimmed.strip_suffix(b":") else {
        return false;
    };
    name.len() >= NAME.len()
        && name[name.len() - NAME.len()..].eq_ignore_ascii_case(NAME)
        && name[..name.len() - NAME.len()].ends_with(b"\n")
}

impl<T: AsyncRead> AsyncRead for HugeLength<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        ready!(this.io.poll_read(cx, buf))?;
        if this.state.as_ref().is_some_and(|s| s.between_requests()) {
            lower(&mut buf.filled_mut()[before..]);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite> AsyncWrite for HugeLength<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(head: &str) -> String {
        let mut bytes = head.as_bytes().to_vec();
        lower(&mut bytes);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn only_a_content_length_hyper_refuses_is_lowered() {
        for (head, want) in [
            (
                "PUT /a HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
                "PUT /a HTTP/1.1\r\nContent-Length: 18446744073709551613\r\n\r\n",
            ),
            (
                "PUT /a HTTP/1.1\r\ncontent-length:18446744073709551614\r\n",
                "PUT /a HTTP/1.1\r\ncontent-length:18446744073709551613\r\n",
            ),
            (
                "PUT /a HTTP/1.1\nCONTENT-LENGTH: \t18446744073709551615",
                "PUT /a HTTP/1.1\nCONTENT-LENGTH: \t18446744073709551613",
            ),
        ] {
            assert_eq!(lowered(head), want);
        }
        for kept in [
            "PUT /a HTTP/1.1\r\nContent-Length: 18446744073709551613\r\n",
            "PUT /a HTTP/1.1\r\nContent-Length: 184467440737095516150\r\n",
            "PUT /a HTTP/1.1\r\nX-Content-Length: 18446744073709551615\r\n",
            "PUT /a HTTP/1.1\r\nx-meta: 18446744073709551615\r\n",
            "PUT /18446744073709551615 HTTP/1.1\r\n",
        ] {
            assert_eq!(lowered(kept), kept);
        }
    }
}
