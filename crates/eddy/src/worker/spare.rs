//! Spare workers: loops that stand in while every worker is stuck in a long job.
//!
//! A sibling rescues a stuck worker (`siblings`, `handoff`), but when every worker is stuck
//! at once there is no sibling left, and the runtime would serve nothing (no new connection,
//! no timer, no task) until one of the jobs returns: tokio and smol stall the same way. Go
//! never does, because it hands a P whose thread is blocked to another thread. eddy keeps a
//! few spare workers for that: full workers (their own ready queue, timer heap and poller)
//! whose threads start only when first needed, and which are never woken for ordinary work.
//! When the monitor sees every worker stuck with something waiting, it wakes a spare, which
//! rescues the stuck workers as a sibling would: it nests their epolls in its own, fires
//! their timers and steals their queues. What it runs meanwhile may register sockets and
//! timers with it; it serves them like any worker, sleeping as a worker's guest when it can,
//! so that a spare costs a parked thread once the jobs are over.
//!
//! A spare is a worker in the lists that siblings look through to steal and to rescue, but
//! no worker hands it its epoll to host (waking a spare for a worker's events would keep it
//! busy once it is no longer needed). It is not in the idle bookkeeping (`Idle` counts the
//! workers only: a spare steals whenever it is awake but is never counted as searching, and
//! is never picked to be woken), not a home for timers set from outside the workers, and not
//! in `RuntimeMetrics::workers` (see `RuntimeMetrics::spares`).

use std::io;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::hooks::ThreadHooks;
use crate::job::Job;

/// The spares of one runtime: their queues until their threads start, and the threads.
pub(crate) struct Spares {
    state: Mutex<State>,
    thread_name: String,
    hooks: ThreadHooks,
}

struct State {
    /// The owner half of each spare's ready queue, taken when its thread starts.
    queues: Vec<Option<crossbeam_deque::Worker<Job>>>,
    threads: Vec<JoinHandle<()>>,
    /// Threads started, joined or not.
    started: usize,
    /// No thread starts once the runtime shuts down (its count would be missed).
    closed: bool,
}

impl std::fmt::Debug for Spares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Spares")
            .field("count", &state.queues.len())
            .field("started", &state.started)
            .finish()
    }
}

impl Spares {
    pub(crate) fn new(
        queues: Vec<crossbeam_deque::Worker<Job>>,
        thread_name: String,
        hooks: ThreadHooks,
    ) -> Self {
        Spares {
            state: Mutex::new(State {
                queues: queues.into_iter().map(Some).collect(),
                threads: Vec::new(),
                started: 0,
                closed: false,
            }),
            thread_name,
            hooks,
        }
    }

    /// Spare threads started so far.
    pub(crate) fn started(&self) -> usize {
        self.state.lock().started
    }

    /// How many spares there are, started or not.
    pub(crate) fn count(&self) -> usize {
        self.state.lock().queues.len()
    }

    /// Starts the thread of spare `k` with `spawn` (given the thread's name, the spare's
    /// queue and the thread hooks) unless it runs already or the runtime shut down. True if
    /// it runs now.
    pub(crate) fn start(
        &self,
        k: usize,
        spawn: impl FnOnce(
            String,
            crossbeam_deque::Worker<Job>,
            ThreadHooks,
        ) -> io::Result<JoinHandle<()>>,
    ) -> bool {
        let mut state = self.state.lock();
        if state.closed {
            return false;
        }
        let Some(queue) = state.queues[k].take() else {
            return true;
        };
        let name = format!("{}-spare-{k}", self.thread_name);
        let spawned = spawn(name, queue, self.hooks.clone());
        match spawned {
            Ok(t) => {
                state.threads.push(t);
                state.started += 1;
                true
            }
            Err(e) => {
                tracing::error!("eddy: failed to start a spare worker: {e}");
                false
            }
        }
    }

    /// Shutdown: no more spares start from now on.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
    }

    /// The threads started, for shutdown to join.
    pub(crate) fn take_threads(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut self.state.lock().threads)
    }
}
