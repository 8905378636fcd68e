//! A turn given to the executor, on any runtime (the endpoint runs on tokio and in a Worker,
//! and depends on neither): what lets other requests run between two slices of a query's work.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that is pending once, having asked to be polled again.
pub(crate) fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// See [`yield_now`].
pub(crate) struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
