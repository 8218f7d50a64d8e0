//! Every path by which work enters a worker: task wakes, callbacks and timers, from a worker
//! of the runtime (its own queue, no shared read-modify-write) or from any other thread (the
//! `Injector` or the owner's inbox, then a wake).
//!
//! The wake paths (also drawn in docs/architecture.md):
//!
//! | submitter                    | goes to                        | wakes                      |
//! |------------------------------|--------------------------------|----------------------------|
//! | the job running on a worker, waking a task | that worker's next slot, if free (`next_slot`) | nobody: it runs next |
//! | a worker of this runtime     | its own ready queue (`Worker`) | one parked sibling, only if nobody searches; if that sibling is not up when the burst is about to run, the newer half goes to its `burst_share` queue |
//! | any other thread             | the `Injector`                 | one parked worker, only if nobody searches |
//! | waking a pinned task remotely| the owner's inbox              | the owner, if it is parked |
//! | a timer that became earliest | that worker's heap             | the owner, if it is parked |
//! | a worker stuck in one job    | (the monitor notices)          | one parked sibling, to serve its queue, timers and IO |

use std::future::Future;
use std::panic::Location;
use std::sync::atomic::{self, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_deque::Steal;

use crate::callback::{Callback, TimerHandle};
use crate::context;
use crate::job::Job;
use crate::task::cell;
use crate::task::cell::Queue;
use crate::task::cell::Woken;
use crate::task::handle::Task;
use crate::task::raw::Runnable;
use crate::timer::TimerAction;

use super::shared::Shared;
use super::Worker;

/// Pushes a woken stealable task to this thread's ready queue if this thread is a worker of
/// the task's runtime; otherwise gives it back.
fn push_if_worker_of(task: Woken<Stealable>) -> Option<Woken<Stealable>> {
    hand_to_this_worker(task, |_, _| true, |w, r| w.push_woken(Job::from(r)))
}

/// Pushes a woken pinned task to its owner's queue if this thread is that owner.
fn push_pinned_if_owner(task: Woken<Pinned>) -> Option<Woken<Pinned>> {
    hand_to_this_worker(
        task,
        |w, r| r.meta().owner() == Some(w.index() as u32),
        |w, r| w.push_pinned(r),
    )
}

/// Gives the woken task's runnable to `push` if this thread is a worker of its runtime and
/// `accepts` it; otherwise gives the task back.
///
/// The runnable stays outside the closure: if the thread-local is already gone (a wake from
/// another thread-local's destructor), `try_with_worker` does not run the closure, and a
/// runnable moved into it would be dropped, which drops its future on this thread.
fn hand_to_this_worker<Q: Queue<Host = Arc<Shared>>>(
    task: Woken<Q>,
    accepts: impl FnOnce(&Worker, &Runnable) -> bool,
    push: impl FnOnce(&Worker, Runnable),
) -> Option<Woken<Q>> {
    let mut task = Some(task);
    context::try_with_worker(|w| {
        if let Some(t) = &task {
            if Arc::ptr_eq(w.shared(), t.host()) && accepts(w, t.runnable()) {
                let t = task.take().expect("checked above");
                push(w, t.into_runnable());
            }
        }
    });
    task
}

/// Queues a callback cell on `shared`: locally if this thread is one of its workers.
pub(crate) fn submit_callback(shared: &Arc<Shared>, cell: Callback) {
    let cell = context::with_worker_of(shared, |w| match w {
        Some(w) => {
            w.push_local(Job::from(cell));
            None
        }
        None => Some(cell),
    });
    if let Some(cell) = cell {
        shared.push_remote(Job::from(cell));
    }
}

/// Schedules a callback cell at `when` on this worker's heap, or on a heap chosen round-robin.
pub(crate) fn submit_timer(shared: &Arc<Shared>, when: Instant, cell: Callback) -> TimerHandle {
    let target = home_worker(shared);
    let queue = shared.workers[target].timers.clone();
    shared.add_timer(target, when, TimerAction::Callback(cell.clone()));
    TimerHandle { cell, when, queue }
}

/// The worker whose timer heap and reactor this thread should use: itself if it is a worker
/// of `shared`, else one chosen round-robin.
pub(crate) fn home_worker(shared: &Arc<Shared>) -> usize {
    context::with_worker_of(shared, |w| w.map(Worker::index))
        .unwrap_or_else(|| shared.remote_home_worker())
}

impl Shared {
    // ----- submission ---------------------------------------------------------------------

    /// Schedule function of stealable tasks (called on every wake, see `task::raw::wake`).
    fn schedule_task(task: Woken<Stealable>) {
        let Some(task) = push_if_worker_of(task) else {
            return;
        };
        // Cloned first: once pushed, the task may run and be freed with its cell.
        let shared = task.host().clone();
        shared.push_remote(Job::from(task.into_runnable()));
    }

    /// Schedule function of pinned tasks: to the owner's queue if we are the owner, else to
    /// its inbox.
    fn schedule_pinned(task: Woken<Pinned>) {
        let Some(task) = push_pinned_if_owner(task) else {
            return;
        };
        let shared = task.host().clone();
        let runnable = task.into_runnable();
        let owner = runnable.meta().owner().expect("pinned task without owner");
        let slot = &shared.workers[owner as usize];
        if slot.exited.load(Ordering::SeqCst) {
            // The owner is gone. A `!Send` future must not be dropped on this thread, so the
            // task is leaked (and awaiting it never completes). Only wakes that come after
            // the owner's last drain get here.
            std::mem::forget(runnable);
            return;
        }
        slot.inbox.push(runnable);
        atomic::fence(Ordering::SeqCst);
        if slot.exited.load(Ordering::SeqCst) {
            // The owner may have finished its last drain before our push: take back what
            // is stranded (see above) rather than leave it in a cycle through `Shared`.
            loop {
                match slot.inbox.steal() {
                    Steal::Success(r) => std::mem::forget(r),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
            return;
        }
        if slot.is_parked() || shared.is_closed() {
            slot.notify();
        }
    }

    /// Pushes a job from a thread that is not a worker of this runtime, and wakes a worker.
    pub(crate) fn push_remote(&self, job: Job) {
        if self.is_closed() {
            self.handler.serving(|| job.discard());
            return;
        }
        self.injector.push(job);
        atomic::fence(Ordering::SeqCst);
        if self.is_closed() {
            self.handler.serving(|| self.drain_injector());
        } else if self.wake_idle().is_some() {
            // If the monitor sleeps, its alarm is set here, not by the worker just woken:
            // that worker then finds it set and goes straight to the job.
            self.monitor.worker_awake();
        }
    }

    /// Wakes one parked worker, counted as searching, if the idle rules say so (nobody
    /// searches). Returns which.
    #[inline]
    pub(crate) fn wake_idle(&self) -> Option<usize> {
        let index = self.idle.worker_to_wake()?;
        self.workers[index].notify();
        Some(index)
    }

    /// True if any queue a searcher could take from holds work.
    pub(crate) fn has_stealable_work(&self) -> bool {
        !self.injector.is_empty()
            || self
                .workers
                .iter()
                .any(|w| !w.stealer.is_empty() || !w.burst_share.is_empty())
    }

    // ----- timers -------------------------------------------------------------------------

    /// A worker (timer heap, reactor) for a thread that is not a worker: round robin.
    pub(crate) fn remote_home_worker(&self) -> usize {
        self.next_remote_home.fetch_add(1, Ordering::Relaxed) % self.regular
    }

    /// Puts a timer on worker `target`'s heap and wakes the owner if it sleeps (its wait must
    /// end earlier now).
    pub(crate) fn add_timer(&self, target: usize, when: Instant, action: TimerAction) {
        let slot = &self.workers[target];
        if !slot.timers.push(when, action) {
            return;
        }
        atomic::fence(Ordering::SeqCst);
        if slot.is_parked() {
            slot.notify();
        }
        // A busy owner fires it itself; if it is stuck, the monitor sends a sibling.
    }
}

/// Stealable tasks: the waking worker's ready queue, or the injector.
pub(crate) struct Stealable;

impl Queue for Stealable {
    type Host = Arc<Shared>;

    fn schedule(task: Woken<Self>) {
        Shared::schedule_task(task)
    }
}

/// Pinned tasks: their owner worker's queue or inbox.
///
/// Their runnables are only ever run or dropped on the owner: `schedule_pinned` routes
/// runnables woken elsewhere to its inbox, only the owner pops its inbox and pinned queue,
/// and when the owner is gone a runnable reaching another thread is leaked, never dropped.
pub(crate) struct Pinned;

impl Queue for Pinned {
    type Host = Arc<Shared>;

    fn schedule(task: Woken<Self>) {
        Shared::schedule_pinned(task)
    }
}

/// Spawns a `Send` task on `shared` and schedules it; it may run on any worker. `name` shows
/// in task dumps.
pub(crate) fn spawn_stealable<F>(
    shared: &Arc<Shared>,
    future: F,
    location: &'static Location<'static>,
    name: Option<String>,
) -> Task<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    cell::spawn_on::<F, Stealable>(shared, future, location, name)
}
