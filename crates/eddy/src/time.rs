//! Time: [`sleep`], [`sleep_until`] and [`timeout`], built on the per-worker timer heaps.
//!
//! A [`Sleep`] registers itself on the heap of the worker that first polls it (a thread in
//! `block_on` uses a heap chosen round-robin) and is woken by that worker's phase 3, or by a
//! sibling if that worker is stuck. Dropping a `Sleep` cancels its timer, which the heap counts
//! for its tidy rule.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::context;
use crate::timer::{deadline_after, SleepCell, TimerAction, TimerQueue};

/// Waits until `duration` has passed. `Duration::MAX` (or any huge value) sleeps forever
/// without overflowing.
///
/// # Panics
///
/// The returned future panics on its first poll outside an eddy runtime ("no eddy runtime on
/// this thread").
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = eddy::Runtime::new()?;
/// let start = Instant::now();
/// rt.block_on(eddy::time::sleep(Duration::from_millis(20)));
/// assert!(start.elapsed() >= Duration::from_millis(20));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::new(deadline_after(duration))
}

/// Waits until `deadline`. A deadline in the past completes on the first poll.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(eddy::time::sleep_until(eddy::time() + Duration::from_millis(5)));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline)
}

/// Runs `future`, giving up with [`Elapsed`] if it has not finished after `duration`. The
/// future is dropped when the time is up.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Runtime::new()?;
/// let res = rt.block_on(eddy::time::timeout(
///     Duration::from_millis(10),
///     std::future::pending::<()>(),
/// ));
/// assert!(res.is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// The future returned by [`sleep`] and [`sleep_until`].
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    registered: Option<(Arc<SleepCell>, Arc<TimerQueue>)>,
}

impl Sleep {
    fn new(deadline: Instant) -> Self {
        Sleep {
            deadline,
            registered: None,
        }
    }

    /// The instant this sleep ends.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.registered {
            Some((cell, _)) => {
                if cell.has_fired() {
                    return Poll::Ready(());
                }
                cell.set_waker(cx.waker());
                // The timer may have fired between the check and the new waker.
                if cell.has_fired() {
                    return Poll::Ready(());
                }
                Poll::Pending
            }
            None => {
                if self.deadline <= Instant::now() {
                    return Poll::Ready(());
                }
                let shared = context::current_shared().unwrap_or_else(|| {
                    panic!("no eddy runtime on this thread: eddy::time::sleep must be awaited inside an eddy runtime")
                });
                let target = context::home_worker(&shared);
                let cell = SleepCell::new(cx.waker().clone());
                let queue = shared.workers[target].timers.clone();
                shared.add_timer(target, self.deadline, TimerAction::Wake(cell.clone()));
                self.registered = Some((cell, queue));
                Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some((cell, queue)) = self.registered.take() {
            if cell.cancel() {
                queue.note_cancelled();
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`timeout`].
    #[must_use = "futures do nothing unless awaited"]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        #[pin]
        sleep: Sleep,
    }
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("future", &self.future)
            .field("deadline", &self.sleep.deadline)
            .finish()
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.sleep.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The error of a [`timeout`] whose time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl Error for Elapsed {}
