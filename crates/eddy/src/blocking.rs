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

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::hooks::ThreadHooks;
use crate::task::{Runnable, Woken};
use crate::worker::shared::Shared;

/// The pool of one runtime.
pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    work: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    hooks: ThreadHooks,
    /// Live threads, readable without the lock (metrics).
    live: AtomicUsize,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Runnable>,
    threads: usize,
    idle: usize,
    /// Wake-ups handed to idle threads that they have not consumed yet.
    notified: usize,
    shutdown: bool,
    next_id: usize,
}

impl fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingPool")
            .field("max_threads", &self.max_threads)
            .field("live", &self.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        thread_name: String,
        hooks: ThreadHooks,
    ) -> Self {
        BlockingPool {
            hooks,
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            max_threads,
            keep_alive,
            thread_name,
            live: AtomicUsize::new(0),
        }
    }

    /// True when no job is queued or running (a paused clock may jump only then). A thread
    /// woken for a job counts as idle until it takes it, so the queue is read too.
    pub(crate) fn is_idle(&self) -> bool {
        let state = self.state.lock();
        state.queue.is_empty() && state.threads == state.idle
    }

    /// Threads currently alive.
    pub(crate) fn threads(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Schedule function of blocking tasks.
    fn schedule(task: Woken<BlockingQueue>) {
        let shared = task.host().clone();
        let runnable = task.into_runnable();
        let pool = &shared.blocking;
        let mut state = pool.state.lock();
        if state.shutdown {
            drop(state);
            // The cell sees the closed runtime and finishes as cancelled.
            runnable.run();
            return;
        }
        state.queue.push_back(runnable);
        if state.idle > state.notified {
            state.notified += 1;
            pool.work.notify_one();
        } else if state.threads < pool.max_threads {
            state.threads += 1;
            let id = state.next_id;
            state.next_id += 1;
            drop(state);
            pool.live.fetch_add(1, Ordering::Relaxed);
            let shared2 = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-blocking-{id}", pool.thread_name))
                .spawn(move || {
                    // Blocking jobs belong to the runtime: `eddy::spawn`, `call_soon`,
                    // `eddy::time()` work inside them, as inside `block_on`.
                    let _guest = crate::context::enter_guest(shared2.clone());
                    let pool = &shared2.blocking;
                    pool.hooks
                        .wrap(&shared2.handler, || pool.run_thread(&shared2));
                });
            if let Err(e) = spawned {
                pool.live.fetch_sub(1, Ordering::Relaxed);
                pool.state.lock().threads -= 1;
                tracing::error!("eddy: failed to start a blocking thread: {e}");
            }
        }
    }

    fn run_thread(&self, shared: &Shared) {
        let mut state = self.state.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job.run();
                state = self.state.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            if state.idle == state.threads && shared.clock.is_paused() {
                // Every worker may already be idle, having declined to jump the clock
                // because of this job: one of them must look again.
                shared.workers[0].notify();
            }
            let timed_out = self.work.wait_for(&mut state, self.keep_alive).timed_out();
            state.idle -= 1;
            if state.notified > 0 {
                state.notified -= 1;
            } else if timed_out && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
        drop(state);
        self.live.fetch_sub(1, Ordering::Relaxed);
    }

    /// Stops accepting work, cancels what is queued, and releases idle threads.
    pub(crate) fn shutdown(&self) {
        let queued: Vec<Runnable> = {
            let mut state = self.state.lock();
            state.shutdown = true;
            state.queue.drain(..).collect()
        };
        self.work.notify_all();
        for job in queued {
            job.run();
        }
    }
}

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
    crate::task::spawn_on::<_, BlockingQueue>(shared, async move { f() }, location, None)
}

/// Where blocking tasks go when woken: the pool's queue.
struct BlockingQueue;

impl crate::task::Queue for BlockingQueue {
    type Host = Arc<Shared>;

    fn schedule(task: Woken<Self>) {
        BlockingPool::schedule(task)
    }
}
