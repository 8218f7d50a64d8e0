//! [`Builder`]: how a runtime is configured and its worker threads started.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::blocking::pool::BlockingPool;
use crate::clock::Clock;
use crate::exception::{ExceptionContext, ExceptionHandler, HandlerFn};
use crate::hooks::ThreadHooks;
use crate::runtime::Runtime;
use crate::worker::monitor::alarm::Alarm;
use crate::worker::monitor::state::MonitorState;
use crate::worker::shared::{Config, Shared, WorkerSlot};
use crate::worker::spare::Spares;

/// asyncio's default `slow_callback_duration`.
const DEFAULT_SLOW_CALLBACK: Duration = Duration::from_millis(100);

/// Configures and builds a [`Runtime`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = eddy::Builder::new()
///     .workers(2)
///     .thread_name("my-app-worker")
///     .debug(true)
///     .slow_callback_duration(Duration::from_millis(50))
///     .exception_handler(|ctx: &eddy::ExceptionContext| eprintln!("oops: {ctx}"))
///     .build()?;
/// assert_eq!(rt.block_on(async { 1 }), 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Builder {
    workers: Option<usize>,
    spare_workers: Option<usize>,
    thread_name: String,
    debug: Option<bool>,
    slow_callback_duration: Duration,
    handler: Option<Arc<HandlerFn>>,
    max_blocking_threads: usize,
    thread_keep_alive: Duration,
    hooks: ThreadHooks,
    run_shutdown_timeout: Duration,
    start_paused: bool,
    time_slice: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("thread_name", &self.thread_name)
            .field("debug", &self.debug)
            .field("slow_callback_duration", &self.slow_callback_duration)
            .field("exception_handler", &self.handler.is_some())
            .field("max_blocking_threads", &self.max_blocking_threads)
            .field("thread_keep_alive", &self.thread_keep_alive)
            .field("hooks", &self.hooks)
            .field("run_shutdown_timeout", &self.run_shutdown_timeout)
            .field("start_paused", &self.start_paused)
            .field("worker_time_slice", &self.time_slice)
            .finish()
    }
}

impl Builder {
    /// A builder with the defaults: one worker per CPU (`num_cpus::get()`), threads named
    /// `eddy-worker-N`, debug mode from the `EDDY_DEBUG` environment variable, a 100 ms slow
    /// callback threshold, and an exception handler that logs through `tracing`.
    pub fn new() -> Self {
        Builder {
            workers: None,
            spare_workers: None,
            thread_name: "eddy-worker".to_string(),
            debug: None,
            slow_callback_duration: DEFAULT_SLOW_CALLBACK,
            handler: None,
            max_blocking_threads: 512,
            thread_keep_alive: Duration::from_secs(10),
            hooks: ThreadHooks::default(),
            run_shutdown_timeout: crate::SHUTDOWN_TIMEOUT,
            start_paused: false,
            time_slice: Some(crate::time_slice::DEFAULT_TIME_SLICE),
        }
    }

    /// The scheduler time slice the workers, spares and monitor ask Linux for (default:
    /// 100 µs, the shortest the kernel honours; `None` leaves them the slice they inherit,
    /// usually the kernel's default of one to a few milliseconds, more with more CPUs).
    ///
    /// A worker stuck in a long job is served by a sibling that the monitor sends, and both
    /// need a CPU at once, possibly the one the long job is running on. A thread with a short
    /// slice that wakes there preempts the job instead of waiting for the next timer tick
    /// (4 ms on many kernels), so the stuck worker's sockets and queue wait microseconds.
    /// It changes how a thread's CPU time is cut up, not how much it gets. Kernels before
    /// 6.12 ignore the request; where the call is refused, the threads run as before.
    ///
    /// Slices outside 100 µs to 100 ms make [`build`](Builder::build) fail.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = eddy::Builder::new()
    ///     .workers(2)
    ///     .worker_time_slice(Some(Duration::from_millis(1)))
    ///     .build()?;
    /// assert_eq!(rt.block_on(async { 1 }), 1);
    ///
    /// let refused = eddy::Builder::new()
    ///     .worker_time_slice(Some(Duration::from_micros(10)))
    ///     .build();
    /// assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn worker_time_slice(mut self, slice: Option<Duration>) -> Self {
        self.time_slice = slice;
        self
    }

    /// Starts the runtime with its clock paused (for tests): time stands still and jumps
    /// straight to the next timer deadline whenever every worker is idle, with any number
    /// of workers; [`time::advance`](crate::time::advance) moves it by hand. `eddy::time()`,
    /// `sleep`, `call_later` and `interval` all follow this clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # // A hang guard: a clock that does not jump would make the sleep last three hours.
    /// # std::thread::spawn(|| {
    /// #     std::thread::sleep(Duration::from_secs(120));
    /// #     eprintln!("the paused clock did not jump");
    /// #     std::process::exit(1);
    /// # });
    /// let rt = eddy::Builder::new().workers(2).start_paused(true).build()?;
    /// let virtual_elapsed = rt.block_on(async {
    ///     let start = eddy::time();
    ///     eddy::time::sleep(Duration::from_secs(3 * 3600)).await; // three hours...
    ///     eddy::time() - start
    /// }); // ...in a moment
    /// assert_eq!(virtual_elapsed, Duration::from_secs(3 * 3600));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_paused(mut self, paused: bool) -> Self {
        self.start_paused = paused;
        self
    }

    /// How long [`Runtime::run`] waits, after the main future, for cancelled tasks and
    /// blocking jobs to stop (default [`SHUTDOWN_TIMEOUT`](crate::SHUTDOWN_TIMEOUT), 5 s).
    pub fn run_shutdown_timeout(mut self, d: Duration) -> Self {
        self.run_shutdown_timeout = d;
        self
    }

    /// Runs `f` at the start of every thread the runtime starts (workers and blocking-pool
    /// threads), on that thread, before it runs any job.
    ///
    /// A worker pinned here to a single CPU stays there. Otherwise, while a worker runs a
    /// long job, the runtime narrows the CPU affinity of the other workers to their own set
    /// without that job's CPU, so that what they serve for the busy worker does not wait
    /// behind its job for a turn on its CPU, and gives them their set back once the job is
    /// over (unless their set was changed meanwhile: that change stands).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let s = started.clone();
    /// let rt = eddy::Builder::new()
    ///     .workers(2)
    ///     .on_thread_start(move || { s.fetch_add(1, Ordering::SeqCst); })
    ///     .build()?;
    /// rt.block_on(async {});
    /// drop(rt);
    /// assert_eq!(started.load(Ordering::SeqCst), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn on_thread_start<F: Fn() + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.hooks.on_start = Some(Arc::new(f));
        self
    }

    /// Runs `f` at the end of every thread the runtime started, on that thread, after its
    /// last job.
    pub fn on_thread_stop<F: Fn() + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.hooks.on_stop = Some(Arc::new(f));
        self
    }

    /// The most threads the blocking pool ([`spawn_blocking`](crate::spawn_blocking)) may
    /// run at once (default 512). `0` makes [`build`](Builder::build) fail.
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking-pool thread waits for work before it exits (default 10 s).
    pub fn thread_keep_alive(mut self, d: Duration) -> Self {
        self.thread_keep_alive = d;
        self
    }

    /// Sets the number of worker threads. `0` makes [`build`](Builder::build) fail with
    /// `InvalidInput`.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// How many spare workers may stand in while every worker is stuck in a long job (default:
    /// as many as there are workers; none with a single worker). A spare's thread starts
    /// the first time it is needed; `0` turns them off, so that a runtime whose workers are
    /// all busy serves nothing until one of them is free, as tokio's and smol's do.
    ///
    /// ```
    /// let rt = eddy::Builder::new().workers(2).spare_workers(1).build()?;
    /// assert_eq!(rt.metrics().spares.len(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spare_workers(mut self, n: usize) -> Self {
        self.spare_workers = Some(n);
        self
    }

    /// Sets the prefix of the worker threads' names (the worker index is appended).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Turns debug mode on or off (default: on when `EDDY_DEBUG=1` is set). In debug mode a
    /// callback or task poll that runs longer than
    /// [`slow_callback_duration`](Builder::slow_callback_duration) is reported through
    /// `tracing` (target `eddy::slow_callback`) with its duration and where it was scheduled.
    pub fn debug(mut self, on: bool) -> Self {
        self.debug = Some(on);
        self
    }

    /// The threshold for slow-callback reports in debug mode (default 100 ms).
    pub fn slow_callback_duration(mut self, d: Duration) -> Self {
        self.slow_callback_duration = d;
        self
    }

    /// Sets the exception handler: called with an [`ExceptionContext`] for every panic in a
    /// callback, and for every task panic nobody retrieved. It runs on the thread that met
    /// the error; a panic inside the handler is caught and logged.
    pub fn exception_handler<F>(mut self, f: F) -> Self
    where
        F: Fn(&ExceptionContext) + Send + Sync + 'static,
    {
        self.handler = Some(Arc::new(f));
        self
    }

    /// Starts the worker threads and returns the runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if `workers(0)` was asked for; any error from creating a worker's
    /// poller (epoll and eventfd) or spawning its thread.
    pub fn build(self) -> io::Result<Runtime> {
        let n = self.workers.unwrap_or_else(num_cpus::get);
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an eddy runtime needs at least one worker (Builder::workers(0) was given)",
            ));
        }
        if self.max_blocking_threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_blocking_threads must be at least 1",
            ));
        }
        if n > u16::MAX as usize / 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("too many workers: {n}"),
            ));
        }
        let time_slice = self
            .time_slice
            .map(crate::time_slice::validate)
            .transpose()?;
        let debug = self.debug.unwrap_or_else(|| {
            std::env::var("EDDY_DEBUG").is_ok_and(|v| !v.is_empty() && v != "0")
        });
        let epoch = Instant::now();
        // With one worker there is no sibling to rescue it, and so no call for a stand-in
        // either: a single-threaded runtime stays single-threaded.
        let spares = if n > 1 {
            self.spare_workers.unwrap_or(n)
        } else {
            0
        };
        let mut queues: Vec<crossbeam_deque::Worker<crate::job::Job>> = (0..n + spares)
            .map(|_| crossbeam_deque::Worker::new_fifo())
            .collect();
        let slots = queues
            .iter()
            .map(|q| WorkerSlot::new(q.stealer(), epoch))
            .collect::<io::Result<Box<[_]>>>()?;
        let spare_queues = queues.split_off(n);
        let config = Config {
            debug,
            slow_callback_duration: self.slow_callback_duration,
            run_shutdown_timeout: self.run_shutdown_timeout,
            time_slice,
        };
        // The monitor serves stuck workers through their siblings: useless with one worker.
        let monitor = if n > 1 {
            MonitorState::with_alarm(Alarm::new()?)
        } else {
            MonitorState::default()
        };
        let shared = Arc::new(Shared::new(
            slots,
            Spares::new(spare_queues, self.thread_name.clone(), self.hooks.clone()),
            ExceptionHandler::new(self.handler),
            config,
            BlockingPool::new(
                self.max_blocking_threads,
                self.thread_keep_alive,
                self.thread_name.clone(),
                self.hooks.clone(),
            ),
            Clock::new(epoch, self.start_paused),
            monitor,
        ));
        let mut threads = Vec::with_capacity(n);
        for (index, queue) in queues.into_iter().enumerate() {
            let name = format!("{}-{index}", self.thread_name);
            let spawned =
                crate::worker::spawn_thread(name, &shared, index, queue, self.hooks.clone());
            keep_or_unwind(spawned, &mut threads, &shared)?;
        }
        if n > 1 {
            let shared2 = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-monitor", self.thread_name))
                .spawn(move || {
                    crate::time_slice::request(time_slice);
                    crate::worker::monitor::run(&shared2)
                });
            keep_or_unwind(spawned, &mut threads, &shared)?;
        }
        Ok(Runtime::from_parts(shared, threads))
    }
}

/// Keeps a freshly started runtime thread, or, if starting it failed, closes the runtime,
/// joins the threads already started and returns the error (a half-built runtime must not
/// keep running behind a failed `build`).
fn keep_or_unwind(
    spawned: io::Result<std::thread::JoinHandle<()>>,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
    shared: &Shared,
) -> io::Result<()> {
    match spawned {
        Ok(t) => {
            threads.push(t);
            Ok(())
        }
        Err(e) => {
            shared.close();
            for t in threads.drain(..) {
                let _ = t.join();
            }
            Err(e)
        }
    }
}
