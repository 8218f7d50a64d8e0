//! The blocking pool: `spawn_blocking`, asyncio's `run_in_executor(None, f)`.
//!
//! Blocking work (file IO, name resolution, CPU-heavy calls into C) must not run on a worker:
//! it would stall that worker's loop. It runs on separate threads instead, created on demand
//! up to [`Builder::max_blocking_threads`](crate::Builder::max_blocking_threads) (default
//! 512); a thread idle for [`Builder::thread_keep_alive`](crate::Builder::thread_keep_alive)
//! (default 10 s) exits. Jobs beyond the thread limit wait in a FIFO queue.
//!
//! Each job is an ordinary task cell (so `Task<T>`, cancellation before start and panic
//! capture come for free) whose schedule function pushes it onto this pool's queue instead of
//! a worker's. At shutdown the queue is emptied (queued jobs finish as cancelled) and idle
//! threads exit; a thread inside a job finishes it first, and nobody waits for it.

pub(crate) mod pool;

use std::sync::Arc;

use crate::task::cell::Woken;
use crate::worker::shared::Shared;

/// Runs `f` on the runtime's blocking pool and returns a [`Task`](crate::Task) for its result
/// (asyncio's `loop.run_in_executor(None, f)`).
///
/// Use it for work that blocks (file IO, name resolution, long CPU-bound calls), so that the
/// workers' loops keep running. Cancelling the task before a thread picks it up means `f`
/// never runs; once it runs it cannot be interrupted.
///
/// # Panics
///
/// Panics with "no eddy runtime on this thread" outside a runtime.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// let n = rt.block_on(async {
///     eddy::spawn_blocking(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0))
///         .await
///         .unwrap()
/// });
/// assert!(n > 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn_blocking<F, T>(f: F) -> crate::Task<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let location = std::panic::Location::caller();
    let shared = crate::context::current_shared()
        .unwrap_or_else(|| panic!("no eddy runtime on this thread: spawn_blocking needs one"));
    spawn_blocking_on(&shared, f, location)
}

pub(crate) fn spawn_blocking_on<F, T>(
    shared: &Arc<Shared>,
    f: F,
    location: &'static std::panic::Location<'static>,
) -> crate::Task<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    crate::task::cell::spawn_on::<_, BlockingQueue>(shared, async move { f() }, location, None)
}

/// Where blocking tasks go when woken: the pool's queue.
struct BlockingQueue;

impl crate::task::cell::Queue for BlockingQueue {
    type Host = Arc<Shared>;

    fn schedule(task: Woken<Self>) {
        let shared = task.host().clone();
        let runnable = task.into_runnable();
        shared.blocking.push(runnable, |name| {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new().name(name).spawn(move || {
                crate::time_slice::restore_default(shared.config.time_slice);
                // Blocking jobs belong to the runtime: `eddy::spawn`, `call_soon`,
                // `eddy::time()` work inside them, as inside `block_on`.
                let _guest = crate::context::enter_guest(shared.clone());
                let pool = &shared.blocking;
                pool.hooks().wrap(&shared.handler, || {
                    pool.run_thread(|| {
                        if shared.clock.is_paused() {
                            // Every worker may already be idle, having declined to jump the
                            // clock because of this job: one of them must look again.
                            shared.workers[0].notify();
                        }
                    })
                });
            });
            spawned.map(drop)
        });
    }
}
