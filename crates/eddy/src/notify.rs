//! A minimal async notification: wait until something changed, for the runtime's own use.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// Futures from [`Notify::notified`] complete at the first [`Notify::notify_all`] after
/// they were created.
#[derive(Debug, Default)]
pub(crate) struct Notify {
    generation: AtomicU64,
    waiters: Mutex<Vec<Waker>>,
}

impl Notify {
    pub(crate) fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            generation: self.generation.load(Ordering::Acquire),
        }
    }

    pub(crate) fn notify_all(&self) {
        let waiters = {
            let mut w = self.waiters.lock();
            self.generation.fetch_add(1, Ordering::AcqRel);
            std::mem::take(&mut *w)
        };
        for w in waiters {
            w.wake();
        }
    }
}

/// The future of [`Notify::notified`].
#[derive(Debug)]
pub(crate) struct Notified<'a> {
    notify: &'a Notify,
    generation: u64,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.load(Ordering::Acquire) != self.generation {
            return Poll::Ready(());
        }
        let mut waiters = self.notify.waiters.lock();
        if self.notify.generation.load(Ordering::Acquire) != self.generation {
            return Poll::Ready(());
        }
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
