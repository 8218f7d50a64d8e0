//! `eddy::run`: asyncio's `asyncio.run`, the one call a program's `main` needs.
//!
//! [`Runtime::run`] runs the main future on the calling thread, then shuts down the asyncio
//! way:
//!
//! 1. every task still alive is cancelled (its future dropped at its next poll; idle tasks
//!    are woken for it), and the runtime waits for them, at most [`SHUTDOWN_TIMEOUT`];
//!    a destructor that panics meanwhile is reported to the exception handler;
//! 2. tasks that are still pending after that are reported ("Task was destroyed but it is
//!    pending!", with where each was spawned) and dropped;
//! 3. the blocking pool stops (queued jobs are cancelled; running ones get what is left of
//!    the timeout) and the workers are joined.
//!
//! While the main future runs, Ctrl-C (`SIGINT`) cancels it and `run` returns
//! [`RunError::Interrupted`]; the listener is then gone, so a second Ctrl-C during the
//! shutdown terminates the process at once, as with asyncio.

use std::error::Error;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::exception::ExceptionContext;
use crate::Runtime;

/// How long the shutdown of [`Runtime::run`] waits for cancelled tasks and blocking jobs,
/// unless [`Builder::run_shutdown_timeout`](crate::Builder::run_shutdown_timeout) says
/// otherwise.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Why [`run`] or [`Runtime::run`] returned no value.
#[derive(Debug)]
pub enum RunError {
    /// The runtime could not be built.
    Build(io::Error),
    /// Ctrl-C (`SIGINT`) cancelled the main future.
    Interrupted,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Build(e) => write!(f, "could not start the eddy runtime: {e}"),
            RunError::Interrupted => f.write_str("interrupted by Ctrl-C (SIGINT)"),
        }
    }
}

impl Error for RunError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RunError::Build(e) => Some(e),
            RunError::Interrupted => None,
        }
    }
}

/// Builds a default runtime, runs `main` on it, then shuts everything down (asyncio's
/// `asyncio.run`; see [`Runtime::run`]).
///
/// # Errors
///
/// [`RunError::Build`] if the runtime cannot start, [`RunError::Interrupted`] on Ctrl-C.
///
/// # Examples
///
/// ```
/// let answer = eddy::run(async {
///     let t = eddy::spawn(async { 40 + 2 });
///     drop(eddy::spawn(std::future::pending::<()>())); // cancelled at the end
///     t.await.unwrap()
/// })?;
/// assert_eq!(answer, 42);
/// # Ok::<(), eddy::RunError>(())
/// ```
pub fn run<F: Future>(main: F) -> Result<F::Output, RunError> {
    Runtime::new().map_err(RunError::Build)?.run(main)
}

impl Runtime {
    /// Runs `main` on the calling thread, then cancels every remaining task, waits for them
    /// (at most [`SHUTDOWN_TIMEOUT`] by default), reports those that would not stop, stops the blocking
    /// pool and joins the workers (asyncio's `asyncio.run`, module docs of `run`).
    ///
    /// # Errors
    ///
    /// [`RunError::Interrupted`] if Ctrl-C cancelled `main`.
    ///
    /// # Panics
    ///
    /// As [`block_on`](Runtime::block_on); a panic of `main` propagates after the shutdown.
    pub fn run<F: Future>(self, main: F) -> Result<F::Output, RunError> {
        let out = self.block_on(async {
            // Without a SIGINT listener (for example in a process that cannot install one)
            // the main future simply runs.
            let mut sigint = crate::signal::signal(crate::signal::SignalKind::interrupt()).ok();
            let mut main = pin!(main);
            let mut interrupted = pin!(async {
                match sigint.as_mut() {
                    Some(s) => {
                        let _ = s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            });
            poll_fn(|cx| {
                if let Poll::Ready(v) = main.as_mut().poll(cx) {
                    return Poll::Ready(Some(v));
                }
                interrupted.as_mut().poll(cx).map(|()| None)
            })
            .await
        });
        let timeout = self.shared().config.run_shutdown_timeout;
        self.finish(
            Instant::now()
                .checked_add(timeout)
                .unwrap_or_else(Instant::now),
        );
        out.ok_or(RunError::Interrupted)
    }

    /// Steps 1-3 of the module docs.
    fn finish(self, deadline: Instant) {
        let shared = self.shared().clone();
        shared.cancel_all_tasks();
        while shared.registry.len() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for task in shared.registry.dump() {
            let ctx = ExceptionContext::new("Task was destroyed but it is pending!")
                .with_task(task.id)
                .with_location(task.location);
            shared.handler.call(&ctx);
        }
        shared.blocking.shutdown();
        while shared.blocking.threads() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.shutdown_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}
