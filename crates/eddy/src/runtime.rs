//! [`Runtime`]: owns the worker threads; runs futures to completion and shuts down.
//!
//! Shutdown, in order (`shutdown_timeout` and `Drop`):
//!
//! 1. Mark the runtime closed and notify every worker's poller. From now on submissions
//!    through a [`RuntimeHandle`] fail with [`Closed`](crate::Closed) and wakes of tasks make
//!    them finish as cancelled.
//! 2. Each worker finishes the job it is running, leaves its loop and drops what it owns:
//!    its ready queue, its pinned tasks (which must be dropped on that thread) and their
//!    registry entries. Then it counts itself out.
//! 3. The caller waits for all workers to count out (or for the timeout).
//! 4. The caller drops what no worker owns: the global injector, every timer heap, and every
//!    idle stealable task (woken once through the registry so that its cell drops the future).
//! 5. The worker threads that finished are joined; the others are left to finish on their own
//!    (after the timeout) and will drop their own queues when they do.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::context;
use crate::handle::RuntimeHandle;
use crate::worker::shared::Shared;

/// An eddy runtime: `N` worker threads, each an asyncio-style event loop, that steal work
/// from each other.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let answer = rt.block_on(async {
///     let t = eddy::spawn(async { 21 * 2 });
///     t.await.unwrap()
/// });
/// assert_eq!(answer, 42);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.threads.len())
            .finish()
    }
}

impl Runtime {
    /// A runtime with the default settings (see [`Builder::new`](crate::Builder::new)).
    ///
    /// # Errors
    ///
    /// Any error from creating the pollers or spawning the worker threads.
    pub fn new() -> std::io::Result<Runtime> {
        crate::Builder::new().build()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn from_parts(shared: Arc<Shared>, threads: Vec<JoinHandle<()>>) -> Self {
        Runtime { shared, threads }
    }

    /// A handle for submitting work from any thread.
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle::new(self.shared.clone())
    }

    /// Runs `future` to completion on the calling thread and returns its output (asyncio's
    /// `run_until_complete`). The thread parks while the future is pending. Inside, the thread
    /// counts as part of the runtime: `eddy::spawn`, `eddy::call_soon`, `eddy::time::sleep`
    /// work and hand their work to the workers.
    ///
    /// # Panics
    ///
    /// Panics with "this event loop is already running" when called on a worker thread or
    /// inside another `block_on` (of any eddy runtime). A panic of `future` itself propagates.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(eddy::time::sleep(Duration::from_millis(1)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _guest = context::enter_guest(self.shared.clone());
        let mut future = std::pin::pin!(future);
        let parker = Arc::new(ThreadWaker {
            thread: std::thread::current(),
            asleep: AtomicBool::new(false),
            awake_count: self.shared.block_ons_awake.clone(),
            clock: self.shared.clock.clone(),
        });
        let waker = Waker::from(parker.clone());
        let mut cx = Context::from_waker(&waker);
        let _awake = AwakeBlockOn::enter(&self.shared.block_ons_awake, &self.shared.clock);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            parker.sleep(&self.shared);
        }
    }

    /// Every live task: id, name, spawn location, state (idle, scheduled, running), number of
    /// polls and age. Each registry shard is locked only while it is read, so workers are
    /// never stopped for more than a moment.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let t = rt.handle().spawn(std::future::pending::<()>());
    /// // Scheduled until a worker has polled it once; then it waits, idle.
    /// while rt.dump_tasks()[0].state != eddy::task::TaskState::Idle {
    ///     std::thread::yield_now();
    /// }
    /// let dump = rt.dump_tasks();
    /// assert_eq!(dump.len(), 1);
    /// println!("{}", dump[0]);
    /// # t.cancel();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dump_tasks(&self) -> Vec<crate::task::dump::TaskInfo> {
        self.shared.registry.dump()
    }

    /// A snapshot of the runtime's queues and timer heaps.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = eddy::Builder::new().workers(1).build()?;
    /// let _kept = rt.handle().call_later(Duration::from_secs(60), || ())?;
    /// let t = rt.handle().call_later(Duration::from_secs(120), || ())?;
    /// t.cancel();
    /// // The cancelled timer stays in the heap until it reaches the top (or a rebuild).
    /// let w = &rt.metrics().workers[0];
    /// assert_eq!((w.timer_heap_size, w.timers_cancelled_in_heap), (2, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metrics(&self) -> crate::RuntimeMetrics {
        crate::metrics::snapshot(&self.shared)
    }

    /// Blocks the calling thread until [`RuntimeHandle::stop`] is called (asyncio's
    /// `run_forever`). The workers run all along; this only waits. A `stop()` that came
    /// before makes it return at once; each `stop()` releases one `run_forever`.
    ///
    /// # Panics
    ///
    /// Panics with "this event loop is already running" on a worker thread or inside
    /// `block_on`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = eddy::Runtime::new()?;
    /// let h = rt.handle();
    /// h.call_soon_threadsafe({
    ///     let h = h.clone();
    ///     move || h.stop()
    /// })?;
    /// rt.run_forever();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_forever(&self) {
        let _guest = context::enter_guest(self.shared.clone());
        self.shared.wait_for_stop();
    }

    /// Shuts the runtime down, waiting at most `timeout` for the workers to finish the job
    /// each is running. Every pending task, callback and timer is dropped (tasks owned by a
    /// worker that is still busy after the timeout are dropped by it when it finishes).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = eddy::Runtime::new()?;
    /// let handle = rt.handle();
    /// rt.shutdown_timeout(Duration::from_secs(1));
    /// assert!(handle.is_closed());
    /// assert!(handle.call_soon_threadsafe(|| ()).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.shutdown(Instant::now().checked_add(timeout));
    }

    fn shutdown(&mut self, deadline: Option<Instant>) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.close();
        // Dropped by one of its own workers (the runtime was moved into a task): that worker
        // cannot wait for itself. It drains its own queues when its current job returns.
        let deadline = if context::is_worker_of(&self.shared) {
            Some(Instant::now())
        } else {
            deadline
        };
        let all_exited = self.shared.wait_workers_exited(deadline);
        self.shared.drain();
        self.threads.extend(self.shared.spares.take_threads());
        for t in self.threads.drain(..) {
            if all_exited || t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Runtime {
    /// Shuts down like [`shutdown_timeout`](Runtime::shutdown_timeout) without a time limit:
    /// waits until each worker has finished the job it is running.
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

/// Wakes a thread parked in `block_on`.
///
/// It also keeps `Shared::block_ons_awake` true: the count of `block_on` threads that are
/// running or have been woken. A paused clock must not jump while one of them has work to
/// do (it may be about to set the next timer, as an `interval` does after each tick), and
/// the workers cannot see that thread otherwise. The waker counts a sleeping thread as
/// awake *before* unparking it, so a worker that fires a `block_on` timer and then goes
/// idle sees the count.
struct ThreadWaker {
    thread: Thread,
    /// Set while the thread is counted out of `block_ons_awake` (about to park or parked).
    asleep: AtomicBool,
    awake_count: Arc<AtomicUsize>,
    clock: Arc<Clock>,
}

impl ThreadWaker {
    /// Parks the calling (`block_on`) thread until woken, counted out of
    /// `block_ons_awake` meanwhile.
    fn sleep(&self, shared: &Shared) {
        self.asleep.store(true, SeqCst);
        let was = self.awake_count.fetch_sub(1, SeqCst);
        if was == 1 && shared.clock.is_paused() {
            // Every worker may already be idle, having declined to jump the clock because of
            // us: one of them must look again.
            shared.workers[0].notify();
        }
        std::thread::park();
        // Woken by something other than our waker (a spurious unpark): count ourselves in.
        self.count_in();
    }

    fn wake_thread(&self) {
        self.count_in();
        self.thread.unpark();
    }

    /// Counts the thread back in, once per sleep, whoever notices first.
    fn count_in(&self) {
        if self.asleep.swap(false, SeqCst) {
            self.awake_count.fetch_add(1, SeqCst);
            self.clock.note_wake();
        }
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_thread();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_thread();
    }
}

/// Counts a `block_on` thread in `block_ons_awake` for as long as it lives (it is awake
/// whenever it can return or unwind).
struct AwakeBlockOn<'a>(&'a AtomicUsize);

impl<'a> AwakeBlockOn<'a> {
    fn enter(count: &'a AtomicUsize, clock: &Clock) -> Self {
        count.fetch_add(1, SeqCst);
        clock.note_wake();
        AwakeBlockOn(count)
    }
}

impl Drop for AwakeBlockOn<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}
