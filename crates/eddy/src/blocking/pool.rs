//! The pool itself: a FIFO queue of blocking jobs and the threads that run them, created on
//! demand up to a limit and retired after a keep-alive. It knows jobs only as runnables; the
//! runtime side (`blocking`) decides what a pool thread runs inside and starts it.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::hooks::ThreadHooks;
use crate::task::raw::Runnable;

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

    /// The thread hooks its threads run between.
    pub(crate) fn hooks(&self) -> &ThreadHooks {
        &self.hooks
    }

    /// Queues `runnable`, and wakes an idle thread for it or, if the pool may grow, starts
    /// one with `start` (given its name; the thread is to call [`run_thread`](Self::run_thread)).
    /// After shutdown the runnable runs at once here, and finishes as cancelled.
    pub(crate) fn push(&self, runnable: Runnable, start: impl FnOnce(String) -> io::Result<()>) {
        let mut state = self.state.lock();
        if state.shutdown {
            drop(state);
            // The cell sees the closed runtime and finishes as cancelled.
            runnable.run();
            return;
        }
        state.queue.push_back(runnable);
        if state.idle > state.notified {
            state.notified += 1;
            self.work.notify_one();
        } else if state.threads < self.max_threads {
            state.threads += 1;
            let id = state.next_id;
            state.next_id += 1;
            drop(state);
            self.live.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = start(format!("{}-blocking-{id}", self.thread_name)) {
                self.live.fetch_sub(1, Ordering::Relaxed);
                self.state.lock().threads -= 1;
                tracing::error!("eddy: failed to start a blocking thread: {e}");
            }
        }
    }

    /// A pool thread's life: runs queued jobs until it has been idle for the keep-alive or
    /// the pool shuts down. `all_idle` runs (under the pool's lock) each time every thread
    /// is idle.
    pub(crate) fn run_thread(&self, all_idle: impl Fn()) {
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
            if state.idle == state.threads {
                all_idle();
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
