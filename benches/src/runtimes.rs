//! The three runtimes behind one small trait, side by side.
//!
//! | operation                     | eddy                                  | tokio (multi-thread)              | smol (async-executor + async-io)      |
//! |-------------------------------|---------------------------------------|-----------------------------------|---------------------------------------|
//! | spawn, inside a task          | `eddy::spawn`                         | `tokio::spawn`                    | `Executor::spawn` (worker's executor) |
//! | spawn, from a foreign thread  | `RuntimeHandle::spawn`                | `Handle::spawn`                   | `Executor::spawn`                     |
//! | yield                         | `eddy::yield_now`                     | `tokio::task::yield_now`          | `futures_lite::future::yield_now`     |
//! | call soon, inside a task      | `eddy::call_soon`                     | spawn `async move { f() }`        | spawn `async move { f() }`            |
//! | call soon, foreign thread     | `RuntimeHandle::call_soon_threadsafe` | `Handle::spawn(async { f() })`    | `Executor::spawn(async { f() })`      |
//! | sleep, inside a task          | `eddy::time::sleep`                   | `tokio::time::sleep`              | `async_io::Timer::after`              |
//! | call later / cancel           | `eddy::call_later` / `TimerHandle::cancel` | spawn `sleep(d).await; f()` / `JoinHandle::abort` | spawn `Timer::after(d).await; f()` / drop the `Task` |
//!
//! All three are built with [`WORKERS`](crate::WORKERS) worker threads. tokio is built with
//! `enable_all()` (IO and time drivers), as eddy's workers each own an epoll poller and smol's
//! workers drive the async-io reactor.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::util::block_on_timeout;

/// How long one benchmark iteration may take before it is declared hung.
pub const HANG_TIMEOUT: Duration = Duration::from_secs(60);

/// A workload did not finish within [`HANG_TIMEOUT`] on the named runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hung {
    /// The runtime's name.
    pub runtime: &'static str,
}

impl fmt::Display for Hung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "workload did not finish on {} within {:?} (hang)",
            self.runtime, HANG_TIMEOUT
        )
    }
}

impl std::error::Error for Hung {}

/// A spawned task's handle: a future of the task's output (panicking if the task failed),
/// which can be detached or cancelled.
pub trait JoinTask<T>: Future<Output = T> + Send + Unpin + 'static {
    /// Lets the task run on without anyone awaiting it.
    fn detach(self);
    /// Cancels the task.
    fn cancel(self);
}

/// What a workload needs from a runtime.
pub trait Runtime: Sized + 'static {
    /// Name used as the criterion benchmark id.
    const NAME: &'static str;
    /// A cheap, cloneable handle usable from threads outside the runtime.
    type Handle: Clone + Send + Sync + 'static;
    /// The handle of a spawned task.
    type Join<T: Send + 'static>: JoinTask<T>;
    /// A pending timer (see [`call_later`](Runtime::call_later)).
    type Timer: Send + 'static;

    /// Starts the runtime with `workers` worker threads.
    fn build(workers: usize) -> Self;
    /// A handle for foreign threads.
    fn handle(&self) -> Self::Handle;

    /// Spawns a task from inside a task of this runtime, through the runtime's
    /// "current runtime" API.
    fn spawn<F>(f: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
    /// Spawns a task from any thread through a handle.
    fn spawn_remote<F>(h: &Self::Handle, f: F) -> Self::Join<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
    /// Yields to the scheduler once.
    fn yield_now() -> impl Future<Output = ()> + Send;
    /// Waits for `d`, called from inside a task.
    fn sleep(d: Duration) -> impl Future<Output = ()> + Send;
    /// Runs `f` soon, called from inside a task (eddy: a callback; others: a task).
    fn call_soon(f: impl FnOnce() + Send + 'static);
    /// Runs `f` soon, called from a foreign thread (eddy: a callback; others: a task).
    fn call_soon_threadsafe(h: &Self::Handle, f: impl FnOnce() + Send + 'static);
    /// Runs `f` after `delay`, called from inside a task. `armed` is incremented once the
    /// timer is registered with the runtime's timer structure (at once for eddy; when the
    /// timer task first polls its sleep for tokio and smol).
    fn call_later(
        delay: Duration,
        armed: &'static AtomicUsize,
        f: impl FnOnce() + Send + 'static,
    ) -> Self::Timer;
    /// Lets a timer fire.
    fn keep_timer(t: Self::Timer);
    /// Cancels a timer.
    fn cancel_timer(t: Self::Timer);

    /// Runs `f` as a task on the runtime's workers and blocks the calling (non-runtime)
    /// thread until it is done, or fails after [`HANG_TIMEOUT`].
    fn run<F>(&self, f: F) -> Result<F::Output, Hung>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = Self::spawn_remote(&self.handle(), f);
        block_on_timeout(task, HANG_TIMEOUT).ok_or(Hung {
            runtime: Self::NAME,
        })
    }
}

// ----- eddy ---------------------------------------------------------------------------------

/// An eddy runtime.
#[derive(Debug)]
pub struct Eddy {
    rt: eddy::Runtime,
}

impl Eddy {
    /// The runtime itself, for what only eddy has (its metrics, say).
    pub fn runtime(&self) -> &eddy::Runtime {
        &self.rt
    }
}

/// [`JoinTask`] of eddy.
#[derive(Debug)]
pub struct EddyJoin<T>(eddy::Task<T>);

impl<T> Future for EddyJoin<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|e| panic!("eddy task failed: {e}")))
    }
}

impl<T: Send + 'static> JoinTask<T> for EddyJoin<T> {
    fn detach(self) {
        drop(self.0); // dropping an eddy::Task detaches it
    }
    fn cancel(self) {
        self.0.cancel();
    }
}

impl Runtime for Eddy {
    const NAME: &'static str = "eddy";
    type Handle = eddy::RuntimeHandle;
    type Join<T: Send + 'static> = EddyJoin<T>;
    type Timer = eddy::TimerHandle;

    fn build(workers: usize) -> Self {
        let mut builder = eddy::Builder::new().workers(workers).debug(false);
        // An A/B switch for experiments: the workers keep the kernel's time slice.
        if std::env::var_os("EDDY_BENCH_KERNEL_SLICE").is_some() {
            builder = builder.worker_time_slice(None);
        }
        // Another: how many spare workers the monitor may start (the default otherwise).
        if let Some(n) = std::env::var("EDDY_BENCH_SPARES")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            builder = builder.spare_workers(n);
        }
        let rt = builder.build().expect("build eddy runtime");
        Eddy { rt }
    }

    fn handle(&self) -> Self::Handle {
        self.rt.handle()
    }

    fn spawn<F>(f: F) -> EddyJoin<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        EddyJoin(eddy::spawn(f))
    }

    fn spawn_remote<F>(h: &Self::Handle, f: F) -> EddyJoin<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        EddyJoin(h.spawn(f))
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        eddy::yield_now()
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + Send {
        eddy::time::sleep(d)
    }

    fn call_soon(f: impl FnOnce() + Send + 'static) {
        eddy::call_soon(f);
    }

    fn call_soon_threadsafe(h: &Self::Handle, f: impl FnOnce() + Send + 'static) {
        h.call_soon_threadsafe(f).expect("eddy runtime closed");
    }

    fn call_later(
        delay: Duration,
        armed: &'static AtomicUsize,
        f: impl FnOnce() + Send + 'static,
    ) -> Self::Timer {
        let t = eddy::call_later(delay, f);
        armed.fetch_add(1, Ordering::Release);
        t
    }

    fn keep_timer(t: Self::Timer) {
        drop(t); // dropping a TimerHandle does not cancel it
    }

    fn cancel_timer(t: Self::Timer) {
        t.cancel();
    }
}

// ----- tokio --------------------------------------------------------------------------------

/// A tokio multi-thread runtime.
#[derive(Debug)]
pub struct Tokio {
    rt: tokio::runtime::Runtime,
}

/// [`JoinTask`] of tokio.
#[derive(Debug)]
pub struct TokioJoin<T>(tokio::task::JoinHandle<T>);

impl<T> Future for TokioJoin<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|e| panic!("tokio task failed: {e}")))
    }
}

impl<T: Send + 'static> JoinTask<T> for TokioJoin<T> {
    fn detach(self) {
        drop(self.0); // dropping a JoinHandle detaches the task
    }
    fn cancel(self) {
        self.0.abort();
    }
}

impl Runtime for Tokio {
    const NAME: &'static str = "tokio";
    type Handle = tokio::runtime::Handle;
    type Join<T: Send + 'static> = TokioJoin<T>;
    type Timer = tokio::task::JoinHandle<()>;

    fn build(workers: usize) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .expect("build tokio runtime");
        Tokio { rt }
    }

    fn handle(&self) -> Self::Handle {
        self.rt.handle().clone()
    }

    fn spawn<F>(f: F) -> TokioJoin<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        TokioJoin(tokio::spawn(f))
    }

    fn spawn_remote<F>(h: &Self::Handle, f: F) -> TokioJoin<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        TokioJoin(h.spawn(f))
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }

    fn call_soon(f: impl FnOnce() + Send + 'static) {
        drop(tokio::spawn(async move { f() }));
    }

    fn call_soon_threadsafe(h: &Self::Handle, f: impl FnOnce() + Send + 'static) {
        drop(h.spawn(async move { f() }));
    }

    fn call_later(
        delay: Duration,
        armed: &'static AtomicUsize,
        f: impl FnOnce() + Send + 'static,
    ) -> Self::Timer {
        tokio::spawn(async move {
            let sleep = tokio::time::sleep(delay);
            armed.fetch_add(1, Ordering::Release);
            sleep.await;
            f();
        })
    }

    fn keep_timer(t: Self::Timer) {
        drop(t);
    }

    fn cancel_timer(t: Self::Timer) {
        t.abort();
    }
}

// ----- smol ---------------------------------------------------------------------------------

thread_local! {
    /// The executor a smol worker thread runs (smol's "current executor").
    static SMOL_EXECUTOR: RefCell<Option<Arc<async_executor::Executor<'static>>>> =
        const { RefCell::new(None) };
}

/// smol: one `async_executor::Executor` run by worker threads that each sit in
/// `async_io::block_on(executor.run(..))`, so that idle workers drive the async-io reactor
/// (timers), as smol itself recommends for a multi-threaded executor.
pub struct Smol {
    ex: Arc<async_executor::Executor<'static>>,
    stop: Option<async_channel::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Smol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Smol")
            .field("workers", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Smol {
    fn drop(&mut self) {
        drop(self.stop.take()); // closes the channel: every `run` returns
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Runtime for Smol {
    const NAME: &'static str = "smol";
    type Handle = Arc<async_executor::Executor<'static>>;
    type Join<T: Send + 'static> = async_executor::Task<T>;
    type Timer = async_executor::Task<()>;

    fn build(workers: usize) -> Self {
        let ex = Arc::new(async_executor::Executor::new());
        let (stop, stopped) = async_channel::bounded::<()>(1);
        let threads = (0..workers)
            .map(|i| {
                let ex = ex.clone();
                let stopped = stopped.clone();
                std::thread::Builder::new()
                    .name(format!("smol-worker-{i}"))
                    .spawn(move || {
                        SMOL_EXECUTOR.with(|c| *c.borrow_mut() = Some(ex.clone()));
                        async_io::block_on(ex.run(async {
                            let _ = stopped.recv().await;
                        }));
                        SMOL_EXECUTOR.with(|c| c.borrow_mut().take());
                    })
                    .expect("spawn smol worker")
            })
            .collect();
        Smol {
            ex,
            stop: Some(stop),
            threads,
        }
    }

    fn handle(&self) -> Self::Handle {
        self.ex.clone()
    }

    fn spawn<F>(f: F) -> async_executor::Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        SMOL_EXECUTOR.with(|c| {
            c.borrow()
                .as_ref()
                .expect("Smol::spawn called outside a smol worker thread")
                .spawn(f)
        })
    }

    fn spawn_remote<F>(h: &Self::Handle, f: F) -> async_executor::Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        h.spawn(f)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }

    async fn sleep(d: Duration) {
        async_io::Timer::after(d).await;
    }

    fn call_soon(f: impl FnOnce() + Send + 'static) {
        Self::spawn(async move { f() }).detach();
    }

    fn call_soon_threadsafe(h: &Self::Handle, f: impl FnOnce() + Send + 'static) {
        h.spawn(async move { f() }).detach();
    }

    fn call_later(
        delay: Duration,
        armed: &'static AtomicUsize,
        f: impl FnOnce() + Send + 'static,
    ) -> Self::Timer {
        Self::spawn(async move {
            let timer = async_io::Timer::after(delay);
            armed.fetch_add(1, Ordering::Release);
            timer.await;
            f();
        })
    }

    fn keep_timer(t: Self::Timer) {
        t.detach();
    }

    fn cancel_timer(t: Self::Timer) {
        drop(t); // dropping a smol Task cancels it
    }
}

impl<T: Send + 'static> JoinTask<T> for async_executor::Task<T> {
    fn detach(self) {
        async_executor::Task::detach(self);
    }
    fn cancel(self) {
        drop(self);
    }
}
