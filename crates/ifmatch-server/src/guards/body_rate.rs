//! The rate floor of request bodies: an upload must send at least so many bytes in each window
//! of time spent waiting for it, or it fails (nginx's `client_body_timeout` between reads, with
//! a floor on the rate as Apache's `mod_reqtimeout` `MinRate`). A client that sends one byte a
//! second holds a connection, a task and a temporary file no longer than one window.
//!
//! Only time spent waiting for the client counts: while the server is busy with what it read
//! (hashing, writing to disk), the clock stops, so a slow disk never fails a fast client. While
//! a body waits, its connection says so ([`Waiting`]), so that at the cap on connections an
//! upload waiting the longest is shed as an idle connection is.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use ifmatch_core::FramePoll;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

/// What a body failed with when its client sent too little.
#[derive(Debug, thiserror::Error)]
#[error("the request body sent {got} bytes in {window:?} of waiting, under the floor of {floor}")]
pub(crate) struct TooSlow {
    got: u64,
    window: Duration,
    floor: u64,
}

/// Told when a body starts and stops waiting for its client (its connection, to shed it).
pub(crate) trait Waiting {
    /// The body waits for its client from now on.
    fn started(&self);
    /// The body got a frame or ended: it no longer waits.
    fn stopped(&self);
}

pin_project! {
    /// A request body that fails with [`TooSlow`] when its client sends fewer than `floor`
    /// bytes in a `window` of waiting.
    pub(crate) struct RateBody<B, W: Waiting> {
        #[pin]
        inner: B,
        // Made the first time the body waits: a request whose body is never read (every GET)
        // costs no timer.
        #[pin]
        sleep: Option<Sleep>,
        window: Duration,
        floor: u64,
        // Of the current window: the time waited before the current wait, and the bytes got.
        waited: Duration,
        got: u64,
        // When the current wait started, if the body waits.
        since: Option<Instant>,
        waiting: W,
    }

    impl<B, W: Waiting> PinnedDrop for RateBody<B, W> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if this.since.is_some() {
                this.waiting.stopped();
            }
        }
    }
}

impl<B, W: Waiting> RateBody<B, W> {
    /// `inner`, which must send `floor` bytes in each `window` of waiting; `waiting` is told
    /// when it waits.
    pub(crate) fn new(inner: B, window: Duration, floor: u64, waiting: W) -> Self {
        Self {
            inner,
            sleep: None,
            window,
            floor,
            waited: Duration::ZERO,
            got: 0,
            since: None,
            waiting,
        }
    }
}

impl<B, W> Body for RateBody<B, W>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    W: Waiting,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let mut this = self.project();
        loop {
            if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(cx) {
                if let Some(since) = this.since.take() {
                    *this.waited += since.elapsed();
                    this.waiting.stopped();
                }
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
                    *this.got += data.map_or(0, |d| d.len() as u64);
                }
                if *this.waited >= *this.window {
                    if *this.got < *this.floor && frame.is_some() {
                        return Poll::Ready(Some(Err(too_slow(this.got, this.window, this.floor))));
                    }
                    (*this.waited, *this.got) = (Duration::ZERO, 0);
                }
                return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
            }
            let now = Instant::now();
            if this.since.is_none() {
                *this.since = Some(now);
                this.waiting.started();
                let deadline = now + this.window.saturating_sub(*this.waited);
                match this.sleep.as_mut().as_pin_mut() {
                    Some(sleep) => sleep.reset(deadline),
                    None => this.sleep.set(Some(tokio::time::sleep_until(deadline))),
                }
            }
            let sleep = this
                .sleep
                .as_mut()
                .as_pin_mut()
                .expect("armed while waiting");
            ready!(sleep.poll(cx));
            // A whole window waited, this wait included.
            if *this.got < *this.floor {
                *this.since = None;
                this.waiting.stopped();
                return Poll::Ready(Some(Err(too_slow(this.got, this.window, this.floor))));
            }
            (*this.waited, *this.got) = (Duration::ZERO, 0);
            *this.since = Some(now);
            let sleep = this
                .sleep
                .as_mut()
                .as_pin_mut()
                .expect("armed while waiting");
            sleep.reset(now + *this.window);
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn too_slow(got: &u64, window: &Duration, floor: &u64) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(TooSlow {
        got: *got,
        window: *window,
        floor: *floor,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicIsize, Ordering};

    use http_body_util::BodyExt;
    use tokio::sync::mpsc;

    use super::*;

    #[derive(Clone, Default)]
    struct Count(Arc<AtomicIsize>);

    impl Waiting for Count {
        fn started(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn stopped(&self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    type Sent = Bytes;

    /// A body of what the test sends, as a client would.
    struct Channel(mpsc::Receiver<Sent>);

    impl Body for Channel {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
            self.0
                .poll_recv(cx)
                .map(|sent| sent.map(|b| Ok(Frame::data(b))))
        }
    }

    fn trickle(window: u64, floor: u64) -> (mpsc::Sender<Sent>, RateBody<Channel, Count>, Count) {
        let (send, receive) = mpsc::channel(16);
        let count = Count::default();
        let body = RateBody::new(
            Channel(receive),
            Duration::from_secs(window),
            floor,
            count.clone(),
        );
        (send, body, count)
    }

    /// A body of `per_second` bytes a second for a minute, read against a floor of `floor`
    /// bytes a `window` of seconds.
    fn steady(
        per_second: usize,
        window: u64,
        floor: u64,
    ) -> (Pin<Box<RateBody<Channel, Count>>>, Count) {
        let (send, body, count) = trickle(window, floor);
        tokio::spawn(async move {
            for _ in 0..60 {
                if send.send(bytes(per_second)).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        (Box::pin(body), count)
    }

    fn bytes(n: usize) -> Sent {
        Bytes::from(vec![b'x'; n])
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_under_the_floor_fails_after_one_window() {
        let (mut body, count) = steady(1, 10, 100);
        let started = Instant::now();
        let mut got = 0;
        let error = loop {
            match body.frame().await {
                Some(Ok(frame)) => got += frame.into_data().unwrap().len(),
                Some(Err(error)) => break error,
                None => panic!("ended"),
            }
        };
        assert!(error.is::<TooSlow>(), "{error}");
        assert!(got <= 11, "{got} bytes");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(10) && took <= Duration::from_secs(11),
            "{took:?}"
        );
        drop(body);
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "no wait left counted");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_floor_goes_on_and_a_silent_one_fails() {
        // 20 bytes a second against a floor of 100 per 10 s: a minute, then the end.
        let (mut body, count) = steady(20, 10, 100);
        let mut got = 0;
        while let Some(frame) = body.frame().await {
            got += frame.unwrap().into_data().unwrap().len();
        }
        assert_eq!((got, count.0.load(Ordering::SeqCst)), (1200, 0));

        // Nothing at all: the floor's window is the timeout between reads.
        let (_send, silent, count) = trickle(10, 1);
        let mut body = Box::pin(silent);
        let started = Instant::now();
        assert!(body.frame().await.unwrap().unwrap_err().is::<TooSlow>());
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_server_spends_on_what_it_read_does_not_count() {
        let (send, body, _) = trickle(10, 100);
        let mut body = Box::pin(body);
        for _ in 0..5 {
            send.send(bytes(10)).await.unwrap();
        }
        drop(send);
        // The reader takes 30 s over each frame (a slow disk): 50 bytes in 150 s, no waiting.
        let mut got = 0;
        while let Some(frame) = body.frame().await {
            got += frame.unwrap().into_data().unwrap().len();
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        assert_eq!(got, 50);
    }
}
