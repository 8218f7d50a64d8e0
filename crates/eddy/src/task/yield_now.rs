//! `yield_now`: asyncio's `await asyncio.sleep(0)`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Gives the worker a chance to run everything else that is ready before this task goes on.
///
/// The task is put at the back of its worker's ready queue, so it runs again in the *next*
/// `_run_once` cycle, after the IO and timers of this one: a task that yields in a loop
/// cannot starve the others.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     for _ in 0..3 {
///         eddy::yield_now().await;
///     }
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
