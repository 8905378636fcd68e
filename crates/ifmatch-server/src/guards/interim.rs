//! Interim (1xx) responses sent to an HTTP/1.1 client before the final one: a proxy must pass
//! on those of its origin (RFC 9110 15.2), `103 Early Hints` above all, whose use is to come
//! early.
//!
//! hyper's server sends no 1xx of a service's (it drops them with a warning), so they are
//! written into the connection's byte stream here, between hyper's writes: a request's
//! [`InterimSender`] queues a 1xx head while the request waits for its final response and wakes
//! the connection, whose next flush writes it; any write of hyper's (the final head first) goes
//! after what is queued. Once the final response is ready ([`Open`] dropped) the request's
//! sender queues nothing more, so no 1xx ever lands inside a response. HTTP/2 and HTTP/1.0
//! requests get no sender (a 1xx must not reach an HTTP/1.0 client).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker, ready};

use futures_util::task::AtomicWaker;
use http::{HeaderMap, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes of 1xx heads a connection holds for its client.
const MAX_QUEUED: usize = 64 << 10;

/// A connection's queue of 1xx heads.
#[derive(Default)]
pub(crate) struct Interim {
    queue: Mutex<Queue>,
    /// Whether the queue holds bytes: a write looks here, not at the lock.
    queued: AtomicBool,
    /// The connection's task, woken when a head is queued.
    connection: AtomicWaker,
}

#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    /// The request whose sender may queue, if one may: the number of the last opened.
    open: Option<u64>,
    opened: u64,
}

impl Interim {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request of the connection begins to wait for its final response: its sender, and
    /// what ends its sending when dropped.
    pub(crate) fn open(self: &Arc<Self>) -> (InterimSender, Open) {
        let mut queue = self.queue();
        queue.opened += 1;
        queue.open = Some(queue.opened);
        let sender = InterimSender {
            interim: self.clone(),
            request: queue.opened,
        };
        (sender.clone(), Open(sender))
    }

    /// Writes what is queued to `io`, all of it, before anything else. Inlined: every write
    /// and flush of the connection asks, and almost never is anything queued.
    #[inline]
    fn drain<T: AsyncWrite>(&self, io: Pin<&mut T>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.queued.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        self.write_queued(io, cx)
    }

    #[cold]
    fn write_queued<T: AsyncWrite>(
        &self,
        mut io: Pin<&mut T>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let mut queue = self.queue();
        while !queue.bytes.is_empty() {
            let written = ready!(io.as_mut().poll_write(cx, &queue.bytes))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            queue.bytes.drain(..written);
        }
        self.queued.store(false, Ordering::Release);
        Poll::Ready(Ok(()))
    }
}

/// What a request's handler uses to send 1xx responses to its client (a request extension).
#[derive(Clone)]
pub(crate) struct InterimSender {
    interim: Arc<Interim>,
    request: u64,
}

impl InterimSender {
    /// Queues a 1xx head of `status` and `fields` for the client, unless the request's final
    /// response is ready already or `status` is no 1xx hyper leaves to services (`100
    /// Continue` is hyper's own, `101` an upgrade).
    pub(crate) fn send(&self, status: StatusCode, fields: &HeaderMap) {
        if !status.is_informational() || status.as_u16() < 102 {
            return;
        }
        let mut head = format!(
            "HTTP/1.1 {} {}\r\n",
            status.as_str(),
            status.canonical_reason().unwrap_or("")
        )
        .into_bytes();
        for (name, value) in fields {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        let mut queue = self.interim.queue();
        // An origin that sends 1xx heads without end, to a client that reads none, is not
        // let grow the queue past its bound: the rest are dropped.
        if queue.open != Some(self.request) || queue.bytes.len() + head.len() > MAX_QUEUED {
            return;
        }
        queue.bytes.extend_from_slice(&head);
        self.interim.queued.store(true, Ordering::Release);
        drop(queue);
        self.interim.connection.wake();
    }
}

/// A request waiting for its final response; dropped once it is ready, which ends its sender's
/// sending.
pub(crate) struct Open(InterimSender);

impl Open {
    /// The connection's task is the one `waker` wakes.
    pub(crate) fn register(&self, waker: &Waker) {
        self.0.interim.connection.register(waker);
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut queue = self.0.interim.queue();
        if queue.open == Some(self.0.request) {
            queue.open = None;
        }
    }
}

pin_project_lite::pin_project! {
    /// A connection's stream, with its queued 1xx heads written before hyper's bytes.
    pub(crate) struct InterimIo<T> {
        #[pin]
        io: T,
        interim: Arc<Interim>,
    }
}

impl<T> InterimIo<T> {
    pub(crate) fn new(io: T, interim: Arc<Interim>) -> Self {
        Self { io, interim }
    }
}

impl<T: AsyncRead> AsyncRead for InterimIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

impl<T: AsyncWrite> AsyncWrite for InterimIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut this = self.project();
        ready!(this.interim.drain(this.io.as_mut(), cx))?;
        this.io.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut this = self.project();
        ready!(this.interim.drain(this.io.as_mut(), cx))?;
        this.io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        ready!(this.interim.drain(this.io.as_mut(), cx))?;
        this.io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(interim: &Interim) -> usize {
        interim.queue().bytes.len()
    }

    #[test]
    fn a_request_sends_until_its_final_response_and_within_the_bound() {
        let interim = Arc::new(Interim::default());
        let mut fields = HeaderMap::new();
        fields.insert("link", "</s.css>; rel=preload".parse().unwrap());
        let (sender, open) = interim.open();
        sender.send(StatusCode::CONTINUE, &fields);
        sender.send(StatusCode::OK, &fields);
        assert_eq!(
            queued(&interim),
            0,
            "100 is hyper's, 200 no interim response"
        );
        sender.send(StatusCode::from_u16(103).unwrap(), &fields);
        let head = b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>; rel=preload\r\n\r\n";
        assert_eq!(interim.queue().bytes, head);
        for _ in 0..10_000 {
            sender.send(StatusCode::from_u16(103).unwrap(), &fields);
        }
        assert!(queued(&interim) <= MAX_QUEUED && queued(&interim) > MAX_QUEUED - head.len());
        interim.queue().bytes.clear();
        // The final response is ready: nothing more, from this request or an older one.
        let (next, next_open) = interim.open();
        drop(open);
        sender.send(StatusCode::from_u16(103).unwrap(), &fields);
        assert_eq!(queued(&interim), 0);
        next.send(StatusCode::from_u16(102).unwrap(), &HeaderMap::new());
        assert_eq!(interim.queue().bytes, b"HTTP/1.1 102 Processing\r\n\r\n");
        drop(next_open);
        next.send(StatusCode::from_u16(102).unwrap(), &HeaderMap::new());
        assert_eq!(queued(&interim), b"HTTP/1.1 102 Processing\r\n\r\n".len());
    }
}
