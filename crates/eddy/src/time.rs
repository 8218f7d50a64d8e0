//! Time: [`sleep`], [`sleep_until`], [`timeout`], [`interval`] and (paused clock)
//! [`advance`], built on the per-worker timer heaps and the runtime's clock.
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
use crate::timer::{deadline_from, SleepCell, TimerAction, TimerQueue};

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
    Sleep::new(deadline_from(crate::time(), duration))
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
                let shared = context::current_shared().unwrap_or_else(|| {
                    panic!("no eddy runtime on this thread: eddy::time::sleep must be awaited inside an eddy runtime")
                });
                if self.deadline <= shared.clock.now() {
                    return Poll::Ready(());
                }
                let target = crate::worker::schedule::home_worker(&shared);
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

/// What an [`Interval`] does when ticks were missed (the task was busy past one or more
/// deadlines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back until caught up; the schedule is kept.
    #[default]
    Burst,
    /// Start a new schedule: the next tick is one period after the late one.
    Delay,
    /// Drop the missed ticks; the next tick is the next one of the original schedule.
    Skip,
}

/// Ticks every `period`, the first tick completing at once (asyncio has no built-in; this is
/// tokio's `interval`).
///
/// # Panics
///
/// Panics if `period` is zero.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let start = Instant::now();
///     let mut every = eddy::time::interval(Duration::from_millis(10));
///     for _ in 0..3 {
///         every.tick().await;
///     }
///     assert!(start.elapsed() >= Duration::from_millis(20));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn interval(period: Duration) -> Interval {
    interval_at(crate::time(), period)
}

/// Like [`interval`], with the first tick at `start`.
///
/// # Panics
///
/// Panics if `period` is zero.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "eddy::time::interval: the period must be non-zero"
    );
    Interval {
        sleep: sleep_until(start),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// A periodic timer from [`interval`]: await [`tick`](Interval::tick), or use it as a
/// [`Stream`](futures_core::Stream) of the instants the ticks were scheduled for.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use futures_lite::StreamExt;
///
/// let rt = eddy::Runtime::new()?;
/// let ticks = rt.block_on(async {
///     eddy::time::interval(Duration::from_millis(1)).take(3).count().await
/// });
/// assert_eq!(ticks, 3);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Interval {
    /// The sleep until the next tick; its deadline is the tick's scheduled instant.
    sleep: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick and returns the instant it was scheduled for.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Poll form of [`tick`](Interval::tick): ready with the tick's scheduled instant once it
    /// is due, when the next tick is scheduled.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let scheduled = self.sleep.deadline();
        std::task::ready!(Pin::new(&mut self.sleep).poll(cx));
        let now = crate::time();
        let next = match self.missed {
            MissedTickBehavior::Burst => scheduled + self.period,
            MissedTickBehavior::Delay if now > scheduled + self.period => now + self.period,
            MissedTickBehavior::Delay => scheduled + self.period,
            MissedTickBehavior::Skip => {
                let behind = now.saturating_duration_since(scheduled);
                let skipped = (behind.as_nanos() / self.period.as_nanos()) as u32;
                scheduled + self.period * (skipped + 1)
            }
        };
        self.sleep = sleep_until(next);
        Poll::Ready(scheduled)
    }

    /// Sets what happens to missed ticks.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        self.sleep = sleep_until(crate::time() + self.period);
    }
}

impl futures_core::Stream for Interval {
    type Item = Instant;

    /// Never ends: each item is the next tick.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}

/// Moves a paused clock forward by `duration`, then yields so that the timers now due can
/// fire (tokio's `time::advance`).
///
/// # Panics
///
/// Outside a runtime, or on a runtime not built with
/// [`Builder::start_paused(true)`](crate::Builder::start_paused).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Builder::new().workers(1).start_paused(true).build()?;
/// rt.block_on(async {
///     let t0 = eddy::time();
///     eddy::time::advance(Duration::from_secs(60)).await;
///     assert_eq!(eddy::time() - t0, Duration::from_secs(60));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn advance(duration: Duration) {
    let shared = context::current_shared()
        .unwrap_or_else(|| panic!("no eddy runtime on this thread: time::advance needs one"));
    assert!(
        shared.clock.is_paused(),
        "time::advance needs a runtime built with Builder::start_paused(true)"
    );
    shared.clock.advance(duration);
    for w in shared.workers.iter() {
        w.notify();
    }
    crate::yield_now().await;
}
