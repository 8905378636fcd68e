//! The connections to the origin: a stack of idle HTTP/1 connections of one serving thread,
//! the most recently used first.
//!
//! Why not hyper_util's pooled client, which this replaced: it keys its pool by scheme and
//! authority in a SipHash map, checks a connection out and back in through it, and boxes each
//! request's future; with one origin and one pool per serving thread that was about 9,000
//! instructions of every stored miss (callgrind, `scripts/cache-instructions`: 82,687 before,
//! 73,737 after), a ninth of it.
//! What it gave that matters here is kept: a connection is used again only once its last
//! answer was read to the end, a request the origin's side never took (a connection it closed
//! while idle) is sent again on another, and a connection idle for longer than
//! [`IDLE`] is closed rather than used.
//!
//! An `https://` origin's connections are made secure first (see [`super::tls`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::Authority;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::proxy_body::ProxyBody;
use super::tls::Tls;

use ifmatch_core::BoxError;

/// How long a connection may stay idle before it is closed rather than used: under the
/// shortest keep-alive timeout common among origins (Node's and Apache's 5 s). A connection
/// the origin closes as it idles out, just as a request is written on it, resets that request
/// after it was sent, and a request sent may not be sent again (the origin may have taken it):
/// the client would get a 502. The field's HTTP caching suite, whose origin is Node's, met it
/// in about one run of four (a `PUT` of its setup answered 502) while this was hyper's 90 s.
pub(super) const IDLE: Duration = Duration::from_secs(4);

/// The origin's answer, before its head is made the proxy's.
pub(super) type OriginReply =
    Pin<Box<dyn Future<Output = Result<Response<OriginBody>, BoxError>> + Send>>;

/// Idle connections to one origin.
#[derive(Debug)]
pub(super) struct Pool {
    /// Where the origin is: `host:port`, the port 80 (443 with TLS) when the upstream names
    /// none.
    address: String,
    /// How its connections are made secure, for an `https://` origin.
    tls: Option<Tls>,
    /// Idle connections and since when, the most recent last.
    idle: Mutex<VecDeque<(SendRequest<ProxyBody>, Instant)>>,
}

impl Pool {
    pub(super) fn new(origin: &Authority, tls: Option<Tls>) -> Arc<Self> {
        let address = match (origin.port_u16(), &tls) {
            (Some(_), _) => origin.as_str().to_owned(),
            (None, None) => format!("{}:80", origin.as_str()),
            (None, Some(_)) => format!("{}:443", origin.as_str()),
        };
        Arc::new(Self {
            address,
            tls,
            idle: Mutex::new(VecDeque::new()),
        })
    }

    /// A pool of no connections yet to the same origin.
    pub(super) fn empty_copy(&self) -> Arc<Self> {
        Arc::new(Self {
            address: self.address.clone(),
            tls: self.tls.clone(),
            idle: Mutex::new(VecDeque::new()),
        })
    }

    /// Sends `request` (its target in origin form) on an idle connection, or a new one; again
    /// on another if the one it was given closed before taking it.
    pub(super) fn send(self: &Arc<Self>, request: Request<ProxyBody>) -> OriginReply {
        let pool = self.clone();
        Box::pin(async move {
            let mut request = request;
            loop {
                let (mut sender, reused) = match pool.take() {
                    Some(sender) => (sender, true),
                    None => (pool.connect().await?, false),
                };
                // A connection is put back once its answer was read: its task may not have
                // seen the end yet. One that closed says so here.
                if std::future::poll_fn(|cx| sender.poll_ready(cx))
                    .await
                    .is_err()
                {
                    if reused {
                        continue;
                    }
                    return Err("the origin closed a new connection".into());
                }
                match sender.try_send_request(request).await {
                    Ok(response) => {
                        let home = Some((sender, pool.clone()));
                        return Ok(response.map(|body| OriginBody { body, home }));
                    }
                    Err(mut error) => match error.take_message() {
                        // Never written: the connection closed as it was given it.
                        Some(again) if reused => request = again,
                        _ => return Err(error.into_error().into()),
                    },
                }
            }
        })
    }

    /// The most recently used idle connection that is still open and was not idle too long.
    fn take(&self) -> Option<SendRequest<ProxyBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // The oldest go first: past their time, nothing will use them.
        while idle.front().is_some_and(|(_, since)| now - *since > IDLE) {
            idle.pop_front();
        }
        while let Some((sender, _)) = idle.pop_back() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    fn put(&self, sender: SendRequest<ProxyBody>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push_back((sender, Instant::now()));
    }

    /// A new connection, its task spawned on this thread's runtime.
    async fn connect(&self) -> Result<SendRequest<ProxyBody>, BoxError> {
        let stream = tokio::net::TcpStream::connect(&self.address).await?;
        stream.set_nodelay(true)?;
        match &self.tls {
            None => handshake(stream).await,
            Some(tls) => handshake(tls.connect(stream).await?).await,
        }
    }
}

/// HTTP/1.1 on `io`, its connection's task spawned on this thread's runtime.
async fn handshake<I>(io: I) -> Result<SendRequest<ProxyBody>, BoxError>
where
    I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "an origin connection ended");
        }
    });
    Ok(sender)
}

/// The origin's body; its connection goes back to the pool once all of it was read.
#[derive(Debug)]
pub struct OriginBody {
    body: Incoming,
    home: Option<(SendRequest<ProxyBody>, Arc<Pool>)>,
}

impl OriginBody {
    /// Puts the connection back, if all of the body was read: `ended` (the body said so), or
    /// all its framing allows.
    fn release(&mut self, ended: bool) {
        if (ended || self.body.is_end_stream())
            && let Some((sender, pool)) = self.home.take()
        {
            pool.put(sender);
        }
    }
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.release(true),
            Poll::Ready(Some(Ok(_))) => self.release(false),
            Poll::Ready(Some(Err(_))) => self.home = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for OriginBody {
    fn drop(&mut self) {
        // Read to its end by its framing (an empty body, or all its declared length): the
        // connection is ready for the next request. Otherwise hyper closes it.
        self.release(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_without_a_port_is_on_port_80_or_443_with_tls() {
        let address = |origin: &str| Pool::new(&origin.parse().unwrap(), None).address.clone();
        let tls = Tls::new("example.com", None).unwrap();
        let secure = Pool::new(&"example.com".parse().unwrap(), Some(tls));
        assert_eq!(secure.address, "example.com:443");
        assert_eq!(address("example.com"), "example.com:80");
        assert_eq!(address("example.com:8080"), "example.com:8080");
        assert_eq!(address("127.0.0.1"), "127.0.0.1:80");
        assert_eq!(address("[::1]"), "[::1]:80");
        assert_eq!(address("[::1]:9000"), "[::1]:9000");
    }
}
