//! [`RuntimeHandle`]: submitting work to a runtime from any thread.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::callback::{Callback, Handle, TimerHandle};
use crate::context;
use crate::exception::ExceptionContext;
use crate::task::handle::Task;
use crate::worker::shared::Shared;

/// The error of submitting work to a runtime that has shut down.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let h = rt.handle();
/// drop(rt);
/// let err = h.call_soon_threadsafe(|| ()).unwrap_err();
/// assert_eq!(err.to_string(), "event loop is closed");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("event loop is closed")
    }
}

impl Error for Closed {}

/// A cheap, cloneable handle to a runtime, usable from any thread: threads the runtime did
/// not create can submit callbacks, timers and tasks through it.
///
/// Submissions from a worker of the same runtime go to that worker's own queue; from any
/// other thread they go through the global injector and wake one parked worker (through its
/// eventfd), and only when no worker is already awake and searching.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let handle = rt.handle();
/// let (tx, rx) = std::sync::mpsc::channel();
/// std::thread::spawn(move || {
///     handle.call_soon_threadsafe(move || tx.send("hello from a callback").unwrap()).unwrap();
/// });
/// assert_eq!(rx.recv().unwrap(), "hello from a callback");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct RuntimeHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("workers", &self.shared.workers.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl RuntimeHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RuntimeHandle { shared }
    }

    /// The handle of the runtime this thread belongs to (a worker, or inside `block_on`).
    ///
    /// # Panics
    ///
    /// Panics with "no eddy runtime on this thread" elsewhere; see
    /// [`try_current`](RuntimeHandle::try_current).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let h = eddy::RuntimeHandle::current();
    ///     assert!(!h.is_closed());
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn current() -> RuntimeHandle {
        Self::try_current().unwrap_or_else(|| {
            panic!("no eddy runtime on this thread: RuntimeHandle::current() needs a worker thread or block_on")
        })
    }

    /// The handle of the runtime this thread belongs to, or `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy::RuntimeHandle::try_current().is_none());
    /// ```
    pub fn try_current() -> Option<RuntimeHandle> {
        context::current_shared().map(RuntimeHandle::new)
    }

    /// Spawns a future on the runtime from any thread.
    ///
    /// If the runtime has shut down, the future is dropped and the returned task resolves to
    /// [`TaskError::Cancelled`](crate::TaskError::Cancelled).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let task = rt.handle().spawn(async { "done" });
    /// assert_eq!(rt.block_on(task).unwrap(), "done");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::worker::schedule::spawn_stealable(&self.shared, future, Location::caller(), None)
    }

    /// Schedules `f` to run on the runtime soon, from any thread (asyncio's
    /// `call_soon_threadsafe`).
    ///
    /// # Errors
    ///
    /// [`Closed`] if the runtime has shut down; `f` is then dropped, never run.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.handle().call_soon_threadsafe(move || tx.send(1).unwrap())?;
    /// assert_eq!(rx.recv()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn call_soon_threadsafe<F>(&self, f: F) -> Result<Handle, Closed>
    where
        F: FnOnce() + Send + 'static,
    {
        if self.is_closed() {
            return Err(Closed);
        }
        let cell: Callback = Callback::new(f, Location::caller());
        crate::worker::schedule::submit_callback(&self.shared, cell.clone());
        if self.is_closed() && (cell.cancel() || cell.cancelled()) {
            // Lost the race with shutdown and the callback never ran: it is dropped now (or
            // was, by whoever drained the queue). If it already ran, that is a success.
            return Err(Closed);
        }
        Ok(Handle { cell })
    }

    /// Schedules `f` to run after `delay`, from any thread. Huge delays never fire.
    ///
    /// # Errors
    ///
    /// [`Closed`] if the runtime has shut down; `f` is dropped, never run.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = eddy::Runtime::new()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.handle().call_later(Duration::from_millis(10), move || tx.send(()).unwrap())?;
    /// rx.recv()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn call_later<F>(&self, delay: Duration, f: F) -> Result<TimerHandle, Closed>
    where
        F: FnOnce() + Send + 'static,
    {
        let when = self.shared.clock.deadline_after(delay);
        self.call_at_inner(when, f, Location::caller())
    }

    /// Schedules `f` to run at `when`, from any thread. A past deadline runs at once.
    ///
    /// # Errors
    ///
    /// [`Closed`] if the runtime has shut down; `f` is dropped, never run.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.handle().call_at(eddy::time(), move || tx.send(()).unwrap())?;
    /// rx.recv()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn call_at<F>(&self, when: Instant, f: F) -> Result<TimerHandle, Closed>
    where
        F: FnOnce() + Send + 'static,
    {
        self.call_at_inner(when, f, Location::caller())
    }

    fn call_at_inner<F>(
        &self,
        when: Instant,
        f: F,
        location: &'static Location<'static>,
    ) -> Result<TimerHandle, Closed>
    where
        F: FnOnce() + Send + 'static,
    {
        if self.is_closed() {
            return Err(Closed);
        }
        let timer =
            crate::worker::schedule::submit_timer(&self.shared, when, Callback::new(f, location));
        if self.is_closed() {
            // Shutdown may have drained the heaps before our push: cancel it ourselves,
            // unless it already ran (a past deadline), which is then a success.
            timer.cancel();
            if timer.cancelled() {
                return Err(Closed);
            }
        }
        Ok(timer)
    }

    /// Every live task; see [`Runtime::dump_tasks`](crate::Runtime::dump_tasks).
    pub fn dump_tasks(&self) -> Vec<crate::task::dump::TaskInfo> {
        self.shared.registry.dump()
    }

    /// Hands `ctx` to the runtime's exception handler, on this thread, as the runtime does
    /// with a panic nobody else can take (asyncio's `loop.call_exception_handler`). For a
    /// library or application to report an error of its own in the same place. A handler
    /// that panics is contained.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let rt = eddy::Builder::new()
    ///     .exception_handler(move |ctx: &eddy::ExceptionContext| {
    ///         tx.send(ctx.to_string()).unwrap();
    ///     })
    ///     .build()?;
    /// rt.handle()
    ///     .call_exception_handler(&eddy::ExceptionContext::new("lost a peer").with_panic_message("reset"));
    /// assert_eq!(rx.recv().unwrap(), "lost a peer: reset");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn call_exception_handler(&self, ctx: &ExceptionContext) {
        self.shared.handler.call(ctx);
    }

    /// Replaces the exception handler, from any thread and while the runtime runs (asyncio's
    /// `loop.set_exception_handler`). Every report from then on goes to `f`; a report being
    /// handled meanwhile finishes with the handler it started with.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.handle().set_exception_handler(move |ctx: &eddy::ExceptionContext| {
    ///     let _ = tx.send(ctx.panic_message().map(String::from));
    /// });
    /// rt.block_on(async { eddy::call_soon(|| panic!("late handler")) });
    /// assert_eq!(rx.recv().unwrap().as_deref(), Some("late handler"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_exception_handler<F>(&self, f: F)
    where
        F: Fn(&ExceptionContext) + Send + Sync + 'static,
    {
        self.shared.handler.set(Some(Arc::new(f)));
    }

    /// Goes back to the default handler, which logs
    /// ([`default_exception_handler`](crate::default_exception_handler)).
    pub fn reset_exception_handler(&self) {
        self.shared.handler.set(None);
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Makes [`Runtime::run_forever`](crate::Runtime::run_forever) return. Callable from any
    /// thread, task or callback. It does not shut the runtime down.
    pub fn stop(&self) {
        self.shared.stop();
    }

    /// True once the runtime has shut down (or is shutting down).
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }
}
